//! stdio targets: a fresh child per trial, run directly (never through a shell) under a
//! guard process ([`elengtis_stdio_guard::guard`]) with a minimal environment, optionally
//! confined by the light sandbox ([`elengtis_stdio_guard::sandbox`]); its stderr kept
//! (bounded); on every path the guard kills the whole process tree and is reaped. Live
//! targets are recorded in the run's results directory ([`elengtis_stdio_guard::live`]) so
//! a leftover of a killed guard can be reaped later.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use elengtis_core::format::campaign::{StdioNetwork, StdioSandbox};
use elengtis_stdio_guard::GuardArgs;
use elengtis_stdio_guard::sandbox::{self, Confinement};
use serde_json::Value;

use super::frame::FrameGuard;
use super::{CloseReport, Limits, OpenFailure, Session, StdioLaunch, TargetError, initialize};
use crate::capture::capture;

/// Variables a stdio child inherits (the MCP SDKs' minimal default environment).
const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Find the program for a stdio target.
pub fn resolve_program(command: &str) -> Result<PathBuf, TargetError> {
    if command.contains('/') {
        return Ok(PathBuf::from(command));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if command.starts_with("elengtis-")
        && let Some(dir) = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    for dir in &dirs {
        let candidate = dir.join(command);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(TargetError::NotFound {
        program: command.to_owned(),
        searched: if command.starts_with("elengtis-") {
            "the elengtis executable's directory and PATH".into()
        } else {
            "PATH".into()
        },
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Resolve a campaign's stdio sandbox for the exec stage: relative paths against `base` (the
/// campaign's directory), `scratch` the trial's fresh directory.
pub fn confinement(sandbox: &StdioSandbox, base: &Path, scratch: PathBuf) -> Confinement {
    Confinement {
        no_network: sandbox.network == StdioNetwork::None,
        writable: sandbox
            .writable
            .iter()
            .map(|p| {
                let path = base.join(p);
                std::path::absolute(&path).unwrap_or(path)
            })
            .collect(),
        scratch,
        memory_mb: sandbox.memory_mb,
        max_open_files: sandbox.max_open_files,
        cpu_seconds: sandbox.cpu_seconds,
        max_file_mb: sandbox.max_file_mb,
    }
}

/// The executable that runs the guard (with the subcommand
/// [`elengtis_stdio_guard::GUARD_COMMAND`]): the small `elengtis-stdio-guard` beside this
/// executable (or in its parent directory: test binaries live in `target/debug/deps`), else
/// `elengtis` itself — this executable when it is `elengtis`, else one beside it or in its
/// parent directory. Both run the same code; the small one starts in a fraction of the time
/// (docs/performance.md, "stdio trials at scale"). Looked up once per process: a stdio
/// trial starts a guard, and what lies beside this executable does not change during a run.
pub fn guard_executable() -> Result<PathBuf, TargetError> {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(found) = FOUND.get() {
        return Ok(found.clone());
    }
    let found = find_guard_executable()?;
    Ok(FOUND.get_or_init(|| found).clone())
}

fn find_guard_executable() -> Result<PathBuf, TargetError> {
    let exe = std::env::current_exe().map_err(|source| TargetError::Spawn { program: "elengtis".into(), source })?;
    let dir = exe.parent();
    let dirs: Vec<&Path> = [dir, dir.and_then(Path::parent)].into_iter().flatten().collect();
    if let Some(small) = dirs.iter().map(|d| d.join(elengtis_stdio_guard::EXECUTABLE)).find(|c| is_executable(c)) {
        return Ok(small);
    }
    if exe.file_name().and_then(|n| n.to_str()) == Some("elengtis") {
        return Ok(exe);
    }
    let candidates: Vec<PathBuf> = dirs.iter().map(|d| d.join("elengtis")).collect();
    candidates.iter().find(|c| is_executable(c)).cloned().ok_or_else(|| TargetError::NotFound {
        program: "elengtis-stdio-guard or elengtis (the stdio guard)".into(),
        searched: candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(" and "),
    })
}

/// Start a fresh child under its guard and initialize an MCP session over its stdio.
pub async fn open_stdio(launch: &StdioLaunch, limits: Limits) -> Result<Session, OpenFailure> {
    let fail = |error| OpenFailure { error, closed: CloseReport::default() };
    let program = resolve_program(&launch.command).map_err(fail)?;
    let program = std::path::absolute(&program).unwrap_or(program);
    let guard = guard_executable().map_err(fail)?;
    let mut command = tokio::process::Command::new(&guard);
    let confine = match &launch.sandbox {
        None => None,
        Some(confinement) => {
            command.current_dir(&confinement.scratch);
            Some(
                serde_json::to_string(confinement)
                    .map_err(|e| fail(TargetError::Sandbox { target: launch.target.clone(), detail: e.to_string() }))?,
            )
        }
    };
    let line = GuardArgs {
        parent: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        grace_ms: u64::try_from(limits.shutdown.as_millis()).unwrap_or(u64::MAX),
        record: launch.record.clone(),
        confine,
        command: std::iter::once(program.clone().into_os_string()).chain(launch.args.iter().map(Into::into)).collect(),
    };
    command
        .args(line.to_args())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // Never SIGKILL the guard on drop: it could not take the target's tree with it.
        // `Session`'s drop asks it to (SIGUSR1); a dropped child is still reaped by tokio.
        .kill_on_drop(false);
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    if let Some(confinement) = &launch.sandbox {
        command.env("HOME", &confinement.scratch).env("TMPDIR", &confinement.scratch);
    }
    command.envs(launch.env.iter().map(|(k, v)| (k, v)));
    let mut child = command
        .spawn()
        .map_err(|source| fail(TargetError::Spawn { program: program.display().to_string(), source }))?;
    let stderr = child.stderr.take().map(|s| capture(s, limits.stderr_bytes));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        let mut session = Session {
            client: None,
            child: Some(child),
            stderr,
            limits,
            server: Value::Null,
            frames: None,
            broken: Default::default(),
        };
        let closed = session.teardown().await;
        return Err(OpenFailure {
            error: TargetError::Init("the child's stdio pipes were not available".into()),
            closed,
        });
    };
    let reader = FrameGuard::new(stdout, &limits);
    let frames = reader.log.clone();
    let session = Session {
        client: None,
        child: Some(child),
        stderr,
        limits,
        server: Value::Null,
        frames: Some(frames),
        broken: Default::default(),
    };
    initialize(session, reader, stdin).await.map_err(|mut failure| {
        // The exec stage could not confine or start the target: its own words, not "closed".
        let line = failure
            .closed
            .stderr
            .as_ref()
            .and_then(|c| c.text.lines().find_map(|l| l.strip_prefix(sandbox::FAILURE_PREFIX)).map(str::to_owned));
        if let Some(detail) = line {
            failure.error = if detail.starts_with("failed to start `") {
                TargetError::Init(detail)
            } else {
                TargetError::Sandbox { target: launch.target.clone(), detail }
            };
        }
        failure
    })
}

pub(super) fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

pub(super) fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => match nix::sys::signal::Signal::try_from(sig) {
            Ok(s) => format!("killed by {}", s.as_str()),
            Err(_) => format!("killed by signal {sig}"),
        },
        _ => "unknown".into(),
    }
}
