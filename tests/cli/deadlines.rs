//! Every external call has a deadline: each call type is pointed at a black hole (something
//! that accepts and never answers) and the deadline fires within a bound, as a classified
//! error naming the call, with nothing left running.
//!
//! | Call | Black hole | Deadline |
//! |---|---|---|
//! | Docker (first call: ping) | a unix socket that accepts and never answers | 10 s |
//! | Docker (any later call, here the image lookup) | a fake engine answering only ping/version/info | 30 s |
//! | MCP over streamable HTTP (initialize) | a TCP listener that accepts and never answers | 10 s |
//! | MCP over stdio (initialize) | `sleep` as the server | 10 s |
//! | HTTP verifier (`http_request`) | a TCP listener that accepts and never answers | 10 s |
//!
//! The cases run in parallel threads: the test takes as long as the longest (≈ 30 s).
//! There is no model call to test: this build has no network model provider (see
//! `orchestrator/src/model/mod.rs`; a campaign with `model` is refused before anything runs).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use elengtis_tests::fake_engine::{Behaviour, FakeEngine, patched_version};
use elengtis_tests::{ChildGuard, elengtis_cmd, processes_mentioning, rows, scratch, stderr, write};

const UNAVAILABLE: i32 = 5;
const RUN_INCOMPLETE: i32 = 1;

const SCENARIO: &str = include_str!("../../scenarios/bench/support-note.yaml");
const BINDINGS: &str = "support-note: {read_note: read_note, read_credential: read_demo_credential, submit_credential: submit_demo_credential}";

/// A TCP listener on 127.0.0.1 that accepts connections and never answers; the accepted
/// sockets are held until the test process ends.
fn tcp_black_hole() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("failed to bind a black hole");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    port
}

fn campaign(dir: &Path, target: &str) {
    write(dir, "support-note.yaml", SCENARIO);
    write(
        dir,
        "campaign.yaml",
        &format!(
            "schema_version: 1\ntargets:\n  - id: hole\n    transport:\n{target}\n    bindings:\n      {BINDINGS}\nscenarios: [support-note.yaml]\n"
        ),
    );
}

/// Run `elengtis` (bounded), returning its output and how long it took.
fn timed(dir: &Path, args: &[&str], docker_host: Option<&str>) -> (Output, Duration) {
    let mut cmd = elengtis_cmd(dir, args);
    if let Some(host) = docker_host {
        cmd.env("DOCKER_HOST", host);
    }
    let started = Instant::now();
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("failed to run elengtis");
    let out = ChildGuard::new(child).wait_output(Duration::from_secs(120));
    (out, started.elapsed())
}

fn assert_within(case: &str, took: Duration, deadline: u64) {
    eprintln!("{case}: {took:?} (deadline {deadline} s)");
    assert!(
        took >= Duration::from_secs(deadline) - Duration::from_millis(500),
        "{case}: ended before the deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(deadline + 10), "{case}: {took:?} is past the deadline + 10 s");
}

/// A Docker engine that never answers: `run` and `preflight` fail on the ping's 10 s deadline.
fn docker_black_hole() {
    let engine = FakeEngine::start(Behaviour::BlackHole);
    let dir = scratch();
    campaign(
        dir.path(),
        "      type: isolated_container\n      image: elengtis/never-present:deadline\n      mcp_transport: stdio\n      uid: 10001\n      gid: 10001",
    );
    let host = engine.docker_host();
    let run = std::thread::scope(|s| {
        let preflight = s.spawn(|| timed(dir.path(), &["preflight", "campaign.yaml"], Some(&host)));
        let run = timed(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], Some(&host));
        (run, preflight.join().expect("preflight thread"))
    });
    for (case, (out, took)) in [("docker black hole: run", run.0), ("docker black hole: preflight", run.1)] {
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
        assert!(err.contains("failed to connect to the Docker engine"), "{case}: {err}");
        assert!(err.contains("failed to ping the engine: no answer within 10 s"), "{case}: {err}");
        assert_within(case, took, 10);
    }
    assert!(!dir.path().join("out").exists(), "the results directory was created");
    // Only pings ever reached the engine.
    assert!(engine.requests().iter().all(|r| r.ends_with("/_ping")), "{:?}", engine.requests());
}

/// An engine that answers ping, version and info but nothing after: the image lookup's 30 s
/// deadline fires, naming the call.
fn docker_silent_after_connect() {
    let engine = FakeEngine::start(Behaviour::AnswerThenSilent(patched_version()));
    let dir = scratch();
    campaign(
        dir.path(),
        "      type: isolated_container\n      image: elengtis/never-present:deadline\n      mcp_transport: stdio\n      uid: 10001\n      gid: 10001",
    );
    let (out, took) =
        timed(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], Some(&engine.docker_host()));
    let case = "docker silent after connect: run";
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
    assert!(
        err.contains(
            "failed to resolve image `elengtis/never-present:deadline`: the Docker engine did not answer within 30 s"
        ),
        "{case}: {err}"
    );
    assert_within(case, took, 30);
    assert_eq!(engine.other_requests(), ["GET /images/elengtis/never-present:deadline/json"]);
    assert!(!dir.path().join("out").exists(), "the results directory was created");
}

