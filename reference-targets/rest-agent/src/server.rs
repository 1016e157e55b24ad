//! The HTTP side: one handler for every request (so every request is logged), the chat
//! pipeline (delay, `--fail-first`, header check, body, JSON, reply, session), sessions in
//! memory, and the serving loop.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{self, Write as _},
    net::SocketAddr,
    path::Path,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    extract::State,
    http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use time::{OffsetDateTime, format_description::BorrowedFormatItem, macros::format_description};

use crate::agent::{self, Build};

/// Largest request body accepted (256 KiB); a larger one gets 400.
pub const MAX_BODY: usize = 256 * 1024;
/// How much of an oversized body is still read (and dropped) so that the client, which is
/// still writing it, receives the 400 instead of a reset connection.
const DRAIN_LIMIT: usize = 8 * 1024 * 1024;
/// Sessions kept in memory; the least recently used one is forgotten first.
pub const MAX_SESSIONS: usize = 1000;
/// Longest `session_id` accepted, in bytes.
const MAX_SESSION_ID: usize = 128;
/// How long in-flight requests may finish after the stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// `--require-header NAME=SHA256HEX`: the header whose value must have this SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredHeader {
    /// The header's name (lowercase).
    pub name: HeaderName,
    /// Lowercase hex SHA-256 of the expected value.
    pub sha256: String,
}

/// How the agent behaves, from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Vulnerable or guarded.
    pub build: Build,
    /// Answer 401 to `/chat` unless this header has the expected value.
    pub require_header: Option<RequiredHeader>,
    /// Answer 503 to this many `/chat` requests first.
    pub fail_first: u64,
    /// Wait this long before answering a `/chat` request.
    pub delay: Duration,
}

/// Everything a request needs.
#[derive(Debug)]
pub struct App {
    settings: Settings,
    log: Option<RequestLog>,
    sessions: Mutex<Sessions>,
    /// `/chat` requests received (for `--fail-first`).
    chats: AtomicU64,
    /// Requests received (the log's `seq`).
    seq: AtomicU64,
}

impl App {
    /// An agent with no session yet.
    pub fn new(settings: Settings, log: Option<RequestLog>) -> Self {
        Self { settings, log, sessions: Mutex::default(), chats: AtomicU64::new(0), seq: AtomicU64::new(0) }
    }
}

/// The body of `POST /chat`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    /// The user's request, then a `---` line and the document (or only the document).
    message: String,
    /// Continue this session (absent or `null`: a new one).
    #[serde(default)]
    session_id: Option<String>,
}

/// The sessions in memory: how many turns each has had.
#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<String, Session>,
    /// The last generated id's number.
    made: u64,
    /// Counts uses, to find the least recently used session.
    clock: u64,
}

/// One session.
#[derive(Debug, Clone, Copy)]
struct Session {
    turns: u64,
    last_used: u64,
}

impl Sessions {
    /// The session a message belongs to (`id`, or a new one) and the message's turn in it
    /// (1 for the first). An unknown `id` starts a session under that id.
    fn turn(&mut self, id: Option<String>) -> (String, u64) {
        self.clock += 1;
        let id = id.unwrap_or_else(|| {
            loop {
                self.made += 1;
                let id = format!("session-{}", self.made);
                if !self.by_id.contains_key(&id) {
                    break id;
                }
            }
        });
        if !self.by_id.contains_key(&id)
            && self.by_id.len() >= MAX_SESSIONS
            && let Some(oldest) = self.by_id.iter().min_by_key(|(_, s)| s.last_used).map(|(k, _)| k.clone())
        {
            self.by_id.remove(&oldest);
        }
        let session = self.by_id.entry(id.clone()).or_insert(Session { turns: 0, last_used: 0 });
        session.turns += 1;
        session.last_used = self.clock;
        (id, session.turns)
    }
}

/// An answer, before it is logged and sent.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// A JSON body, or `ok` as text.
    body: Result<Value, &'static str>,
}

impl Answer {
    fn json(status: StatusCode, body: Value) -> Self {
        Self { status, headers: Vec::new(), body: Ok(body) }
    }

    fn error(status: StatusCode, message: impl Into<String>) -> Self {
        Self::json(status, json!({"error": message.into()}))
    }

