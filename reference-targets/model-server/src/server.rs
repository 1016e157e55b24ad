//! The HTTP side: routes, the request pipeline (read, check key, parse, choose, fault,
//! render, log), response delivery (streams, stalls, cuts) and the serving loop.

use std::{
    io,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use futures_util::StreamExt as _;
use serde_json::Value;

use crate::{
    anthropic,
    faults::{self, Attempts, Body as Rendered, Delivery},
    log::{self, Entry, Keys, RequestLog},
    openai,
    reply::Usage,
    script::{IdContext, Script},
};

/// Distinct request bodies whose attempts are counted at once.
const ATTEMPT_MEMORY: usize = 4096;
/// How long in-flight requests may finish after the stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Pause before a scripted cut, so the bytes before it are flushed first.
const CUT_FLUSH: Duration = Duration::from_millis(50);

/// Everything a request needs.
#[derive(Debug)]
pub struct App {
    pub script: Script,
    pub log: Option<RequestLog>,
    /// Hex SHA-256 the key header must hash to.
    pub require_key: Option<String>,
    pub max_body: usize,
    attempts: Attempts,
    seq: AtomicU64,
}

impl App {
    pub fn new(script: Script, log: Option<RequestLog>, require_key: Option<String>, max_body: usize) -> Self {
        Self { script, log, require_key, max_body, attempts: Attempts::new(ATTEMPT_MEMORY), seq: AtomicU64::new(0) }
    }
}

/// A wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    fn error(self, status: u16, message: &str) -> Value {
        match self {
            Self::OpenAi => openai::error(status, message),
            Self::Anthropic => anthropic::error(status, message),
        }
    }

    /// Anthropic when the request carries `anthropic-version` (for the shared paths).
    fn of_headers(headers: &HeaderMap) -> Self {
        if headers.contains_key("anthropic-version") { Self::Anthropic } else { Self::OpenAi }
    }

    /// The SHA-256 of the key this wire format authenticates with.
    fn key(self, keys: &Keys) -> Option<&str> {
        match self {
            Self::OpenAi => keys.authorization_sha256.as_deref(),
            Self::Anthropic => keys.x_api_key_sha256.as_deref(),
        }
    }
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai_chat))
        .route("/chat/completions", post(openai_chat))
        .route("/api/v1/chat/completions", post(openai_chat))
        .route("/v1/messages", post(anthropic_messages))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/api/v1/models", get(models))
        .fallback(not_found)
        .with_state(app)
}

async fn openai_chat(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    chat(app, Wire::OpenAi, uri, headers, body).await
}

async fn anthropic_messages(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    chat(app, Wire::Anthropic, uri, headers, body).await
}

/// What was decided for one request, for the log and the response.
#[derive(Debug)]
struct Outcome {
    delivery: Delivery,
    delay: Duration,
    model: Option<String>,
    stream: Option<bool>,
    step: Option<usize>,
    attempt: Option<u32>,
    fault: Option<&'static str>,
    notes: Vec<String>,
}

impl Outcome {
    fn plain(delivery: Delivery) -> Self {
        Self {
            delivery,
            delay: Duration::ZERO,
            model: None,
            stream: None,
            step: None,
            attempt: None,
            fault: None,
            notes: Vec::new(),
        }
    }
}

async fn chat(app: Arc<App>, wire: Wire, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    let time = log::now();
    let keys = Keys::of(&headers);
    let (bytes, outcome) = match read_body(body, app.max_body).await {
        Ok(bytes) => {
            let outcome = answer(&app, wire, uri.path(), &headers, &keys, &bytes);
            (bytes, outcome)
        }
        Err(ReadError::TooLarge(seen)) => {
            let message = format!("request body of {seen}+ bytes exceeds the limit of {} bytes", app.max_body);
            (Bytes::new(), Outcome::plain(Delivery::json(413, &wire.error(413, &message))))
        }
        Err(ReadError::Broken(error)) => {
            let message = format!("could not read the request body: {error}");
            (Bytes::new(), Outcome::plain(Delivery::json(400, &wire.error(400, &message))))
        }
    };
    record(&app, time, &Method::POST, uri.path(), Some(wire), &headers, keys, &bytes, &outcome);
    if !outcome.delay.is_zero() {
        tokio::time::sleep(outcome.delay).await;
    }
    respond(outcome.delivery)
}

