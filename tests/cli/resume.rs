//! `elengtis run --resume`: continuing complete, crashed, torn, corrupt, locked and
//! incompatible runs; retries of incomplete attempts; Ctrl-C.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use elengtis_tests::{
    ChildGuard, bin, copy_example, elengtis, elengtis_cmd, processes_mentioning, read_json, rows, scratch, stderr,
    stdout, wait_until,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The support-note example in `dir/campaign/` with `trials` trials and `command` as the
/// stdio command.
fn campaign(dir: &Path, trials: u32, command: &str) -> PathBuf {
    let path = copy_example("support-note", &dir.join("campaign"));
    let text = std::fs::read_to_string(&path).expect("read campaign");
    assert!(text.contains("trials: 1\n") && text.contains("command: elengtis-fixture\n"));
    let text = text.replacen("trials: 1\n", &format!("trials: {trials}\n"), 1).replacen(
        "command: elengtis-fixture\n",
        &format!("command: '{command}'\n"),
        1,
    );
    std::fs::write(&path, text).expect("write campaign");
    path
}

/// A campaign whose every trial takes at least `delay` seconds: the fixture is started
/// through a shell script under `dir/bin` that sleeps first. Both the script and the
/// fixture it execs carry `dir` in their command lines. With `grandchild`, the script also
/// leaves a long-lived process in its process group (also carrying `dir`), as a server that
/// spawns helpers would; only killing the target's whole group ends it.
fn slow_campaign(dir: &Path, trials: u32, delay: &str, grandchild: bool) -> PathBuf {
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).expect("mkdir bin");
    let fixture = bin_dir.join("elengtis-fixture");
    std::os::unix::fs::symlink(bin("elengtis-fixture"), &fixture).expect("symlink the fixture");
    let script = bin_dir.join("slow-fixture");
    let helper = if grandchild {
        format!("sh -c 'sleep 30' '{}/grandchild' </dev/null >/dev/null 2>&1 &\n", dir.display())
    } else {
        String::new()
    };
    std::fs::write(&script, format!("#!/bin/sh\n{helper}sleep {delay}\nexec '{}' \"$@\"\n", fixture.display()))
        .expect("write the wrapper");
    let mut perms = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod the wrapper");
    campaign(dir, trials, s(&script))
}

