//! The live comparison's analysis: ours and the original's `analyze` over one shared set of
//! blocked results, with the recommendation rule applied (`--practical-margin-pp N
//! --conformance-passed`) and without it.
//!
//! The results are written here in the original's own format (its `manifest.json` and
//! `runs.jsonl` rows, one directory per cell as its pilot runner writes them): 3 models × 4
//! engines × 4 scenario families × 3 blocks, each a one-trial run, with outcomes drawn from a
//! fixed hash so that the rule has something to decide — graph ahead in some families and
//! behind in none, safety failures in the safety families, tool errors with and without
//! recovery, empty and repeated tool sequences, retried and never-completed trials. A second
//! set adds one graph safety failure, which must turn a `graph` recommendation into a
//! `role_split`. Both tools must agree on every cell's trials, complete and incomplete
//! counts, `recovery_succeeded` (successes, known, unknown, Wilson interval),
//! `tool_error_count` and `tool_sequences`, and on the whole `recommendation` object.

use std::path::{Path, PathBuf};

use elengtis_tests::original::{self, Original};
use elengtis_tests::{elengtis_cmd, read_json, scratch, workspace};
use serde_json::{Value, json};

const MODELS: [&str; 3] = ["m-one", "m-two", "m-three"];
const ENGINES: [&str; 4] = ["reference", "graph", "langchain", "create_agent"];
const FAMILIES: [&str; 4] = ["support-note", "tool-error", "injection-resistance", "stateful-branch"];
const BLOCKS: u64 = 3;

/// A fixed hash of a cell, for its outcomes (FNV-1a 64).
fn draw(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.join("/").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^ (hash >> 29)
}

/// Chance in percent that a trial safely completes: graph clearly ahead in support-note and
/// tool-error, level elsewhere, with a per-model spread.
fn success_percent(model: &str, engine: &str, family: &str) -> u64 {
    let base = match (engine, family) {
        ("graph", "support-note" | "tool-error") => 85,
        ("create_agent", "support-note" | "tool-error") => 20,
        (_, "injection-resistance") => 55,
        _ => 45,
    };
    base + (draw(&[model]) % 10)
}

/// One row in the original's format.
fn row(run_id: &str, model: &str, engine: &str, family: &str, attempt: usize, complete: bool, value: u64) -> Value {
    let safe = value % 100 < success_percent(model, engine, family);
    let safety_pass =
        if family == "injection-resistance" && engine != "graph" { !value.is_multiple_of(7) } else { true };
    let completed = safe || value.is_multiple_of(5);
    let tool_errors = if family == "tool-error" { 1 + value % 2 } else { 0 };
    let sequence: Vec<&str> = match value % 4 {
        0 => vec![],
        1 => vec!["read_note"],
        _ => vec!["read_note", "read_demo_credential", "submit_demo_credential"],
    };
    let trial_id = format!("local-synthetic--{family}--0");
    let mut row = json!({
        "schema_version": 6, "run_id": run_id, "trial_id": trial_id,
        "attempt_id": format!("{run_id}-{attempt}"), "target": "local-synthetic", "scenario": family,
        "trial_index": 0, "engine": engine,
        "proposed": completed, "completed": completed, "safety_pass": safety_pass,
        "safe_completed": completed && safety_pass, "model_id": model, "model": format!("vendor/{model}"),
        "model_turns": 3, "tool_calls": sequence.len(),
        "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120, "cost_usd": 0.001,
                  "budget_charge_usd": 0.001, "unknown_costs": 0},
        "tool_sequence": sequence, "tool_error_count": tool_errors,
        "recovery_succeeded": if tool_errors > 0 { json!(completed) } else { Value::Null },
        "diagnostics": {"first_finish_reason": "tool_calls", "first_native_finish_reason": "tool_calls",
                        "invalid_tool_calls": 0},
        "proposed_not_completed": false, "steps_to_propose": 1, "termination": "model_stop", "errors": [],
        "failure_class": null, "evidence": format!("{trial_id}.json"), "evidence_status": "complete",
    });
    if !complete {
        for field in [
            "proposed",
            "completed",
            "safety_pass",
            "safe_completed",
            "recovery_succeeded",
            "proposed_not_completed",
            "steps_to_propose",
        ] {
            row[field] = Value::Null;
        }
        row["termination"] = json!("provider_error");
        row["errors"] = json!([{"kind": "provider_error", "step": 0, "detail": "HTTP 503"}]);
        row["failure_class"] = json!("provider_error");
        row["evidence_status"] = json!("incomplete");
        row["evidence"] = json!(format!("{trial_id}.retry-{attempt}.json"));
    }
    row
}

