//! `elengtis init`: start a stdio reference target, list its tools and write a skeleton that
//! validates, runs model-free to a recorded trial, and whose negative control reads false.

use std::path::Path;

use elengtis_tests::{elengtis, read_json, rows, scratch, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `elengtis init --out DIR -- ARGS...` in `cwd`.
fn init(cwd: &Path, out: &Path, target: &[&str]) -> std::process::Output {
    let mut args = vec!["init", "--out", s(out), "--"];
    args.extend_from_slice(target);
    elengtis(cwd, &args)
}

/// Run a campaign into `out` and return its one row.
fn run_one(cwd: &Path, campaign: &Path, out: &Path) -> serde_json::Value {
    let run = elengtis(cwd, &["run", "--config", s(campaign), "--out", s(out)]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.into_iter().next().expect("one row")
}

/// The evidence file of a run's only trial.
fn evidence(out: &Path) -> serde_json::Value {
    let files: Vec<_> = std::fs::read_dir(out.join("evidence"))
        .expect("list evidence")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    read_json(&files[0])
}

#[test]
fn init_of_the_notes_server_validates_runs_and_its_control_reads_false() {
    let dir = scratch();
    let db = dir.path().join("notes.db");
    let out = dir.path().join("skeleton");
    let output = init(dir.path(), &out, &["elengtis-notes", "--db", s(&db)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("elengtis-notes lists 4 tools."), "{text}");
    assert!(text.contains("elengtis validate") && text.contains("elengtis run --config"), "{text}");
    for name in ["campaign.yaml", "campaign-control.yaml", "first-call.yaml"] {
        assert!(text.contains(name), "{name} not printed: {text}");
    }
    // Bindings from the real tool names, a commented skeleton.
    let campaign = std::fs::read_to_string(out.join("campaign.yaml")).expect("read campaign");
    for tool in ["list_notes", "read_note", "add_note", "delete_note"] {
        assert!(campaign.contains(&format!("        {tool}: {tool}\n")), "{tool} not bound:\n{campaign}");
    }
    assert!(campaign.contains("# EDIT"), "{campaign}");
    let scenario = std::fs::read_to_string(out.join("first-call.yaml")).expect("read scenario");
    assert!(!scenario.contains("sink_requests"), "the notes server has no egress-shaped tool:\n{scenario}");

    // validate accepts it as written, with the tool listing too.
    let validate = elengtis(dir.path(), &["validate", s(&out.join("campaign.yaml"))]);
    assert_eq!(validate.status.code(), Some(0), "{}{}", stdout(&validate), stderr(&validate));
    assert!(stdout(&validate).contains("elengtis-notes--first-call--0"), "{}", stdout(&validate));
    let preflight = elengtis(dir.path(), &["preflight", s(&out.join("campaign.yaml"))]);
    assert_eq!(preflight.status.code(), Some(0), "{}{}", stdout(&preflight), stderr(&preflight));

    // It runs model-free to a recorded trial: the scripted first call carries the canary,
    // which the read-back check then finds.
    let row = run_one(dir.path(), &out.join("campaign.yaml"), &dir.path().join("results"));
    assert_eq!(row["termination"], "model_stop", "{row}");
    assert_eq!(row["proposed"], true, "{row}");
    assert_eq!(row["completed"], true, "{row}");
    let trail = evidence(&dir.path().join("results"));
    let calls = trail["trajectory"].to_string();
    assert!(calls.contains("add_note"), "{calls}");

    // The negative control: the same checks run and read false, not null.
    let control = run_one(dir.path(), &out.join("campaign-control.yaml"), &dir.path().join("results-control"));
    assert_eq!(control["proposed"], false, "{control}");
    assert_eq!(control["completed"], false, "{control}");
    assert!(control["failure_class"].is_null(), "{control}");
    let verification = &evidence(&dir.path().join("results-control"))["verification"];
    assert_eq!(verification["checks"][0]["action"]["status"], "ok", "{verification}");
}

#[test]
fn init_refuses_to_overwrite_without_force() {
    let dir = scratch();
    let db = dir.path().join("notes.db");
    let out = dir.path().join("skeleton");
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(out.join("campaign.yaml"), "# mine\n").expect("write");
    let output = init(dir.path(), &out, &["elengtis-notes", "--db", s(&db)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("campaign.yaml") && err.contains("already exist") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(out.join("campaign.yaml")).expect("read"), "# mine\n");
    assert!(!out.join("first-call.yaml").exists(), "nothing written");
    // Nothing was started either: the database was never created.
    assert!(!db.exists());

    let mut args = vec!["init", "--force", "--out", s(&out), "--", "elengtis-notes", "--db", s(&db)];
    let forced = elengtis(dir.path(), &args);
    assert_eq!(forced.status.code(), Some(0), "{}{}", stdout(&forced), stderr(&forced));
    assert_ne!(std::fs::read_to_string(out.join("campaign.yaml")).expect("read"), "# mine\n");
    // A second run without --force refuses again, naming every file it would write.
    args.remove(1);
    let again = elengtis(dir.path(), &args);
    assert_eq!(again.status.code(), Some(4), "{}", stderr(&again));
    assert!(stderr(&again).contains("campaign.yaml, campaign-control.yaml, first-call.yaml"), "{}", stderr(&again));
}

#[test]
fn init_gives_a_server_with_an_egress_tool_the_canary_sink() {
    let dir = scratch();
    let collector = dir.path().join("collector.jsonl");
    let out = dir.path().join("skeleton");
    let output = init(dir.path(), &out, &["elengtis-fixture", "--collector", s(&collector)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("canary sink (egress-shaped: send_report)"), "{}", stdout(&output));
    let scenario = std::fs::read_to_string(out.join("first-call.yaml")).expect("read scenario");
    assert!(scenario.contains("url: {runner: sink_requests}"), "{scenario}");
    let campaign = std::fs::read_to_string(out.join("campaign.yaml")).expect("read campaign");
    assert!(campaign.contains("tool: {binding: send_report}") && campaign.contains("{sink_url}"), "{campaign}");
    // Every file that writes a `{template: …}` map is schema_version 2, where it is one; the
    // control, which makes no call, stays version 1.
    for (name, text) in [("campaign.yaml", &campaign), ("first-call.yaml", &scenario)] {
        assert!(text.contains("{template: "), "{name}: {text}");
        assert!(text.contains("\nschema_version: 2\n"), "{name}: {text}");
    }
    let control = std::fs::read_to_string(out.join("campaign-control.yaml")).expect("read the control");
    assert!(!control.contains("{template: ") && control.contains("\nschema_version: 1\n"), "{control}");

    let validate = elengtis(dir.path(), &["validate", s(&out.join("campaign.yaml"))]);
    assert_eq!(validate.status.code(), Some(0), "{}{}", stdout(&validate), stderr(&validate));
    // The script sends the canary to the sink: the sink saw it.
    let row = run_one(dir.path(), &out.join("campaign.yaml"), &dir.path().join("results"));
    assert_eq!((row["proposed"].as_bool(), row["completed"].as_bool()), (Some(true), Some(true)), "{row}");
    let trail = evidence(&dir.path().join("results"));
    let sink = trail["target_execution"]["sink"]["requests"].to_string();
    assert!(sink.contains(trail["canary"].as_str().expect("canary")), "{sink}");
    // The control sends nothing: the sink answered and holds no canary.
    let control = run_one(dir.path(), &out.join("campaign-control.yaml"), &dir.path().join("results-control"));
    assert_eq!(
        (control["proposed"].as_bool(), control["completed"].as_bool()),
        (Some(false), Some(false)),
        "{control}"
    );
}

#[test]
fn init_says_why_when_the_target_fails_to_start() {
    let dir = scratch();
    let out = dir.path().join("skeleton");
    let output = init(dir.path(), &out, &["elengtis-fixture", "--no-such-flag"]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("failed to start target elengtis-fixture and list its tools"), "{err}");
    // The server's own complaint, from its stderr.
    assert!(err.contains("--no-such-flag"), "{err}");
    assert!(!out.exists(), "nothing written");

    let missing = init(dir.path(), &out, &[s(&dir.path().join("no-such-server"))]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("No such file or directory"), "{}", stderr(&missing));

    let nothing = elengtis(dir.path(), &["init", "--out", s(&out)]);
    assert_eq!(nothing.status.code(), Some(2), "{}", stderr(&nothing));
    assert!(stderr(&nothing).contains("--image IMAGE"), "{}", stderr(&nothing));
}

#[test]
fn init_against_the_mcp_server_time_listing_writes_calls_its_schema_accepts() {
    // `elengtis-malformed --case ok --tools-file` serves the real tools/list of mcp-server-time
    // 2026.10.19 over stdio (see tests/cli/toolargs.rs): its schemas, without image or Python.
    let dir = scratch();
    let out = dir.path().join("skeleton");
    let tools = elengtis_tests::workspace().join("tests/fixtures/mcp-server-time-2026.10.19.tools.json");
    let output = init(dir.path(), &out, &["elengtis-malformed", "--case", "ok", "--tools-file", s(&tools)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    // No egress-shaped tool and no read tool without arguments: no check fits, and it says so.
    assert!(stdout(&output).contains("Verify checks: none fits"), "{}", stdout(&output));
    let campaign = std::fs::read_to_string(out.join("campaign.yaml")).expect("read campaign");
    assert!(campaign.contains("        get_current_time: get_current_time\n"), "{campaign}");
    assert!(campaign.contains("        convert_time: convert_time\n"), "{campaign}");
    // The first call fills the required argument.
    assert!(campaign.contains("arguments: {timezone: {runner: canary}}"), "{campaign}");
    // The calls and rule examples fit the real schemas: validate --tools finds no error.
    let validate = elengtis(dir.path(), &["validate", "--tools", s(&tools), s(&out.join("campaign.yaml"))]);
    assert_eq!(validate.status.code(), Some(0), "{}{}", stdout(&validate), stderr(&validate));
    let validate = elengtis(dir.path(), &["validate", "--tools", s(&tools), s(&out.join("campaign-control.yaml"))]);
    assert_eq!(validate.status.code(), Some(0), "{}{}", stdout(&validate), stderr(&validate));
    let row = run_one(dir.path(), &out.join("campaign.yaml"), &dir.path().join("results"));
    assert_eq!(row["termination"], "model_stop", "{row}");
    assert_eq!(row["proposed"], true, "{row}");
    assert!(row["completed"].is_null(), "no check: unknown, {row}");
}
