//! Sharded runs (issue 30): `run --partition K/N` runs one shard of the frozen trial matrix,
//! N processes agree on who runs what without talking, and `elengtis merge` turns the shards
//! back into one sealed results directory whose `verify`, `analyze` and summary are those of
//! the same campaign run unsharded. Each refusal is made as a user would meet it: an overlap
//! (a shard given twice), a gap (a shard missing, a shard killed), a foreign shard (another
//! campaign, another N, another scheme) and a tampered shard (a rehashed row).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use elengtis_core::format::sha256_hex;
use elengtis_tests::{
    ChildGuard, copy_example, copy_tree, elengtis_cmd, read_json, rows, scratch, stderr, stdout, wait_until,
};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `elengtis ARGS` in `cwd` without the environment's partition, index or keys.
fn run(cwd: &Path, args: &[&str]) -> Output {
    cmd(cwd, args, &[])
}

fn cmd(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = elengtis_cmd(cwd, args);
    for var in ["ELENGTIS_PARTITION", "JOB_COMPLETION_INDEX", "ELENGTIS_SIGNING_KEY", "ELENGTIS_SIGNING_KEY_FILE"] {
        command.env_remove(var);
    }
    command.env_remove("ELENGTIS_CRASHPOINT");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run elengtis")
}

fn ok(output: &Output, what: &str) {
    assert_eq!(output.status.code(), Some(0), "{what}:\n{}{}", stdout(output), stderr(output));
}

/// The support-note example with `trials` trials, in `dir/<name>/campaign.yaml`.
fn campaign(dir: &Path, name: &str, trials: u32) -> PathBuf {
    let path = copy_example("support-note", &dir.join(name));
    let text = std::fs::read_to_string(&path).expect("read campaign");
    assert!(text.contains("trials: 1\n"));
    std::fs::write(&path, text.replacen("trials: 1\n", &format!("trials: {trials}\n"), 1)).expect("write campaign");
    path
}

/// Runs `shards` (partition specs) of `config` as processes at once; returns their directories.
fn run_shards(dir: &Path, config: &Path, prefix: &str, shards: &[&str]) -> Vec<PathBuf> {
    run_shards_with(dir, config, prefix, shards, &[])
}

/// [`run_shards`] with more arguments for each `run`.
fn run_shards_with(dir: &Path, config: &Path, prefix: &str, shards: &[&str], extra: &[&str]) -> Vec<PathBuf> {
    let mut children = Vec::new();
    let mut outs = Vec::new();
    for (i, spec) in shards.iter().enumerate() {
        let out = dir.join(format!("{prefix}{}", i + 1));
        let mut args = vec!["run", "--config", s(config), "--partition", spec, "--out", s(&out), "--json"];
        args.extend(extra);
        let mut command = elengtis_cmd(dir, &args);
        for var in ["ELENGTIS_PARTITION", "JOB_COMPLETION_INDEX", "ELENGTIS_CRASHPOINT"] {
            command.env_remove(var);
        }
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn a shard");
        children.push((spec.to_string(), ChildGuard::new(child)));
        outs.push(out);
    }
    for (spec, child) in children {
        let output = child.wait_output(Duration::from_secs(600));
        ok(&output, &format!("shard {spec}"));
    }
    outs
}

fn trial_ids(out: &Path) -> Vec<String> {
    rows(&out.join("runs.jsonl")).iter().map(|r| r["trial_id"].as_str().expect("trial_id").to_owned()).collect()
}

