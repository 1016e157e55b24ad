//! Faults: what a script can make go wrong, which attempt of a request they hit, and how
//! they change the reply or the bytes on the wire.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Mutex, PoisonError},
    time::Duration,
};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::reply::{Arguments, Finish, Reply, prefix};

/// One fault rule of a step (or of the whole script): on which attempt it applies, how
/// long to wait before answering, and what goes wrong. A rule with neither `delay_ms` nor
/// `fault` answers normally (and so overrides the script-wide rules for that attempt).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// The attempt it applies to (0 = first time this exact request body is seen); absent:
    /// every attempt.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// Wait this long before sending anything (a slow model).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    #[serde(default)]
    pub fault: Option<Fault>,
}

impl FaultRule {
    pub fn applies_to(&self, attempt: u32) -> bool {
        self.attempt.is_none_or(|a| a == attempt)
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.unwrap_or(0))
    }
}

/// What goes wrong.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// An HTTP error status; the body is the wire format's error object unless `body` is
    /// given (a string is sent as is, anything else as JSON).
    Status {
        status: u16,
        /// `Retry-After` header, in seconds.
        #[serde(default)]
        retry_after: Option<u64>,
        /// `retry-after-ms` header (read by OpenAI's SDKs).
        #[serde(default)]
        retry_after_ms: Option<u64>,
        #[serde(default)]
        body: Option<Value>,
    },
    /// A pause of `ms` after the first `after_bytes` bytes of the body (default: half).
    Stall {
        ms: u64,
        #[serde(default)]
        after_bytes: Option<usize>,
    },
    /// The full length is advertised (`Content-Length`, or a chunked stream), but only the
    /// first `after_bytes` bytes (default: half) are sent before the connection is closed.
    Truncate {
        #[serde(default)]
        after_bytes: Option<usize>,
    },
    /// A complete HTTP response whose JSON is cut in half (in a stream: one event's data).
    InvalidJson {},
    /// Status 200 with an empty body.
    EmptyBody {},
    /// Status 200, valid JSON of the wrong shape (`body`, or a fixed object).
    WrongShape {
        #[serde(default)]
        body: Option<Value>,
    },
    /// Every tool call's arguments replaced by `value` (default `[1,2]`): not a JSON object.
    BadArguments {
        #[serde(default)]
        value: Option<String>,
    },
    /// Every tool call names a tool the request did not offer.
    UnknownTool {
        #[serde(default)]
        name: Option<String>,
    },
    /// The answer hits the token limit: text cut in half, no tool call, `finish_reason:
    /// "length"` / `stop_reason: "max_tokens"`.
    Length {},
    /// No usage block.
    NoUsage {},
    /// A stream that ends cleanly after `after_events` events (default: half), before
    /// `[DONE]` / `message_stop`. Without streaming: as `truncate`.
    StreamCut {
        #[serde(default)]
        after_events: Option<usize>,
    },
}

impl Fault {
    /// The `kind` name, for the request log.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Status { .. } => "status",
            Self::Stall { .. } => "stall",
            Self::Truncate { .. } => "truncate",
            Self::InvalidJson {} => "invalid_json",
            Self::EmptyBody {} => "empty_body",
            Self::WrongShape { .. } => "wrong_shape",
            Self::BadArguments { .. } => "bad_arguments",
            Self::UnknownTool { .. } => "unknown_tool",
            Self::Length {} => "length",
            Self::NoUsage {} => "no_usage",
            Self::StreamCut { .. } => "stream_cut",
        }
    }

    /// Checks what serde cannot: a real HTTP error status.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::Status { status, .. } if !(400..=599).contains(status) => {
                Err(format!("status {status} is not an HTTP error status (400-599)"))
            }
            _ => Ok(()),
        }
    }
}

/// The default name of the `unknown_tool` fault.
const UNKNOWN_TOOL: &str = "tool_that_was_not_offered";

