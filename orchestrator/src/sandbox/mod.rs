//! The sandbox layer: where an `isolated_container` target runs, behind two small
//! interfaces — [`SandboxBackend`] (what a run needs from a container platform) and
//! [`TrialSandbox`] (one trial's isolated place: its network, the target, the canary sink and
//! the relay) — so that the trial never sees a platform type.
//!
//! [`docker`] implements them through the Docker Engine API (`bollard`; never the `docker`
//! CLI): a fresh hardened container per trial on its own internal network, every hardening
//! fact checked against the engine's inspect answer and recorded. It is the only code that
//! talks to Docker. [`fake`] implements them with local processes for tests of the trial
//! machinery (behind the `testing` feature; it isolates nothing and says so in its records).
//! A Kubernetes backend would be a third folder here; `docs/scale-out.md` maps the interface
//! onto one.

pub mod docker;
#[cfg(any(test, feature = "testing"))]
pub mod fake;

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
pub use elengtis_verifiers::SnapshotFiles;
pub use elengtis_verifiers::file::Fetched;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::capture::Captured;

/// Why a sandbox operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// No engine could be reached.
    #[error(
        "failed to connect to the Docker engine ({endpoint}): {detail}; is the daemon running and is the socket mounted and readable?"
    )]
    Connect {
        /// Where we looked.
        endpoint: String,
        /// The cause.
        detail: String,
    },
    /// The engine's socket exists but this process may not open it.
    #[error("failed to connect to the Docker engine: permission denied on the socket {path}: {detail}")]
    SocketDenied {
        /// The socket.
        path: String,
        /// Who we are, who owns the socket, and what to do.
        detail: String,
    },
    /// A call did not answer in time.
    #[error("failed to {what}: the Docker engine did not answer within {} s", .limit.as_secs_f32())]
    Timeout {
        /// The call.
        what: String,
        /// The deadline.
        limit: std::time::Duration,
    },
    /// A call failed.
    #[error("failed to {what}: {detail}")]
    Docker {
        /// The call.
        what: String,
        /// The engine's answer.
        detail: String,
    },
    /// An image is not present (elengtis never pulls).
    #[error(
        "failed to find image `{image}` in the local Docker engine; elengtis never pulls images. Build it (`elengtis images build` for the bundled images) or load it (`docker load`) first"
    )]
    ImageMissing {
        /// The reference.
        image: String,
    },
    /// The container is not what was asked for.
    #[error("failed to assert the container's hardening: {}", .0.join("; "))]
    Hardening(Vec<String>),
    /// The server did not become ready.
    #[error("failed to reach the target: {0}")]
    NotReady(String),
    /// The sandbox cannot be used as configured.
    #[error("failed to use the sandbox: {0}")]
    Unusable(String),
    /// The engine or runtime has known container-escape or egress bugs (see [`docker::engine_gate`]).
    #[error("failed to pass the engine gate: {0}")]
    VulnerableEngine(String),
}

impl SandboxError {
    /// A short classification for evidence.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::Connect { .. } | SandboxError::SocketDenied { .. } => "engine_unreachable",
            SandboxError::Timeout { .. } => "timeout",
            SandboxError::Docker { .. } => "engine",
            SandboxError::ImageMissing { .. } => "image_missing",
            SandboxError::Hardening(_) => "hardening_mismatch",
            SandboxError::NotReady(_) => "not_ready",
            SandboxError::VulnerableEngine(_) => "vulnerable_engine",
            SandboxError::Unusable(_) => "unusable",
        }
    }
}

/// How the runner speaks MCP with the target in its sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpMode {
    /// Streamable HTTP on a port inside the sandbox.
    Http {
        /// The port.
        port: u16,
        /// The MCP path.
        path: String,
    },
    /// stdio, through the platform's attach stream.
    Stdio,
}

impl McpMode {
    /// `http` or `stdio`, as recorded.
    pub fn name(&self) -> &'static str {
        match self {
            McpMode::Http { .. } => "http",
            McpMode::Stdio => "stdio",
        }
    }
}

/// Which attempt a sandbox belongs to (labels on everything it creates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialLabels {
    /// The run.
    pub run_id: String,
    /// The trial.
    pub trial_id: String,
    /// The attempt.
    pub attempt_id: String,
}

