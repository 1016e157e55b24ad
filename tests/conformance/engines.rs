//! Our four engines against the original's, engine by engine.
//!
//! The original (PyPI `elengtis==0.1.0`, installed into `<target>/conformance-venv`, reused
//! when present) runs each of its engines — `reference`, `graph`, `langchain`, `create_agent`
//! — **live**: its campaigns name a `model`, and `OPENROUTER_API_BASE` points its OpenRouter
//! client at our scripted model server (`elengtis-model-server`) following a script. We run
//! the same scenarios with the same engines, and every trial must record the same
//! `proposed`, `completed`, `safety_pass`, `termination` and `tool_sequence` (and the same
//! `tool_error_count` and `model_turns`). Both tools audit the original's own fixture server
//! (`python -m elengtis.server`), so only the engines differ.
//!
//! Until an OpenRouter provider is on this branch, ours is driven by the deterministic
//! scripted model following the same script ([`OURS_LIVE`] switches to the live path: the
//! same campaign, `model` and server as the original's).
//!
//! Without the original (offline, no `python3`), the test prints why and passes — except
//! under `CI`, where it fails (the project's rule: CI never skips).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use elengtis::run::{self, RunOptions};
use elengtis::toolhost::mcp::Limits;
use elengtis_core::format::campaign::LoopKind;
use elengtis_core::load::load_campaign;
use elengtis_core::validate::LoadOptions;
use elengtis_tests::{ChildGuard, bin_dir, rows, scratch, workspace, write};
use serde_json::{Value, json};

/// **The switch.** `false`: ours follows each case's `script:` with the scripted model (no
/// live provider yet). `true` once the OpenRouter provider lands: ours runs the original's
/// campaign as is (`model: scripted/probe`) through the `elengtis` binary, against the same
/// model server, with the same `OPENROUTER_API_BASE` and `OPENROUTER_API_KEY`.
const OURS_LIVE: bool = false;

const VERSION: &str = "0.1.0";
const ENGINES: [(&str, LoopKind); 4] = [
    ("reference", LoopKind::Reference),
    ("graph", LoopKind::Graph),
    ("langchain", LoopKind::Langchain),
    ("create_agent", LoopKind::CreateAgent),
];
/// The row fields that must agree.
const COMPARED: [&str; 7] =
    ["proposed", "completed", "safety_pass", "termination", "tool_sequence", "tool_error_count", "model_turns"];
const MODEL: &str = "scripted/probe";

/// One scenario under one script, run by every engine of both tools.
struct Case {
    name: &'static str,
    /// The scenario file: ours (`scenarios/…`) or the original's bundled one (`original:…`).
    scenario: &'static str,
    bindings: &'static str,
    step_budget: u32,
    /// The model server's script.
    server: Value,
    /// The same turns as our `script:`.
    script: &'static str,
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
            script: "{policy: comply}",
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
            script: "
  steps:
    - calls: [{tool: read_note}, {id: cred, tool: read_demo_credential}]
    - calls: [{tool: submit_demo_credential, arguments: {credential: {output: cred}}}]
    - content: Done.",
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
            script: "
  steps:
    - calls: [{tool: read_note}]
    - calls: [{tool: read_primary_diagnostic}]
    - calls: [{tool: read_fallback_diagnostic}]
    - calls: [{tool: record_resolution, arguments: {summary: paper}}]
    - content: Resolved.",
            termination: "model_stop",
        },
        Case {
            name: "budget",
            scenario: "scenarios/examples/support-note/support-note.yaml",
            bindings: SUPPORT_NOTE,
            step_budget: 2,
            server: json!({"steps": [{"tool_calls": [{"name": "read_note"}]}], "repeat": true}),
            script: "{policy: budget}",
            termination: "budget_exhausted",
        },
    ]
}

/// `<target>`, the cargo target directory of this test binary.
fn target_root() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors().nth(3).map(Path::to_path_buf).unwrap_or_else(|| workspace().join("target"))
}