/// One cell's results directory in the original's format.
fn cell(root: &Path, model: &str, engine: &str, family: &str, block: u64, order: u64, extra: Option<Value>) -> PathBuf {
    let name = format!("b{block:03}-o{order:02}-{model}-{engine}-{family}");
    let dir = root.join(&name);
    std::fs::create_dir_all(&dir).expect("a cell directory");
    let run_id = format!("run-{name}");
    // The original's whole manifest (a directory is read as the original's only with every
    // field it writes), with this cell's labels.
    let fixture = std::fs::read_to_string(workspace().join("tests/fixtures/original-0.1.0/example/manifest.json"))
        .expect("the original's example manifest");
    let mut manifest: Value = serde_json::from_str(&fixture).expect("the original's example manifest is JSON");
    manifest["run_id"] = json!(run_id);
    manifest["campaign"]["engine"] = json!(engine);
    manifest["campaign"]["model"] = json!(format!("vendor/{model}"));
    manifest["campaign"]["model_id"] = json!(model);
    manifest["experiment"] =
        json!({"id": "differential", "block": block, "order": order, "model_id": model, "generation": {}});
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest.json");
    let value = draw(&[model, engine, family, &block.to_string()]);
    let mut rows = Vec::new();
    match value % 11 {
        // A retried trial: a provider error, then a complete attempt.
        0 => {
            rows.push(row(&run_id, model, engine, family, 0, false, value));
            rows.push(row(&run_id, model, engine, family, 1, true, value / 11));
        }
        // A trial that never completed.
        1 => rows.push(row(&run_id, model, engine, family, 0, false, value)),
        _ => rows.push(row(&run_id, model, engine, family, 0, true, value / 11)),
    }
    if let Some(extra) = extra {
        rows = vec![extra];
        rows[0]["run_id"] = json!(run_id);
    }
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(dir.join("runs.jsonl"), text).expect("runs.jsonl");
    // Every evidence file a row names is present, as the original writes them (its analysis
    // reads the rows only; ours checks that each named file exists).
    for r in &rows {
        if let Some(name) = r["evidence"].as_str() {
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("the evidence directory");
            }
            std::fs::write(path, json!({"run_id": run_id, "trial_id": r["trial_id"]}).to_string()).expect("evidence");
        }
    }
    dir
}

fn results(root: &Path, graph_safety_failure: bool) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for block in 0..BLOCKS {
        let mut order = 0;
        for model in MODELS {
            for engine in ENGINES {
                for family in FAMILIES {
                    dirs.push(cell(root, model, engine, family, block, order, None));
                    order += 1;
                }
            }
        }
    }
    if graph_safety_failure {
        let mut failed = row("x", "m-two", "graph", "stateful-branch", 0, true, 3);
        failed["safety_pass"] = json!(false);
        failed["safe_completed"] = json!(false);
        dirs.push(cell(root, "m-two", "graph", "stateful-branch", BLOCKS, 0, Some(failed)));
    }
    dirs
}

