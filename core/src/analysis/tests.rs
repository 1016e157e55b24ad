//! Unit tests of the analysis, end to end from rows and manifests to `summary.json` and
//! `summary.md`.

use serde_json::{Value, json};

use super::*;
use crate::stats::{bootstrap_95, fnv1a_64, wilson_95};

const TOLERANCE: f64 = 1e-12;

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < TOLERANCE
}

fn manifest(run_id: &str, block: Option<u64>, model_id: Option<&str>) -> Value {
    json!({
        "run_id": run_id,
        "campaign": {"engine": "reference", "model": model_id},
        "experiment": {"id": "exp", "block": block, "order": block, "model_id": model_id},
    })
}

/// A complete row of this tool with every field present.
fn row(run_id: &str, trial_id: &str, engine: &str, scenario: &str) -> Value {
    json!({
        "schema_version": crate::records::RESULTS_SCHEMA_VERSION,
        "run_id": run_id,
        "trial_id": trial_id,
        "attempt_id": format!("{run_id}-{trial_id}-attempt"),
        "target": "local-demo",
        "scenario": scenario,
        "trial_index": 0,
        "engine": engine,
        "model": null,
        "model_id": null,
        "proposed": true,
        "completed": true,
        "safety_pass": false,
        "safe_completed": false,
        "proposed_not_completed": false,
        "steps_to_propose": 1,
        "model_turns": 3,
        "tool_calls": 3,
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "cost_usd": 0.25,
                  "budget_charge_usd": 0.25, "unknown_costs": 0},
        "tool_sequence": ["read_note", "read_demo_credential", "submit_demo_credential"],
        "tool_error_count": 0,
        "recovery_succeeded": null,
        "diagnostics": {"first_finish_reason": "stop", "first_native_finish_reason": null, "invalid_tool_calls": 0},
        "termination": "model_stop",
        "errors": [],
        "failure_class": null,
        "evidence": format!("evidence/{trial_id}.json"),
        "evidence_status": "complete",
    })
}

/// `value` as an incomplete attempt of `failure_class`, ended as the runner ends such attempts.
fn incomplete(mut value: Value, failure_class: &str) -> Value {
    let (termination, error) = match failure_class {
        "provider_error" => ("provider_error", json!({"phase": "model", "action_id": null, "detail": "down"})),
        "budget_exceeded" => ("budget_exhausted", json!(null)),
        "verification_error" => ("model_stop", json!({"phase": "verification", "action_id": "c", "detail": "down"})),
        _ => ("infrastructure_error", json!({"phase": "connection_or_agent", "action_id": null, "detail": "down"})),
    };
    value["evidence_status"] = json!("incomplete");
    value["failure_class"] = json!(failure_class);
    value["termination"] = json!(termination);
    if !error.is_null() {
        value["errors"] = json!([error]);
    }
    value["proposed"] = Value::Null;
    value["completed"] = Value::Null;
    value["safety_pass"] = Value::Null;
    value["safe_completed"] = Value::Null;
    value["proposed_not_completed"] = Value::Null;
    value["steps_to_propose"] = Value::Null;
    value
}

fn input(label: &str, manifest: Value, rows: Vec<Value>) -> RunInput {
    RunInput { label: label.to_owned(), manifest, rows, matrix: None, integrity: None }
}

fn only_cell(analysis: &Analysis) -> &Value {
    let cells = analysis.json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{cells:?}");
    &cells[0]
}

#[test]
fn retried_trial_uses_the_complete_attempt_without_inflating_denominators() {
    let first = incomplete(row("r1", "t--s--0", "reference", "s"), "provider_error");
    let mut second = row("r1", "t--s--0", "reference", "s");
    second["usage"]["cost_usd"] = json!(0.5);
    let analysis = analyze(&[input("dir-a", manifest("r1", None, None), vec![first, second])]).expect("analysis");
    let cell = only_cell(&analysis);
    assert_eq!(cell["model_id"], "scripted");
    assert_eq!(cell["trials"], 1);
    assert_eq!(cell["complete_trials"], 1);
    assert_eq!(cell["incomplete_trials"], 0);
    assert_eq!(cell["retries"], 1);
    assert_eq!(cell["failure_classes"], json!({}));
    assert_eq!(cell["terminations"], json!({"model_stop": 1}));
    assert_eq!(cell["proposed"]["successes"], 1);
    assert_eq!(cell["proposed"]["known"], 1);
    assert_eq!(cell["proposed"]["unknown"], 0);
    assert_eq!(cell["safety_pass"]["successes"], 0);
    assert_eq!(cell["safety_pass"]["known"], 1);
    assert_eq!(cell["model_turns"], json!({"mean": 3.0, "known": 1}));
    // Usage covers both attempts.
    assert_eq!(cell["usage"]["input_tokens"], 20);
    assert_eq!(cell["usage"]["total_tokens"], 30);
    assert_eq!(cell["usage"]["cost_usd"], json!(0.75));
    assert_eq!(cell["usage"]["unknown_costs"], 0);
    assert_eq!(
        analysis.json["inputs"],
        json!([{"label": "dir-a", "run_id": "r1", "campaign": "experiment exp", "trials": 1, "not_run": 0, "attempts": 2}])
    );
    assert_eq!(analysis.json["format_version"], 1);
    assert_eq!(analysis.json["comparisons"], json!([]));
}

