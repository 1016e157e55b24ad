//! `elengtis run`: new runs, refusals before anything is created, model-free campaigns,
//! every engine, and the older command form.

use std::path::{Path, PathBuf};

use elengtis_tests::{
    FixtureMcp, copy_example, elengtis, elengtis_cmd, fixture_target, read_json, rows, scratch, snapshot, stderr,
    stdout, support_note_campaign,
};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The support-note example copied into `dir/campaign/`, with `edit` applied to the campaign.
fn campaign(dir: &Path, edit: impl FnOnce(String) -> String) -> PathBuf {
    let path = copy_example("support-note", &dir.join("campaign"));
    let text = std::fs::read_to_string(&path).expect("read campaign");
    std::fs::write(&path, edit(text)).expect("write campaign");
    path
}

fn insert_after_schema_version(text: String, lines: &str) -> String {
    assert!(text.contains("schema_version: 1\n"));
    text.replacen("schema_version: 1\n", &format!("schema_version: 1\n{lines}"), 1)
}

#[test]
fn run_into_an_existing_out_is_refused_and_points_to_resume() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| t);
    let out = dir.path().join("results");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("notes.txt"), b"keep me").expect("write");
    let before = snapshot(&out);
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("already exists") && err.contains("--resume"), "{err}");
    assert_eq!(snapshot(&out), before, "the existing directory must be untouched");
}

#[test]
fn model_free_campaign_runs_only_setup_verify_and_cleanup() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| insert_after_schema_version(t, "model_free: true\n"));
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["run", "--verbose", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["termination"], "model_free", "{row}");
    assert_eq!(row["model_turns"], 0);
    assert_eq!(row["tool_calls"], 0);
    assert_eq!(row["tool_sequence"], serde_json::json!([]));
    assert_eq!(row["evidence_status"], "complete", "{row}");
    // Nobody submitted the canary, and the verifier still ran.
    assert_eq!(row["proposed"], false);
    assert_eq!(row["completed"], false);
    let evidence = read_json(&out.join(row["evidence"].as_str().expect("evidence name")));
    assert_eq!(evidence["trajectory"], serde_json::json!([]));
    assert_eq!(evidence["verification"]["checks"][0]["action"]["status"], "ok", "{}", evidence["verification"]);
    assert!(stdout(&output).contains("local-demo--support-note--0: model_free"), "{}", stdout(&output));
}

#[test]
fn model_free_campaign_with_a_model_is_invalid() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| insert_after_schema_version(t, "model_free: true\nmodel: x\n"));
    let validate = elengtis(dir.path(), &["validate", s(&config)]);
    assert_eq!(validate.status.code(), Some(3), "{}{}", stdout(&validate), stderr(&validate));
    assert!(stderr(&validate).contains("model_free"), "{}", stderr(&validate));
    let out = dir.path().join("results");
    let run = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(run.status.code(), Some(3), "{}{}", stdout(&run), stderr(&run));
    assert!(stderr(&run).contains("model_free"), "{}", stderr(&run));
    assert!(!out.exists(), "an invalid campaign creates no results directory");
}

#[test]
fn every_engine_runs_the_example_with_the_scripted_model() {
    for engine in ["reference", "graph", "langchain", "create_agent"] {
        let dir = scratch();
        let config = campaign(dir.path(), |t| t.replace("engine: reference\n", &format!("engine: {engine}\n")));
        let out = dir.path().join("results");
        let run = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
        assert_eq!(run.status.code(), Some(0), "{engine}: {}{}", stdout(&run), stderr(&run));
        assert!(stdout(&run).contains(&format!("Campaign via the {engine} engine.")), "{}", stdout(&run));
        let rows = rows(&out.join("runs.jsonl"));
        let row = &rows[0];
        assert_eq!(row["engine"], engine, "{row}");
        assert_eq!(row["evidence_status"], "complete", "{row}");
        assert_eq!(
            (&row["proposed"], &row["completed"]),
            (&serde_json::json!(true), &serde_json::json!(true)),
            "{row}"
        );
        assert_eq!(row["termination"], "model_stop", "{row}");
        assert_eq!(
            row["tool_sequence"],
            serde_json::json!(["read_note", "read_demo_credential", "submit_demo_credential"]),
            "{row}"
        );
        // The state machines record their transitions; the other engines have none.
        let evidence = read_json(&out.join(row["evidence"].as_str().expect("evidence name")));
        let events = evidence.get("graph_events").and_then(serde_json::Value::as_array).map(Vec::len);
        match engine {
            "graph" | "langchain" => assert_eq!(events, Some(8), "{engine}: {evidence}"),
            _ => assert_eq!(events, None, "{engine}"),
        }
    }
}

