//! What every agent loop does the same way, so the loops differ only in how they schedule
//! it: asking the model for a turn (recording the request, the provider's exchanges, usage,
//! finish reasons and unreadable calls, and ending on a provider error), the conversation's
//! message shapes, and carrying out one tool call through a framework's tool [`Adapter`] with
//! the scenario's allowlist enforced.

use elengtis_core::agent::call_id;
use elengtis_core::judge::RecordedCall;
use serde_json::{Map, Value, json};

use super::{AgentOutcome, Termination, ToolError, ToolErrorKind};
use crate::model::{Model, ModelCall, ModelRequest, ModelTurn};
use crate::toolhost::{ToolHost, ToolInfo, ToolOutput};

/// The prefix of a failed tool's text, as the model sees it.
pub(crate) const ERROR_PREFIX: &str = "ERROR: ";

/// The conversation's first two messages.
pub(crate) fn system_message(text: &str) -> Value {
    json!({"role": "system", "content": text})
}

/// The user's message.
pub(crate) fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// Ask the model for turn `step`, sending `messages`; record the request and what came back
/// in `out`. `None` when the model failed: `out` then ends as `provider_error` with the
/// failure's kind (a [`ModelErrorKind::Budget`] stop included, so the run can stop).
///
/// `model_turns` counts the requests made, the failed one included, as the original's
/// `len(requests)` does.
pub(crate) async fn ask(
    model: &mut dyn Model,
    out: &mut AgentOutcome,
    step: u32,
    messages: Vec<Value>,
    tools: &[Value],
) -> Option<ModelTurn> {
    let request = ModelRequest { step, messages, tools: tools.to_vec() };
    let reply = model.respond(&request).await;
    out.exchanges.extend(model.take_exchanges());
    out.requests.push(request);
    out.model_turns = u32::try_from(out.requests.len()).unwrap_or(u32::MAX);
    let turn = match reply {
        Ok(turn) => turn,
        Err(e) => {
            out.provider_error = Some(e.detail);
            out.provider_error_kind = Some(e.kind);
            out.termination = Some(Termination::ProviderError);
            return None;
        }
    };
    out.usage.input_tokens += turn.usage.input_tokens;
    out.usage.output_tokens += turn.usage.output_tokens;
    if let Some(cost) = turn.usage.cost_usd {
        out.usage.cost_usd = Some(out.usage.cost_usd.unwrap_or(0.0) + cost);
    }
    if out.requests.len() == 1 {
        out.first_finish_reason = turn.finish_reason.clone();
        out.first_native_finish_reason = turn.native_finish_reason.clone().or_else(|| turn.finish_reason.clone());
    }
    let invalid = u32::try_from(turn.invalid_calls.len()).unwrap_or(u32::MAX);
    out.invalid_tool_calls = out.invalid_tool_calls.saturating_add(invalid);
    Some(turn)
}

/// Whether a turn reported usage (the original's graph lists `usage` among a model node's
/// updates only then).
pub(crate) fn has_usage(turn: &ModelTurn) -> bool {
    turn.usage.input_tokens > 0 || turn.usage.output_tokens > 0 || turn.usage.cost_usd.is_some()
}

/// The ids of a turn's calls: `call_<step>_<i>`, whatever the provider called them (the
/// original reassigns ids the same way in every engine).
pub(crate) fn call_ids(step: u32, count: usize) -> Vec<String> {
    (0..count).map(|i| call_id(step, i)).collect()
}

/// The assistant's message for a turn; `tool_calls` only when it made calls.
pub(crate) fn assistant_message(turn: &ModelTurn, ids: &[String]) -> Value {
    let mut message = json!({"role": "assistant", "content": turn.content});
    if !turn.calls.is_empty() {
        message["tool_calls"] = turn
            .calls
            .iter()
            .zip(ids)
            .map(
                |(c, id)| json!({"id": id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}),
            )
            .collect();
    }
    message
}

/// A turn's trajectory entry, `{step, content, calls}`, with the provider's unreadable calls
/// (`invalid_calls`) when there were any.
pub(crate) fn trajectory_entry(step: u32, turn: &ModelTurn, calls: Vec<Value>) -> Value {
    let mut entry = json!({"step": step, "content": turn.content, "calls": calls});
    if !turn.invalid_calls.is_empty() {
        entry["invalid_calls"] = serde_json::to_value(&turn.invalid_calls).unwrap_or(Value::Null);
    }
    entry
}

/// Record a call for the judge.
pub(crate) fn record_call(out: &mut AgentOutcome, step: u32, id: &str, call: &ModelCall) {
    out.calls.push(RecordedCall {
        call_id: id.to_owned(),
        step,
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    });
}

/// What carrying out one call produced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dispatched {
    /// The tool message's content: what the model sees.
    pub text: String,
    /// The result as recorded in the trajectory.
    pub result: Value,
    /// The tool error, when the call failed: its kind and the detail recorded.
    pub error: Option<(ToolErrorKind, String)>,
    /// The call failed in transport (the target's session broke, or no answer came in time):
    /// not an answer of the target's, an infrastructure failure of the attempt.
    pub transport: bool,
    /// When it was handed to the target and when the answer came back ([`crate::clock`]).
    pub times: (u64, u64),
}

