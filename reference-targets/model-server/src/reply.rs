//! The answer the script chose, before a wire format renders it.

use serde::Deserialize;
use serde_json::Value;

/// One assistant answer, wire-independent.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// Assistant text (`None`: no text part).
    pub text: Option<String>,
    /// A refusal (OpenAI `message.refusal`; Anthropic `stop_reason: "refusal"`).
    pub refusal: Option<String>,
    /// Tool calls, in order (several: parallel calls).
    pub calls: Vec<Call>,
    pub finish: Finish,
    /// Whether the usage block is sent (the `no_usage` fault clears it).
    pub usage: bool,
    /// What the script could not do as written (no tool offered matched, a derived value
    /// found nothing, …); written to the request log.
    pub notes: Vec<String>,
}

impl Reply {
    /// A plain text answer that ends the turn.
    pub fn text(text: &str) -> Self {
        Self {
            text: Some(text.to_owned()),
            refusal: None,
            calls: Vec::new(),
            finish: Finish::Stop,
            usage: true,
            notes: Vec::new(),
        }
    }

    /// Bytes of generated output: text, refusal, tool names and arguments.
    pub fn output_bytes(&self) -> usize {
        let text = self.text.as_deref().map_or(0, str::len) + self.refusal.as_deref().map_or(0, str::len);
        text + self.calls.iter().map(|c| c.name.len() + c.arguments.to_wire_string().len()).sum::<usize>()
    }
}

/// One tool call of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: Arguments,
}

/// Tool call arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    /// A JSON value (a well-behaved model: always an object).
    Json(Value),
    /// Text sent as is, JSON or not (the `bad_arguments` fault).
    Raw(String),
}

impl Arguments {
    /// The arguments as OpenAI sends them: a string holding JSON (or the raw text).
    pub fn to_wire_string(&self) -> String {
        match self {
            Self::Json(value) => value.to_string(),
            Self::Raw(text) => text.clone(),
        }
    }

    /// The arguments as Anthropic's `input`: the JSON value; raw text that parses as JSON
    /// is sent as that value (e.g. an array), other text as a JSON string.
    pub fn to_input(&self) -> Value {
        match self {
            Self::Json(value) => value.clone(),
            Self::Raw(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())),
        }
    }
}

/// Why the answer ended, in OpenAI's words; [`Finish::anthropic`] maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
}

impl Finish {
    pub fn openai(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
        }
    }

    /// Anthropic's `stop_reason`; `refusal` whenever the reply is a refusal.
    pub fn anthropic(self, refusal: bool) -> &'static str {
        match self {
            _ if refusal => "refusal",
            Self::Stop => "end_turn",
            Self::ToolCalls => "tool_use",
            Self::Length => "max_tokens",
            Self::ContentFilter => "refusal",
        }
    }
}

/// Token counts (and optional cost) reported with a reply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    /// OpenRouter's `usage.cost`, when the script prices tokens.
    pub cost: Option<f64>,
}

impl Usage {
    /// Plausible counts: a token per four bytes of request body and of output, at least one
    /// each.
    pub fn estimate(request_bytes: usize, reply: &Reply, prices: Option<(f64, f64)>) -> Self {
        let prompt = tokens(request_bytes);
        let completion = tokens(reply.output_bytes());
        let cost = prices.map(|(p, c)| p * prompt as f64 + c * completion as f64);
        Self { prompt, completion, cost }
    }
}

/// Estimated tokens for `bytes` bytes of text (four bytes a token, at least one).
pub fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes / 4).unwrap_or(u64::MAX).max(1)
}

/// Splits `text` into pieces of at most `size` bytes (at least one character each), on
/// character boundaries; `""` gives no piece.
pub fn pieces(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
    }
    out
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character
/// boundary.
pub fn prefix(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pieces_respect_char_boundaries_and_rejoin() {
        assert_eq!(pieces("abcdefg", 3), ["abc", "def", "g"]);
        assert!(pieces("", 3).is_empty());
        let text = "héllo wörld ✓✓";
        let parts = pieces(text, 2);
        assert!(parts.iter().all(|p| !p.is_empty()));
        assert_eq!(parts.concat(), text);
        assert_eq!(prefix("héllo", 2), "h");
        assert_eq!(prefix("héllo", 3), "hé");
        assert_eq!(prefix("ab", 10), "ab");
    }

    #[test]
    fn arguments_render_per_wire() {
        let args = Arguments::Json(json!({"a": 1}));
        assert_eq!(args.to_wire_string(), r#"{"a":1}"#);
        assert_eq!(Arguments::Raw("[1,2]".into()).to_input(), json!([1, 2]));
        assert_eq!(Arguments::Raw("not json".into()).to_input(), json!("not json"));
        assert_eq!(Arguments::Raw("not json".into()).to_wire_string(), "not json");
    }

    #[test]
    fn usage_is_a_token_per_four_bytes_and_priced_on_request() {
        let reply = Reply::text("12345678");
        let usage = Usage::estimate(400, &reply, Some((0.5, 2.0)));
        assert_eq!((usage.prompt, usage.completion), (100, 2));
        assert_eq!(usage.cost, Some(54.0));
        assert_eq!(Usage::estimate(0, &Reply::text(""), None).completion, 1);
    }

    #[test]
    fn refusals_map_to_the_anthropic_refusal_stop_reason() {
        assert_eq!(Finish::Stop.anthropic(true), "refusal");
        assert_eq!(Finish::Stop.anthropic(false), "end_turn");
        assert_eq!(Finish::Length.anthropic(false), "max_tokens");
        assert_eq!(Finish::ToolCalls.anthropic(false), "tool_use");
    }
}
