//! The engine gate on the real engine: when the risk is accepted, the findings are in the
//! run manifest and in every trial's evidence; without the override the same campaign is
//! refused, naming each finding, before anything is created.

use std::path::Path;

use elengtis_tests::{
    FixtureMcp, bundled_images, docker_or_skip, elengtis_cmd, fixture_image, fixture_target, managed_objects,
    read_json, rows, scratch, stderr, support_note_campaign,
};

fn campaign(dir: &Path) {
    elengtis_tests::write(dir, "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    elengtis_tests::write(
        dir,
        "campaign.yaml",
        &support_note_campaign(3, &[fixture_target("gate", &fixture_image(), FixtureMcp::Stdio, 10001, &[])]),
    );
}

#[test]
fn accepted_engine_findings_are_recorded_in_every_trial_and_refused_without_the_override() {
    if !docker_or_skip("accepted_engine_findings_are_recorded_in_every_trial_and_refused_without_the_override") {
        return;
    }
    bundled_images();
    let dir = scratch();
    campaign(dir.path());
    // `elengtis_cmd` sets ELENGTIS_ALLOW_VULNERABLE_ENGINE=1.
    let out = elengtis_cmd(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out", "--jobs", "2"])
        .output()
        .expect("run elengtis");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let manifest = read_json(&dir.path().join("out/manifest.json"));
    let gate = &manifest["engine_gate"];
    let findings = gate["findings"].as_array().expect("findings recorded in the manifest").clone();
    assert_eq!(gate["allowed_vulnerable"], !findings.is_empty(), "{gate}");
    assert!(gate["versions"]["engine"].is_string() && gate["versions"]["runc"].is_string(), "{gate}");
    for f in &findings {
        for key in ["id", "component", "found", "allows", "status"] {
            assert!(f[key].is_string(), "finding without {key}: {f}");
        }
        assert!(f["fixed_in"].is_array(), "{f}");
    }
    let warnings = err.matches("WARNING: running isolated trials on a Docker engine with known").count();
    assert_eq!(warnings, usize::from(!findings.is_empty()), "the warning is printed once: {err}");
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("evidence path")));
        assert_eq!(&evidence["target_execution"]["engine_gate"], gate, "{}", row["trial_id"]);
    }
    let run_id = rows[0]["run_id"].as_str().expect("run id").to_owned();
    if findings.is_empty() {
        eprintln!("the engine has no known findings; the refusal half of this test does not apply");
        return;
    }
    // Without the override the same campaign is refused, naming every finding, and nothing is
    // created.
    let refused = elengtis_cmd(dir.path(), &["run", "--config", "campaign.yaml", "--out", "refused"])
        .env_remove("ELENGTIS_ALLOW_VULNERABLE_ENGINE")
        .output()
        .expect("run elengtis");
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(5), "{err}");
    for f in &findings {
        let id = f["id"].as_str().unwrap_or_default();
        let found = f["found"].as_str().unwrap_or_default();
        assert!(err.contains(id) && err.contains(found), "{id} ({found}) missing from: {err}");
    }
    assert!(!dir.path().join("refused").exists());
    assert!(managed_objects(&run_id).is_empty(), "leftovers: {:?}", managed_objects(&run_id));
}