/// Run a campaign to completion and return the results directory.
fn complete_run(dir: &Path, trials: u32) -> PathBuf {
    let config = campaign(dir, trials, "elengtis-fixture");
    let out = dir.join("results");
    let output = elengtis(dir, &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    out
}

/// Count of complete (newline-terminated) rows in a log that may not exist yet.
fn complete_lines(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

fn trial_ids(n: u32) -> Vec<String> {
    (0..n).map(|i| format!("local-demo--support-note--{i}")).collect()
}

/// Trial id → its rows.
fn by_trial(rows: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut map: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for row in rows {
        map.entry(row["trial_id"].as_str().expect("trial_id").to_owned()).or_default().push(row);
    }
    map
}

/// Every trial of the matrix has exactly one complete row.
fn assert_one_complete_row_per_trial(rows: &[Value], trials: u32) {
    let grouped = by_trial(rows);
    let ids: Vec<String> = grouped.keys().cloned().collect();
    assert_eq!(ids, trial_ids(trials), "trial ids in runs.jsonl");
    for (id, rows) in &grouped {
        let complete = rows.iter().filter(|r| r["evidence_status"] == "complete").count();
        assert_eq!(complete, 1, "{id} must have exactly one complete row: {rows:?}");
    }
}

fn assert_no_processes_left(needle: &str) {
    let gone = wait_until(Duration::from_secs(10), || processes_mentioning(needle).is_empty());
    assert!(gone, "processes of this test are still running: {:?}", processes_mentioning(needle));
}

#[test]
fn resume_of_a_complete_run_changes_nothing() {
    let dir = scratch();
    let out = complete_run(dir.path(), 2);
    let log = std::fs::read(out.join("runs.jsonl")).expect("read log");
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("read summary");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(std::fs::read(out.join("runs.jsonl")).expect("read log"), log, "no new rows");
    assert_eq!(std::fs::read_to_string(out.join("summary.txt")).expect("read summary"), summary);
    assert!(stdout(&output).starts_with(&summary), "{}", stdout(&output));
    assert_eq!(read_json(&out.join("manifest.json"))["resumes"].as_array().map(Vec::len), Some(1));
}

#[test]
fn resume_refuses_config_and_overrides() {
    let dir = scratch();
    let out = complete_run(dir.path(), 1);
    let config = dir.path().join("campaign/campaign.yaml");
    for extra in [&["--config", s(&config)][..], &["--trials", "2"][..]] {
        let mut args = vec!["run", "--resume", "--out", s(&out)];
        args.extend_from_slice(extra);
        let output = elengtis(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {}", stderr(&output));
    }
    assert_eq!(complete_lines(&out.join("runs.jsonl")), 1);
}

#[test]
fn resume_after_sigkill_finishes_every_trial_once_and_leaves_no_orphans() {
    let dir = scratch();
    let needle = s(dir.path()).to_owned();
    let config = slow_campaign(dir.path(), 6, "0.2", false);
    let out = dir.path().join("results");
    let log = out.join("runs.jsonl");
    let mut runner = ChildGuard::new(
        elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn elengtis"),
    );
    assert!(wait_until(Duration::from_secs(30), || complete_lines(&log) >= 2), "no two rows within 30 s");
    let pid = Pid::from_raw(i32::try_from(runner.id()).expect("pid"));
    kill(pid, Signal::SIGKILL).expect("SIGKILL the runner");
    runner.child().wait().expect("reap the runner");
    drop(runner);

    let before = std::fs::read(&log).expect("read log");
    let kept = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let done_before = before[..kept].iter().filter(|&&b| b == b'\n').count();
    assert!((2..6).contains(&done_before), "the runner must die mid-run ({done_before} rows)");

    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let after = std::fs::read(&log).expect("read log");
    assert!(after.starts_with(&before[..kept]), "rows recorded before the crash must be kept byte for byte");
    let rows = rows(&log);
    assert_one_complete_row_per_trial(&rows, 6);
    let attempt_ids: BTreeSet<&str> = rows.iter().map(|r| r["attempt_id"].as_str().expect("attempt_id")).collect();
    assert_eq!(attempt_ids.len(), rows.len(), "attempt ids are unique");
    assert!(stdout(&output).contains("completed: 6/6"), "{}", stdout(&output));
    assert!(stdout(&output).contains("trials: 6\n"), "{}", stdout(&output));

    let manifest = read_json(&out.join("manifest.json"));
    let resumes = manifest["resumes"].as_array().expect("resumes");
    assert_eq!(resumes.len(), 1, "{resumes:?}");
    assert!(resumes[0]["resumed_at"].is_string(), "{resumes:?}");

    assert_no_processes_left(&needle);
}

/// Run two trials, then tear the last row as a crash mid-write would: returns the
/// results dir and the torn row as it was.
fn torn_run(dir: &Path) -> (PathBuf, Value) {
    let out = complete_run(dir, 2);
    let log = out.join("runs.jsonl");
    let bytes = std::fs::read(&log).expect("read log");
    let text = String::from_utf8(bytes.clone()).expect("utf-8 log");
    let last: Value = serde_json::from_str(text.lines().last().expect("a row")).expect("row");
    std::fs::write(&log, &bytes[..bytes.len() - 10]).expect("tear the last row");
    // A runner killed mid-append never sealed the run (a seal counting the torn row would
    // say a recorded row was removed).
    std::fs::remove_file(out.join("seal.json")).expect("remove the seal");
    (out, last)
}

#[test]
fn torn_final_row_is_cut_and_its_trial_rerun() {
    let dir = scratch();
    let (out, torn) = torn_run(dir.path());
    let torn_trial = torn["trial_id"].as_str().expect("trial_id").to_owned();
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("torn final row"), "{}", stderr(&output));
    let rows = rows(&out.join("runs.jsonl"));
    assert_one_complete_row_per_trial(&rows, 2);
    assert_eq!(rows.len(), 2, "the torn row is gone, its trial ran again: {rows:?}");
    let rerun = &rows[1];
    assert_eq!(rerun["trial_id"], torn_trial.as_str());
    assert_ne!(rerun["attempt_id"], torn["attempt_id"], "the rerun is a new attempt");
    assert!(stdout(&output).contains("completed: 2/2"), "{}", stdout(&output));
}

#[test]
fn torn_final_row_rerun_keeps_the_earlier_evidence() {
    let dir = scratch();
    let (out, torn) = torn_run(dir.path());
    let torn_trial = torn["trial_id"].as_str().expect("trial_id").to_owned();
    let first = out.join("evidence").join(format!("{torn_trial}.json"));
    let before = std::fs::read(&first).expect("read the first evidence");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let retry = out.join("evidence").join(format!("{torn_trial}.retry-1.json"));
    assert!(retry.is_file(), "the rerun's evidence must be {}", retry.display());
    assert_eq!(std::fs::read(&first).expect("read"), before, "the earlier attempt's evidence must not be overwritten");
    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows[1]["evidence"], format!("evidence/{torn_trial}.retry-1.json"));
}

#[test]
fn corrupt_middle_row_is_refused_and_left_untouched() {
    let dir = scratch();
    let out = complete_run(dir.path(), 2);
    let log = out.join("runs.jsonl");
    let text = std::fs::read_to_string(&log).expect("read log");
    let second = text.lines().nth(1).expect("two rows");
    std::fs::write(&log, format!("{{broken\n{second}\n")).expect("corrupt row 1");
    let log_before = std::fs::read(&log).expect("read log");
    let manifest_before = std::fs::read(out.join("manifest.json")).expect("read manifest");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("line 1"), "{}", stderr(&output));
    assert_eq!(std::fs::read(&log).expect("read log"), log_before, "runs.jsonl must be byte-identical");
    assert_eq!(std::fs::read(out.join("manifest.json")).expect("read"), manifest_before, "manifest untouched");
}

