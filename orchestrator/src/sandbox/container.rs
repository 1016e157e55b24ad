//! One trial's sandbox: a fresh internal network, a fresh hardened container from an
//! immutable image id, the engine's inspect answer checked against the contract, readiness,
//! and teardown with every step bounded in time and recorded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, EndpointSettings, NetworkCreateRequest, NetworkingConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions, InspectNetworkOptions,
    RemoveContainerOptionsBuilder, StartContainerOptions,
};
use futures_util::Stream;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWrite;

use super::docker::{self, CALL_DEADLINE, Engine, ResolvedImage};
use super::hardening::{self, Expected};
use super::{LABEL_ATTEMPT, LABEL_MANAGED, LABEL_RUN, LABEL_TRIAL, SandboxError};

/// How the runner speaks MCP with the server in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Streamable HTTP on a port inside the container.
    Http {
        /// The port.
        port: u16,
        /// The MCP path.
        path: String,
    },
    /// stdio, through the engine's attach stream.
    Stdio,
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Mode::Http { .. } => "http",
            Mode::Stdio => "stdio",
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// The image, resolved once per run.
    pub image: ResolvedImage,
    /// Non-root user id.
    pub uid: u64,
    /// Non-root group id.
    pub gid: u64,
    /// Command (image default when empty).
    pub command: Vec<String>,
    /// Environment (values never logged or written by elengtis).
    pub env: Vec<(String, String)>,
    /// Transport inside the container.
    pub mode: Mode,
    /// How long the server may take to answer.
    pub startup_timeout: Duration,
    /// Run id (label).
    pub run_id: String,
    /// Trial id (label).
    pub trial_id: String,
    /// Attempt id (label).
    pub attempt_id: String,
}

/// The attach streams of a stdio container.
pub struct AttachedStdio {
    /// Demultiplexed output frames.
    pub output: Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>,
    /// The container's stdin.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for AttachedStdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttachedStdio")
    }
}

/// Where the MCP server can be reached.
#[derive(Debug)]
pub enum Endpoint {
    /// Connect to `addr`, addressing the server as `url` (host `localhost`).
    Http {
        /// URL with host `localhost`.
        url: String,
        /// The container's address on the trial network.
        addr: SocketAddr,
    },
    /// Speak over the attach streams.
    Stdio(AttachedStdio),
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// A running trial sandbox. Call [`TrialContainer::teardown`] on every path.
#[derive(Debug)]
pub struct TrialContainer {
    docker: bollard::Docker,
    network_id: Option<String>,
    container_id: Option<String>,
    record: Map<String, Value>,
    started: Instant,
}

impl TrialContainer {
    fn stamp(&mut self, event: &str) {
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if let Value::Object(ts) = self.record.entry("timestamps").or_insert_with(|| json!({})) {
            ts.insert(event.to_owned(), json!(now()));
        }
        if let Value::Object(d) = self.record.entry("elapsed_ms").or_insert_with(|| json!({})) {
            d.insert(event.to_owned(), json!((ms * 10.0).round() / 10.0));
        }
    }

    /// Record that the MCP session answered.
    pub fn mark_ready(&mut self) {
        self.stamp("ready");
    }

    /// The container's id.
    pub fn container_id(&self) -> Option<&str> {
        self.container_id.as_deref()
    }

    /// Create the network and container, start it, check its hardening, and wait for the
    /// server's port (HTTP) or attach to its stdio. On failure everything created is
    /// removed and the lifecycle record returned with the error.
    pub async fn start(
        engine: &Engine,
        spec: &ContainerSpec,
    ) -> Result<(TrialContainer, Endpoint), (SandboxError, Value)> {
        let mut this = TrialContainer {
            docker: engine.docker.clone(),
            network_id: None,
            container_id: None,
            record: Map::new(),
            started: Instant::now(),
        };
        this.record.insert("isolation".into(), json!("isolated_container"));
        this.record.insert("mode".into(), json!(spec.mode.name()));
        this.record.insert("session".into(), json!("fresh_container"));
        this.record.insert("reset_asserted".into(), json!(true));
        this.record.insert("image".into(), serde_json::to_value(&spec.image).unwrap_or(Value::Null));
        this.record.insert("engine".into(), serde_json::to_value(&engine.facts).unwrap_or(Value::Null));
        match this.bring_up(spec).await {
            Ok(endpoint) => Ok((this, endpoint)),
            Err(e) => {
                this.record.insert("error".into(), json!({"kind": e.kind(), "detail": e.to_string()}));
                let (record, _) = this.teardown().await;
                Err((e, record))
            }
        }
    }

