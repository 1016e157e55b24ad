//! Records of live stdio targets, in the run's results directory (`stdio-live/`): each
//! guard appends a line to [`LOG`] once its target runs ([`Entry::Live`]) and another when it
//! has killed and reaped everything ([`Entry::Done`]). A target with no `done` line means its
//! guard was killed (SIGKILL, OOM) before it could clean up; `run --resume` and `gc --out DIR`
//! reap it ([`reap_dir`]). A run removes the log at its end when every target in it is done
//! ([`remove_if_done`]).
//!
//! One log, appended to, not a file per guard: on an ext4 file system without a journal (this
//! project's machines) every inode freed in the last minutes is scanned past by each later
//! inode allocation on the file system, so a file created and removed per trial made every
//! evidence document of a large run slower to create (docs/performance.md, "stdio trials at
//! scale"). Each line is one `write` to a file opened with `O_APPEND`: concurrent guards'
//! lines never interleave; a guard killed in the middle of its line leaves a torn line,
//! which the readers skip (its target had not been told anything yet). Records of earlier
//! versions (`guard-<pid>.json`, one per guard) are still reaped.
//!
//! Pid reuse: a recorded process is signalled only if it still has the recorded start time
//! (`/proc/PID/stat` field 22) on the same boot.

use std::path::Path;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The directory of records inside a results directory.
pub const LIVE_DIR: &str = "stdio-live";

/// One process as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessId {
    /// Process id.
    pub pid: i32,
    /// Start time (clock ticks after boot).
    pub start: u64,
}

impl ProcessId {
    /// The process `pid` as it is now, if it exists.
    pub fn of(pid: i32) -> Option<ProcessId> {
        let start = process_start(u32::try_from(pid).ok()?)?;
        Some(ProcessId { pid, start })
    }

    /// Whether this very process (not a reuse of its pid) still exists.
    pub fn alive(&self) -> bool {
        u32::try_from(self.pid).ok().and_then(process_start) == Some(self.start)
    }
}

/// A live stdio target and its guard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveRecord {
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    pub boot: String,
    /// The guard process (its own process group).
    pub guard: Option<ProcessId>,
    /// The target: the leader of its own process group (pgid = pid).
    pub target: ProcessId,
    /// The program, for messages.
    pub program: String,
}

/// The log of live targets inside `stdio-live/`.
pub const LOG: &str = "guards.jsonl";

/// A line of [`LOG`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Entry {
    /// A target runs under its guard.
    Live(LiveRecord),
    /// Everything the guard of this target started is gone.
    Done {
        /// The target, as in its `live` line.
        target: ProcessId,
    },
}

/// Append `entry` to the log in `dir` (created if missing) as one line, without syncing it
/// to disk. A record only matters while this boot lasts — one from an earlier boot is ignored
/// ([`reap_dir`]): it must survive the death of the guard or the runner, which the page cache
/// ensures, not a power loss, after which there is nothing left to reap. (Syncing cost two
/// fsyncs per stdio trial.)
pub fn append(dir: &Path, entry: &Entry) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // Never through a symbolic link: the log is a results file (docs/results.md).
    let mut file = std::os::unix::fs::OpenOptionsExt::custom_flags(
        std::fs::OpenOptions::new().append(true).create(true),
        nix::fcntl::OFlag::O_NOFOLLOW.bits(),
    )
    .open(dir.join(LOG))?;
    // One write call: O_APPEND places it whole at the end.
    let written = file.write(&line)?;
    if written == line.len() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("wrote {written} of {} bytes", line.len())))
    }
}

/// The most of [`LOG`] a reader reads (two short lines per stdio trial: far above a run's).
pub const MAX_LOG_BYTES: u64 = 256 << 20;
/// The longest line of [`LOG`] a reader reads; a longer one is skipped like a torn one.
pub const MAX_LINE_BYTES: u64 = 64 << 10;

/// The targets of the log in `dir` that have no `done` line, in the order they started.
/// Torn or unreadable lines are skipped. Read as a stream in constant memory: a line at a
/// time, at most [`MAX_LINE_BYTES`] each and [`MAX_LOG_BYTES`] in all.
pub fn outstanding(dir: &Path) -> Vec<LiveRecord> {
    use std::io::{BufRead as _, Read as _};
    let Ok(file) = std::fs::File::open(dir.join(LOG)) else {
        return Vec::new();
    };
    let mut reader = std::io::BufReader::new(file.take(MAX_LOG_BYTES));
    let mut live: Vec<LiveRecord> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') && line.len() as u64 > MAX_LINE_BYTES {
            // Skip the rest of an overlong line, unread.
            if reader.skip_until(b'\n').is_err() {
                break;
            }
            continue;
        }
        match serde_json::from_slice::<Entry>(line.trim_ascii_end()) {
            Ok(Entry::Live(record)) => live.push(record),
            Ok(Entry::Done { target }) => live.retain(|r| r.target != target),
            Err(_) => {}
        }
    }
    live
}