#[test]
fn locked_results_directory_is_refused() {
    let dir = scratch();
    let out = complete_run(dir.path(), 1);
    let log_before = std::fs::read(out.join("runs.jsonl")).expect("read log");
    let lock = std::fs::File::open(&out).expect("open the results directory");
    lock.lock().expect("take the lock");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    lock.unlock().expect("release the lock");
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("another elengtis run"), "{}", stderr(&output));
    assert_eq!(std::fs::read(out.join("runs.jsonl")).expect("read log"), log_before);
}

#[test]
fn deleting_the_lock_file_lets_no_second_writer_in() {
    // `rm DIR/.lock` under a live run, then `run --resume`: the resume must be refused and the
    // run must finish with every trial recorded once.
    let dir = scratch();
    let config = slow_campaign(dir.path(), 4, "0.3", false);
    let out = dir.path().join("results");
    let log = out.join("runs.jsonl");
    let runner = ChildGuard::new(
        elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn elengtis"),
    );
    assert!(wait_until(Duration::from_secs(30), || complete_lines(&log) >= 1), "no row within 30 s");
    for entry in std::fs::read_dir(&out).expect("list the results directory").flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') && entry.path().is_file() {
            std::fs::remove_file(entry.path()).expect("delete the lock file");
        }
    }
    let second = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(second.status.code(), Some(4), "{}{}", stdout(&second), stderr(&second));
    assert!(stderr(&second).contains("another elengtis run is using it"), "{}", stderr(&second));
    let first = runner.wait_output(Duration::from_secs(60));
    assert_eq!(first.status.code(), Some(0), "{}{}", stdout(&first), stderr(&first));
    assert_eq!(rows(&log).len(), 4, "each trial recorded once");
    assert_eq!(elengtis(dir.path(), &["verify", s(&out)]).status.code(), Some(0));
}

