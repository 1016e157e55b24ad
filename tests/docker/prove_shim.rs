//! `elengtis prove --guarded-side shim` against the real engine: each leg in its own fresh
//! container, the guarded side the vulnerable twin behind the control shim at the MCP
//! boundary. A W3 seed is KEPT with the boundary claim, and the panel's stand-in line names
//! the controls and the mode.

use elengtis_tests::{docker_or_skip, elengtis, scratch, stderr, stdout, workspace};

#[test]
fn prove_through_the_shim_keeps_a_w3_seed_with_the_boundary_claim() {
    if !docker_or_skip("prove_through_the_shim_keeps_a_w3_seed_with_the_boundary_claim") {
        return;
    }
    let dir = scratch();
    let out = dir.path().join("prove");
    let seeds = workspace().join("scenarios/seeds");
    let seed = seeds.join("w3-fetch-attacker-url-direct.seed.yaml");
    let s = |p: &std::path::Path| p.to_str().expect("utf-8 path").to_owned();
    let args = [
        "prove".to_owned(),
        "--seed".into(),
        s(&seed),
        "--seeds-dir".into(),
        s(&seeds),
        "--guarded-side".into(),
        "shim".into(),
        "--jobs".into(),
        "4".into(),
        "--out".into(),
        s(&out),
        "--json".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = elengtis(dir.path(), &args);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let report: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("one JSON object");
    assert_eq!(report["verdict"], "KEPT", "{report}");
    let finding = &report["reports"][0];
    assert_eq!(finding["guarded_twin_layer"], "boundary", "{finding}");
    assert_eq!(
        finding["claim"],
        "a canonical control at the MCP boundary stops this attack; this does not establish that your own control does"
    );
    let note = report["guarded_notes"][0].as_str().expect("the stand-in line");
    assert!(note.contains("a stand-in at the MCP boundary") && note.contains("controls W3; mode block"), "{note}");
    // The guarded legs ran in containers, and the shim's refusal is in their evidence.
    let results = out.join("w3-fetch-attacker-url-direct/repeat/results");
    let rows = elengtis_tests::rows(&results.join("runs.jsonl"));
    let guarded = rows.iter().find(|r| r["target"] == "guarded").expect("a guarded row");
    let evidence = elengtis_tests::read_json(&results.join(guarded["evidence"].as_str().expect("evidence")));
    assert_eq!(evidence["target_execution"]["isolation"], "isolated_container", "{}", evidence["target_execution"]);
    assert_eq!(evidence["shim"]["calls"][0]["action"], "refused", "{}", evidence["shim"]);
    assert_eq!(evidence["shim"]["calls"][0]["decisions"][0]["control"], "W3");
}
