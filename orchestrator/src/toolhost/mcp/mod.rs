//! The MCP tool host: an `rmcp` client session with one target, over a fresh stdio child
//! ([`stdio`]), a Streamable HTTP connection ([`http`]) or already-connected streams (a
//! container's attached stdio). Every call has a deadline; every frame a stdio-like target
//! sends passes a bounded reader first ([`frame`]).

mod frame;
mod http;
mod stdio;

use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{RoleClient, RunningService};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::process::Child;
use tokio::task::JoinHandle;

pub use self::frame::FrameGuard;
use self::frame::{Expect, SharedFrameLog, explain};
pub use self::http::open_http;
pub use self::stdio::confinement;
use self::stdio::{describe_exit, signal_group};
pub use self::stdio::{guard_executable, open_stdio, resolve_program};
pub use crate::capture::Captured;
use crate::toolhost::ToolInfo;
pub use elengtis_stdio_guard::live::{
    LIVE_DIR, reap_dir as reap_stdio_leftovers, remove_if_done as remove_stdio_records_if_done,
};
pub use elengtis_stdio_guard::sandbox::Confinement;

/// Deadlines and bounds of a target session.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Start-up and MCP initialization.
    pub connect: Duration,
    /// One `tools/list` or `tools/call`.
    pub call: Duration,
    /// Graceful shutdown before the process group is killed.
    pub shutdown: Duration,
    /// Bytes of child stderr kept in evidence.
    pub stderr_bytes: usize,
    /// Longest frame (one line) accepted from a stdio target: a longer line fails the
    /// session instead of growing a buffer.
    pub frame_bytes: usize,
    /// Most JSON values (objects, arrays, strings, numbers, …) in one frame: parsed answers
    /// take far more memory than their text, so this bounds what a frame can cost.
    pub frame_values: usize,
}

/// Default [`Limits::frame_bytes`]: 16 MiB, rmcp's own line cap and its HTTP client's SSE
/// event cap.
pub const DEFAULT_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Default [`Limits::frame_values`]: a list of 10 000 ordinary tools is about 80 000 values.
pub const DEFAULT_FRAME_VALUES: usize = 200_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(10),
            call: Duration::from_secs(30),
            shutdown: Duration::from_secs(2),
            stderr_bytes: 64 * 1024,
            frame_bytes: DEFAULT_FRAME_BYTES,
            frame_values: DEFAULT_FRAME_VALUES,
        }
    }
}

/// Why a target could not be reached or answered badly.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The program was not found.
    #[error("failed to find program `{program}` (looked in {searched})")]
    NotFound {
        /// As configured.
        program: String,
        /// Where we looked.
        searched: String,
    },
    /// Spawning failed.
    #[error("failed to start `{program}`: {source}")]
    Spawn {
        /// The resolved program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A header could not be used.
    #[error("failed to use header `{name}`: not a valid HTTP header name or value")]
    Header {
        /// Header name (never the value).
        name: String,
    },
    /// The HTTP client could not be built.
    #[error("failed to build the HTTP client: {0}")]
    Client(String),
    /// Initialization did not finish in time.
    #[error("failed to initialize the MCP session: no answer within {} s{}", Secs(*.0), .1)]
    InitTimeout(Duration, String),
    /// Initialization failed.
    #[error("failed to initialize the MCP session: {0}")]
    Init(String),
    /// A request did not finish in time.
    #[error("failed to {what}: no answer within {} s{note}", Secs(*.limit))]
    Timeout {
        /// The request.
        what: String,
        /// The deadline.
        limit: Duration,
        /// What the server sent instead, if anything was ignored (starts with `; ` or is empty).
        note: String,
    },
    /// A request failed at the protocol or transport level.
    #[error("failed to {what}: {detail}")]
    Request {
        /// The request.
        what: String,
        /// The cause.
        detail: String,
    },
    /// The server broke the framing or sent something that is not a JSON-RPC message where
    /// an answer belonged; the session was ended.
    #[error("failed to {what}: protocol violation: {detail}")]
    Protocol {
        /// The request.
        what: String,
        /// What the server sent.
        detail: String,
    },
    /// The light sandbox of a stdio target could not be applied; the target did not run.
    #[error("failed to confine stdio target `{target}`: {detail}")]
    Sandbox {
        /// Target id.
        target: String,
        /// What could not be applied (names the missing kernel feature).
        detail: String,
    },
    /// The server closed its output (or exited) before answering.
    #[error("failed to {what}: the server closed the connection{detail}")]
    Closed {
        /// The request.
        what: String,
        /// Where in a frame it closed, and what rmcp said (starts with `: ` or is empty).
        detail: String,
    },
}

