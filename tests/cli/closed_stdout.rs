//! A closed stdout (`elengtis … | head -1`): every command ends quietly, as a Unix filter
//! does — no panic, no backtrace — and nothing it recorded is lost. A command whose work
//! succeeded exits 141, as a shell shows a filter killed by SIGPIPE; one that failed for its own
//! reason keeps its own exit code (docs/exit-codes.md).

use std::path::Path;
use std::process::{Output, Stdio};

use elengtis_tests::{elengtis, elengtis_cmd, rows, scratch, stderr, stdout, workspace};

/// 128 + SIGPIPE: what a shell shows for a filter whose reader went away.
const STDOUT_CLOSED: i32 = 141;

/// Run `elengtis` with its stdout a pipe whose reading end is already closed.
fn with_closed_stdout(cwd: &Path, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    elengtis_cmd(cwd, args).stdout(Stdio::from(writer)).stderr(Stdio::piped()).output().expect("failed to run elengtis")
}

fn assert_quiet(what: &str, output: &Output) {
    let err = stderr(output);
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{what}: {err}");
    assert!(!err.contains("Broken pipe"), "{what}: a closed stdout is not an error to report: {err}");
}

/// Ended as a filter whose reader went away.
fn assert_filter_end(what: &str, output: &Output) {
    assert_quiet(what, output);
    assert_eq!(output.status.code(), Some(STDOUT_CLOSED), "{what}: {:?}\n{}", output.status, stderr(output));
}

#[test]
fn a_run_whose_stdout_closes_records_everything_and_ends_as_a_filter() {
    let dir = scratch();
    let out = dir.path().join("demo");
    let o = out.to_str().expect("utf-8");
    let output = with_closed_stdout(dir.path(), &["example", "--trials", "2", "--out", o]);
    assert_filter_end("example", &output);
    // Nothing recorded is lost: both trials are there and the directory verifies.
    assert_eq!(rows(&out.join("runs.jsonl")).len(), 2);
    let verify = elengtis(dir.path(), &["verify", o]);
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));

    // `run` itself, text and JSON, and a resume of a complete run.
    let campaign = out.join("example/campaign.yaml");
    let c = campaign.to_str().expect("utf-8");
    for (name, extra) in [("run", &[][..]), ("run-json", &["--json"][..])] {
        let run_out = dir.path().join(name);
        let mut args = vec!["run", "--config", c, "--out", run_out.to_str().expect("utf-8"), "--trials", "2"];
        args.extend(extra);
        let output = with_closed_stdout(dir.path(), &args);
        assert_filter_end(name, &output);
        let verify = elengtis(dir.path(), &["verify", run_out.to_str().expect("utf-8")]);
        assert_eq!(verify.status.code(), Some(0), "{name}: {}{}", stdout(&verify), stderr(&verify));
    }
    let output = with_closed_stdout(dir.path(), &["run", "--resume", "--out", o]);
    assert_filter_end("run --resume", &output);

    // The commands that read results.
    let analysis = dir.path().join("analysis");
    let report = dir.path().join("report.html");
    let commands: Vec<Vec<&str>> = vec![
        vec!["verify", o],
        vec!["verify", "--json", o],
        vec!["analyze", "--input", o, "--out", analysis.to_str().expect("utf-8")],
        vec!["report", "--input", o, "--out", report.to_str().expect("utf-8")],
    ];
    for args in &commands {
        let output = with_closed_stdout(dir.path(), args);
        assert_filter_end(&args.join(" "), &output);
    }
    assert!(analysis.join("summary.json").is_file() && report.is_file(), "their files are written all the same");
}

#[test]
fn every_other_command_that_prints_ends_as_a_filter() {
    let dir = scratch();
    let campaign = workspace().join("scenarios/examples/support-note/campaign.yaml");
    let c = campaign.to_str().expect("utf-8");
    let schemas = dir.path().join("schemas");
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["--version"],
        vec!["validate", "--help"],
        vec!["example", "--list"],
        vec!["validate", c],
        vec!["validate", "--json", c],
        vec!["schema", "--out", schemas.to_str().expect("utf-8")],
    ];
    for args in &commands {
        let output = with_closed_stdout(dir.path(), args);
        assert_filter_end(&args.join(" "), &output);
    }
}

/// A command that fails for its own reason keeps its exit code: the closed stdout does not
/// hide it.
#[test]
fn a_failure_keeps_its_own_exit_code_when_stdout_is_closed() {
    let dir = scratch();
    let bad = elengtis_tests::write(dir.path(), "bad.yaml", "schema_version: 1\ntrials: 0\n");
    let output = with_closed_stdout(dir.path(), &["validate", "--json", bad.to_str().expect("utf-8")]);
    assert_quiet("validate --json of an invalid campaign", &output);
    assert_eq!(output.status.code(), Some(3), "{:?}", output.status);
    let missing = dir.path().join("missing");
    let output = with_closed_stdout(dir.path(), &["verify", missing.to_str().expect("utf-8")]);
    assert_quiet("verify of a missing directory", &output);
    assert_eq!(output.status.code(), Some(4), "{:?} {}", output.status, stderr(&output));
}
