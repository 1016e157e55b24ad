//! `elengtis verify`: a results directory checked end to end (matrix membership, unique
//! attempts, the row chain, evidence present and unchanged, the manifest against the campaign
//! it records); `run --resume` and `analyze` refuse what it refuses; `analyze` takes its
//! denominators from the recorded matrix.

use std::path::{Path, PathBuf};
use std::process::Output;

use elengtis_tests::{elengtis, read_json, scratch, stderr, stdout};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The support-note example with `trials` trials, complete.
fn run(dir: &Path, trials: u32) -> PathBuf {
    let out = dir.join("run");
    let output = elengtis(dir, &["example", "--trials", &trials.to_string(), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    out
}

fn lines(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("runs.jsonl")).expect("read log").lines().map(str::to_owned).collect()
}

fn write_lines(out: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    std::fs::write(out.join("runs.jsonl"), text).expect("write log");
}

fn verify(dir: &Path, out: &Path) -> Output {
    elengtis(dir, &["verify", s(out)])
}

/// `verify`, `run --resume` and `analyze` all refuse `out` with exit 4, `verify` naming
/// `expected` (a `file:line:` position and a problem) with a repair; nothing is run or written.
fn assert_refused_everywhere(dir: &Path, out: &Path, expected: &[&str]) {
    let output = verify(dir, out);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(4), "{text}{}", stderr(&output));
    for needle in expected {
        assert!(text.contains(needle), "verify must say {needle:?}: {text}");
    }
    assert!(text.contains("; repair: "), "{text}");
    let log_before = std::fs::read(out.join("runs.jsonl")).expect("read log");
    let resumed = elengtis(dir, &["run", "--resume", "--out", s(out)]);
    assert_eq!(resumed.status.code(), Some(4), "{}{}", stdout(&resumed), stderr(&resumed));
    assert!(stderr(&resumed).contains("do not verify"), "{}", stderr(&resumed));
    assert!(stderr(&resumed).contains(expected[0]), "{}", stderr(&resumed));
    assert_eq!(std::fs::read(out.join("runs.jsonl")).expect("read log"), log_before, "resume ran nothing");
    let analysis = dir.join("analysis");
    let analyzed = elengtis(dir, &["analyze", "--input", s(out), "--out", s(&analysis)]);
    assert_eq!(analyzed.status.code(), Some(4), "{}{}", stdout(&analyzed), stderr(&analyzed));
    assert!(stderr(&analyzed).contains(expected[0]), "{}", stderr(&analyzed));
    assert!(!analysis.join("summary.json").exists());
}

#[test]
fn a_fresh_run_verifies_and_pins_its_evidence_and_chain() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let output = verify(dir.path(), &out);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("ok (3 rows, 3 trials in the recorded matrix)"), "{}", stdout(&output));
    let rows: Vec<Value> = lines(&out).iter().map(|l| serde_json::from_str(l).expect("row")).collect();
    assert_eq!(rows[0]["schema_version"], 2);
    for row in &rows {
        assert_eq!(row["evidence_sha256"].as_str().map(str::len), Some(64), "{row}");
        assert_eq!(row["prev_row_sha256"].as_str().map(str::len), Some(64), "{row}");
    }
    let manifest = read_json(&out.join("manifest.json"));
    assert_eq!(manifest["configuration"]["recorded_campaign_sha256"].as_str().map(str::len), Some(64));
    let json = elengtis(dir.path(), &["verify", "--json", s(&out)]);
    assert_eq!(json.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&json)).expect("one JSON object");
    assert_eq!((report["ok"].as_bool(), report["rows"].as_u64()), (Some(true), Some(3)), "{report}");
    // A complete run resumes as before: nothing to do.
    let resumed = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(resumed.status.code(), Some(0), "{}{}", stdout(&resumed), stderr(&resumed));
    assert_eq!(verify(dir.path(), &out).status.code(), Some(0));
}

#[test]
fn a_duplicated_row_is_refused() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let mut log = lines(&out);
    log.push(log[1].clone());
    write_lines(&out, &log);
    assert_refused_everywhere(dir.path(), &out, &["runs.jsonl:4:", "is also recorded on line 2", "remove line 4"]);
}

#[test]
fn a_row_outside_the_matrix_is_refused() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let mut log = lines(&out);
    // A fourth trial of a three-trial campaign, as an editor would add one: a copy renamed.
    let mut extra: Value = serde_json::from_str(&log[2]).expect("row");
    extra["trial_id"] = "local-demo--support-note--3".into();
    extra["trial_index"] = 3.into();
    extra["attempt_id"] = "00000000-0000-4000-8000-000000000000".into();
    log.push(extra.to_string());
    write_lines(&out, &log);
    assert_refused_everywhere(
        dir.path(),
        &out,
        &["runs.jsonl:4:", "trial `local-demo--support-note--3` is not in the recorded matrix (3 trials"],
    );
}