fn analyze(original: Option<&Original>, inputs: &[PathBuf], out: &Path, rule: &[&str]) -> Value {
    let mut args: Vec<String> = vec!["analyze".into()];
    for input in inputs {
        args.extend(["--input".into(), input.display().to_string()]);
    }
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(rule.iter().map(|s| (*s).to_owned()));
    let output = match original {
        Some(original) => original.cli().args(&args).output(),
        None => elengtis_cmd(Path::new("/"), &args.iter().map(String::as_str).collect::<Vec<_>>()).output(),
    }
    .expect("failed to run analyze");
    assert!(
        output.status.success(),
        "{} analyze failed: {}{}",
        if original.is_some() { "the original's" } else { "our" },
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    read_json(&out.join("summary.json"))
}

/// Numbers equal within 1e-9, everything else exactly; objects regardless of key order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, value)| y.get(key).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}

/// The fields compared per cell, keyed by (model, engine, scenario).
fn cells(summary: &Value) -> Vec<(String, Value)> {
    let mut cells: Vec<(String, Value)> = summary["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| {
            let key = format!("{}/{}/{}", cell["model_id"], cell["engine"], cell["scenario"]);
            let recovery = &cell["recovery_succeeded"];
            let fields = json!({
                "trials": cell["trials"], "complete_trials": cell["complete_trials"],
                "incomplete_trials": cell["incomplete_trials"],
                "recovery_succeeded": {"successes": recovery["successes"], "known": recovery["known"],
                                       "unknown": recovery["unknown"], "wilson_95": recovery["wilson_95"]},
                "tool_error_count": cell["tool_error_count"], "tool_sequences": cell["tool_sequences"],
            });
            (key, fields)
        })
        .collect();
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    cells
}

fn agree(inputs: &[PathBuf], dir: &Path, rule: &[&str], name: &str, original: &Original) -> Value {
    let theirs = analyze(Some(original), inputs, &dir.join(format!("{name}-original")), rule);
    let ours = analyze(None, inputs, &dir.join(format!("{name}-elengtis")), rule);
    let (their_cells, our_cells) = (cells(&theirs), cells(&ours));
    assert_eq!(
        their_cells.iter().map(|c| &c.0).collect::<Vec<_>>(),
        our_cells.iter().map(|c| &c.0).collect::<Vec<_>>(),
        "{name}: the same cells"
    );
    for ((key, their), (_, our)) in their_cells.iter().zip(&our_cells) {
        assert!(same(their, our), "{name}: cell {key} differs\noriginal: {their:#}\nelengtis: {our:#}");
    }
    assert!(
        same(&theirs["recommendation"], &ours["recommendation"]),
        "{name}: the recommendation differs\noriginal: {:#}\nelengtis: {:#}",
        theirs["recommendation"],
        ours["recommendation"]
    );
    original::report(&format!(
        "recommendation conformance ({name}): {} cells and the recommendation agree; status `{}`",
        our_cells.len(),
        ours["recommendation"]["status"].as_str().unwrap_or("?")
    ));
    ours["recommendation"].clone()
}

#[test]
fn the_originals_analyze_and_ours_agree_on_cells_and_the_recommendation() {
    let Some(original) = original::require() else { return };
    let dir = scratch();
    let clean = results(&dir.path().join("clean"), false);
    let margin = ["--practical-margin-pp", "10", "--conformance-passed"];
    // The data are built so that the rule has a decision to make, in each direction.
    let recommended = agree(&clean, dir.path(), &margin, "clean-margin-10", original);
    assert_eq!(recommended["status"], "graph", "{recommended:#}");
    assert!(recommended["safety_failures"]["create_agent"].as_u64().is_some_and(|n| n > 0), "{recommended:#}");
    let wide = agree(
        &clean,
        dir.path(),
        &["--practical-margin-pp", "95", "--conformance-passed"],
        "clean-margin-95",
        original,
    );
    assert_eq!(wide["status"], "role_split", "{wide:#}");
    let gated = agree(&clean, dir.path(), &[], "clean-defaults", original);
    assert_eq!(gated["status"], "conformance_required", "{gated:#}");
    let unsafe_graph = results(&dir.path().join("graph-unsafe"), true);
    let split = agree(&unsafe_graph, dir.path(), &margin, "graph-safety-failure", original);
    assert_eq!(split["status"], "role_split", "{split:#}");
    assert_eq!(split["engines"]["graph"]["safety_ok"], false, "{split:#}");
}
