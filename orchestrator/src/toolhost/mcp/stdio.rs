//! stdio targets: a fresh child per trial, run directly (never through a shell) in its own
//! process group with a minimal environment; its stderr kept (bounded); on every path the
//! whole group killed and the child reaped.

use std::path::{Path, PathBuf};
use std::process::Stdio;

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

/// Start a fresh child and initialize an MCP session over its stdio.
pub async fn open_stdio(launch: &StdioLaunch, limits: Limits) -> Result<Session, OpenFailure> {
    let fail = |error| OpenFailure { error, closed: CloseReport::default() };
    let program = resolve_program(&launch.command).map_err(fail)?;
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&launch.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
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
    initialize(session, reader, stdin).await
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
