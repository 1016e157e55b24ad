//! The loopback relay, both sides. A streamable-HTTP server in a trial container is reached
//! through a relay container on the trial's internal network, so the trial bridge needs no
//! host address (the target then cannot reach the host): the runner starts `elengtis
//! relay-idle` in a hardened container beside the target and, for each connection its HTTP
//! client opens on a 127.0.0.1 listener, runs `elengtis relay-pipe ADDR` in it through the
//! engine's exec API; bytes flow over the exec's stdin/stdout, so nothing is published and
//! nothing else can reach the relay. [`idle`], [`probe`] and [`pipe`] are the container's
//! side (hidden commands of the binary); the rest is the runner's.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use tokio::io::AsyncWriteExt as _;

use super::api::{self as docker, CALL_DEADLINE};
use super::images;
use crate::sandbox::SandboxError;

/// Keep the relay container alive until it is stopped.
pub async fn idle() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    match term.as_mut() {
        Some(term) => {
            term.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Wait until `addr` accepts a TCP connection (exit status 0), or fail after `limit`.
pub async fn probe(addr: SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(addr)).await
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Connect to `addr` and copy stdin → socket and socket → stdout until both directions end.
pub async fn pipe(addr: SocketAddr) -> std::io::Result<()> {
    let stream = tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let (mut from_socket, mut to_socket) = stream.into_split();
    let upstream = async {
        let mut stdin = tokio::io::stdin();
        let copied = tokio::io::copy(&mut stdin, &mut to_socket).await;
        let _ = to_socket.shutdown().await;
        copied
    };
    let downstream = async {
        let mut stdout = tokio::io::stdout();
        let copied = tokio::io::copy(&mut from_socket, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    let (_, down) = tokio::join!(upstream, downstream);
    down.map(|_| ())
}

/// How the runner reaches a streamable-HTTP server in a trial container (`ELENGTIS_RELAY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayMode {
    /// Through a relay container (the default): the trial bridge keeps no host address, so
    /// the target cannot reach the host.
    Always,
    /// Directly: the trial bridge gets a host address, and the target can reach every
    /// address of the host (saves the relay container; see docs/security.md).
    Never,
    /// Directly when the runner can route to the trial networks, else through a relay.
    Auto,
}

impl RelayMode {
    /// The variable that sets the relay mode.
    pub const ENV: &'static str = "ELENGTIS_RELAY";

    /// The relay mode from `ELENGTIS_RELAY` (`always`, the default; `never`; `auto`); read at
    /// the command-line edge, never deep in a run.
    pub fn from_env() -> Result<RelayMode, String> {
        match std::env::var(Self::ENV) {
            Err(std::env::VarError::NotPresent) => Ok(RelayMode::Always),
            Ok(v) if v.is_empty() || v == "always" => Ok(RelayMode::Always),
            Ok(v) if v == "never" => Ok(RelayMode::Never),
            Ok(v) if v == "auto" => Ok(RelayMode::Auto),
            Ok(v) => Err(format!("ELENGTIS_RELAY must be `always`, `never` or `auto`, not `{v}`")),
            Err(std::env::VarError::NotUnicode(_)) => Err("ELENGTIS_RELAY is not valid UTF-8".to_owned()),
        }
    }
}

/// The relay image a target needs under `mode`, or `None` when the runner connects directly.
///
/// A streamable-HTTP target is reached through a relay unless the mode is `never`, or `auto`
/// and the runner can route to the trial networks itself. The runner can route when it does
/// not run in a container (`/.dockerenv`), or runs in one that shares the engine's network
/// namespace (the engine's default bridge `docker0` is among its interfaces). A direct route
/// needs a host address on the trial bridge, and the host answers the target on every
/// address it has; the relay needs none. The relay image must contain `/elengtis` (the
/// bundled tool image does, and is the default).
pub fn relay_image(mode: RelayMode, streamable_http: bool, relay_image: Option<&str>) -> Option<String> {
    if !streamable_http {
        return None;
    }
    let wanted = match mode {
        RelayMode::Always => true,
        RelayMode::Never => false,
        RelayMode::Auto => !runner_shares_engine_network(),
    };
    wanted.then(|| relay_image.map_or_else(images::tool_ref, str::to_owned))
}

/// Whether the runner sees the engine's bridges (so it can reach a trial network's
/// addresses directly): true outside a container, and inside one only when the engine's
/// default bridge is one of its interfaces.
fn runner_shares_engine_network() -> bool {
    !std::path::Path::new("/.dockerenv").exists() || std::path::Path::new("/sys/class/net/docker0").exists()
}

/// Run a command in a container through the exec API and wait for it to end; its exit code.
pub(super) async fn exec_to_end(
    docker: &bollard::Docker,
    container: &str,
    cmd: Vec<String>,
    limit: Duration,
) -> Result<Option<i64>, SandboxError> {
    use futures_util::StreamExt as _;
    let config = bollard::models::ExecConfig {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(cmd),
        ..Default::default()
    };
    let created =
        docker::call("create an exec in the relay", CALL_DEADLINE, docker.create_exec(container, config)).await?;
    let run = async {
        if let Ok(bollard::exec::StartExecResults::Attached { mut output, .. }) =
            docker.start_exec(&created.id, None).await
        {
            while output.next().await.is_some() {}
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .map_err(|_| SandboxError::Timeout { what: "probe the target through the relay".into(), limit })?;
    let inspected = docker::call("inspect the relay exec", CALL_DEADLINE, docker.inspect_exec(&created.id)).await?;
    Ok(inspected.exit_code)
}

/// One loopback connection piped to `target` by `relay-pipe` in the relay container.
pub(super) async fn pipe_through_relay(
    docker: bollard::Docker,
    relay: String,
    target: SocketAddr,
    socket: tokio::net::TcpStream,
) {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncReadExt as _;
    use tokio::io::AsyncWriteExt as _;
    let config = bollard::models::ExecConfig {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(false),
        cmd: Some(vec!["/elengtis".into(), "relay-pipe".into(), target.to_string()]),
        ..Default::default()
    };
    let Ok(Ok(created)) = tokio::time::timeout(CALL_DEADLINE, docker.create_exec(&relay, config)).await else { return };
    let Ok(Ok(bollard::exec::StartExecResults::Attached { mut output, mut input })) =
        tokio::time::timeout(CALL_DEADLINE, docker.start_exec(&created.id, None)).await
    else {
        return;
    };
    let (mut from_client, mut to_client) = socket.into_split();
    let upstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from_client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if input.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = input.shutdown().await;
    };
    let downstream = async {
        while let Some(Ok(frame)) = output.next().await {
            if let LogOutput::StdOut { message } = frame
                && to_client.write_all(&message).await.is_err()
            {
                break;
            }
        }
        let _ = to_client.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}
