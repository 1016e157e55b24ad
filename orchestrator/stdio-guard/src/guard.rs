//! The stdio guard: a small process between the runner and a stdio target, so a target and
//! everything it starts never outlives the runner.
//!
//! ```text
//! runner ── elengtis-stdio-guard __stdio-guard (own process group, parent-death signal,
//!             │                               child subreaper)
//!             └─ elengtis-stdio-guard __stdio-exec (own process group, parent-death signal SIGKILL;
//!                  applies the light sandbox if asked) ─exec→ the target ─ its children …
//! ```
//!
//! The target inherits the runner's pipes through both stages (nothing is relayed). The
//! guard ends the target's process group and every remaining descendant (orphans are
//! reparented to the guard, a subreaper; the rest are found through
//! `/proc/PID/task/*/children`), reaps them all, then exits the way the target did (same
//! exit status, or the same signal) so the runner records the target's own exit when:
//! - the target exits (then the rest goes at once);
//! - the runner asks it to stop (SIGTERM, SIGINT, SIGHUP: SIGTERM to the target's group,
//!   `--grace-ms` to exit, then SIGKILL);
//! - the runner dies (parent-death signal SIGUSR1, also what the runner sends when it drops
//!   a session: SIGKILL at once).
//!
//! The parent-death signal follows the runner *thread* that started the guard: the runner
//! starts it from a tokio worker thread (never a blocking-pool thread, which may exit while
//! the runner lives), and worker threads live as long as the runtime.
//!
//! The guard itself is killed only by SIGKILL (or by the runner after it failed to stop in
//! time): then its exec stage and target still die (their own parent-death signal), the
//! target's children survive as orphans, and the record it wrote in the run's results
//! directory lets `run --resume` and `gc --out` reap them (see [`crate::live`]).

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal, kill, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::live::{self, Entry, LiveRecord, ProcessId};
use crate::sandbox::{self, Confinement, FAILURE_PREFIX, FAILURE_STATUS};

/// The hidden subcommand of the guard.
pub const GUARD_COMMAND: &str = "__stdio-guard";
/// The hidden subcommand of the exec stage.
pub const EXEC_COMMAND: &str = "__stdio-exec";

/// The guard's command line: `__stdio-guard --parent PID [--grace-ms MS] [--record DIR]
/// [--confine JSON] -- PROGRAM [ARG …]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardArgs {
    /// The runner's pid (checked after setting the parent-death signal).
    pub parent: i32,
    /// Milliseconds the target gets to exit after SIGTERM before SIGKILL.
    pub grace_ms: u64,
    /// Directory for the live record (the run's `stdio-live/`).
    pub record: Option<PathBuf>,
    /// The light sandbox (JSON), applied by the exec stage.
    pub confine: Option<String>,
    /// The program (absolute) and its arguments.
    pub command: Vec<OsString>,
}

/// The exec stage's command line: `__stdio-exec --parent PID [--confine JSON] -- PROGRAM
/// [ARG …]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    /// The guard's pid.
    pub parent: i32,
    /// The light sandbox (JSON).
    pub confine: Option<String>,
    /// The program (absolute) and its arguments.
    pub command: Vec<OsString>,
}

/// The default of `--grace-ms`.
pub const DEFAULT_GRACE_MS: u64 = 2000;

/// A command line read by [`options`]: the options (`--name`, value) and the command.
type Line = (Vec<(String, OsString)>, Vec<OsString>);

/// Options (`--name value`) up to `--`, then the command (at least the program).
fn options(args: &[OsString], known: &[&str]) -> Result<Line, String> {
    let mut found = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let name = arg.to_str().ok_or_else(|| format!("unexpected argument {arg:?}"))?;
        if name == "--" {
            let command: Vec<OsString> = rest.cloned().collect();
            if command.is_empty() {
                return Err("no program after `--`".into());
            }
            return Ok((found, command));
        }
        if !known.contains(&name) {
            return Err(format!("unexpected argument `{name}` (expected one of {}, then `--`)", known.join(", ")));
        }
        let value = rest.next().ok_or_else(|| format!("`{name}` needs a value"))?;
        found.push((name.to_owned(), value.clone()));
    }
    Err("no `--` before the program".into())
}

