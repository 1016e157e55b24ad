//! One row of `runs.jsonl`: one attempt of one trial, its outcome and how it ended.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::nullable;
use crate::agent::{Termination, ToolError, ToolErrorKind};
use crate::format::campaign::LoopKind;

/// One attempt, as recorded in `runs.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Format version of rows and evidence (`RESULTS_SCHEMA_VERSION` of the build that wrote it).
    pub schema_version: u64,
    /// The run.
    pub run_id: String,
    /// `<target>--<scenario>--<index>`.
    pub trial_id: String,
    /// This attempt (a fresh id per attempt; retries get new ones).
    pub attempt_id: String,
    /// Target id.
    pub target: String,
    /// Scenario id.
    pub scenario: String,
    /// 0-based trial index.
    pub trial_index: u32,
    /// The agent loop that ran (the campaign's `engine` setting).
    pub engine: LoopKind,
    /// A proposal rule matched a recorded call; null when not judged.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub proposed: Option<bool>,
    /// The verified effect happened; null when unknown.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub completed: Option<bool>,
    /// No forbidden call was observed; null when not applicable or not judged.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub safety_pass: Option<bool>,
    /// `completed` and `safety_pass`; null when either is.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub safe_completed: Option<bool>,
    /// The model's id for analysis (the campaign's `model_id`, else `model`).
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<String>")]
    pub model_id: Option<String>,
    /// The model as configured (null: the scripted model).
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<String>")]
    pub model: Option<String>,
    /// Model turns taken.
    pub model_turns: u32,
    /// Tool calls the model made.
    pub tool_calls: u32,
    /// Tokens and cost.
    pub usage: Usage,
    /// The tools called, in order.
    pub tool_sequence: Vec<String>,
    /// Tool errors met during the exercise.
    pub tool_error_count: u32,
    /// `completed` when a tool error occurred, else null.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub recovery_succeeded: Option<bool>,
    /// What the provider's answers looked like.
    pub diagnostics: Diagnostics,
    /// Proposed but not completed; null when either is.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<bool>")]
    pub proposed_not_completed: Option<bool>,
    /// The earliest model turn with a proposal match.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<u32>")]
    pub steps_to_propose: Option<u32>,
    /// How the agent phase ended.
    pub termination: Termination,
    /// Every error of the attempt, in order.
    pub errors: Vec<RecordedError>,
    /// Why the attempt is incomplete; null when complete.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<FailureClass>")]
    pub failure_class: Option<FailureClass>,
    /// The evidence document, relative to the results directory.
    pub evidence: String,
    /// Whether the attempt counts.
    pub evidence_status: EvidenceStatus,
    /// SHA-256 (hex) of the evidence file's bytes as written (schema 2; absent in rows of
    /// schema 1, written before the hashes). Unkeyed: it shows an evidence file changed after
    /// its row was written by someone who did not also rewrite the row; anyone can recompute
    /// it. Only a seal signed with a key (`seal.json`) shows a change by someone without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_sha256: Option<String>,
    /// SHA-256 (hex) of the previous line of `runs.jsonl` (its bytes, without the newline);
    /// for the first row, of the empty string. The rows form a hash chain (schema 2; absent
    /// in rows of schema 1). Unkeyed: it shows rows removed, inserted, reordered or edited by
    /// someone who did not recompute the chain; rows removed from the end, or a chain
    /// recomputed, show only against the seal, and a recomputed seal only against its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_row_sha256: Option<String>,
    /// Wall time of the attempt in milliseconds (this tool's addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// This tool's addition, absent without a key: the runner's signature over the row, one
    /// per key it signs with, made as it appended the row ([`super::seal::row_message`]: the
    /// row's canonical JSON without this field, so its chain link and evidence hash too). A
    /// row after the seal, or in a run killed before it, is authenticated by it alone: with a
    /// key, `verify` and `run --resume` refuse a row no seal signed by the key covers and that
    /// the key did not sign.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<super::SealSignature>,
}

impl Row {
    /// Whether this attempt is complete (counts for its trial).
    pub fn is_complete(&self) -> bool {
        self.evidence_status == EvidenceStatus::Complete
    }
}

/// Tokens and cost of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input plus output.
    pub total_tokens: u64,
    /// Cost in US dollars; null when unknown (a live model without reported cost).
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<f64>")]
    pub cost_usd: Option<f64>,
    /// What the attempt charged against a spend cap.
    pub budget_charge_usd: f64,
    /// Requests whose cost could not be established.
    pub unknown_costs: u64,
    /// elengtis addition, `rest` targets only (absent otherwise): the requests made to the
    /// agent's endpoint and their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<crate::agent::EndpointUsage>,
}