#[test]
fn an_edited_campaign_in_the_manifest_is_refused() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let path = out.join("manifest.json");
    let text = std::fs::read_to_string(&path).expect("manifest");
    let mut manifest: Value = serde_json::from_str(&text).expect("JSON");
    manifest["campaign"]["trials"] = 4.into();
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).expect("json") + "\n").expect("write");
    let line = text.lines().position(|l| l.starts_with("  \"campaign\":")).expect("campaign line") + 1;
    assert_refused_everywhere(
        dir.path(),
        &out,
        &[&format!("manifest.json:{line}:"), "the recorded campaign was changed after the run started"],
    );
}

#[test]
fn deleted_or_changed_evidence_is_refused() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let evidence = out.join("evidence/local-demo--support-note--1.json");
    let original = std::fs::read(&evidence).expect("evidence");
    std::fs::remove_file(&evidence).expect("delete evidence");
    assert_refused_everywhere(
        dir.path(),
        &out,
        &["runs.jsonl:2:", "evidence/local-demo--support-note--1.json is missing", "restore evidence/"],
    );
    // Still the same JSON, but not the bytes the row pins.
    let mut edited = b" ".to_vec();
    edited.extend_from_slice(&original);
    std::fs::write(&evidence, &edited).expect("edit evidence");
    assert_refused_everywhere(dir.path(), &out, &["runs.jsonl:2:", "was changed after its row was written"]);
}

#[test]
fn a_row_removed_from_the_middle_breaks_the_chain() {
    let dir = scratch();
    let out = run(dir.path(), 3);
    let mut log = lines(&out);
    log.remove(1);
    write_lines(&out, &log);
    assert_refused_everywhere(dir.path(), &out, &["runs.jsonl:2:", "the chain is broken"]);
}

#[test]
fn analyze_counts_trials_that_never_ran_from_the_recorded_matrix() {
    let dir = scratch();
    let out = run(dir.path(), 6);
    // Four rows of six: as a run killed after its fourth trial leaves it (unsealed).
    let log = lines(&out);
    write_lines(&out, &log[..4]);
    std::fs::remove_file(out.join("seal.json")).expect("remove the seal");
    let analysis = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&out), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("2 trials of the recorded matrix never ran"), "{}", stderr(&output));
    let summary = read_json(&analysis.join("summary.json"));
    let cell = &summary["cells"][0];
    assert_eq!(
        (cell["trials"].as_u64(), cell["not_run"].as_u64(), cell["incomplete_trials"].as_u64()),
        (Some(6), Some(2), Some(2)),
        "{summary}"
    );
    assert_eq!(summary["inputs"][0]["trials"], 6);
    assert_eq!(summary["inputs"][0]["not_run"], 2);
    assert!(stdout(&output).contains("not run: 2"), "{}", stdout(&output));
    // Verify accepts it as unsealed (removing the last rows leaves the chain whole; without a
    // seal nothing counts them) and notes the evidence no row names; a seal required, it is not
    // verified.
    let verified = verify(dir.path(), &out);
    assert_eq!(verified.status.code(), Some(0), "{}{}", stdout(&verified), stderr(&verified));
    assert!(stderr(&verified).contains("is named by no row"), "{}", stderr(&verified));
    assert!(stderr(&verified).contains("unsealed (no seal.json"), "{}", stderr(&verified));
    let required = elengtis(dir.path(), &["verify", "--require-sealed", s(&out)]);
    assert_eq!(required.status.code(), Some(10), "{}{}", stdout(&required), stderr(&required));

    // Stopped before any row: the whole matrix, not run; exit 1.
    write_lines(&out, &[]);
    let output = elengtis(dir.path(), &["analyze", "--input", s(&out), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let summary = read_json(&analysis.join("summary.json"));
    assert_eq!((summary["cells"][0]["trials"].as_u64(), summary["cells"][0]["not_run"].as_u64()), (Some(6), Some(6)));
}

#[test]
fn analyze_exit_codes_are_the_documented_ones() {
    let dir = scratch();
    // Not a results directory: 4, said plainly.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let analysis = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&empty), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains(&format!("{} is not an elengtis results directory: no manifest.json", empty.display())),
        "{}",
        stderr(&output)
    );
    assert_eq!(verify(dir.path(), &empty).status.code(), Some(4));

    // Malformed input: 3 (docs/exit-codes.md), from analyze and verify alike.
    let out = run(dir.path(), 2);
    let mut log = lines(&out);
    log.insert(1, "{broken".to_owned());
    write_lines(&out, &log);
    let output = elengtis(dir.path(), &["analyze", "--input", s(&out), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(3), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("runs.jsonl:2: line 2 is not valid JSON"), "{}", stderr(&output));
    assert_eq!(verify(dir.path(), &out).status.code(), Some(3));
    log.remove(1);
    write_lines(&out, &log);
    std::fs::write(out.join("manifest.json"), "{\"run_id\": ").expect("truncate manifest");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&out), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(3), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("manifest.json:1: it is truncated: not valid JSON"), "{}", stderr(&output));
}