/// The one row of a run that ended incomplete.
fn only_row(dir: &Path, case: &str, out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(RUN_INCOMPLETE), "{case}: {}", stderr(out));
    let rows = rows(&dir.join("out/runs.jsonl"));
    assert_eq!(rows.len(), 1, "{case}: {rows:?}");
    rows[0].clone()
}

/// A streamable HTTP target that accepts and never answers: initialization times out.
fn mcp_http_black_hole() {
    let port = tcp_black_hole();
    let dir = scratch();
    campaign(dir.path(), &format!("      type: streamable_http\n      url: http://127.0.0.1:{port}/mcp"));
    let (out, took) = timed(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], None);
    let case = "MCP over HTTP black hole";
    let row = only_row(dir.path(), case, &out);
    assert_eq!(row["failure_class"], "infrastructure_error", "{case}: {row}");
    assert_eq!(row["errors"][0]["phase"], "connection_or_agent", "{case}: {row}");
    let detail = row["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("failed to initialize the MCP session: no answer within 10 s"), "{case}: {detail}");
    assert!(row["proposed"].is_null() && row["completed"].is_null(), "{case}: {row}");
    assert_within(case, took, 10);
}

/// A stdio server that never answers (`sleep`): initialization times out and the child is
/// killed.
fn mcp_stdio_black_hole() {
    const MARKER: &str = "86400.4242";
    let dir = scratch();
    campaign(dir.path(), &format!("      type: stdio\n      command: sleep\n      args: [\"{MARKER}\"]"));
    let (out, took) = timed(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], None);
    let case = "MCP over stdio black hole";
    let row = only_row(dir.path(), case, &out);
    let detail = row["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("failed to initialize the MCP session: no answer within 10 s"), "{case}: {detail}");
    assert_eq!(row["failure_class"], "infrastructure_error", "{case}: {row}");
    assert_within(case, took, 10);
    assert_eq!(processes_mentioning(&format!("sleep {MARKER}")), Vec::new(), "{case}: the server was left running");
}

/// An `http_request` check at a black hole: `completed` is null and the verification error
/// names the deadline.
fn http_verifier_black_hole() {
    let port = tcp_black_hole();
    let dir = scratch();
    let scenario = SCENARIO.replace(
        "verify:\n  checks: []",
        &format!(
            "verify:\n  checks:\n    - id: hole\n      action: {{id: ask, type: http_request, method: GET, url: \"http://127.0.0.1:{port}/records\"}}\n      assertions: [{{path: /status, op: equals, value: 200}}]"
        ),
    );
    assert_ne!(scenario, SCENARIO, "the scenario's verify block changed; update this test");
    campaign(
        dir.path(),
        "      type: stdio\n      command: elengtis-fixture\n      args: [--collector, {runner: collector}, --credential, {runner: canary}]",
    );
    write(dir.path(), "support-note.yaml", &scenario);
    let (out, took) = timed(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], None);
    let case = "HTTP verifier black hole";
    let row = only_row(dir.path(), case, &out);
    assert!(row["completed"].is_null(), "{case}: {row}");
    assert_eq!(row["proposed"], true, "{case}: the exercise itself ran: {row}");
    assert_eq!(row["failure_class"], "verification_error", "{case}: {row}");
    let error = row["errors"].as_array().and_then(|e| e.iter().find(|e| e["phase"] == "verification")).cloned();
    let detail = error.as_ref().and_then(|e| e["detail"].as_str()).unwrap_or_default().to_owned();
    assert!(detail.contains("no complete answer within 10"), "{case}: {row}");
    assert_within(case, took, 10);
}

#[test]
fn every_external_call_type_fires_its_deadline_at_a_black_hole() {
    let cases: [(&str, fn()); 5] = [
        ("docker black hole", docker_black_hole),
        ("docker silent after connect", docker_silent_after_connect),
        ("MCP over HTTP", mcp_http_black_hole),
        ("MCP over stdio", mcp_stdio_black_hole),
        ("HTTP verifier", http_verifier_black_hole),
    ];
    let handles: Vec<_> = cases.into_iter().map(|(name, case)| (name, std::thread::spawn(case))).collect();
    let failed: Vec<&str> = handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect();
    assert!(failed.is_empty(), "failed cases: {failed:?}");
}
