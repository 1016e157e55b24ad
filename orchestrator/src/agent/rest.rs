//! A black-box agent behind an HTTP endpoint (a `rest` target): the endpoint is the model and
//! the loop in one. The exercise POSTs the scenario's rendered user prompt as one JSON message
//! (`{"<message_field>": "…"}`, with the session id of the previous answer when the target
//! names a `session_field`) and reads the reply text at `reply_path` in the JSON answer.
//!
//! There are no tool calls to record: the outcome looks like an agent run with no tools — the
//! user's message and an assistant message with the reply in `messages`, one trajectory turn
//! whose `content` is the reply and whose `calls` are empty — and every HTTP attempt is an
//! [`Exchange`] (provider `rest`, model the URL's host) in the evidence. The campaign's model is
//! not asked and the scenario's system prompt is not sent.
//!
//! Every request has the target's deadline (`timeout_s`, the whole answer included). Connection
//! failures, timeouts, cut bodies, 429 and 5xx are retried up to `max_retries` times with
//! exponential backoff and jitter, `Retry-After` honoured up to [`http::MAX_WAIT`]; other
//! statuses and unreadable answers are not. A failure ends the exercise as `provider_error`,
//! naming the URL, the status and what was wrong. Header values are read from the environment
//! for each request and never recorded: an answer or error that echoes one has it replaced by
//! `<redacted>`.

use std::time::{Duration, Instant};

use elengtis_core::agent::{AgentOutcome, EndpointUsage, Exchange, ModelErrorKind, ModelRequest, Termination};
use elengtis_core::format::campaign::RestTransport;
use elengtis_core::format::quote;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::turn;
use crate::model::http::{self, HttpClient, TransportError};

/// The exchange's provider name for a rest endpoint.
pub const PROVIDER: &str = "rest";

/// First retry delay, doubled per retry (with jitter), as the model providers' default.
const BACKOFF: Duration = Duration::from_millis(crate::model::providers::DEFAULT_BACKOFF_MS);

/// Longest excerpt of an answer quoted in an error.
const EXCERPT_CHARS: usize = 300;

/// One trial's client of a `rest` target.
#[derive(Debug)]
pub struct RestAgent<'a> {
    target: &'a str,
    config: &'a RestTransport,
    http: HttpClient,
    /// Where the message is POSTed: the target's `url`, or the address of its container.
    url: String,
    host: String,
    /// The session id the endpoint returned last (targets with a `session_field`).
    session: Option<Value>,
}

/// Why a message got no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestFailure {
    /// What kind (as a model failure: the trial ends as `provider_error`).
    pub kind: ModelErrorKind,
    /// What failed, reading "failed to …", naming the URL and status.
    pub detail: String,
}

/// The outcome of one attempt, as the retry loop sees it.
enum Verdict {
    Reply(String),
    Fatal(ModelErrorKind, String),
    Retry { kind: ModelErrorKind, detail: String, wait: Option<Duration> },
}

impl<'a> RestAgent<'a> {
    /// The client of target `target` (its id, for messages) configured by `config`, over the
    /// run's provider connections `http` (which follow no redirects).
    pub fn new(target: &'a str, config: &'a RestTransport, http: HttpClient) -> Self {
        RestAgent { target, config, http, url: String::new(), host: String::new(), session: None }
            .at(config.url.clone())
    }

