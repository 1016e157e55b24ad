//! JSON Schemas (draft 2020-12) generated from the Rust types: the campaign and scenario
//! formats, and the result records (row, evidence, manifest).
//!
//! `elengtis schema --out DIR` writes them all into one directory. The copies checked in —
//! the formats under `scenarios/schema/`, the records under `docs/schema/` — are compared
//! with freshly generated ones in CI (a drift test), so a change to a type that changes what
//! a file may hold shows up as a change to its schema.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};

use crate::format::campaign::Campaign;
use crate::format::scenario::Scenario;
use crate::records::{Evidence, Manifest, Row};

/// The schema of `T`, as `elengtis schema` writes it.
pub fn schema_for<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>()
}

fn render(schema: &Schema) -> String {
    serde_json::to_string_pretty(schema).unwrap_or_default() + "\n"
}

/// File name and content of the schemas of the input formats (checked in under
/// `scenarios/schema/`).
pub fn format_schemas() -> Vec<(&'static str, String)> {
    vec![
        ("campaign.schema.json", render(&schema_for::<Campaign>())),
        ("scenario.schema.json", render(&schema_for::<Scenario>())),
    ]
}

/// File name and content of the schemas of the result records (checked in under
/// `docs/schema/`).
pub fn record_schemas() -> Vec<(&'static str, String)> {
    vec![
        ("row.schema.json", render(&schema_for::<Row>())),
        ("evidence.schema.json", render(&schema_for::<Evidence>())),
        ("manifest.schema.json", render(&schema_for::<Manifest>())),
    ]
}

/// File name and content of each schema: the formats', then the records'.
pub fn schemas() -> Vec<(&'static str, String)> {
    let mut all = format_schemas();
    all.extend(record_schemas());
    all
}
