//! `elengtis gate` against the reference twins in hardened containers: the committed gate
//! (`scenarios/gate/`) passes offline from its recorded fixtures (no model is contacted: the
//! gate file's model address is unreachable), and fails — exit 9, never a pass — when a
//! fixture is corrupted, removed or stale. The recording procedure of the committed fixtures
//! is the ignored test at the end.

use std::path::{Path, PathBuf};

use elengtis_tests::gate::{copy_gate, model_script};
use elengtis_tests::model_server::ModelServer;
use elengtis_tests::{bundled_images, docker_or_skip, elengtis, scratch, stderr, stdout, workspace};

fn gate(cwd: &Path, file: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let file = file.to_str().expect("UTF-8");
    let out = out.to_str().expect("UTF-8");
    let seeds = workspace().join("scenarios/seeds");
    let mut args = vec![
        "gate",
        "--file",
        file,
        "--out",
        out,
        "--json",
        "--jobs",
        "4",
        "--seeds-dir",
        seeds.to_str().expect("UTF-8"),
    ];
    args.extend_from_slice(extra);
    let output = elengtis(cwd, &args);
    let text = stdout(&output);
    let json = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("gate --json printed no JSON ({e}):\n{text}\n{}", stderr(&output)));
    (output.status.code(), json, stderr(&output))
}

fn fixture_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("gate.lock.json"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_committed_gate_passes_offline_and_fails_without_its_evidence() {
    if !docker_or_skip("the_committed_gate_passes_offline_and_fails_without_its_evidence") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let (code, json, err) =
        gate(&workspace(), &workspace().join("scenarios/gate/gate.yaml"), &dir.path().join("ok"), &[]);
    assert_eq!(code, Some(0), "{json:#}\n{err}");
    let findings = json["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 4, "one finding per weakness class");
    for f in findings {
        assert_eq!(f["status"], "passed", "{f:#}");
        assert_eq!(f["kind"], "reference");
    }
    // The committed gate holds: its SARIF has no alert (issue 38: a passing gate used to write
    // four High alerts).
    let sarif = elengtis_tests::read_json(&dir.path().join("ok/findings.sarif"));
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]), "{sarif:#}");

    // Broken evidence: each is refused before any container starts.
    let broken = dir.path().join("broken");
    let file = copy_gate(&broken);
    let fixtures = broken.join("scenarios/gate/fixtures/w2-note-body-direct");
    let files = fixture_files(&fixtures);
    std::fs::write(&files[0], "{\"format\": \"elengtis-model-fixture\", \"version\": 1, \"key\": \"x\"")
        .expect("corrupt");
    std::fs::remove_file(&files[1]).expect("remove");
    let (code, json, err) = gate(&broken, &file, &dir.path().join("broken-out"), &["--finding", "w2-note-body-direct"]);
    assert_eq!(code, Some(9), "{json:#}\n{err}");
    let details = json["findings"][0]["details"].to_string();
    assert_eq!(json["findings"][0]["status"], "no_evidence");
    assert!(details.contains("is corrupt") && details.contains("1 missing"), "{details}");
    assert!(details.contains("gate --file") && details.contains("--record --finding w2-note-body-direct"), "{details}");

    // Stale: the seed changed since the recording.
    let seed = broken.join("scenarios/seeds/w3-fetch-attacker-url-direct.seed.yaml");
    let text = std::fs::read_to_string(&seed).expect("seed");
    std::fs::write(&seed, text.replacen("title: ", "title: Edited ", 1)).expect("edit");
    let (code, json, _) =
        gate(&broken, &file, &dir.path().join("stale-out"), &["--finding", "w3-fetch-attacker-url-direct"]);
    assert_eq!(code, Some(9));
    assert!(json["findings"][0]["details"].to_string().contains("the seed file changed"), "{json:#}");
}