    /// The same client, POSTing to `url` instead (a `rest` target with a `container`: the
    /// address the runner reaches the container's port at, followed by the target's path).
    pub fn at(mut self, url: String) -> Self {
        self.host =
            url::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| url.clone());
        self.url = url;
        self
    }

    /// Send the user's message and record the reply as an agent run with no tools: one turn
    /// (`model_stop`), or `provider_error` when the endpoint fails after its retries or
    /// answers something unreadable.
    pub async fn exercise(&mut self, user: &str) -> AgentOutcome {
        let user_message = turn::user_message(user);
        let mut out = AgentOutcome {
            messages: vec![user_message.clone()],
            requests: vec![ModelRequest { step: 0, messages: vec![user_message], tools: Vec::new() }],
            model_turns: 1,
            endpoint: Some(EndpointUsage::default()),
            ..AgentOutcome::default()
        };
        match self.send(0, user, &mut out).await {
            Ok(reply) => {
                out.messages.push(json!({"role": "assistant", "content": reply}));
                out.trajectory.push(json!({"step": 0, "content": reply, "calls": []}));
                out.termination = Some(Termination::ModelStop);
            }
            Err(failure) => {
                out.provider_error = Some(failure.detail);
                out.provider_error_kind = Some(failure.kind);
                out.termination = Some(Termination::ProviderError);
            }
        }
        out
    }

    /// The request headers, read from the environment now (every value is a secret).
    fn headers(&self) -> Result<Vec<(String, String)>, RestFailure> {
        let mut headers = Vec::new();
        for (name, variable) in &self.config.headers {
            match std::env::var(&variable.env) {
                Ok(value) if !value.is_empty() => headers.push((name.clone(), value)),
                _ => {
                    return Err(RestFailure {
                        kind: ModelErrorKind::Configuration,
                        detail: format!(
                            "failed to read the header `{name}` of rest target `{}`: environment variable {} is not set",
                            self.target, variable.env
                        ),
                    });
                }
            }
        }
        Ok(headers)
    }

    /// The request body of `message`: the message field, and the session id when there is one.
    fn body(&self, message: &str) -> Value {
        let mut body = Map::new();
        body.insert(self.config.message_field.clone(), json!(message));
        if let (Some(field), Some(id)) = (&self.config.session_field, &self.session) {
            body.insert(field.clone(), id.clone());
        }
        Value::Object(body)
    }

    /// Send one message (turn `step`), retrying as configured; the reply text. Every attempt is
    /// recorded in `out` (its exchange and its bytes).
    pub async fn send(&mut self, step: u32, message: &str, out: &mut AgentOutcome) -> Result<String, RestFailure> {
        let headers = self.headers()?;
        let secrets: Vec<&str> = headers.iter().map(|(_, value)| value.as_str()).collect();
        let scrub = |text: &str| {
            secrets.iter().filter(|s| s.len() >= 4).fold(text.to_owned(), |t, s| t.replace(s, "<redacted>"))
        };
        let body = self.body(message);
        let bytes = serde_json::to_vec(&body).map_err(|e| RestFailure {
            kind: ModelErrorKind::Configuration,
            detail: format!("failed to serialise the message to rest target `{}`: {e}", self.target),
        })?;
        let config = self.config;
        let url = self.url.clone();
        let url = url.as_str();
        let deadline = Duration::from_secs(config.timeout_s.into());
        let (mut attempt, mut retries) = (0u32, 0u32);
        loop {
            let span = tracing::info_span!("rest_request", target = %self.target, host = %self.host, step, attempt);
            let started = Instant::now();
            let answer = http::post(&self.http, url, &headers, bytes.clone(), deadline).instrument(span.clone()).await;
            let usage = out.endpoint.get_or_insert_with(EndpointUsage::default);
            usage.requests += 1;
            usage.bytes_sent += bytes.len() as u64;
            let mut exchange = Exchange {
                provider: PROVIDER.to_owned(),
                model: self.host.clone(),
                step,
                attempt,
                request: body.clone(),
                status: None,
                response: Value::Null,
                latency_ms: (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0,
                error: None,
                usage: Default::default(),
                fixture: None,
                budget_charge_usd: None,
            };
            let verdict = match answer {
                Err(e) => transport_verdict(&e, &mut exchange, config.timeout_s),
                Ok(answer) => {
                    usage.bytes_received += answer.body.len() as u64;
                    exchange.status = Some(answer.status);
                    let text = scrub(&answer.body);
                    let parsed = serde_json::from_str::<Value>(&text).ok();
                    exchange.response = parsed.clone().unwrap_or_else(|| Value::String(text.clone()));
                    match answer.status {
                        200..=299 => match self.read_reply(parsed.as_ref(), &text) {
                            Ok(reply) => Verdict::Reply(reply),
                            Err(why) => {
                                Verdict::Fatal(ModelErrorKind::Malformed, format!("status {}: {why}", answer.status))
                            }
                        },
                        status => {
                            let detail = format!("status {status}: {}", excerpt_of(&text));
                            if status == 429 || status >= 500 {
                                Verdict::Retry { kind: ModelErrorKind::Status, detail, wait: answer.retry_after }
                            } else {
                                Verdict::Fatal(ModelErrorKind::Status, detail)
                            }
                        }
                    }
                }
            };
            span.in_scope(
                || tracing::debug!(status = ?exchange.status, latency_ms = exchange.latency_ms, "rest answer"),
            );
            match verdict {
                Verdict::Reply(reply) => {
                    self.keep_session(&exchange.response);
                    out.exchanges.push(exchange);
                    return Ok(reply);
                }
                Verdict::Fatal(kind, detail) => {
                    exchange.error = Some(scrub(&detail));
                    out.exchanges.push(exchange);
                    let detail = format!(
                        "failed to get a reply from rest target `{}` at {url} (attempt {}): {detail}",
                        self.target,
                        attempt + 1
                    );
                    return Err(RestFailure { kind, detail: scrub(&detail) });
                }
                Verdict::Retry { kind, detail, wait } => {
                    exchange.error = Some(scrub(&detail));
                    out.exchanges.push(exchange);
                    if retries < config.max_retries {
                        let wait = http::backoff(BACKOFF, retries).max(wait.unwrap_or_default()).min(http::MAX_WAIT);
                        retries += 1;
                        attempt += 1;
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    let detail = format!(
                        "failed to get a reply from rest target `{}` at {url} after {}: {detail}",
                        self.target,
                        quote::count(attempt + 1, "attempt")
                    );
                    return Err(RestFailure { kind, detail: scrub(&detail) });
                }
            }
        }
    }

    /// The reply text of a successful answer: the string at `reply_path`.
    fn read_reply(&self, parsed: Option<&Value>, text: &str) -> Result<String, String> {
        let pointer = self.config.reply_path.as_str();
        let Some(answer) = parsed else {
            return Err(if text.trim().is_empty() {
                format!("the answer has no body, so no reply at reply_path `{pointer}`")
            } else {
                format!("the answer is not JSON, so no reply at reply_path `{pointer}`: {}", excerpt_of(text))
            });
        };
        match answer.pointer(pointer) {
            Some(Value::String(reply)) => Ok(reply.clone()),
            Some(other) => Err(format!("reply_path `{pointer}` holds {}, not a string", describe(other))),
            None => Err(format!("the answer has nothing at reply_path `{pointer}` ({})", nearest(answer, pointer))),
        }
    }

    /// Keep the session id of a successful answer (its top-level `session_field`).
    fn keep_session(&mut self, answer: &Value) {
        if let Some(field) = &self.config.session_field
            && let Some(id) = answer.get(field).filter(|v| !v.is_null())
        {
            self.session = Some(id.clone());
        }
    }
}

/// The verdict on an attempt that got no whole answer.
fn transport_verdict(e: &TransportError, exchange: &mut Exchange, timeout_s: u32) -> Verdict {
    let detail = match e {
        TransportError::Timeout(_) => {
            format!("timeout: no whole answer within the deadline of {timeout_s} s (timeout_s)")
        }
        other => format!("{}: {other}", other.class()),
    };
    match e {
        TransportError::TooLarge { status } => {
            exchange.status = Some(*status);
            Verdict::Fatal(ModelErrorKind::Malformed, detail)
        }
        TransportError::Body { status, .. } => {
            exchange.status = Some(*status);
            Verdict::Retry { kind: ModelErrorKind::Malformed, detail, wait: None }
        }
        TransportError::Connect(_) | TransportError::Timeout(_) => {
            Verdict::Retry { kind: ModelErrorKind::Unreachable, detail, wait: None }
        }
    }
}

/// An answer's text as quoted in an error.
fn excerpt_of(text: &str) -> String {
    if text.trim().is_empty() {
        return "(no body)".to_owned();
    }
    let head: String = text.chars().take(EXCERPT_CHARS).collect();
    if head.len() < text.len() { format!("{head}…") } else { head }
}

/// What a JSON value is, in words: its type and a glimpse of it.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({})", quote::excerpt(s)),
        Value::Array(items) => format!("an array of {}", quote::count(items.len(), "item")),
        Value::Object(map) if map.is_empty() => "an empty object".to_owned(),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().take(10).map(|k| format!("`{k}`")).collect();
            let more = if map.len() > 10 { format!(" and {} more", map.len() - 10) } else { String::new() };
            format!("an object with keys {}{more}", keys.join(", "))
        }
    }
}

