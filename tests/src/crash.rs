//! The crash-safety matrix, shared by the stdio (`tests/cli/crash.rs`) and Docker
//! (`tests/docker/crash.rs`) tests: run a campaign with a crashpoint armed
//! (`ELENGTIS_CRASHPOINT`, see `orchestrator/src/crashpoint.rs`), SIGKILL the runner when it
//! reports that it is there, and check what the results directory holds before and after
//! `run --resume`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{ChildGuard, elengtis_cmd, files_under, read_json, stderr, stdout};

/// A runner killed with SIGKILL at a crashpoint.
#[derive(Debug)]
pub struct Crashed {
    /// The value of `ELENGTIS_CRASHPOINT`.
    pub crashpoint: String,
    /// The results directory.
    pub out: PathBuf,
    /// The run id (from the manifest).
    pub run_id: String,
    /// `runs.jsonl` as the kill left it.
    pub log: Vec<u8>,
    /// What the runner printed on stderr before it was killed.
    pub stderr: String,
    /// From the start of the runner to the kill.
    pub elapsed: Duration,
}

impl Crashed {
    /// Bytes of `runs.jsonl` up to its last newline (the rows whose write completed).
    pub fn complete_len(&self) -> usize {
        self.log.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)
    }

    /// Rows whose write completed before the kill.
    pub fn complete_rows(&self) -> usize {
        self.log[..self.complete_len()].iter().filter(|&&b| b == b'\n').count()
    }

    /// Bytes of a torn final row (no newline) left by the kill.
    pub fn torn_bytes(&self) -> usize {
        self.log.len() - self.complete_len()
    }
}

/// Start `elengtis <args>` in `cwd` with `ELENGTIS_CRASHPOINT=<crashpoint>`, wait (up to
/// `timeout`) until it reports the crashpoint on stderr, SIGKILL it and reap it. Panics if the
/// runner ends or the timeout passes before the crashpoint is reached.
pub fn crash_at(cwd: &Path, args: &[&str], out: &Path, crashpoint: &str, timeout: Duration) -> Crashed {
    crash_at_with(cwd, args, &[], out, crashpoint, timeout)
}