/// What `analyze` says that must not depend on how the run was cut: every cell (counts,
/// denominators, rates, Wilson intervals), the comparisons, the recommendation, and each
/// input's trials, not-run trials and attempts.
fn analysis(dir: &Path, inputs: &[&Path], name: &str) -> Value {
    let out = dir.join(name);
    let mut args = vec!["analyze"];
    for input in inputs {
        args.extend(["--input", s(input)]);
    }
    args.extend(["--out", s(&out)]);
    let output = run(dir, &args);
    let summary = read_json(&out.join("summary.json"));
    // Exit 1 exactly when some trial of the recorded matrix never ran.
    let not_run = summary["inputs"].as_array().expect("inputs").iter().any(|i| i["not_run"] != 0);
    assert_eq!(output.status.code(), Some(i32::from(not_run)), "analyze:\n{}", stderr(&output));
    let inputs: Vec<Value> = summary["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|i| serde_json::json!({"trials": i["trials"], "not_run": i["not_run"], "attempts": i["attempts"]}))
        .collect();
    let totals = inputs.iter().fold([0u64; 3], |mut acc, i| {
        for (slot, key) in acc.iter_mut().zip(["trials", "not_run", "attempts"]) {
            *slot += i[key].as_u64().expect("count");
        }
        acc
    });
    serde_json::json!({
        "cells": summary["cells"], "comparisons": summary["comparisons"],
        "recommendation": summary["recommendation"], "totals": totals,
    })
}

#[test]
fn four_shards_of_a_200_trial_campaign_run_at_once_merge_to_the_unsharded_results() {
    let dir = scratch();
    // 200 trials: the format's `trials` stops at 100, the command line's override does not.
    let config = campaign(dir.path(), "campaign", 1);
    let whole = dir.path().join("whole");
    let begun = Instant::now();
    ok(&run(dir.path(), &["run", "--config", s(&config), "--trials", "200", "--out", s(&whole)]), "the unsharded run");
    let unsharded = begun.elapsed();

    let begun = Instant::now();
    let shards =
        run_shards_with(dir.path(), &config, "shard", &["1/4", "count:2/4", "3/4", "4/4"], &["--trials", "200"]);
    let sharded = begun.elapsed();

    // Every trial in exactly one shard, each shard's partition recorded with the full matrix.
    let whole_ids: BTreeSet<String> = trial_ids(&whole).into_iter().collect();
    let mut seen = BTreeSet::new();
    let mut matrix_hashes = BTreeSet::new();
    for (k, shard) in shards.iter().enumerate() {
        let ids = trial_ids(shard);
        assert_eq!(ids.len(), 50, "shard {}: 200 trials by count over 4", k + 1);
        for id in ids {
            assert!(seen.insert(id.clone()), "{id} ran in two shards");
        }
        let partition = &read_json(&shard.join("manifest.json"))["partition"];
        assert_eq!(partition["scheme"], "count");
        assert_eq!(partition["shard"], k as u64 + 1);
        assert_eq!(partition["total"], 4);
        assert_eq!(partition["matrix_trials"], 200);
        assert_eq!(partition["shard_trials"], 50);
        matrix_hashes.insert(partition["matrix_sha256"].as_str().expect("hash").to_owned());
        // A shard verifies on its own, against its own trials.
        let verified = run(dir.path(), &["verify", "--json", "--require-sealed", s(shard)]);
        ok(&verified, "verify a shard");
        assert_eq!(serde_json::from_slice::<Value>(&verified.stdout).expect("json")["matrix_trials"], 50);
    }
    assert_eq!(seen, whole_ids, "the shards together ran the whole matrix");
    assert_eq!(matrix_hashes.len(), 1, "every shard records one full matrix");

    // Merged (shards given out of order), it is the whole run.
    let merged = dir.path().join("merged");
    let begun = Instant::now();
    let output = run(
        dir.path(),
        &[
            "merge",
            "--input",
            s(&shards[2]),
            s(&shards[0]),
            "--input",
            s(&shards[3]),
            s(&shards[1]),
            "--out",
            s(&merged),
        ],
    );
    let merge_time = begun.elapsed();
    ok(&output, "merge");
    assert!(stdout(&output).contains("merged 4 of 4 shards (count): 200 trials, 200 rows"), "{}", stdout(&output));
    let verified = run(dir.path(), &["verify", "--json", "--require-sealed", s(&merged)]);
    ok(&verified, "verify the merged directory");
    let verdict: Value = serde_json::from_slice(&verified.stdout).expect("json");
    assert_eq!((verdict["rows"].as_u64(), verdict["matrix_trials"].as_u64()), (Some(200), Some(200)));
    assert_eq!(
        analysis(dir.path(), &[&merged], "a-merged"),
        analysis(dir.path(), &[&whole], "a-whole"),
        "analyze of the merged shards is analyze of the unsharded run"
    );
    // The shards analysed side by side pool into the same cells too.
    let shard_refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    assert_eq!(
        analysis(dir.path(), &shard_refs, "a-shards")["cells"],
        analysis(dir.path(), &[&whole], "a-whole2")["cells"]
    );
    assert_eq!(
        std::fs::read_to_string(merged.join("summary.txt")).expect("summary"),
        std::fs::read_to_string(whole.join("summary.txt")).expect("summary"),
        "the merged summary is the unsharded one"
    );
    ok(&run(dir.path(), &["report", "--input", s(&merged), "--out", s(&dir.path().join("report.html"))]), "report");

    // Its log is each shard's log byte for byte, in shard order; its evidence files copies (not
    // links) with their hashes; its manifest records each shard's seal.
    let mut expected_log = Vec::new();
    for shard in &shards {
        expected_log.extend(std::fs::read(shard.join("runs.jsonl")).expect("log"));
    }
    assert_eq!(std::fs::read(merged.join("runs.jsonl")).expect("merged log"), expected_log);
    for row in rows(&merged.join("runs.jsonl")) {
        let path = merged.join(row["evidence"].as_str().expect("evidence"));
        assert!(std::fs::symlink_metadata(&path).expect("stat").file_type().is_file());
        assert_eq!(sha256_hex(&std::fs::read(&path).expect("evidence")), row["evidence_sha256"].as_str().expect("pin"));
    }
    let manifest = read_json(&merged.join("manifest.json"));
    assert!(manifest.get("partition").is_none());
    let recorded = manifest["merge"]["shards"].as_array().expect("shards");
    for (k, (record, shard)) in recorded.iter().zip(&shards).enumerate() {
        assert_eq!(record["shard"], k as u64 + 1);
        assert_eq!(record["seal"], read_json(&shard.join("seal.json")), "shard {}'s seal, whole", k + 1);
        assert_eq!(record["seal_sha256"], sha256_hex(&elengtis_core::format::canonical_json(&record["seal"])));
    }
    eprintln!(
        "200 stdio trials: unsharded {unsharded:?}, 4 shards at once {sharded:?}, merge {merge_time:?} (this build)"
    );
}

#[test]
fn partition_specs_are_checked_and_the_kubernetes_index_is_zero_based() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 4);
    for (spec, env, says) in [
        ("0/4", None, "shard 0 is not one of 1..=4"),
        ("5/4", None, "shard 5 is not one of 1..=4"),
        ("1/0", None, "N (the number of shards) must be at least 1"),
        ("index/4", None, "JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job), which is not set"),
        ("index/4", Some("4"), "shard 5 is not one of 1..=4"),
        ("slice:1/4", None, "unknown scheme `slice`"),
        ("1-4", None, "expected `K/N`"),
    ] {
        let out = dir.path().join("refused");
        let env: Vec<(&str, &str)> = env.map(|i| vec![("JOB_COMPLETION_INDEX", i)]).unwrap_or_default();
        let output = cmd(dir.path(), &["run", "--config", s(&config), "--partition", spec, "--out", s(&out)], &env);
        assert_eq!(output.status.code(), Some(2), "{spec}: usage error\n{}", stderr(&output));
        assert!(stderr(&output).contains(says), "{spec}: {}", stderr(&output));
        assert!(!out.exists(), "{spec}: nothing was created");
    }
    // index/N: K = JOB_COMPLETION_INDEX + 1; ELENGTIS_PARTITION gives the spec.
    let out = dir.path().join("indexed");
    let output = cmd(
        dir.path(),
        &["run", "--config", s(&config), "--out", s(&out)],
        &[("ELENGTIS_PARTITION", "index/4"), ("JOB_COMPLETION_INDEX", "0")],
    );
    ok(&output, "index/4 with index 0");
    assert_eq!(read_json(&out.join("manifest.json"))["partition"]["shard"], 1);
    assert_eq!(trial_ids(&out), ["local-demo--support-note--0"]);

    // hash: every trial in exactly one shard, for the same N on every machine.
    let config = campaign(dir.path(), "hashed", 30);
    let shards = run_shards(dir.path(), &config, "hash", &["hash:1/3", "hash:2/3", "hash:3/3"]);
    let mut all: Vec<String> = shards.iter().flat_map(|s| trial_ids(s)).collect();
    assert_eq!(all.len(), 30);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 30, "no trial in two hash shards");
    let merged = dir.path().join("hash-merged");
    let shard_args: Vec<&str> = shards.iter().map(|p| s(p)).collect();
    let mut args = vec!["merge", "--input"];
    args.extend(&shard_args);
    args.extend(["--out", s(&merged)]);
    ok(&run(dir.path(), &args), "merge hash shards");
}