/// What one trial's target needs: a platform-neutral description of the campaign's
/// `isolated_container` transport, with references resolved.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The image reference as configured (resolved by the backend before the run).
    pub image: String,
    /// The relay image the campaign names, if any (the backend decides whether to relay).
    pub relay_image: Option<String>,
    /// Non-root user id.
    pub uid: u64,
    /// Non-root group id.
    pub gid: u64,
    /// Environment (values are secrets: never logged or written).
    pub env: Vec<(String, String)>,
    /// How MCP is spoken.
    pub mode: McpMode,
    /// Paths that get a fresh empty volume.
    pub volumes: Vec<String>,
    /// How long the server may take to answer.
    pub startup_timeout: Duration,
    /// Bytes of a stdio server's stderr kept for the evidence.
    pub stderr_bytes: usize,
    /// Whose sandbox.
    pub labels: TrialLabels,
    /// The allowlisting egress proxy between the target and the canary sink, if any.
    pub egress_proxy: Option<EgressProxySpec>,
    /// What the trial needs of a network: a canary sink to reach, or more (an egress proxy,
    /// the gateway named by `{runner: network_gateway}`). A trial needing none runs with no
    /// network at all (loopback only) — a stdio target, or a streamable-HTTP target reached
    /// through the relay (which shares its network namespace); a stdio trial needing only its
    /// sink shares the sink's namespace; the backend adds a bridge for an HTTP target it
    /// reaches directly, or for every trial (`ELENGTIS_TRIAL_NETWORK=always`).
    pub network_needs: NetworkNeeds,
    /// The OCI runtime the campaign names for this target (`runtime:`), if any; the backend
    /// applies the run's override.
    pub runtime: Option<String>,
}

/// The egress proxy of a trial (the campaign's `egress_proxy`, docs/security.md): the canary
/// sink moves to a network of its own that only the proxy shares, the `route` hosts resolve
/// to the proxy on the trial network, and the proxy forwards only destinations on `allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressProxySpec {
    /// Destination hosts forwarded to the sink.
    pub allow: Vec<String>,
    /// Host names resolving to the proxy on the trial network (besides [`EGRESS_PROXY_ALIAS`]).
    pub route: Vec<String>,
}

/// The proxy's own name on the trial network (`http://egress-proxy` is `sink_url` then).
pub const EGRESS_PROXY_ALIAS: &str = "egress-proxy";

/// One image a run will start, and how it is reached.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageNeed {
    /// The image reference.
    pub image: String,
    /// Reached over streamable HTTP (may need a relay).
    pub http: bool,
    /// The relay image the campaign names, if any.
    pub relay_image: Option<String>,
    /// The OCI runtime the campaign names for it, if any.
    pub runtime: Option<String>,
    /// Its trials start an allowlisting egress proxy.
    pub egress_proxy: bool,
}

/// Everything a run will need from the backend, checked before any trial starts.
/// What a trial needs of a network (the backend picks the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetworkNeeds {
    /// A canary sink the target reaches.
    pub sink: bool,
    /// A bridge: an egress proxy, the `{runner: network_gateway}`, a route from the runner
    /// (streamable HTTP without the relay), or a sink for an HTTP target (its relay shares its
    /// namespace, and its port could be the sink's).
    pub other: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RunNeeds {
    /// Target images.
    pub images: Vec<ImageNeed>,
    /// Some trial starts a canary sink.
    pub sink: bool,
}

/// Where the runner reaches the MCP server of a started target.
pub enum TargetEndpoint {
    /// Connect to `connect_to`, addressing the server as `url` (host `localhost`).
    Http {
        /// URL with host `localhost`.
        url: String,
        /// The address to connect to.
        connect_to: SocketAddr,
    },
    /// Speak over byte streams (the target's stdout and stdin), with its stderr captured.
    Stdio {
        /// The server's stdout.
        output: Box<dyn AsyncRead + Send + Unpin>,
        /// The server's stdin; dropping it ends the server's input.
        input: Pin<Box<dyn AsyncWrite + Send>>,
        /// Bounded capture of its stderr, finished when the target goes.
        stderr: JoinHandle<Captured>,
    },
}

impl std::fmt::Debug for TargetEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetEndpoint::Http { url, connect_to } => {
                f.debug_struct("Http").field("url", url).field("connect_to", connect_to).finish()
            }
            TargetEndpoint::Stdio { .. } => f.write_str("Stdio"),
        }
    }
}

