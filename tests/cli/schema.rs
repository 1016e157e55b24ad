//! `elengtis schema`: the checked-in JSON Schemas match what this build generates, and the
//! records real runs write are valid against them.

use std::path::Path;

use elengtis_tests::{copy_example, elengtis, files_under, read_json, rows, scratch, stderr, stdout, workspace};

const REGENERATE: &str = "run `cargo run -p elengtis -- schema --out DIR`, copy campaign, scenario, seed and gate.schema.json \
                          into scenarios/schema/ and row, evidence, manifest, seal, validation_report, ablation, events and scan.schema.json \
                          into docs/schema/, \
                          and commit the result";

/// Where each generated schema is checked in, with the files there.
const CHECKED_IN: [(&str, &[&str]); 2] = [
    ("scenarios/schema", &["campaign.schema.json", "gate.schema.json", "scenario.schema.json", "seed.schema.json"]),
    (
        "docs/schema",
        &[
            "ablation.schema.json",
            "events.schema.json",
            "evidence.schema.json",
            "manifest.schema.json",
            "row.schema.json",
            "scan.schema.json",
            "seal.schema.json",
            "validation_report.schema.json",
        ],
    ),
];

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Names of the `.json` files in `dir`, sorted.
fn json_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn checked_in_schemas_match_the_generated_ones() {
    let dir = scratch();
    let out = dir.path().join("schema");
    let output = elengtis(dir.path(), &["schema", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let generated = json_names(&out);
    assert_eq!(
        generated,
        [
            "ablation.schema.json",
            "campaign.schema.json",
            "events.schema.json",
            "evidence.schema.json",
            "gate.schema.json",
            "manifest.schema.json",
            "row.schema.json",
            "scan.schema.json",
            "scenario.schema.json",
            "seal.schema.json",
            "seed.schema.json",
            "validation_report.schema.json"
        ]
    );
    for (checked_in, names) in CHECKED_IN {
        let stored_dir = workspace().join(checked_in);
        assert_eq!(json_names(&stored_dir), names, "{checked_in}/ does not hold exactly these schemas; {REGENERATE}");
        for name in names {
            let fresh = std::fs::read(out.join(name)).expect("read generated schema");
            let stored = std::fs::read(stored_dir.join(name)).expect("read checked-in schema");
            assert!(fresh == stored, "{checked_in}/{name} differs from this build's schema; {REGENERATE}");
        }
    }
}

/// Validates `instance` against the checked-in record schema `name`; returns the errors.
fn schema_errors(name: &str, instance: &serde_json::Value) -> Vec<String> {
    let schema = read_json(&workspace().join("docs/schema").join(name));
    let validator = jsonschema::validator_for(&schema).expect("the record schema compiles");
    validator.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// Every manifest, row and evidence document under `out` is valid against its schema;
/// returns how many rows and evidence documents there were.
fn assert_records_valid(out: &Path) -> (usize, usize) {
    let manifest = read_json(&out.join("manifest.json"));
    let errors = schema_errors("manifest.schema.json", &manifest);
    assert!(errors.is_empty(), "{}/manifest.json: {errors:#?}", out.display());
    let rows = rows(&out.join("runs.jsonl"));
    for (index, row) in rows.iter().enumerate() {
        let errors = schema_errors("row.schema.json", row);
        assert!(errors.is_empty(), "{}/runs.jsonl row {}: {errors:#?}\n{row}", out.display(), index + 1);
    }
    let errors = schema_errors("seal.schema.json", &read_json(&out.join("seal.json")));
    assert!(errors.is_empty(), "{}/seal.json: {errors:#?}", out.display());
    let evidence = files_under(&out.join("evidence"));
    for path in &evidence {
        let errors = schema_errors("evidence.schema.json", &read_json(path));
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
    (rows.len(), evidence.len())
}

#[test]
fn records_written_by_real_runs_are_valid_against_the_record_schemas() {
    let dir = scratch();

    // The packaged negative control.
    let refusal = dir.path().join("refusal");
    let output = elengtis(dir.path(), &["example", "refusal", "--out", s(&refusal)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(assert_records_valid(&refusal), (1, 1));

    // Complete attempts, tool errors the model met, and a target that never starts
    // (incomplete attempts with the runner's own errors).
    let campaign = copy_example("support-note", &dir.path().join("mixed"));
    let text = std::fs::read_to_string(&campaign).expect("read campaign");
    let local = text.split_once("targets:\n").map(|(_, rest)| rest).and_then(|rest| rest.split_once("scenarios:"));
    let (target, _) = local.expect("the example has one target before its scenarios");
    let failing = target
        .replace("id: local-demo", "id: failing-submit")
        .replace("--scenario, support-note]", "--scenario, support-note, --fail-submit]");
    let missing = target
        .replace("id: local-demo", "id: missing-server")
        .replace("command: elengtis-fixture", "command: elengtis-no-such-server");
    let edited = text.replacen(target, &format!("{target}{failing}{missing}"), 1);
    assert!(edited.contains("--fail-submit") && edited.contains("elengtis-no-such-server"), "{edited}");
    std::fs::write(&campaign, edited).expect("write campaign");
    let mixed = dir.path().join("mixed-results");
    let output = elengtis(dir.path(), &["run", "--config", s(&campaign), "--out", s(&mixed)]);
    assert_eq!(output.status.code(), Some(1), "incomplete attempts: {}{}", stdout(&output), stderr(&output));
    let (row_count, evidence_count) = assert_records_valid(&mixed);
    assert_eq!((row_count, evidence_count), (3, 3));
    let rows = rows(&mixed.join("runs.jsonl"));
    let shapes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["evidence_status"].as_str().unwrap_or("?"), r["errors"][0]["phase"].as_str().unwrap_or("-")))
        .collect();
    assert_eq!(shapes, [("complete", "-"), ("complete", "exercise"), ("incomplete", "connection_or_agent")]);
}