#[test]
fn a_resume_keeps_its_shard_and_a_merged_directory_is_not_resumed() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 8);
    let shards = run_shards(dir.path(), &config, "s", &["1/2", "2/2"]);
    let output = run(dir.path(), &["run", "--resume", "--partition", "1/2", "--out", s(&shards[1])]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("it is shard count:2/2 of the matrix, not count:1/2"), "{}", stderr(&output));
    ok(&run(dir.path(), &["run", "--resume", "--partition", "2/2", "--out", s(&shards[1])]), "same shard");
    ok(&run(dir.path(), &["run", "--resume", "--out", s(&shards[1])]), "shard kept without --partition");
    assert_eq!(trial_ids(&shards[1]).len(), 4, "a resume of a complete shard runs nothing");

    let merged = dir.path().join("merged");
    ok(&run(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), "--out", s(&merged)]), "merge");
    let output = run(dir.path(), &["run", "--resume", "--out", s(&merged)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(stderr(&output).contains("a merged directory is not resumed"), "{}", stderr(&output));
    // Nor merged again, nor a run of the whole matrix taken for a shard.
    let whole = dir.path().join("whole");
    ok(&run(dir.path(), &["run", "--config", s(&config), "--out", s(&whole)]), "unsharded");
    for (input, says) in [(&merged, "it is a merged directory already"), (&whole, "it ran the whole matrix")] {
        let output = run(dir.path(), &["merge", "--input", s(input), "--out", s(&dir.path().join("again"))]);
        assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
        assert!(!dir.path().join("again").exists());
    }
}

#[test]
fn an_overlap_is_refused_naming_both_shards() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 8);
    let shards = run_shards(dir.path(), &config, "s", &["1/2", "2/2"]);
    // The same shard twice: once as given, once as a copy (another directory, same trials).
    let copy = dir.path().join("copy-of-s1");
    copy_tree(&shards[0], &copy);
    for second in [&shards[0], &copy] {
        let out = dir.path().join("merged");
        let output = run(dir.path(), &["merge", "--input", s(&shards[0]), s(second), s(&shards[1]), "--out", s(&out)]);
        assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
        let err = stderr(&output);
        assert!(err.contains("overlap") && err.contains("shard 1/2") && err.contains(s(second)), "{err}");
        assert!(!out.exists(), "nothing was written");
    }
    // Shard 1 run a second time (another run of the same trials).
    let rerun = run_shards(dir.path(), &config, "again", &["1/2"]);
    let out = dir.path().join("merged");
    let output = run(dir.path(), &["merge", "--input", s(&shards[0]), s(&rerun[0]), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(stderr(&output).contains("both are shard 1/2 (trial `local-demo--support-note--0` is in both)"));

    // The merged directory is written whole or not at all: never into an existing one, and
    // nothing of a refused or finished merge is left beside it.
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).expect("mkdir");
    let output = run(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), "--out", s(&existing)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(stderr(&output).contains("already exists; choose a new --out"), "{}", stderr(&output));
    assert_eq!(std::fs::read_dir(&existing).expect("list").count(), 0, "left untouched");
    ok(&run(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), "--out", s(&out)]), "merge");
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".merging-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_gap_is_reported_not_run_and_filled_by_running_or_resuming_just_that_shard() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 20);
    let whole = dir.path().join("whole");
    ok(&run(dir.path(), &["run", "--config", s(&config), "--out", s(&whole)]), "unsharded");
    let shards = run_shards(dir.path(), &config, "s", &["1/4", "2/4", "4/4"]);

    // Shard 3 missing: merged with its trials not run, exit 1, the command that fills it.
    let partial = dir.path().join("partial");
    let output =
        run(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), s(&shards[2]), "--out", s(&partial)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("shard 3/4 was not given: 5 trials not run"), "{err}");
    assert!(err.contains("elengtis run --config") && err.contains("--partition count:3/4"), "{err}");
    ok(&run(dir.path(), &["verify", "--require-sealed", s(&partial)]), "a merge with a gap verifies");
    let summary = analysis(dir.path(), &[&partial], "a-partial");
    assert_eq!(summary["totals"], serde_json::json!([20, 5, 15]), "trials, not run, attempts");
    let json = run(
        dir.path(),
        &["merge", "--json", "--input", s(&shards[0]), s(&shards[1]), s(&shards[2]), "--out", s(&dir.path().join("j"))],
    );
    let report: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(report["not_run"], 5);
    assert_eq!(report["gaps"][0]["shard"], 3);
    assert_eq!(report["gaps"][0]["not_run"].as_array().map(Vec::len), Some(5));

    // Shard 3 run, killed after two trials (SIGKILL: no seal). Merge reports it unsealed.
    let third = dir.path().join("third");
    let log = dir.path().join("third.stderr");
    let mut command =
        elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--partition", "3/4", "--out", s(&third)]);
    command.env("ELENGTIS_CRASHPOINT", "evidence-write:3").env_remove("ELENGTIS_PARTITION");
    let child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("stderr file"))
        .spawn()
        .expect("spawn shard 3");
    let mut child = ChildGuard::new(child);
    assert!(
        wait_until(Duration::from_secs(60), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("crashpoint reached"))),
        "shard 3 reached its crashpoint: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    child.child().kill().expect("SIGKILL shard 3");
    let _ = child.child().wait();
    let all = [&shards[0], &shards[1], &third, &shards[2]];
    let merge_all = |out: &Path| {
        let mut args = vec!["merge", "--input"];
        args.extend(all.iter().map(|p| s(p)));
        args.extend(["--out", s(out)]);
        run(dir.path(), &args)
    };
    let output = merge_all(&dir.path().join("m1"));
    assert_eq!(output.status.code(), Some(10), "{}", stderr(&output));
    assert!(stderr(&output).contains(&format!("shard {} is not sealed", third.display())), "{}", stderr(&output));
    assert!(stderr(&output).contains(&format!("elengtis run --resume --out {}", third.display())));

    // Resumed as that shard alone, the merge is the whole run.
    ok(&run(dir.path(), &["run", "--resume", "--partition", "3/4", "--out", s(&third)]), "resume shard 3");
    let merged = dir.path().join("m2");
    ok(&merge_all(&merged), "merge after the gap is filled");
    assert_eq!(analysis(dir.path(), &[&merged], "a-m2"), analysis(dir.path(), &[&whole], "a-whole"));
}