fn text(name: &str, value: &OsString) -> Result<String, String> {
    value.to_str().map(str::to_owned).ok_or_else(|| format!("`{name}` is not UTF-8"))
}

fn number<T: std::str::FromStr>(name: &str, value: &OsString) -> Result<T, String> {
    text(name, value)?.parse().map_err(|_| format!("`{name}` needs a number, not {value:?}"))
}

impl GuardArgs {
    /// Read the arguments after the subcommand.
    pub fn parse(args: &[OsString]) -> Result<GuardArgs, String> {
        let (found, command) = options(args, &["--parent", "--grace-ms", "--record", "--confine"])?;
        let mut parent = None;
        let mut out = GuardArgs { parent: 0, grace_ms: DEFAULT_GRACE_MS, record: None, confine: None, command };
        for (name, value) in &found {
            match name.as_str() {
                "--parent" => parent = Some(number(name, value)?),
                "--grace-ms" => out.grace_ms = number(name, value)?,
                "--record" => out.record = Some(PathBuf::from(value)),
                _ => out.confine = Some(text(name, value)?),
            }
        }
        out.parent = parent.ok_or("`--parent` is required")?;
        Ok(out)
    }

    /// The command line [`GuardArgs::parse`] reads.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![GUARD_COMMAND.into(), "--parent".into(), self.parent.to_string().into()];
        out.extend(["--grace-ms".into(), self.grace_ms.to_string().into()]);
        if let Some(record) = &self.record {
            out.extend(["--record".into(), record.clone().into_os_string()]);
        }
        if let Some(confine) = &self.confine {
            out.extend(["--confine".into(), confine.into()]);
        }
        out.push("--".into());
        out.extend(self.command.iter().cloned());
        out
    }
}

impl ExecArgs {
    /// Read the arguments after the subcommand.
    pub fn parse(args: &[OsString]) -> Result<ExecArgs, String> {
        let (found, command) = options(args, &["--parent", "--confine"])?;
        let mut parent = None;
        let mut confine = None;
        for (name, value) in &found {
            match name.as_str() {
                "--parent" => parent = Some(number(name, value)?),
                _ => confine = Some(text(name, value)?),
            }
        }
        Ok(ExecArgs { parent: parent.ok_or("`--parent` is required")?, confine, command })
    }

    /// The command line [`ExecArgs::parse`] reads.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![EXEC_COMMAND.into(), "--parent".into(), self.parent.to_string().into()];
        if let Some(confine) = &self.confine {
            out.extend(["--confine".into(), confine.into()]);
        }
        out.push("--".into());
        out.extend(self.command.iter().cloned());
        out
    }
}

fn say(message: &str) {
    eprintln!("elengtis stdio guard: {message}");
}

/// Run the guard; returns the exit status when it cannot exit the way the target did.
pub fn guard_main(args: &GuardArgs) -> i32 {
    match guard(args) {
        Ok(Ended::Exit(code)) => code,
        Ok(Ended::Signal(signal)) => die_by(signal),
        Ok(Ended::Unknown) => 1,
        Err(message) => {
            say(&message);
            1
        }
    }
}

enum Ended {
    Exit(i32),
    Signal(Signal),
    Unknown,
}

