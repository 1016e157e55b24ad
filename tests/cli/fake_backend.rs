//! Container trials through the sandbox interface without a container engine: the fake
//! backend runs each "container" as a local process, so these tests show that the trial's
//! phases, its evidence and its teardown go through the interface alone — and that a sandbox
//! failing at each step is classified, recorded and torn down.

use std::path::Path;
use std::sync::Arc;

use elengtis::run::{self, RunEnd, RunOptions, SandboxChoice};
use elengtis::sandbox::fake::{FakeBackend, FakeFault};
use elengtis_core::load::load_campaign;
use elengtis_core::validate::LoadOptions;
use elengtis_tests::{bin, copy_example, read_json, rows, scratch};
use serde_json::json;

const FIXTURE_IMAGE: &str = "elengtis/fixture:0.1.0";
const NOTES_IMAGE: &str = "elengtis/notes:0.1.0";

fn backend(dir: &Path) -> FakeBackend {
    std::fs::create_dir_all(dir).expect("failed to create the fake backend's directory");
    FakeBackend::new(dir)
        .image(FIXTURE_IMAGE, &bin("elengtis-fixture"))
        .image(NOTES_IMAGE, &bin("elengtis-notes"))
        .sink(&bin("elengtis-sink"))
}

/// Run a packaged example's campaign on `backend`; the results directory and the report.
fn run_example(example: &str, backend: FakeBackend, trials: u32) -> (tempfile::TempDir, run::RunReport) {
    run_example_file(example, "campaign.yaml", backend, trials)
}

/// Run one campaign file of a packaged example on `backend`.
fn run_example_file(
    example: &str,
    file: &str,
    backend: FakeBackend,
    trials: u32,
) -> (tempfile::TempDir, run::RunReport) {
    let dir = scratch();
    copy_example(example, &dir.path().join("in"));
    let campaign = dir.path().join("in").join(file);
    let mut bundle = load_campaign(&campaign, &LoadOptions::default()).expect("the example loads");
    elengtis_core::load::apply_overrides(
        &mut bundle,
        &elengtis_core::validate::Overrides { trials: Some(trials), ..Default::default() },
    )
    .expect("the override applies");
    let options = RunOptions { sandbox: SandboxChoice::Prepared(Arc::new(backend)), ..RunOptions::default() };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let out = dir.path().join("out");
    let report = runtime.block_on(run::start(&bundle, &out, false, &options)).expect("the run starts");
    (dir, report)
}

#[test]
fn an_isolated_campaign_runs_through_the_sandbox_interface_alone() {
    let base = scratch();
    let fake = backend(base.path());
    let (dir, report) = run_example("support-note-isolated", fake.clone(), 2);
    assert_eq!(report.end, RunEnd::Complete, "{}", report.summary);
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["evidence_status"], "complete", "{row}");
        assert_eq!(row["proposed"], true, "{row}");
        // The fixture forwarded the credential to the sink the fake backend started.
        assert_eq!(row["completed"], true, "{row}");
        let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("a name")));
        let execution = &evidence["target_execution"];
        assert_eq!(execution["backend"], "fake", "{execution}");
        assert_eq!(execution["isolation"], "none", "{execution}");
        assert_eq!(execution["hardening_asserted"], false, "{execution}");
        assert_eq!(execution["sink"]["placement"], "trial_network", "{execution}");
        assert_eq!(execution["sink"]["requests"].as_array().map(Vec::len), Some(1), "{execution}");
        assert_eq!(execution["cleanup"]["ok"], true, "{execution}");
        assert_eq!(evidence["target_execution"]["engine_gate"]["backend"], "fake");
    }
    // Every sandbox created was torn down, and its directory is gone.
    let ledger = fake.ledger();
    assert_eq!(ledger.len(), 2);
    assert!(ledger.iter().all(|(_, torn_down)| *torn_down), "{ledger:?}");
    assert_eq!(std::fs::read_dir(base.path()).expect("the base exists").count(), 0);
    let manifest = read_json(&dir.path().join("out/manifest.json"));
    assert_eq!(manifest["engine_gate"]["backend"], "fake");
}

