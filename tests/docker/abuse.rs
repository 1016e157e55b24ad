//! Resource abuse (issue 5): one `--jobs 4` run mixes hostile trials (fork bomb, memory
//! balloon, tmpfs filler, log flood then a call that never returns, writes outside /tmp) with
//! normal trials of the bundled fixture. Each abuse must end as a recorded outcome within
//! the trial's deadline, the runner must stay responsive and small, and the normal trials
//! must end exactly as they do in a run of their own.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use elengtis_tests::{
    ChildGuard, assert_trials_ran_under_the_test_runtime, bundled_images, docker_or_skip, elengtis, elengtis_cmd,
    managed_objects, read_json, rows, scratch, stderr, stdout, test_runtime, write,
};
use serde_json::Value;

/// The runner's deadline for one MCP call (`target::Limits::default().call`).
const CALL_DEADLINE: Duration = Duration::from_secs(30);
/// The engine's log cap per container (`max-size=1m`, one file).
const LOG_CAP: usize = 1 << 20;
/// The `/tmp` tmpfs size.
const TMPFS: u64 = 64 << 20;

/// Three tool calls without arguments: the bindings decide what each target does.
const SCENARIO: &str = r#"
schema_version: 1
id: abuse
title: Three calls chosen by the target's bindings
description: Hostile targets bind abusive tools; fixture targets bind their ordinary read tools.
bindings: [first, second, third]
exercise:
  system: You are a support assistant.
  user: Please do your job.
  tools: [{binding: first}, {binding: second}, {binding: third}]
proposal_rules: []
verify:
  checks: []
"#;

const SCRIPT: &str = r#"
script:
  steps:
    - calls: [{tool: {binding: first}}]
    - calls: [{tool: {binding: second}}]
    - calls: [{tool: {binding: third}}]
    - content: Done.
"#;

fn target(id: &str, image: &str, command: &str, tools: [&str; 3]) -> String {
    format!(
        r#"
  - id: {id}
    transport:
      type: isolated_container
      image: {image}
      mcp_transport: stdio
      uid: 65534
      gid: 65534
      command: {command}
    bindings:
      abuse: {{first: {}, second: {}, third: {}}}"#,
        tools[0], tools[1], tools[2]
    )
}

fn normal_targets() -> Vec<String> {
    let fixture = format!("elengtis/fixture:{}", env!("CARGO_PKG_VERSION"));
    let command = "[--collector, /tmp/c.jsonl, --credential, {runner: canary}]";
    ["normal-a", "normal-b"]
        .iter()
        .map(|id| target(id, &fixture, command, ["read_note", "read_demo_credential", "read_note"]))
        .collect()
}

fn hostile_targets() -> Vec<String> {
    let hostile = format!("elengtis/hostile:{}", env!("CARGO_PKG_VERSION"));
    [
        ("abuse-flood", ["flood_log", "hang", "write_outside_tmp"]),
        ("abuse-balloon", ["balloon", "balloon", "balloon"]),
        ("abuse-fork", ["fork_bomb", "fork_bomb", "fork_bomb"]),
        ("abuse-fill", ["fill_tmp", "fill_tmp", "fill_tmp"]),
        ("abuse-write", ["write_outside_tmp", "write_outside_tmp", "write_outside_tmp"]),
    ]
    .iter()
    .map(|(id, tools)| target(id, &hostile, "[]", *tools))
    .collect()
}

fn campaign(targets: &[String]) -> String {
    format!("schema_version: 1\ntargets:{}\nscenarios: [abuse.yaml]\n{SCRIPT}", targets.concat())
}

/// What a user compares between runs: the outcome fields of each row, by trial id.
fn outcomes(rows: &[Value]) -> BTreeMap<String, String> {
    rows.iter()
        .map(|r| {
            let key = r["trial_id"].as_str().unwrap_or("?").to_owned();
            let value = format!(
                "{} {} {} {} {} {}",
                r["proposed"], r["completed"], r["termination"], r["tool_sequence"], r["evidence_status"], r["errors"]
            );
            (key, value)
        })
        .collect()
}

