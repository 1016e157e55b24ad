//! Records of the original tool (elengtis 0.1.0, Python) and how this build reads them.
//!
//! **Rows.** The original's `runs.jsonl` rows have this tool's fields, less `duration_ms`, and
//! `schema_version` [`SCHEMA_VERSION`]. A few values differ in shape; [`upgrade_row`] rewrites
//! them so the row reads as [`Row`](super::Row), with the same field-naming errors:
//!
//! | The original writes | Read as |
//! |---|---|
//! | `usage.budget_charge_usd: null` (no spend cap charged anything) | `0` |
//! | `model_turns`, `tool_calls: null` (the agent phase never ran) | `0`, as this tool records it |
//! | tool errors `{kind: "tool_error", step, call_id, detail}` | the same with `phase: "exercise"` |
//! | provider errors `{kind: "provider_error", step, detail}` and a spend cap's `{kind: "budget_exceeded", detail}` | `{phase: "model", step, detail}` (`step` kept when it is a turn) |
//!
//! Errors of the runner's own phases (`{phase, action_id, detail}`, or `{phase, detail}` for
//! `connection_or_agent` and `target_cleanup`) read unchanged.
//!
//! **Manifests.** The original's `manifest.json` differs more: `schema_version` 6,
//! `metrics_version` 3, no `campaign_path`, the campaign and scenarios in its own dump, and an
//! `environment` describing a Python process (`python`, `platform`, `package_version`, …).
//! Only this tool's manifests resume (the strict [`Manifest`](super::Manifest)); `analyze`
//! reads the fields both share ([`crate::analysis::AnalysisManifest`]) and tells the two
//! apart with [`is_original_environment`].

use serde_json::{Map, Value, json};

/// `schema_version` of the original's rows, evidence and manifest.
pub const SCHEMA_VERSION: u64 = 6;

/// `metrics_version` of the original's manifest.
pub const METRICS_VERSION: u64 = 3;

/// Whether a manifest's `environment` was recorded by the original: it names the Python
/// that ran (`python`), which this tool's never does.
pub fn is_original_environment(environment: &Map<String, Value>) -> bool {
    environment.contains_key("python")
}

/// Rewrites a row written by the original into this build's shape (see the module docs).
/// Anything else is left as it is, for [`Row`](super::Row)'s reader to judge.
pub fn upgrade_row(row: &mut Value) {
    let Some(object) = row.as_object_mut() else { return };
    for counter in ["model_turns", "tool_calls"] {
        if object.get(counter) == Some(&Value::Null) {
            object.insert(counter.to_owned(), json!(0));
        }
    }
    if let Some(Value::Object(usage)) = object.get_mut("usage")
        && usage.get("budget_charge_usd") == Some(&Value::Null)
    {
        usage.insert("budget_charge_usd".to_owned(), json!(0.0));
    }
    if let Some(Value::Array(errors)) = object.get_mut("errors") {
        for error in errors.iter_mut().filter_map(Value::as_object_mut) {
            upgrade_error(error);
        }
    }
}

