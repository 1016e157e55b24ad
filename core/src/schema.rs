//! JSON Schemas (draft 2020-12) generated from the Rust types: the campaign, scenario and
//! seed and gate formats, the result records (row, evidence, manifest), `prove`'s
//! `validation_report.json`, `ablation.json` and the lines of an events file (`--events FILE`).
//!
//! `elengtis schema --out DIR` writes them all into one directory. The copies checked in —
//! the formats under `scenarios/schema/`, the records under `docs/schema/` — are compared
//! with freshly generated ones in CI (a drift test), so a change to a type that changes what
//! a file may hold shows up as a change to its schema.

use schemars::Schema;

use crate::events::EventLine;
use crate::format::campaign::Campaign;
use crate::format::gate::GateFile;
use crate::format::scenario::Scenario;
use crate::format::seed::Seed;
use crate::prove::ValidationReport;
use crate::records::{Evidence, Manifest, Row, Seal};

pub use crate::jsonschema::schema_for;

/// A schema as the checked-in files hold it (pretty JSON, a final newline).
pub fn render(schema: &Schema) -> String {
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
        ("seal.schema.json", render(&schema_for::<Seal>())),
        ("validation_report.schema.json", render(&schema_for::<ValidationReport>())),
        ("ablation.schema.json", render(&schema_for::<crate::prove::ablation::AblationReport>())),
        ("events.schema.json", render(&schema_for::<EventLine<'static>>())),
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
            ("Seal", fields::<Seal>()),
            ("Validation report", fields::<ValidationReport>()),
        ] {
            let text = section(RESULTS_DOC, heading);
            let missing: Vec<&String> = fields.iter().filter(|field| !text.contains(&format!("`{field}`"))).collect();
            assert!(missing.is_empty(), "docs/results.md, section {heading}, does not describe {missing:?}");
        }
    }

    /// The rows of the field table in `section`: the fields named in the first column, and
    /// the second column's text.
    fn table(section: &str) -> Vec<(Vec<String>, String)> {
        let mut rows = Vec::new();
        for line in section.lines().filter(|l| l.starts_with("| `")) {
            // Cells are split at `|` not escaped as `\|`.
            let mut cells = Vec::new();
            let mut cell = String::new();
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'|') => {
                        cell.push('|');
                        chars.next();
                    }
                    '|' => cells.push(std::mem::take(&mut cell)),
                    _ => cell.push(c),
                }
            }
            let (Some(names), Some(meaning)) = (cells.get(1), cells.get(2)) else { continue };
            rows.push((spans(names), meaning.trim().to_owned()));
        }
        rows
    }

    /// The text of each backticked span of `text`.
    fn spans(text: &str) -> Vec<String> {
        text.split('`').skip(1).step_by(2).map(str::to_owned).collect()
    }

    /// The field names of a documented shape `{a, b: …, c}` (top level only); `None` when it
    /// is open (`…`).
    fn shape_names(shape: &str) -> Option<Vec<String>> {
        let inner = shape.strip_prefix('{')?.strip_suffix('}')?;
        let (mut depth, mut item, mut names) = (0usize, String::new(), Vec::new());
        for c in inner.chars().chain([',']) {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    let name = item.split(':').next().unwrap_or_default().trim().to_owned();
                    if name == "…" || name == "..." {
                        return None;
                    }
                    names.push(name);
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        Some(names)
    }

    /// The object schema a property holds (through `$ref`, a nullable `anyOf` and array
    /// `items`), if it is an object with named properties.
    fn object_of<'a>(root: &'a serde_json::Value, mut schema: &'a serde_json::Value) -> Option<Vec<String>> {
        for _ in 0..16 {
            if let Some(properties) = schema.get("properties").and_then(serde_json::Value::as_object) {
                return Some(properties.keys().cloned().collect());
            }
            schema = if let Some(reference) = schema.get("$ref").and_then(serde_json::Value::as_str) {
                root.pointer(reference.strip_prefix('#')?)?
            } else if let Some(items) = schema.get("items") {
                items
            } else if let Some(any) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(|v| v.as_array()) {
                any.iter().find(|s| s.get("type") != Some(&serde_json::json!("null")))?
            } else {
                return None;
            };
        }
        None
    }

    #[test]
    fn the_results_doc_names_only_fields_the_records_have_with_their_shapes() {
        for (heading, schema) in [
            ("Rows", schema_for::<Row>()),
            ("Evidence", schema_for::<Evidence>()),
            ("Manifest", schema_for::<Manifest>()),
            ("Seal", schema_for::<Seal>()),
            ("Validation report", schema_for::<ValidationReport>()),
        ] {
            let root = schema.as_value();
            let properties = root["properties"].as_object().expect("an object schema");
            let mut documented = std::collections::BTreeSet::new();
            for (names, meaning) in table(section(RESULTS_DOC, heading)) {
                for name in &names {
                    assert!(
                        properties.contains_key(name),
                        "docs/results.md, section {heading}, documents `{name}`, which the record does not have"
                    );
                    documented.insert(name.clone());
                }
                // A field documented with its shape (`{a, b, c}`): the shape's fields are the
                // record's. Several shapes whose fields all belong to
                // the record are alternatives (errors): together they are its fields.
                let [name] = names.as_slice() else { continue };
                let Some(fields) = object_of(root, &properties[name]) else { continue };
                let shapes: Vec<Option<Vec<String>>> =
                    spans(&meaning).iter().filter(|s| s.starts_with('{')).map(|s| shape_names(s)).collect();
                // By convention a field's own shape comes first in its meaning (after an
                // italic note such as `*(schema 2)*`); later shapes describe nested values.
                let lead =
                    meaning.strip_prefix("*(").and_then(|m| m.split_once(")*")).map_or(meaning.as_str(), |(_, m)| m);
                if !lead.trim_start().starts_with("`{") {
                    continue;
                }
                let Some(Some(first)) = shapes.first() else { continue };
                let known = |shape: &Vec<String>| shape.iter().all(|f| fields.contains(f));
                assert!(
                    known(first),
                    "docs/results.md, section {heading}: `{name}` is documented as {first:?}; the record's fields are {fields:?}"
                );
                let alternatives: Vec<&Vec<String>> =
                    shapes.iter().map_while(|s| s.as_ref().filter(|s| known(s))).collect();
                let mut union: Vec<&String> = alternatives.iter().flat_map(|s| s.iter()).collect();
                union.sort();
                union.dedup();
                let mut expected: Vec<&String> = fields.iter().collect();
                expected.sort();
                assert_eq!(union, expected, "docs/results.md, section {heading}: the shape of `{name}`");
            }
            let undocumented: Vec<&String> = properties.keys().filter(|k| !documented.contains(*k)).collect();
            assert!(undocumented.is_empty(), "docs/results.md, section {heading}, has no row for {undocumented:?}");
        }
    }

    #[test]
    fn the_results_doc_gives_the_two_error_shapes_serde_writes() {
        use crate::agent::{ToolError, ToolErrorKind};
        use crate::records::{Phase, RecordedError};
        let rows = table(section(RESULTS_DOC, "Rows"));
        let (_, meaning) = rows.iter().find(|(names, _)| names == &["errors"]).expect("an `errors` row");
        let documented: Vec<Vec<String>> =
            spans(meaning).iter().filter(|s| s.starts_with('{')).filter_map(|s| shape_names(s)).collect();
        let keys = |e: &RecordedError| {
            let mut keys: Vec<String> =
                serde_json::to_value(e).expect("json").as_object().expect("object").keys().cloned().collect();
            keys.sort();
            keys
        };
        let runner = RecordedError::new(Phase::Setup, Some("seed"), "boom");
        let tool = RecordedError::tool(&ToolError {
            kind: ToolErrorKind::ToolError,
            step: 1,
            call_id: "call_1_0".into(),
            detail: "failed".into(),
            transport: false,
        });
        let mut documented: Vec<Vec<String>> = documented
            .into_iter()
            .map(|mut shape| {
                shape.sort();
                shape
            })
            .collect();
        documented.sort();
        let mut written = vec![keys(&runner), keys(&tool)];
        written.sort();
        assert_eq!(documented, written, "docs/results.md: the shapes of `errors`");
    }

    #[test]
    fn the_formats_doc_says_no_transport_is_unavailable() {
        // Every transport runs in this build; docs/formats.md once said `isolated_container`
        // "does not run in this build".
        const FORMATS_DOC: &str = include_str!("../../docs/formats.md");
        let transports = section(FORMATS_DOC, "Campaign");
        let bullets: Vec<&str> = transports.split("\n- ").skip(1).collect();
        for kind in ["stdio", "streamable_http", "isolated_container"] {
            let bullet = bullets
                .iter()
                .find(|b| b.starts_with(&format!("`{kind}`")))
                .unwrap_or_else(|| panic!("docs/formats.md has no bullet for the `{kind}` transport"));
            assert!(!bullet.contains("does not run"), "docs/formats.md: `{kind}`: {bullet}");
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
                "seal.schema.json",
                "validation_report.schema.json",
                "ablation.schema.json",
                "events.schema.json",
            ]
        );
        for (name, content) in all {
            let schema: serde_json::Value = serde_json::from_str(&content).expect("JSON");
            assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
            assert!(content.ends_with("}\n"), "{name}");
        }
    }
}
