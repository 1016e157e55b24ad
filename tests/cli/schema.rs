//! `elengtis schema`: the checked-in JSON Schemas match what this build generates.

use elengtis_tests::{elengtis, scratch, stderr, workspace};

const REGENERATE: &str = "run `cargo run -p elengtis -- schema --out scenarios/schema` and commit the result";

#[test]
fn checked_in_schemas_match_the_generated_ones() {
    let dir = scratch();
    let out = dir.path().join("schema");
    let output = elengtis(dir.path(), &["schema", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let checked_in = workspace().join("scenarios/schema");
    let names = |d: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d)
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
    };
    let generated = names(&out);
    assert_eq!(generated, ["campaign.schema.json", "scenario.schema.json"]);
    assert_eq!(names(&checked_in), generated, "scenarios/schema/ is missing schema files; {REGENERATE}");
    for name in &generated {
        let fresh = std::fs::read(out.join(name)).expect("read generated schema");
        let stored = std::fs::read(checked_in.join(name)).expect("read checked-in schema");
        assert!(fresh == stored, "scenarios/schema/{name} differs from this build's schema; {REGENERATE}");
    }
}