/// A canary sink started beside the target: its record stream and control input.
pub struct SinkChannel {
    /// Its stdout (JSON lines: ready, then one record per request).
    pub records: Box<dyn AsyncRead + Send + Unpin>,
    /// Its stdin (barrier lines; dropping it ends the sink).
    pub control: Pin<Box<dyn AsyncWrite + Send>>,
    /// Where the target reaches it; `None`: on 127.0.0.1, at the port its ready line reports.
    /// Behind an egress proxy, the proxy's URL.
    pub url: Option<String>,
    /// The sink's own address, when it differs from `url` (behind an egress proxy: an address
    /// the target must not be able to reach).
    pub direct_url: Option<String>,
    /// The egress proxy in front of the sink, if the trial has one.
    pub proxy: Option<ProxyChannel>,
    /// Where the sink runs, as the evidence's `sink.placement` names it: `trial_network`,
    /// `sink_namespace` (its own, which the target joins) or `behind_egress_proxy`.
    pub placement: &'static str,
}

/// An egress proxy started beside the sink: its record stream and control input (the sink's
/// protocol: a ready line, one record per request with its `egress` decision, barriers).
pub struct ProxyChannel {
    /// Its stdout.
    pub records: Box<dyn AsyncRead + Send + Unpin>,
    /// Its stdin (dropping it ends the proxy).
    pub control: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for ProxyChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyChannel").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SinkChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkChannel").field("url", &self.url).finish_non_exhaustive()
    }
}

/// A container platform, as a run uses it.
#[async_trait]
pub trait SandboxBackend: Send + Sync + std::fmt::Debug {
    /// Facts recorded in the manifest and every trial's evidence (`target_execution.engine_gate`
    /// for Docker: the engine and runtime versions assessed, and what was found).
    fn run_facts(&self) -> Value;

    /// What a user must be told before trials run (for Docker: an engine accepted despite
    /// known container-escape bugs; it reports that itself while it is prepared).
    fn warnings(&self) -> Vec<String>;

    /// Create one trial's isolated place (its network); nothing runs yet. On failure, what
    /// was created is already removed and the lifecycle record comes back with the error.
    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn TrialSandbox>, (SandboxError, Value)>;

    /// Remove everything the run `run_id` left behind (after a crash or an interruption).
    async fn sweep(&self, run_id: &str) -> Result<SweepReport, SandboxError>;
}

/// One trial's sandbox. Call [`TrialSandbox::teardown`] on every path.
#[async_trait]
pub trait TrialSandbox: Send + Sync + std::fmt::Debug {
    /// Start the canary sink in the trial's isolated place (before the target, whose command
    /// may name the sink's URL).
    async fn start_sink(&mut self) -> Result<SinkChannel, SandboxError>;

    /// Start the target with `command` (the image's default when empty), assert its
    /// hardening, and wait until it can be reached.
    async fn start_target(&mut self, command: Vec<String>) -> Result<TargetEndpoint, SandboxError>;

    /// The address of the trial network's gateway (`{runner: network_gateway}`), as the
    /// engine's inspection of the network reports it; recorded in the lifecycle record.
    async fn network_gateway(&mut self) -> Result<String, SandboxError>;

    /// Record that the MCP session answered.
    fn mark_ready(&mut self);

    /// Record an error before teardown.
    fn note_error(&mut self, error: &SandboxError);

    /// A consistent copy of a file (a SQLite database with its `-wal`/`-journal`) inside the
    /// target, taken while it is frozen.
    async fn snapshot(&self, path: &str, max_bytes: u64) -> Result<SnapshotFiles, SandboxError>;

    /// The engine's archive (a tar) of `path` inside the target, for `container_file`:
    /// `Fetched::Missing` when nothing is there, `Fetched::OverCap` when it would exceed
    /// `max_bytes`. Unparsed and untrusted: `elengtis_verifiers::file::read_archive` decides
    /// what in it is accepted.
    async fn archive(&self, path: &str, max_bytes: u64) -> Result<Fetched, SandboxError>;

    /// Remove everything; the lifecycle record and the errors met.
    async fn teardown(self: Box<Self>) -> (Value, Vec<String>);
}

/// What a sweep removed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SweepReport {
    /// Removed containers (name or id).
    pub containers: Vec<String>,
    /// Removed networks.
    pub networks: Vec<String>,
    /// Removed volumes.
    pub volumes: Vec<String>,
    /// What could not be removed.
    pub errors: Vec<String>,
    /// Runs whose objects were kept (a sweep of every run keeps those whose runner is not
    /// provably dead): `run ID: N objects kept: why`.
    pub kept: Vec<String>,
}

impl SweepReport {
    /// Nothing was found.
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.networks.is_empty() && self.volumes.is_empty() && self.errors.is_empty()
    }
}
