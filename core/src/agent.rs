//! What an agent loop observes, as data: the requests a model was sent, the turns it
//! answered with, the tools it was offered, the calls it made and how the loop ended.
//!
//! Agent loops (in the engine) produce an [`AgentOutcome`]; they assign no meaning. The
//! judge ([`crate::judge`]) decides what the recorded calls mean, and the trial's records
//! ([`crate::records`]) keep all of it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::judge::RecordedCall;

/// How an attempt's agent phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The model answered without tool calls.
    ModelStop,
    /// The step budget ran out.
    BudgetExhausted,
    /// The model (or its provider) failed.
    ProviderError,
    /// No model ran (`model_free: true`).
    ModelFree,
    /// The trial could not run as designed (setup, target, or runner failure).
    InfrastructureError,
}

impl Termination {
    /// The name used in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::ModelStop => "model_stop",
            Termination::BudgetExhausted => "budget_exhausted",
            Termination::ProviderError => "provider_error",
            Termination::ModelFree => "model_free",
            Termination::InfrastructureError => "infrastructure_error",
        }
    }
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool as offered to a model: what the tool host listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// Its description (empty when the server gave none).
    pub description: String,
    /// Its JSON Schema for arguments, verbatim.
    pub input_schema: Map<String, Value>,
    /// The whole listing entry as the host gave it (kept in evidence).
    pub listing: Value,
}

impl ToolInfo {
    /// The tool in OpenAI function form (what every loop offers, whatever the wire format).
    pub fn function_spec(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": Value::Object(self.input_schema.clone()),
            }
        })
    }
}

/// A model request: what a model is sent this turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRequest {
    /// 0-based turn.
    pub step: u32,
    /// The conversation so far (OpenAI chat shape).
    pub messages: Vec<Value>,
    /// Offered tools (OpenAI function shape).
    pub tools: Vec<Value>,
}

/// One call a model asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelCall {
    /// Tool name.
    pub name: String,
    /// Arguments.
    pub arguments: Value,
}

/// A tool call a provider returned that could not be read as one (arguments that are not a
/// JSON object, a missing name): counted in `invalid_tool_calls`, never executed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvalidCall {
    /// The provider's call id, if any.
    pub id: Option<String>,
    /// The tool name as given, if any.
    pub name: Option<String>,
    /// The arguments as given (raw text when they did not parse).
    pub arguments: Value,
    /// Why the call is invalid.
    pub error: String,
}

/// One exchange with a model provider (one HTTP attempt, or one replayed fixture), kept in
/// the evidence so a run can be checked and replayed byte for byte. Keys never appear here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Exchange {
    /// Provider kind (`openai_compatible`, `openrouter`, `anthropic`), or `replay`.
    pub provider: String,
    /// The model as sent.
    pub model: String,
    /// The model turn this exchange served.
    pub step: u32,
    /// 0-based attempt of the same request (retries).
    pub attempt: u32,
    /// The request body as sent.
    pub request: Value,
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// The response body (parsed JSON, or the raw text when it did not parse).
    pub response: Value,
    /// Milliseconds from sending to the whole answer (or the failure).
    pub latency_ms: f64,
    /// Why this attempt failed, when it did (timeout, connection, status, malformed body).
    pub error: Option<String>,
    /// Tokens and cost this exchange reported.
    pub usage: TurnUsage,
    /// The fixture that answered (replay) — its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture: Option<String>,
    /// What the spend cap charged for the request this attempt ended (`--budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_charge_usd: Option<f64>,
}

/// One model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelTurn {
    /// Assistant text.
    pub content: String,
    /// Tool calls (none: the model stops).
    pub calls: Vec<ModelCall>,
    /// Finish reason, normalised to the OpenAI vocabulary (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: Option<String>,
    /// The provider's own finish reason, when it differs from the normalised one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_finish_reason: Option<String>,
    /// Tokens and cost of this turn.
    #[serde(default)]
    pub usage: TurnUsage,
    /// Calls the provider returned that could not be read as calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_calls: Vec<InvalidCall>,
}

/// Tokens and cost of one model turn, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnUsage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Cost in US dollars, when known.
    pub cost_usd: Option<f64>,
}

/// Requests to a `rest` target's endpoint over one attempt, every attempt of every message
/// counted (retries included), and their bytes: the spend of a black-box agent, which reports
/// no tokens (elengtis addition).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointUsage {
    /// HTTP requests sent (retries included).
    pub requests: u64,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
}