    async fn bring_up(&mut self, spec: &ContainerSpec) -> Result<Endpoint, SandboxError> {
        let short = |s: &str| s.chars().filter(char::is_ascii_alphanumeric).take(8).collect::<String>();
        let name = format!("elengtis-{}-{}", short(&spec.run_id), short(&spec.attempt_id));
        let labels = HashMap::from([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_RUN.to_owned(), spec.run_id.clone()),
            (LABEL_TRIAL.to_owned(), spec.trial_id.clone()),
            (LABEL_ATTEMPT.to_owned(), spec.attempt_id.clone()),
        ]);
        let request = NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            internal: Some(true),
            labels: Some(labels.clone()),
            ..NetworkCreateRequest::default()
        };
        let created =
            docker::call("create the trial network", CALL_DEADLINE, self.docker.create_network(request)).await?;
        self.network_id = Some(created.id.clone());
        self.stamp("network_created");
        let network = docker::call(
            "inspect the trial network",
            CALL_DEADLINE,
            self.docker.inspect_network(&created.id, None::<InspectNetworkOptions>),
        )
        .await?;
        let network = serde_json::to_value(&network).unwrap_or(Value::Null);
        self.record.insert(
            "network".into(),
            json!({"id": created.id, "name": name, "internal": network["Internal"], "scope": "trial"}),
        );

