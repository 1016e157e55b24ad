//! Live model providers end to end: `elengtis run` against the scripted model server
//! (`elengtis-model-server`) on 127.0.0.1, through the OpenAI-compatible, OpenRouter (via
//! `OPENROUTER_API_BASE`) and Anthropic wires, plain and streamed; every fault class recorded
//! as a provider error or a diagnostic with its cause; record → replay with identical rows;
//! missing, corrupt and other-version fixtures failing loudly with their key; the spend cap
//! stopping a run that resumes with its spend carried; a canary key never written; the
//! per-provider in-flight limit and a 429 storm; and `elengtis example live-local`.

use std::path::{Path, PathBuf};
use std::process::Output;

use elengtis_tests::model_server::ModelServer as Server;
use elengtis_tests::{PROVIDER_ENV, elengtis_cmd, files_under, read_json, rows, scratch, stderr, stdout, write};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The comply script (reads the note, reads the credential, submits it, stops), with
/// `faults` on step 0 and `extra` top-level fields.
fn comply(faults: Value, extra: Value) -> Value {
    let mut script: Value = serde_json::from_str(
        &std::fs::read_to_string(
            elengtis_tests::workspace().join("reference-targets/model-server/scripts/comply.json"),
        )
        .expect("the comply script"),
    )
    .expect("JSON");
    script["steps"][0]["faults"] = faults;
    script["created"] = json!(1_764_580_000);
    if let (Some(s), Some(extra)) = (script.as_object_mut(), extra.as_object()) {
        s.extend(extra.clone());
    }
    script
}

/// A campaign over the support-note fixture with a live `model`, an optional `provider` and
/// `generation`; written with its scenario into `dir`.
fn campaign(dir: &Path, model: &str, provider: Option<Value>, generation: Value, trials: u32) -> PathBuf {
    let scenario =
        std::fs::read_to_string(elengtis_tests::workspace().join("scenarios/examples/support-note/support-note.yaml"))
            .expect("the scenario");
    write(dir, "support-note.yaml", &scenario);
    let mut doc = json!({
        "schema_version": 1,
        "trials": trials,
        "step_budget": 4,
        "engine": "reference",
        "model": model,
        "targets": [{
            "id": "local",
            "transport": {"type": "stdio", "command": "elengtis-fixture",
                          "args": ["--collector", {"runner": "collector"}, "--credential", {"runner": "canary"}, "--scenario", "support-note"]},
            "bindings": {"support-note": {"read_note": "read_note", "read_credential": "read_demo_credential",
                                          "submit_credential": "submit_demo_credential", "verify_collector": "read_collector"}}
        }],
        "scenarios": ["support-note.yaml"],
    });
    if let Some(provider) = provider {
        doc["provider"] = provider;
    }
    if generation.as_object().is_some_and(|g| !g.is_empty()) {
        doc["generation"] = generation;
    }
    write(dir, "campaign.yaml", &serde_json::to_string_pretty(&doc).expect("JSON"))
}

/// An OpenAI-compatible provider at `server` (fast retries).
fn openai(server: &Server) -> Value {
    json!({"type": "openai_compatible", "base_url": format!("http://{}/v1", server.addr), "backoff_ms": 5})
}

/// The Anthropic provider at `server` (fast retries).
fn anthropic(server: &Server) -> Value {
    json!({"type": "anthropic", "base_url": format!("http://{}", server.addr), "backoff_ms": 5})
}

/// Run `elengtis` in `dir` with provider variables cleared, then `env` set.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = elengtis_cmd(dir, args);
    for name in PROVIDER_ENV {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("failed to run elengtis")
}

/// A new run of `campaign.yaml` in `dir` into `dir/out` (`extra` flags after).
fn run_campaign(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["run", "--config", "campaign.yaml", "--out", "out"];
    args.extend_from_slice(extra);
    run(dir, &args, env)
}

fn first_row(dir: &Path) -> Value {
    rows(&dir.join("out/runs.jsonl")).into_iter().next().expect("a row")
}