/// What the provider's answers looked like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Diagnostics {
    /// The first answer's finish reason.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<String>")]
    pub first_finish_reason: Option<String>,
    /// The first answer's provider-native finish reason.
    #[serde(deserialize_with = "nullable::present")]
    #[schemars(with = "nullable::Nullable<String>")]
    pub first_native_finish_reason: Option<String>,
    /// Calls of tools that were not offered (or not callable as given).
    pub invalid_tool_calls: u32,
}

/// Whether an attempt counts for its trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStatus {
    /// Every phase ran and every outcome that could be established was.
    Complete,
    /// Something could not run or could not be established; the trial is retried on resume.
    Incomplete,
}

/// Why an attempt is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The model's provider failed.
    ProviderError,
    /// The step budget ran out.
    BudgetExceeded,
    /// A verifier could not establish the outcome.
    VerificationError,
    /// Anything else: the target, the sandbox, setup, cleanup or the runner.
    InfrastructureError,
}

impl FailureClass {
    /// The name used in results.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::ProviderError => "provider_error",
            FailureClass::BudgetExceeded => "budget_exceeded",
            FailureClass::VerificationError => "verification_error",
            FailureClass::InfrastructureError => "infrastructure_error",
        }
    }
}

/// The phase of an attempt an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Opening the target, or running the agent loop around the model.
    ConnectionOrAgent,
    /// A trusted setup action.
    Setup,
    /// A tool error the model met (data about the agent, not a failure of the attempt).
    Exercise,
    /// The model's provider.
    Model,
    /// Resolving the rules for judging.
    Evaluation,
    /// A trusted verification check.
    Verification,
    /// A trusted cleanup action.
    Cleanup,
    /// Closing the target and tearing its sandbox down.
    TargetCleanup,
}

impl Phase {
    /// An error in this phase makes the attempt incomplete.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            Phase::Setup | Phase::Verification | Phase::Cleanup | Phase::TargetCleanup | Phase::ConnectionOrAgent
        )
    }
}

/// One error of an attempt.
///
/// Errors of the runner's own phases read `{phase, action_id, detail}`; tool errors the model
/// met read `{kind, step, call_id, detail, phase: "exercise"}`. (The original's rows hold a
/// few more shapes; `analyze` reads them as these: see `records::original`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedError {
    /// A tool error's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolErrorKind>,
    /// A tool error's model turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// A tool error's call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The phase.
    pub phase: Phase,
    /// The action (setup, verify or cleanup) that failed: present, possibly null, on the
    /// runner's own errors; absent on tool errors.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schemars(with = "Option<String>")]
    pub action_id: Option<Option<String>>,
    /// What happened.
    pub detail: String,
}

/// A field that is present (possibly `null`) deserializes to `Some`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

impl RecordedError {
    /// An error of the runner's own phase, with the action it concerns.
    pub fn new(phase: Phase, action_id: Option<&str>, detail: impl Into<String>) -> Self {
        RecordedError {
            kind: None,
            step: None,
            call_id: None,
            phase,
            action_id: Some(action_id.map(str::to_owned)),
            detail: detail.into(),
        }
    }

    /// A tool error the model met.
    pub fn tool(error: &ToolError) -> Self {
        RecordedError {
            kind: Some(error.kind),
            step: Some(error.step),
            call_id: Some(error.call_id.clone()),
            phase: Phase::Exercise,
            action_id: None,
            detail: error.detail.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_originals_two_shapes() {
        let runner = RecordedError::new(Phase::Setup, None, "boom");
        assert_eq!(
            serde_json::to_value(&runner).unwrap(),
            serde_json::json!({"phase": "setup", "action_id": null, "detail": "boom"})
        );
        let tool = RecordedError::tool(&ToolError {
            kind: ToolErrorKind::UnknownTool,
            step: 2,
            call_id: "call_2_0".into(),
            detail: "tool `x` is not available".into(),
            transport: false,
        });
        assert_eq!(
            serde_json::to_value(&tool).unwrap(),
            serde_json::json!({"kind": "unknown_tool", "step": 2, "call_id": "call_2_0", "phase": "exercise", "detail": "tool `x` is not available"})
        );
        for e in [runner, tool] {
            let back: RecordedError = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
            assert_eq!(back, e);
        }
    }

    #[test]
    fn fatal_phases_are_the_originals() {
        let fatal: Vec<Phase> = [
            Phase::ConnectionOrAgent,
            Phase::Setup,
            Phase::Exercise,
            Phase::Model,
            Phase::Evaluation,
            Phase::Verification,
            Phase::Cleanup,
            Phase::TargetCleanup,
        ]
        .into_iter()
        .filter(|p| p.is_fatal())
        .collect();
        assert_eq!(
            fatal,
            [Phase::ConnectionOrAgent, Phase::Setup, Phase::Verification, Phase::Cleanup, Phase::TargetCleanup]
        );
    }
}
