//! JSON Schemas of the campaign and scenario formats, generated from the Rust types.
//!
//! `elengtis schema --out DIR` writes them; the copies checked in under
//! `scenarios/schema/` are compared with freshly generated ones in CI (a drift test).

use schemars::generate::SchemaSettings;

use crate::format::campaign::Campaign;
use crate::format::scenario::Scenario;

/// File name and content of each schema.
pub fn schemas() -> Vec<(&'static str, String)> {
    let generator = || SchemaSettings::draft2020_12().into_generator();
    let render = |schema: schemars::Schema| serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n";
    vec![
        ("campaign.schema.json", render(generator().into_root_schema_for::<Campaign>())),
        ("scenario.schema.json", render(generator().into_root_schema_for::<Scenario>())),
    ]
}