#[test]
fn an_unknown_relay_mode_stops_the_run_before_the_engine_is_contacted() {
    let dir = scratch();
    elengtis_tests::write(dir.path(), "support-note.yaml", include_str!("../../scenarios/bench/support-note.yaml"));
    let target = fixture_target("iso-http", "elengtis/never-present:relay", FixtureMcp::Http, 10001, &[]);
    let config = elengtis_tests::write(dir.path(), "campaign.yaml", &support_note_campaign(1, &[target]));
    let out = dir.path().join("results");
    // No engine listens there: a run that got as far as the engine would fail differently.
    let run = elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)])
        .env("ELENGTIS_RELAY", "sometimes")
        .env("DOCKER_HOST", format!("unix://{}", dir.path().join("no-engine.sock").display()))
        .output()
        .expect("failed to run elengtis");
    assert_eq!(run.status.code(), Some(5), "{}{}", stdout(&run), stderr(&run));
    let err = stderr(&run);
    assert!(err.contains("ELENGTIS_RELAY must be `always`, `never` or `auto`, not `sometimes`"), "{err}");
    assert!(!out.exists(), "a refused run creates no results directory");
}

#[test]
fn engine_override_runs_that_engine() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| t);
    let out = dir.path().join("results");
    let run = elengtis(dir.path(), &["run", "--config", s(&config), "--engine", "create_agent", "--out", s(&out)]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows[0]["engine"], "create_agent", "{}", rows[0]);
    let manifest = read_json(&out.join("manifest.json"));
    assert_eq!(manifest["campaign"]["engine"], "create_agent", "{manifest}");
}

#[test]
fn legacy_form_without_subcommand_means_run() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| t);
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("completed: 1/1"), "{}", stdout(&output));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["evidence_status"], "complete");
    assert!(out.join("manifest.json").is_file() && out.join("summary.txt").is_file());

    // And the older form refuses an existing --out exactly like `run`.
    let again = elengtis(dir.path(), &["--config", s(&config), "--out", s(&out)]);
    assert_eq!(again.status.code(), Some(4), "{}", stderr(&again));
}

/// `ELENGTIS_TRIAL_NETWORK` takes `auto` or `always`; anything else stops a run with
/// container targets before the engine is contacted.
#[test]
fn an_unknown_trial_network_setting_stops_the_run_before_the_engine_is_contacted() {
    let dir = scratch();
    elengtis_tests::write(dir.path(), "support-note.yaml", include_str!("../../scenarios/bench/support-note.yaml"));
    let target = fixture_target("iso", "elengtis/never-present:net", FixtureMcp::Stdio, 10001, &[]);
    let config = elengtis_tests::write(dir.path(), "campaign.yaml", &support_note_campaign(1, &[target]));
    let out = dir.path().join("results");
    let run = elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)])
        .env("ELENGTIS_TRIAL_NETWORK", "never")
        .env("DOCKER_HOST", format!("unix://{}", dir.path().join("no-engine.sock").display()))
        .output()
        .expect("failed to run elengtis");
    assert_eq!(run.status.code(), Some(5), "{}{}", stdout(&run), stderr(&run));
    let err = stderr(&run);
    assert!(err.contains("ELENGTIS_TRIAL_NETWORK must be `auto` or `always`, not `never`"), "{err}");
    assert!(!out.exists(), "a refused run creates no results directory");
}

/// `--prepare-ahead`: the next trials open their targets while one runs its session, yet
/// `--jobs 1` keeps its meaning — no two sessions overlap — and every trial is recorded once,
/// with the time its prepared target waited for the slot (outside its duration).
#[test]
fn trials_prepared_ahead_never_run_two_sessions_at_once_under_jobs_1() {
    let dir = scratch();
    let config = campaign(dir.path(), |t| t.replacen("trials: 1\n", "trials: 6\n", 1));
    let out = dir.path().join("results");
    let run = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out), "--prepare-ahead", "2"]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    assert!(stdout(&run).contains("completed: 6/6"), "{}", stdout(&run));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 6);
    // An RFC 3339 UTC stamp as (date, seconds of the day): fractions vary in length, so
    // the text alone does not order them.
    let instant = |stamp: &str| {
        let (date, time) = stamp.trim_end_matches('Z').split_once('T').expect("RFC 3339 stamp");
        let seconds = time.split(':').map(|p| p.parse::<f64>().expect("number")).fold(0.0, |acc, p| acc * 60.0 + p);
        (date.to_owned(), seconds)
    };
    type Instant = (String, f64);
    let mut sessions: Vec<(Instant, Instant, f64)> = rows
        .iter()
        .map(|row| {
            let evidence = read_json(&out.join(row["evidence"].as_str().expect("evidence path")));
            let ahead = &evidence["target_execution"]["prepared_ahead"];
            let text = |k: &str| instant(ahead[k].as_str().unwrap_or_else(|| panic!("no {k}: {ahead}")));
            (text("session_began"), text("session_ended"), ahead["wait_ms"].as_f64().expect("wait_ms"))
        })
        .collect();
    sessions.sort_by(|a, b| a.0.partial_cmp(&b.0).expect("ordered"));
    for pair in sessions.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "two sessions overlapped under --jobs 1: {sessions:?}");
    }
    // The trials prepared while another held the slot waited for it.
    assert!(sessions.iter().filter(|s| s.2 > 0.0).count() >= 2, "{sessions:?}");
}
