//! Readiness of a started target: its address on the trial network, waiting for its port
//! (directly, or through the relay container), and failing at once when it stops first.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::super::relay;
use super::TrialContainer;
use crate::sandbox::SandboxError;

impl TrialContainer {
    /// Through the started relay container (`relay-idle`, id `relay`) on the trial network,
    /// wait until `target` accepts connections, then serve a listener on 127.0.0.1 whose every
    /// connection is piped to `target` by an exec of `relay-pipe` in the relay container.
    pub(super) async fn serve_relay(
        &mut self,
        relay: &str,
        target_id: &str,
        target: SocketAddr,
        limit: Duration,
    ) -> Result<SocketAddr, SandboxError> {
        let relay = relay.to_owned();
        let probe = vec![
            "/elengtis".to_owned(),
            "relay-pipe".to_owned(),
            "--probe".to_owned(),
            limit.as_secs().max(1).to_string(),
            target.to_string(),
        ];
        let code = tokio::select! {
            code = relay::exec_to_end(&self.docker, &relay, probe, limit + Duration::from_secs(5)) => code?,
            e = self.stopped_before_ready(target_id, target.port()) => return Err(e),
        };
        if code != Some(0) {
            return Err(SandboxError::NotReady(format!(
                "port {} did not accept connections within {} s (checked from the relay on the trial network)",
                target.port(),
                limit.as_secs()
            )));
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| SandboxError::NotReady(format!("failed to open the relay's loopback listener: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| SandboxError::NotReady(format!("failed to open the relay's loopback listener: {e}")))?;
        let docker = self.docker.clone();
        self.relay_task = Some(tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                // Small writes must not wait for delayed ACKs (≈40 ms each).
                let _ = socket.set_nodelay(true);
                tokio::spawn(relay::pipe_through_relay(docker.clone(), relay.clone(), target, socket));
            }
        }));
        if let Some(Value::Object(r)) = self.record.get_mut("relay") {
            r.insert("loopback".into(), json!(local.to_string()));
            r.insert("localhost_only".into(), json!(true));
        }
        Ok(local)
    }

    pub(super) async fn wait_for_port(&self, id: &str, addr: SocketAddr, limit: Duration) -> Result<(), SandboxError> {
        let deadline = Instant::now() + limit;
        let open = async {
            loop {
                let attempt =
                    tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(addr)).await;
                if let Ok(Ok(_)) = attempt {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        };
        tokio::select! {
            () = open => Ok(()),
            e = self.stopped_before_ready(id, addr.port()) => Err(e),
            () = tokio::time::sleep_until(deadline.into()) => {
                let hint = if Path::new("/.dockerenv").exists() {
                    "; the runner itself runs in a container and may have no route to the trial network — use the relay (the default) or `mcp_transport: stdio`"
                } else {
                    ""
                };
                Err(SandboxError::NotReady(format!(
                    "port {} did not accept connections within {} s (startup_timeout_seconds){hint}",
                    addr.port(),
                    limit.as_secs()
                )))
            }
        }
    }

    /// Resolves once the target container `id` no longer runs (polling the engine), with the
    /// error to report: a server that exits or is killed before its port answers fails the
    /// start-up at once instead of at `startup_timeout_seconds`.
    async fn stopped_before_ready(&self, id: &str, port: u16) -> SandboxError {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match self.inspect(id).await {
                Ok(state) if state["State"]["Running"] == true => {}
                Ok(state) => return stopped_before_port(&state["State"], port),
                Err(e) => return e,
            }
        }
    }
}

pub(super) fn container_addr(inspect: &Value, port: u16) -> Result<SocketAddr, SandboxError> {
    // A server that exits at once has no address left by the time it is inspected.
    if inspect["State"]["Running"] == false {
        return Err(stopped_before_port(&inspect["State"], port));
    }
    let ip = inspect["NetworkSettings"]["Networks"]
        .as_object()
        .and_then(|m| m.values().find_map(|n| n["IPAddress"].as_str().filter(|s| !s.is_empty())))
        .ok_or_else(|| SandboxError::NotReady("the container has no address on the trial network".into()))?;
    format!("{ip}:{port}")
        .parse()
        .map_err(|e| SandboxError::NotReady(format!("the container address {ip} is not usable: {e}")))
}

/// The start-up error of a container found stopped (`state`: the `State` of an inspect).
pub(super) fn stopped_before_port(state: &Value, port: u16) -> SandboxError {
    SandboxError::NotReady(format!(
        "the container stopped before its port {port} answered (exit code {}, OOM-killed {})",
        state["ExitCode"], state["OOMKilled"]
    ))
}