/// [`crash_at`] with `env` set for the runner.
pub fn crash_at_with(
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    out: &Path,
    crashpoint: &str,
    timeout: Duration,
) -> Crashed {
    let mut command = elengtis_cmd(cwd, args);
    command.envs(env.iter().copied());
    let begun = Instant::now();
    let mut runner = ChildGuard::new(
        command
            .env("ELENGTIS_CRASHPOINT", crashpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("failed to start elengtis"),
    );
    let pipe = runner.child().stderr.take().expect("stderr is piped");
    let (lines, receive) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let phase = crashpoint.split(':').next().unwrap_or(crashpoint);
    let wanted = format!("elengtis crashpoint reached: {phase}");
    let mut text = String::new();
    let reached = loop {
        let left = timeout.saturating_sub(begun.elapsed());
        match receive.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
                if line == wanted {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let elapsed = begun.elapsed();
    // Also when the crashpoint was not reached in time: never wait for a runner that may be
    // blocked in it.
    let _ = runner.child().kill();
    let status = runner.child().wait().expect("failed to reap the runner");
    assert!(
        reached,
        "{crashpoint}: the runner did not reach the crashpoint within {timeout:?} (exit status {status}); stderr:\n{text}"
    );
    assert_eq!(status.signal(), Some(9), "{crashpoint}: the runner must have died of the SIGKILL; stderr:\n{text}");
    while let Ok(line) = receive.recv_timeout(Duration::from_millis(200)) {
        text.push_str(&line);
        text.push('\n');
    }
    let manifest = read_json(&out.join("manifest.json"));
    let run_id = manifest["run_id"].as_str().expect("the manifest has a run_id").to_owned();
    let log = std::fs::read(out.join("runs.jsonl")).expect("failed to read runs.jsonl");
    Crashed { crashpoint: crashpoint.to_owned(), out: out.to_owned(), run_id, log, stderr: text, elapsed }
}

/// Every file of a results directory parses: `manifest.json` and the evidence documents are
/// JSON, every complete line of `runs.jsonl` is a JSON object, `summary.txt` is text,
/// `seal.json` is a seal; anything else (a temporary file, a stray document, a lock file) fails. With `torn_ok`,
/// `runs.jsonl` may end in a torn row (no newline); otherwise it must end on a newline.
/// Returns the evidence files (relative to `out`).
pub fn check_files(out: &Path, torn_ok: bool) -> BTreeSet<String> {
    files_checked(out, torn_ok, false)
}

/// [`check_files`] of a run killed a moment ago, before `run --resume`: also a temporary
/// evidence document of the batch being recorded when the kill came (`evidence/.<name>.tmp`,
/// never renamed into place, so never recorded), which the resume removes. A kill in a
/// trial's own phases races the group-commit thread recording the trial before it.
pub fn check_files_of_killed_run(out: &Path, torn_ok: bool) -> BTreeSet<String> {
    files_checked(out, torn_ok, true)
}

fn files_checked(out: &Path, torn_ok: bool, temps_ok: bool) -> BTreeSet<String> {
    let mut evidence = BTreeSet::new();
    for path in files_under(out) {
        let rel = path.strip_prefix(out).expect("under out").to_string_lossy().into_owned();
        match rel.as_str() {
            _ if temps_ok && rel.starts_with("evidence/.") && rel.ends_with(".tmp") => {}
            "seal.json" => {
                let seal = read_json(&path);
                assert!(seal["prev_row_sha256"].is_string(), "{rel} is not a seal: {seal}");
            }
            "manifest.json" => {
                read_json(&path);
            }
            "summary.txt" => {
                let text = std::fs::read_to_string(&path).expect("summary.txt is UTF-8");
                assert!(text.contains("trials: "), "{rel} is not a summary:\n{text}");
            }
            "runs.jsonl" => {
                let bytes = std::fs::read(&path).expect("failed to read runs.jsonl");
                let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
                assert!(torn_ok || complete == bytes.len(), "runs.jsonl ends in a torn row");
                for (i, line) in bytes[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
                    let row: Value = serde_json::from_slice(line)
                        .unwrap_or_else(|e| panic!("runs.jsonl line {} is not JSON: {e}", i + 1));
                    assert!(row.is_object(), "runs.jsonl line {} is not an object", i + 1);
                }
            }
            _ if rel.starts_with("evidence/") && rel.ends_with(".json") && !rel[9..].starts_with('.') => {
                let doc = read_json(&path);
                assert!(doc["attempt_id"].is_string(), "{rel} is not an evidence document");
                evidence.insert(rel);
            }
            // The log of live stdio targets, appended to by their guards (which may still be
            // cleaning up after the runner died): JSON lines, the last one possibly torn.
            "stdio-live/guards.jsonl" => {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                for line in bytes[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    let entry = serde_json::from_slice::<elengtis_stdio_guard::live::Entry>(line);
                    assert!(entry.is_ok(), "{rel}: not a stdio record: {}", String::from_utf8_lossy(line));
                }
            }
            _ => panic!("unexpected file in the results directory: {rel}"),
        }
    }
    evidence
}

/// What `run --resume` found and did after a crash.
#[derive(Debug)]
pub struct ResumeFindings {
    /// Complete rows before the resume.
    pub rows_before: usize,
    /// Rows after it.
    pub rows_after: usize,
    /// Bytes of the torn final row that resume cut.
    pub torn_cut: usize,
    /// Evidence files that no row references (left by a kill between evidence and row).
    pub orphan_evidence: usize,
    /// The leftovers note resume printed, if any.
    pub leftovers_note: Option<String>,
}

/// Check a resumed run against the crash it followed: exit 0; the rows written before the
/// crash kept byte for byte; exactly one row per trial of the matrix, each complete, with
/// unique attempt ids (no lost trial, no duplicate); every file parses; every row's evidence
/// exists and belongs to that attempt; a torn final row was cut and reported (and only then).
pub fn check_resumed(crashed: &Crashed, resumed: &Output, trial_ids: &[String]) -> ResumeFindings {
    let context = || format!("{}: stdout:\n{}\nstderr:\n{}", crashed.crashpoint, stdout(resumed), stderr(resumed));
    assert_eq!(resumed.status.code(), Some(0), "{}", context());
    let log = std::fs::read(crashed.out.join("runs.jsonl")).expect("failed to read runs.jsonl");
    assert!(
        log.starts_with(&crashed.log[..crashed.complete_len()]),
        "{}: rows written before the crash changed",
        crashed.crashpoint
    );
    let evidence = check_files(&crashed.out, false);
    let rows: Vec<Value> = log
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("row is JSON"))
        .collect();
    let mut by_trial: BTreeMap<String, usize> = BTreeMap::new();
    let mut referenced = BTreeSet::new();
    for row in &rows {
        let trial = row["trial_id"].as_str().expect("trial_id").to_owned();
        *by_trial.entry(trial).or_default() += 1;
        assert_eq!(row["run_id"], crashed.run_id.as_str(), "{row}");
        assert_eq!(row["evidence_status"], "complete", "{}: {row}", crashed.crashpoint);
        let name = row["evidence"].as_str().expect("evidence");
        assert!(evidence.contains(name), "{}: row points at a missing evidence file {name}", crashed.crashpoint);
        let doc = read_json(&crashed.out.join(name));
        assert_eq!(doc["attempt_id"], row["attempt_id"], "{name} belongs to another attempt");
        referenced.insert(name.to_owned());
    }
    let expected: BTreeMap<String, usize> = trial_ids.iter().map(|t| (t.clone(), 1)).collect();
    assert_eq!(by_trial, expected, "{}: every trial exactly once", crashed.crashpoint);
    let attempts: BTreeSet<&str> = rows.iter().filter_map(|r| r["attempt_id"].as_str()).collect();
    assert_eq!(attempts.len(), rows.len(), "attempt ids are unique");
    let err = stderr(resumed);
    let torn = crashed.torn_bytes();
    if torn > 0 {
        assert!(
            err.contains(&format!("cut a torn final row ({torn} bytes at offset {}", crashed.complete_len())),
            "{}",
            context()
        );
    } else {
        assert!(!err.contains("torn final row"), "{}", context());
    }
    ResumeFindings {
        rows_before: crashed.complete_rows(),
        rows_after: rows.len(),
        torn_cut: torn,
        orphan_evidence: evidence.difference(&referenced).count(),
        leftovers_note: err.lines().find(|l| l.contains("removed leftovers")).map(str::to_owned),
    }
}