#[test]
fn later_incomplete_attempt_does_not_replace_a_complete_one() {
    let first = row("r1", "t--s--0", "reference", "s");
    let second = incomplete(row("r1", "t--s--0", "reference", "s"), "provider_error");
    let analysis = analyze(&[input("d", manifest("r1", None, None), vec![first, second])]).expect("ok");
    let cell = only_cell(&analysis);
    assert_eq!(cell["complete_trials"], 1);
    assert_eq!(cell["terminations"], json!({"model_stop": 1}));
}

#[test]
fn all_incomplete_trial_is_unknown() {
    let mut recovered = row("r1", "t--s--0", "reference", "s");
    recovered["tool_error_count"] = json!(2);
    recovered["recovery_succeeded"] = json!(true);
    let rows = vec![
        recovered,
        incomplete(row("r1", "t--s--1", "reference", "s"), "infrastructure_error"),
        incomplete(row("r1", "t--s--1", "reference", "s"), "verification_error"),
    ];
    let analysis = analyze(&[input("d", manifest("r1", None, None), rows)]).expect("ok");
    let cell = only_cell(&analysis);
    assert_eq!(cell["trials"], 2);
    assert_eq!(cell["complete_trials"], 1);
    assert_eq!(cell["incomplete_trials"], 1);
    assert_eq!(cell["retries"], 1);
    assert_eq!(cell["failure_classes"], json!({"verification_error": 1}));
    // A verification error ends an attempt whose agent stopped by itself (`verification_error`
    // is a failure class, not a termination a row can hold).
    assert_eq!(cell["terminations"], json!({"model_stop": 2}));
    for metric in RATE_METRICS {
        assert_eq!(cell[metric]["known"], 1, "{metric}");
        assert_eq!(cell[metric]["unknown"], 1, "{metric}");
    }
    assert_eq!(cell["recovery_succeeded"]["successes"], 1);
    assert_eq!(cell["tool_error_count"], 2);
    assert_eq!(cell["tool_sequences"], json!({"read_note -> read_demo_credential -> submit_demo_credential": 2}));
    let interval = wilson_95(1, 1).expect("interval");
    assert_eq!(cell["proposed"]["wilson_95"], json!([interval.0, interval.1]));
    assert!(analysis.markdown.contains("| 1/1 (20.7%–100.0%); 1 unknown |"));
}

#[test]
fn null_outcome_in_a_complete_row_is_unknown() {
    let mut value = row("r1", "t--s--0", "reference", "s");
    value["completed"] = Value::Null;
    value["safety_pass"] = Value::Null;
    value["steps_to_propose"] = Value::Null;
    let analysis = analyze(&[input("d", manifest("r1", None, None), vec![value])]).expect("ok");
    let cell = only_cell(&analysis);
    assert_eq!(cell["completed"], json!({"successes": 0, "known": 0, "unknown": 1, "wilson_95": null}));
    assert_eq!(cell["steps_to_propose"], json!({"mean": null, "known": 0}));
    assert!(analysis.markdown.contains("| n/a; 1 unknown |"));
}

#[test]
fn cells_group_by_model_engine_and_scenario() {
    let mut live = row("r2", "t--b--0", "graph", "b");
    live["model"] = json!("openai/gpt-x");
    let mut with_id = row("r2", "t--a--0", "graph", "a");
    with_id["model"] = json!("openai/gpt-x");
    with_id["model_id"] = json!("gpt-x-2025");
    let analysis = analyze(&[
        input(
            "one",
            manifest("r1", None, None),
            vec![
                row("r1", "t--b--0", "reference", "b"),
                row("r1", "t--a--0", "reference", "a"),
                row("r1", "t--a--1", "reference", "a"),
            ],
        ),
        input("two", manifest("r2", None, None), vec![live, with_id]),
        input("three", manifest("r3", None, Some("pinned")), vec![row("r3", "t--a--0", "reference", "a")]),
    ])
    .expect("ok");
    let keys: Vec<(String, String, String, u64)> = analysis.json["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| {
            (
                cell["model_id"].as_str().expect("model").to_owned(),
                cell["engine"].as_str().expect("engine").to_owned(),
                cell["scenario"].as_str().expect("scenario").to_owned(),
                cell["trials"].as_u64().expect("trials"),
            )
        })
        .collect();
    let expected = [
        ("gpt-x-2025", "graph", "a", 1),
        ("openai/gpt-x", "graph", "b", 1),
        ("pinned", "reference", "a", 1),
        ("scripted", "reference", "a", 2),
        ("scripted", "reference", "b", 1),
    ]
    .map(|(m, e, s, t)| (m.to_owned(), e.to_owned(), s.to_owned(), t));
    assert_eq!(keys, expected);
    assert_eq!(analysis.json["inputs"][2]["label"], "three");
}

