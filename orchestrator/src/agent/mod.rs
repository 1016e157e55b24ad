//! Agent loops: drive a [`Model`] against a [`ToolHost`] within a step budget and return
//! what they observed ([`AgentOutcome`]); the judge assigns meaning afterwards, so every loop
//! shares one evaluator. The campaign's `engine` setting ([`LoopKind`]) selects the loop, each
//! one implementation in this folder registered in [`for_kind`]:
//!
//! - [`reference`]: the original's deterministic baseline, a plain sequential loop;
//! - [`graph`]: the same semantics as an explicit state machine whose transitions are
//!   recorded (recovery after a tool error, step budget, strict tool ordering);
//! - [`create_agent`]: LangChain's prebuilt agent with framework defaults (a turn's calls
//!   dispatched concurrently, a model-call limit);
//! - [`langchain`]: the adapter-control condition, the graph over LangChain's adapters.
//!
//! A `rest` target is a black-box agent (model and loop behind one HTTP endpoint): [`rest`]
//! sends it the user's message and records its reply in the same outcome shape, with no tools;
//! no loop and no model of the campaign are involved.
//!
//! What they share (asking the model, message shapes, tool adapters) is in `turn`; where
//! and why they differ is `docs/engines.md`.

pub mod create_agent;
pub mod graph;
pub mod langchain;
pub mod reference;
pub mod rest;
mod turn;

use async_trait::async_trait;
pub use elengtis_core::agent::{AgentOutcome, Termination, ToolError, ToolErrorKind};
use elengtis_core::format::campaign::LoopKind;

use crate::model::Model;
use crate::toolhost::{ToolHost, ToolInfo};

/// What every loop is given: identical prompts and tools whatever the loop.
#[derive(Debug, Clone, Copy)]
pub struct AgentTask<'a> {
    /// The rendered system prompt.
    pub system: &'a str,
    /// The rendered user prompt.
    pub user: &'a str,
    /// The tools offered (the scenario's allowlist, in its order).
    pub tools: &'a [ToolInfo],
    /// Most model turns.
    pub step_budget: u32,
}

/// Drives a model against a tool host.
#[async_trait]
pub trait AgentLoop: Send + Sync + std::fmt::Debug {
    /// Run until the model stops, the budget runs out or the model fails.
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome;
}

/// Why a loop cannot run in this build, if it cannot: every engine runs, with any model.
pub fn unavailable_reason(kind: LoopKind) -> Option<String> {
    match kind {
        LoopKind::Reference | LoopKind::Graph | LoopKind::CreateAgent | LoopKind::Langchain => None,
    }
}

/// The loop a campaign's `engine` names.
pub fn for_kind(kind: LoopKind) -> Result<Box<dyn AgentLoop>, String> {
    if let Some(reason) = unavailable_reason(kind) {
        return Err(reason);
    }
    Ok(match kind {
        LoopKind::Reference => Box::new(reference::ReferenceLoop),
        LoopKind::Graph => Box::new(graph::GraphLoop),
        LoopKind::CreateAgent => Box::new(create_agent::CreateAgentLoop),
        LoopKind::Langchain => Box::new(langchain::LangChainLoop),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_runs_in_this_build_and_a_live_model_does_not_yet() {
        for kind in [LoopKind::Reference, LoopKind::Graph, LoopKind::CreateAgent, LoopKind::Langchain] {
            assert!(unavailable_reason(kind).is_none(), "{kind}");
            assert!(for_kind(kind).is_ok(), "{kind}");
        }
        let campaign = |model: Option<&str>| elengtis_core::format::campaign::Campaign {
            model: model.map(str::to_owned),
            ..serde_json::from_value(serde_json::json!({"schema_version": 1, "targets": [], "scenarios": []}))
                .expect("a minimal campaign")
        };
        assert!(crate::model::unavailable_reason(&campaign(None)).is_none());
        assert!(crate::model::unavailable_reason(&campaign(Some("m"))).is_some());
    }
}