    fn with_header(mut self, name: HeaderName, value: &'static str) -> Self {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }
}

/// The routes: every request goes to one handler, which answers by method and path.
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

/// Every request: read the body, answer by method and path, log, respond.
async fn handle(State(app): State<Arc<App>>, method: Method, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    let time = now();
    let path = uri.path();
    let read = read_body(body).await;
    let answer = match (path, &method) {
        ("/health", &Method::GET | &Method::HEAD) => {
            Answer { status: StatusCode::OK, headers: Vec::new(), body: Err("ok") }
        }
        ("/health", _) => Answer::error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} /health: use GET /health"))
            .with_header(header::ALLOW, "GET, HEAD"),
        ("/chat", &Method::POST) => chat(&app, &headers, &read).await,
        ("/chat", _) => Answer::error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} /chat: use POST /chat"))
            .with_header(header::ALLOW, "POST"),
        _ => Answer::error(StatusCode::NOT_FOUND, format!("no route for {method} {path} (POST /chat, GET /health)")),
    };
    if let Some(log) = &app.log {
        let (bytes, body) = match &read {
            Ok(bytes) if bytes.is_empty() => (0, Value::Null),
            Ok(bytes) => (bytes.len(), body_value(bytes)),
            Err(BodyError::TooLarge(seen)) => (*seen, Value::Null),
            Err(BodyError::Broken(_)) => (0, Value::Null),
        };
        log.write(&Entry {
            seq: app.seq.fetch_add(1, Ordering::Relaxed) + 1,
            time,
            method: method.as_str(),
            path,
            headers: header_names(&headers),
            body_bytes: bytes,
            body,
            status: answer.status.as_u16(),
        });
    }
    respond(answer)
}

/// `POST /chat`.
async fn chat(app: &App, headers: &HeaderMap, read: &Result<Vec<u8>, BodyError>) -> Answer {
    let settings = &app.settings;
    if !settings.delay.is_zero() {
        tokio::time::sleep(settings.delay).await;
    }
    let n = app.chats.fetch_add(1, Ordering::Relaxed);
    if n < settings.fail_first {
        let message =
            format!("the agent is not ready yet (failure {} of {}, --fail-first); retry", n + 1, settings.fail_first);
        return Answer::error(StatusCode::SERVICE_UNAVAILABLE, message).with_header(header::RETRY_AFTER, "0");
    }
    if let Some(required) = &settings.require_header {
        let problem = match headers.get(&required.name) {
            None => Some("is missing"),
            Some(value) if hex_sha256(value.as_bytes()) != required.sha256 => Some("has the wrong value"),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            return Answer::error(StatusCode::UNAUTHORIZED, format!("the `{}` header {problem}", required.name));
        }
    }
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge(seen)) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!("the request body ({seen}+ bytes) is over the limit of {MAX_BODY} bytes (256 KiB)"),
            );
        }
        Err(BodyError::Broken(error)) => {
            return Answer::error(StatusCode::BAD_REQUEST, format!("failed to read the request body: {error}"));
        }
    };
    // Through a `Value`: a derived struct would also accept an array (`["text"]`).
    let shape = r#"{"message": "...", "session_id": "..."}"#;
    let value = match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => value,
        Err(error) => {
            return Answer::error(StatusCode::BAD_REQUEST, format!("the request body is not valid JSON: {error}"));
        }
    };
    let kind = match &value {
        Value::Object(_) => None,
        Value::Array(_) => Some("an array"),
        Value::String(_) => Some("a string"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null => Some("null"),
    };
    if let Some(kind) = kind {
        return Answer::error(
            StatusCode::BAD_REQUEST,
            format!("the request body is {kind}, not a chat request object {shape}"),
        );
    }
    let request = match serde_json::from_value::<ChatRequest>(value) {
        Ok(request) => request,
        Err(error) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!("the request body is not a chat request {shape}: {error}"),
            );
        }
    };
    if request.message.trim().is_empty() {
        return Answer::error(StatusCode::BAD_REQUEST, "`message` must not be empty");
    }
    if let Some(id) = &request.session_id
        && (id.is_empty() || id.len() > MAX_SESSION_ID || id.chars().any(char::is_control))
    {
        return Answer::error(
            StatusCode::BAD_REQUEST,
            format!("`session_id` must be 1 to {MAX_SESSION_ID} bytes without control characters"),
        );
    }
    let text = agent::reply(settings.build, &request.message);
    let (session_id, turn) = app.sessions.lock().unwrap_or_else(PoisonError::into_inner).turn(request.session_id);
    Answer::json(StatusCode::OK, json!({"reply": {"text": text}, "session_id": session_id, "turn": turn}))
}