impl TargetError {
    /// A short classification for evidence.
    pub fn kind(&self) -> &'static str {
        match self {
            TargetError::NotFound { .. } => "program_not_found",
            TargetError::Spawn { .. } => "spawn",
            TargetError::Sandbox { .. } => "sandbox",
            TargetError::Header { .. } => "header",
            TargetError::Client(_) => "client",
            TargetError::InitTimeout(..) | TargetError::Timeout { .. } => "timeout",
            TargetError::Init(_) => "initialize",
            TargetError::Request { .. } => "request",
            TargetError::Protocol { .. } => "protocol",
            TargetError::Closed { .. } => "closed",
        }
    }
}

/// How to start a stdio target.
#[derive(Debug, Clone)]
pub struct StdioLaunch {
    /// Program as configured.
    pub command: String,
    /// Arguments (already resolved).
    pub args: Vec<String>,
    /// Extra environment (values never logged).
    pub env: Vec<(String, String)>,
    /// Target id (messages).
    pub target: String,
    /// The light sandbox, resolved.
    pub sandbox: Option<Confinement>,
    /// Where the guard records the live target (the run's `stdio-live/`).
    pub record: Option<std::path::PathBuf>,
}

/// How to reach an HTTP target.
#[derive(Clone)]
pub struct HttpLaunch {
    /// Endpoint URL.
    pub url: String,
    /// Headers (values are secrets: used for the session only).
    pub headers: Vec<(String, String)>,
    /// Connect to this address for the URL's host instead of resolving it (a container on
    /// its trial network, addressed as `localhost` so default DNS-rebinding guards accept it).
    pub resolve: Option<(String, std::net::SocketAddr)>,
}

impl std::fmt::Debug for HttpLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpLaunch")
            .field("url", &self.url)
            .field("headers", &self.headers.iter().map(|(k, _)| (k, "[REDACTED]")).collect::<Vec<_>>())
            .field("resolve", &self.resolve)
            .finish()
    }
}

/// What closing a session found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CloseReport {
    /// Problems while closing (recorded under phase `target_cleanup`).
    pub errors: Vec<String>,
    /// Child stderr (stdio targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Captured>,
    /// How the child ended, e.g. `exit status 0` or `killed by SIGKILL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
}

/// Opening failed; the child (if any) was already torn down.
#[derive(Debug)]
pub struct OpenFailure {
    /// Why.
    pub error: TargetError,
    /// What teardown found.
    pub closed: CloseReport,
}

/// An open MCP session with one target.
pub struct Session {
    client: Option<RunningService<RoleClient, ClientConfig>>,
    child: Option<Child>,
    stderr: Option<JoinHandle<Captured>>,
    limits: Limits,
    server: Value,
    /// What the stdio reader saw (stdio and attached-container targets).
    frames: Option<SharedFrameLog>,
    /// Set when a request got no answer in time: the server is not asked again (each later
    /// request would wait out its own deadline), later requests fail at once.
    broken: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("server", &self.server).finish_non_exhaustive()
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("elengtis", env!("CARGO_PKG_VERSION")))
}

/// Run the MCP handshake over `reader`/`writer` within the connect deadline; on failure the
/// session (child, stderr capture) is torn down and what that found is returned.
async fn initialize<R, W>(mut session: Session, reader: R, writer: W) -> Result<Session, OpenFailure>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let limit = session.limits.connect;
    match tokio::time::timeout(limit, client_config().serve((reader, writer))).await {
        Ok(Ok(client)) => {
            session.server = server_info(&client);
            let version = client.peer_info().map(|info| info.protocol_version.clone());
            session.client = Some(client);
            match version {
                Some(version) if !rmcp::model::ProtocolVersion::KNOWN_VERSIONS.contains(&version) => {
                    let known: Vec<String> =
                        rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter().map(ToString::to_string).collect();
                    let error = TargetError::Protocol {
                        what: "initialize the MCP session".into(),
                        detail: format!(
                            "the server answered with protocol version `{version}`, which this client does not speak ({})",
                            known.join(", ")
                        ),
                    };
                    let closed = session.teardown().await;
                    Err(OpenFailure { error, closed })
                }
                _ => Ok(session),
            }
        }
        Ok(Err(e)) => {
            let error = explain(session.frames.as_ref(), Expect::Initialize, TargetError::Init(e.to_string()));
            let closed = session.teardown().await;
            Err(OpenFailure { error, closed })
        }
        Err(_) => {
            let error =
                explain(session.frames.as_ref(), Expect::Initialize, TargetError::InitTimeout(limit, String::new()));
            let closed = session.teardown().await;
            Err(OpenFailure { error, closed })
        }
    }
}

