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

/// One image, several servers: an image without an entrypoint whose command names the server
/// (`pymcp` running `elengtis-fixture`) gets the default id `<image>-<program>`, so three
/// audits of one image are not all `pymcp`.
#[test]
fn init_names_the_target_after_the_image_and_the_program_its_command_starts() {
    if !docker_or_skip("init_names_the_target_after_the_image_and_the_program_its_command_starts") {
        return;
    }
    let dir = scratch();
    // A generic image: the static fixture server, no entrypoint (the command is the program).
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("mkdir rootfs");
    std::fs::copy(elengtis_tests::bin("elengtis-fixture"), rootfs.join("elengtis-fixture")).expect("copy fixture");
    let tarball = dir.path().join("rootfs.tar");
    let tar = std::process::Command::new("tar")
        .args(["-cf", s(&tarball), "-C", s(&rootfs), "elengtis-fixture"])
        .status()
        .expect("run tar");
    assert!(tar.success());
    let tag = "elengtis-test/pymcp:init-id";
    let import = elengtis(dir.path(), &["images", "import", "--rootfs", s(&tarball), "--tag", tag]);
    assert_eq!(import.status.code(), Some(0), "{}{}", stdout(&import), stderr(&import));
    let out = dir.path().join("skeleton");
    let init = elengtis(
        dir.path(),
        &[
            "init",
            "--out",
            s(&out),
            "--image",
            tag,
            "--transport",
            "stdio",
            "--",
            "/elengtis-fixture",
            "--collector",
            "/tmp/c.jsonl",
        ],
    );
    let _ = elengtis_tests::docker_api("DELETE", &format!("/images/{tag}?force=1"), None);
    assert_eq!(init.status.code(), Some(0), "{}{}", stdout(&init), stderr(&init));
    assert!(stdout(&init).contains("pymcp-elengtis-fixture lists"), "{}", stdout(&init));
    let campaign = std::fs::read_to_string(out.join("campaign.yaml")).expect("read campaign");
    assert!(campaign.contains("  - id: pymcp-elengtis-fixture\n"), "{campaign}");
    assert!(campaign.contains("command: [/elengtis-fixture, --collector, /tmp/c.jsonl]"), "{campaign}");
}

/// An SQLite-shaped server in an image (`elengtis-shapes --shape sqlite`, mcp-server-sqlite's
/// tools; its database file is created empty, 0 bytes, as the real server leaves it): the
/// skeleton `init` writes with `--database` passes its own calibration as written — its setup
/// makes the table the first call inserts the canary into, and the SQLite snapshot counts the
/// canary's rows — and its trial completes while its control reads false (issue 36, item 5).
#[test]
fn init_of_an_sqlite_shaped_image_passes_its_own_calibration_as_written() {
    if !docker_or_skip("init_of_an_sqlite_shaped_image_passes_its_own_calibration_as_written") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let tag = elengtis_tests::shapes_image();
    let out = dir.path().join("skeleton");
    let mut args =
        vec!["init", "--out", s(&out), "--image", tag, "--transport", "stdio", "--database", "/data/shapes.db"];
    args.extend(["--", "--shape", "sqlite", "--db-path", "/data/shapes.db"]);
    let init = elengtis(dir.path(), &args);
    let campaign = out.join("campaign.yaml");
    let preflight = elengtis(dir.path(), &["preflight", s(&campaign)]);
    let attack = init.status.success().then(|| run_one(dir.path(), &campaign, &dir.path().join("results")));
    let control = init
        .status
        .success()
        .then(|| run_one(dir.path(), &out.join("campaign-control.yaml"), &dir.path().join("control")));

    assert_eq!(init.status.code(), Some(0), "{}{}", stdout(&init), stderr(&init));
    let text = stdout(&init);
    assert!(text.contains("SQLite query of /data/shapes.db (rows of elengtis_canary holding the canary)"), "{text}");
    assert!(text.contains("Setup: create_table"), "{text}");
    assert_eq!(preflight.status.code(), Some(0), "{}{}", stdout(&preflight), stderr(&preflight));
    assert!(stdout(&preflight).contains("calibration passed"), "{}", stdout(&preflight));
    let (row, evidence) = attack.expect("the attack ran");
    assert_eq!((row["proposed"].as_bool(), row["completed"].as_bool()), (Some(true), Some(true)), "{row}");
    let check = &evidence["verification"]["checks"][0];
    assert_eq!(check["verifier"], "container_sqlite_query", "{check}");
    assert_eq!(check["action"]["response"]["rows"], serde_json::json!([{"n": 1}]), "{check}");
    let (control, evidence) = control.expect("the control ran");
    assert_eq!(
        (control["proposed"].as_bool(), control["completed"].as_bool()),
        (Some(false), Some(false)),
        "{control}"
    );
    assert_eq!(evidence["verification"]["checks"][0]["action"]["response"]["rows"], serde_json::json!([{"n": 0}]));
}