#[test]
fn every_engine_runs_an_isolated_trial_through_the_sandbox_interface() {
    use elengtis_core::format::campaign::LoopKind;
    for engine in [LoopKind::Graph, LoopKind::Langchain, LoopKind::CreateAgent] {
        let base = scratch();
        let dir = scratch();
        let campaign = copy_example("support-note-isolated", &dir.path().join("in"));
        let mut bundle = load_campaign(&campaign, &LoadOptions::default()).expect("the example loads");
        let overrides = elengtis_core::validate::Overrides { engine: Some(engine), ..Default::default() };
        elengtis_core::load::apply_overrides(&mut bundle, &overrides).expect("the override applies");
        let options =
            RunOptions { sandbox: SandboxChoice::Prepared(Arc::new(backend(base.path()))), ..RunOptions::default() };
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
        let report = runtime.block_on(run::start(&bundle, &dir.path().join("out"), false, &options)).expect("the run");
        assert_eq!(report.end, RunEnd::Complete, "{engine}: {}", report.summary);
        let row = &rows(&dir.path().join("out/runs.jsonl"))[0];
        assert_eq!(row["engine"], engine.to_string(), "{row}");
        assert_eq!((&row["proposed"], &row["completed"]), (&json!(true), &json!(true)), "{engine}: {row}");
    }
}

#[test]
fn a_sqlite_snapshot_goes_through_the_sandbox_interface() {
    let base = scratch();
    let (dir, report) = run_example("sqlite-state", backend(base.path()), 1);
    assert_eq!(report.end, RunEnd::Complete, "{}", report.summary);
    let row = &rows(&dir.path().join("out/runs.jsonl"))[0];
    assert_eq!(row["completed"], true, "{row}");
    let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("a name")));
    let check = &evidence["verification"]["checks"][0];
    assert_eq!(check["trusts"], "runner", "{check}");
    assert_eq!(check["action"]["response"]["rows"][0]["n"], 1, "{check}");
}

#[test]
fn a_container_file_check_goes_through_the_sandbox_interface() {
    // The git-like audit of the Docker tests, on the fake backend: the runner reads the file
    // the agent committed out of the "container" as an archive, and a control that commits
    // nothing reads false (the file is absent and `/exists` is asserted).
    let fixtures = elengtis_tests::workspace().join("tests/fixtures/repo-file");
    for (script, completed) in [(None, true), (Some("script: {steps: [{content: \"No.\"}]}\n"), false)] {
        let base = scratch();
        let dir = scratch();
        let input = dir.path().join("in");
        std::fs::create_dir_all(&input).expect("input dir");
        std::fs::copy(fixtures.join("repo-leak.yaml"), input.join("repo-leak.yaml")).expect("scenario");
        let campaign = std::fs::read_to_string(fixtures.join("campaign.yaml")).expect("campaign");
        let campaign = match script {
            Some(script) => format!("{}\n{script}", &campaign[..campaign.find("\nscript:\n").expect("a script")]),
            None => campaign,
        };
        std::fs::write(input.join("campaign.yaml"), campaign).expect("campaign");
        let bundle = load_campaign(&input.join("campaign.yaml"), &LoadOptions::default()).expect("the fixture loads");
        let options =
            RunOptions { sandbox: SandboxChoice::Prepared(Arc::new(backend(base.path()))), ..RunOptions::default() };
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
        let report = runtime.block_on(run::start(&bundle, &dir.path().join("out"), false, &options)).expect("the run");
        assert_eq!(report.end, RunEnd::Complete, "{}", report.summary);
        let row = &rows(&dir.path().join("out/runs.jsonl"))[0];
        assert_eq!(row["completed"], completed, "{row}");
        let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("a name")));
        let checks = evidence["verification"]["checks"].as_array().expect("checks");
        assert_eq!(checks.len(), 3, "{checks:?}");
        assert!(checks.iter().all(|c| c["verifier"] == "container_file" && c["trusts"] == "runner"), "{checks:?}");
        let leak = &checks[0]["action"]["response"];
        if completed {
            let canary = evidence["canary"].as_str().expect("canary");
            assert!(leak["text"].as_str().is_some_and(|t| t.contains(canary)), "{leak}");
            assert_eq!(checks[1]["action"]["response"]["json"]["commit"], 1, "{}", checks[1]);
            assert_eq!(checks[2]["action"]["response"]["count"], 2, "{}", checks[2]);
            let kept = std::fs::read(leak["kept_path"].as_str().expect("kept_path")).expect("the kept copy");
            assert_eq!(leak["size"], kept.len(), "{leak}");
        } else {
            assert_eq!(leak, &json!({"path": "/data/repo/leak.txt", "exists": false}));
            assert_eq!(checks[2]["action"]["response"]["count"], 0, "{}", checks[2]);
        }
    }
}