/// Everything the agent phase observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentOutcome {
    /// How it ended (None only before it ran).
    pub termination: Option<Termination>,
    /// Every request, complete.
    pub requests: Vec<ModelRequest>,
    /// The final conversation.
    pub messages: Vec<Value>,
    /// Turn by turn: content and calls with results.
    pub trajectory: Vec<Value>,
    /// Structured calls for the judge.
    pub calls: Vec<RecordedCall>,
    /// Turns the model took.
    pub model_turns: u32,
    /// Tokens and cost over all turns.
    pub usage: TurnUsage,
    /// Tool errors (`isError`, a failed call, or an unknown tool).
    pub tool_errors: Vec<ToolError>,
    /// Calls the provider returned that could not be read as calls
    /// ([`ModelTurn::invalid_calls`]): never executed, never judged. (A call of a tool that
    /// was not offered is a [`ToolErrorKind::UnknownTool`] tool error instead, as in the
    /// original, whose LangChain parsers count only unreadable calls here.)
    pub invalid_tool_calls: u32,
    /// First finish reason.
    pub first_finish_reason: Option<String>,
    /// First provider-native finish reason.
    pub first_native_finish_reason: Option<String>,
    /// The provider error, if any.
    pub provider_error: Option<String>,
    /// What kind of provider error, if any: a [`ModelErrorKind::Budget`] stop (the spend
    /// cap would be exceeded) must reach the run so it can stop, like the original's
    /// `BudgetExceeded`.
    pub provider_error_kind: Option<ModelErrorKind>,
    /// The explicit state machine's steps (`graph` and `langchain` engines), in order: one
    /// entry per node that ran, `{node, updates, step, next, reason, …}` — the original's
    /// `graph_events` (`{node, updates}`) with the transition taken and why. Empty for the
    /// other engines.
    pub graph_events: Vec<Value>,
    /// Every exchange with the model's provider, in order.
    pub exchanges: Vec<Exchange>,
    /// When each tool call was handed to the target and answered, in the trajectory's order
    /// (the runner's clock, [`crate::records::Timeline`]).
    pub call_times: Vec<CallTime>,
    /// A `rest` target's requests and bytes (None for every other target).
    pub endpoint: Option<EndpointUsage>,
}

/// One tool call's start and end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallTime {
    /// The call's id in the trajectory (`call_<step>_<i>`).
    pub id: String,
    /// When the runner handed it to the target (or refused it).
    pub started_us: u64,
    /// When the answer came back (or the call failed).
    pub ended_us: u64,
}

/// What kind of model failure (the model layer's error kinds, here so that the trial and the
/// run can act on them — a spend-cap stop ends the run — without the engine's types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelErrorKind {
    /// The scripted model's script could not be followed.
    Script,
    /// The provider could not be reached, or did not answer in time, after every retry.
    Unreachable,
    /// The provider answered with an error status (or an error object) after every retry.
    Status,
    /// The provider's answer could not be read.
    Malformed,
    /// The next request could exceed the spend cap: the run stops before sending it.
    Budget,
    /// A recorded fixture is missing, corrupt or of another version (replay never falls back
    /// to a live call), or could not be recorded.
    Fixture,
    /// The provider cannot be used as configured (a key or header variable is not set, no
    /// price for a capped run).
    Configuration,
}

impl ModelErrorKind {
    /// Every kind.
    pub const ALL: [ModelErrorKind; 7] = [
        ModelErrorKind::Script,
        ModelErrorKind::Unreachable,
        ModelErrorKind::Status,
        ModelErrorKind::Malformed,
        ModelErrorKind::Budget,
        ModelErrorKind::Fixture,
        ModelErrorKind::Configuration,
    ];

    /// The name recorded in fixtures and evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelErrorKind::Script => "script",
            ModelErrorKind::Unreachable => "unreachable",
            ModelErrorKind::Status => "status",
            ModelErrorKind::Malformed => "malformed",
            ModelErrorKind::Budget => "budget",
            ModelErrorKind::Fixture => "fixture",
            ModelErrorKind::Configuration => "configuration",
        }
    }
}

impl std::str::FromStr for ModelErrorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown model error kind `{s}`"))
    }
}

/// What kind of tool error a model's call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The tool reported an error (`isError`) or the call failed.
    ToolError,
    /// The model named a tool that was not offered.
    UnknownTool,
}

/// A tool error met during the exercise.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// What kind.
    pub kind: ToolErrorKind,
    /// The model turn.
    pub step: u32,
    /// The call id.
    pub call_id: String,
    /// What the model was told.
    pub detail: String,
    /// The call failed in transport — the target's session broke (a crash, a closed
    /// connection) or no answer came in time — rather than the target answering with an
    /// error: the attempt is then an infrastructure failure (`records::outcome`), whatever
    /// the model did next.
    pub transport: bool,
}

/// The reference loop's call id for call `index` of turn `step`.
pub fn call_id(step: u32, index: usize) -> String {
    format!("call_{step}_{index}")
}
