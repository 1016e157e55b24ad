//! The bounded frame reader in front of rmcp's line transport, and how a failed request is
//! explained from what it saw of the server's output.

use serde::de::DeserializeSeed as _;
use serde_json::Value;

use super::{Limits, TargetError};

/// What a [`FrameGuard`] saw of the server's output, kept to explain a failed request.
#[derive(Debug, Default)]
pub(super) struct FrameLog {
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

pub(super) type SharedFrameLog = std::sync::Arc<std::sync::Mutex<FrameLog>>;

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
    pub(super) log: SharedFrameLog,
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
pub(super) enum Expect {
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
pub(super) fn explain(log: Option<&SharedFrameLog>, expect: Expect, error: TargetError) -> TargetError {
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
