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
use serde::de::DeserializeSeed as _;
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

/// What a [`FrameGuard`] saw of the server's output, kept to explain a failed request.
#[derive(Debug, Default)]
struct FrameLog {
    /// Why the stream was failed: a frame over the cap, or an answer that is not JSON-RPC.
    fatal: Option<String>,
    /// Lines rmcp skips (not JSON, invalid UTF-8, too deeply nested, a request or
    /// notification it cannot read).
    skipped: u64,
    /// The first skipped line: its number, its beginning and why.
    first_skipped: Option<String>,
    /// The stream ended, with this many bytes of an unfinished frame.
    eof: Option<usize>,
    /// The latest answer whose result matched no MCP result type (rmcp reads it as a custom
    /// result and reports only "unexpected response type"): its line and the result.
    unmatched: Option<(u64, Value)>,
}

impl FrameLog {
    /// `; the server also sent …` when lines were skipped, else empty.
    fn note(&self) -> String {
        match &self.first_skipped {
            Some(first) => format!(
                "; the server sent {} line{} that rmcp ignored as not a JSON-RPC message (first: {first})",
                self.skipped,
                if self.skipped == 1 { "" } else { "s" }
            ),
            None => String::new(),
        }
    }
}

type SharedFrameLog = std::sync::Arc<std::sync::Mutex<FrameLog>>;

fn with_log<T>(log: &SharedFrameLog, f: impl FnOnce(&mut FrameLog) -> T) -> T {
    let mut guard = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut guard)
}

/// A reader in front of rmcp's line transport that bounds every frame (line) at
/// [`Limits::frame_bytes`] and checks each complete line the way rmcp will read it.
///
/// rmcp 3.11 caps a line at 16 MiB itself, but it drops an oversized line and keeps reading
/// (an endless line is read forever), skips lines that are not JSON, and answers a
/// well-formed JSON value that is not a JSON-RPC message with an error and goes on: a
/// client then waits for an answer that never comes. This reader instead fails the stream
/// with a clear error on an oversized line or on a line that should have been an answer but
/// is not a JSON-RPC message, and records skipped lines and the end of the stream, so that
/// a failed request says what the server sent. It never holds more than one frame.
pub struct FrameGuard<R> {
    inner: R,
    max: usize,
    max_values: usize,
    /// Bytes of the current line so far.
    line_len: usize,
    /// The current line while it is short enough to be checked ([`INSPECTED_FRAME_BYTES`]).
    line: Vec<u8>,
    line_number: u64,
    failed: Option<String>,
    log: SharedFrameLog,
}

impl<R> std::fmt::Debug for FrameGuard<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameGuard").field("line_number", &self.line_number).field("failed", &self.failed).finish()
    }
}

impl<R> FrameGuard<R> {
    /// Guard `inner` with the frame limits of `limits`.
    pub fn new(inner: R, limits: &Limits) -> Self {
        let (max, max_values) = (limits.frame_bytes, limits.frame_values);
        let log = SharedFrameLog::default();
        FrameGuard { inner, max, max_values, line_len: 0, line: Vec::new(), line_number: 0, failed: None, log }
    }

