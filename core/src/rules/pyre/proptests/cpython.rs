//! The translator against CPython itself: generated patterns of supported
//! constructs and subjects, searched by `python3`'s `re` and by
//! [`compile_pattern`], must agree on every search.
//!
//! Each test case is a batch of patterns with their subjects, answered by one
//! `python3` process (JSON in, JSON out); a failing pattern is then shrunk on
//! its own, one process per step. When `python3` (3.11 or newer, for
//! atomic groups and possessive repeats) is missing, the test is skipped with
//! a message, unless the `CI` environment variable is set, where it fails.

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy as _, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::Value;

use super::grammar::{self, Case};
use super::{compile_pattern, config};

/// Reads `[[pattern, [subject, ...]], ...]` and writes, for each pattern,
/// either `{"error": message}` or the list of `re.search(...) is not None`.
const ORACLE: &str = r#"
import json, re, sys, warnings
if sys.version_info < (3, 11):
    sys.stderr.write("python3 is %s; 3.11 or newer is needed\n" % sys.version.split()[0])
    sys.exit(3)
warnings.simplefilter("ignore")
answers = []
for pattern, subjects in json.loads(sys.stdin.buffer.read()):
    try:
        compiled = re.compile(pattern)
    except Exception as error:
        answers.append({"error": "%s: %s" % (type(error).__name__, error)})
        continue
    answers.append([compiled.search(subject) is not None for subject in subjects])
sys.stdout.write(json.dumps(answers))
"#;

/// Exit status of [`ORACLE`] for a Python that is too old.
const TOO_OLD: i32 = 3;

/// Longest time one batch may take in `python3`.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Longest time spent shrinking a failing case.
const SHRINK_TIME: Duration = Duration::from_secs(60);

/// Batches per run (`PROPTEST_CASES` overrides it).
const BATCHES: u32 = 4;

/// Patterns per batch, and subjects per pattern.
const PATTERNS: usize = 150;
const SUBJECTS: usize = 4;

#[derive(Debug)]
enum OracleError {
    /// `python3` cannot be run here, or is too old.
    Unavailable(String),
    /// It ran and failed.
    Failed(String),
}

/// CPython's answers for a batch, one process for all of it.
fn cpython(batch: &[Case]) -> Result<Vec<Value>, OracleError> {
    let input: Vec<(&str, &[String])> = batch.iter().map(|c| (c.pattern.as_str(), c.subjects.as_slice())).collect();
    let input = serde_json::to_vec(&input).map_err(|e| OracleError::Failed(e.to_string()))?;
    let mut child = Command::new("python3")
        .args(["-c", ORACLE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| OracleError::Unavailable(format!("cannot run python3: {e}")))?;
    let mut stdin = child.stdin.take().ok_or_else(|| OracleError::Failed("no stdin".to_owned()))?;
    let writer = thread::spawn(move || stdin.write_all(&input));
    let mut stdout = child.stdout.take().ok_or_else(|| OracleError::Failed("no stdout".to_owned()))?;
    let reader = thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).map(|_| out)
    });
    let mut stderr = child.stderr.take().ok_or_else(|| OracleError::Failed("no stderr".to_owned()))?;
    let error_reader = thread::spawn(move || {
        let mut out = String::new();
        stderr.read_to_string(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(OracleError::Failed(format!("python3 took longer than {TIMEOUT:?}")));
            }
            Err(e) => return Err(OracleError::Failed(e.to_string())),
        }
    };
    let _ = writer.join();
    let stdout = reader.join().map_err(|_| OracleError::Failed("reader panicked".to_owned()))?;
    let stderr = error_reader.join().map_err(|_| OracleError::Failed("reader panicked".to_owned()))?;
    let stderr = stderr.unwrap_or_default();
    if status.code() == Some(TOO_OLD) {
        return Err(OracleError::Unavailable(stderr.trim().to_owned()));
    }
    if !status.success() {
        return Err(OracleError::Failed(format!("python3 failed ({status}): {stderr}")));
    }
    let stdout = stdout.map_err(|e| OracleError::Failed(e.to_string()))?;
    let answers: Vec<Value> = serde_json::from_slice(&stdout).map_err(|e| OracleError::Failed(e.to_string()))?;
    if answers.len() != batch.len() {
        return Err(OracleError::Failed(format!("{} answers for {} patterns", answers.len(), batch.len())));
    }
    Ok(answers)
}

