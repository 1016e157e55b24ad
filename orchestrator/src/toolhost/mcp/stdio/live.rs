//! Records of live stdio targets: one small JSON file per guard in the run's results
//! directory (`stdio-live/`), written by the guard once the target runs and removed when the
//! guard has killed and reaped everything. A record left behind means the guard itself was
//! killed (SIGKILL, OOM) before it could clean up; `run --resume` and `gc --out DIR` reap it.
//!
//! Pid reuse: a recorded process is signalled only if it still has the recorded start time
//! (`/proc/PID/stat` field 22) on the same boot.

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::sandbox::docker::gc::{process_start, read_trimmed};

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

/// Where the guard `guard_pid` writes its record.
pub fn record_path(dir: &Path, guard_pid: i32) -> PathBuf {
    dir.join(format!("guard-{guard_pid}.json"))
}

/// Write a record (a temporary file beside it, then renamed into place, so a reader sees the
/// whole record or none) without syncing it to disk. A record only matters while this boot
/// lasts — one from an earlier boot is ignored ([`reap_dir`]): it must survive the death of
/// the guard or the runner, which the page cache ensures, not a power loss, after which
/// there is nothing left to reap. (Syncing it cost two fsyncs per stdio trial.)
pub fn write_record(path: &Path, record: &LiveRecord) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
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
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            // A torn temp file of a record: nothing was recorded yet.
            if path.extension().and_then(|e| e.to_str()) == Some("tmp") {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        let name = path.display().to_string();
        let detail = match std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<LiveRecord>(&b).ok()) {
            None => "unreadable record removed".to_owned(),
            Some(record) if record.boot != boot => "recorded before this host last booted: nothing to kill".to_owned(),
            Some(record) => reap(&record),
        };
        let _ = std::fs::remove_file(&path);
        out.push(Reaped { record: name, detail });
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
    use super::*;
    fn write_json_atomic(path: &Path, record: &LiveRecord) -> std::io::Result<()> {
        write_record(path, record)
    }

    #[test]
    fn a_record_of_a_live_group_is_reaped_and_a_reused_pid_is_spared() {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = dir.path().join(LIVE_DIR);
        std::fs::create_dir_all(&live).expect("mkdir");
        let mut child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let me = ProcessId::of(i32::try_from(std::process::id()).expect("pid")).expect("self");
        // A record whose start time does not match (a reused pid): this process is spared.
        let stale = LiveRecord {
            boot: boot_id(),
            guard: Some(ProcessId { pid: me.pid, start: me.start + 1 }),
            target: ProcessId { pid: me.pid, start: me.start + 1 },
            program: "reused".into(),
        };
        write_json_atomic(&record_path(&live, 1), &stale).expect("write");
        let record = LiveRecord {
            boot: boot_id(),
            guard: None,
            target: ProcessId::of(pid).expect("child"),
            program: "sleep".into(),
        };
        write_json_atomic(&record_path(&live, 2), &record).expect("write");
        let reaped = reap_dir(dir.path());
        assert_eq!(reaped.len(), 2, "{reaped:?}");
        let status = child.wait().expect("wait");
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9));
        assert!(std::fs::read_dir(&live).expect("dir").next().is_none());
    }

    use std::os::unix::process::CommandExt as _;
}