#[test]
fn results_written_before_the_hashes_stay_readable() {
    let dir = scratch();
    let out = run(dir.path(), 2);
    // Schema 1: the same records without the hashes.
    let mut log = lines(&out);
    for line in &mut log {
        let mut row: Value = serde_json::from_str(line).expect("row");
        let object = row.as_object_mut().expect("object");
        object.remove("evidence_sha256");
        object.remove("prev_row_sha256");
        object.insert("schema_version".into(), 1.into());
        *line = row.to_string();
    }
    write_lines(&out, &log);
    let mut manifest = read_json(&out.join("manifest.json"));
    manifest["schema_version"] = 1.into();
    manifest["configuration"].as_object_mut().expect("object").remove("recorded_campaign_sha256");
    std::fs::write(out.join("manifest.json"), serde_json::to_string_pretty(&manifest).expect("json")).expect("write");
    for entry in std::fs::read_dir(out.join("evidence")).expect("evidence").flatten() {
        let mut evidence = read_json(&entry.path());
        evidence["schema_version"] = 1.into();
        std::fs::write(entry.path(), serde_json::to_string_pretty(&evidence).expect("json")).expect("write");
    }
    std::fs::remove_file(out.join("seal.json")).expect("schema 1 had no seal");
    // Read, its shape and rows checked, but not verified: it carries no chain (exit 10).
    let output = verify(dir.path(), &out);
    assert_eq!(output.status.code(), Some(10), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("schema 1 (written before the hashes: no chain)"), "{}", stderr(&output));
    assert!(stderr(&output).contains("not checked: integrity"), "{}", stderr(&output));
    let analysis = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&out), "--out", s(&analysis)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(read_json(&analysis.join("summary.json"))["cells"][0]["trials"], 2);
    // A duplicate is still found without the chain.
    log.push(log[0].clone());
    write_lines(&out, &log);
    let output = verify(dir.path(), &out);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("runs.jsonl:3:"), "{}", stdout(&output));
}

/// Evidence is checked on every core; the problems still come back in the log's order, each
/// row's own (its chain) before its evidence's, whatever thread checked which row.
#[test]
fn problems_are_reported_in_the_order_of_the_log() {
    let dir = scratch();
    let out = run(dir.path(), 40);
    let log = lines(&out);
    // Evidence of rows 5, 17 and 33 changed; row 26 removed (so line 26 is the next row, whose
    // chain link no longer holds).
    for line in [5, 17, 33] {
        let row: Value = serde_json::from_str(&log[line - 1]).expect("row");
        let evidence = out.join(row["evidence"].as_str().expect("evidence path"));
        let mut edited = b" ".to_vec();
        edited.extend_from_slice(&std::fs::read(&evidence).expect("evidence"));
        std::fs::write(&evidence, edited).expect("edit evidence");
    }
    let mut shorter = log.clone();
    shorter.remove(25);
    write_lines(&out, &shorter);
    let output = elengtis(dir.path(), &["verify", "--json", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("verify --json");
    let found: Vec<(u64, String)> = report["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter(|p| p["file"] == "runs.jsonl")
        .map(|p| (p["line"].as_u64().expect("a line"), p["problem"].as_str().expect("what").to_owned()))
        .collect();
    let lines_found: Vec<u64> = found.iter().map(|(line, _)| *line).collect();
    // Rows 33.. moved up one line when row 26 went.
    assert_eq!(lines_found, vec![5, 17, 26, 32], "{found:?}");
    assert!(found[2].1.contains("the chain is broken"), "{found:?}");
    assert!(
        found.iter().enumerate().all(|(i, (_, what))| i == 2 || what.contains("was changed after its row")),
        "{found:?}"
    );
}