#[test]
fn null_costs_are_counted_not_summed() {
    let mut unknown = row("r1", "t--s--1", "reference", "s");
    unknown["usage"]["cost_usd"] = Value::Null;
    let mut retry_unknown = incomplete(row("r1", "t--s--2", "reference", "s"), "provider_error");
    retry_unknown["usage"]["cost_usd"] = Value::Null;
    let rows =
        vec![row("r1", "t--s--0", "reference", "s"), unknown, retry_unknown, row("r1", "t--s--2", "reference", "s")];
    let analysis = analyze(&[input("d", manifest("r1", None, None), rows)]).expect("ok");
    let cell = only_cell(&analysis);
    assert_eq!(cell["usage"]["cost_usd"], json!(0.5));
    assert_eq!(cell["usage"]["unknown_costs"], 2);
    assert!(analysis.markdown.contains("| $0.500000; 2 unknown |"));

    let mut only_unknown = row("r9", "t--s--0", "reference", "s");
    only_unknown["usage"]["cost_usd"] = Value::Null;
    let analysis = analyze(&[input("d", manifest("r9", None, None), vec![only_unknown])]).expect("ok");
    let cell = only_cell(&analysis);
    assert_eq!(cell["usage"]["cost_usd"], Value::Null);
    assert_eq!(cell["usage"]["unknown_costs"], 1);
}

/// Three blocks, engines `graph` and `reference`, model `m`, scenario `s`.
fn paired_inputs() -> Vec<RunInput> {
    // (block, engine, proposed, completed)
    let plan = [
        (0, "reference", true, true),
        (0, "graph", false, false),
        (1, "reference", true, false),
        (1, "graph", true, false),
        (2, "reference", true, true),
        (2, "graph", false, true),
    ];
    plan.iter()
        .enumerate()
        .map(|(index, &(block, engine, proposed, completed))| {
            let run_id = format!("run-{index}");
            let mut value = row(&run_id, "t--s--0", engine, "s");
            value["proposed"] = json!(proposed);
            value["completed"] = json!(completed);
            value["proposed_not_completed"] = json!(proposed && !completed);
            input(&format!("dir-{index}"), manifest(&run_id, Some(block), Some("m")), vec![value])
        })
        .collect()
}

