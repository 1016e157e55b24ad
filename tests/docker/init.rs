//! `elengtis init --image`: start the bundled notes image in a hardened container as preflight
//! does, list its tools, write a skeleton with a SQLite verifier of the named database, then
//! validate it and run it (and its negative control) to recorded trials.

use std::path::Path;

use elengtis_tests::{bundled_images, docker_or_skip, elengtis, read_json, rows, scratch, stderr, stdout, workspace};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The notes image as the packaged sqlite-state example names it (so the tag stays in step).
fn notes_image() -> String {
    let example = workspace().join("scenarios/examples/sqlite-state/campaign.yaml");
    let text = std::fs::read_to_string(&example).expect("read the sqlite-state example");
    let line = text.lines().find_map(|l| l.trim().strip_prefix("image: ")).expect("the example names its image");
    line.trim().to_owned()
}

/// Run a campaign, returning its one row and the trial's evidence.
fn run_one(cwd: &Path, campaign: &Path, out: &Path) -> (Value, Value) {
    let run = elengtis(cwd, &["run", "--config", s(campaign), "--out", s(out)]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let evidence: Vec<_> = std::fs::read_dir(out.join("evidence"))
        .expect("list evidence")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(evidence.len(), 1, "{evidence:?}");
    (rows[0].clone(), read_json(&evidence[0]))
}

/// The SQLite check of a trial: evaluated (the snapshot was taken and queried), not errored.
fn sqlite_check(evidence: &Value) -> &Value {
    let check = &evidence["verification"]["checks"][0];
    assert_eq!(check["verifier"], "container_sqlite_query", "{check}");
    assert_eq!(check["trusts"], "runner", "{check}");
    assert_eq!(check["action"]["status"], "ok", "{check}");
    let response = &check["action"]["response"];
    assert_eq!(response["source_path"], "/data/notes.db", "{response}");
    assert_eq!(response["snapshot_sha256"].as_str().map(str::len), Some(64), "{response}");
    assert_eq!(response["rows"], serde_json::json!([{"n": 0}]), "{response}");
    check
}

#[test]
fn init_of_the_notes_image_with_a_database_validates_and_runs_isolated() {
    if !docker_or_skip("init_of_the_notes_image_with_a_database_validates_and_runs_isolated") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let out = dir.path().join("skeleton");
    let image = notes_image();
    let init = elengtis(
        dir.path(),
        &["init", "--out", s(&out), "--image", &image, "--transport", "stdio", "--database", "/data/notes.db"],
    );
    assert_eq!(init.status.code(), Some(0), "{}{}", stdout(&init), stderr(&init));
    let text = stdout(&init);
    assert!(text.contains("notes lists 4 tools."), "{text}");
    assert!(text.contains("SQLite query of /data/notes.db"), "{text}");
    let campaign = std::fs::read_to_string(out.join("campaign.yaml")).expect("read campaign");
    assert!(campaign.contains("type: isolated_container") && campaign.contains("mcp_transport: stdio"), "{campaign}");
    assert!(campaign.contains("volumes: [/data]"), "{campaign}");
    let scenario = std::fs::read_to_string(out.join("first-call.yaml")).expect("read scenario");
    assert!(
        scenario.contains("type: container_sqlite_query") && scenario.contains("path: /data/notes.db"),
        "{scenario}"
    );

    let validate = elengtis(dir.path(), &["validate", s(&out.join("campaign.yaml"))]);
    assert_eq!(validate.status.code(), Some(0), "{}{}", stdout(&validate), stderr(&validate));
    // No decisive-check warning: the SQLite check asserts on rows.
    assert!(
        !stderr(&validate).contains("decisive") && !stderr(&validate).contains("no independent check"),
        "{}",
        stderr(&validate)
    );

    // The isolated campaign runs to a recorded trial: the call carried the canary, and the
    // SQLite verifier was evaluated on a snapshot of the container's database.
    let (row, evidence) = run_one(dir.path(), &out.join("campaign.yaml"), &dir.path().join("results"));
    assert_eq!(row["termination"], "model_stop", "{row}");
    assert_eq!(row["proposed"], true, "{row}");
    assert!(row["failure_class"].is_null(), "{row}");
    assert_eq!(evidence["target_execution"]["isolation"], "isolated_container", "{}", evidence["target_execution"]);
    let check = sqlite_check(&evidence);
    // As written the query is a placeholder that reads false (docs/init.md): evaluated, not null.
    assert_eq!(check["passed"], false, "{check}");
    assert_eq!(row["completed"], false, "{row}");

    // The negative control: no call, the same check, false for the right reason.
    let (control, evidence) = run_one(dir.path(), &out.join("campaign-control.yaml"), &dir.path().join("control"));
    assert_eq!(control["proposed"], false, "{control}");
    assert_eq!(control["completed"], false, "{control}");
    assert!(control["failure_class"].is_null(), "{control}");
    sqlite_check(&evidence);
}
