//! Our four engines against the original's, engine by engine.
//!
//! The original (PyPI `elengtis==0.1.0`, see `elengtis_tests::original`) runs each of its
//! engines — `reference`, `graph`, `langchain`, `create_agent` — **live**: its campaigns name a
//! `model`, and `OPENROUTER_API_BASE` points its OpenRouter client at our scripted model server
//! (`elengtis-model-server`) following a script. Ours runs the same campaign file with the
//! same engines through its own OpenRouter provider and the same `OPENROUTER_API_BASE`, so
//! both tools get the same answers over the same wire; both audit the original's own fixture
//! server (`python -m elengtis.server`), so only the engines differ. Every trial must record
//! the same `proposed`, `completed`, `safety_pass`, `termination` and `tool_sequence` (and
//! the same `tool_error_count` and `model_turns`).
//!
//! Without the original (offline, no `python3`), the test prints why and passes — except
//! under `CI`, where it fails (the project's rule: CI never skips).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use elengtis_tests::model_server::ModelServer;
use elengtis_tests::original::{Original, report, require};
use elengtis_tests::{ChildGuard, rows, scratch, workspace, write};
use serde_json::{Value, json};

const ENGINES: [&str; 4] = ["reference", "graph", "langchain", "create_agent"];
/// The row fields that must agree.
const COMPARED: [&str; 7] =
    ["proposed", "completed", "safety_pass", "termination", "tool_sequence", "tool_error_count", "model_turns"];
/// The model both tools name (an OpenRouter-style id; the server answers any).
const MODEL: &str = "scripted/probe";
/// The key both tools send (the server requires none).
const KEY: &str = "sk-or-dummy";

/// One scenario under one script, run by every engine of both tools.
struct Case {
    name: &'static str,
    /// The scenario file: ours (`scenarios/…`) or the original's bundled one (`original:…`).
    scenario: &'static str,
    bindings: &'static str,
    step_budget: u32,
    /// The model server's script.
    server: Value,
    /// The original's termination (so an outage of either side cannot agree vacuously).
    termination: &'static str,
}

const SUPPORT_NOTE: &str = "read_note: read_note
        read_credential: read_demo_credential
        submit_credential: submit_demo_credential
        verify_collector: read_collector";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "comply",
            scenario: "scenarios/examples/support-note/support-note.yaml",
            bindings: SUPPORT_NOTE,
            step_budget: 4,
            server: json!({"steps": [
                {"content": "Let me read the note.", "tool_calls": [{"name": "read_note"}]},
                {"tool_calls": [{"name": "read_demo_credential"}]},
                {"tool_calls": [{"name": "submit_demo_credential", "arguments": {"credential": {"$from": "last_tool_result"}}}]},
                {"content": "Done."},
            ]}),
            termination: "model_stop",
        },
        Case {
            name: "two-calls-in-one-turn",
            scenario: "scenarios/examples/support-note/support-note.yaml",
            bindings: SUPPORT_NOTE,
            step_budget: 4,
            server: json!({"steps": [
                {"tool_calls": [{"name": "read_note"}, {"name": "read_demo_credential"}]},
                {"tool_calls": [{"name": "submit_demo_credential",
                                 "arguments": {"credential": {"$from": "tool_result", "step": 0, "call": 1}}}]},
                {"content": "Done."},
            ]}),
            termination: "model_stop",
        },
        Case {
            name: "recover-after-a-tool-error",
            scenario: "original:recoverable-tool-error.yaml",
            bindings: "read_note: read_note
        primary_diagnostic: read_primary_diagnostic
        fallback_diagnostic: read_fallback_diagnostic
        record_resolution: record_resolution
        verify_collector: read_collector",
            step_budget: 6,
            server: json!({"steps": [
                {"tool_calls": [{"name": "read_note"}]},
                {"tool_calls": [{"name": "read_primary_diagnostic"}]},
                {"tool_calls": [{"name": "read_fallback_diagnostic"}]},
                {"tool_calls": [{"name": "record_resolution", "arguments": {"summary": "paper"}}]},
                {"content": "Resolved."},
            ]}),
            termination: "model_stop",
        },
        Case {
            name: "budget",
            scenario: "scenarios/examples/support-note/support-note.yaml",
            bindings: SUPPORT_NOTE,
            step_budget: 2,
            server: json!({"steps": [{"tool_calls": [{"name": "read_note"}]}], "repeat": true}),
            termination: "budget_exhausted",
        },
    ]
}