/// Gives an error of the original's agent loop the phase this tool records it under.
fn upgrade_error(error: &mut Map<String, Value>) {
    if error.contains_key("phase") {
        return;
    }
    match error.get("kind").and_then(Value::as_str) {
        Some("tool_error") => {
            error.insert("phase".to_owned(), json!("exercise"));
        }
        Some("provider_error" | "budget_exceeded") => {
            error.remove("kind");
            if error.get("step").is_some_and(|step| step.as_u64().is_none()) {
                error.remove("step");
            }
            error.insert("phase".to_owned(), json!("model"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ToolErrorKind;
    use crate::records::read::from_value;
    use crate::records::{Phase, RecordedError, Row};

    const EXAMPLE_ROWS: &str = include_str!("../../../tests/fixtures/original-0.1.0/example/runs.jsonl");
    const MIXED_ROWS: &str = include_str!("../../../tests/fixtures/original-0.1.0/mixed/runs.jsonl");

    fn rows(text: &str) -> Vec<Value> {
        text.lines().map(|line| serde_json::from_str(line).expect("a JSON row")).collect()
    }

    fn upgraded(mut row: Value) -> Row {
        upgrade_row(&mut row);
        from_value(&row).expect("an upgraded row reads as a Row")
    }

    #[test]
    fn the_originals_rows_read_as_rows_once_upgraded() {
        let example = rows(EXAMPLE_ROWS);
        assert!(from_value::<Row>(&example[0]).is_err(), "budget_charge_usd: null is the original's");
        let row = upgraded(example[0].clone());
        assert_eq!(row.schema_version, SCHEMA_VERSION);
        assert_eq!(row.usage.budget_charge_usd, 0.0);
        assert_eq!(row.proposed, Some(true));
        assert!(row.is_complete());

        let mixed: Vec<Row> = rows(MIXED_ROWS).into_iter().map(upgraded).collect();
        assert_eq!(mixed.len(), 4);
        // A tool error the model met, with the phase this tool records it under.
        assert_eq!(mixed[0].errors[0].kind, Some(ToolErrorKind::ToolError));
        assert_eq!(mixed[0].errors[0].phase, Phase::Exercise);
        assert_eq!(mixed[0].tool_error_count, 1);
        // A target that never started: the agent phase never ran.
        assert_eq!((mixed[2].model_turns, mixed[2].tool_calls), (0, 0));
        assert_eq!(mixed[2].errors[0].phase, Phase::ConnectionOrAgent);
        assert_eq!(mixed[2].errors[0].action_id, None, "the original gives no action_id there");
        assert!(!mixed[2].is_complete());
    }

    #[test]
    fn upgraded_rows_are_valid_by_the_row_schema() {
        let schema = serde_json::to_value(crate::jsonschema::schema_for::<Row>()).expect("schema");
        let validator = jsonschema::validator_for(&schema).expect("the row schema compiles");
        for mut row in rows(EXAMPLE_ROWS).into_iter().chain(rows(MIXED_ROWS)) {
            assert!(!validator.is_valid(&row), "the original's rows differ from ours: {row}");
            upgrade_row(&mut row);
            let errors: Vec<String> =
                validator.iter_errors(&row).map(|e| format!("{}: {e}", e.instance_path())).collect();
            assert!(errors.is_empty(), "{errors:#?}\n{row}");
        }
    }

    #[test]
    fn model_errors_get_the_model_phase() {
        let mut error = json!({"kind": "provider_error", "step": 3, "detail": "rate limited"})
            .as_object()
            .cloned()
            .expect("object");
        upgrade_error(&mut error);
        let read: RecordedError = serde_json::from_value(Value::Object(error)).expect("reads");
        assert_eq!(
            (read.phase, read.kind, read.step, read.detail.as_str()),
            (Phase::Model, None, Some(3), "rate limited")
        );

        // The LangChain adapters record step −1 when the provider failed before any request.
        let mut early = json!({"kind": "provider_error", "step": -1, "detail": "x"}).as_object().cloned().expect("o");
        upgrade_error(&mut early);
        assert_eq!(Value::Object(early), json!({"detail": "x", "phase": "model"}));

        let mut budget = json!({"kind": "budget_exceeded", "detail": "cap"}).as_object().cloned().expect("o");
        upgrade_error(&mut budget);
        assert_eq!(Value::Object(budget), json!({"detail": "cap", "phase": "model"}));

        let mut unknown = json!({"kind": "mystery", "detail": "?"}).as_object().cloned().expect("o");
        upgrade_error(&mut unknown);
        assert_eq!(Value::Object(unknown), json!({"kind": "mystery", "detail": "?"}), "left for the reader to refuse");
    }

    #[test]
    fn this_tools_rows_are_left_alone() {
        let mut row = json!({"model_turns": 0, "usage": {"budget_charge_usd": 0.0}, "errors": [
            {"phase": "setup", "action_id": null, "detail": "d"},
            {"kind": "tool_error", "step": 1, "call_id": "c", "phase": "exercise", "detail": "d"},
        ]});
        let before = row.clone();
        upgrade_row(&mut row);
        assert_eq!(row, before);
    }
}