/// One raw Engine API GET returning the body's bytes (log streams are binary frames).
fn api_bytes(path: &str) -> Vec<u8> {
    let mut s = std::os::unix::net::UnixStream::connect("/var/run/docker.sock").expect("docker.sock");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n").as_bytes()).expect("request");
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let at = reply.windows(4).position(|w| w == b"\r\n\r\n").map_or(reply.len(), |p| p + 4);
    reply.split_off(at)
}

/// Ids of the running containers labelled with trial `trial_id`.
fn containers_of_trial(trial_id: &str) -> Vec<String> {
    let filter = format!("{{\"label\":[\"org.elengtis.trial={trial_id}\"]}}");
    let encoded: String = filter
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect();
    let body = api_bytes(&format!("/containers/json?filters={encoded}"));
    let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    list.as_array().into_iter().flatten().filter_map(|c| c["Id"].as_str().map(str::to_owned)).collect()
}

/// The resident-set high-water mark of process `pid` in KiB (Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The JSON result text of call `index` (0-based, one call per step) of a trial.
fn call_result(evidence: &Value, index: usize) -> Value {
    let call = &evidence["trajectory"][index]["calls"][0];
    match call["result"]["content"][0]["text"].as_str() {
        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
        None => call["result"].clone(),
    }
}