/// Applies the faults that change the answer itself (before any rendering).
pub fn apply_to_reply(fault: &Fault, reply: &mut Reply, offered: &[String]) {
    match fault {
        Fault::BadArguments { value } => {
            let value = value.as_deref().unwrap_or("[1,2]");
            for call in &mut reply.calls {
                call.arguments = Arguments::Raw(value.to_owned());
            }
        }
        Fault::UnknownTool { name } => {
            let mut name = name.clone().unwrap_or_else(|| UNKNOWN_TOOL.to_owned());
            while offered.contains(&name) {
                name.push('_');
            }
            for call in &mut reply.calls {
                call.name.clone_from(&name);
            }
        }
        Fault::Length {} => {
            let text = reply.text.take().unwrap_or_default();
            reply.text = Some(prefix(&text, text.len() / 2).to_owned());
            reply.calls.clear();
            reply.finish = Finish::Length;
        }
        Fault::NoUsage {} => reply.usage = false,
        _ => {}
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` line (Anthropic names every event; OpenAI names none).
    pub event: Option<String>,
    pub data: String,
    /// A comment line instead of an event (`: OPENROUTER PROCESSING`).
    pub comment: bool,
}

impl SseEvent {
    pub fn data(data: String) -> Self {
        Self { event: None, data, comment: false }
    }

    pub fn named(event: &str, data: &Value) -> Self {
        Self { event: Some(event.to_owned()), data: data.to_string(), comment: false }
    }

    pub fn comment(text: &str) -> Self {
        Self { event: None, data: text.to_owned(), comment: true }
    }

    /// The event as sent, blank line included.
    pub fn encode(&self) -> String {
        if self.comment {
            return format!(": {}\n\n", self.data);
        }
        match &self.event {
            Some(event) => format!("event: {event}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// A rendered answer: one JSON document, or a stream of events.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Json(Value),
    Sse(Vec<SseEvent>),
}

/// How a response goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub content_type: &'static str,
    /// The body, in the pieces it is written in (one per SSE event).
    pub pieces: Vec<String>,
    /// Pause between pieces (the script's `stream.interval_ms`).
    pub interval: Duration,
    /// Pause once this many bytes are out.
    pub stall: Option<(usize, Duration)>,
    /// Close the connection once this many bytes are out (the rest is never sent).
    pub cut: Option<usize>,
    /// `Content-Length` to advertise; `None`: chunked (streams) or computed.
    pub declared_length: Option<usize>,
}

impl Delivery {
    fn new(status: u16, content_type: &'static str, pieces: Vec<String>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            content_type,
            pieces,
            interval: Duration::ZERO,
            stall: None,
            cut: None,
            declared_length: None,
        }
    }

    /// A JSON document with status `status`.
    pub fn json(status: u16, value: &Value) -> Self {
        Self::new(status, "application/json", vec![value.to_string()])
    }

    /// The whole intended body.
    pub fn full_body(&self) -> String {
        self.pieces.concat()
    }

    /// The bytes actually sent (the intended body up to a cut), as text.
    pub fn sent_body(&self) -> String {
        let body = self.full_body();
        match self.cut {
            Some(cut) => prefix(&body, cut).to_owned(),
            None => body,
        }
    }
}

/// The body-level side of a fault: how the rendered answer goes out. `error_body` renders
/// the wire format's error object for a status and message.
pub fn deliver(
    fault: Option<&Fault>,
    body: Body,
    interval: Duration,
    error_body: impl Fn(u16, &str) -> Value,
) -> Delivery {
    let (content_type, mut events, json) = match body {
        Body::Json(value) => ("application/json", Vec::new(), Some(value)),
        Body::Sse(events) => ("text/event-stream", events, None),
    };
    let pieces = |events: &[SseEvent]| events.iter().map(SseEvent::encode).collect::<Vec<_>>();
    let normal = |events: &[SseEvent]| match &json {
        Some(value) => Delivery::json(200, value),
        None => Delivery { interval, ..Delivery::new(200, content_type, pieces(events)) },
    };
    let Some(fault) = fault else { return normal(&events) };
    match fault {
        Fault::Status { status, retry_after, retry_after_ms, body } => {
            let mut delivery = match body {
                Some(Value::String(text)) => Delivery::new(*status, "text/plain; charset=utf-8", vec![text.clone()]),
                Some(value) => Delivery::json(*status, value),
                None => Delivery::json(*status, &error_body(*status, &status_message(*status))),
            };
            if let Some(seconds) = retry_after {
                delivery.headers.push(("retry-after", seconds.to_string()));
            }
            if let Some(ms) = retry_after_ms {
                delivery.headers.push(("retry-after-ms", ms.to_string()));
            }
            delivery
        }
        Fault::Stall { ms, after_bytes } => {
            let mut delivery = normal(&events);
            let total = delivery.full_body().len();
            delivery.stall = Some((after_bytes.unwrap_or(total / 2).min(total), Duration::from_millis(*ms)));
            delivery
        }
        Fault::Truncate { after_bytes } => truncated(normal(&events), *after_bytes),
        Fault::StreamCut { after_events } => {
            if json.is_some() {
                return truncated(normal(&events), None);
            }
            let keep = after_events.unwrap_or(events.len() / 2).min(events.len().saturating_sub(1));
            events.truncate(keep);
            normal(&events)
        }
        Fault::InvalidJson {} => match &json {
            Some(value) => {
                let text = value.to_string();
                let half = prefix(&text, (text.len() / 2).max(1)).to_owned();
                Delivery::new(200, content_type, vec![half])
            }
            None => {
                // The middle event that carries JSON (not `[DONE]`, not a comment).
                let candidates: Vec<usize> =
                    (0..events.len()).filter(|&i| !events[i].comment && events[i].data.starts_with('{')).collect();
                if let Some(&i) = candidates.get(candidates.len() / 2) {
                    let data = &events[i].data;
                    events[i].data = prefix(data, (data.len() / 2).max(1)).to_owned();
                }
                normal(&events)
            }
        },
        Fault::EmptyBody {} => Delivery::new(200, content_type, Vec::new()),
        Fault::WrongShape { body } => {
            let value = body.clone().unwrap_or_else(
                || json!({"object": "unexpected", "result": {"text": "this is not the response shape you asked for"}}),
            );
            Delivery::json(200, &value)
        }
        Fault::BadArguments { .. } | Fault::UnknownTool { .. } | Fault::Length {} | Fault::NoUsage {} => {
            normal(&events)
        }
    }
}

/// `delivery` advertising its whole length but cut after `after_bytes` (default: half).
fn truncated(mut delivery: Delivery, after_bytes: Option<usize>) -> Delivery {
    let total = delivery.full_body().len();
    delivery.cut = Some(after_bytes.unwrap_or(total / 2).min(total.saturating_sub(1)));
    if delivery.content_type == "application/json" {
        delivery.declared_length = Some(total);
    }
    delivery
}

/// The error message of a scripted status.
pub fn status_message(status: u16) -> String {
    let what = match status {
        400 => "bad request",
        401 => "invalid API key",
        403 => "forbidden",
        404 => "not found",
        408 => "request timeout",
        413 => "request too large",
        429 => "rate limit exceeded",
        500 => "internal server error",
        502 => "bad gateway",
        503 => "service unavailable",
        504 => "gateway timeout",
        529 => "overloaded",
        _ => "error",
    };
    format!("{what} (scripted fault)")
}

/// Counts how often each exact request was seen, so a fault can hit attempt 0 and spare
/// the retry. Bounded: past `capacity` keys the oldest is forgotten.
#[derive(Debug)]
pub struct Attempts {
    capacity: usize,
    seen: Mutex<Seen>,
}

/// Attempt counts by request hash, and the hashes oldest first.
#[derive(Debug, Default)]
struct Seen {
    counts: HashMap<[u8; 32], u32>,
    order: VecDeque<[u8; 32]>,
}

impl Attempts {
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), seen: Mutex::new(Seen::default()) }
    }

    /// The attempt number of this sighting of `key` (0 the first time).
    pub fn next(&self, key: [u8; 32]) -> u32 {
        let mut guard = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let Seen { counts, order } = &mut *guard;
        if let Some(count) = counts.get_mut(&key) {
            *count = count.saturating_add(1);
            return *count;
        }
        if order.len() >= self.capacity
            && let Some(oldest) = order.pop_front()
        {
            counts.remove(&oldest);
        }
        counts.insert(key, 0);
        order.push_back(key);
        0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reply::Call;

    fn rule(text: &str) -> Result<FaultRule, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn rules_parse_strictly() {
        let r = rule(r#"{"attempt":0,"fault":{"kind":"status","status":429,"retry_after":2}}"#).unwrap();
        assert!(r.applies_to(0) && !r.applies_to(1));
        assert_eq!(
            r.fault,
            Some(Fault::Status { status: 429, retry_after: Some(2), retry_after_ms: None, body: None })
        );
        let r = rule(r#"{"fault":{"kind":"invalid_json"}}"#).unwrap();
        assert!(r.applies_to(0) && r.applies_to(7));
        assert!(rule(r#"{"fault":{"kind":"invalid_json","x":1}}"#).unwrap_err().contains("unknown field"));
        assert!(rule(r#"{"fault":{"kind":"status","status":429,"retry":1}}"#).unwrap_err().contains("unknown field"));
        assert!(rule(r#"{"fault":{"kind":"explode"}}"#).unwrap_err().contains("unknown variant"));
        assert!(rule(r#"{"attempts":1}"#).unwrap_err().contains("unknown field"));
        assert!(Fault::Status { status: 200, retry_after: None, retry_after_ms: None, body: None }.validate().is_err());
    }

    fn reply_with_calls() -> Reply {
        Reply {
            text: Some("abcdef".into()),
            refusal: None,
            calls: vec![Call { id: "c".into(), name: "read_note".into(), arguments: Arguments::Json(json!({})) }],
            finish: Finish::ToolCalls,
            usage: true,
            notes: Vec::new(),
        }
    }

    #[test]
    fn reply_faults_change_the_answer() {
        let mut reply = reply_with_calls();
        apply_to_reply(&Fault::BadArguments { value: None }, &mut reply, &[]);
        assert_eq!(reply.calls[0].arguments, Arguments::Raw("[1,2]".into()));

        let mut reply = reply_with_calls();
        let offered = vec![UNKNOWN_TOOL.to_owned()];
        apply_to_reply(&Fault::UnknownTool { name: None }, &mut reply, &offered);
        assert_eq!(reply.calls[0].name, format!("{UNKNOWN_TOOL}_"));

        let mut reply = reply_with_calls();
        apply_to_reply(&Fault::Length {}, &mut reply, &[]);
        assert_eq!((reply.text.as_deref(), reply.calls.len(), reply.finish), (Some("abc"), 0, Finish::Length));

        let mut reply = reply_with_calls();
        apply_to_reply(&Fault::NoUsage {}, &mut reply, &[]);
        assert!(!reply.usage);
    }

    fn no_error(status: u16, message: &str) -> Value {
        json!({"status": status, "message": message})
    }

    fn events() -> Vec<SseEvent> {
        vec![
            SseEvent::data(r#"{"a":1}"#.into()),
            SseEvent::data(r#"{"bb":2}"#.into()),
            SseEvent::data(r#"{"ccc":3}"#.into()),
            SseEvent::data("[DONE]".into()),
        ]
    }

    #[test]
    fn body_faults_shape_the_delivery() {
        let doc = json!({"id": "x", "choices": [1, 2, 3]});
        let d = deliver(None, Body::Json(doc.clone()), Duration::ZERO, no_error);
        assert_eq!((d.status, d.full_body()), (200, doc.to_string()));

        let status = Fault::Status { status: 429, retry_after: Some(3), retry_after_ms: None, body: None };
        let d = deliver(Some(&status), Body::Json(doc.clone()), Duration::ZERO, no_error);
        assert_eq!(d.status, 429);
        assert_eq!(d.headers, [("retry-after", "3".to_owned())]);
        assert!(d.full_body().contains("rate limit exceeded"));

        let d =
            deliver(Some(&Fault::Truncate { after_bytes: None }), Body::Json(doc.clone()), Duration::ZERO, no_error);
        let total = doc.to_string().len();
        assert_eq!((d.declared_length, d.cut), (Some(total), Some(total / 2)));
        assert_eq!(d.sent_body().len(), total / 2);

        let d = deliver(Some(&Fault::InvalidJson {}), Body::Json(doc.clone()), Duration::ZERO, no_error);
        assert!(serde_json::from_str::<Value>(&d.full_body()).is_err());

        let d = deliver(Some(&Fault::EmptyBody {}), Body::Json(doc.clone()), Duration::ZERO, no_error);
        assert_eq!((d.status, d.full_body()), (200, String::new()));

        let d = deliver(Some(&Fault::WrongShape { body: None }), Body::Sse(events()), Duration::ZERO, no_error);
        assert_eq!(d.content_type, "application/json");
        assert!(serde_json::from_str::<Value>(&d.full_body()).is_ok());
    }

    #[test]
    fn stream_faults_cut_or_corrupt_events() {
        let d = deliver(Some(&Fault::StreamCut { after_events: None }), Body::Sse(events()), Duration::ZERO, no_error);
        assert_eq!(d.pieces.len(), 2);
        assert!(!d.full_body().contains("[DONE]"));
        let d =
            deliver(Some(&Fault::StreamCut { after_events: Some(9) }), Body::Sse(events()), Duration::ZERO, no_error);
        assert_eq!(d.pieces.len(), 3, "a cut stream never reaches its terminator");

        let d = deliver(Some(&Fault::InvalidJson {}), Body::Sse(events()), Duration::ZERO, no_error);
        let broken: Vec<_> = d
            .pieces
            .iter()
            .filter(|p| p.starts_with("data: {") && serde_json::from_str::<Value>(p[6..].trim()).is_err())
            .collect();
        assert_eq!(broken, ["data: {\"bb\n\n"], "the middle event's JSON, cut in half");
        assert!(d.full_body().ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn attempts_count_per_key_and_stay_bounded() {
        let attempts = Attempts::new(2);
        assert_eq!([attempts.next([1; 32]), attempts.next([1; 32]), attempts.next([2; 32])], [0, 1, 0]);
        assert_eq!(attempts.next([1; 32]), 2);
        assert_eq!(attempts.next([3; 32]), 0); // forgets key 1
        assert_eq!(attempts.next([1; 32]), 0);
    }
}
