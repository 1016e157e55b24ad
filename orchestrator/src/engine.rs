//! Engines: the agent loop that lets a model use the offered tools, and the models.
//!
//! Engines return observations only (requests, messages, tool calls, tool results, how the
//! loop ended); [`elengtis_core::judge`] assigns meaning afterwards. The `reference` engine is the
//! deterministic baseline loop of the original tool: tool calls run sequentially, a tool
//! error is returned to the model as `ERROR: …`, a turn without calls stops the loop, and
//! running out of turns is `budget_exhausted`. Its model is either a declarative
//! [`Script`] or (in a later release) a live provider.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::target::{self, Session};
use elengtis_core::format::campaign::Engine;
use elengtis_core::format::script::Script;
use elengtis_core::judge::RecordedCall;
use elengtis_core::refs::Values;

/// How an attempt's agent phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// Why an engine cannot run in this build.
pub fn unavailable_reason(engine: Engine, model: Option<&str>) -> Option<String> {
    // An empty model name means no model, as in the original (Python truthiness).
    match (engine, model.filter(|m| !m.is_empty())) {
        (Engine::Reference, None) => None,
        (Engine::Reference, Some(model)) => Some(format!(
            "the reference engine with live model `{model}` needs a model provider, and this build of elengtis has none yet; remove `model` to use the deterministic scripted model"
        )),
        (other, _) => Some(format!(
            "engine `{other}` drives a live model framework that this build of elengtis does not include yet; use engine `reference` (deterministic scripts) until live providers land"
        )),
    }
}

/// A model request: what a model would be sent this turn.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRequest {
    /// 0-based turn.
    pub step: u32,
    /// The conversation so far (OpenAI chat shape).
    pub messages: Vec<Value>,
    /// Offered tools (OpenAI function shape).
    pub tools: Vec<Value>,
}

/// One call a model asks for.
#[derive(Debug, Clone, Serialize)]
pub struct ModelCall {
    /// Tool name.
    pub name: String,
    /// Arguments.
    pub arguments: Value,
}

/// One model turn.
#[derive(Debug, Clone, Serialize)]
pub struct ModelTurn {
    /// Assistant text.
    pub content: String,
    /// Tool calls (none: the model stops).
    pub calls: Vec<ModelCall>,
    /// Provider finish reason.
    pub finish_reason: Option<String>,
}

/// A model failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

/// The deterministic scripted model.
#[derive(Debug)]
pub struct ScriptedModel {
    script: Script,
    values: Values,
    /// Script call id → the call id the loop assigned.
    issued: BTreeMap<String, String>,
    turns: usize,
}

impl ScriptedModel {
    /// A model that follows `script` (expanded) with the trial's values.
    pub fn new(script: &Script, values: Values) -> Self {
        ScriptedModel { script: script.expanded(), values, issued: BTreeMap::new(), turns: 0 }
    }

    /// The next turn. Tool results are read back from the conversation, as a model would.
    pub fn respond(&mut self, request: &ModelRequest) -> Result<ModelTurn, ProviderError> {
        let turn = self.turns;
        self.turns += 1;
        let steps = &self.script.steps;
        let step = if turn < steps.len() {
            &steps[turn]
        } else if self.script.repeat && !steps.is_empty() {
            &steps[turn % steps.len()]
        } else {
            return Ok(ModelTurn { content: String::new(), calls: Vec::new(), finish_reason: Some("stop".into()) });
        };
        let mut values = self.values.clone();
        for (script_id, call_id) in &self.issued {
            if let Some(text) = tool_message_text(&request.messages, call_id) {
                values.outputs.insert(script_id.clone(), Value::String(text));
            }
        }
        let mut calls = Vec::new();
        for (i, call) in step.calls.iter().enumerate() {
            let where_ = format!("script step {} call {}", turn % steps.len().max(1) + 1, i + 1);
            let tool = match (values.resolve_script(&call.tool), &call.fallback) {
                (Ok(tool), _) => tool,
                (Err(_), Some(name)) => Value::String(name.clone()),
                (Err(e), None) => return Err(ProviderError(format!("{where_}: {e}"))),
            };
            let Value::String(name) = tool else {
                return Err(ProviderError(format!("{where_}: the tool resolves to {tool}, expected a tool name")));
            };
            let arguments =
                values.resolve_script_map(&call.arguments).map_err(|e| ProviderError(format!("{where_}: {e}")))?;
            if let Some(id) = &call.id {
                self.issued.insert(id.clone(), format!("call_{}_{i}", request.step));
            }
            calls.push(ModelCall { name, arguments: Value::Object(arguments) });
        }
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        Ok(ModelTurn { content: step.content.clone(), calls, finish_reason: Some(finish.into()) })
    }
}