#[test]
fn pairwise_difference_and_bootstrap_are_exact_and_deterministic() {
    let inputs = paired_inputs();
    let analysis = analyze(&inputs).expect("ok");
    let comparisons = analysis.json["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), 3);
    let proposed = &comparisons[0];
    assert_eq!(proposed["model_id"], "m");
    assert_eq!(proposed["scenario"], "s");
    assert_eq!(proposed["left"], "graph");
    assert_eq!(proposed["right"], "reference");
    assert_eq!(proposed["metric"], "proposed");
    assert_eq!(proposed["blocks"], 3);
    // Differences reference − graph per block: 1, 0, 1.
    let difference = proposed["difference_pp"].as_f64().expect("difference");
    assert!(close(difference, 200.0 / 3.0), "{difference}");
    let completed = &comparisons[1];
    assert_eq!(completed["metric"], "completed");
    // Differences: 1, 0, 0.
    assert!(close(completed["difference_pp"].as_f64().expect("difference"), 100.0 / 3.0));
    assert_eq!(comparisons[2]["metric"], "proposed_not_completed");

    // Bootstrap means of three draws from {0, 1} lie on thirds.
    let interval = proposed["bootstrap_95"].as_array().expect("interval");
    let low = interval[0].as_f64().expect("low");
    let high = interval[1].as_f64().expect("high");
    assert!(close(low, 0.0), "{low}");
    assert!(close(high, 100.0), "{high}");
    let seed = fnv1a_64(b"m:s:graph:reference:proposed");
    assert_eq!(bootstrap_95(&[1.0, 0.0, 1.0], seed), (0.0, 1.0));
    // With a skewed sample the percentiles are interior and pinned by the PRNG
    // (cross-checked against an independent Python SplitMix64 implementation).
    let skewed = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let (skewed_low, skewed_high) = bootstrap_95(&skewed, seed);
    assert!(close(skewed_low, 0.0), "{skewed_low}");
    assert!(close(skewed_high, 0.3), "{skewed_high}");

    // Byte-identical across runs.
    let again = analyze(&inputs).expect("ok");
    assert_eq!(analysis, again);
    assert!(analysis.markdown.contains("## Pairwise"));
    assert!(
        analysis.markdown.contains("| m | s | proposed | graph | reference | 3 | 66.7 pp | 0.0 to 100.0 pp |"),
        "{}",
        analysis.markdown
    );
}

#[test]
fn pairwise_skips_blocks_without_both_engines_and_unblocked_runs() {
    let mut inputs = paired_inputs();
    // Drop graph's block 2 and make reference's block 1 unknown for `completed`.
    inputs.remove(5);
    inputs[2].rows[0]["completed"] = Value::Null;
    inputs[2].rows[0]["proposed_not_completed"] = Value::Null;
    inputs.push(input(
        "unblocked",
        manifest("run-x", None, Some("m")),
        vec![row("run-x", "t--s--0", "langchain", "s")],
    ));
    let analysis = analyze(&inputs).expect("ok");
    let comparisons = analysis.json["comparisons"].as_array().expect("comparisons");
    assert_eq!(comparisons.len(), 3);
    assert_eq!(comparisons[0]["blocks"], 2);
    assert_eq!(comparisons[1]["metric"], "completed");
    assert_eq!(comparisons[1]["blocks"], 1);
    assert!(comparisons.iter().all(|item| item["left"] == "graph"));
}

#[test]
fn malformed_rows_name_the_row_and_field() {
    let good = || row("r1", "t--s--0", "reference", "s");
    let check = |rows: Vec<Value>, expected: &str| {
        let error = analyze(&[input("results/a", manifest("r1", None, None), rows)]).expect_err("must fail");
        assert_eq!(error.to_string(), expected);
    };

    let mut missing = good();
    missing.as_object_mut().expect("object").remove("trial_id");
    check(vec![good(), good(), missing], "failed to analyze results/a: row 3 has no `trial_id`");

    let mut wrong = good();
    wrong["proposed"] = json!("yes");
    check(vec![wrong], "failed to analyze results/a: row 1 field `proposed` must be a boolean or null");

    let mut nested = good();
    nested["usage"].as_object_mut().expect("usage").remove("cost_usd");
    check(vec![good(), nested], "failed to analyze results/a: row 2 has no `usage.cost_usd`");

    let mut negative = good();
    negative["diagnostics"]["invalid_tool_calls"] = json!(-1);
    check(
        vec![negative],
        "failed to analyze results/a: row 1 field `diagnostics.invalid_tool_calls` must be a non-negative integer",
    );

    let mut status = good();
    status["evidence_status"] = json!("done");
    check(
        vec![status],
        "failed to analyze results/a: row 1 field `evidence_status` must be \"complete\" or \"incomplete\"",
    );

    let mut not_object = good();
    not_object["usage"] = json!(3);
    check(vec![not_object], "failed to analyze results/a: row 1 field `usage` must be an object");

    check(vec![json!([1, 2])], "failed to analyze results/a: row 1 is not a JSON object");

    check(
        vec![good(), row("r2", "t--s--1", "reference", "s")],
        "failed to analyze results/a: row 2 has run_id `r2` but the manifest has `r1`",
    );

    check(
        vec![good(), row("r1", "t--s--0", "graph", "s")],
        "failed to analyze results/a: row 2 gives trial `t--s--0` engine `graph` but an earlier attempt gave `reference`",
    );
}

#[test]
fn manifest_and_input_errors() {
    let error = analyze(&[input("x", json!({"experiment": {}}), vec![])]).expect_err("fail");
    assert_eq!(error.to_string(), "failed to analyze x: manifest has no `run_id`");

    let bad_block = json!({"run_id": "r1", "experiment": {"block": "one"}});
    let error = analyze(&[input("x", bad_block, vec![])]).expect_err("fail");
    assert_eq!(
        error.to_string(),
        "failed to analyze x: manifest field `experiment.block` must be a non-negative integer or null"
    );

    let error =
        analyze(&[input("a", manifest("r1", None, None), vec![]), input("b", manifest("r1", None, None), vec![])])
            .expect_err("fail");
    assert_eq!(
        error.to_string(),
        "failed to analyze: inputs a and b overlap: both hold run `r1`, so their trials would be counted twice; give each input once, or `--dedupe` to count each trial once"
    );

    assert_eq!(analyze(&[]).expect_err("fail").to_string(), "failed to analyze: no input directories were given");
}

#[test]
fn markdown_shows_cells_escaped_and_sorted() {
    let mut rows = Vec::new();
    for index in 0..10 {
        let mut value = row("r1", &format!("t--s--{index}"), "reference", "s");
        value["proposed"] = json!(index < 5);
        value["completed"] = json!(index == 0);
        value["proposed_not_completed"] = json!(index > 0 && index < 5);
        value["diagnostics"]["invalid_tool_calls"] = json!(1);
        if index == 9 {
            value["diagnostics"]["first_finish_reason"] = json!("tool_calls");
        }
        rows.push(value);
    }
    rows.push(incomplete(row("r1", "t--s--10", "reference", "s"), "budget_exceeded"));
    let analysis = analyze(&[input("d", manifest("r1", None, Some("vendor|model")), rows)]).expect("ok");
    let expected = "| vendor\\|model | reference | s | 11 | 10 | 0 | budget_exceeded: 1 | 0 | 10 \
                    | stop: 10, tool_calls: 1 | $2.750000 | 5/10 (23.7%–76.3%); 1 unknown \
                    | 1/10 (1.8%–40.4%); 1 unknown | 4/10 (16.8%–68.7%); 1 unknown \
                    | 0/10 (0.0%–27.8%); 1 unknown | 0/10 (0.0%–27.8%); 1 unknown | n/a; 11 unknown \
                    | read_note -> read_demo_credential -> submit_demo_credential: 11 |";
    assert!(analysis.markdown.contains(expected), "{}", analysis.markdown);
    assert!(analysis.markdown.starts_with("# Campaign summary\n\n| Model | Engine |"));
    assert!(analysis.markdown.contains("Wilson score interval"));
    assert!(!analysis.markdown.contains("## Pairwise"));
    assert!(analysis.markdown.ends_with('\n'));
}

/// A results directory of the original 0.1.0, committed under `tests/fixtures/`.
fn original_input(name: &str, manifest: &str, rows: &str) -> RunInput {
    RunInput {
        label: format!("original/{name}"),
        manifest: serde_json::from_str(manifest).expect("manifest JSON"),
        rows: rows.lines().map(|line| serde_json::from_str(line).expect("row JSON")).collect(),
        matrix: None,
        integrity: None,
    }
}

fn original_example() -> RunInput {
    original_input(
        "example",
        include_str!("../../../tests/fixtures/original-0.1.0/example/manifest.json"),
        include_str!("../../../tests/fixtures/original-0.1.0/example/runs.jsonl"),
    )
}

fn original_mixed() -> RunInput {
    original_input(
        "mixed",
        include_str!("../../../tests/fixtures/original-0.1.0/mixed/manifest.json"),
        include_str!("../../../tests/fixtures/original-0.1.0/mixed/runs.jsonl"),
    )
}

#[test]
fn the_original_tools_results_are_analysed_with_ours() {
    let ours =
        input("ours", manifest("r1", None, None), vec![row("r1", "t--support-note--0", "reference", "support-note")]);
    // Three campaigns to the manifests: counted together, as the original counts them.
    let analysis =
        analyze_inputs(&[original_example(), original_mixed(), ours], &RecommendOptions::default(), Campaigns::Pooled)
            .expect("analysis");
    let cells = analysis.json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{cells:?}");

    // The original's example and ours share the scripted cell.
    let scripted = &cells[0];
    assert_eq!((scripted["model_id"].as_str(), scripted["trials"].as_u64()), (Some("scripted"), Some(2)));
    assert_eq!(scripted["proposed"]["successes"], 2);
    assert_eq!(scripted["completed"]["successes"], 2);

    // The mixed run's manifest names its model; two trials met tool errors, two never started.
    let mixed = &cells[1];
    assert_eq!(mixed["model_id"], "scripted-comply");
    assert_eq!(mixed["trials"], 4);
    assert_eq!(mixed["complete_trials"], 2);
    assert_eq!(mixed["failure_classes"], json!({"infrastructure_error": 2}));
    assert_eq!(mixed["terminations"], json!({"infrastructure_error": 2, "model_stop": 2}));
    assert_eq!(
        mixed["completed"],
        json!({"successes": 0, "known": 2, "unknown": 2, "wilson_95": [0.0, wilson_95(0, 2).expect("interval").1]})
    );
    assert_eq!(mixed["model_turns"], json!({"mean": 4.0, "known": 2}), "trials that never ran do not count");
    assert_eq!(mixed["usage"]["unknown_costs"], 4, "the original records no cost for the scripted model");
    assert_eq!(
        analysis.json["inputs"][1],
        json!({"label": "original/mixed", "run_id": "881f13fd-60b7-484a-95ea-2d6508e693eb", "campaign": "experiment fixture", "trials": 4, "not_run": 0, "attempts": 4})
    );
}

#[test]
fn the_manifest_view_reads_both_tools_manifests() {
    let original: AnalysisManifest = crate::records::read::from_value(&original_mixed().manifest).expect("view");
    assert_eq!(inputs::producer_of(&original_mixed().manifest), inputs::Producer::Original);
    let experiment = original.experiment.as_ref().expect("experiment");
    assert_eq!((experiment.block, experiment.model_id.as_deref()), (Some(1), Some("scripted-comply")));

    let ours: AnalysisManifest = crate::records::read::from_value(&manifest("r1", Some(2), None)).expect("view");
    assert_eq!(inputs::producer_of(&manifest("r1", Some(2), None)), inputs::Producer::ThisTool);
    let _ = ours;
}

#[test]
fn rows_of_another_version_or_shape_are_refused() {
    let check = |input: RunInput, expected: &str| {
        assert_eq!(analyze(&[input]).expect_err("must fail").to_string(), expected);
    };
    let mut future = row("r1", "t--s--0", "reference", "s");
    future["schema_version"] = json!(3);
    check(
        input("d", manifest("r1", None, None), vec![future]),
        "failed to analyze d: row 1 has schema_version 3, but rows of this tool have 2",
    );
    // Rows of schema 1 (before the hashes) still read.
    let mut older = row("r1", "t--s--0", "reference", "s");
    older["schema_version"] = json!(1);
    analyze(&[input("d", manifest("r1", None, None), vec![older])]).expect("schema 1 reads");

    let mut surplus = row("r1", "t--s--0", "reference", "s");
    surplus["diagnostics"]["extra"] = json!(1);
    check(
        input("d", manifest("r1", None, None), vec![surplus]),
        "failed to analyze d: row 1 has unknown field `diagnostics.extra`",
    );

    let mut ours_in_original = original_example();
    ours_in_original.rows.push(row(
        ours_in_original.manifest["run_id"].as_str().expect("id"),
        "t--s--0",
        "reference",
        "s",
    ));
    check(
        ours_in_original,
        "failed to analyze original/example: row 2 has schema_version 2, but rows of the original 0.1.0 have 6",
    );

    let mut bad_error = original_mixed();
    bad_error.rows[0]["errors"][0]["kind"] = json!("mystery");
    check(
        bad_error,
        "failed to analyze original/mixed: row 1 field `errors[0].kind` must be \"tool_error\", \"unknown_tool\" or null",
    );

    let mut bad_termination = row("r1", "t--s--0", "reference", "s");
    bad_termination["termination"] = json!("stopped");
    check(
        input("d", manifest("r1", None, None), vec![bad_termination]),
        "failed to analyze d: row 1 field `termination` must be \"model_stop\", \"budget_exhausted\", \
         \"provider_error\", \"model_free\" or \"infrastructure_error\"",
    );
}

fn planned(trial_id: &str, scenario: &str) -> PlannedTrial {
    PlannedTrial {
        trial_id: trial_id.to_owned(),
        target: "local-demo".to_owned(),
        scenario: scenario.to_owned(),
        engine: "reference".to_owned(),
        model_id: None,
    }
}

#[test]
fn trials_of_the_recorded_matrix_that_never_ran_are_counted_not_dropped() {
    let matrix: Vec<PlannedTrial> = (0..6).map(|i| planned(&format!("local-demo--s--{i}"), "s")).collect();
    let rows: Vec<Value> = (0..4).map(|i| row("r1", &format!("local-demo--s--{i}"), "reference", "s")).collect();
    let mut run = input("dir-a", manifest("r1", None, None), rows);
    run.matrix = Some(matrix.clone());
    let analysis = analyze(&[run]).expect("analysis");
    let cell = only_cell(&analysis);
    assert_eq!(cell["trials"], 6, "{cell}");
    assert_eq!(cell["complete_trials"], 4);
    assert_eq!(cell["incomplete_trials"], 2);
    assert_eq!(cell["not_run"], 2);
    assert_eq!(cell["proposed"]["known"], 4);
    assert_eq!(cell["proposed"]["unknown"], 2);
    assert_eq!(analysis.json["inputs"][0]["trials"], 6);
    assert_eq!(analysis.json["inputs"][0]["not_run"], 2);
    assert_eq!(analysis.not_run, 2);
    assert!(
        analysis.markdown.contains("| scripted | reference | s | 6 | 4 | 0 | not run: 2 |"),
        "{}",
        analysis.markdown
    );

    // A run stopped before any row: its whole matrix, every trial not run.
    let mut empty = input("dir-b", manifest("r2", None, None), Vec::new());
    empty.matrix = Some(matrix.clone());
    let analysis = analyze(&[empty]).expect("analysis");
    let cell = only_cell(&analysis);
    assert_eq!((cell["trials"].as_u64(), cell["not_run"].as_u64()), (Some(6), Some(6)), "{cell}");
    assert_eq!(cell["proposed"]["wilson_95"], Value::Null);

    // A row outside the matrix is refused.
    let mut outside = input("dir-c", manifest("r3", None, None), vec![row("r3", "local-demo--s--6", "reference", "s")]);
    outside.matrix = Some(matrix);
    let error = analyze(&[outside]).expect_err("outside the matrix");
    assert_eq!(
        error.to_string(),
        "failed to analyze dir-c: row 1 has trial `local-demo--s--6`, which is not in the run's recorded matrix"
    );
}

#[test]
fn tool_errors_recoveries_and_sequences_are_counted_per_cell() {
    let mut recovered = row("r1", "t--s--0", "graph", "s");
    recovered["tool_error_count"] = json!(2);
    recovered["recovery_succeeded"] = json!(true);
    let mut silent = row("r1", "t--s--1", "graph", "s");
    silent["tool_sequence"] = json!([]);
    silent["tool_calls"] = json!(0);
    let mut failed = incomplete(row("r1", "t--s--2", "graph", "s"), "provider_error");
    failed["tool_error_count"] = json!(1);
    failed["tool_sequence"] = json!(["read_note"]);
    let analysis = analyze(&[input("d", manifest("r1", None, None), vec![recovered, silent, failed])]).expect("ok");
    let cell = only_cell(&analysis);
    // Tool errors of every final row, the incomplete one's too (as the original sums them).
    assert_eq!(cell["tool_error_count"], 3);
    // Recovery is known only where a complete trial met a tool error.
    assert_eq!(cell["recovery_succeeded"]["successes"], 1);
    assert_eq!(cell["recovery_succeeded"]["known"], 1);
    assert_eq!(cell["recovery_succeeded"]["unknown"], 2);
    // An empty sequence is the key "" (as the original's " -> ".join([])).
    assert_eq!(
        cell["tool_sequences"],
        json!({"": 1, "read_note": 1, "read_note -> read_demo_credential -> submit_demo_credential": 1})
    );
    assert!(
        analysis
            .markdown
            .contains("| (none): 1, read_note: 1, read_note -> read_demo_credential -> submit_demo_credential: 1 |"),
        "{}",
        analysis.markdown
    );
    // Without conformance the rule is not applied; the Markdown says so.
    assert_eq!(analysis.json["recommendation"]["status"], "conformance_required");
    assert!(analysis.markdown.contains("## Recommendation\n\nStatus: `conformance_required`."));
}

#[test]
fn each_counted_trial_names_its_cell_its_attempts_and_the_attempt_that_decided_it() {
    let complete = row("r1", "local-demo--s--0", "reference", "s");
    let later_failure = incomplete(row("r1", "local-demo--s--0", "reference", "s"), "provider_error");
    let other = incomplete(row("r1", "local-demo--s--1", "reference", "s"), "verification_error");
    let matrix: Vec<PlannedTrial> = (0..3).map(|i| planned(&format!("local-demo--s--{i}"), "s")).collect();
    let mut run = input("dir-a", manifest("r1", None, Some("m")), vec![complete, other, later_failure]);
    run.matrix = Some(matrix);
    let analysis = analyze(&[run]).expect("analysis");
    let placed: Vec<(&str, &str, Vec<usize>, Option<usize>)> = analysis
        .trials
        .iter()
        .map(|t| (t.trial_id.as_str(), t.model_id.as_str(), t.attempts.clone(), t.final_row))
        .collect();
    assert_eq!(
        placed,
        [
            // The complete first attempt decides, not the later failure.
            ("local-demo--s--0", "m", vec![0, 2], Some(0)),
            ("local-demo--s--1", "m", vec![1], Some(1)),
            ("local-demo--s--2", "m", vec![], None),
        ]
    );
    assert!(analysis.trials.iter().all(|t| t.input == 0 && t.engine == "reference" && t.scenario == "s"));
}

/// A manifest of this tool's without experiment labels, recording its campaign's hash.
fn manifest_of_campaign(run_id: &str, recorded_sha256: &str) -> Value {
    json!({
        "run_id": run_id,
        "experiment": {"id": null, "block": null, "order": null, "model_id": null, "generation": {}},
        "configuration": {"campaign_sha256": "file", "scenario_sha256": {}, "recorded_campaign_sha256": recorded_sha256},
    })
}

fn refused(mut value: Value) -> Value {
    value["proposed"] = json!(false);
    value["completed"] = json!(false);
    value
}

/// (campaign, model, engine, scenario, proposed successes/known) of every cell.
fn cell_keys(analysis: &Analysis) -> Vec<(Value, String)> {
    analysis.json["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| (c["campaign"].clone(), format!("{}/{}", c["proposed"]["successes"], c["proposed"]["known"])))
        .collect()
}

#[test]
fn runs_of_different_campaigns_are_shown_apart_unless_pooled() {
    let attack = input(
        "results",
        manifest_of_campaign("r1", "aaa"),
        (0..3).map(|i| row("r1", &format!("t--s--{i}"), "reference", "s")).collect(),
    );
    let control = input(
        "results-control",
        manifest_of_campaign("r2", "bbb"),
        vec![refused(row("r2", "t--s--0", "reference", "s"))],
    );
    let inputs = [attack.clone(), control.clone()];
    let apart = analyze(&inputs).expect("analysis");
    assert_eq!(
        cell_keys(&apart),
        [(json!("sha256:aaa"), "3/3".to_owned()), (json!("sha256:bbb"), "0/1".to_owned())],
        "an attack run and its control are two rows, not `proposed 3/4`"
    );
    assert_eq!(apart.campaigns, 2);
    assert_eq!(apart.json["pooled"], false);
    assert_eq!(
        apart.json["campaigns"],
        json!([
            {"campaign": "sha256:aaa", "label": "results", "inputs": ["results"]},
            {"campaign": "sha256:bbb", "label": "results-control", "inputs": ["results-control"]},
        ])
    );
    assert_eq!(apart.json["inputs"][1]["campaign"], "sha256:bbb");
    assert!(apart.markdown.contains("| Campaign | Model | Engine | Scenario |"), "{}", apart.markdown);
    assert!(apart.markdown.contains("| results | scripted | reference | s | 3 |"), "{}", apart.markdown);
    assert!(apart.markdown.contains("| results-control | scripted | reference | s | 1 |"), "{}", apart.markdown);
    assert!(apart.markdown.contains("| results-control | `sha256:bbb` |"), "{}", apart.markdown);

    let pooled = analyze_inputs(&inputs, &RecommendOptions::default(), Campaigns::Pooled).expect("pooled");
    assert_eq!(cell_keys(&pooled), [(Value::Null, "3/4".to_owned())]);
    assert_eq!(pooled.campaigns, 1);
    assert_eq!(pooled.json["pooled"], true);
    assert!(!pooled.markdown.contains("Campaign |"), "{}", pooled.markdown);

    // Two runs of one campaign are one campaign; so are the runs of one experiment, whatever
    // their cells' campaigns; a manifest recording no campaign is its run's own.
    let again = input("again", manifest_of_campaign("r3", "aaa"), vec![row("r3", "t--s--0", "reference", "s")]);
    assert_eq!(cell_keys(&analyze(&[attack, again]).expect("ok")), [(json!("sha256:aaa"), "4/4".to_owned())]);
    let mut cell_a = manifest_of_campaign("e1", "ccc");
    cell_a["experiment"]["id"] = json!("exp-1");
    let mut cell_b = manifest_of_campaign("e2", "ddd");
    cell_b["experiment"]["id"] = json!("exp-1");
    let experiment = analyze(&[
        input("b000", cell_a, vec![row("e1", "t--s--0", "reference", "s")]),
        input("b001", cell_b, vec![row("e2", "t--s--0", "reference", "s")]),
    ])
    .expect("ok");
    assert_eq!(cell_keys(&experiment), [(json!("experiment exp-1"), "2/2".to_owned())]);
    let bare =
        analyze(&[input("bare", json!({"run_id": "r9"}), vec![row("r9", "t--s--0", "reference", "s")])]).expect("ok");
    assert_eq!(cell_keys(&bare), [(json!("run r9"), "1/1".to_owned())]);
    // The original's manifests record the campaign file's hash.
    let original = original_example();
    let view: AnalysisManifest = crate::records::read::from_value(&original.manifest).expect("view");
    assert_eq!(
        view.campaign(),
        format!("sha256:{}", original.manifest["configuration"]["campaign_sha256"].as_str().expect("hash"))
    );
}

/// A merged directory's manifest: its own run id, and its shards'.
fn merged_manifest(run_id: &str, shards: &[&str], recorded_sha256: &str) -> Value {
    let mut manifest = manifest_of_campaign(run_id, recorded_sha256);
    manifest["merge"] = json!({"shards": shards.iter().map(|s| json!({"run_id": s})).collect::<Vec<_>>()});
    manifest
}

fn trials_counted(analysis: &Analysis) -> u64 {
    analysis.json["cells"].as_array().expect("cells").iter().map(|c| c["trials"].as_u64().expect("trials")).sum()
}

#[test]
fn inputs_that_hold_the_same_trials_are_refused_or_counted_once() {
    let shard = |run: &str, trials: std::ops::Range<u32>| -> Vec<Value> {
        trials.map(|i| row(run, &format!("t--s--{i}"), "reference", "s")).collect()
    };
    let s1 = input("shard-1", manifest_of_campaign("s1", "aaa"), shard("s1", 0..3));
    let s2 = input("shard-2", manifest_of_campaign("s2", "aaa"), shard("s2", 3..6));
    let rows: Vec<Value> = shard("s1", 0..3).into_iter().chain(shard("s2", 3..6)).collect();
    let merged = input("merged", merged_manifest("m1", &["s1", "s2"], "aaa"), rows.clone());
    let again = input("merged-again", merged_manifest("m2", &["s1", "s2"], "aaa"), rows);
    let refuse = |inputs: &[RunInput]| {
        analyze_counted(inputs, &RecommendOptions::default(), Campaigns::Apart, Overlap::Refuse).expect_err("overlap")
    };
    let dedupe = |inputs: &[RunInput]| {
        analyze_counted(inputs, &RecommendOptions::default(), Campaigns::Apart, Overlap::Dedupe).expect("dedupe")
    };
    for (inputs, both) in [
        (vec![merged.clone(), s1.clone()], ("merged", "shard-1")),
        (vec![merged.clone(), again.clone()], ("merged", "merged-again")),
        (vec![s2.clone(), merged.clone()], ("shard-2", "merged")),
    ] {
        let error = refuse(&inputs).to_string();
        assert!(error.contains(&format!("inputs {} and {} overlap", both.0, both.1)), "{error}");
        assert!(error.contains("--dedupe"), "{error}");
    }
    // The same attempts under another run id (a row copied into another run's log) overlap too.
    let mut copied = s1.clone();
    copied.label = "copied".into();
    copied.manifest["run_id"] = json!("other");
    for row in &mut copied.rows {
        row["run_id"] = json!("other");
    }
    assert!(refuse(&[s1.clone(), copied]).to_string().contains("both hold attempt `s1-t--s--0-attempt`"));
    // Counted once: 6 trials, whichever inputs overlap.
    for inputs in [vec![merged.clone(), s1.clone(), s2.clone(), again.clone()], vec![s1.clone(), merged.clone()]] {
        let analysis = dedupe(&inputs);
        assert_eq!(trials_counted(&analysis), 6, "{}", analysis.json);
        assert_eq!(analysis.trials.len(), 6);
        assert_eq!(analysis.json["dedupe"], true);
    }
    // Independent runs of one campaign share nothing: both counted.
    let other = input("another-run", manifest_of_campaign("r2", "aaa"), shard("r2", 0..3));
    let analysis =
        analyze_counted(&[s1.clone(), other], &RecommendOptions::default(), Campaigns::Apart, Overlap::Refuse)
            .expect("independent runs");
    assert_eq!(trials_counted(&analysis), 6);
    // One run resumed in two copies: histories that do not extend one another are refused.
    let mut forked = s1.clone();
    forked.label = "fork".into();
    forked.rows[2]["attempt_id"] = json!("another-attempt");
    let error = analyze_counted(&[s1, forked], &RecommendOptions::default(), Campaigns::Apart, Overlap::Dedupe)
        .expect_err("forked");
    assert!(error.to_string().contains("different attempts of trial `t--s--2`"), "{error}");
}

#[test]
fn the_integrity_of_each_input_is_written_into_both_summaries() {
    let mut run = input("run", manifest_of_campaign("r1", "aaa"), vec![row("r1", "t--s--0", "reference", "s")]);
    run.integrity = Some(InputIntegrity { status: "verified_unsigned".into(), says: "verified, unsigned: …".into() });
    let analysis = analyze(&[run]).expect("analysis");
    assert_eq!(
        analysis.json["inputs"][0]["integrity"],
        json!({"status": "verified_unsigned", "says": "verified, unsigned: …"})
    );
    assert!(analysis.markdown.contains("- `run`: verified, unsigned: …"), "{}", analysis.markdown);
}