fn installed_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('elengtis'))"])
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn install(venv: &Path) -> Result<(), String> {
    let python = std::env::var("ELENGTIS_PYTHON").unwrap_or_else(|_| "python3".into());
    if venv.exists() {
        std::fs::remove_dir_all(venv).map_err(|e| format!("cannot remove the stale {}: {e}", venv.display()))?;
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!("{what} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)))
    };
    run(Command::new(&python).args(["-m", "venv"]).arg(venv), &format!("`{python} -m venv`"))?;
    let spec = format!("elengtis=={VERSION}");
    let args = ["install", "--quiet", "--disable-pip-version-check", "--ignore-requires-python", &spec];
    run(Command::new(venv.join("bin/pip")).args(args), &format!("`pip install {spec}`"))
}

/// The original's virtual environment (shared with the conformance suite's, same place and
/// version), made on first use; `None` with the reason printed when it cannot be made,
/// a failure under `CI`.
fn original() -> Option<&'static Path> {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let venv = target_root().join("conformance-venv");
        let python = venv.join("bin/python");
        if installed_version(&python).as_deref() != Some(VERSION) {
            install(&venv)?;
        }
        match installed_version(&python) {
            Some(v) if v == VERSION => Ok(venv),
            other => Err(format!("the environment at {} holds elengtis {other:?}", venv.display())),
        }
    });
    match ready {
        Ok(venv) => Some(venv),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("CI is set and the original elengtis {VERSION} cannot be installed: {reason}")
        }
        Err(reason) => {
            eprintln!("SKIPPED: the original elengtis {VERSION} cannot be installed here: {reason}");
            None
        }
    }
}

/// Our model server, built once per test process.
fn model_server_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .current_dir(workspace())
                .args(["build", "--quiet", "-p", "elengtis-model-server"])
                .status()
                .expect("failed to run cargo build for the model server");
            assert!(status.success(), "cargo build of elengtis-model-server failed");
            bin_dir().join("elengtis-model-server")
        })
        .clone()
}

