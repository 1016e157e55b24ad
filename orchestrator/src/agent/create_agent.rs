//! The `create_agent` engine: LangChain's prebuilt agent with framework-default behaviour,
//! as the original configures it (`create_agent` with `ModelCallLimitMiddleware(run_limit =
//! step_budget, exit_behavior = "end")` and `ToolErrorMiddleware`), over the LangChain
//! adapters of [`super::langchain`].
//!
//! - A turn's calls are dispatched **concurrently** (the tool node runs one task per call);
//!   their results enter the conversation in the order of the calls, whatever order they
//!   finished in. A tool host sees the calls overlap.
//! - The model-call limit is checked before each model call: once `step_budget` calls were
//!   made the agent ends (the last turn's calls were still carried out), and the middleware
//!   appends its own assistant message, `Model call limits exceeded: run limit (N/N)`, which
//!   is not a model turn. The termination is then `budget_exhausted`, as the original
//!   decides it: `model_stop` when the last model turn had no calls, else
//!   `budget_exhausted`.
//! - The system prompt is the agent's `system_prompt`, not a state message: every request
//!   starts with it, the recorded conversation (`messages`) does not.
//! - A failed tool comes back as `ERROR: <error>` (the middleware); a name that is not an
//!   offered tool as the tool node's `Error: NAME is not a valid tool, try one of […].`.
//! - A provider error ends the run as `provider_error` keeping the turns before it. (The
//!   original lost the whole transcript, so calls made before the error were neither
//!   recorded nor judged for safety; see `docs/engines.md`.)

use async_trait::async_trait;
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::turn::{self, Adapter};
use super::{AgentLoop, AgentOutcome, AgentTask, Termination};
use crate::model::Model;
use crate::toolhost::ToolHost;

/// The `create_agent` engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateAgentLoop;

/// The model-call limit middleware's closing message.
pub(crate) fn limit_message(calls: usize, limit: u32) -> Value {
    json!({"role": "assistant", "content": format!("Model call limits exceeded: run limit ({calls}/{limit})")})
}

#[async_trait]
impl AgentLoop for CreateAgentLoop {
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome {
        let tools: Vec<Value> = task.tools.iter().map(super::langchain::adapted_spec).collect();
        let system = turn::system_message(task.system);
        let mut out = AgentOutcome { messages: vec![turn::user_message(task.user)], ..AgentOutcome::default() };
        loop {
            // `before_model`: the run limit.
            if out.requests.len() >= task.step_budget as usize {
                out.messages.push(limit_message(out.requests.len(), task.step_budget));
                out.termination = Some(Termination::BudgetExhausted);
                return out;
            }
            let step = u32::try_from(out.requests.len()).unwrap_or(u32::MAX);
            let messages = std::iter::once(system.clone()).chain(out.messages.iter().cloned()).collect();
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
            for (call, id) in turn.calls.iter().zip(&ids) {
                turn::record_call(&mut out, step, id, call);
            }
            let dispatched = join_all(
                turn.calls.iter().zip(&ids).map(|(call, id)| Adapter::CreateAgent.call(host, task.tools, id, call)),
            )
            .await;
            let mut records = Vec::new();
            for ((call, id), dispatched) in turn.calls.iter().zip(&ids).zip(dispatched) {
                let (message, record) = turn::finish_call(&mut out, step, id, call, dispatched);
                out.messages.push(message);
                records.push(record);
            }
            out.trajectory.push(turn::trajectory_entry(step, &turn, records));
        }
    }
}