/// Initialize an MCP session over already-connected streams (a container's attached
/// stdio). `stderr` collects the server's stderr; it is awaited (bounded) on close.
pub async fn open_streams<R, W>(
    reader: R,
    writer: W,
    stderr: Option<JoinHandle<Captured>>,
    limits: Limits,
) -> Result<Session, OpenFailure>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let reader = FrameGuard::new(reader, &limits);
    let frames = reader.log.clone();
    let session = Session {
        client: None,
        child: None,
        stderr,
        limits,
        server: Value::Null,
        frames: Some(frames),
        broken: Default::default(),
    };
    initialize(session, reader, writer).await
}

fn server_info(client: &RunningService<RoleClient, ClientConfig>) -> Value {
    client.peer_info().and_then(|info| serde_json::to_value(&*info).ok()).map_or(Value::Null, |mut v| {
        if let Value::Object(map) = &mut v {
            map.remove("instructions");
        }
        v
    })
}

impl Session {
    /// What the server said about itself at initialization.
    pub fn server_info(&self) -> &Value {
        &self.server
    }

    fn explain(&self, expect: Expect, error: TargetError) -> TargetError {
        let error = explain(self.frames.as_ref(), expect, error);
        if matches!(error, TargetError::Timeout { .. }) {
            let mut broken = self.broken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            broken.get_or_insert_with(|| error.to_string());
        }
        error
    }

    fn client(&self, what: &str) -> Result<&RunningService<RoleClient, ClientConfig>, TargetError> {
        let broken = self.broken.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(earlier) = broken {
            return Err(TargetError::Request {
                what: what.to_owned(),
                detail: format!("not sent: the session is unusable after an earlier request timed out ({earlier})"),
            });
        }
        self.client
            .as_ref()
            .ok_or_else(|| TargetError::Request { what: what.to_owned(), detail: "the session is closed".into() })
    }