    /// Why the stream was failed, if it was.
    pub fn problem(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// How many lines were skipped as not JSON-RPC, and the first of them.
    pub fn skipped(&self) -> (u64, Option<String>) {
        with_log(&self.log, |log| (log.skipped, log.first_skipped.clone()))
    }

    fn fail(&mut self, problem: String) {
        with_log(&self.log, |log| log.fatal = Some(problem.clone()));
        self.failed = Some(problem);
    }

    /// Check one complete line (without its `\n`).
    fn inspect(&mut self) -> Result<(), String> {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let mut values = 0;
        let counted = ValueCount { seen: &mut values, max: self.max_values }
            .deserialize(&mut serde_json::Deserializer::from_slice(line));
        if counted.is_err() && values > self.max_values {
            return Err(format!(
                "line {} holds more than {} JSON values (`{}`)",
                self.line_number,
                self.max_values,
                snippet(line)
            ));
        }
        if line.len() > INSPECTED_FRAME_BYTES {
            return Ok(());
        }
        let error = match serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(line) {
            Ok(rmcp::model::ServerJsonRpcMessage::Response(response)) => {
                if let rmcp::model::ServerResult::CustomResult(custom) = response.result {
                    let number = self.line_number;
                    with_log(&self.log, |log| log.unmatched = Some((number, custom.0)));
                }
                return Ok(());
            }
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        let shown = snippet(line);
        let number = self.line_number;
        let is_method = || {
            serde_json::from_slice::<Value>(line).ok().is_some_and(|v| v.get("method").is_some_and(Value::is_string))
        };
        match error.classify() {
            serde_json::error::Category::Data if !is_method() => {
                Err(format!("line {number} is not a JSON-RPC message: {error} (`{shown}`)"))
            }
            _ => {
                with_log(&self.log, |log| {
                    log.skipped += 1;
                    log.first_skipped.get_or_insert_with(|| format!("line {number} `{shown}`: {error}"));
                });
                Ok(())
            }
        }
    }
}

/// Lines up to this size are checked by [`FrameGuard`] as rmcp will read them; longer ones
/// (up to the frame limit) only have their values counted, so that a large valid answer is
/// parsed into memory once.
const INSPECTED_FRAME_BYTES: usize = 1024 * 1024;

/// Counts the values of a JSON document without keeping any, and stops past `max`.
struct ValueCount<'a> {
    seen: &'a mut usize,
    max: usize,
}

impl ValueCount<'_> {
    fn bump<E: serde::de::Error>(self) -> Result<(), E> {
        *self.seen += 1;
        if *self.seen > self.max { Err(E::custom("too many JSON values")) } else { Ok(()) }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ValueCount<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ValueCount<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.bump()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.bump()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.bump()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.bump()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.bump()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.bump()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (seen, max) = (self.seen, self.max);
        ValueCount { seen: &mut *seen, max }.bump()?;
        while seq.next_element_seed(ValueCount { seen: &mut *seen, max })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (seen, max) = (self.seen, self.max);
        ValueCount { seen: &mut *seen, max }.bump()?;
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            map.next_value_seed(ValueCount { seen: &mut *seen, max })?;
        }
        Ok(())
    }
}

/// The beginning of a line, printable.
fn snippet(line: &[u8]) -> String {
    const SHOWN: usize = 60;
    let text = String::from_utf8_lossy(&line[..line.len().min(SHOWN)]).escape_debug().to_string();
    if line.len() > SHOWN { format!("{text}…") } else { text }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for FrameGuard<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = self.get_mut();
        if let Some(problem) = &this.failed {
            return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::InvalidData, problem.clone())));
        }
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let filled = buf.filled().len();
        if filled == before {
            let partial = this.line_len;
            with_log(&this.log, |log| log.eof = Some(partial));
            return Poll::Ready(Ok(()));
        }
        // Hand on every complete, acceptable line of this read; stop before a bad one.
        let mut start = before;
        let mut keep = filled;
        while start < filled {
            let chunk = &buf.filled()[start..filled];
            let newline = chunk.iter().position(|b| *b == b'\n');
            let piece = &chunk[..newline.unwrap_or(chunk.len())];
            this.line_len = this.line_len.saturating_add(piece.len());
            if this.line_len > this.max {
                let problem = format!(
                    "line {} is longer than the {} byte frame limit (no newline within the limit)",
                    this.line_number + 1,
                    this.max
                );
                this.fail(problem);
                keep = start;
                break;
            }
            this.line.extend_from_slice(piece);
            let Some(newline) = newline else { break };
            this.line_number += 1;
            let checked = this.inspect();
            if this.line.capacity() > INSPECTED_FRAME_BYTES {
                this.line = Vec::new();
            }
            this.line.clear();
            this.line_len = 0;
            if let Err(problem) = checked {
                this.fail(problem);
                keep = start;
                break;
            }
            start += newline + 1;
        }
        buf.set_filled(keep);
        match (&this.failed, keep == before) {
            (Some(problem), true) => {
                Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::InvalidData, problem.clone())))
            }
            _ => Poll::Ready(Ok(())),
        }
    }
}

