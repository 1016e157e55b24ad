//! A row's fields that its evidence determines, computed from the evidence: the one function
//! the runner writes a row with and `verify` checks a row with, so a row whose outcome
//! disagrees with its own evidence (`completed` flipped, a tool dropped from its sequence) is
//! found whatever hashes were recomputed.
//!
//! Determined by the evidence: the identity (`schema_version`, `run_id`, `trial_id`,
//! `attempt_id`, `target`, `scenario`), `proposed`, `steps_to_propose`, `safety_pass`,
//! `completed`, `termination`, `errors`, `usage`, `diagnostics`, `model_turns` (the requests
//! made), `tool_calls` and `tool_sequence` (the trajectory's calls), `tool_error_count` (the
//! errors of tool calls), and what [`Outcome::decide`] makes of them (`safe_completed`,
//! `proposed_not_completed`, `recovery_succeeded`, `evidence_status`, `failure_class`). Not
//! determined by it: `trial_index`, `engine`, `model_id`, `model` (the manifest's campaign
//! decides those), `evidence`, the hashes and `duration_ms`.
//!
//! [`inconsistencies`] also checks the evidence's own summaries against their parts: a
//! judgement's outcome against its matches, the verification's outcome against its checks.

use serde_json::Value;

use super::evidence::{Evidence, decided_by};
use super::outcome::{Outcome, OutcomeInputs};
use super::row::Row;
use crate::format::scenario::VerifyMode;
use crate::judge;

/// Sets every field of `row` that `evidence` determines (see the module docs).
pub fn apply(evidence: &Evidence, row: &mut Row) {
    row.schema_version = evidence.schema_version;
    row.run_id.clone_from(&evidence.run_id);
    row.trial_id.clone_from(&evidence.trial_id);
    row.attempt_id.clone_from(&evidence.attempt_id);
    row.target.clone_from(&evidence.target);
    row.scenario.clone_from(&evidence.scenario);
    let proposal = evidence.proposal_evaluation.as_ref();
    row.proposed = proposal.and_then(|p| p.proposed);
    row.steps_to_propose = proposal.and_then(|p| p.steps_to_propose);
    row.safety_pass = evidence.safety_evaluation.as_ref().and_then(|s| s.passed);
    row.completed = evidence.verification.as_ref().and_then(|v| v.completed);
    row.termination = evidence.termination;
    row.errors.clone_from(&evidence.errors);
    row.usage = evidence.usage;
    row.diagnostics.clone_from(&evidence.response_diagnostics);
    row.model_turns = count(evidence.requests.len());
    let calls: Vec<String> = evidence
        .trajectory
        .iter()
        .filter_map(|turn| turn.get("calls").and_then(Value::as_array))
        .flatten()
        .map(|call| call.get("name").and_then(Value::as_str).unwrap_or_default().to_owned())
        .collect();
    row.tool_calls = count(calls.len());
    row.tool_sequence = calls;
    row.tool_error_count = count(evidence.errors.iter().filter(|e| e.kind.is_some()).count());
    // A setup that was not clean left an error of a fatal phase (or no agent phase at all,
    // an `infrastructure_error`): the outcome is the same as the runner decided it.
    let has_checks = evidence.verification.as_ref().is_some_and(|v| !v.checks.is_empty());
    let outcome = Outcome::decide(&OutcomeInputs {
        setup_clean: true,
        termination: row.termination,
        proposed: row.proposed,
        completed: row.completed,
        safety_pass: row.safety_pass,
        has_checks,
        tool_error_count: row.tool_error_count,
        errors: &row.errors,
    });
    row.safe_completed = outcome.safe_completed;
    row.proposed_not_completed = outcome.proposed_not_completed;
    row.recovery_succeeded = outcome.recovery_succeeded;
    row.evidence_status = outcome.status;
    row.failure_class = outcome.failure_class;
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The fields of `row` that differ from what `evidence` determines: `(field, in the row, from
/// the evidence)`, in row order.
pub fn differences(evidence: &Evidence, row: &Row) -> Vec<(String, Value, Value)> {
    let mut expected = row.clone();
    apply(evidence, &mut expected);
    let (Ok(Value::Object(found)), Ok(Value::Object(wanted))) =
        (serde_json::to_value(row), serde_json::to_value(&expected))
    else {
        return Vec::new();
    };
    found
        .iter()
        .filter_map(|(field, value)| {
            let other = wanted.get(field).cloned().unwrap_or(Value::Null);
            (*value != other).then(|| (field.clone(), value.clone(), other))
        })
        .collect()
}

/// Where the evidence's summaries disagree with their own parts, in words.
pub fn inconsistencies(evidence: &Evidence) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(p) = &evidence.proposal_evaluation {
        let proposed = judge::proposed_of(&p.matches, &p.unresolved);
        if p.proposed != proposed {
            found.push(format!(
                "proposal_evaluation.proposed is {} but its matches and unresolved calls make it {}",
                shown(p.proposed),
                shown(proposed)
            ));
        }
        let first = p.matches.iter().map(|m| m.step).min();
        if p.steps_to_propose != first {
            found.push(format!(
                "proposal_evaluation.steps_to_propose is {} but its first match is at step {}",
                shown(p.steps_to_propose),
                shown(first)
            ));
        }
    }
    if let Some(s) = &evidence.safety_evaluation
        && s.passed.is_some()
    {
        let passed = judge::safety_passed_of(&s.violations, &s.unresolved);
        if s.passed != passed {
            found.push(format!(
                "safety_evaluation.passed is {} but its violations and unresolved calls make it {}",
                shown(s.passed),
                shown(passed)
            ));
        }
    }
    if let Some(v) = &evidence.verification {
        let results: Vec<bool> = v.checks.iter().filter_map(|c| c.passed).collect();
        let error = v.checks.iter().any(|c| c.passed.is_none());
        let completed = judge::completed(&results, v.mode == VerifyMode::Any, error);
        if v.completed != completed {
            found.push(format!(
                "verification.completed is {} but its checks make it {}",
                shown(v.completed),
                shown(completed)
            ));
        }
        if v.decided_by != decided_by(v.mode, &v.checks, v.completed) {
            found.push("verification.decided_by does not name the checks that decide its outcome".to_owned());
        }
    }
    found
}

fn shown<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| v.to_string())
}