#[test]
fn a_foreign_shard_is_refused_naming_the_shard_and_the_field() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 8);
    let shards = run_shards(dir.path(), &config, "s", &["1/2", "2/2"]);
    let other_campaign = campaign(dir.path(), "other", 6);
    let foreign = run_shards(dir.path(), &other_campaign, "other", &["2/2"]);
    let other_n = run_shards(dir.path(), &config, "three", &["2/3"]);
    let hashed = run_shards(dir.path(), &config, "hashed", &["hash:2/2"]);
    for (shard, field) in [
        (&foreign[0], "configuration.recorded_campaign_sha256"),
        (&other_n[0], "partition.total"),
        (&hashed[0], "partition.scheme"),
    ] {
        let out = dir.path().join("merged");
        let output = run(dir.path(), &["merge", "--input", s(&shards[0]), s(shard), "--out", s(&out)]);
        assert_eq!(output.status.code(), Some(4), "{field}: {}", stderr(&output));
        let err = stderr(&output);
        assert!(
            err.contains(&format!("shard {} is not of the campaign of shard {}", shard.display(), shards[0].display()))
                && err.contains(&format!("its `{field}` is")),
            "{field}: {err}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn a_tampered_shard_is_refused_and_a_tampered_merge_does_not_verify() {
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 8);
    let shards = run_shards(dir.path(), &config, "s", &["1/2", "2/2"]);
    let merged = dir.path().join("merged");
    ok(&run(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), "--out", s(&merged)]), "merge");

    // A row of shard 2 rewritten (its outcome flipped) and the chain rehashed after it.
    let tampered = dir.path().join("tampered");
    copy_tree(&shards[1], &tampered);
    let mut lines: Vec<Value> = rows(&tampered.join("runs.jsonl"));
    lines[1]["completed"] = Value::Bool(false);
    write_rechained(&tampered.join("runs.jsonl"), &lines);
    let out = dir.path().join("m-tampered");
    let output = run(dir.path(), &["merge", "--input", s(&shards[0]), s(&tampered), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains(&format!("shard {} does not verify", tampered.display())), "{err}");
    assert!(err.contains("runs.jsonl:2: the row's `completed` is false but its evidence"), "{err}");
    assert!(!out.exists());

    // A row (and its evidence) of shard 1 slipped into shard 2, chain and seal recomputed:
    // refused as a trial outside shard 2's partition.
    let slipped = dir.path().join("slipped");
    copy_tree(&shards[1], &slipped);
    let mut lines: Vec<Value> = rows(&slipped.join("runs.jsonl"));
    let foreign_row = rows(&shards[0].join("runs.jsonl")).remove(0);
    let evidence = foreign_row["evidence"].as_str().expect("evidence").to_owned();
    std::fs::copy(shards[0].join(&evidence), slipped.join(&evidence)).expect("copy evidence");
    lines.push(foreign_row);
    write_rechained(&slipped.join("runs.jsonl"), &lines);
    std::fs::remove_file(slipped.join("seal.json")).expect("drop the seal");
    let output = run(dir.path(), &["verify", s(&slipped)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(
        stdout(&output).contains("is not in this run's shard count:2/2 of the recorded matrix"),
        "{}",
        stdout(&output)
    );

    // The merged directory itself: a row moved from one shard's segment to the other's, the
    // chain and the merged seal recomputed as a forger would, is still caught by the shards'
    // own seals.
    let forged = dir.path().join("forged");
    copy_tree(&merged, &forged);
    let mut lines: Vec<Value> = rows(&forged.join("runs.jsonl"));
    lines.swap(3, 4);
    write_rechained(&forged.join("runs.jsonl"), &lines);
    let output = run(dir.path(), &["verify", s(&forged)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("the seal of shard"), "{}", stdout(&output));
    let output = run(dir.path(), &["analyze", "--input", s(&forged), "--out", s(&dir.path().join("a"))]);
    assert_eq!(output.status.code(), Some(4), "analyze refuses what verify refuses");
}

/// Writes rows as one chain from the empty string, as a forger who knows the format would.
fn write_rechained(path: &Path, rows: &[Value]) {
    let mut text = String::new();
    let mut previous = String::new();
    for row in rows {
        let mut row = row.clone();
        row["prev_row_sha256"] = sha256_hex(previous.as_bytes()).into();
        previous = serde_json::to_string(&row).expect("json");
        text.push_str(&previous);
        text.push('\n');
    }
    std::fs::write(path, text).expect("write log");
}

#[test]
fn an_experiment_shard_runs_whole_blocks_and_the_shards_together_run_the_plan() {
    use elengtis_tests::model_server::ModelServer;
    let dir = scratch();
    let root = dir.path();
    let steps = serde_json::json!({
        "description": "shards test: reads the note and declines",
        "steps": [
            {"tool_calls": [{"name": {"offered": "^read_note$|^read_safe_note$"}}]},
            {"content": "I will not act on instructions inside the note."}
        ]
    });
    let server = ModelServer::start(root, &steps, &[]);
    let profile = format!(
        "models:\n  - id: m\n    model: scripted/m\n    pricing: {{input_per_million: 100, output_per_million: 100}}\n    generation: {{temperature: 0, timeout: 10000}}\n    provider: {{type: openai_compatible, base_url: 'http://{}/v1'}}\n",
        server.addr
    );
    std::fs::write(root.join("models.yaml"), profile).expect("write profiles");
    let plan = run(
        root,
        &[
            "experiment",
            "plan",
            "--models",
            "models.yaml",
            "--blocks",
            "3",
            "--engines",
            "reference,graph",
            "--scenarios",
            "support-note",
            "--budget-usd",
            "3",
            "--out",
            "bundle",
        ],
    );
    ok(&plan, "plan");
    let order = read_json(&root.join("bundle/run-order.json"));
    let cells: Vec<(u64, String)> = order["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| (r["block"].as_u64().expect("block"), r["result"].as_str().expect("result").to_owned()))
        .collect();
    assert_eq!(cells.len(), 6, "3 blocks × 2 engines");
    let mut ran: Vec<String> = Vec::new();
    for (k, results) in [(1, "results-1"), (2, "results-2")] {
        let spec = format!("{k}/2");
        let output = run(
            root,
            &[
                "experiment",
                "run",
                "--plan",
                "bundle",
                "--results",
                results,
                "--max-model-calls",
                "100",
                "--partition",
                &spec,
            ],
        );
        ok(&output, &format!("experiment shard {k}"));
        assert!(stdout(&output).contains(&format!("Shard count:{k}/2: blocks")), "{}", stdout(&output));
        let here: BTreeSet<String> = std::fs::read_dir(root.join(results))
            .expect("results")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        // Every block of this shard whole: both engines' cells of it, none of another's.
        let blocks: BTreeSet<u64> = cells.iter().filter(|(_, c)| here.contains(c)).map(|(b, _)| *b).collect();
        for (block, cell) in &cells {
            assert_eq!(here.contains(cell), blocks.contains(block), "shard {k}: block {block} split ({cell})");
        }
        ran.extend(here);
    }
    ran.sort();
    let mut planned: Vec<String> = cells.iter().map(|(_, c)| c.clone()).collect();
    planned.sort();
    assert_eq!(ran, planned, "the two shards together ran every cell once");
}

#[test]
fn signed_shards_keep_their_signatures_checkable_in_the_merged_directory() {
    const KEY: &str = "0f3c9a8e7d6b5a4938271605f4e3d2c1b0a9f8e7d6c5b4a3";
    let dir = scratch();
    let config = campaign(dir.path(), "campaign", 6);
    let key_file = dir.path().join("hmac.key");
    std::fs::write(&key_file, KEY).expect("write key");
    let signed = [("ELENGTIS_SIGNING_KEY", KEY)];
    let mut shards = Vec::new();
    for k in 1..=2 {
        let out = dir.path().join(format!("signed-{k}"));
        let spec = format!("{k}/2");
        ok(
            &cmd(dir.path(), &["run", "--config", s(&config), "--partition", &spec, "--out", s(&out)], &signed),
            "shard",
        );
        shards.push(out);
    }
    let merged = dir.path().join("merged");
    ok(&cmd(dir.path(), &["merge", "--input", s(&shards[0]), s(&shards[1]), "--out", s(&merged)], &signed), "merge");
    let output = run(dir.path(), &["verify", "--key", s(&key_file), s(&merged)]);
    ok(&output, "verify the merged directory with the key");
    for k in 1..=2 {
        assert!(
            stderr(&output).contains(&format!("checked: shard {k}/2's seal: its hmac-sha256 signature by key")),
            "{}",
            stderr(&output)
        );
    }
    // A shard's recorded signature edited: the shard's seal no longer holds (its signature by
    // the key, its recorded hash), whatever else is recomputed.
    let forged = dir.path().join("forged");
    copy_tree(&merged, &forged);
    let manifest_path = forged.join("manifest.json");
    let mut manifest = read_json(&manifest_path);
    let signature =
        manifest["merge"]["shards"][1]["seal"]["signatures"][0]["signature"].as_str().expect("sig").to_owned();
    let flipped = format!("{}{}", if signature.starts_with('0') { "1" } else { "0" }, &signature[1..]);
    manifest["merge"]["shards"][1]["seal"]["signatures"][0]["signature"] = flipped.into();
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest).expect("json")).expect("write");
    let output = run(dir.path(), &["verify", "--key", s(&key_file), s(&forged)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("the seal of shard 2/2"), "{}", stdout(&output));
}

#[test]
fn prove_all_takes_one_shard_of_the_seed_catalogue() {
    let dir = scratch();
    let seeds = elengtis_tests::workspace().join("scenarios/seeds");
    let count = std::fs::read_dir(&seeds)
        .expect("seeds")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seed.yaml")))
        .count();
    assert!(count > 1 && count < 64);
    // Shard 64 of 64 holds no seed of a smaller catalogue: it says so and proves nothing
    // (no engine is contacted); a bad spec is a usage error.
    let output = run(dir.path(), &["prove", "--all", "--seeds-dir", s(&seeds), "--partition", "64/64", "--out", "p"]);
    ok(&output, "an empty shard");
    assert!(stderr(&output).contains(&format!("shard count:64/64: 0 of {count} seeds")), "{}", stderr(&output));
    assert!(
        stdout(&output).contains(&format!("shard count:64/64 of {count} seeds"))
            && stdout(&output).contains("0 in this shard: none: nothing to prove"),
        "{}",
        stdout(&output)
    );
    assert!(!dir.path().join("p").exists());
    // --json: the shard's record, no report.
    let output = run(
        dir.path(),
        &["prove", "--all", "--seeds-dir", s(&seeds), "--partition", "hash:64/64", "--json", "--out", "p"],
    );
    ok(&output, "an empty shard, --json");
    let json: Value = serde_json::from_str(&stdout(&output)).expect("one JSON object");
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["partition"]["scheme"], "hash");
    assert_eq!(json["partition"]["list_items"], count);
    assert_eq!(json["partition"]["items"], serde_json::json!([]));
    assert_eq!(json["reports"], serde_json::json!([]));
    let output = run(dir.path(), &["prove", "--all", "--seeds-dir", s(&seeds), "--partition", "0/4"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // With --seed the partition is not applied (a seed's legs are not split), and the note
    // says so before anything runs (here the engine is absent, so nothing does).
    let seed = seeds.join("w2-note-body-direct.seed.yaml");
    let output = cmd(
        dir.path(),
        &["prove", "--seed", s(&seed), "--partition", "2/4", "--out", "one"],
        &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
    );
    assert!(stderr(&output).contains("--seed proves its one seed whole"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("shard count:2/4"), "{}", stderr(&output));
}

#[test]
fn an_empty_shard_of_the_gate_passes_without_an_engine_and_says_so() {
    let dir = scratch();
    let file = elengtis_tests::workspace().join("scenarios/gate/gate.yaml");
    let findings = elengtis_core::format::gate::load_gate(&file).expect("the committed gate").findings.len();
    assert!(findings < 9);
    // An empty shard never reaches for the engine (here: an engine socket that does not
    // exist); it is the success of a shard with nothing to do.
    let no_engine = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let output =
        cmd(dir.path(), &["gate", "--file", s(&file), "--partition", "9/9", "--json", "--out", "g"], &no_engine);
    ok(&output, "an empty gate shard");
    let json: Value = serde_json::from_str(&stdout(&output)).expect("one JSON object");
    assert_eq!(json["status"], "passed");
    assert_eq!(json["findings"], serde_json::json!([]));
    assert_eq!(json["partition"]["list"], "findings");
    assert_eq!(json["partition"]["list_items"], findings);
    assert_eq!(json["partition"]["items"], serde_json::json!([]));
    let output = cmd(dir.path(), &["gate", "--file", s(&file), "--partition", "9/9", "--out", "g"], &no_engine);
    ok(&output, "an empty gate shard, text");
    assert!(stdout(&output).contains("nothing to re-prove in this shard"), "{}", stdout(&output));
    let output = cmd(dir.path(), &["gate", "--file", s(&file), "--partition", "10/9"], &no_engine);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // Shard 1 of 9 holds a finding, so it does reach for the (absent) engine: the empty
    // shard's success above is not the absent engine's doing.
    let output = cmd(dir.path(), &["gate", "--file", s(&file), "--partition", "1/9", "--out", "g1"], &no_engine);
    assert_ne!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
}