/// Where a pointer that names nothing stops resolving: the deepest prefix that resolves and
/// what it holds.
fn nearest(answer: &Value, pointer: &str) -> String {
    let tokens: Vec<&str> = pointer.split('/').skip(1).collect();
    let mut found = (String::new(), answer);
    for i in 1..=tokens.len() {
        let prefix = format!("/{}", tokens[..i].join("/"));
        match answer.pointer(&prefix) {
            Some(value) => found = (prefix, value),
            None => break,
        }
    }
    let (prefix, value) = found;
    if prefix.is_empty() {
        format!("the answer is {}", describe(value))
    } else {
        format!("`{prefix}` is {}", describe(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(reply_path: &str, session: Option<&str>) -> RestTransport {
        RestTransport {
            url: "http://127.0.0.1:9/chat".into(),
            headers: Default::default(),
            message_field: "message".into(),
            reply_path: reply_path.into(),
            session_field: session.map(str::to_owned),
            timeout_s: 1,
            max_retries: 0,
            egress: "local".into(),
            container: None,
        }
    }

    #[test]
    fn the_reply_is_read_at_its_pointer_and_a_miss_names_the_pointer_and_what_was_found() {
        let config = config("/reply/text", None);
        let http = HttpClient::new().expect("client");
        let agent = RestAgent::new("t", &config, http);
        let answer = json!({"reply": {"text": "hello", "n": 1}});
        assert_eq!(agent.read_reply(Some(&answer), ""), Ok("hello".to_owned()));
        let wrong = json!({"reply": {"text": 42}});
        let why = agent.read_reply(Some(&wrong), "").unwrap_err();
        assert_eq!(why, "reply_path `/reply/text` holds a number (42), not a string");
        let missing = json!({"reply": {"body": "x"}});
        let why = agent.read_reply(Some(&missing), "").unwrap_err();
        assert!(
            why.contains("nothing at reply_path `/reply/text`")
                && why.contains("`/reply` is an object with keys `body`"),
            "{why}"
        );
        let why = agent.read_reply(Some(&json!([1])), "").unwrap_err();
        assert!(why.contains("the answer is an array of 1 item"), "{why}");
        let why = agent.read_reply(None, "<html>oops</html>").unwrap_err();
        assert!(why.contains("not JSON") && why.contains("<html>oops</html>"), "{why}");
        assert!(agent.read_reply(None, " ").unwrap_err().contains("no body"));
    }

    #[test]
    fn the_session_id_of_an_answer_goes_back_with_the_next_message() {
        let config = config("/r", Some("session_id"));
        let mut agent = RestAgent::new("t", &config, HttpClient::new().expect("client"));
        assert_eq!(agent.body("hi"), json!({"message": "hi"}));
        agent.keep_session(&json!({"r": "x", "session_id": "s-1"}));
        assert_eq!(agent.body("again"), json!({"message": "again", "session_id": "s-1"}));
        agent.keep_session(&json!({"r": "x"}));
        assert_eq!(agent.body("more")["session_id"], "s-1", "an answer without one keeps the last");
    }

    #[tokio::test]
    async fn an_endpoint_that_cannot_be_reached_is_a_provider_error_naming_the_url() {
        let mut config = config("/r", None);
        config.url = "http://127.0.0.1:9/chat".into();
        let mut agent = RestAgent::new("t", &config, HttpClient::new().expect("client"));
        let out = agent.exercise("hello").await;
        assert_eq!(out.termination, Some(Termination::ProviderError));
        let detail = out.provider_error.expect("an error");
        assert!(detail.contains("http://127.0.0.1:9/chat") && detail.contains("after 1 attempt"), "{detail}");
        assert_eq!(out.exchanges.len(), 1);
        assert_eq!(out.exchanges[0].provider, "rest");
        assert_eq!(out.exchanges[0].model, "127.0.0.1");
        assert_eq!(out.endpoint.map(|e| e.requests), Some(1));
        assert!(out.trajectory.is_empty());
        assert_eq!(out.messages, vec![json!({"role": "user", "content": "hello"})]);
    }
}
