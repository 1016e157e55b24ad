//! Each trial as the page shows it: a small index entry (the list, its filters and search)
//! and the details of its final attempt (rendered by the page's script when opened), taken
//! from the final row the analysis chose and its evidence document.

use std::path::{Component, Path};

use elengtis_core::analysis::CountedTrial;
use serde_json::{Map, Value, json};

use super::ReportError;
use super::load::Run;

/// Fields of the evidence carried into the page as they are.
const EVIDENCE_FIELDS: [&str; 13] = [
    "canary",
    "setup",
    "cleanup",
    "trajectory",
    "graph_events",
    "proposal_evaluation",
    "safety_evaluation",
    "verification",
    "target_execution",
    "termination",
    "errors",
    "shim",
    "response_diagnostics",
];

/// Fields of a provider exchange carried into the page (its request and response bodies stay
/// in the evidence file: a live run's bodies repeat the whole conversation at every step).
const EXCHANGE_FIELDS: [&str; 10] =
    ["provider", "model", "step", "attempt", "status", "latency_ms", "error", "usage", "budget_charge_usd", "fixture"];

/// Every trial: list entries and details, in the same order.
#[derive(Debug, Default)]
pub(super) struct Trials {
    pub(super) index: Vec<Value>,
    pub(super) details: Vec<Value>,
}

impl Trials {
    /// Trials shown.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }
}

/// The trials the analysis counted, each with its final attempt's row and evidence.
pub(super) fn collect(runs: &[Run], counted: &[CountedTrial]) -> Result<Trials, ReportError> {
    let mut trials = Trials::default();
    for trial in counted {
        let Some(run) = runs.get(trial.input) else { continue };
        let (entry, detail) = match trial.final_row.and_then(|index| run.rows.get(index)) {
            Some(row) => {
                let evidence = read_evidence(run, row)?;
                let attempts: Vec<&Value> = trial.attempts.iter().filter_map(|&index| run.rows.get(index)).collect();
                (entry(trial, Some(row), &evidence, attempts.len()), detail(run, row, &evidence, &attempts))
            }
            None => (entry(trial, None, &Value::Null, 0), json!({"run_id": run_id(run), "not_run": true})),
        };
        trials.index.push(entry);
        trials.details.push(detail);
    }
    Ok(trials)
}

fn run_id(run: &Run) -> Value {
    run.manifest.get("run_id").cloned().unwrap_or(Value::Null)
}

/// The evidence a row names, read from inside its results directory as `verify` read it
/// (through no link, with the hash the row pins).
fn read_evidence(run: &Run, row: &Value) -> Result<Value, ReportError> {
    let relative = row.get("evidence").and_then(Value::as_str).unwrap_or_default();
    let path = Path::new(relative);
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(ReportError::Input {
            path: run.dir.join("runs.jsonl"),
            why: format!("a row names the evidence file `{relative}`, which is not inside the results directory"),
        });
    }
    crate::results::verify::read_row_evidence(&run.dir, row)
        .map(Option::unwrap_or_default)
        .map_err(|why| ReportError::Input { path: run.dir.clone(), why })
}

/// What a trial's outcome is, for the list's filter: the verified effect, else why not.
fn outcome(row: Option<&Value>) -> &'static str {
    let Some(row) = row else { return "not_run" };
    match row.get("completed").and_then(Value::as_bool) {
        Some(true) => "completed",
        Some(false) => "not_completed",
        None => "unknown",
    }
}

fn entry(trial: &CountedTrial, row: Option<&Value>, evidence: &Value, attempts: usize) -> Value {
    let field = |name: &str| row.and_then(|r| r.get(name)).cloned().unwrap_or(Value::Null);
    let termination = row.map_or(Value::from("not_run"), |r| r.get("termination").cloned().unwrap_or(Value::Null));
    let mut search = vec![
        trial.trial_id.clone(),
        trial.target.clone(),
        trial.scenario.clone(),
        trial.model_id.clone(),
        trial.engine.clone(),
    ];
    for name in ["termination", "failure_class", "attempt_id", "run_id"] {
        if let Some(text) = field(name).as_str() {
            search.push(text.to_owned());
        }
    }
    for tool in field("tool_sequence").as_array().into_iter().flatten().filter_map(Value::as_str) {
        search.push(tool.to_owned());
    }
    for error in field("errors").as_array().into_iter().flatten() {
        if let Some(detail) = error.get("detail").and_then(Value::as_str) {
            search.push(detail.to_owned());
        }
    }
    for key in ["proposal_evaluation", "safety_evaluation"] {
        let list = if key == "proposal_evaluation" { "matches" } else { "violations" };
        for m in evidence.get(key).and_then(|e| e.get(list)).and_then(Value::as_array).into_iter().flatten() {
            if let Some(rule) = m.get("rule_id").and_then(Value::as_str) {
                search.push(rule.to_owned());
            }
        }
    }
    json!({
        "id": trial.trial_id,
        "run": trial.input,
        "target": trial.target,
        "scenario": trial.scenario,
        "model": trial.model_id,
        "engine": trial.engine,
        "outcome": outcome(row),
        "proposed": field("proposed"),
        "completed": field("completed"),
        "safety": field("safety_pass"),
        "safe": field("safe_completed"),
        "termination": termination,
        "failure": field("failure_class"),
        "status": field("evidence_status"),
        "attempts": attempts,
        "errors": field("errors").as_array().map_or(0, Vec::len),
        "search": search.join("\n").to_lowercase(),
    })
}

