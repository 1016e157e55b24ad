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
//! reads the fields both share ([`crate::analysis::AnalysisManifest`]).
//!
//! **Recognised by its whole shape.** A directory is the original's only when its manifest
//! has exactly the original's fields ([`OriginalManifest`]: every one the original writes,
//! none of this tool's) and every row exactly the original's ([`read_row`]: no
//! `duration_ms`, `evidence_sha256` or `prev_row_sha256`, `schema_version` 6) — never by a
//! version field or one key alone ([`is_original_manifest`]). Its results carry no hashes,
//! so nothing beyond that shape can be checked.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Row;
use super::read::{FieldError, from_value};

/// `schema_version` of the original's rows, evidence and manifest.
pub const SCHEMA_VERSION: u64 = 6;

/// `metrics_version` of the original's manifest.
pub const METRICS_VERSION: u64 = 3;

/// The original's `manifest.json`, field for field (read strictly: a field the original
/// does not write is refused).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginalManifest {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u64,
    /// Always [`METRICS_VERSION`].
    pub metrics_version: u64,
    /// The run.
    pub run_id: String,
    /// When it started.
    pub started_at: String,
    /// The campaign, in the original's dump.
    pub campaign: Map<String, Value>,
    /// The scenarios, in the original's dump.
    pub scenarios: Vec<Map<String, Value>>,
    /// The campaign file's and the scenarios' hashes.
    pub configuration: OriginalConfiguration,
    /// Experiment labels.
    pub experiment: OriginalExperiment,
    /// The Python process that ran it.
    pub environment: OriginalEnvironment,
    /// Consecutive failures that stop a target.
    pub max_consecutive_target_failures: u64,
    /// Every resume (written by the original's first resume).
    #[serde(default)]
    pub resumes: Option<Vec<OriginalResume>>,
}

/// The original's `configuration`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginalConfiguration {
    /// The campaign file's hash.
    pub campaign_sha256: String,
    /// Each scenario's hash.
    pub scenario_sha256: Map<String, Value>,
}

/// The original's `experiment`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginalExperiment {
    /// Experiment id.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<String>")]
    pub id: Option<String>,
    /// Block.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<u64>")]
    pub block: Option<u64>,
    /// Order.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<u64>")]
    pub order: Option<u64>,
    /// Model label.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<String>")]
    pub model_id: Option<String>,
    /// Generation settings.
    pub generation: Map<String, Value>,
}

/// The original's `environment`: a Python process.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginalEnvironment {
    /// Python's version.
    pub python: String,
    /// `platform.platform()`.
    pub platform: String,
    /// The package's version.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<String>")]
    pub package_version: Option<String>,
    /// Its dependencies' versions.
    pub package_versions: Map<String, Value>,
    /// The git revision, when known.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<String>")]
    pub code_revision: Option<String>,
    /// Whether the work tree was dirty, when known.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<bool>")]
    pub working_tree_dirty: Option<bool>,
    /// Each source file's hash.
    pub source_sha256: Map<String, Value>,
    /// The lock file's hash, when there is one.
    #[serde(deserialize_with = "super::nullable::present")]
    #[schemars(with = "super::nullable::Nullable<String>")]
    pub lock_sha256: Option<String>,
}

/// One resume recorded by the original.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginalResume {
    /// When.
    pub resumed_at: String,
    /// The Python process that resumed it.
    pub environment: OriginalEnvironment,
}

/// Why a manifest is not the original's: a field it lacks, has in excess or holds wrongly, or
/// a version other than the original's.
pub fn read_manifest(value: &Value) -> Result<OriginalManifest, FieldError> {
    let manifest: OriginalManifest = from_value(value)?;
    for (field, found, expected) in [
        ("schema_version", manifest.schema_version, SCHEMA_VERSION),
        ("metrics_version", manifest.metrics_version, METRICS_VERSION),
    ] {
        if found != expected {
            return Err(FieldError::Invalid { field: field.to_owned(), expected: expected.to_string() });
        }
    }
    Ok(manifest)
}

/// Whether a manifest has the original's whole shape (see the module docs): never decided by a
/// version field or a single key.
pub fn is_original_manifest(value: &Value) -> bool {
    read_manifest(value).is_ok()
}

/// Fields this tool adds to a row, which the original never writes.
const ADDED_ROW_FIELDS: [&str; 3] = ["duration_ms", "evidence_sha256", "prev_row_sha256"];

/// Reads a row of the original's: exactly its fields (none of this tool's additions), of
/// [`SCHEMA_VERSION`], upgraded to this build's shape ([`upgrade_row`]).
///
/// # Errors
///
/// A [`FieldError`] naming the field at fault.
pub fn read_row(value: &Value) -> Result<Row, FieldError> {
    let Some(object) = value.as_object() else { return Err(FieldError::NotObject) };
    if let Some(added) = ADDED_ROW_FIELDS.iter().find(|field| object.contains_key(**field)) {
        return Err(FieldError::Unknown { field: (*added).to_owned() });
    }
    match object.get("schema_version").and_then(Value::as_u64) {
        Some(SCHEMA_VERSION) => {}
        _ => return Err(FieldError::Invalid { field: "schema_version".into(), expected: SCHEMA_VERSION.to_string() }),
    }
    let mut upgraded = value.clone();
    upgrade_row(&mut upgraded);
    from_value(&upgraded)
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

    const EXAMPLE_MANIFEST: &str = include_str!("../../../tests/fixtures/original-0.1.0/example/manifest.json");
    const MIXED_MANIFEST: &str = include_str!("../../../tests/fixtures/original-0.1.0/mixed/manifest.json");

    #[test]
    fn the_original_is_recognised_by_its_whole_shape_only() {
        for text in [EXAMPLE_MANIFEST, MIXED_MANIFEST] {
            let manifest: Value = serde_json::from_str(text).expect("JSON");
            assert!(is_original_manifest(&manifest), "{}", read_manifest(&manifest).expect_err("shape"));
            // One field of this tool's, or one of the original's missing, and it is not.
            let mut added = manifest.clone();
            added["campaign_path"] = json!("c.yaml");
            assert!(!is_original_manifest(&added));
            let mut removed = manifest.clone();
            removed["environment"].as_object_mut().expect("object").remove("lock_sha256");
            assert!(!is_original_manifest(&removed));
            let mut version = manifest.clone();
            version["schema_version"] = json!(2);
            assert!(!is_original_manifest(&version));
        }
        // This tool's manifest with the original's `environment.python` added is not the original's.
        let ours = json!({"schema_version": 6, "metrics_version": 3, "run_id": "r", "environment": {"python": "3.12"}});
        assert!(!is_original_manifest(&ours));
    }

    #[test]
    fn the_originals_rows_are_read_strictly() {
        let row = rows(EXAMPLE_ROWS).remove(0);
        assert!(read_row(&row).is_ok());
        for added in ADDED_ROW_FIELDS {
            let mut extra = row.clone();
            extra[added] = json!("x");
            assert_eq!(read_row(&extra).expect_err("added"), FieldError::Unknown { field: added.into() });
        }
        let mut ours = row.clone();
        ours["schema_version"] = json!(2);
        assert!(read_row(&ours).is_err());
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
