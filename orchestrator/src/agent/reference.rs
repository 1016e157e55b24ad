//! The `reference` loop: the original tool's deterministic baseline. Tool calls run
//! sequentially; a tool error is returned to the model as `ERROR: …`; a turn without calls
//! stops the loop; running out of turns is `budget_exhausted`; a model failure is
//! `provider_error`.

use std::collections::BTreeSet;

use async_trait::async_trait;
use elengtis_core::agent::call_id;
use elengtis_core::judge::RecordedCall;
use serde_json::{Map, Value, json};

use super::{AgentLoop, AgentOutcome, AgentTask, Termination, ToolError, ToolErrorKind};
use crate::crashpoint::CrashPoint;
use crate::model::{Model, ModelRequest};
use crate::toolhost::ToolHost;

/// The reference loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceLoop;

#[async_trait]
impl AgentLoop for ReferenceLoop {
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome {
        let tools: Vec<Value> = task.tools.iter().map(|t| t.function_spec()).collect();
        let names: BTreeSet<&str> = task.tools.iter().map(|t| t.name.as_str()).collect();
        let mut out = AgentOutcome {
            messages: vec![
                json!({"role": "system", "content": task.system}),
                json!({"role": "user", "content": task.user}),
            ],
            ..AgentOutcome::default()
        };
        for step in 0..task.step_budget {
            let request = ModelRequest { step, messages: out.messages.clone(), tools: tools.clone() };
            let reply = model.respond(&request).await;
            out.exchanges.extend(model.take_exchanges());
            out.requests.push(request);
            let turn = match reply {
                Ok(turn) => turn,
                Err(e) => {
                    out.provider_error = Some(e.detail);
                    out.termination = Some(Termination::ProviderError);
                    return out;
                }
            };
            out.model_turns += 1;
            out.usage.input_tokens += turn.usage.input_tokens;
            out.usage.output_tokens += turn.usage.output_tokens;
            if out.first_finish_reason.is_none() {
                out.first_finish_reason = turn.finish_reason.clone();
                out.first_native_finish_reason =
                    turn.native_finish_reason.clone().or_else(|| turn.finish_reason.clone());
            }
            let ids: Vec<String> = (0..turn.calls.len()).map(|i| call_id(step, i)).collect();
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
                    out.tool_errors.push(ToolError {
                        kind: ToolErrorKind::UnknownTool,
                        step,
                        call_id: id.clone(),
                        detail: detail.clone(),
                    });
                    (format!("ERROR: {detail}"), json!({"error": detail}))
                } else {
                    let arguments = match &call.arguments {
                        Value::Object(map) => map.clone(),
                        _ => Map::new(),
                    };
                    match host.call_tool(&call.name, arguments).await {
                        Ok(output) => {
                            if output.is_error {
                                out.tool_errors.push(ToolError {
                                    kind: ToolErrorKind::ToolError,
                                    step,
                                    call_id: id.clone(),
                                    detail: output.text.clone(),
                                });
                            }
                            (output.text, output.record)
                        }
                        Err(e) => {
                            let detail = e.to_string();
                            out.tool_errors.push(ToolError {
                                kind: ToolErrorKind::ToolError,
                                step,
                                call_id: id.clone(),
                                detail: detail.clone(),
                            });
                            (format!("ERROR: {detail}"), json!({"error": detail}))
                        }
                    }
                };
                out.messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                calls.push(json!({"id": id, "name": call.name, "arguments": call.arguments, "result": result}));
                crate::crashpoint::reach(CrashPoint::Exercise);
            }
            out.trajectory.push(json!({"step": step, "content": turn.content, "calls": calls}));
        }
        out.termination = Some(Termination::BudgetExhausted);
        out
    }
}