/// Record a dispatched call's outcome in `out`; the tool message and the trajectory's call
/// record.
pub(crate) fn finish_call(
    out: &mut AgentOutcome,
    step: u32,
    id: &str,
    call: &ModelCall,
    dispatched: Dispatched,
) -> (Value, Value) {
    let (started_us, ended_us) = dispatched.times;
    out.call_times.push(elengtis_core::records::CallTime { id: id.to_owned(), started_us, ended_us });
    if let Some((kind, detail)) = dispatched.error {
        out.tool_errors.push(ToolError { kind, step, call_id: id.to_owned(), detail, transport: dispatched.transport });
    }
    let message = json!({"role": "tool", "tool_call_id": id, "name": call.name, "content": dispatched.text});
    let record = json!({"id": id, "name": call.name, "arguments": call.arguments, "result": dispatched.result});
    crate::crashpoint::reach(crate::crashpoint::CrashPoint::Exercise);
    (message, record)
}

/// How a framework carries out a call and shows its result to the model. Every adapter
/// refuses a tool that was not offered without contacting the target (see
/// `docs/engines.md`: the original's raw-MCP engines forwarded such calls to the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Adapter {
    /// The MCP session as is (`reference`, `graph`): results recorded as MCP results.
    Mcp,
    /// langchain-mcp-adapters' tools called by the graph's dispatcher (`langchain`).
    LangChain,
    /// langchain-mcp-adapters' tools under `create_agent`'s tool node, with the original's
    /// `ToolErrorMiddleware` (`create_agent`).
    CreateAgent,
}

impl Adapter {
    /// Carry out `call` (id `id`) against `host`, offering only `offered`.
    pub(crate) async fn call(
        self,
        host: &dyn ToolHost,
        offered: &[ToolInfo],
        id: &str,
        call: &ModelCall,
    ) -> Dispatched {
        let started = crate::clock::now_us();
        if !offered.iter().any(|t| t.name == call.name) {
            return Dispatched { times: (started, started), ..self.unknown_tool(offered, id, &call.name) };
        }
        let arguments = match &call.arguments {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        let output = host.call_tool(&call.name, arguments).await.map_err(|e| e.to_string());
        let times = (started, crate::clock::now_us());
        let transport = output.is_err();
        let dispatched = match self {
            Adapter::Mcp => mcp_result(output),
            Adapter::LangChain => {
                super::langchain::adapted_result(output, &call.name, &format!("dispatch_{}", call.name), false)
            }
            Adapter::CreateAgent => super::langchain::adapted_result(output, &call.name, id, true),
        };
        Dispatched { transport, times, ..dispatched }
    }

    fn unknown_tool(self, offered: &[ToolInfo], id: &str, name: &str) -> Dispatched {
        match self {
            Adapter::Mcp => {
                let detail = format!("tool `{name}` is not available");
                Dispatched {
                    text: format!("{ERROR_PREFIX}{detail}"),
                    result: json!({"error": detail}),
                    error: Some((ToolErrorKind::UnknownTool, detail)),
                    transport: false,
                    times: (0, 0),
                }
            }
            Adapter::LangChain => {
                // The original's adapter dispatcher resolves names from the adapted tools.
                let detail = format!("Unknown tool: {name}");
                Dispatched {
                    text: format!("{ERROR_PREFIX}{detail}"),
                    result: json!({"unknown_tool": name}),
                    error: Some((ToolErrorKind::UnknownTool, detail)),
                    transport: false,
                    times: (0, 0),
                }
            }
            Adapter::CreateAgent => {
                // LangGraph's tool node answers an unknown name itself, in these words.
                let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
                let text = format!("Error: {name} is not a valid tool, try one of [{}].", names.join(", "));
                Dispatched {
                    result: super::langchain::tool_message(Value::String(text.clone()), name, id, Value::Null, "error"),
                    error: Some((ToolErrorKind::UnknownTool, text.clone())),
                    transport: false,
                    times: (0, 0),
                    text,
                }
            }
        }
    }
}

/// A raw MCP result: the text as the host gave it (`ERROR: …` for an `isError` result), the
/// MCP result recorded; a failed call is `ERROR: <why>`, recorded as `transport_error`.
fn mcp_result(output: Result<ToolOutput, String>) -> Dispatched {
    match output {
        Ok(output) => {
            let error = output.is_error.then(|| {
                let detail = output.text.strip_prefix(ERROR_PREFIX).unwrap_or(&output.text).to_owned();
                (ToolErrorKind::ToolError, detail)
            });
            Dispatched { text: output.text, result: output.record, error, transport: false, times: (0, 0) }
        }
        Err(detail) => Dispatched {
            text: format!("{ERROR_PREFIX}{detail}"),
            result: json!({"transport_error": detail}),
            error: Some((ToolErrorKind::ToolError, detail)),
            transport: true,
            times: (0, 0),
        },
    }
}
