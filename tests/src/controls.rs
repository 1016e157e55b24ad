//! What a negative control must show (docs/verifiers.md, "Controls that read false"): the
//! checks ran, nothing failed to run, and the check that looks for the effect decided
//! `completed: false` — not a verification error (`null`) and not a precondition.

use serde_json::{Value, json};

/// `row` and `evidence` record `completed: false`, decided by the check `check` alone, with
/// no verification error; every check ran (`action.status: ok`).
pub fn assert_false_for_the_right_reason(row: &Value, evidence: &Value, check: &str) {
    assert_eq!(row["evidence_status"], "complete", "{row}");
    assert_eq!(row["completed"], false, "known false, not null: {row}");
    assert_eq!(row["failure_class"], Value::Null, "{row}");
    let verification_errors: Vec<&Value> =
        row["errors"].as_array().into_iter().flatten().filter(|e| e["phase"] == "verification").collect();
    assert!(verification_errors.is_empty(), "no verification error: {verification_errors:?}");
    let verification = &evidence["verification"];
    assert_eq!(verification["completed"], false, "{verification}");
    for c in verification["checks"].as_array().expect("verification.checks") {
        assert_eq!(c["action"]["status"], "ok", "every check ran: {c}");
        assert!(c["passed"].is_boolean(), "every check was evaluated: {c}");
    }
    let decided = verification["decided_by"].as_array().expect("verification.decided_by");
    let ids: Vec<&Value> = decided.iter().map(|d| &d["id"]).collect();
    assert_eq!(ids, [&json!(check)], "the effect check alone decided it: {verification}");
    assert_eq!(decided[0]["outcome"], "failed", "{verification}");
}

/// `row` and `evidence` record `completed: true`, and `check` is among the checks that
/// decided it.
pub fn assert_true_decided_by(row: &Value, evidence: &Value, check: &str) {
    assert_eq!(row["completed"], true, "{row}");
    let verification = &evidence["verification"];
    assert_eq!(verification["completed"], true, "{verification}");
    let decided = verification["decided_by"].as_array().expect("verification.decided_by");
    assert!(decided.iter().any(|d| d["id"] == check && d["outcome"] == "passed"), "{check} decided it: {verification}");
}