fn respond(answer: Answer) -> Response {
    let (content_type, body) = match answer.body {
        Ok(value) => ("application/json", Body::from(value.to_string())),
        Err(text) => ("text/plain; charset=utf-8", Body::from(text)),
    };
    let mut builder = Response::builder().status(answer.status).header(header::CONTENT_TYPE, content_type);
    for (name, value) in answer.headers {
        builder = builder.header(name, value);
    }
    builder.body(body).unwrap_or_else(|error| {
        tracing::error!(%error, "failed to build a response");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    })
}

/// Why a body could not be read.
#[derive(Debug)]
enum BodyError {
    /// Over [`MAX_BODY`]: how many bytes had arrived when it was refused.
    TooLarge(usize),
    Broken(String),
}

/// Reads a whole request body, refusing more than [`MAX_BODY`] bytes (the rest of an
/// oversized body is read and dropped, up to [`DRAIN_LIMIT`]).
async fn read_body(body: Body) -> Result<Vec<u8>, BodyError> {
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::new();
    let mut seen = 0_usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
        seen = seen.saturating_add(chunk.len());
        if seen > MAX_BODY {
            buffer = Vec::new();
            if seen > DRAIN_LIMIT {
                break;
            }
        } else {
            buffer.extend_from_slice(&chunk);
        }
    }
    if seen > MAX_BODY { Err(BodyError::TooLarge(seen)) } else { Ok(buffer) }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `2025-01-31T12:34:56.789Z`: RFC 3339, UTC, milliseconds.
const TIME_FORMAT: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

fn now() -> String {
    OffsetDateTime::now_utc().format(TIME_FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

/// The names of a request's headers (lowercase, each once, in the order received). Values
/// are never logged.
fn header_names(headers: &HeaderMap) -> Vec<String> {
    headers.keys().map(|name| name.as_str().to_owned()).collect()
}

/// A body for the log: its JSON when it parses, else its text.
fn body_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// One line of the request log.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    /// Counts requests from 1.
    seq: u64,
    /// When the request arrived.
    time: String,
    method: &'a str,
    path: &'a str,
    /// Header names only.
    headers: Vec<String>,
    /// Bytes of body received.
    body_bytes: usize,
    /// The body's JSON, or its text; `null` when empty or over the limit.
    body: Value,
    status: u16,
}

/// The request log (`--log PATH`): one JSON line per request, appended.
#[derive(Debug)]
pub struct RequestLog {
    file: Mutex<File>,
}

impl RequestLog {
    /// Opens (or creates) `path` for appending.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Self { file: Mutex::new(OpenOptions::new().create(true).append(true).open(path)?) })
    }

    /// Appends `entry` as one line (before the response is sent: a client that has its
    /// response can read its line).
    fn write(&self, entry: &Entry<'_>) {
        let mut line = match serde_json::to_vec(entry) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "failed to encode a log line");
                return;
            }
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
            tracing::warn!(%error, "failed to write the request log");
        }
    }
}

/// Binds, prints the ready line, serves until `stop` resolves, then gives in-flight
/// requests [`SHUTDOWN_GRACE`].
pub async fn run(app: App, bind: SocketAddr, stop: impl Future<Output = &'static str>) -> anyhow::Result<()> {
    let (listener, local) = elengtis_target_kit::http::listen(bind).await?;
    tracing::info!(%local, build = ?app.settings.build, "REST agent listening");
    let stop = async {
        let why = stop.await;
        tracing::info!(why, "stopping");
    };
    elengtis_target_kit::http::serve_router(listener, router(Arc::new(app)), stop, SHUTDOWN_GRACE).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_continue_and_the_least_recently_used_is_forgotten() {
        let mut sessions = Sessions::default();
        let (a, turn) = sessions.turn(None);
        assert_eq!((a.as_str(), turn), ("session-1", 1));
        assert_eq!(sessions.turn(Some(a.clone())), (a.clone(), 2));
        // A client's own id, even one the agent would generate next, is its own session.
        assert_eq!(sessions.turn(Some("session-2".into())), ("session-2".into(), 1));
        assert_eq!(sessions.turn(None).0, "session-3");
        for i in 0..MAX_SESSIONS {
            if i == 10 {
                sessions.turn(Some(a.clone()));
            }
            sessions.turn(Some(format!("filler-{i}")));
        }
        assert_eq!(sessions.by_id.len(), MAX_SESSIONS);
        assert_eq!(sessions.turn(Some(a.clone())), (a, 4), "recently used: kept");
        assert_eq!(sessions.turn(Some("session-2".into())).1, 1, "least recently used: forgotten");
    }

    #[test]
    fn header_hashes_are_lowercase_hex() {
        assert_eq!(hex_sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
