//! The `graph` engine: the original's LangGraph state machine, written out. Three nodes —
//! `model` (ask for a turn), `tools` (carry out its calls) and `score` (end) — and explicit
//! transitions between them:
//!
//! | from | to | when (`reason`) |
//! |---|---|---|
//! | `model` | `tools` | the turn has calls (`tool_calls`) |
//! | `model` | `score` | no calls (`model_stop`), or the model failed (`provider_error`) |
//! | `tools` | `model` | a call failed and turns remain (`recover`: the errors went back to the model as `ERROR: …` tool messages, the failed call ids listed) |
//! | `tools` | `model` | every call succeeded and turns remain (`continue`) |
//! | `tools` | `score` | the step budget is spent (`step_budget`) |
//!
//! A turn's calls are carried out one at a time, in the order the model gave them, each
//! answered before the next starts (strict tool ordering). Every node that runs is recorded
//! in [`AgentOutcome::graph_events`] as the original's `graph_events` entry (`{node,
//! updates}`, the state keys it wrote) plus the step, the transition taken and why. The
//! conversation, requests, trajectory and terminations are the reference loop's: only the
//! recorded transitions tell the two apart (`docs/engines.md`).
//!
//! The graph is generic over the tool [`Adapter`] and the offered tool specs, so the
//! `langchain` engine is this graph over LangChain's adapters.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::turn::{self, Adapter};
use super::{AgentLoop, AgentOutcome, AgentTask, Termination};
use crate::model::{Model, ModelCall};
use crate::toolhost::ToolHost;

/// The `graph` engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct GraphLoop;

#[async_trait]
impl AgentLoop for GraphLoop {
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome {
        let tools: Vec<Value> = task.tools.iter().map(|t| t.function_spec()).collect();
        run(model, host, task, &tools, Adapter::Mcp).await
    }
}

/// A node of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Model,
    Tools,
    Score,
}

impl Node {
    fn name(self) -> &'static str {
        match self {
            Node::Model => "model",
            Node::Tools => "tools",
            Node::Score => "score",
        }
    }
}

/// The graph's state between nodes.
struct State<'a> {
    task: AgentTask<'a>,
    tools: &'a [Value],
    adapter: Adapter,
    out: AgentOutcome,
    /// The calls the last model turn asked for, with their ids, not yet carried out.
    pending: Vec<(String, ModelCall)>,
}

/// Run the graph with `tools` offered and calls carried out through `adapter`.
pub(crate) async fn run(
    model: &mut dyn Model,
    host: &dyn ToolHost,
    task: AgentTask<'_>,
    tools: &[Value],
    adapter: Adapter,
) -> AgentOutcome {
    let out = AgentOutcome {
        messages: vec![turn::system_message(task.system), turn::user_message(task.user)],
        ..AgentOutcome::default()
    };
    let mut state = State { task, tools, adapter, out, pending: Vec::new() };
    // A budget of no turns (never valid in a campaign) ends before the model is asked, as
    // the reference loop does.
    let mut node = if task.step_budget == 0 { Node::Score } else { Node::Model };
    loop {
        node = match node {
            Node::Model => state.model_node(model).await,
            Node::Tools => state.tools_node(host).await,
            Node::Score => {
                state.score_node();
                return state.out;
            }
        };
    }
}

/// A node's entry in `graph_events`: the original's `{node, updates}` (the state keys it
/// wrote, sorted) with the step, the next node and why.
fn event(node: Node, updates: &[&str], step: u32, next: Node, reason: &str) -> Value {
    let mut updates: Vec<&str> = updates.to_vec();
    updates.sort_unstable();
    json!({"node": node.name(), "updates": updates, "step": step, "next": next.name(), "reason": reason})
}

impl State<'_> {
    fn step(&self) -> u32 {
        u32::try_from(self.out.requests.len()).unwrap_or(u32::MAX)
    }

    /// Ask for a turn; open its trajectory entry; go to `tools` when it has calls.
    async fn model_node(&mut self, model: &mut dyn Model) -> Node {
        let step = self.step();
        let messages = self.out.messages.clone();
        let Some(turn) = turn::ask(model, &mut self.out, step, messages, self.tools).await else {
            let event = event(Node::Model, &["errors", "requests", "termination"], step, Node::Score, "provider_error");
            self.out.graph_events.push(event);
            return Node::Score;
        };
        let ids = turn::call_ids(step, turn.calls.len());
        self.out.messages.push(turn::assistant_message(&turn, &ids));
        self.out.trajectory.push(turn::trajectory_entry(step, &turn, Vec::new()));
        self.pending = ids.into_iter().zip(turn.calls.iter().cloned()).collect();
        let mut updates = vec!["messages", "pending", "requests", "response_diagnostics", "trajectory"];
        if turn::has_usage(&turn) {
            updates.push("usage");
        }
        let (next, reason) = if self.pending.is_empty() {
            self.out.termination = Some(Termination::ModelStop);
            updates.push("termination");
            (Node::Score, "model_stop")
        } else {
            (Node::Tools, "tool_calls")
        };
        let event = event(Node::Model, &updates, step, next, reason);
        self.out.graph_events.push(event);
        next
    }

    /// Carry out the pending calls one by one, in order; then back to the model (recovering
    /// from any failure), or to `score` when the budget is spent.
    async fn tools_node(&mut self, host: &dyn ToolHost) -> Node {
        let step = self.step().saturating_sub(1);
        let mut failed = Vec::new();
        let mut records = Vec::new();
        for (id, call) in std::mem::take(&mut self.pending) {
            turn::record_call(&mut self.out, step, &id, &call);
            let dispatched = self.adapter.call(host, self.task.tools, &id, &call).await;
            if dispatched.error.is_some() {
                failed.push(id.clone());
            }
            let (message, record) = turn::finish_call(&mut self.out, step, &id, &call, dispatched);
            self.out.messages.push(message);
            records.push(record);
        }
        if let Some(Value::Array(calls)) = self.out.trajectory.last_mut().and_then(|entry| entry.get_mut("calls")) {
            calls.extend(records);
        }
        let (next, reason) = if self.out.requests.len() >= self.task.step_budget as usize {
            (Node::Score, "step_budget")
        } else if failed.is_empty() {
            (Node::Model, "continue")
        } else {
            (Node::Model, "recover")
        };
        let mut event = event(Node::Tools, &["errors", "messages", "pending", "trajectory"], step, next, reason);
        if !failed.is_empty() {
            event["failed"] = json!(failed);
        }
        self.out.graph_events.push(event);
        next
    }

    /// End: a run that neither stopped nor failed spent its budget.
    fn score_node(&mut self) {
        let termination = *self.out.termination.get_or_insert(Termination::BudgetExhausted);
        self.out.graph_events.push(json!({"node": "score", "updates": ["metrics"], "termination": termination}));
    }
}
