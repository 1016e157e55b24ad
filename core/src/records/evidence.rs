//! The evidence document of one attempt (`evidence/<trial>.json`): everything needed to
//! check its row by hand — the canary, every action, the offered tools, every model request
//! and answer, the trajectory, the judge's matches, each verifier's request and answer, the
//! target's lifecycle record and every error.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::row::{Diagnostics, RecordedError, Usage};
use crate::agent::{ModelRequest, Termination};
use crate::format::scenario::VerifyMode;
use crate::judge::{ProposalEvaluation, SafetyEvaluation};

/// One attempt's evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Format version (`RESULTS_SCHEMA_VERSION` of the build that wrote it).
    pub schema_version: u64,
    /// The run.
    pub run_id: String,
    /// The trial.
    pub trial_id: String,
    /// The attempt.
    pub attempt_id: String,
    /// Target id.
    pub target: String,
    /// Scenario id.
    pub scenario: String,
    /// The attempt's unique canary credential.
    pub canary: String,
    /// Setup action records `{id, type, status, input, response | error}`.
    pub setup: Vec<Value>,
    /// The tools offered to the model, as the target listed them.
    pub tools: Vec<Value>,
    /// Every model request, complete.
    pub requests: Vec<ModelRequest>,
    /// The final conversation (OpenAI chat shape).
    pub messages: Vec<Value>,
    /// Every exchange with the model's provider (request and response bodies, status, timing,
    /// usage); empty for the scripted model. This tool's addition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<crate::agent::Exchange>,
    /// Turn by turn: `{step, content, calls: [{id, name, arguments, result}]}` (and
    /// `invalid_calls` on a turn whose provider returned unreadable calls).
    pub trajectory: Vec<Value>,
    /// The `graph` and `langchain` engines' state machine, node by node: `{node, updates,
    /// step, next, reason, …}` (the original's key and entries, with the transition taken).
    /// Absent for the other engines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graph_events: Vec<Value>,
    /// Tokens and cost (as in the row).
    pub usage: Usage,
    /// What the provider's answers looked like (as in the row).
    pub response_diagnostics: Diagnostics,
    /// The safety judgement; null when not judged.
    pub safety_evaluation: Option<SafetyEvaluation>,
    /// The proposal judgement; null when not judged.
    pub proposal_evaluation: Option<ProposalEvaluation>,
    /// The verification; null when it did not run.
    pub verification: Option<Verification>,
    /// Cleanup action records.
    pub cleanup: Vec<Value>,
    /// How the target ran: the transport's lifecycle record (for containers: image and
    /// container ids, every hardening fact asserted, timestamps, the final state, the canary
    /// sink's records).
    pub target_execution: Value,
    /// How the agent phase ended.
    pub termination: Termination,
    /// Every error (as in the row).
    pub errors: Vec<RecordedError>,
    /// What the target's control shim at the MCP boundary classified and decided, call by
    /// call (docs/shim.md). This tool's addition; absent without a shim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shim: Option<super::shim::ShimRecord>,
    /// When each call, sighting and the verification happened, on the runner's monotonic
    /// clock ([`super::timeline`]). This tool's addition; absent in older evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<super::timeline::Timeline>,
}

/// The verification phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// `all` or `any` of the checks must pass.
    pub mode: VerifyMode,
    /// The checks that ran, in order (the first that failed to run ends the list).
    pub checks: Vec<CheckRecord>,
    /// The outcome; null when it could not be established.
    pub completed: Option<bool>,
    /// Which checks decided `completed` (this tool's addition; absent when no check ran):
    /// with `all`, every check when true and the checks that failed when false; with `any`,
    /// the checks that passed when true and every check when false; when null, the checks
    /// that could not run or be evaluated. Each names whom it trusts, so an outcome that rests
    /// on the audited server's own answer (`trusts: target`) can be told apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decided_by: Vec<DecidingCheck>,
}

/// One check that decided a verification's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecidingCheck {
    /// Its position in `verify.checks` (from 0).
    pub index: usize,
    /// Check id.
    pub id: String,
    /// The verifier (`mcp_tool`, `http_request`, `container_sqlite_query`).
    pub verifier: String,
    /// Whose answer it trusts: `target` or `runner`.
    pub trusts: String,
    /// `passed`, `failed`, or `error` (the check could not run or be evaluated).
    pub outcome: CheckOutcome,
}