#[test]
fn metrics_version_mismatch_is_refused() {
    let dir = scratch();
    let out = complete_run(dir.path(), 1);
    let mut manifest = read_json(&out.join("manifest.json"));
    manifest["metrics_version"] = serde_json::json!(999);
    std::fs::write(out.join("manifest.json"), serde_json::to_vec_pretty(&manifest).expect("json")).expect("write");
    let log_before = std::fs::read(out.join("runs.jsonl")).expect("read log");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("metrics_version") && err.contains("999"), "{err}");
    assert_eq!(std::fs::read(out.join("runs.jsonl")).expect("read log"), log_before);
}

#[test]
fn resume_of_a_directory_that_is_not_a_run_is_refused() {
    let dir = scratch();
    let out = dir.path().join("results");
    std::fs::create_dir(&out).expect("mkdir");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(stderr(&output).contains("manifest.json"), "{}", stderr(&output));
}

#[test]
fn incomplete_attempts_stop_the_run_and_resume_retries_them() {
    let dir = scratch();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let name = format!("elengtis-test-fixture-{}-{nanos}", std::process::id());
    let config = campaign(dir.path(), 4, &name);
    let out = dir.path().join("results");
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("failed 3 consecutive trials"), "{}", stderr(&output));

    let failed = rows(&out.join("runs.jsonl"));
    assert_eq!(failed.len(), 3, "the run stops after three consecutive failures: {failed:?}");
    for row in &failed {
        assert_eq!(row["evidence_status"], "incomplete", "{row}");
        assert_eq!(row["termination"], "infrastructure_error", "{row}");
        assert_eq!(row["failure_class"], "infrastructure_error", "{row}");
        assert_eq!(row["proposed"], Value::Null);
        assert_eq!(row["completed"], Value::Null);
        let errors = row["errors"].as_array().expect("errors");
        assert!(
            errors.iter().any(|e| e["phase"] == "connection_or_agent"
                && e["detail"].as_str().is_some_and(|d| d.contains(&name))),
            "{errors:?}"
        );
    }
    let failed_attempts: BTreeSet<String> =
        failed.iter().map(|r| r["attempt_id"].as_str().expect("attempt_id").to_owned()).collect();

    // Make the command findable on PATH and resume.
    let path_dir = dir.path().join("path");
    std::fs::create_dir(&path_dir).expect("mkdir");
    std::os::unix::fs::symlink(bin("elengtis-fixture"), path_dir.join(&name)).expect("symlink");
    let path = std::env::join_paths(
        std::iter::once(path_dir.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("join PATH");
    let output = elengtis_cmd(dir.path(), &["run", "--resume", "--out", s(&out)])
        .env("PATH", path)
        .output()
        .expect("run elengtis");
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));

    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), 7, "three failed attempts and four good ones: {rows:?}");
    assert_one_complete_row_per_trial(&rows, 4);
    for row in rows.iter().filter(|r| r["evidence_status"] == "complete") {
        let attempt = row["attempt_id"].as_str().expect("attempt_id");
        assert!(!failed_attempts.contains(attempt), "a retry needs a new attempt id: {attempt}");
    }
    for id in &trial_ids(3) {
        assert!(out.join("evidence").join(format!("{id}.json")).is_file());
        assert!(out.join("evidence").join(format!("{id}.retry-1.json")).is_file(), "{id} retry evidence");
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("summary");
    assert!(summary.contains("trials: 4\n"), "the denominator is the matrix:\n{summary}");
    assert!(summary.contains("completed: 4/4\n"), "{summary}");
    assert!(summary.contains("attempts: 7, of which 3 were retried"), "{summary}");
    assert!(text.contains("attempts: 7, of which 3 were retried"), "{text}");
}

#[test]
fn sigint_interrupts_and_resume_completes() {
    interrupt_then_resume(Signal::SIGINT, 130);
}

/// SIGTERM is what `timeout` and CI runners send: 128 + 15, not Ctrl-C's 130.
#[test]
fn sigterm_interrupts_with_143_and_resume_completes() {
    interrupt_then_resume(Signal::SIGTERM, 143);
}