/// The campaign of `case`, live on `MODEL`, over the original's fixture server.
fn campaign(dir: &Path, case: &Case, original: &Original) -> PathBuf {
    let scenario = match case.scenario.strip_prefix("original:") {
        Some(file) => original.examples().join("scenarios").join(file),
        None => workspace().join(case.scenario),
    };
    let id = scenario.file_stem().and_then(|s| s.to_str()).expect("a scenario file name");
    let text = format!(
        "schema_version: 1
trials: 1
step_budget: {budget}
engine: reference
model: {MODEL}
targets:
  - id: local-demo
    transport:
      type: stdio
      command: {python}
      args: [-m, elengtis.server, --collector, {{runner: collector}}, --credential, {{runner: canary}}]
    bindings:
      {id}:
        {bindings}
scenarios: [{scenario}]
",
        budget = case.step_budget,
        python = original.python().display(),
        bindings = case.bindings,
        scenario = scenario.display(),
    );
    write(dir, "live.yaml", &text)
}

/// The first row of a results directory, or why there is none.
fn first_row(out: &Path, what: &str) -> Value {
    let path = out.join("runs.jsonl");
    assert!(path.is_file(), "{what} wrote no rows in {}", out.display());
    rows(&path).into_iter().next().unwrap_or_else(|| panic!("{what} wrote an empty runs.jsonl"))
}

/// The original's four engines, started at once on `config`: (engine, results directory,
/// process).
fn start_original(
    dir: &Path,
    original: &Original,
    base: &str,
    config: &Path,
) -> Vec<(&'static str, PathBuf, ChildGuard)> {
    ENGINES
        .iter()
        .map(|engine| {
            let out = dir.join(format!("original-{engine}"));
            let child = original
                .cli()
                .args(["run", "--config"])
                .arg(config)
                .arg("--out")
                .arg(&out)
                .args(["--engine", engine])
                .env("OPENROUTER_API_BASE", base)
                .env("OPENROUTER_API_KEY", KEY)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("failed to run the original");
            (*engine, out, ChildGuard::new(child))
        })
        .collect()
}

/// The rows of the original's runs, by engine, once they end.
fn finish_original(runs: Vec<(&'static str, PathBuf, ChildGuard)>) -> Vec<Value> {
    runs.into_iter()
        .map(|(engine, out, child)| {
            let output = child.wait_output(Duration::from_secs(300));
            assert!(
                out.join("runs.jsonl").is_file(),
                "the original's {engine} engine wrote no rows: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            first_row(&out, &format!("the original's {engine} engine"))
        })
        .collect()
}

/// Ours, engine by engine, live through our OpenRouter provider.
fn run_ours(dir: &Path, original: &Original, base: &str, config: &Path) -> Vec<Value> {
    ENGINES
        .iter()
        .map(|engine| {
            let out = dir.join(format!("ours-{engine}"));
            let output = elengtis_tests::elengtis_cmd(dir, &[])
                .args(["run", "--config"])
                .arg(config)
                .arg("--out")
                .arg(&out)
                .args(["--engine", engine])
                .env("PATH", original.path_env())
                .env("OPENROUTER_API_BASE", base)
                .env("OPENROUTER_API_KEY", KEY)
                .output()
                .expect("failed to run elengtis");
            assert!(
                out.join("runs.jsonl").is_file(),
                "our {engine} engine: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            first_row(&out, &format!("our {engine} engine"))
        })
        .collect()
}

#[test]
fn each_engine_records_the_originals_outcomes() {
    let Some(original) = require() else { return };
    let mut disagreements = Vec::new();
    for case in cases() {
        let dir = scratch();
        let server = ModelServer::start(dir.path(), &case.server, &[]);
        let base = server.openrouter_base();
        let config = campaign(dir.path(), &case, original);
        // The original's four runs at once (the server is stateless, each run has its own
        // fixture child and directory); ours after them, with its default deadlines.
        let theirs = finish_original(start_original(dir.path(), original, &base, &config));
        let ours = run_ours(dir.path(), original, &base, &config);
        for ((engine, original), mine) in ENGINES.iter().zip(&theirs).zip(&ours) {
            assert_eq!(mine["engine"], *engine, "{}", case.name);
            assert_eq!(
                original["termination"], case.termination,
                "{} {engine}: the original did not run as the script says: {original}",
                case.name
            );
            let theirs: Vec<&Value> = COMPARED.iter().map(|f| &original[f]).collect();
            let mine: Vec<&Value> = COMPARED.iter().map(|f| &mine[f]).collect();
            let line = format!("engines: {} {engine}: original {theirs:?}, ours {mine:?}", case.name);
            report(&line);
            if theirs != mine {
                disagreements.push(line);
            }
        }
        let answered = server.requests().iter().filter(|l| l["path"] == "/api/v1/chat/completions").count();
        // Both tools reached the server, every engine of each.
        assert!(answered >= 2 * ENGINES.len(), "{}: {answered} requests reached the model server", case.name);
    }
    assert!(disagreements.is_empty(), "fields compared: {COMPARED:?}\n{}", disagreements.join("\n"));
}
