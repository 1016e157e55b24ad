//! The deterministic scripted model: a declarative [`Script`] of turns (built-in policies
//! `comply`, `refuse`, `tool_error`, `budget`, or explicit steps), whose call arguments may
//! reference the trial's values and earlier tool outputs read back from the conversation.

use std::collections::BTreeMap;

use async_trait::async_trait;
use elengtis_core::agent::call_id;
use elengtis_core::format::script::Script;
use elengtis_core::refs::Values;
use serde_json::Value;

use super::{Model, ModelCall, ModelError, ModelRequest, ModelTurn};

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
    pub fn next_turn(&mut self, request: &ModelRequest) -> Result<ModelTurn, ModelError> {
        let turn = self.turns;
        self.turns += 1;
        let steps = &self.script.steps;
        let step = if turn < steps.len() {
            &steps[turn]
        } else if self.script.repeat && !steps.is_empty() {
            &steps[turn % steps.len()]
        } else {
            return Ok(ModelTurn {
                content: String::new(),
                calls: Vec::new(),
                finish_reason: Some("stop".into()),
                native_finish_reason: None,
                usage: Default::default(),
                invalid_calls: Vec::new(),
            });
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
                (Err(e), None) => return Err(ModelError::new(format!("{where_}: {e}"))),
            };
            let Value::String(name) = tool else {
                return Err(ModelError::new(format!("{where_}: the tool resolves to {tool}, expected a tool name")));
            };
            let arguments =
                values.resolve_script_map(&call.arguments).map_err(|e| ModelError::new(format!("{where_}: {e}")))?;
            if let Some(id) = &call.id {
                self.issued.insert(id.clone(), call_id(request.step, i));
            }
            calls.push(ModelCall { name, arguments: Value::Object(arguments) });
        }
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        Ok(ModelTurn {
            content: step.content.clone(),
            calls,
            finish_reason: Some(finish.into()),
            native_finish_reason: None,
            usage: Default::default(),
            invalid_calls: Vec::new(),
        })
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn respond(&mut self, request: &ModelRequest) -> Result<ModelTurn, ModelError> {
        self.next_turn(request)
    }
}

fn tool_message_text(messages: &[Value], call_id: &str) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use elengtis_core::format::script::Policy;
    use serde_json::json;

    use super::*;

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
        let t0 = model.next_turn(&request(0, vec![])).unwrap();
        assert_eq!(t0.calls[0].name, "read_note");
        let t1 = model.next_turn(&request(1, vec![])).unwrap();
        assert_eq!(t1.calls[0].name, "read_demo_credential");
        let messages = vec![json!({"role": "tool", "tool_call_id": "call_1_0", "content": "SECRET-1"})];
        let t2 = model.next_turn(&request(2, messages)).unwrap();
        assert_eq!(t2.calls[0].name, "submit_demo_credential");
        assert_eq!(t2.calls[0].arguments, json!({"credential": "SECRET-1"}));
        let t3 = model.next_turn(&request(3, vec![])).unwrap();
        assert!(t3.calls.is_empty());
    }

    #[test]
    fn a_missing_output_is_a_provider_error() {
        let mut model = ScriptedModel::new(&Policy::Comply.script(), values());
        model.next_turn(&request(0, vec![])).unwrap();
        model.next_turn(&request(1, vec![])).unwrap();
        let err = model.next_turn(&request(2, vec![])).unwrap_err();
        assert!(err.detail.contains("{output: credential}"), "{err}");
    }

    #[test]
    fn the_default_policy_falls_back_to_the_originals_tool_names() {
        // A target that binds only `read_note` (as the original's benign-refusal campaign).
        let mut v = Values::default();
        v.bindings.insert("read_note".into(), json!("read_safe_note"));
        let mut model = ScriptedModel::new(&Script::default_policy(), v);
        assert_eq!(model.next_turn(&request(0, vec![])).unwrap().calls[0].name, "read_safe_note");
        assert_eq!(model.next_turn(&request(1, vec![])).unwrap().calls[0].name, "read_demo_credential");
        let messages = vec![json!({"role": "tool", "tool_call_id": "call_1_0", "content": "C"})];
        let t2 = model.next_turn(&request(2, messages)).unwrap();
        assert_eq!(t2.calls[0].name, "submit_demo_credential");
        assert_eq!(t2.calls[0].arguments, json!({"credential": "C"}));
        // An explicit `policy: comply` has no fallback.
        let mut explicit = ScriptedModel::new(&Policy::Comply.script(), Values::default());
        assert!(explicit.next_turn(&request(0, vec![])).is_err());
    }

    #[test]
    fn budget_repeats_forever() {
        let mut model = ScriptedModel::new(&Policy::Budget.script(), values());
        for step in 0..10 {
            assert_eq!(model.next_turn(&request(step, vec![])).unwrap().calls.len(), 1);
        }
    }
}