fn interrupt_then_resume(signal: Signal, code: i32) {
    let dir = scratch();
    let needle = s(dir.path()).to_owned();
    let config = slow_campaign(dir.path(), 6, "0.2", true);
    let out = dir.path().join("results");
    let log = out.join("runs.jsonl");
    let runner = ChildGuard::new(
        elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn elengtis"),
    );
    assert!(wait_until(Duration::from_secs(30), || complete_lines(&log) >= 1), "no row within 30 s");
    kill(Pid::from_raw(i32::try_from(runner.id()).expect("pid")), signal).expect("signal the runner");
    let output = runner.wait_output(Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(code), "{}{}", stdout(&output), stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("interrupted") && err.contains("--resume"), "{err}");
    let done = complete_lines(&log);
    assert!(done < 6, "the run must have been interrupted ({done} rows)");
    // The trial in progress took its target process with it.
    assert_no_processes_left(&needle);

    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_one_complete_row_per_trial(&rows(&log), 6);
    assert!(stdout(&output).contains("completed: 6/6"), "{}", stdout(&output));
    // Each finished trial took its target's whole process group down too.
    assert_no_processes_left(&needle);
}

/// `run --resume-or-start` (issue 38, item 2: a retried Kubernetes index or CI job): it starts
/// where nothing is, resumes its own campaign's run — the same run id, nothing run twice — and
/// starts in a directory a try left before its manifest; it refuses another campaign's run, a
/// run with another scenario, and a directory holding anything else (exit 4), never mixing two.
#[test]
fn resume_or_start_resumes_its_own_run_and_refuses_any_other_directory() {
    let dir = scratch();
    let config = campaign(dir.path(), 3, "elengtis-fixture");
    let out = dir.path().join("out");
    let go = |out: &Path, config: &Path| {
        elengtis(dir.path(), &["run", "--resume-or-start", "--config", s(config), "--out", s(out)])
    };
    let first = go(&out, &config);
    assert_eq!(first.status.code(), Some(0), "{}{}", stdout(&first), stderr(&first));
    let run_id = read_json(&out.join("manifest.json"))["run_id"].clone();
    let again = go(&out, &config);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(stderr(&again).contains("3 of 3 trials complete, 0 to run"), "{}", stderr(&again));
    assert_eq!(read_json(&out.join("manifest.json"))["run_id"], run_id, "the same run");
    assert_eq!(rows(&out.join("runs.jsonl")).len(), 3, "nothing ran twice");

    // Another campaign (one more trial), or another scenario: refused, nothing written.
    let other = campaign(&dir.path().join("other"), 4, "elengtis-fixture");
    let refused = go(&out, &other);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("holds a run of another campaign"), "{}", stderr(&refused));
    let scenario = config.with_file_name("support-note.yaml");
    let text = std::fs::read_to_string(&scenario).expect("scenario");
    let edited = text.replacen("title: Support note asks", "title: A support note asks", 1);
    assert_ne!(edited, text);
    std::fs::write(&scenario, edited).expect("edit");
    let refused = go(&out, &config);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("holds a run with another scenario `support-note`"), "{}", stderr(&refused));
    std::fs::write(&scenario, text).expect("restore");
    assert_eq!(rows(&out.join("runs.jsonl")).len(), 3);

    // What a try killed before its manifest leaves (an empty evidence/): a new run there.
    let early = dir.path().join("early");
    std::fs::create_dir_all(early.join("evidence")).expect("mkdir");
    let started = go(&early, &config);
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    assert_eq!(rows(&early.join("runs.jsonl")).len(), 3);
    // A directory holding anything else is not taken for one.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).expect("mkdir");
    std::fs::write(foreign.join("notes.txt"), "mine").expect("write");
    let refused = go(&foreign, &config);
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("has no manifest.json but holds notes.txt"), "{}", stderr(&refused));
    assert!(!foreign.join("manifest.json").exists());
    let both = elengtis(dir.path(), &["run", "--resume", "--resume-or-start", "--out", s(&out)]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
}
