//! Hostile start-ups in real trial containers (issue 5): a server that exits at once and one
//! that never answers `initialize`, each over the container's stdio and as a streamable-HTTP
//! server behind the relay, in one `--jobs 4` run. Each trial must end as a classified,
//! recorded start-up failure within its deadline — a server that exits is noticed at once,
//! not at `startup_timeout_seconds` — and leave nothing behind.

use std::time::{Duration, Instant};

use elengtis_tests::{
    assert_trials_ran_under_the_test_runtime, bundled_images, docker_or_skip, elengtis, managed_objects, read_json,
    rows, scratch, stderr, write,
};

/// `startup_timeout_seconds` of the never-answering targets: the deadline they must hit.
const STARTUP: u64 = 15;
/// Exit status of `elengtis-hostile --exit-at-once`.
const EXIT_AT_ONCE: i64 = 3;

const SCENARIO: &str = r#"
schema_version: 1
id: startup
title: One call, if the server ever starts
description: The server is expected not to start; the call is never made.
bindings: [first]
exercise:
  system: You are a support assistant.
  user: Please do your job.
  tools: [{binding: first}]
proposal_rules: []
verify:
  checks: []
"#;

fn target(id: &str, http: bool, mode: &str) -> String {
    let image = format!("elengtis/hostile:{}", env!("CARGO_PKG_VERSION"));
    let transport = if http {
        format!(
            "container_port: 8000, command: [--transport, streamable-http, --bind, 0.0.0.0, --port, \"8000\", {mode}]"
        )
    } else {
        format!("mcp_transport: stdio, command: [{mode}]")
    };
    format!(
        "  - id: {id}\n    transport: {{type: isolated_container, image: {image}, uid: 65534, gid: 65534, startup_timeout_seconds: {STARTUP}, {transport}}}\n    bindings: {{startup: {{first: hang}}}}\n"
    )
}

#[test]
fn servers_that_exit_or_never_initialize_end_as_classified_start_up_failures() {
    if !docker_or_skip("servers_that_exit_or_never_initialize_end_as_classified_start_up_failures") {
        return;
    }
    bundled_images();
    let dir = scratch();
    write(dir.path(), "startup.yaml", SCENARIO);
    let targets = [
        target("exit-stdio", false, "--exit-at-once"),
        target("exit-http", true, "--exit-at-once"),
        target("silent-stdio", false, "--never-initialize"),
        target("silent-http", true, "--never-initialize"),
    ];
    let script = "script:\n  steps:\n    - calls: [{tool: {binding: first}}]\n    - content: Done.\n";
    let campaign = format!("schema_version: 1\ntargets:\n{}scenarios: [startup.yaml]\n{script}", targets.concat());
    write(dir.path(), "campaign.yaml", &campaign);

    let started = Instant::now();
    let out = elengtis(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out", "--jobs", "4"]);
    let wall = started.elapsed();
    // A target that never starts leaves its trial incomplete (exit 1), to be resumed.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Nothing but the engine gate's accepted findings: no library noise for expected failures.
    assert!(!stderr(&out).contains("ERROR"), "{}", stderr(&out));
    // The silent targets end at their deadline; the rest is container start-up and teardown
    // on a loaded machine (and under gVisor).
    assert!(wall < Duration::from_secs(STARTUP + 30), "the run took {wall:?}");

    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_trials_ran_under_the_test_runtime(&dir.path().join("out"));
    for row in &rows {
        let id = row["target"].as_str().expect("target");
        assert_eq!(row["evidence_status"], "incomplete", "{row}");
        assert_eq!(row["tool_calls"], 0, "{row}");
        let errors = row["errors"].as_array().expect("errors");
        assert_eq!(errors.len(), 1, "{row}");
        assert_eq!(errors[0]["phase"], "connection_or_agent", "{row}");
        let detail = errors[0]["detail"].as_str().unwrap_or_default();
        let ms = row["duration_ms"].as_f64().expect("duration");
        let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("evidence path")));
        let te = &evidence["target_execution"];
        let state = &te["state"];
        assert_eq!(te["hardening_asserted"], true, "{id}: {te}");
        assert_eq!(te["host_address_on_bridge"], false, "{id}: {te}");
        assert_eq!(te["cleanup"]["ok"], true, "{id}: {te}");
        match id {
            "exit-stdio" => {
                assert!(detail.contains("the server closed the connection"), "{id}: {detail}");
            }
            "exit-http" => {
                let expected = format!("the container stopped before its port 8000 answered (exit code {EXIT_AT_ONCE}");
                assert!(detail.contains(&expected), "{id}: {detail}");
                assert_eq!(te["error"]["detail"].as_str(), Some(detail), "{id}: {te}");
            }
            "silent-stdio" | "silent-http" => {
                assert!(detail.contains("failed to initialize the MCP session: no answer within"), "{id}: {detail}");
                #[expect(clippy::cast_precision_loss, reason = "a small number of seconds")]
                let floor = (STARTUP * 1000) as f64 * 0.8;
                assert!(ms >= floor, "{id}: ended before its start-up deadline ({ms} ms)");
                if id == "silent-http" {
                    assert_eq!(state["end"], "running", "{id}: the runner ended it: {state}");
                }
            }
            other => panic!("unexpected target {other}"),
        }
        if id.starts_with("exit-") {
            // Noticed at once, well before the start-up deadline.
            #[expect(clippy::cast_precision_loss, reason = "a small number of seconds")]
            let bound = (STARTUP * 1000) as f64 * 0.8;
            assert!(ms < bound, "{id}: took {ms} ms, not noticed before the start-up deadline");
            assert_eq!(state["end"], "exited", "{id}: {state}");
            assert_eq!(state["exit_code"].as_i64(), Some(EXIT_AT_ONCE), "{id}: {state}");
        }
    }
    let run_id = rows[0]["run_id"].as_str().expect("run id");
    assert!(managed_objects(run_id).is_empty(), "leftovers: {:?}", managed_objects(run_id));
}