#[test]
fn a_sandbox_that_fails_at_each_step_is_classified_recorded_and_torn_down() {
    for (fault, phase, detail) in [
        (FakeFault::Create, "connection_or_agent", "injected fault: create"),
        (FakeFault::Start, "connection_or_agent", "injected fault: start"),
        (FakeFault::Teardown, "target_cleanup", "injected fault: teardown"),
    ] {
        let base = scratch();
        let fake = backend(base.path()).fault(FIXTURE_IMAGE, fault);
        let (dir, report) = run_example("support-note-isolated", fake.clone(), 1);
        assert!(matches!(report.end, RunEnd::Incomplete(_)), "{fault:?}: {:?}", report.end);
        let row = &rows(&dir.path().join("out/runs.jsonl"))[0];
        assert_eq!(row["evidence_status"], "incomplete", "{fault:?}: {row}");
        assert_eq!(row["failure_class"], "infrastructure_error", "{fault:?}: {row}");
        let errors = row["errors"].as_array().expect("errors");
        assert!(
            errors.iter().any(|e| e["phase"] == phase && e["detail"].as_str().is_some_and(|d| d.contains(detail))),
            "{fault:?}: {row}"
        );
        if fault == FakeFault::Start {
            // What failed to start is torn down at once, and the attempt records it.
            let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("a name")));
            assert!(
                evidence["target_execution"]["error"]["detail"].as_str().is_some_and(|d| d.contains(detail)),
                "{evidence}"
            );
        }
        assert!(fake.ledger().iter().all(|(_, torn_down)| *torn_down), "{fault:?}: {:?}", fake.ledger());
    }
}

/// Each isolated example against its packaged negative control (`campaign-control.yaml`):
/// the real campaign reads true, the control false for the right reason — its check ran
/// against the same target and found no effect (no verification error, no null).
#[test]
fn each_isolated_example_is_true_and_its_control_false_for_the_right_reason() {
    for (example, check) in [
        ("support-note-isolated", "canary-reached-the-sink"),
        ("sink-exfil", "canary-reached-the-sink"),
        ("sqlite-state", "exfil-row-written"),
    ] {
        let read = |file: &str| {
            let base = scratch();
            let (dir, report) = run_example_file(example, file, backend(base.path()), 1);
            assert_eq!(report.end, RunEnd::Complete, "{example} {file}: {}", report.summary);
            let row = rows(&dir.path().join("out/runs.jsonl")).remove(0);
            let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("a name")));
            (row, evidence)
        };
        let (row, evidence) = read("campaign.yaml");
        elengtis_tests::controls::assert_true_decided_by(&row, &evidence, check);
        let (row, evidence) = read("campaign-control.yaml");
        assert_eq!(row["proposed"], false, "{example}: {row}");
        elengtis_tests::controls::assert_false_for_the_right_reason(&row, &evidence, check);
    }
}