fn detail(run: &Run, row: &Value, evidence: &Value, attempts: &[&Value]) -> Value {
    let mut out = Map::new();
    out.insert("run_label".into(), json!(run.label()));
    out.insert("row".into(), row.clone());
    out.insert(
        "attempts".into(),
        Value::Array(
            attempts
                .iter()
                .map(|a| {
                    json!({
                        "attempt_id": a.get("attempt_id"),
                        "termination": a.get("termination"),
                        "failure_class": a.get("failure_class"),
                        "evidence_status": a.get("evidence_status"),
                        "errors": a.get("errors"),
                        "duration_ms": a.get("duration_ms"),
                    })
                })
                .collect(),
        ),
    );
    for name in EVIDENCE_FIELDS {
        if let Some(value) = evidence.get(name) {
            out.insert(name.into(), value.clone());
        }
    }
    // The prompts: the conversation up to the model's first turn (the turns themselves are the
    // trajectory's; the final conversation repeats them).
    let prompts: Vec<Value> = evidence
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take_while(|m| m.get("role").and_then(Value::as_str) != Some("assistant"))
        .cloned()
        .collect();
    out.insert("prompts".into(), Value::Array(prompts));
    let tools: Vec<Value> = evidence
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tool| json!({"name": tool.get("name"), "description": tool.get("description")}))
        .collect();
    out.insert("tools".into(), Value::Array(tools));
    let exchanges: Vec<Value> = evidence
        .get("exchanges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|exchange| {
            Value::Object(
                EXCHANGE_FIELDS
                    .iter()
                    .filter_map(|&name| exchange.get(name).map(|v| (name.to_owned(), v.clone())))
                    .collect(),
            )
        })
        .collect();
    out.insert("exchanges".into(), Value::Array(exchanges));
    out.insert("snapshots".into(), Value::Array(snapshot_hashes(evidence)));
    Value::Object(out)
}

/// Every hash a verification check recorded (a SQLite snapshot's `snapshot_sha256` and
/// `wal_sha256`, a file's `sha256`): `{check, field, sha256}`.
fn snapshot_hashes(evidence: &Value) -> Vec<Value> {
    let mut found = Vec::new();
    let checks = evidence.get("verification").and_then(|v| v.get("checks")).and_then(Value::as_array);
    for check in checks.into_iter().flatten() {
        let id = check.get("id").cloned().unwrap_or(Value::Null);
        let verifier = check.get("verifier").cloned().unwrap_or(Value::Null);
        let mut hashes = Vec::new();
        if let Some(action) = check.get("action") {
            hashes_in(action, "", &mut hashes);
        }
        for (field, sha256) in hashes {
            found.push(json!({"check": id, "verifier": verifier, "field": field, "sha256": sha256}));
        }
    }
    found
}

fn hashes_in(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let path = format!("{at}/{key}");
                match child {
                    Value::String(text) if key.ends_with("sha256") => out.push((path, text.clone())),
                    _ => hashes_in(child, &path, out),
                }
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                hashes_in(child, &format!("{at}/{index}"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_found_anywhere_in_a_checks_action() {
        let evidence = json!({"verification": {"checks": [
            {"id": "row", "verifier": "container_sqlite_query", "action": {"response": {"snapshot_sha256": "ab", "rows": [{"sha256": "not a hash field of the snapshot but reported"}]}}},
            {"id": "plain", "verifier": "http_request", "action": {"response": {"status": 200}}}
        ]}});
        let found = snapshot_hashes(&evidence);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0]["field"], "/response/snapshot_sha256");
        assert_eq!(found[0]["sha256"], "ab");
        assert_eq!(found[0]["check"], "row");
    }

    #[test]
    fn the_outcome_filter_follows_completed_and_never_calls_null_false() {
        assert_eq!(outcome(Some(&json!({"completed": true}))), "completed");
        assert_eq!(outcome(Some(&json!({"completed": false}))), "not_completed");
        assert_eq!(outcome(Some(&json!({"completed": null}))), "unknown");
        assert_eq!(outcome(None), "not_run");
    }
}