/// The result type a request expects, to say why an answer did not match it.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Initialize,
    ListTools,
    CallTool,
}

impl Expect {
    fn mismatch(self, value: Value) -> Option<String> {
        let (name, error) = match self {
            Expect::Initialize => ("initialize", serde_json::from_value::<rmcp::model::InitializeResult>(value).err()),
            Expect::ListTools => ("tools/list", serde_json::from_value::<rmcp::model::ListToolsResult>(value).err()),
            Expect::CallTool => ("tools/call", serde_json::from_value::<rmcp::model::CallToolResult>(value).err()),
        };
        error.map(|e| format!("not a valid {name} result: {e}"))
    }
}

/// At most this many characters of a cause from rmcp (which may print a whole answer).
const DETAIL_CHARS: usize = 400;

fn bounded(detail: String) -> String {
    match detail.char_indices().nth(DETAIL_CHARS) {
        Some((end, _)) => format!("{}…", &detail[..end]),
        None => detail,
    }
}

/// Explain a failed request from what the [`FrameGuard`] saw: a broken frame or an answer
/// of the wrong shape is a protocol violation, a closed stream is `closed`, and a timeout
/// says which lines were ignored.
fn explain(log: Option<&SharedFrameLog>, expect: Expect, error: TargetError) -> TargetError {
    let error = match error {
        TargetError::Init(detail) => TargetError::Init(bounded(detail)),
        TargetError::Request { what, detail } => TargetError::Request { what, detail: bounded(detail) },
        other => other,
    };
    let Some(log) = log else { return error };
    with_log(log, |log| {
        let what = match &error {
            TargetError::InitTimeout(..) | TargetError::Init(_) => "initialize the MCP session".to_owned(),
            TargetError::Timeout { what, .. }
            | TargetError::Request { what, .. }
            | TargetError::Protocol { what, .. }
            | TargetError::Closed { what, .. } => what.clone(),
            _ => return error,
        };
        if let Some(fatal) = &log.fatal {
            return TargetError::Protocol { what, detail: fatal.clone() };
        }
        if matches!(error, TargetError::Init(_) | TargetError::Request { .. })
            && let Some((line, value)) = log.unmatched.take()
            && let Some(why) = expect.mismatch(value)
        {
            return TargetError::Protocol { what, detail: format!("the answer on line {line} is {why}") };
        }
        if let TargetError::Request { detail, .. } = &error
            && detail.contains("Unexpected response type")
        {
            return TargetError::Protocol {
                what,
                detail: "the server answered with a result of another MCP type (rmcp: unexpected response type)".into(),
            };
        }
        let note = log.note();
        match error {
            TargetError::InitTimeout(limit, _) => TargetError::InitTimeout(limit, note),
            TargetError::Timeout { what, limit, .. } => TargetError::Timeout { what, limit, note },
            TargetError::Init(detail) | TargetError::Request { detail, .. }
                if log.eof.is_some() || detail.contains("Broken pipe") =>
            {
                let detail = match log.eof {
                    Some(bytes) if bytes > 0 => {
                        format!(" in the middle of a frame ({bytes} bytes without a newline): {detail}")
                    }
                    Some(_) => format!(": {detail}"),
                    None => ": the server stopped reading its input (broken pipe)".to_owned(),
                };
                TargetError::Closed { what, detail: format!("{detail}{note}") }
            }
            TargetError::Init(detail) => TargetError::Init(format!("{detail}{note}")),
            TargetError::Request { what, detail } => TargetError::Request { what, detail: format!("{detail}{note}") },
            other => other,
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
            Ok(Session {
                client: Some(client),
                child: None,
                stderr: None,
                limits,
                server,
                frames: None,
                broken: Default::default(),
            })
        }
        Ok(Err(e)) => Err(fail(TargetError::Init(e.to_string()))),
        Err(_) => Err(fail(TargetError::InitTimeout(limits.connect, String::new()))),
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
