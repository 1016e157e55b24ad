//! Readiness of a started target: its address on the trial network, waiting for its port
//! (directly, or through the relay container's stream), and failing at once when it stops
//! first.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::super::attach::split_attached;
use super::super::relay::client;
use super::super::relay::frame::{Direction, FrameReader};
use super::{Created, TrialContainer};
use crate::sandbox::SandboxError;

impl TrialContainer {
    /// Start the relay container (created in the target's network namespace) once the
    /// target runs; the engine's inspect answer. A target that already stopped fails the
    /// start-up as one that stopped before its port answered.
    pub(super) async fn start_relay(&self, relay: &Created, target_id: &str, port: u16) -> Result<Value, SandboxError> {
        match self.start_created(relay).await {
            Ok(inspect) => Ok(inspect),
            Err(e) => match self.inspect(target_id).await {
                Ok(state) if state["State"]["Running"] != true => Err(stopped_before_port(&state["State"], port)),
                _ => Err(e),
            },
        }
    }

    /// Over the started relay container's attach stream (`relay-mux`), wait until it reports
    /// the target accepting connections on `port`, then serve a listener on 127.0.0.1 whose
    /// every connection is carried to the target over that one stream.
    pub(super) async fn serve_relay(
        &mut self,
        relay: &Created,
        target_id: &str,
        port: u16,
        limit: Duration,
    ) -> Result<SocketAddr, SandboxError> {
        let attached = relay
            .take_attached()
            .ok_or_else(|| SandboxError::NotReady("the relay's attach stream is missing".into()))?;
        let (output, input, stderr) = split_attached(attached, 16 * 1024);
        let mut reader = FrameReader::new(output, Direction::ToRunner);
        tokio::select! {
            ready = client::wait_ready(&mut reader) => if let Err(e) = ready {
                // A relay that ended at once (a relay image without `relay-mux`, say) said
                // why on its stderr.
                let said = match tokio::time::timeout(Duration::from_secs(1), stderr).await {
                    Ok(Ok(captured)) if !captured.text.trim().is_empty() => {
                        format!("; the relay's stderr: {}", captured.text.trim())
                    }
                    _ => String::new(),
                };
                return Err(SandboxError::NotReady(format!("{e}{said}")));
            },
            e = self.stopped_before_ready(target_id, port) => return Err(e),
            () = tokio::time::sleep(limit + Duration::from_secs(5)) => {
                return Err(SandboxError::Timeout { what: "wait for the relay to report the target ready".into(), limit });
            }
        }
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| SandboxError::NotReady(format!("failed to open the relay's loopback listener: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| SandboxError::NotReady(format!("failed to open the relay's loopback listener: {e}")))?;
        let stats = Arc::new(Mutex::new(client::StreamStats::default()));
        self.relay_task = Some(tokio::spawn(client::serve(listener, reader, input, Arc::clone(&stats))));
        self.relay_stats = Some(stats);
        if let Some(Value::Object(r)) = self.record.get_mut("relay") {
            r.insert("loopback".into(), json!(local.to_string()));
            r.insert("localhost_only".into(), json!(true));
            r.insert("upstream".into(), json!(format!("127.0.0.1:{port}")));
            r.insert("network".into(), json!("the target's network namespace"));
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