        let stdio = spec.mode == Mode::Stdio;
        let exposed = match &spec.mode {
            Mode::Http { port, .. } => Some(vec![format!("{port}/tcp")]),
            Mode::Stdio => None,
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.id.clone()),
            user: Some(format!("{}:{}", spec.uid, spec.gid)),
            cmd: (!spec.command.is_empty()).then(|| spec.command.clone()),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(labels),
            exposed_ports: exposed,
            attach_stdin: Some(stdio),
            attach_stdout: Some(stdio),
            attach_stderr: Some(stdio),
            open_stdin: Some(stdio),
            stdin_once: Some(stdio),
            tty: Some(false),
            network_disabled: Some(false),
            host_config: Some(hardening::host_config(&created.id)),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    created.id.clone(),
                    EndpointSettings { aliases: Some(vec!["target".into()]), ..EndpointSettings::default() },
                )])),
            }),
            ..ContainerCreateBody::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let container = docker::call(
            "create the trial container",
            CALL_DEADLINE,
            self.docker.create_container(Some(options), body),
        )
        .await?;
        self.container_id = Some(container.id.clone());
        self.record
            .insert("container".into(), json!({"id": container.id, "name": name, "warnings": container.warnings}));
        self.stamp("container_created");

        let attached = if stdio {
            let options = AttachContainerOptionsBuilder::default()
                .stdin(true)
                .stdout(true)
                .stderr(true)
                .stream(true)
                .logs(false)
                .build();
            let results = docker::call(
                "attach to the trial container",
                CALL_DEADLINE,
                self.docker.attach_container(&container.id, Some(options)),
            )
            .await?;
            Some(AttachedStdio { output: results.output, input: results.input })
        } else {
            None
        };
        docker::call(
            "start the trial container",
            CALL_DEADLINE,
            self.docker.start_container(&container.id, None::<StartContainerOptions>),
        )
        .await?;
        self.stamp("started");

        let inspect = self.inspect().await?;
        let expected = Expected {
            image_id: spec.image.id.clone(),
            user: format!("{}:{}", spec.uid, spec.gid),
            network_id: created.id.clone(),
        };
        let facts = hardening::check(&inspect, &network, &expected);
        let failed = hardening::failures(&facts);
        self.record.insert("hardening".into(), serde_json::to_value(&facts).unwrap_or(Value::Null));
        self.record.insert("hardening_asserted".into(), json!(failed.is_empty()));
        if !failed.is_empty() {
            return Err(SandboxError::Hardening(failed));
        }
        match (&spec.mode, attached) {
            (Mode::Stdio, Some(attached)) => Ok(Endpoint::Stdio(attached)),
            (Mode::Http { port, path }, _) => {
                let ip = inspect["NetworkSettings"]["Networks"]
                    .as_object()
                    .and_then(|m| m.values().find_map(|n| n["IPAddress"].as_str().filter(|s| !s.is_empty())))
                    .ok_or_else(|| {
                        SandboxError::NotReady("the container has no address on the trial network".into())
                    })?;
                let addr: SocketAddr = format!("{ip}:{port}")
                    .parse()
                    .map_err(|e| SandboxError::NotReady(format!("the container address {ip} is not usable: {e}")))?;
                self.record.insert("endpoint".into(), json!(addr.to_string()));
                self.wait_for_port(addr, spec.startup_timeout).await?;
                self.stamp("port_open");
                Ok(Endpoint::Http { url: format!("http://localhost:{port}{path}"), addr })
            }
            (Mode::Stdio, None) => Err(SandboxError::NotReady("the attach stream is missing".into())),
        }
    }

    async fn inspect(&self) -> Result<Value, SandboxError> {
        let id = self.container_id.clone().unwrap_or_default();
        let inspect = docker::call(
            "inspect the trial container",
            CALL_DEADLINE,
            self.docker.inspect_container(&id, None::<InspectContainerOptions>),
        )
        .await?;
        Ok(serde_json::to_value(&inspect).unwrap_or(Value::Null))
    }

    async fn wait_for_port(&self, addr: SocketAddr, limit: Duration) -> Result<(), SandboxError> {
        let deadline = Instant::now() + limit;
        let mut tries: u32 = 0;
        loop {
            let attempt = tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(addr)).await;
            if let Ok(Ok(_)) = attempt {
                return Ok(());
            }
            tries += 1;
            if tries.is_multiple_of(10) {
                let state = self.inspect().await?;
                if state["State"]["Running"] != true {
                    return Err(SandboxError::NotReady(format!(
                        "the container stopped before its port {} answered (exit code {}, OOM-killed {})",
                        addr.port(),
                        state["State"]["ExitCode"],
                        state["State"]["OOMKilled"]
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(SandboxError::NotReady(format!(
                    "port {} did not accept connections within {} s (startup_timeout_seconds)",
                    addr.port(),
                    limit.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Remove the container (and its anonymous volumes) and the network, each bounded in
    /// time; record the final state. Returns the lifecycle record and the errors.
    pub async fn teardown(mut self) -> (Value, Vec<String>) {
        let mut errors = Vec::new();
        if let Some(id) = self.container_id.take() {
            self.container_id = Some(id.clone());
            match self.inspect().await {
                Ok(state) => {
                    let s = &state["State"];
                    self.record.insert(
                        "state".into(),
                        json!({"status": s["Status"], "exit_code": s["ExitCode"], "oom_killed": s["OOMKilled"], "started_at": s["StartedAt"], "finished_at": s["FinishedAt"]}),
                    );
                }
                Err(e) => errors.push(e.to_string()),
            }
            self.container_id = None;
            let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
            match docker::call(
                "remove the trial container",
                CALL_DEADLINE,
                self.docker.remove_container(&id, Some(options)),
            )
            .await
            {
                Ok(()) => self.stamp("container_removed"),
                Err(e) => errors.push(e.to_string()),
            }
        }
        if let Some(id) = self.network_id.take() {
            let mut removed = false;
            for attempt in 0..3 {
                match docker::call("remove the trial network", CALL_DEADLINE, self.docker.remove_network(&id)).await {
                    Ok(()) => {
                        removed = true;
                        break;
                    }
                    Err(e) if attempt == 2 => errors.push(e.to_string()),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
            if removed {
                self.stamp("network_removed");
            }
        }
        self.record.insert("cleanup".into(), json!({"ok": errors.is_empty(), "errors": errors}));
        (Value::Object(std::mem::take(&mut self.record)), errors)
    }
}

impl Drop for TrialContainer {
    /// A sandbox dropped without teardown (a panic, an aborted future) is removed in the
    /// background; `elengtis gc` finds anything that survives even that.
    fn drop(&mut self) {
        let (container, network) = (self.container_id.take(), self.network_id.take());
        if container.is_none() && network.is_none() {
            return;
        }
        let docker = self.docker.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Some(id) = container {
                    let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
                    let _ = tokio::time::timeout(CALL_DEADLINE, docker.remove_container(&id, Some(options))).await;
                }
                if let Some(id) = network {
                    let _ = tokio::time::timeout(CALL_DEADLINE, docker.remove_network(&id)).await;
                }
            });
        }
    }
}

/// Split a container's attach stream into an MCP byte stream (its stdout), its stdin, and a
/// bounded capture of its stderr.
pub fn split_attached(
    attached: AttachedStdio,
    stderr_limit: usize,
) -> (tokio::io::DuplexStream, Pin<Box<dyn AsyncWrite + Send>>, tokio::task::JoinHandle<crate::target::Captured>) {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let (mut to_client, from_container) = tokio::io::duplex(256 * 1024);
    let mut output = attached.output;
    let stderr = tokio::spawn(async move {
        let mut kept: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        let mut stdout_open = true;
        while let Some(frame) = output.next().await {
            match frame {
                Ok(LogOutput::StdOut { message }) if stdout_open => {
                    if to_client.write_all(&message).await.is_err() {
                        stdout_open = false;
                    }
                }
                Ok(LogOutput::StdErr { message }) => {
                    total += message.len() as u64;
                    let room = stderr_limit.saturating_sub(kept.len());
                    kept.extend_from_slice(&message[..message.len().min(room)]);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        drop(to_client);
        crate::target::Captured {
            text: String::from_utf8_lossy(&kept).into_owned(),
            bytes: total,
            truncated: total > kept.len() as u64,
        }
    });
    // rmcp drops its writer when the session closes; a pump turns that into a half-close
    // of the attach connection, which (with `stdin_once`) ends the container's stdin.
    let (to_container, mut pump) = tokio::io::duplex(64 * 1024);
    let mut input = attached.input;
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut pump, &mut input).await;
        let _ = input.shutdown().await;
    });
    (from_container, Box::pin(to_container), stderr)
}