#[test]
fn resource_abuse_ends_as_recorded_outcomes_and_spares_the_other_trials() {
    if !docker_or_skip("resource_abuse_ends_as_recorded_outcomes_and_spares_the_other_trials") {
        return;
    }
    bundled_images();
    let dir = scratch();
    write(dir.path(), "abuse.yaml", SCENARIO);

    // The normal trials alone: the reference outcome.
    write(dir.path(), "alone.yaml", &campaign(&normal_targets()));
    let alone = elengtis(dir.path(), &["run", "--config", "alone.yaml", "--out", "alone", "--jobs", "2"]);
    assert!(alone.status.success(), "{}\n{}", stdout(&alone), stderr(&alone));
    let alone = outcomes(&rows(&dir.path().join("alone/runs.jsonl")));
    assert_eq!(alone.len(), 2);

    // The mixed run: hostile targets first, so the normal trials start while they misbehave.
    let mut targets = hostile_targets();
    targets.extend(normal_targets());
    write(dir.path(), "campaign.yaml", &campaign(&targets));
    let started = Instant::now();
    let child = elengtis_cmd(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out", "--jobs", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the run");
    let mut child = ChildGuard::new(child);
    let pid = child.id();
    let log = dir.path().join("out/runs.jsonl");
    let mut peak_kib = 0;
    let mut flood_log_bytes = Vec::new();
    let mut flood_container = None;
    // The bound: the slowest trial is the flood (64 MiB) then one call that runs into the
    // call deadline; start-up, teardown and the other trials fit in another deadline.
    let bound = CALL_DEADLINE * 3;
    while child.child().try_wait().expect("poll the run").is_none() {
        assert!(started.elapsed() < bound, "the run did not end within {bound:?}");
        if let Some(kib) = peak_rss_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        // While the flood trial's container lives, its engine log must stay under the cap.
        for id in containers_of_trial("abuse-flood--abuse--0") {
            flood_log_bytes.push(api_bytes(&format!("/containers/{id}/logs?stdout=1&stderr=1")).len());
            flood_container = Some(id);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let elapsed = started.elapsed();
    let out = child.wait_output(Duration::from_secs(5));
    let rows = rows(&log);
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(assert_trials_ran_under_the_test_runtime(&dir.path().join("out")), 7);
    // Abuse is data, not a broken run: every trial is recorded with its outcome (the hung
    // server's stderr, open until its container goes, is collected after the container's
    // removal). A target that fails under the exercise — the OOM-killed balloon (its
    // transport closed) and the hung server (a call with no answer within the deadline) — is
    // an infrastructure outcome since issue 27 (never a fire or a resist): those attempts are
    // incomplete, and so the run exits 1; every other attempt is complete. Under gVisor the
    // fork bomb may end its whole sandbox (the sentry cannot create a host thread, below):
    // that attempt is then the same infrastructure outcome, never a complete one.
    let runsc = test_runtime().as_deref() == Some("runsc");
    for row in &rows {
        let sandbox_ended = runsc && row["target"] == "abuse-fork" && row["evidence_status"] == "incomplete";
        if matches!(row["target"].as_str(), Some("abuse-balloon" | "abuse-flood")) || sandbox_ended {
            assert_eq!(row["evidence_status"], "incomplete", "{row}");
            assert_eq!(row["failure_class"], "infrastructure_error", "{row}");
        } else {
            assert_eq!(row["evidence_status"], "complete", "{row}");
        }
    }
    assert_eq!(out.status.code(), Some(1), "{}\n{}", stdout(&out), stderr(&out));
    let run_id = rows[0]["run_id"].as_str().expect("run id").to_owned();
    let by_target: BTreeMap<String, (usize, &Value)> =
        rows.iter().enumerate().map(|(i, r)| (r["target"].as_str().unwrap_or("?").to_owned(), (i, r))).collect();
    let evidence = |target: &str| {
        read_json(&dir.path().join("out").join(by_target[target].1["evidence"].as_str().expect("evidence")))
    };
    let mut report = Vec::new();

    // Normal trials: the same outcome as alone, recorded before the flood/hang trial ended.
    let mixed = outcomes(&rows);
    for (trial, outcome) in &alone {
        assert_eq!(mixed.get(trial), Some(outcome), "normal trial {trial} changed next to the hostile ones");
    }
    let flood_row = by_target["abuse-flood"].0;
    for normal in ["normal-a", "normal-b"] {
        assert!(by_target[normal].0 < flood_row, "{normal} was recorded only after the flood/hang trial: {rows:?}");
    }

    // Fork bomb: the pids limit (128) refuses new tasks; the server answers again afterwards.
    let fork = evidence("abuse-fork");
    if test_runtime().as_deref() == Some("runsc") {
        // Under gVisor the server's tasks live inside gVisor's own kernel: the engine's pids
        // limit bounds the sandbox's host threads, not them, so the fork bomb is not refused
        // at 128 tasks. Contained all the same — the sandbox's limits hold and the other
        // trials are unchanged (asserted above) — and stated, not silent: the runtime's record
        // in the evidence carries the difference (docs/security.md, "Runtimes").
        // Each call either outruns the limit and is answered, or the sentry cannot create a
        // host thread and the whole sandbox ends (the call then reads as the server closing
        // the connection); both were seen in repeated runs, both are contained.
        let state = &fork["target_execution"]["state"];
        for call in 0..3 {
            let result = call_result(&fork, call);
            if result["transport_error"].is_string() {
                let end = state["end"].as_str();
                assert!(matches!(end, Some("exited" | "killed")), "call {call}: the sandbox must have ended: {state}");
                break;
            }
            let tasks = result["tasks_started"].as_u64().unwrap_or(0);
            assert!(tasks > 128, "call {call}: under runsc the pids limit does not bound tasks: {result}");
        }
        let differences = fork["target_execution"]["runtime"]["differences"].to_string();
        assert!(differences.contains("pids"), "the difference must be recorded: {differences}");
        report.push(format!("fork_bomb (runsc): {}", call_result(&fork, 0)));
    } else {
        for call in 0..3 {
            let result = call_result(&fork, call);
            let tasks = result["tasks_started"].as_u64().unwrap_or(u64::MAX);
            assert!(tasks < 128 && tasks > 64, "call {call}: {result}");
            assert_eq!(result["errno"], 11, "EAGAIN expected: {result}");
        }
        report.push(format!("fork_bomb: {}", call_result(&fork, 0)));
    }

    // Balloon: the OOM killer ends the server at the memory limit; recorded as such.
    let balloon = evidence("abuse-balloon");
    let state = &balloon["target_execution"]["state"];
    if test_runtime().as_deref() == Some("runsc") {
        // Under gVisor the memory limit kills the whole sandbox; the engine does not see an
        // OOM kill of its init process, so the end reads `killed` (SIGKILL, 137), a
        // difference the runtime's record states.
        assert!(matches!(state["end"].as_str(), Some("oom_killed" | "killed")), "{state}");
        let differences = balloon["target_execution"]["runtime"]["differences"].to_string();
        assert!(differences.contains("oom_killed"), "the difference must be recorded: {differences}");
    } else {
        assert_eq!(state["oom_killed"], true, "{}", balloon["target_execution"]);
        assert_eq!(state["end"], "oom_killed", "{state}");
    }
    assert_eq!(state["exit_code"], 137, "{state}");
    // A call the transport could not complete is recorded as the original records it.
    assert!(call_result(&balloon, 0)["transport_error"].is_string(), "{}", balloon["trajectory"]);
    let balloon_ms = by_target["abuse-balloon"].1["duration_ms"].as_f64().unwrap_or(f64::MAX) as u64;
    assert!(balloon_ms < 20_000, "the OOM kill took {balloon_ms} ms");
    report.push(format!("balloon: state {state}, trial {balloon_ms} ms"));

    // tmpfs: ENOSPC at 64 MiB, every time (the file is removed between calls).
    let fill = evidence("abuse-fill");
    for call in 0..3 {
        let result = call_result(&fill, call);
        let bytes = result["bytes_written"].as_u64().unwrap_or(0);
        assert_eq!(result["errno"], 28, "ENOSPC expected: {result}");
        assert!((TMPFS - (4 << 20)..=TMPFS).contains(&bytes), "call {call}: {result}");
    }
    report.push(format!("fill_tmp: {}", call_result(&fill, 0)));

    // Writes outside /tmp: EROFS or EACCES everywhere.
    let writes = evidence("abuse-write");
    let result = call_result(&writes, 0);
    let dirs = result.as_array().expect("one result per directory");
    assert_eq!(dirs.len(), 5, "{result}");
    for d in dirs {
        assert_eq!(d["outcome"], "failed", "{d}");
        assert!(matches!(d["errno"].as_i64(), Some(30 | 13)), "EROFS/EACCES expected: {d}");
    }
    report.push(format!("write_outside_tmp: {result}"));

    // Flood then hang: 64 MiB went out, the engine log stayed under its cap, the runner did
    // not buffer it, and the call that never returns ended at the call deadline.
    let flood = evidence("abuse-flood");
    let flooded = call_result(&flood, 0);
    assert!(flooded["bytes_written"].as_u64().unwrap_or(0) >= 64 << 20, "{flooded}");
    let hang = call_result(&flood, 1);
    assert!(hang["transport_error"].is_string(), "the hang call did not end in an error: {hang}");
    let flood_ms = by_target["abuse-flood"].1["duration_ms"].as_f64().unwrap_or(f64::MAX) as u64;
    assert!((30_000..60_000).contains(&flood_ms), "flood/hang trial took {flood_ms} ms");
    assert!(hang["transport_error"].as_str().unwrap_or_default().contains("no answer within 30 s"), "{hang}");
    // After a timed-out request the runner sends nothing more on that session.
    let after = call_result(&flood, 2);
    assert!(after["transport_error"].as_str().unwrap_or_default().contains("session is unusable"), "{after}");
    // The 64 MiB stderr flood is counted whole and kept only as a bounded tail, collected
    // after the hung container was removed.
    let captured = &flood["target_execution"]["close"]["stderr"];
    assert!(captured["bytes"].as_u64().unwrap_or(0) >= 64 << 20, "{captured}");
    assert_eq!(captured["truncated"], true, "{captured}");
    let stderr_kept = flood["target_execution"].to_string().len();
    assert_eq!(flood_container.as_deref(), flood["target_execution"]["container"]["id"].as_str());
    let log_max = flood_log_bytes.iter().copied().max().unwrap_or(0);
    assert!(!flood_log_bytes.is_empty() && log_max > 0, "the flood container's log was never seen");
    assert!(log_max <= LOG_CAP + (256 << 10), "engine log grew to {log_max} bytes");
    assert!(peak_kib < 128 * 1024, "the runner's peak RSS was {peak_kib} KiB");
    report.push(format!(
        "flood_log: {flooded}; hang: {hang}; trial {flood_ms} ms; engine log max {log_max} B over {} samples; evidence {stderr_kept} B",
        flood_log_bytes.len()
    ));

    assert!(managed_objects(&run_id).is_empty(), "leftovers: {:?}", managed_objects(&run_id));
    eprintln!(
        "resource abuse: run {:.1} s at --jobs 4 (bound {bound:?}), runner peak RSS {} MiB",
        elapsed.as_secs_f32(),
        peak_kib / 1024
    );
    for line in report {
        eprintln!("  {line}");
    }
}