fn guard(args: &GuardArgs) -> Result<Ended, String> {
    let mut mask = SigSet::empty();
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGUSR1, Signal::SIGCHLD] {
        mask.add(signal);
    }
    mask.thread_block().map_err(|e| format!("failed to block signals: {e}"))?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| format!("failed to open a signalfd: {e}"))?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGUSR1)
        .map_err(|e| format!("failed to set the parent-death signal: {e}"))?;
    if nix::unistd::getppid().as_raw() != args.parent {
        // The runner died before the parent-death signal was armed.
        return Err("the runner is gone; not starting the target".into());
    }
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("failed to become a child subreaper: {e}"))?;
    // The exec stage runs from the executable the guard runs from (`elengtis-stdio-guard`
    // or `elengtis`): both know the subcommand.
    let me = std::env::current_exe().map_err(|e| format!("failed to find the guard's executable: {e}"))?;
    let line = ExecArgs {
        parent: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        confine: args.confine.clone(),
        command: args.command.clone(),
    };
    let mut stage = std::process::Command::new(me);
    stage.args(line.to_args()).process_group(0);
    let child = stage.spawn().map_err(|e| format!("failed to start the exec stage: {e}"))?;
    let target_pid = i32::try_from(child.id()).map_err(|_| "the target's pid is out of range".to_owned())?;
    let target = Pid::from_raw(target_pid);
    // The child is reaped below with waitpid, never through `child`.
    drop(child);
    // The guard's copies of the runner's stdin and stdout go: the runner must see the end of
    // the target's output when the target closes it (and the target must be the only reader
    // of its input). Stderr stays for the guard's own messages.
    match std::fs::File::options().read(true).write(true).open("/dev/null") {
        Ok(null) => {
            let _ = nix::unistd::dup2_stdin(&null);
            let _ = nix::unistd::dup2_stdout(&null);
        }
        Err(e) => say(&format!("failed to open /dev/null: {e}")),
    }

    let guard_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let mut recorded = None;
    if let (Some(dir), Some(target_id)) = (&args.record, ProcessId::of(target_pid)) {
        let program = args.command.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let entry = LiveRecord { boot: live::boot_id(), guard: ProcessId::of(guard_pid), target: target_id, program };
        match live::append(dir, &Entry::Live(entry)) {
            Ok(()) => recorded = Some((dir, target_id)),
            Err(e) => say(&format!("failed to record the target: {e}")),
        }
    }

    let mut status: Option<Ended> = None;
    let mut stop_at: Option<Instant> = None;
    loop {
        let timeout = match stop_at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(3600),
        };
        if stop_at.is_some() && timeout.is_zero() {
            break;
        }
        wait_readable(&signals, timeout);
        let mut kill_now = false;
        while let Ok(Some(info)) = signals.read_signal() {
            match Signal::try_from(i32::try_from(info.ssi_signo).unwrap_or(0)) {
                Ok(Signal::SIGUSR1) => kill_now = true,
                Ok(Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP) => {
                    if stop_at.is_some() {
                        kill_now = true;
                    } else {
                        let _ = killpg(target, Signal::SIGTERM);
                        stop_at = Some(Instant::now() + Duration::from_millis(args.grace_ms));
                    }
                }
                _ => {}
            }
        }
        reap_ready(target, &mut status);
        if status.is_some() || kill_now {
            break;
        }
    }
    kill_all(target, &mut status);
    if let Some((dir, target)) = recorded
        && let Err(e) = live::append(dir, &Entry::Done { target })
    {
        say(&format!("failed to record the end of the target: {e}"));
    }
    Ok(status.unwrap_or(Ended::Unknown))
}

fn wait_readable(signals: &SignalFd, timeout: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    let millis = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(millis));
}

fn ended(status: WaitStatus) -> Option<Ended> {
    match status {
        WaitStatus::Exited(_, code) => Some(Ended::Exit(code)),
        WaitStatus::Signaled(_, signal, _) => Some(Ended::Signal(signal)),
        _ => None,
    }
}

/// Note how the target ended when `reaped` is the target's end.
fn note_target(target: Pid, reaped: WaitStatus, status: &mut Option<Ended>) {
    if reaped.pid() == Some(target)
        && let Some(e) = ended(reaped)
    {
        *status = Some(e);
    }
}

/// Reap every child that has ended; note the target's status.
fn reap_ready(target: Pid, status: &mut Option<Ended>) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(s) => note_target(target, s, status),
        }
    }
}