/// The pipeline for a chat request whose body is in: key, JSON, request checks, attempt,
/// step, fault, reply, rendering.
fn answer(app: &App, wire: Wire, path: &str, headers: &HeaderMap, keys: &Keys, bytes: &[u8]) -> Outcome {
    let script = &app.script;
    if let Some(required) = &app.require_key
        && wire.key(keys) != Some(required.as_str())
    {
        let message = match wire {
            Wire::OpenAi => "Incorrect API key provided (Authorization: Bearer KEY).",
            Wire::Anthropic => "invalid x-api-key",
        };
        return Outcome::plain(Delivery::json(401, &wire.error(401, message)));
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(error) => {
            let message = format!("We could not parse the JSON body of your request: {error}");
            return Outcome::plain(Delivery::json(400, &wire.error(400, &message)));
        }
    };
    let version = headers.get("anthropic-version").and_then(|v| v.to_str().ok());
    let parsed = match wire {
        Wire::OpenAi => openai::parse(&value, script.validate_requests),
        Wire::Anthropic => anthropic::parse(&value, version, script.validate_requests),
    };
    let mut request = match parsed {
        Ok(request) => request,
        Err(message) => {
            let mut outcome = Outcome::plain(Delivery::json(400, &wire.error(400, &message)));
            outcome.model = value.get("model").and_then(Value::as_str).map(str::to_owned);
            return outcome;
        }
    };
    let key = log::sha256(&[wire.name().as_bytes(), b"\0", bytes].concat());
    let digest = log::hex(&key);
    let attempt = app.attempts.next(key);
    // The one per-body counter: fault rules' `attempt` and steps' `when.nth` both read it.
    request.conversation.attempt = attempt;
    let conversation = &request.conversation;
    let turn = conversation.step();
    let rule = script.fault_for(script.step_index(conversation), attempt);
    let fault = rule.and_then(|r| r.fault.as_ref());

    let prefix = match wire {
        Wire::OpenAi => "call_",
        Wire::Anthropic => "toolu_",
    };
    let mut reply = script.reply(conversation, IdContext { prefix, request_hash: &digest });
    if let Some(fault) = fault {
        faults::apply_to_reply(fault, &mut reply, &conversation.offered_tools);
    }
    let usage = Usage::estimate(bytes.len(), &reply, script.cost.map(|c| (c.prompt, c.completion)));
    let model = script.model.clone().or_else(|| request.model.clone()).unwrap_or_else(|| "scripted-model".to_owned());
    let short = &digest[..24];
    let chunk_bytes = script.stream.chunk_bytes;
    let (rendered, request_id) = match wire {
        Wire::OpenAi => {
            let id = format!("chatcmpl-{short}");
            let render = openai::Render {
                id: &id,
                created: script.created.unwrap_or_else(unix_now),
                model: &model,
                usage,
                openrouter: script.openrouter.unwrap_or_else(|| path.starts_with("/api/")),
                include_usage: request.include_usage,
                chunk_bytes,
            };
            let body = if request.stream {
                Rendered::Sse(openai::stream(&reply, &render))
            } else {
                Rendered::Json(openai::completion(&reply, &render))
            };
            (body, ("x-request-id", format!("req_{short}")))
        }
        Wire::Anthropic => {
            let id = format!("msg_{short}");
            let render = anthropic::Render { id: &id, model: &model, usage, chunk_bytes };
            let body = if request.stream {
                Rendered::Sse(anthropic::stream(&reply, &render))
            } else {
                Rendered::Json(anthropic::message(&reply, &render))
            };
            (body, ("request-id", format!("req_{short}")))
        }
    };
    let interval = Duration::from_millis(script.stream.interval_ms);
    let mut delivery = faults::deliver(fault, rendered, interval, |status, message| wire.error(status, message));
    delivery.headers.push(request_id);
    Outcome {
        delivery,
        delay: rule.map(faults::FaultRule::delay).unwrap_or_default(),
        model: Some(model),
        stream: Some(request.stream),
        step: Some(turn),
        attempt: Some(attempt),
        fault: fault.map(faults::Fault::kind),
        notes: reply.notes,
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `GET /v1/models`: OpenAI's list, or Anthropic's with an `anthropic-version` header.
async fn models(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let time = log::now();
    let keys = Keys::of(&headers);
    let wire = Wire::of_headers(&headers);
    let delivery = if app.require_key.as_deref().is_some_and(|required| wire.key(&keys) != Some(required)) {
        Delivery::json(401, &wire.error(401, "invalid API key"))
    } else {
        let ids = &app.script.models;
        Delivery::json(
            200,
            &match wire {
                Wire::OpenAi => openai::models(ids),
                Wire::Anthropic => anthropic::models(ids),
            },
        )
    };
    let outcome = Outcome::plain(delivery);
    record(&app, time, &Method::GET, uri.path(), Some(wire), &headers, keys, &[], &outcome);
    respond(outcome.delivery)
}

async fn not_found(State(app): State<Arc<App>>, method: Method, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    let time = log::now();
    let keys = Keys::of(&headers);
    let wire = Wire::of_headers(&headers);
    let bytes = read_body(body, app.max_body).await.unwrap_or_default();
    let message = format!("no route for {method} {}", uri.path());
    let outcome = Outcome::plain(Delivery::json(404, &wire.error(404, &message)));
    record(&app, time, &method, uri.path(), None, &headers, keys, &bytes, &outcome);
    respond(outcome.delivery)
}

/// Writes the log line of a request, if there is a log.
#[allow(clippy::too_many_arguments, reason = "one call per route; a struct would only rename them")]
fn record(
    app: &App,
    time: String,
    method: &Method,
    path: &str,
    wire: Option<Wire>,
    headers: &HeaderMap,
    keys: Keys,
    bytes: &[u8],
    outcome: &Outcome,
) {
    let Some(log) = &app.log else { return };
    let delivery = &outcome.delivery;
    let sent = delivery.sent_body();
    let response = if delivery.content_type == "application/json" {
        log::body_value(sent.as_bytes())
    } else {
        Value::String(sent)
    };
    let entry = Entry {
        seq: app.seq.fetch_add(1, Ordering::Relaxed) + 1,
        time,
        method: method.as_str().to_owned(),
        path: path.to_owned(),
        wire: wire.map(Wire::name),
        model: outcome.model.clone(),
        stream: outcome.stream,
        step: outcome.step,
        attempt: outcome.attempt,
        fault: outcome.fault,
        delay_ms: u64::try_from(outcome.delay.as_millis()).unwrap_or(u64::MAX),
        status: delivery.status,
        keys,
        headers: log::loggable_headers(headers),
        request_bytes: bytes.len(),
        request: if bytes.is_empty() { Value::Null } else { log::body_value(bytes) },
        response,
        notes: outcome.notes.clone(),
    };
    log.write(&entry);
}

#[derive(Debug)]
enum ReadError {
    TooLarge(usize),
    Broken(String),
}

/// Reads a whole request body, refusing more than `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Bytes, ReadError> {
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ReadError::Broken(e.to_string()))?;
        if buffer.len() + chunk.len() > max {
            return Err(ReadError::TooLarge(buffer.len() + chunk.len()));
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buffer))
}

