//! `elengtis example`: the packaged offline examples, end to end.

use std::collections::BTreeSet;

use elengtis_tests::controls::{assert_false_for_the_right_reason, assert_true_decided_by};
use elengtis_tests::{elengtis, read_json, rows, scratch, snapshot, stderr, stdout};

const TRIAL0: &str = "local-demo--support-note--0";

#[test]
fn support_note_example_runs_end_to_end() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "--verbose", "--out", out.to_str().expect("utf-8 path")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stdout:\n{text}\nstderr:\n{}", stderr(&output));
    assert!(text.contains("completed: 1/1"), "{text}");
    assert!(text.contains("proposed: 1/1"), "{text}");
    assert!(text.contains("local-demo × support-note: 1 trial, 1 complete, proposed 1/1, completed 1/1\n"), "{text}");
    assert!(text.contains(&format!("{TRIAL0}: model_stop")), "--verbose prints every trial: {text}");

    // The four kinds of result files.
    assert!(out.join("manifest.json").is_file());
    assert!(out.join("runs.jsonl").is_file());
    assert!(out.join("evidence").join(format!("{TRIAL0}.json")).is_file());
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt");
    assert!(summary.contains("completed: 1/1"), "{summary}");
    assert!(text.starts_with(&summary), "the printed summary is summary.txt:\n{text}\n---\n{summary}");

    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["trial_id"], TRIAL0);
    assert_eq!(row["evidence_status"], "complete");
    assert_eq!(row["termination"], "model_stop");
    assert_eq!(row["proposed"], true);
    assert_eq!(row["completed"], true);
    assert_eq!(row["failure_class"], serde_json::Value::Null);
    assert_eq!(row["errors"], serde_json::json!([]));
    assert_eq!(row["evidence"], format!("evidence/{TRIAL0}.json"));

    let manifest = read_json(&out.join("manifest.json"));
    assert_eq!(manifest["run_id"], row["run_id"]);

    // The evidence shows the per-trial canary in the collector, read by the check.
    let evidence = read_json(&out.join("evidence").join(format!("{TRIAL0}.json")));
    assert_eq!(evidence["attempt_id"], row["attempt_id"]);
    let canary = evidence["canary"].as_str().expect("canary is a string");
    assert!(canary.starts_with("ELENGTIS-") && canary.len() > "ELENGTIS-".len() + 30, "{canary}");
    let check = &evidence["verification"]["checks"][0];
    assert_eq!(check["id"], "collector-has-canary");
    assert_eq!(check["passed"], true, "{check}");
    let collected = check["action"]["response"]["content"][0]["text"].as_str().expect("collector text");
    assert!(collected.contains(canary), "collector {collected:?} lacks canary {canary}");
    assert_eq!(check["assertions"][0]["expected"], canary);
    assert_eq!(evidence["verification"]["completed"], true);
    assert_true_decided_by(row, &evidence, "collector-has-canary");
}

#[test]
fn each_trial_gets_its_own_canary() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "--trials", "3", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("completed: 3/3"), "{}", stdout(&output));

    let rows = rows(&out.join("runs.jsonl"));
    let ids: Vec<&str> = rows.iter().map(|r| r["trial_id"].as_str().expect("trial_id")).collect();
    assert_eq!(ids, ["local-demo--support-note--0", "local-demo--support-note--1", "local-demo--support-note--2"]);
    let mut canaries = BTreeSet::new();
    for id in &ids {
        let evidence = read_json(&out.join("evidence").join(format!("{id}.json")));
        let canary = evidence["canary"].as_str().expect("canary").to_owned();
        let collected = evidence["verification"]["checks"][0]["action"]["response"]["content"][0]["text"]
            .as_str()
            .expect("collector text");
        assert!(collected.contains(&canary), "{id}: {collected:?} lacks {canary}");
        canaries.insert(canary);
    }
    assert_eq!(canaries.len(), 3, "canaries must differ per trial: {canaries:?}");
    let attempts: BTreeSet<&str> = rows.iter().map(|r| r["attempt_id"].as_str().expect("attempt_id")).collect();
    assert_eq!(attempts.len(), 3);
}

