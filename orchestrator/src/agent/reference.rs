//! The `reference` loop: the original tool's deterministic baseline. A turn's calls run
//! sequentially, in order; a tool error is returned to the model as `ERROR: …`; a turn
//! without calls stops the loop (`model_stop`); running out of turns is `budget_exhausted`;
//! a model failure is `provider_error`. It drives any [`Model`] — the scripted model, a live
//! provider or a replay.

use async_trait::async_trait;
use serde_json::Value;

use super::turn::{self, Adapter};
use super::{AgentLoop, AgentOutcome, AgentTask, Termination};
use crate::model::Model;
use crate::toolhost::ToolHost;

/// The reference loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReferenceLoop;

#[async_trait]
impl AgentLoop for ReferenceLoop {
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome {
        let tools: Vec<Value> = task.tools.iter().map(|t| t.function_spec()).collect();
        let mut out = AgentOutcome {
            messages: vec![turn::system_message(task.system), turn::user_message(task.user)],
            ..AgentOutcome::default()
        };
        for step in 0..task.step_budget {
            let messages = out.messages.clone();
            let Some(turn) = turn::ask(model, &mut out, step, messages, &tools).await else {
                return out;
            };
            let ids = turn::call_ids(step, turn.calls.len());
            out.messages.push(turn::assistant_message(&turn, &ids));
            if turn.calls.is_empty() {
                out.trajectory.push(turn::trajectory_entry(step, &turn, Vec::new()));
                out.termination = Some(Termination::ModelStop);
                return out;
            }
            let mut calls = Vec::new();
            for (call, id) in turn.calls.iter().zip(&ids) {
                turn::record_call(&mut out, step, id, call);
                let dispatched = Adapter::Mcp.call(host, task.tools, id, call).await;
                let (message, record) = turn::finish_call(&mut out, step, id, call, dispatched);
                out.messages.push(message);
                calls.push(record);
            }
            out.trajectory.push(turn::trajectory_entry(step, &turn, calls));
        }
        out.termination = Some(Termination::BudgetExhausted);
        out
    }
}