/// One step of writing a response body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Write(Bytes),
    Sleep(Duration),
    /// Close the connection (the body errors out).
    Abort,
}

/// The writes and pauses that send `delivery`'s body.
fn ops(delivery: &Delivery) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut offset = 0;
    let cut = delivery.cut.unwrap_or(usize::MAX);
    let mut stall = delivery.stall;
    for (i, piece) in delivery.pieces.iter().enumerate() {
        if i > 0 && !delivery.interval.is_zero() {
            ops.push(Op::Sleep(delivery.interval));
        }
        let mut bytes = piece.as_bytes();
        let end = offset + bytes.len();
        // Split the piece at a stall or cut falling inside it (or at its start).
        loop {
            let next_stall = stall.filter(|(at, _)| *at < end && *at >= offset);
            let boundary = match next_stall {
                Some((at, _)) if at <= cut => at,
                _ if cut < end => cut,
                _ => break,
            };
            let (head, tail) = bytes.split_at(boundary - offset);
            if !head.is_empty() {
                ops.push(Op::Write(Bytes::copy_from_slice(head)));
            }
            offset = boundary;
            bytes = tail;
            if boundary == cut {
                ops.push(Op::Sleep(CUT_FLUSH));
                ops.push(Op::Abort);
                return ops;
            }
            if let Some((_, pause)) = next_stall {
                ops.push(Op::Sleep(pause));
                stall = None;
            }
        }
        if !bytes.is_empty() {
            ops.push(Op::Write(Bytes::copy_from_slice(bytes)));
        }
        offset = end;
    }
    if let Some((_, pause)) = stall {
        ops.push(Op::Sleep(pause));
    }
    if cut <= offset {
        ops.push(Op::Sleep(CUT_FLUSH));
        ops.push(Op::Abort);
    }
    ops
}