/// At the end of a run: remove the log in `results/stdio-live/` (and the directory, if
/// nothing else is in it) when every target in it is done. A guard still cleaning up after a
/// cancelled trial keeps it for the next resume or `gc --out`.
pub fn remove_if_done(results: &Path) {
    let dir = results.join(LIVE_DIR);
    // No log (a run without stdio targets) reads as nothing outstanding; the removals then
    // fail harmlessly.
    if outstanding(&dir).is_empty() {
        let _ = std::fs::remove_file(dir.join(LOG));
    }
    let _ = std::fs::remove_dir(&dir);
}

/// The start time of process `pid` (clock ticks after boot: field 22 of `/proc/PID/stat`),
/// which with the pid names one process across pid reuse.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// A small text file's content without surrounding whitespace (empty when unreadable).
pub fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// The boot id of this host.
pub fn boot_id() -> String {
    read_trimmed("/proc/sys/kernel/random/boot_id")
}

/// What reaping one record did.
#[derive(Debug, Clone, Serialize)]
pub struct Reaped {
    /// The record file.
    pub record: String,
    /// What was found and done.
    pub detail: String,
}

/// Kill whatever the records under `results/stdio-live/` still describe and remove the
/// records. Only for a run whose runner is gone (the caller holds the run's lock).
pub fn reap_dir(results: &Path) -> Vec<Reaped> {
    let dir = results.join(LIVE_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let boot = boot_id();
    let judge = |record: Option<LiveRecord>| match record {
        None => "unreadable record removed".to_owned(),
        Some(record) if record.boot != boot => "recorded before this host last booted: nothing to kill".to_owned(),
        Some(record) => reap(&record),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.display().to_string();
        if entry.file_name() == LOG {
            for record in outstanding(&dir) {
                out.push(Reaped { record: format!("{name} (pid {})", record.target.pid), detail: judge(Some(record)) });
            }
            let _ = std::fs::remove_file(&path);
            continue;
        }
        // Earlier versions: a file per guard (and its temporary file, torn: nothing recorded).
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => {
                let record = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<LiveRecord>(&b).ok());
                out.push(Reaped { record: name, detail: judge(record) });
                let _ = std::fs::remove_file(&path);
            }
            Some("tmp") => {
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
    out
}

/// Kill a recorded guard and target group (each only if it is still the recorded process).
pub fn reap(record: &LiveRecord) -> String {
    let mut done = Vec::new();
    if let Some(guard) = record.guard
        && guard.alive()
    {
        let _ = kill(Pid::from_raw(guard.pid), Signal::SIGKILL);
        done.push(format!("killed guard pid {}", guard.pid));
    }
    let target = record.target;
    if target.alive() {
        let _ = killpg(Pid::from_raw(target.pid), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(target.pid), Signal::SIGKILL);
        done.push(format!("killed target `{}` (process group {})", record.program, target.pid));
    } else if group_has_members(target.pid) {
        // The leader is gone but its group lives on (children it forked).
        let _ = killpg(Pid::from_raw(target.pid), Signal::SIGKILL);
        done.push(format!("killed the rest of target `{}`'s process group {}", record.program, target.pid));
    }
    if done.is_empty() { format!("target `{}` already gone", record.program) } else { done.join("; ") }
}

/// Whether any process of this boot is in process group `pgid` (field 5 of `/proc/PID/stat`).
fn group_has_members(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(e.path().join("stat")).ok().is_some_and(|stat| {
                stat.rfind(')').and_then(|i| stat.get(i + 1..)).and_then(|rest| rest.split_whitespace().nth(2))
                    == Some(pgid.to_string().as_str())
            })
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt as _;

    use super::*;

    fn sleeper() -> (std::process::Child, ProcessId) {
        let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        let id = ProcessId::of(i32::try_from(child.id()).expect("pid")).expect("the child runs");
        (child, id)
    }

    /// A results directory with an empty `stdio-live/`: (the directory, `stdio-live/`).
    fn results() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = dir.path().join(LIVE_DIR);
        std::fs::create_dir_all(&live).expect("mkdir");
        (dir, live)
    }

    fn killed(child: &mut std::process::Child) -> bool {
        use std::os::unix::process::ExitStatusExt as _;
        child.wait().expect("wait").signal() == Some(9)
    }

    #[test]
    fn a_live_target_without_its_done_line_is_reaped_and_a_reused_pid_is_spared() {
        let (dir, live) = results();
        let (mut left, left_id) = sleeper();
        let (mut done, done_id) = sleeper();
        let me = ProcessId::of(i32::try_from(std::process::id()).expect("pid")).expect("self");
        let record = |target: ProcessId, program: &str| LiveRecord {
            boot: boot_id(),
            guard: None,
            target,
            program: program.into(),
        };
        // A record whose start time does not match (a reused pid): this process is spared.
        append(&live, &Entry::Live(record(ProcessId { pid: me.pid, start: me.start + 1 }, "reused"))).expect("append");
        append(&live, &Entry::Live(record(left_id, "left"))).expect("append");
        append(&live, &Entry::Live(record(done_id, "done"))).expect("append");
        append(&live, &Entry::Done { target: done_id }).expect("append");
        // A torn line (a guard killed while writing): skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(live.join(LOG))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"live\":{\"boot"))
            .expect("torn line");
        assert_eq!(outstanding(&live).iter().map(|r| r.program.as_str()).collect::<Vec<_>>(), ["reused", "left"]);

        let reaped = reap_dir(dir.path());
        assert_eq!(reaped.len(), 2, "{reaped:?}");
        assert!(reaped[0].detail.contains("already gone"), "{reaped:?}");
        assert!(killed(&mut left), "the target without a done line is killed");
        let _ = done.kill();
        let _ = done.wait();
        assert!(!live.join(LOG).exists(), "the log is removed once reaped");
    }

    #[test]
    fn a_record_of_an_earlier_version_is_still_reaped() {
        let (dir, live) = results();
        let (mut child, id) = sleeper();
        let record = LiveRecord { boot: boot_id(), guard: None, target: id, program: "sleep".into() };
        std::fs::write(live.join("guard-2.json"), serde_json::to_vec(&record).expect("json")).expect("write");
        std::fs::write(live.join("guard-3.json.tmp"), b"{").expect("write");
        let reaped = reap_dir(dir.path());
        assert_eq!(reaped.len(), 1, "{reaped:?}");
        assert!(killed(&mut child));
        assert!(std::fs::read_dir(&live).expect("dir").next().is_none());
    }

    #[test]
    fn the_log_is_read_as_a_stream_and_an_overlong_line_is_skipped() {
        let (_dir, live) = results();
        let target = ProcessId { pid: 1, start: 1 };
        let record = LiveRecord { boot: boot_id(), guard: None, target, program: "after".into() };
        // A sparse line of zeros far longer than a line may be, then a record.
        let mut file = std::fs::File::create(live.join(LOG)).expect("create");
        file.set_len(3 * MAX_LINE_BYTES).expect("sparse");
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).expect("seek");
        std::io::Write::write_all(&mut file, b"\n").expect("end the line");
        drop(file);
        append(&live, &Entry::Live(record)).expect("append");
        assert_eq!(outstanding(&live).iter().map(|r| r.program.as_str()).collect::<Vec<_>>(), ["after"]);
    }

    #[test]
    fn the_log_is_never_appended_through_a_symbolic_link() {
        let (dir, live) = results();
        let outside = dir.path().join("outside.jsonl");
        std::fs::write(&outside, b"").expect("write");
        std::os::unix::fs::symlink(&outside, live.join(LOG)).expect("link");
        let target = ProcessId { pid: 1, start: 1 };
        assert!(append(&live, &Entry::Done { target }).is_err());
        assert_eq!(std::fs::read(&outside).expect("read"), b"", "nothing written through the link");
    }

    #[test]
    fn a_run_removes_its_log_only_when_every_target_is_done() {
        let (dir, live) = results();
        let target = ProcessId { pid: 1, start: 1 };
        let record = LiveRecord { boot: boot_id(), guard: None, target, program: "p".into() };
        append(&live, &Entry::Live(record)).expect("append");
        remove_if_done(dir.path());
        assert!(live.join(LOG).exists(), "a target is still live");
        append(&live, &Entry::Done { target }).expect("append");
        remove_if_done(dir.path());
        assert!(!live.exists(), "all done: the log and its directory are gone");
    }
}