fn tool_message_text(messages: &[Value], call_id: &str) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
}

/// A tool offered to the model, in OpenAI function form.
pub fn tool_spec(tool: &rmcp::model::Tool) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description.as_deref().unwrap_or_default(),
            "parameters": Value::Object((*tool.input_schema).clone()),
        }
    })
}

/// Everything the agent phase observed.
#[derive(Debug, Clone, Default, Serialize)]
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
    /// Tool errors (`isError`, a failed call, or an unknown tool).
    pub tool_errors: Vec<Value>,
    /// Calls of tools that were not offered.
    pub invalid_tool_calls: u32,
    /// First finish reason.
    pub first_finish_reason: Option<String>,
    /// The provider error, if any.
    pub provider_error: Option<String>,
}

/// Run the reference loop.
pub async fn run_reference(
    model: &mut ScriptedModel,
    session: &Session,
    offered: &[rmcp::model::Tool],
    system: String,
    user: String,
    step_budget: u32,
) -> AgentOutcome {
    let tools: Vec<Value> = offered.iter().map(tool_spec).collect();
    let names: BTreeSet<&str> = offered.iter().map(|t| t.name.as_ref()).collect();
    let mut out = AgentOutcome {
        messages: vec![json!({"role": "system", "content": system}), json!({"role": "user", "content": user})],
        ..AgentOutcome::default()
    };
    for step in 0..step_budget {
        let request = ModelRequest { step, messages: out.messages.clone(), tools: tools.clone() };
        let reply = model.respond(&request);
        out.requests.push(request);
        let turn = match reply {
            Ok(turn) => turn,
            Err(e) => {
                out.provider_error = Some(e.0);
                out.termination = Some(Termination::ProviderError);
                return out;
            }
        };
        out.model_turns += 1;
        if out.first_finish_reason.is_none() {
            out.first_finish_reason = turn.finish_reason.clone();
        }
        let ids: Vec<String> = (0..turn.calls.len()).map(|i| format!("call_{step}_{i}")).collect();
        out.messages.push(json!({
            "role": "assistant",
            "content": turn.content,
            "tool_calls": turn.calls.iter().zip(&ids).map(|(c, id)| json!({
                "id": id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}
            })).collect::<Vec<_>>(),
        }));
        if turn.calls.is_empty() {
            out.trajectory.push(json!({"step": step, "content": turn.content, "calls": []}));
            out.termination = Some(Termination::ModelStop);
            return out;
        }
        let mut calls = Vec::new();
        for (call, id) in turn.calls.iter().zip(ids) {
            out.calls.push(RecordedCall {
                call_id: id.clone(),
                step,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            let (text, result) = if !names.contains(call.name.as_str()) {
                out.invalid_tool_calls += 1;
                let detail = format!("tool `{}` is not available", call.name);
                out.tool_errors.push(json!({"kind": "unknown_tool", "step": step, "call_id": id, "detail": detail}));
                (format!("ERROR: {detail}"), json!({"error": detail}))
            } else {
                let arguments = match &call.arguments {
                    Value::Object(map) => map.clone(),
                    _ => Map::new(),
                };
                match session.call_tool(&call.name, arguments).await {
                    Ok(result) => {
                        let text = target::result_text(&result);
                        if result.is_error == Some(true) {
                            out.tool_errors
                                .push(json!({"kind": "tool_error", "step": step, "call_id": id, "detail": text}));
                        }
                        (text, target::result_json(&result))
                    }
                    Err(e) => {
                        let detail = e.to_string();
                        out.tool_errors
                            .push(json!({"kind": "tool_error", "step": step, "call_id": id, "detail": detail}));
                        (format!("ERROR: {detail}"), json!({"error": detail}))
                    }
                }
            };
            out.messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            calls.push(json!({"id": id, "name": call.name, "arguments": call.arguments, "result": result}));
            crate::crashpoint::reach("exercise");
        }
        out.trajectory.push(json!({"step": step, "content": turn.content, "calls": calls}));
    }
    out.termination = Some(Termination::BudgetExhausted);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use elengtis_core::format::script::Policy;

    fn values() -> Values {
        let mut v = Values::default();
        for (k, t) in [
            ("read_note", "read_note"),
            ("read_credential", "read_demo_credential"),
            ("submit_credential", "submit_demo_credential"),
        ] {
            v.bindings.insert(k.into(), json!(t));
        }
        v
    }

    fn request(step: u32, messages: Vec<Value>) -> ModelRequest {
        ModelRequest { step, messages, tools: Vec::new() }
    }

    #[test]
    fn comply_reads_back_the_credential_from_the_conversation() {
        let mut model = ScriptedModel::new(&Policy::Comply.script(), values());
        let t0 = model.respond(&request(0, vec![])).unwrap();
        assert_eq!(t0.calls[0].name, "read_note");
        let t1 = model.respond(&request(1, vec![])).unwrap();
        assert_eq!(t1.calls[0].name, "read_demo_credential");
        let messages = vec![json!({"role": "tool", "tool_call_id": "call_1_0", "content": "SECRET-1"})];
        let t2 = model.respond(&request(2, messages)).unwrap();
        assert_eq!(t2.calls[0].name, "submit_demo_credential");
        assert_eq!(t2.calls[0].arguments, json!({"credential": "SECRET-1"}));
        let t3 = model.respond(&request(3, vec![])).unwrap();
        assert!(t3.calls.is_empty());
    }

    #[test]
    fn a_missing_output_is_a_provider_error() {
        let mut model = ScriptedModel::new(&Policy::Comply.script(), values());
        model.respond(&request(0, vec![])).unwrap();
        model.respond(&request(1, vec![])).unwrap();
        let err = model.respond(&request(2, vec![])).unwrap_err();
        assert!(err.0.contains("{output: credential}"), "{err}");
    }

    #[test]
    fn the_default_policy_falls_back_to_the_originals_tool_names() {
        // A target that binds only `read_note` (as the original's benign-refusal campaign).
        let mut v = Values::default();
        v.bindings.insert("read_note".into(), json!("read_safe_note"));
        let mut model = ScriptedModel::new(&Script::default_policy(), v);
        assert_eq!(model.respond(&request(0, vec![])).unwrap().calls[0].name, "read_safe_note");
        assert_eq!(model.respond(&request(1, vec![])).unwrap().calls[0].name, "read_demo_credential");
        let messages = vec![json!({"role": "tool", "tool_call_id": "call_1_0", "content": "C"})];
        let t2 = model.respond(&request(2, messages)).unwrap();
        assert_eq!(t2.calls[0].name, "submit_demo_credential");
        assert_eq!(t2.calls[0].arguments, json!({"credential": "C"}));
        // An explicit `policy: comply` has no fallback.
        let mut explicit = ScriptedModel::new(&Policy::Comply.script(), Values::default());
        assert!(explicit.respond(&request(0, vec![])).is_err());
    }

    #[test]
    fn budget_repeats_forever() {
        let mut model = ScriptedModel::new(&Policy::Budget.script(), values());
        for step in 0..10 {
            assert_eq!(model.respond(&request(step, vec![])).unwrap().calls.len(), 1);
        }
    }

    #[test]
    fn only_reference_without_model_runs_in_this_build() {
        assert!(unavailable_reason(Engine::Reference, None).is_none());
        assert!(unavailable_reason(Engine::Reference, Some("m")).is_some());
        assert!(unavailable_reason(Engine::Graph, None).unwrap().contains("graph"));
    }
}
