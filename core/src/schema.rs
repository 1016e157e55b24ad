//! JSON Schemas (draft 2020-12) generated from the Rust types: the campaign, scenario and
//! seed and gate formats, the result records (row, evidence, manifest) and `prove`'s
//! `validation_report.json`.
//!
//! `elengtis schema --out DIR` writes them all into one directory. The copies checked in —
//! the formats under `scenarios/schema/`, the records under `docs/schema/` — are compared
//! with freshly generated ones in CI (a drift test), so a change to a type that changes what
//! a file may hold shows up as a change to its schema.

use schemars::Schema;

use crate::format::campaign::Campaign;
use crate::format::gate::GateFile;
use crate::format::scenario::Scenario;
use crate::format::seed::Seed;
use crate::prove::ValidationReport;
use crate::records::{Evidence, Manifest, Row};

pub use crate::jsonschema::schema_for;

fn render(schema: &Schema) -> String {
    serde_json::to_string_pretty(schema).unwrap_or_default() + "\n"
}

/// File name and content of the schemas of the input formats (checked in under
/// `scenarios/schema/`).
pub fn format_schemas() -> Vec<(&'static str, String)> {
    vec![
        ("campaign.schema.json", render(&schema_for::<Campaign>())),
        ("scenario.schema.json", render(&schema_for::<Scenario>())),
        ("seed.schema.json", render(&schema_for::<Seed>())),
        ("gate.schema.json", render(&schema_for::<GateFile>())),
    ]
}

/// File name and content of the schemas of the result records (checked in under
/// `docs/schema/`).
pub fn record_schemas() -> Vec<(&'static str, String)> {
    vec![
        ("row.schema.json", render(&schema_for::<Row>())),
        ("evidence.schema.json", render(&schema_for::<Evidence>())),
        ("manifest.schema.json", render(&schema_for::<Manifest>())),
        ("validation_report.schema.json", render(&schema_for::<ValidationReport>())),
    ]
}

/// File name and content of each schema: the formats', then the records'.
pub fn schemas() -> Vec<(&'static str, String)> {
    let mut all = format_schemas();
    all.extend(record_schemas());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/results.md`, which describes the records field by field.
    const RESULTS_DOC: &str = include_str!("../../docs/results.md");

    /// The text of the section of `doc` whose `## ` heading starts with `heading`.
    fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
        let start =
            doc.find(&format!("\n## {heading}")).unwrap_or_else(|| panic!("docs/results.md has no `## {heading}`"));
        let rest = &doc[start + 1..];
        let end = rest[3..].find("\n## ").map_or(rest.len(), |end| end + 3);
        &rest[..end]
    }

    /// The top-level properties of `T`'s generated schema.
    fn fields<T: schemars::JsonSchema>() -> Vec<String> {
        let schema = schema_for::<T>();
        let properties = schema.get("properties").and_then(serde_json::Value::as_object).expect("an object schema");
        properties.keys().cloned().collect()
    }

    #[test]
    fn the_results_doc_describes_every_top_level_field_of_each_record() {
        for (heading, fields) in [
            ("Rows", fields::<Row>()),
            ("Evidence", fields::<Evidence>()),
            ("Manifest", fields::<Manifest>()),
            ("Validation report", fields::<ValidationReport>()),
        ] {
            let text = section(RESULTS_DOC, heading);
            let missing: Vec<&String> = fields.iter().filter(|field| !text.contains(&format!("`{field}`"))).collect();
            assert!(missing.is_empty(), "docs/results.md, section {heading}, does not describe {missing:?}");
        }
    }

    #[test]
    fn schemas_are_draft_2020_12_with_one_file_per_type() {
        let all = schemas();
        let names: Vec<&str> = all.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "campaign.schema.json",
                "scenario.schema.json",
                "seed.schema.json",
                "gate.schema.json",
                "row.schema.json",
                "evidence.schema.json",
                "manifest.schema.json",
                "validation_report.schema.json"
            ]
        );
        for (name, content) in all {
            let schema: serde_json::Value = serde_json::from_str(&content).expect("JSON");
            assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
            assert!(content.ends_with("}\n"), "{name}");
        }
    }
}