/// Every disagreement between CPython's answer and the translation for one
/// case.
fn disagreements(case: &Case, answer: &Value) -> Vec<String> {
    let pattern = &case.pattern;
    let expected = match answer {
        Value::Array(results) => results.iter().map(Value::as_bool).collect::<Option<Vec<bool>>>(),
        _ => None,
    };
    let (compiled, expected) = match (compile_pattern(pattern), expected) {
        (Err(_), None) => return Vec::new(),
        (Ok(compiled), Some(expected)) => (compiled, expected),
        (Err(error), Some(_)) => return vec![format!("{pattern:?}: CPython accepts it, we reject it: {error}")],
        (Ok(compiled), None) => {
            return vec![format!(
                "{pattern:?}: CPython rejects it ({}), we accept it as {:?}",
                answer.get("error").and_then(Value::as_str).unwrap_or("?"),
                compiled.translated()
            )];
        }
    };
    let mut found = Vec::new();
    for (subject, expected) in case.subjects.iter().zip(expected) {
        match compiled.search(subject) {
            Ok(ours) if ours == expected => {}
            Ok(_) => found.push(format!(
                "re.search({pattern:?}, {subject:?}): CPython {}, we {} (translated as {:?})",
                if expected { "matches" } else { "does not match" },
                if expected { "do not" } else { "match" },
                compiled.translated()
            )),
            Err(error) => found.push(format!("re.search({pattern:?}, {subject:?}): we fail: {error}")),
        }
    }
    found
}

/// Disagreements for one case, asking `python3` for it alone.
fn disagreements_alone(case: &Case) -> Vec<String> {
    match cpython(std::slice::from_ref(case)) {
        Ok(answers) => answers.first().map(|answer| disagreements(case, answer)).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Shrinks a failing case as proptest would, one `python3` run per step,
/// and returns the simplest failing case found with its disagreements.
fn shrink(tree: &mut impl ValueTree<Value = Case>, found: Vec<String>) -> (Case, Vec<String>) {
    let mut simplest = (tree.current(), found);
    let started = Instant::now();
    if !tree.simplify() {
        return simplest;
    }
    while started.elapsed() < SHRINK_TIME {
        let candidate = tree.current();
        let found = disagreements_alone(&candidate);
        let more = if found.is_empty() {
            tree.complicate()
        } else {
            simplest = (candidate, found);
            tree.simplify()
        };
        if !more {
            break;
        }
    }
    simplest
}

/// Generated patterns of supported constructs, each searched on generated
/// subjects by CPython and by the translation: the answers agree. A failure
/// reports the disagreements of the first failing pattern, shrunk.
#[test]
fn searches_agree_with_cpython() {
    match cpython(&[]) {
        Ok(_) => {}
        Err(OracleError::Unavailable(reason)) => {
            assert!(std::env::var_os("CI").is_none(), "CI is set but CPython cannot be used as the oracle: {reason}");
            eprintln!("skipped: CPython cannot be used as the oracle: {reason}");
            return;
        }
        Err(OracleError::Failed(reason)) => panic!("python3 failed on an empty batch: {reason}"),
    }
    let config = config(BATCHES);
    let strategy = grammar::case(SUBJECTS);
    let mut runner = TestRunner::new(config.clone());
    for _ in 0..config.cases {
        let mut trees: Vec<_> =
            (0..PATTERNS).map(|_| strategy.new_tree(&mut runner).expect("a generated case")).collect();
        let batch: Vec<Case> = trees.iter().map(ValueTree::current).collect();
        let answers = cpython(&batch).unwrap_or_else(|e| panic!("python3 failed: {e:?}"));
        let failure = batch
            .iter()
            .zip(&answers)
            .map(|(case, answer)| disagreements(case, answer))
            .enumerate()
            .find(|(_, found)| !found.is_empty());
        if let Some((index, found)) = failure {
            let original = format!("{:?}", batch[index]);
            let (simplest, found) = shrink(&mut trees[index], found);
            panic!(
                "{} disagreement(s) with CPython\n  generated: {original}\n  shrunk: {simplest:?}\n{}",
                found.len(),
                found.join("\n")
            );
        }
    }
}