/// The HTTP response for `delivery`.
fn respond(delivery: Delivery) -> Response {
    let status = StatusCode::from_u16(delivery.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = Response::builder().status(status).header(header::CONTENT_TYPE, delivery.content_type);
    if delivery.content_type == "text/event-stream" {
        builder = builder.header(header::CACHE_CONTROL, "no-cache");
    }
    for (name, value) in &delivery.headers {
        builder = builder.header(*name, value);
    }
    if let Some(length) = delivery.declared_length {
        builder = builder.header(header::CONTENT_LENGTH, length);
    }
    let simple = delivery.content_type != "text/event-stream"
        && delivery.cut.is_none()
        && delivery.stall.is_none()
        && delivery.interval.is_zero();
    let body = if simple {
        Body::from(delivery.full_body())
    } else {
        let ops = ops(&delivery);
        Body::from_stream(futures_util::stream::unfold(ops.into_iter(), |mut ops| async move {
            loop {
                match ops.next()? {
                    Op::Write(bytes) => return Some((Ok(bytes), ops)),
                    Op::Sleep(pause) => tokio::time::sleep(pause).await,
                    Op::Abort => return Some((Err(io::Error::other("scripted cut")), ops)),
                }
            }
        }))
    };
    builder.body(body).unwrap_or_else(|error| {
        tracing::error!(%error, "could not build a response");
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    })
}

/// Binds, prints the ready line, serves until `stop` resolves, then gives in-flight
/// requests [`SHUTDOWN_GRACE`].
pub async fn run(app: App, bind: SocketAddr, stop: impl Future<Output = &'static str>) -> anyhow::Result<()> {
    let (listener, local) = elengtis_target_kit::http::listen(bind).await?;
    tracing::info!(%local, "model server listening");
    let stop = async {
        let why = stop.await;
        tracing::info!(why, "stopping");
    };
    elengtis_target_kit::http::serve_router(listener, router(Arc::new(app)), stop, SHUTDOWN_GRACE).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(pieces: &[&str]) -> Delivery {
        let mut d = Delivery::json(200, &Value::Null);
        d.pieces = pieces.iter().map(|p| (*p).to_owned()).collect();
        d
    }

    fn write(text: &str) -> Op {
        Op::Write(Bytes::copy_from_slice(text.as_bytes()))
    }

    #[test]
    fn plain_bodies_are_written_piece_by_piece() {
        assert_eq!(ops(&delivery(&["ab", "cd"])), [write("ab"), write("cd")]);
        let d = Delivery { interval: Duration::from_millis(5), ..delivery(&["ab", "cd"]) };
        assert_eq!(ops(&d), [write("ab"), Op::Sleep(Duration::from_millis(5)), write("cd")]);
    }

    #[test]
    fn stalls_and_cuts_split_pieces_at_their_offsets() {
        let pause = Duration::from_millis(7);
        let d = Delivery { stall: Some((3, pause)), ..delivery(&["ab", "cd"]) };
        assert_eq!(ops(&d), [write("ab"), write("c"), Op::Sleep(pause), write("d")]);
        let d = Delivery { stall: Some((2, pause)), ..delivery(&["ab", "cd"]) };
        assert_eq!(ops(&d), [write("ab"), Op::Sleep(pause), write("cd")]);
        let d = Delivery { cut: Some(3), ..delivery(&["ab", "cd"]) };
        assert_eq!(ops(&d), [write("ab"), write("c"), Op::Sleep(CUT_FLUSH), Op::Abort]);
        let d = Delivery { cut: Some(0), ..delivery(&["ab"]) };
        assert_eq!(ops(&d), [Op::Sleep(CUT_FLUSH), Op::Abort]);
        let d = Delivery { stall: Some((1, pause)), cut: Some(3), ..delivery(&["abcd"]) };
        assert_eq!(ops(&d), [write("a"), Op::Sleep(pause), write("bc"), Op::Sleep(CUT_FLUSH), Op::Abort]);
    }
}