    /// List every tool (all pages), within the call deadline.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, TargetError> {
        let what = "list tools";
        let client = self.client(what)?;
        let tools = match tokio::time::timeout(self.limits.call, client.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(
                    self.explain(Expect::ListTools, TargetError::Request { what: what.into(), detail: e.to_string() })
                );
            }
            Err(_) => {
                let limit = self.limits.call;
                return Err(self.explain(
                    Expect::ListTools,
                    TargetError::Timeout { what: what.into(), limit, note: String::new() },
                ));
            }
        };
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = tools.iter().find(|t| !seen.insert(t.name.as_ref())) {
            return Err(TargetError::Protocol {
                what: what.into(),
                detail: format!("the server listed the tool `{}` more than once", twice.name),
            });
        }
        Ok(tools)
    }

    /// Call one tool, within the call deadline. A tool that reports `isError` is a result,
    /// not an error.
    pub async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<CallToolResult, TargetError> {
        let what = format!("call tool `{name}`");
        let client = self.client(&what)?;
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(self.limits.call, client.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(self.explain(Expect::CallTool, TargetError::Request { what, detail: e.to_string() })),
            Err(_) => Err(self.explain(
                Expect::CallTool,
                TargetError::Timeout { what, limit: self.limits.call, note: String::new() },
            )),
        }
    }

    /// Close the session; for a stdio target, stop the child and reap it.
    pub async fn close(mut self) -> CloseReport {
        self.teardown().await
    }

    /// Close the session of a target in a container. Its stderr comes from the container's
    /// attach stream, which ends only when the container goes: if it is still open after the
    /// session (the server ignored the end of its stdin), it comes back unfinished, for
    /// [`finish_stderr`] once the container is removed.
    pub async fn close_in_container(mut self) -> (CloseReport, Option<JoinHandle<Captured>>) {
        self.teardown_keeping(true).await
    }

    async fn teardown(&mut self) -> CloseReport {
        self.teardown_keeping(false).await.0
    }

    async fn teardown_keeping(&mut self, keep_open_stderr: bool) -> (CloseReport, Option<JoinHandle<Captured>>) {
        let mut report = CloseReport::default();
        if let Some(client) = self.client.take()
            && tokio::time::timeout(self.limits.shutdown, client.cancel()).await.is_err()
        {
            report
                .errors
                .push(format!("the MCP session did not close within {} s", self.limits.shutdown.as_secs_f32()));
        }
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            let status = match tokio::time::timeout(self.limits.shutdown, child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => {
                    // The guard forwards SIGTERM to the target's group and SIGKILLs the
                    // whole tree after the same grace: give it that and a second more.
                    signal_group(pid, nix::sys::signal::Signal::SIGTERM);
                    let grace = self.limits.shutdown + Duration::from_secs(1);
                    match tokio::time::timeout(grace, child.wait()).await {
                        Ok(Ok(status)) => Some(status),
                        _ => {
                            signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                            match tokio::time::timeout(self.limits.shutdown, child.wait()).await {
                                Ok(Ok(status)) => Some(status),
                                Ok(Err(e)) => {
                                    report.errors.push(format!("failed to reap the target process: {e}"));
                                    None
                                }
                                Err(_) => {
                                    report.errors.push("the target process survived SIGKILL".into());
                                    None
                                }
                            }
                        }
                    }
                }
            };
            // The guard has killed and reaped the target's whole tree before it exited.
            report.exit = status.map(describe_exit);
        }
        let mut pending = None;
        if let Some(mut handle) = self.stderr.take() {
            match tokio::time::timeout(self.limits.shutdown, &mut handle).await {
                Ok(Ok(captured)) => report.stderr = Some(captured),
                Ok(Err(_)) => report.errors.push("failed to collect the target's stderr: its reader failed".into()),
                Err(_) if keep_open_stderr => pending = Some(handle),
                Err(_) => {
                    handle.abort();
                    report
                        .errors
                        .push("failed to collect the target's stderr: it stayed open after the session ended".into());
                }
            }
        }
        (report, pending)
    }
}

impl Drop for Session {
    /// A session dropped without [`Session::close`] (for example when a run is interrupted)
    /// still takes its whole process tree with it: the guard kills it at once on SIGUSR1.
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            signal_group(child.id(), nix::sys::signal::Signal::SIGUSR1);
        }
    }
}

/// The result of a tool call as recorded: the MCP result with nulls dropped.
pub fn result_json(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// The text a model sees for a tool result: the text blocks joined, prefixed `ERROR: `
/// when the tool reported an error.
pub fn result_text(result: &CallToolResult) -> String {
    let text = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) { format!("ERROR: {text}") } else { text }
}

/// Collect a container target's stderr left open by [`Session::close_in_container`], once its
/// container is gone (the attach stream has ended); an error if it still does not end.
pub async fn finish_stderr(handle: JoinHandle<Captured>, limit: Duration) -> Result<Captured, String> {
    match tokio::time::timeout(limit, handle).await {
        Ok(Ok(captured)) => Ok(captured),
        Ok(Err(_)) => Err("failed to collect the target's stderr: its reader failed".into()),
        Err(_) => Err("failed to collect the target's stderr: it stayed open after its container was removed".into()),
    }
}

/// Seconds for messages: `10` for whole seconds, else one decimal (`13.4`).
struct Secs(Duration);

impl std::fmt::Display for Secs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.subsec_millis() == 0 {
            write!(f, "{}", self.0.as_secs())
        } else {
            write!(f, "{:.1}", self.0.as_secs_f64())
        }
    }
}

/// A listed MCP tool as the engine sees it.
pub fn tool_info(tool: &Tool) -> ToolInfo {
    ToolInfo {
        name: tool.name.to_string(),
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: (*tool.input_schema).clone(),
        listing: serde_json::to_value(tool).unwrap_or(Value::Null),
    }
}