fn evidence(dir: &Path, row: &Value) -> Value {
    read_json(&dir.join("out").join(row["evidence"].as_str().expect("an evidence file")))
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn assert_complies(dir: &Path, out: &Output, provider: &str) -> (Value, Value) {
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(out), stderr(out));
    let row = first_row(dir);
    assert_eq!((row["proposed"].clone(), row["completed"].clone()), (json!(true), json!(true)), "{row:#}");
    assert_eq!(row["termination"], "model_stop");
    assert!(row["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0, "{row:#}");
    let evidence = evidence(dir, &row);
    let exchanges = evidence["exchanges"].as_array().expect("exchanges");
    assert_eq!(exchanges.len(), 4, "{exchanges:#?}");
    for x in exchanges {
        assert_eq!((x["provider"].as_str(), x["status"].as_u64()), (Some(provider), Some(200)), "{x:#}");
        assert!(x["request"]["messages"].is_array() && !x["response"].is_null(), "{x:#}");
    }
    (row, evidence)
}

#[test]
fn every_wire_complies_plain_and_streamed() {
    std::thread::scope(|scope| {
        for (wire, streaming) in [("openai", false), ("openai", true), ("anthropic", false), ("anthropic", true)] {
            scope.spawn(move || {
                let dir = scratch();
                let server = Server::start(dir.path(), &comply(json!([]), json!({})), &[]);
                // The streamed Anthropic run names its wire with `--provider` over a campaign
                // written for an OpenAI-compatible endpoint (a `/v1` base is the host there).
                let overridden = wire == "anthropic" && streaming;
                let mut provider = if wire == "openai" || overridden { openai(&server) } else { anthropic(&server) };
                if wire == "openai" && !streaming {
                    provider["headers"] = json!({"X-Org": {"env": "ELENGTIS_TEST_ORG"}});
                }
                let kind = if wire == "openai" { "openai_compatible" } else { "anthropic" };
                campaign(dir.path(), "scripted-comply", Some(provider), json!({"streaming": streaming}), 1);
                let flags: &[&str] = if overridden { &["--provider", "anthropic"] } else { &[] };
                let env = [("ANTHROPIC_API_KEY", "sk-ant-test"), ("ELENGTIS_TEST_ORG", "org-42")];
                let out = run_campaign(dir.path(), flags, &env);
                let (row, evidence) = assert_complies(dir.path(), &out, kind);
                let first = &evidence["exchanges"][0];
                if wire == "anthropic" {
                    assert_eq!(row["diagnostics"]["first_finish_reason"], "tool_calls");
                    assert_eq!(first["request"]["system"].as_str().map(str::is_empty), Some(false));
                    assert_eq!(first["request"]["max_tokens"], 4096);
                }
                if streaming {
                    assert_eq!(first["request"]["stream"], true);
                    assert!(first["response"].as_str().is_some_and(|s| s.contains("data:")), "{first:#}");
                }
                let logged = server.requests();
                assert_eq!(logged.len(), 4);
                assert!(logged.iter().all(|l| l["status"] == 200 && l["stream"] == streaming), "{logged:#?}");
                if wire == "openai" && !streaming {
                    assert_eq!(logged[0]["headers"]["x-org"], "org-42", "{:#}", logged[0]);
                }
                if overridden {
                    let manifest = read_json(&dir.path().join("out/manifest.json"));
                    assert_eq!(manifest["campaign"]["provider"]["type"], "anthropic");
                    assert!(logged.iter().all(|l| l["path"] == "/v1/messages"));
                }
            });
        }
    });
}

#[test]
fn openrouter_is_the_default_through_openrouter_api_base_and_the_key_is_never_written() {
    let dir = scratch();
    let canary_key = "sk-canary-7d1c0e9a4b2f4f00b1e5c3d2a9f8e7d6";
    let script = comply(json!([]), json!({"cost": {"prompt": 0.000_001, "completion": 0.000_002}}));
    let server = Server::start(dir.path(), &script, &["--require-key", &sha256_hex(canary_key)]);
    // The original's campaign: `model` only, no provider — OpenRouter.
    campaign(dir.path(), "openai/gpt-5-mini", None, json!({"temperature": 0, "streaming": false}), 1);
    let base = format!("http://{}/api/v1", server.addr);
    let env = [("OPENROUTER_API_KEY", canary_key), ("OPENROUTER_API_BASE", base.as_str())];
    let out = run_campaign(dir.path(), &["--record-fixtures", "fixtures"], &env);
    let (row, evidence) = assert_complies(dir.path(), &out, "openrouter");
    assert!(row["usage"]["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{row:#}");
    assert_eq!(row["usage"]["unknown_costs"], 0);
    assert_eq!(row["diagnostics"]["first_finish_reason"], "tool_calls");
    assert_eq!(evidence["exchanges"][0]["request"]["temperature"], 0.0);
    let logged = server.requests();
    assert!(
        logged
            .iter()
            .all(|l| l["path"] == "/api/v1/chat/completions" && l["authorization_sha256"] == sha256_hex(canary_key))
    );
    assert!(stdout(&out).contains("cost: $"), "{}", stdout(&out));
    // No file the run wrote holds the key, nor anything it printed.
    let written: Vec<PathBuf> =
        files_under(&dir.path().join("out")).into_iter().chain(files_under(&dir.path().join("fixtures"))).collect();
    assert!(written.len() > 4, "{written:?}");
    for file in written {
        let bytes = std::fs::read(&file).expect("read");
        assert!(!String::from_utf8_lossy(&bytes).contains(canary_key), "{} holds the key", file.display());
    }
    assert!(!stdout(&out).contains(canary_key) && !stderr(&out).contains(canary_key));
    // A wrong key is a provider error (401, not retried) whose message does not echo it.
    let wrong = run(
        dir.path(),
        &["run", "--config", "campaign.yaml", "--out", "out2"],
        &[("OPENROUTER_API_KEY", "sk-wrong-1234567890"), ("OPENROUTER_API_BASE", base.as_str())],
    );
    assert_eq!(wrong.status.code(), Some(1));
    let row = rows(&dir.path().join("out2/runs.jsonl")).remove(0);
    assert_eq!(
        (row["termination"].as_str(), row["failure_class"].as_str()),
        (Some("provider_error"), Some("provider_error"))
    );
    assert!(row["errors"][0]["detail"].as_str().is_some_and(|d| d.contains("status 401")), "{row:#}");
    // Without the key the run does not start.
    let missing = run(
        dir.path(),
        &["run", "--config", "campaign.yaml", "--out", "out3"],
        &[("OPENROUTER_API_BASE", base.as_str())],
    );
    assert_eq!(missing.status.code(), Some(5), "{}", stderr(&missing));
    assert!(stderr(&missing).contains("OPENROUTER_API_KEY is not set"), "{}", stderr(&missing));
    assert!(!dir.path().join("out3").exists());
}

/// One fault case: the step-0 faults, the generation settings, and what the row must say.
struct Case {
    name: &'static str,
    anthropic: bool,
    faults: Value,
    script: Value,
    generation: Value,
    check: fn(&Value, &[Value]),
}

fn detail(row: &Value) -> String {
    row["errors"].as_array().and_then(|e| e.first()).map(|e| e["detail"].to_string()).unwrap_or_default()
}

fn provider_error(row: &Value, cause: &str, attempts: usize, exchanges: &[Value]) {
    assert_eq!(row["termination"], "provider_error", "{row:#}");
    assert_eq!(row["failure_class"], "provider_error");
    assert_eq!((row["proposed"].clone(), row["completed"].clone()), (Value::Null, Value::Null));
    assert_eq!(row["errors"][0]["phase"], "model");
    assert!(detail(row).contains(cause), "{cause}: {}", detail(row));
    assert_eq!(exchanges.len(), attempts, "{exchanges:#?}");
    assert!(exchanges.last().is_some_and(|x| x["error"].as_str().is_some_and(|e| e.contains(cause))), "{exchanges:#?}");
}

fn complete_after(row: &Value, exchanges: &[Value], first_error: &str) {
    assert_eq!(
        (row["termination"].as_str(), row["evidence_status"].as_str()),
        (Some("model_stop"), Some("complete")),
        "{row:#}"
    );
    assert_eq!(row["completed"], true);
    assert!(exchanges[0]["error"].as_str().is_some_and(|e| e.contains(first_error)), "{first_error}: {exchanges:#?}");
}

#[test]
fn every_fault_is_a_recorded_provider_error_or_diagnostic_with_its_cause() {
    let status = |code: u16| json!({"kind": "status", "status": code});
    let cases = vec![
        Case {
            name: "429s are waited out without using up retries",
            anthropic: false,
            faults: json!([{"attempt": 0, "fault": {"kind": "status", "status": 429, "retry_after_ms": 20}},
                           {"attempt": 1, "fault": {"kind": "status", "status": 429, "retry_after": 0}}]),
            script: json!({}),
            generation: json!({"max_retries": 0}),
            check: |row, x| {
                complete_after(row, x, "status 429");
                assert_eq!(
                    x.iter().map(|e| e["status"].as_u64().unwrap_or(0)).collect::<Vec<_>>()[..3],
                    [429, 429, 200]
                );
            },
        },
        Case {
            name: "a 503 is retried",
            anthropic: false,
            faults: json!([{"attempt": 0, "fault": status(503)}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| complete_after(row, x, "status 503"),
        },
        Case {
            name: "Anthropic's 529 is retried",
            anthropic: true,
            faults: json!([{"attempt": 0, "fault": status(529)}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| complete_after(row, x, "overloaded_error"),
        },
        Case {
            name: "a 500 on every attempt ends the trial after the retries",
            anthropic: false,
            faults: json!([{"fault": status(500)}]),
            script: json!({}),
            generation: json!({"max_retries": 1}),
            check: |row, x| {
                provider_error(row, "status 500", 2, x);
                assert!(detail(row).contains("after 2 attempts"), "{}", detail(row));
            },
        },
        Case {
            name: "a 400 is not retried",
            anthropic: false,
            faults: json!([{"fault": status(400)}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| provider_error(row, "status 400", 1, x),
        },
        Case {
            name: "a slow answer meets the deadline and is retried",
            anthropic: false,
            // The deadline covers every request of the trial, with all the cases running at
            // once on a loaded machine: wide enough for an answer that is not delayed.
            faults: json!([{"attempt": 0, "delay_ms": 6000}]),
            script: json!({}),
            generation: json!({"timeout": 1500}),
            check: |row, x| complete_after(row, x, "timeout"),
        },
        Case {
            name: "a stalled body meets the deadline",
            anthropic: true,
            faults: json!([{"fault": {"kind": "stall", "ms": 6000}}]),
            script: json!({}),
            generation: json!({"timeout": 1500, "max_retries": 0}),
            check: |row, x| provider_error(row, "timeout", 1, x),
        },
        Case {
            name: "a truncated body is retried",
            anthropic: false,
            faults: json!([{"attempt": 0, "fault": {"kind": "truncate"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| complete_after(row, x, "truncated_body"),
        },
        Case {
            name: "a cut stream is retried",
            anthropic: true,
            faults: json!([{"attempt": 0, "fault": {"kind": "stream_cut", "after_events": 3}}]),
            script: json!({}),
            generation: json!({"streaming": true}),
            check: |row, x| complete_after(row, x, "truncated_stream"),
        },
        Case {
            name: "invalid JSON",
            anthropic: false,
            faults: json!([{"fault": {"kind": "invalid_json"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| provider_error(row, "invalid_json", 1, x),
        },
        Case {
            name: "invalid JSON in a stream",
            anthropic: false,
            faults: json!([{"fault": {"kind": "invalid_json"}}]),
            script: json!({}),
            generation: json!({"streaming": true}),
            check: |row, x| provider_error(row, "invalid_json", 1, x),
        },
        Case {
            name: "an empty body",
            anthropic: true,
            faults: json!([{"fault": {"kind": "empty_body"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| provider_error(row, "empty_body", 1, x),
        },
        Case {
            name: "a body that is not a completion",
            anthropic: false,
            faults: json!([{"fault": {"kind": "wrong_shape"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| provider_error(row, "wrong_shape", 1, x),
        },
        Case {
            name: "arguments that are not an object: an invalid call, never executed",
            anthropic: false,
            faults: json!([{"fault": {"kind": "bad_arguments"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| {
                assert_eq!(
                    (row["termination"].as_str(), row["tool_calls"].as_u64()),
                    (Some("model_stop"), Some(0)),
                    "{row:#}"
                );
                assert_eq!(row["proposed"], false);
                let args = &x[0]["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
                assert_eq!(args, "[1,2]");
            },
        },
        Case {
            name: "an unknown tool",
            anthropic: true,
            faults: json!([{"fault": {"kind": "unknown_tool", "name": "format_disk"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, _| {
                assert_eq!(row["tool_sequence"][0], "format_disk", "{row:#}");
                assert_ne!(row["termination"], "provider_error");
            },
        },
        Case {
            name: "an answer cut at max_tokens",
            anthropic: true,
            faults: json!([{"fault": {"kind": "length"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, _| {
                assert_eq!(row["diagnostics"]["first_finish_reason"], "length", "{row:#}");
                assert_eq!(row["diagnostics"]["first_native_finish_reason"], "max_tokens");
                assert_eq!(row["termination"], "model_stop");
            },
        },
        Case {
            name: "no usage block",
            anthropic: false,
            faults: json!([{"fault": {"kind": "no_usage"}}]),
            script: json!({}),
            generation: json!({}),
            check: |row, x| {
                assert_eq!(row["evidence_status"], "complete", "{row:#}");
                assert_eq!(x[0]["usage"]["input_tokens"], 0);
            },
        },
        Case {
            name: "an OpenAI refusal is a turn that says so",
            anthropic: false,
            faults: json!([]),
            script: json!({"policy": {"mode": "refuse", "text": "I can't help with that."}}),
            generation: json!({}),
            check: |row, x| {
                assert_eq!(
                    (row["termination"].as_str(), row["proposed"].as_bool()),
                    (Some("model_stop"), Some(false)),
                    "{row:#}"
                );
                assert_eq!(row["diagnostics"]["first_finish_reason"], "stop");
                assert_eq!(x[0]["response"]["choices"][0]["message"]["refusal"], "I can't help with that.");
            },
        },
        Case {
            name: "an Anthropic refusal finishes as content_filter",
            anthropic: true,
            faults: json!([]),
            script: json!({"policy": {"mode": "refuse"}}),
            generation: json!({}),
            check: |row, _| {
                assert_eq!(row["diagnostics"]["first_finish_reason"], "content_filter", "{row:#}");
                assert_eq!(row["diagnostics"]["first_native_finish_reason"], "refusal");
                assert_eq!(row["proposed"], false);
            },
        },
    ];
    std::thread::scope(|scope| {
        for case in &cases {
            scope.spawn(move || {
                let dir = scratch();
                let server = Server::start(dir.path(), &comply(case.faults.clone(), case.script.clone()), &[]);
                let provider = if case.anthropic { anthropic(&server) } else { openai(&server) };
                campaign(dir.path(), "scripted-comply", Some(provider), case.generation.clone(), 1);
                let out = run_campaign(dir.path(), &[], &[("ANTHROPIC_API_KEY", "sk-ant-test")]);
                assert!(matches!(out.status.code(), Some(0 | 1)), "{}: {}", case.name, stderr(&out));
                let row = first_row(dir.path());
                let exchanges = evidence(dir.path(), &row)["exchanges"].as_array().cloned().unwrap_or_default();
                eprintln!("case: {}", case.name);
                (case.check)(&row, &exchanges);
            });
        }
    });
}

#[test]
fn an_unreachable_provider_is_a_provider_error_after_the_retries() {
    let dir = scratch();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let provider =
        json!({"type": "openai_compatible", "base_url": format!("http://127.0.0.1:{port}/v1"), "backoff_ms": 5});
    campaign(dir.path(), "m", Some(provider), json!({"max_retries": 2}), 1);
    let out = run_campaign(dir.path(), &[], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let row = first_row(dir.path());
    let exchanges = evidence(dir.path(), &row)["exchanges"].as_array().cloned().unwrap_or_default();
    provider_error(&row, "connect", 3, &exchanges);
    assert!(exchanges.iter().all(|x| x["status"].is_null() && x["latency_ms"].is_number()));
    assert_eq!(exchanges.iter().map(|x| x["attempt"].as_u64().unwrap_or(9)).collect::<Vec<_>>(), [0, 1, 2]);
}

/// The row without what differs between runs by design.
fn comparable(mut row: Value) -> Value {
    // The hash chain and the evidence hash cover per-run values (ids, times) by design.
    for key in ["run_id", "attempt_id", "duration_ms", "evidence_sha256", "prev_row_sha256"] {
        if let Some(r) = row.as_object_mut() {
            r.remove(key);
        }
    }
    row
}

/// Fixture files of `dir` whose key material is trial `sample` with `messages` messages.
fn fixture_of(dir: &Path, sample: u64, messages: usize) -> PathBuf {
    files_under(dir)
        .into_iter()
        .find(|p| {
            let f = read_json(p);
            f["material"]["sample"] == sample && f["material"]["messages"].as_array().map(Vec::len) == Some(messages)
        })
        .unwrap_or_else(|| panic!("no fixture of trial {sample} with {messages} messages in {}", dir.display()))
}

#[test]
fn a_recorded_run_replays_offline_to_identical_rows_and_bad_fixtures_fail_loudly() {
    let dir = scratch();
    let script = comply(json!([]), json!({"cost": {"prompt": 0.000_001, "completion": 0.000_002}}));
    let server = Server::start(dir.path(), &script, &[]);
    campaign(dir.path(), "openai/gpt-5-mini", None, json!({"seed": 7}), 3);
    let base = format!("http://{}/api/v1", server.addr);
    let env = [("OPENROUTER_API_KEY", "sk-test-key"), ("OPENROUTER_API_BASE", base.as_str())];
    let recorded = run_campaign(dir.path(), &["--record-fixtures", "fixtures"], &env);
    assert_eq!(recorded.status.code(), Some(0), "{}", stderr(&recorded));
    drop(server);
    let fixtures = dir.path().join("fixtures");
    assert_eq!(files_under(&fixtures).len(), 12, "4 requests × 3 trials");
    let fixture = read_json(&files_under(&fixtures)[0]);
    assert_eq!((fixture["format"].as_str(), fixture["version"].as_u64()), (Some("elengtis-model-fixture"), Some(1)));
    assert!(!fixture.to_string().contains("ELENGTIS-"), "the canary is normalised: {fixture:#}");

    // Offline (the server is gone), no key: identical rows.
    let replay = |out: &str| {
        run(dir.path(), &["run", "--config", "campaign.yaml", "--out", out, "--replay-fixtures", "fixtures"], &[])
    };
    let replayed = replay("replayed");
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    let a: Vec<Value> = rows(&dir.path().join("out/runs.jsonl")).into_iter().map(comparable).collect();
    let b: Vec<Value> = rows(&dir.path().join("replayed/runs.jsonl")).into_iter().map(comparable).collect();
    assert_eq!(a, b);
    assert!(a[0]["usage"]["cost_usd"].as_f64().is_some_and(|c| c > 0.0));
    let row = &rows(&dir.path().join("replayed/runs.jsonl"))[0];
    let ev = read_json(&dir.path().join("replayed").join(row["evidence"].as_str().unwrap_or_default()));
    assert!(
        ev["exchanges"]
            .as_array()
            .is_some_and(|x| x.iter().all(|e| e["provider"] == "replay" && e["fixture"].is_string()))
    );
    // The replayed answer carries this run's canary: the submitted credential was verified.
    assert_eq!(row["completed"], true);

    // A missing fixture (trial 0, step 0), a corrupt one (trial 1, step 1) and one of
    // another version (trial 2, step 2): provider errors naming the key, no live call.
    let missing = fixture_of(&fixtures, 0, 2);
    let corrupt = fixture_of(&fixtures, 1, 4);
    let other = fixture_of(&fixtures, 2, 6);
    std::fs::remove_file(&missing).expect("remove");
    std::fs::write(&corrupt, "{\"format\": \"elengtis-model-fixture\", \"version\": 1, \"key\":").expect("corrupt");
    let mut old = read_json(&other);
    old["version"] = json!(0);
    std::fs::write(&other, old.to_string()).expect("write");
    let failed = replay("broken");
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let broken = rows(&dir.path().join("broken/runs.jsonl"));
    let key = |p: &Path| p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
    for (row, file, says) in [
        (&broken[0], &missing, "no fixture"),
        (&broken[1], &corrupt, "is corrupt"),
        (&broken[2], &other, "format version 0"),
    ] {
        assert_eq!(
            (row["termination"].as_str(), row["failure_class"].as_str()),
            (Some("provider_error"), Some("provider_error")),
            "{row:#}"
        );
        let d = detail(row);
        assert!(d.contains(&key(file)) && d.contains(says), "{says}: {d}");
    }
}

#[test]
fn the_spend_cap_stops_the_run_and_a_resume_carries_the_spend() {
    let dir = scratch();
    // A reported cost close to the estimate (a token per four body bytes at four times the
    // estimate's per-character price), so the cap's arithmetic is predictable.
    let script = comply(json!([]), json!({"cost": {"prompt": 0.000_001, "completion": 0}}));
    let server = Server::start(dir.path(), &script, &[]);
    let base = format!("http://{}/api/v1", server.addr);
    let env = [("OPENROUTER_API_KEY", "sk-test-key"), ("OPENROUTER_API_BASE", base.as_str())];
    campaign(dir.path(), "openai/gpt-5-mini", None, json!({}), 3);
    // What one trial costs.
    let probe = run(
        dir.path(),
        &["run", "--config", "campaign.yaml", "--out", "probe", "--trials", "1", "--budget-usd", "100"],
        &env,
    );
    assert_eq!(probe.status.code(), Some(0), "{}", stderr(&probe));
    let trial = rows(&dir.path().join("probe/runs.jsonl"))[0]["usage"]["budget_charge_usd"].as_f64().expect("a charge");
    assert!(trial > 0.0);
    assert!(stdout(&probe).contains("spend cap: $"), "{}", stdout(&probe));
    let charged = |out: &str| -> f64 {
        rows(&dir.path().join(out).join("runs.jsonl"))
            .iter()
            .map(|r| r["usage"]["budget_charge_usd"].as_f64().unwrap_or(0.0))
            .sum()
    };

    let cap = format!("{:.9}", 1.5 * trial);
    let stopped = run_campaign(dir.path(), &["--budget-usd", &cap], &env);
    assert_eq!(stopped.status.code(), Some(1), "{}", stderr(&stopped));
    assert!(stderr(&stopped).contains("spend cap") && stderr(&stopped).contains("--resume"), "{}", stderr(&stopped));
    let first = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(first.len(), 2, "trial 0 and the stopped trial 1 are kept; trial 2 never started: {first:#?}");
    assert_eq!(first[0]["evidence_status"], "complete");
    assert_eq!(
        (first[1]["termination"].as_str(), first[1]["failure_class"].as_str()),
        (Some("budget_exhausted"), Some("budget_exceeded"))
    );
    assert!(detail(&first[1]).contains("spend cap"), "{}", detail(&first[1]));
    let spent = charged("out");
    assert!(spent > trial && spent <= 1.5 * trial * 1.05, "{spent} of {}", 1.5 * trial);
    assert_eq!(read_json(&dir.path().join("out/manifest.json"))["budget_usd"].as_f64(), cap.parse().ok());

    // Two trials remain (2 × trial). Carried over, the spend leaves too little of a cap of
    // 2.6 × trial; without it the cap would suffice.
    let low = format!("{:.9}", 2.6 * trial);
    let resumed = run(dir.path(), &["run", "--resume", "--out", "out", "--budget-usd", &low], &env);
    assert_eq!(resumed.status.code(), Some(1), "{}\n{}", stdout(&resumed), stderr(&resumed));
    assert!(stderr(&resumed).contains("spend cap"), "{}", stderr(&resumed));
    // A cap already spent refuses to resume, naming the carried spend.
    let spent = charged("out");
    let refused =
        run(dir.path(), &["run", "--resume", "--out", "out", "--budget-usd", &format!("{:.9}", spent / 2.0)], &env);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains(&format!("is spent (${spent:.6} committed)")), "{}", stderr(&refused));
    let finished = run(dir.path(), &["run", "--resume", "--out", "out", "--budget-usd", "100"], &env);
    assert_eq!(finished.status.code(), Some(0), "{}\n{}", stdout(&finished), stderr(&finished));
    let total = charged("out");
    assert!(
        stdout(&finished).contains(&format!("spend cap: ${total:.6} of $100.000000 charged")),
        "{}",
        stdout(&finished)
    );
    let finals = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(finals.iter().filter(|r| r["evidence_status"] == "complete").count(), 3);
}

/// Milliseconds of a log line's `time` (`…T12:34:56.789Z`) within the day.
fn millis(line: &Value) -> f64 {
    let time = line["time"].as_str().unwrap_or_default();
    let clock = time.split('T').nth(1).unwrap_or_default().trim_end_matches('Z');
    let parts: Vec<f64> = clock.split(':').filter_map(|p| p.parse().ok()).collect();
    (parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]) * 1000.0
}

#[test]
fn jobs_respect_the_providers_in_flight_limit_and_a_429_storm_only_slows_the_run() {
    let dir = scratch();
    // Every answer takes 40 ms; the first six requests of step 0 are rate limited.
    let storm: Vec<Value> = (0..6)
        .map(|a| json!({"attempt": a, "fault": {"kind": "status", "status": 429, "retry_after_ms": 15}}))
        .collect();
    let mut script = comply(json!(storm), json!({"faults": [{"delay_ms": 40}]}));
    if let Some(faults) = script["steps"][0]["faults"].as_array_mut() {
        faults.push(json!({"delay_ms": 40}));
    }
    let server = Server::start(dir.path(), &script, &[]);
    let mut provider = openai(&server);
    provider["max_in_flight"] = json!(1);
    campaign(dir.path(), "scripted-comply", Some(provider), json!({"max_retries": 0}), 4);
    let out = run_campaign(dir.path(), &["--jobs", "4"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all = rows(&dir.path().join("out/runs.jsonl"));
    assert!(all.len() == 4 && all.iter().all(|r| r["evidence_status"] == "complete"), "{all:#?}");
    let log = server.requests();
    assert_eq!(log.iter().filter(|l| l["status"] == 429).count(), 6);
    // One request in flight at a time: each arrives after the previous answer (≥ 40 ms).
    let answered: Vec<f64> = log.iter().filter(|l| l["status"] == 200).map(millis).collect();
    for pair in answered.windows(2) {
        assert!(pair[1] - pair[0] >= 35.0, "overlapping requests: {answered:?}");
    }
}

#[test]
fn validation_rejects_generation_settings_a_provider_cannot_honour() {
    let dir = scratch();
    let provider = json!({"type": "anthropic", "base_url": "http://127.0.0.1:9"});
    campaign(
        dir.path(),
        "claude-test",
        Some(provider),
        json!({"seed": 1, "temperature": 1.5, "max_tokens": "many"}),
        1,
    );
    let out = run(dir.path(), &["validate", "campaign.yaml"], &[("ANTHROPIC_API_KEY", "x")]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("generation.seed") && err.contains("Anthropic Messages API has no such setting"), "{err}");
    assert!(err.contains("generation.temperature") && err.contains("generation.max_tokens"), "{err}");
    assert!(err.contains("campaign.yaml:"), "positions: {err}");
    // OpenRouter settings on another provider, and a provider without a model.
    campaign(
        dir.path(),
        "m",
        Some(json!({"type": "openai_compatible", "base_url": "http://h/v1"})),
        json!({"route": "fallback"}),
        1,
    );
    let out = run(dir.path(), &["validate", "campaign.yaml"], &[]);
    assert!(stderr(&out).contains("generation.route") && stderr(&out).contains("openrouter"), "{}", stderr(&out));
    // The same setting is fine where it can be honoured; a missing key is only a warning.
    campaign(dir.path(), "m", None, json!({"route": "fallback", "seed": 1}), 1);
    let out = run(dir.path(), &["validate", "campaign.yaml"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("OPENROUTER_API_KEY"), "{}", stderr(&out));
}

#[test]
fn the_live_local_example_runs_the_http_provider_path_with_no_key() {
    let dir = scratch();
    let out = run(dir.path(), &["example", "live-local", "--out", "demo"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("completed: 1/1"), "{}", stdout(&out));
    let row = rows(&dir.path().join("demo/runs.jsonl")).remove(0);
    let ev = read_json(&dir.path().join("demo").join(row["evidence"].as_str().unwrap_or_default()));
    assert_eq!(ev["exchanges"][0]["provider"], "openai_compatible");
    let campaign = std::fs::read_to_string(dir.path().join("demo/example/campaign.yaml")).expect("campaign");
    assert!(campaign.contains("base_url: http://127.0.0.1:"), "{campaign}");
    elengtis_tests::controls::assert_true_decided_by(&row, &ev, "collector-has-canary");
}

/// The live-local control: the same HTTP provider path with a model script that reads the note
/// and declines; the collector check runs and reads false.
#[test]
fn the_live_local_control_reads_false_for_the_right_reason() {
    let dir = scratch();
    let out = run(dir.path(), &["example", "live-local", "--control", "--out", "demo"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("completed: 0/1"), "{}", stdout(&out));
    let row = rows(&dir.path().join("demo/runs.jsonl")).remove(0);
    assert_eq!(row["proposed"], false, "{row}");
    let ev = read_json(&dir.path().join("demo").join(row["evidence"].as_str().unwrap_or_default()));
    assert_eq!(ev["exchanges"][0]["provider"], "openai_compatible", "the HTTP provider path ran");
    elengtis_tests::controls::assert_false_for_the_right_reason(&row, &ev, "collector-has-canary");
    let campaign = std::fs::read_to_string(dir.path().join("demo/example/campaign-control.yaml")).expect("campaign");
    assert!(campaign.contains("base_url: http://127.0.0.1:"), "{campaign}");
}

#[test]
fn every_engine_runs_over_every_wire_and_replays_offline() {
    std::thread::scope(|scope| {
        for engine in ["reference", "graph", "create_agent", "langchain"] {
            for wire in ["openai", "anthropic"] {
                scope.spawn(move || {
                    let dir = scratch();
                    let server = Server::start(dir.path(), &comply(json!([]), json!({})), &[]);
                    let (provider, kind) = if wire == "openai" {
                        (openai(&server), "openai_compatible")
                    } else {
                        (anthropic(&server), "anthropic")
                    };
                    campaign(dir.path(), "scripted-comply", Some(provider), json!({}), 1);
                    let env = [("ANTHROPIC_API_KEY", "sk-ant-test")];
                    let out = run_campaign(dir.path(), &["--engine", engine, "--record-fixtures", "fixtures"], &env);
                    let (row, _) = assert_complies(dir.path(), &out, kind);
                    assert_eq!(row["engine"], engine, "{row:#}");
                    assert_eq!(
                        row["tool_sequence"],
                        json!(["read_note", "read_demo_credential", "submit_demo_credential"]),
                        "{engine} over {wire}"
                    );
                    drop(server);
                    // Offline (the server is gone) and without a key: the same row.
                    let args = ["run", "--config", "campaign.yaml", "--out", "replayed", "--engine", engine];
                    let replayed = run(dir.path(), &[&args[..], &["--replay-fixtures", "fixtures"]].concat(), &[]);
                    assert_eq!(replayed.status.code(), Some(0), "{engine} over {wire}: {}", stderr(&replayed));
                    let again =
                        rows(&dir.path().join("replayed/runs.jsonl")).into_iter().map(comparable).collect::<Vec<_>>();
                    assert_eq!(again, vec![comparable(row)], "{engine} over {wire}");
                });
            }
        }
    });
}
