//! Which format a results directory is read in: exactly one, decided from the manifest's
//! whole shape, and every row read in that format only.
//!
//! | Format | Manifest | Rows |
//! |---|---|---|
//! | [`ResultsFormat::Chained`] | this tool's [`Manifest`], `schema_version` 2, with `configuration.recorded_campaign_sha256` | [`Row`] of `schema_version` 2 with `evidence_sha256` and `prev_row_sha256` |
//! | [`ResultsFormat::Unchained`] | this tool's [`Manifest`], `schema_version` 1, without `recorded_campaign_sha256` | [`Row`] of `schema_version` 1 without either hash |
//! | [`ResultsFormat::Original`] | the original 0.1.0's, field for field ([`original::OriginalManifest`]) | the original's, field for field ([`original::read_row`]) |
//!
//! A version field never decides alone: a manifest of version 1 that carries a hash, a row of
//! version 1 that carries one, or a manifest with one key of the other format's is refused,
//! not read in the weaker format. Only [`ResultsFormat::Chained`] can be checked for
//! integrity; the other two are read for their shape only (and say so).

use serde_json::Value;

use super::read::{FieldError, from_value};
use super::{Manifest, RESULTS_SCHEMA_VERSION, RESULTS_SCHEMA_VERSION_UNCHAINED, Row, original};

/// The format a results directory is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultsFormat {
    /// This tool's, with the hash chain (`schema_version` 2): integrity can be checked.
    Chained,
    /// This tool's first version (`schema_version` 1), written before the hashes.
    Unchained,
    /// The original elengtis 0.1.0's (Python).
    Original,
}

impl ResultsFormat {
    /// How `verify` names it.
    pub fn describe(self) -> &'static str {
        match self {
            ResultsFormat::Chained => "elengtis results, schema 2 (hash-chained)",
            ResultsFormat::Unchained => "elengtis results, schema 1 (written before the hashes: no chain)",
            ResultsFormat::Original => "results of the original elengtis 0.1.0 (no chain)",
        }
    }

    /// Whether records of this format carry anything to check beyond their shape.
    pub fn is_chained(self) -> bool {
        self == ResultsFormat::Chained
    }
}

/// Why a manifest is of no format this build reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Its `schema_version` is none this build reads.
    #[error(
        "schema_version {0} is not one this build reads ({RESULTS_SCHEMA_VERSION}; {RESULTS_SCHEMA_VERSION_UNCHAINED} and the original 0.1.0's {original} are read, not resumed)",
        original = original::SCHEMA_VERSION
    )]
    Version(String),
    /// It does not have the whole shape of the format its version names.
    #[error("it is not a manifest of {format}: {detail}")]
    Shape {
        /// The format its version names.
        format: &'static str,
        /// What is wrong (a field missing, in excess or of the wrong kind).
        detail: String,
    },
}

fn detail(error: &FieldError) -> String {
    let text = error.to_string();
    text.strip_prefix("failed to read the record: ").unwrap_or(&text).to_owned()
}

/// The format of a results directory, from its parsed `manifest.json` (see the module docs).
///
/// # Errors
///
/// [`ShapeError`] when the manifest has the whole shape of no format.
pub fn detect(manifest: &Value) -> Result<ResultsFormat, ShapeError> {
    let version = manifest.get("schema_version").and_then(Value::as_u64);
    let ours = |format: ResultsFormat| -> Result<ResultsFormat, ShapeError> {
        let shape_error = |detail: String| ShapeError::Shape { format: format.describe(), detail };
        let parsed: Manifest = from_value(manifest).map_err(|e| shape_error(detail(&e)))?;
        match (format, parsed.configuration.recorded_campaign_sha256.is_some()) {
            (ResultsFormat::Chained, false) => Err(shape_error("it has no `configuration.recorded_campaign_sha256`".into())),
            (ResultsFormat::Unchained, true) => Err(shape_error(
                "it has `configuration.recorded_campaign_sha256`, which schema 1 never had: a hashed run declared as an older format is refused".into(),
            )),
            _ => Ok(format),
        }
    };
    match version {
        Some(RESULTS_SCHEMA_VERSION) => ours(ResultsFormat::Chained),
        Some(RESULTS_SCHEMA_VERSION_UNCHAINED) => ours(ResultsFormat::Unchained),
        Some(original::SCHEMA_VERSION) => original::read_manifest(manifest)
            .map(|_| ResultsFormat::Original)
            .map_err(|e| ShapeError::Shape { format: ResultsFormat::Original.describe(), detail: detail(&e) }),
        _ => Err(ShapeError::Version(manifest.get("schema_version").unwrap_or(&Value::Null).to_string())),
    }
}

/// Reads one row of a directory of `format`: exactly that format's fields and version.
///
/// # Errors
///
/// A message naming the field at fault (`it has unknown field `prev_row_sha256``, …).
pub fn read_row(format: ResultsFormat, value: &Value) -> Result<Row, String> {
    let row: Row = match format {
        ResultsFormat::Original => original::read_row(value).map_err(|e| detail(&e))?,
        ResultsFormat::Chained | ResultsFormat::Unchained => from_value(value).map_err(|e| detail(&e))?,
    };
    match format {
        ResultsFormat::Chained => {
            if row.schema_version != RESULTS_SCHEMA_VERSION {
                return Err(format!(
                    "its schema_version is {}, the run's {RESULTS_SCHEMA_VERSION}",
                    row.schema_version
                ));
            }
            for (field, present) in
                [("evidence_sha256", row.evidence_sha256.is_some()), ("prev_row_sha256", row.prev_row_sha256.is_some())]
            {
                if !present {
                    return Err(format!("it has no `{field}`"));
                }
            }
        }
        ResultsFormat::Unchained => {
            if row.schema_version != RESULTS_SCHEMA_VERSION_UNCHAINED {
                return Err(format!(
                    "its schema_version is {}, the run's {RESULTS_SCHEMA_VERSION_UNCHAINED}",
                    row.schema_version
                ));
            }
            if row.evidence_sha256.is_some() || row.prev_row_sha256.is_some() {
                return Err(
                    "it has hash fields, which schema 1 never had: a hashed run declared as an older format is refused"
                        .into(),
                );
            }
        }
        ResultsFormat::Original => {}
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn original_manifest() -> Value {
        serde_json::from_str(include_str!("../../../tests/fixtures/original-0.1.0/example/manifest.json"))
            .expect("JSON")
    }

    #[test]
    fn a_version_field_alone_decides_nothing() {
        assert_eq!(detect(&original_manifest()), Ok(ResultsFormat::Original));
        // The original's version on anything else is not the original's format.
        let forged = json!({"schema_version": 6, "metrics_version": 3, "run_id": "r", "environment": {"python": "3"}});
        assert!(matches!(detect(&forged), Err(ShapeError::Shape { .. })), "{:?}", detect(&forged));
        assert!(matches!(detect(&json!({"schema_version": 7})), Err(ShapeError::Version(_))));
        assert!(matches!(detect(&json!({})), Err(ShapeError::Version(_))));
    }
}