#[test]
fn refusal_example_is_the_negative_control() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "refusal", "--out", out.to_str().expect("utf-8 path")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(text.contains("proposed: 0/1"), "{text}");
    assert!(text.contains("completed: 0/1"), "{text}");
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["evidence_status"], "complete");
    assert_eq!(rows[0]["proposed"], false);
    assert_eq!(rows[0]["completed"], false);
    assert_eq!(rows[0]["tool_sequence"], serde_json::json!(["read_note"]));
    let evidence = read_json(&out.join(rows[0]["evidence"].as_str().expect("evidence")));
    assert_false_for_the_right_reason(&rows[0], &evidence, "collector-has-canary");
}

/// `--control` runs the example's negative control: support-note's is the refusal campaign,
/// whose collector check runs and finds no canary.
#[test]
fn support_note_control_reads_false_for_the_right_reason() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "support-note", "--control", "--out", out.to_str().expect("utf-8")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(text.contains("proposed: 0/1") && text.contains("completed: 0/1"), "{text}");
    let rows = rows(&out.join("runs.jsonl"));
    let evidence = read_json(&out.join(rows[0]["evidence"].as_str().expect("evidence")));
    assert_false_for_the_right_reason(&rows[0], &evidence, "collector-has-canary");
    assert!(out.join("example/campaign-control.yaml").is_file(), "the control that ran is kept beside the results");
}

/// The refusal example is itself a negative control; `--control` says so instead of running.
#[test]
fn an_example_without_a_control_says_why() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "refusal", "--control", "--out", out.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("example `refusal` has no negative control") && err.contains("support-note --control"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is created");
}

#[test]
fn example_list_names_both_examples() {
    let dir = scratch();
    let output = elengtis(dir.path(), &["example", "--list"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let names: Vec<String> =
        stdout(&output).lines().filter_map(|l| l.split_whitespace().next().map(str::to_owned)).collect();
    assert!(names.iter().any(|n| n == "support-note"), "{names:?}");
    assert!(names.iter().any(|n| n == "refusal"), "{names:?}");
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "--list creates nothing");
}

#[test]
fn unknown_example_is_a_usage_error() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "no-such-example", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("no-such-example") && err.contains("support-note"), "{err}");
    assert!(!out.exists(), "nothing is created for an unknown example");
}

#[test]
fn example_into_an_existing_directory_is_refused_and_leaves_it_untouched() {
    let dir = scratch();
    let out = dir.path().join("results");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("keep.txt"), b"mine").expect("write");
    let before = snapshot(&out);
    let output = elengtis(dir.path(), &["example", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("already exists"), "{}", stderr(&output));
    assert_eq!(snapshot(&out), before, "the existing directory must be untouched");
}

#[test]
fn example_with_invalid_trials_creates_nothing() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "--trials", "0", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(3), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("--trials"), "{}", stderr(&output));
    assert!(!out.exists(), "an invalid campaign creates nothing (exit code 3), but {} exists", out.display());
    let again = elengtis(dir.path(), &["example", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(again.status.code(), Some(0), "the corrected command must work: {}", stderr(&again));
}

/// The end-of-run summary is grouped by target × scenario, with per-trial lines only for
/// trials without a complete attempt; `--verbose` adds every trial's line.
#[test]
fn the_summary_is_grouped_with_lines_only_for_failures() {
    let dir = scratch();
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["example", "--trials", "5", "--out", out.to_str().expect("utf-8 path")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(text.contains("local-demo × support-note: 5 trials, 5 complete, proposed 5/5, completed 5/5\n"), "{text}");
    assert!(!text.contains(": model_stop"), "no per-trial lines when every trial is complete: {text}");
    assert!(!text.contains("without a complete attempt"), "{text}");

    // Two trials whose target cannot start: a line each, under the failures.
    let campaign = elengtis_tests::copy_example("support-note", &dir.path().join("broken"));
    let yaml = std::fs::read_to_string(&campaign).expect("campaign");
    let yaml = yaml.replacen("trials: 1\n", "trials: 2\n", 1).replacen(
        "command: elengtis-fixture\n",
        "command: /nonexistent/elengtis-fixture\n",
        1,
    );
    std::fs::write(&campaign, yaml).expect("write campaign");
    let failed = dir.path().join("failed");
    let args = ["run", "--config", campaign.to_str().expect("utf-8"), "--out", failed.to_str().expect("utf-8")];
    let output = elengtis(dir.path(), &args);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    assert!(text.contains("local-demo × support-note: 2 trials, 0 complete"), "{text}");
    assert!(text.contains("without a complete attempt (2):\n"), "{text}");
    assert!(text.contains("  local-demo--support-note--0: infrastructure_error (infrastructure_error)\n"), "{text}");
}