/// The GitHub Actions workflow of docs/ci/elengtis-gate.yml, its steps run as a runner runs
/// them (tests/src/recipes.rs): the build step (its cargo build stood in for by this build's
/// executables where it leaves them) makes the images, the gate runs in the tool image with the
/// socket mounted and the checkout at /work, its exit code goes to the step's outputs, and the
/// SARIF is uploaded to code scanning under the job's category only because the gate decided.
/// The checkout's gate is trimmed to one finding (the whole gate runs above).
#[test]
fn the_github_workflow_runs_the_gate_in_the_tool_image_and_uploads_its_sarif_when_decided() {
    use elengtis_tests::recipes::{github, stand_in_release_build, yaml_docs};
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt as _;
    if !docker_or_skip("the_github_workflow_runs_the_gate_in_the_tool_image_and_uploads_its_sarif_when_decided") {
        return;
    }
    bundled_images();
    let workflow = yaml_docs(&workspace().join("docs/ci/elengtis-gate.yml")).remove(0);
    assert_eq!(workflow["permissions"]["security-events"], "write", "code scanning uploads need it");
    let dir = scratch();
    // The tool image runs as 65534; a CI checkout is world-readable.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("test setup");
    let checkout = |at: &Path| elengtis_tests::gate::one_finding_checkout(at);
    let job = github::Job {
        workflow: &workflow,
        job: "gate",
        matrix: BTreeMap::new(),
        secrets: BTreeMap::new(),
        workspace: dir.path().join("workspace"),
        artifacts: dir.path().join("artifacts"),
        replace: vec![
            ("cargo build --release --locked".into(), ":".into()),
            // This project's CI engine is one the engine gate refuses (docs/security.md).
            ("docker run --rm".into(), "docker run --rm -e ELENGTIS_ALLOW_VULNERABLE_ENGINE=1".into()),
        ],
        checkout: &checkout,
    };
    std::fs::create_dir_all(&job.workspace).expect("mkdir");
    std::fs::set_permissions(&job.workspace, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    let bundled = elengtis_tests::BUNDLED_EXECUTABLES;
    stand_in_release_build(&job.workspace, &bundled);
    let ran = job.run();
    let outputs = &ran.outputs["gate"];
    assert_eq!((outputs["code"].as_str(), outputs["decided"].as_str()), ("0", "true"), "{outputs:?}");
    let (_, log) = ran.logs.iter().find(|(n, _)| n.starts_with("Run the gate")).expect("the gate step");
    assert!(log.contains("gate: passed (exit 0)"), "{log}");
    let upload = workflow["jobs"]["gate"]["steps"]
        .as_array()
        .and_then(|steps| {
            steps
                .iter()
                .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("github/codeql-action/upload-sarif")))
        })
        .expect("an upload-sarif step");
    assert_eq!(upload["if"], "always() && steps.gate.outputs.decided == 'true'");
    let (sarif, category) = ran.uploads.sarif.first().expect("the SARIF was uploaded");
    assert_eq!(category, "elengtis-gate");
    let log = elengtis_tests::read_json(sarif);
    assert_eq!(log["runs"][0]["results"], serde_json::json!([]), "a gate that holds has no alert: {log:#}");
    assert!(dir.path().join("artifacts/elengtis-gate/findings.sarif").is_file());
}

/// Re-records the committed fixtures: for each finding of `scenarios/gate/gate.yaml`, the
/// scripted model server plays the seed's own script over the OpenAI wire and `gate
/// --record` drives the twins in containers. Run it after changing a seed, its scenario,
/// the twins or the fixture format:
/// `cargo test -p elengtis-tests --test docker gate::record -- --ignored`.
#[test]
#[ignore = "re-records the committed gate fixtures in scenarios/gate/fixtures"]
fn record_the_committed_gate_fixtures() {
    assert!(docker_or_skip("record_the_committed_gate_fixtures"));
    bundled_images();
    let dir = scratch();
    let file = workspace().join("scenarios/gate/gate.yaml");
    let text = std::fs::read_to_string(&file).expect("gate file");
    for line in text.lines().filter_map(|l| l.trim().strip_prefix("- seed: ")) {
        let seed_path = file.parent().expect("dir").join(line.trim());
        let id = seed_path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".seed.yaml")).expect("id");
        let seed = elengtis_core::format::seed::load_seed(&seed_path).expect("seed");
        let script = serde_json::to_value(&seed.seed.script).expect("script");
        let server = ModelServer::start(dir.path(), &model_script(id, &script), &[]);
        let base = format!("http://{}/v1", server.addr);
        let out = dir.path().join(id);
        let (code, json, err) = gate(&workspace(), &file, &out, &["--record", "--finding", id, "--base-url", &base]);
        assert_eq!(code, Some(0), "{id}: {json:#}\n{err}");
    }
}