/// A running model server following `script`; its base URL for OpenRouter clients.
fn start_model_server(dir: &Path, script: &Value) -> (ChildGuard, String) {
    let script_path = write(dir, "server-script.json", &script.to_string());
    let child = Command::new(model_server_bin())
        .arg("--script")
        .arg(&script_path)
        .arg("--log")
        .arg(dir.join("requests.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("failed to start the model server");
    let mut guard = ChildGuard::new(child);
    let stdout = guard.child().stdout.take().expect("the server's stdout");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("the server's first line");
    let listening: Value = serde_json::from_str(&line).expect("the server announces its address");
    let address = listening["listening"].as_str().expect("an address");
    (guard, format!("http://{address}/api/v1"))
}

/// A campaign for `case` over the original's fixture server: `model` for a live run, or
/// `script` for our scripted one.
fn campaign(dir: &Path, name: &str, case: &Case, venv: &Path, model: Option<&str>, script: Option<&str>) -> PathBuf {
    let scenario = match case.scenario.strip_prefix("original:") {
        Some(file) => {
            let lib = std::fs::read_dir(venv.join("lib")).expect("the environment's lib").flatten().next();
            let lib = lib.expect("a pythonX.Y directory").path();
            lib.join("site-packages/elengtis/examples/scenarios").join(file)
        }
        None => workspace().join(case.scenario),
    };
    let id = scenario.file_stem().and_then(|s| s.to_str()).expect("a scenario file name");
    let model = model.map(|m| format!("model: {m}\n")).unwrap_or_default();
    let script = script.map(|s| format!("script: {s}\n")).unwrap_or_default();
    let settings = model + &script;
    let text = format!(
        "schema_version: 1
trials: 1
step_budget: {budget}
engine: reference
{settings}targets:
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
        python = venv.join("bin/python").display(),
        bindings = case.bindings,
        scenario = scenario.display(),
    );
    write(dir, name, &text)
}

/// The first row of a results directory, or why there is none.
fn first_row(out: &Path, what: &str) -> Value {
    let path = out.join("runs.jsonl");
    assert!(path.is_file(), "{what} wrote no rows in {}", out.display());
    rows(&path).into_iter().next().unwrap_or_else(|| panic!("{what} wrote an empty runs.jsonl"))
}

/// The original's four engines started, live, on `config`: (engine, its results directory,
/// the process).
fn start_original(dir: &Path, venv: &Path, base: &str, config: &Path) -> Vec<(&'static str, PathBuf, ChildGuard)> {
    let mut path = vec![venv.join("bin")];
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    ENGINES
        .iter()
        .map(|(engine, _)| {
            let out = dir.join(format!("original-{engine}"));
            let child = Command::new(venv.join("bin/elengtis"))
                .args(["run", "--config"])
                .arg(config)
                .arg("--out")
                .arg(&out)
                .args(["--engine", engine])
                .env("PATH", std::env::join_paths(&path).unwrap_or_default())
                .env("OPENROUTER_API_BASE", base)
                .env("OPENROUTER_API_KEY", "sk-or-dummy")
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

/// Ours, engine by engine.
fn run_ours(dir: &Path, case: &Case, venv: &Path, base: &str, live_config: &Path) -> Vec<Value> {
    let mut rows = Vec::new();
    for (engine, kind) in ENGINES {
        let out = dir.join(format!("ours-{engine}"));
        if OURS_LIVE {
            let output = elengtis_tests::elengtis_cmd(dir, &[])
                .args(["run", "--config"])
                .arg(live_config)
                .arg("--out")
                .arg(&out)
                .args(["--engine", engine])
                .env("OPENROUTER_API_BASE", base)
                .env("OPENROUTER_API_KEY", "sk-or-dummy")
                .output()
                .expect("failed to run elengtis");
            assert!(
                out.join("runs.jsonl").is_file(),
                "our {engine} engine: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        } else {
            let config = campaign(dir, &format!("ours-{engine}.yaml"), case, venv, None, Some(case.script));
            let mut bundle = load_campaign(&config, &LoadOptions::default()).expect("our campaign loads");
            // The engine is set after validation: validation still refuses `script:` with
            // an engine other than `reference` (core/src/validate.rs), which the original
            // never did — its scripted policies drive every engine.
            bundle.campaign.value.engine = kind;
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
            // The fixture is a Python program starting beside the original's four runs:
            // a generous start-up deadline.
            let limits = Limits { connect: Duration::from_secs(60), ..Limits::default() };
            let options = RunOptions { limits, ..RunOptions::default() };
            runtime.block_on(run::start(&bundle, &out, false, &options)).expect("our run starts");
        }
        rows.push(first_row(&out, &format!("our {engine} engine")));
    }
    rows
}

#[test]
fn each_engine_records_the_originals_outcomes() {
    let Some(venv) = original() else { return };
    let mut disagreements = Vec::new();
    for case in cases() {
        // The original's four runs at once (the server is stateless, each run has its own
        // fixture child and directory), ours meanwhile: on two cores more would only queue.
        let dir = scratch();
        let (_server, base) = start_model_server(dir.path(), &case.server);
        let live = campaign(dir.path(), "live.yaml", &case, venv, Some(MODEL), None);
        let original = start_original(dir.path(), venv, &base, &live);
        // The live path starts our binary with its default deadlines: after the original's
        // runs, not beside them.
        let (ours, theirs) = if OURS_LIVE {
            let theirs = finish_original(original);
            (run_ours(dir.path(), &case, venv, &base, &live), theirs)
        } else {
            let ours = run_ours(dir.path(), &case, venv, &base, &live);
            (ours, finish_original(original))
        };
        for (((engine, _), original), mine) in ENGINES.iter().zip(&theirs).zip(&ours) {
            assert_eq!(mine["engine"], *engine, "{}", case.name);
            assert_eq!(
                original["termination"], case.termination,
                "{} {engine}: the original did not run as the script says: {original}",
                case.name
            );
            let theirs: Vec<&Value> = COMPARED.iter().map(|f| &original[f]).collect();
            let mine: Vec<&Value> = COMPARED.iter().map(|f| &mine[f]).collect();
            let line = format!("{} {engine}: original {theirs:?}, ours {mine:?}", case.name);
            eprintln!("{line}");
            if theirs != mine {
                disagreements.push(line);
            }
        }
        let requests = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap_or_default();
        assert!(
            requests.lines().any(|l| l.contains("\"path\":\"/api/v1/chat/completions\"")),
            "{}: the original never reached the model server",
            case.name
        );
    }
    assert!(disagreements.is_empty(), "fields compared: {COMPARED:?}\n{}", disagreements.join("\n"));
}
