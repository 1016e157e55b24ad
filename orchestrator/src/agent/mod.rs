//! Agent loops: drive a [`Model`] against a [`ToolHost`] within a step budget and return
//! what they observed ([`AgentOutcome`]); the judge assigns meaning afterwards, so every loop
//! shares one evaluator. The campaign's `engine` setting ([`LoopKind`]) selects the loop;
//! [`reference`] — the original's deterministic baseline — is the implementation in this
//! build. Another loop (`graph`, `create_agent`, `langchain`) is one implementation in this
//! folder, registered in [`for_kind`].

pub mod reference;

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

/// Why a loop cannot run in this build, if it cannot.
pub fn unavailable_reason(kind: LoopKind) -> Option<String> {
    match kind {
        LoopKind::Reference => None,
        other => Some(format!(
            "engine `{other}` drives a live model framework that this build of elengtis does not include yet; use engine `reference` (deterministic scripts) until live providers land"
        )),
    }
}

/// The loop a campaign's `engine` names.
pub fn for_kind(kind: LoopKind) -> Result<Box<dyn AgentLoop>, String> {
    match unavailable_reason(kind) {
        None => Ok(Box::new(reference::ReferenceLoop)),
        Some(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reference_without_model_runs_in_this_build() {
        assert!(unavailable_reason(LoopKind::Reference).is_none());
        let campaign = |model: Option<&str>| elengtis_core::format::campaign::Campaign {
            model: model.map(str::to_owned),
            ..serde_json::from_value(serde_json::json!({"schema_version": 1, "targets": [], "scenarios": []}))
                .expect("a minimal campaign")
        };
        assert!(crate::model::unavailable_reason(&campaign(None)).is_none());
        assert!(crate::model::unavailable_reason(&campaign(Some("m"))).is_some());
        assert!(unavailable_reason(LoopKind::Graph).unwrap().contains("graph"));
    }
}
