//! Target sessions: MCP (through `rmcp`) over a fresh stdio child or a Streamable HTTP
//! client session.
//!
//! A stdio target is a fresh child process per trial: the command runs directly (never
//! through a shell) in its own process group with a minimal environment; its stderr is kept
//! (bounded) for the evidence; and on every path the whole group is killed and the child
//! reaped. An HTTP target is an externally managed server: a trial owns only a new client
//! session, and the header secrets it uses are never written anywhere. Every call has a
//! deadline.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, ChildStderr};
use tokio::task::JoinHandle;

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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(10),
            call: Duration::from_secs(30),
            shutdown: Duration::from_secs(2),
            stderr_bytes: 64 * 1024,
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
    #[error("failed to initialize the MCP session: no answer within {} s", .0.as_secs_f32())]
    InitTimeout(Duration),
    /// Initialization failed.
    #[error("failed to initialize the MCP session: {0}")]
    Init(String),
    /// A request did not finish in time.
    #[error("failed to {what}: no answer within {} s", .limit.as_secs_f32())]
    Timeout {
        /// The request.
        what: String,
        /// The deadline.
        limit: Duration,
    },
    /// A request failed at the protocol or transport level.
    #[error("failed to {what}: {detail}")]
    Request {
        /// The request.
        what: String,
        /// The cause.
        detail: String,
    },
}

impl TargetError {
    /// A short classification for evidence.
    pub fn kind(&self) -> &'static str {
        match self {
            TargetError::NotFound { .. } => "program_not_found",
            TargetError::Spawn { .. } => "spawn",
            TargetError::Header { .. } => "header",
            TargetError::Client(_) => "client",
            TargetError::InitTimeout(_) | TargetError::Timeout { .. } => "timeout",
            TargetError::Init(_) => "initialize",
            TargetError::Request { .. } => "request",
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

/// Bounded capture of a child's stderr.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Captured {
    /// The first bytes (lossy UTF-8).
    pub text: String,
    /// Total bytes written.
    pub bytes: u64,
    /// More was written than kept.
    pub truncated: bool,
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
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("server", &self.server).finish_non_exhaustive()
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("elengtis", env!("CARGO_PKG_VERSION")))
}

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

fn capture_stderr(mut stderr: ChildStderr, limit: usize) -> JoinHandle<Captured> {
    tokio::spawn(async move {
        let mut kept = Vec::new();
        let mut total: u64 = 0;
        let mut buf = [0u8; 8192];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n as u64;
                    let room = limit.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        Captured {
            text: String::from_utf8_lossy(&kept).into_owned(),
            bytes: total,
            truncated: total > kept.len() as u64,
        }
    })
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
    let stderr = child.stderr.take().map(|s| capture_stderr(s, limits.stderr_bytes));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        let mut session = Session { client: None, child: Some(child), stderr, limits, server: Value::Null };
        let closed = session.teardown().await;
        return Err(OpenFailure {
            error: TargetError::Init("the child's stdio pipes were not available".into()),
            closed,
        });
    };
    initialize(Session { client: None, child: Some(child), stderr, limits, server: Value::Null }, stdout, stdin).await
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
            session.client = Some(client);
            Ok(session)
        }
        Ok(Err(e)) => {
            let closed = session.teardown().await;
            Err(OpenFailure { error: TargetError::Init(e.to_string()), closed })
        }
        Err(_) => {
            let closed = session.teardown().await;
            Err(OpenFailure { error: TargetError::InitTimeout(limit), closed })
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
    initialize(Session { client: None, child: None, stderr, limits, server: Value::Null }, reader, writer).await
}

/// Open a new client session with an HTTP target.
pub async fn open_http(launch: &HttpLaunch, limits: Limits) -> Result<Session, OpenFailure> {
    use reqwest::header::{HeaderName, HeaderValue};
    let fail = |error| OpenFailure { error, closed: CloseReport::default() };
    let mut config = StreamableHttpClientTransportConfig::with_uri(launch.url.clone());
    for (name, value) in &launch.headers {
        let header = || TargetError::Header { name: name.clone() };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| fail(header()))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| fail(header()))?;
        value.set_sensitive(true);
        config.custom_headers.insert(name, value);
    }
    let builder = || {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(limits.connect)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some((host, addr)) = &launch.resolve {
            builder = builder.resolve(host, *addr);
        }
        builder
    };
    // Without system CA certificates (a FROM-scratch image) plain http still works.
    let http = match builder().build() {
        Ok(client) => client,
        Err(_) => builder()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|e| fail(TargetError::Client(e.to_string())))?,
    };
    let transport = StreamableHttpClientTransport::with_client(http, config);
    match tokio::time::timeout(limits.connect, client_config().serve(transport)).await {
        Ok(Ok(client)) => {
            let server = server_info(&client);
            Ok(Session { client: Some(client), child: None, stderr: None, limits, server })
        }
        Ok(Err(e)) => Err(fail(TargetError::Init(e.to_string()))),
        Err(_) => Err(fail(TargetError::InitTimeout(limits.connect))),
    }
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

    fn client(&self, what: &str) -> Result<&RunningService<RoleClient, ClientConfig>, TargetError> {
        self.client
            .as_ref()
            .ok_or_else(|| TargetError::Request { what: what.to_owned(), detail: "the session is closed".into() })
    }

    /// List every tool (all pages), within the call deadline.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, TargetError> {
        let what = "list tools";
        let client = self.client(what)?;
        match tokio::time::timeout(self.limits.call, client.list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(TargetError::Request { what: what.into(), detail: e.to_string() }),
            Err(_) => Err(TargetError::Timeout { what: what.into(), limit: self.limits.call }),
        }
    }

    /// Call one tool, within the call deadline. A tool that reports `isError` is a result,
    /// not an error.
    pub async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<CallToolResult, TargetError> {
        let what = format!("call tool `{name}`");
        let client = self.client(&what)?;
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(self.limits.call, client.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(TargetError::Request { what, detail: e.to_string() }),
            Err(_) => Err(TargetError::Timeout { what, limit: self.limits.call }),
        }
    }

    /// Close the session; for a stdio target, stop the child and reap it.
    pub async fn close(mut self) -> CloseReport {
        self.teardown().await
    }

    async fn teardown(&mut self) -> CloseReport {
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
                    signal_group(pid, nix::sys::signal::Signal::SIGTERM);
                    match tokio::time::timeout(self.limits.shutdown, child.wait()).await {
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
            // Whatever the child left behind in its process group goes too.
            signal_group(pid, nix::sys::signal::Signal::SIGKILL);
            report.exit = status.map(describe_exit);
        }
        if let Some(handle) = self.stderr.take() {
            match tokio::time::timeout(self.limits.shutdown, handle).await {
                Ok(Ok(captured)) => report.stderr = Some(captured),
                _ => report
                    .errors
                    .push("failed to collect the target's stderr: it stayed open after the session ended".into()),
            }
        }
        report
    }
}

impl Drop for Session {
    /// A session dropped without [`Session::close`] (for example when a run is interrupted)
    /// still takes its whole process group with it.
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            signal_group(child.id(), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn signal_group(pid: Option<u32>, signal: nix::sys::signal::Signal) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), signal);
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
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