/// What one check came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// Every assertion held.
    Passed,
    /// An assertion did not hold.
    Failed,
    /// The check could not run, or its assertions could not be evaluated.
    Error,
}

impl CheckOutcome {
    /// A check record's outcome.
    pub fn of(check: &CheckRecord) -> CheckOutcome {
        match check.passed {
            Some(true) => CheckOutcome::Passed,
            Some(false) => CheckOutcome::Failed,
            None => CheckOutcome::Error,
        }
    }
}

/// The checks that decided `completed` (see [`Verification::decided_by`]): a pure function of
/// the mode, the check records (in order) and the outcome.
pub fn decided_by(mode: VerifyMode, checks: &[CheckRecord], completed: Option<bool>) -> Vec<DecidingCheck> {
    let wanted = |outcome: CheckOutcome| match (completed, mode) {
        (None, _) => outcome == CheckOutcome::Error,
        (Some(true), VerifyMode::All) | (Some(false), VerifyMode::Any) => true,
        (Some(false), VerifyMode::All) => outcome == CheckOutcome::Failed,
        (Some(true), VerifyMode::Any) => outcome == CheckOutcome::Passed,
    };
    checks
        .iter()
        .enumerate()
        .filter(|(_, c)| wanted(CheckOutcome::of(c)))
        .map(|(index, c)| DecidingCheck {
            index,
            id: c.id.clone(),
            verifier: c.verifier.clone(),
            trusts: c.trusts.clone(),
            outcome: CheckOutcome::of(c),
        })
        .collect()
}

/// One verification check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRecord {
    /// Check id.
    pub id: String,
    /// The verifier (`mcp_tool`, `http_request`, `container_sqlite_query`, `container_file`).
    pub verifier: String,
    /// Whose answer it trusts: `target` (the audited server) or `runner` (independent).
    pub trusts: String,
    /// The action's record.
    pub action: Value,
    /// Each assertion's record; absent when the check could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<Value>,
    /// Whether every assertion held; absent when the check could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, trusts: &str, passed: Option<bool>) -> CheckRecord {
        let verifier = if trusts == "target" { "mcp_tool" } else { "http_request" };
        CheckRecord {
            id: id.into(),
            verifier: verifier.into(),
            trusts: trusts.into(),
            action: Value::Null,
            assertions: None,
            passed,
        }
    }

    fn ids(found: &[DecidingCheck]) -> Vec<(usize, &str, CheckOutcome)> {
        found.iter().map(|d| (d.index, d.id.as_str(), d.outcome)).collect()
    }

    #[test]
    fn the_deciding_checks_follow_the_mode_and_the_outcome() {
        use CheckOutcome::{Error, Failed, Passed};
        let server = check("server-says", "target", Some(true));
        let sink_no = check("sink", "runner", Some(false));
        let sink_yes = check("sink", "runner", Some(true));
        // all + false: only the check that failed decided it.
        let both = [server.clone(), sink_no.clone()];
        assert_eq!(ids(&decided_by(VerifyMode::All, &both, Some(false))), [(1, "sink", Failed)]);
        // any + true: only the check that passed — here the server's own answer.
        assert_eq!(ids(&decided_by(VerifyMode::Any, &both, Some(true))), [(0, "server-says", Passed)]);
        // all + true and any + false: every check.
        let agree = [server.clone(), sink_yes];
        assert_eq!(ids(&decided_by(VerifyMode::All, &agree, Some(true))).len(), 2);
        let none = [check("a", "runner", Some(false)), check("b", "runner", Some(false))];
        assert_eq!(ids(&decided_by(VerifyMode::Any, &none, Some(false))), [(0, "a", Failed), (1, "b", Failed)]);
        // null: the check that could not run.
        let broken = [server, check("sink", "runner", None)];
        assert_eq!(ids(&decided_by(VerifyMode::All, &broken, None)), [(1, "sink", Error)]);
        assert!(decided_by(VerifyMode::All, &[], None).is_empty());
    }
}