/// SIGKILL the target's group and every descendant, until no child is left to reap.
fn kill_all(target: Pid, status: &mut Option<Ended>) {
    let me = std::process::id();
    loop {
        let _ = killpg(target, Signal::SIGKILL);
        for pid in descendants(me) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        match waitpid(None, None) {
            Ok(s) => note_target(target, s, status),
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Every descendant of `pid` (through `/proc/PID/task/*/children`).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("children")) else { continue };
            for child in text.split_whitespace().filter_map(|c| c.parse::<u32>().ok()) {
                if !out.contains(&child) && out.len() < 100_000 {
                    out.push(child);
                    queue.push(child);
                }
            }
        }
    }
    out
}

/// End this process by `signal` (the target's own end), with no core dump.
fn die_by(signal: Signal) -> i32 {
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let mut only = SigSet::empty();
    only.add(signal);
    let _ = nix::sys::signal::raise(signal);
    let _ = only.thread_unblock();
    // Still here: the signal is ignored or stops; fall back to the shell convention.
    128 + signal as i32
}

/// Run the exec stage: arm the parent-death signal, confine, exec the target. Returns only
/// on failure.
pub fn exec_main(args: &ExecArgs) -> i32 {
    let fail = |message: String| {
        eprintln!("{FAILURE_PREFIX}{message}");
        FAILURE_STATUS
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return fail(format!("failed to set the parent-death signal: {e}"));
    }
    if nix::unistd::getppid().as_raw() != args.parent {
        return fail("the guard is gone; not starting the target".into());
    }
    let Some((program, rest)) = args.command.split_first() else {
        return fail("no program given".into());
    };
    if let Some(confine) = &args.confine {
        let confinement: Confinement = match serde_json::from_str(confine) {
            Ok(c) => c,
            Err(e) => return fail(format!("failed to read the sandbox: {e}")),
        };
        if let Err(e) = sandbox::apply(&confinement) {
            return fail(e);
        }
    }
    let error = std::process::Command::new(program).args(rest).exec();
    fail(format!("failed to start `{}`: {error}", PathBuf::from(program).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_guard_reads_the_command_line_the_runner_writes() {
        let args = GuardArgs {
            parent: 42,
            grace_ms: 750,
            record: Some(PathBuf::from("/r/stdio-live")),
            confine: Some("{\"no_network\":true}".into()),
            command: os(&["/bin/prog", "--flag", "--", "x"]),
        };
        let line = args.to_args();
        assert_eq!(line.first().map(OsString::as_os_str), Some(std::ffi::OsStr::new(GUARD_COMMAND)));
        assert_eq!(GuardArgs::parse(&line[1..]), Ok(args));
        let defaults = GuardArgs::parse(&os(&["--parent", "7", "--", "/bin/true"])).expect("parse");
        assert_eq!((defaults.grace_ms, defaults.record, defaults.confine), (DEFAULT_GRACE_MS, None, None));
    }

    #[test]
    fn a_command_line_the_guard_cannot_read_is_refused_with_what_is_wrong() {
        let cases: [(&[&str], &str); 6] = [
            (&["--", "/bin/true"], "`--parent` is required"),
            (&["--parent", "7"], "no `--` before the program"),
            (&["--parent", "7", "--"], "no program after `--`"),
            (&["--parent", "seven", "--", "/bin/true"], "`--parent` needs a number"),
            (&["--parent"], "`--parent` needs a value"),
            (&["--pid", "7", "--", "/bin/true"], "unexpected argument `--pid`"),
        ];
        for (line, wanted) in cases {
            let error = GuardArgs::parse(&os(line)).expect_err("refused");
            assert!(error.starts_with(wanted), "{line:?}: {error}");
        }
        let error = ExecArgs::parse(&os(&["--parent", "1", "--record", "/x", "--", "/bin/true"])).expect_err("refused");
        assert!(error.contains("unexpected argument `--record`"), "{error}");
        assert!(crate::internal_main(&os(&["elengtis", "run"])).is_none());
        assert_eq!(crate::internal_main(&os(&["elengtis", GUARD_COMMAND, "--"])), Some(crate::USAGE_STATUS));
    }
}
