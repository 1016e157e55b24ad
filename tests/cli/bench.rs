//! `elengtis bench --original EXE --original-image IMAGE`: the arguments are checked before
//! the engine is reached, and the original is run as `EXE run --config … --out …` with its
//! own directory first on `PATH`; its failure fails the benchmark before any trial of ours.
//! Against a fake engine (no Docker needed); the comparison itself is measured by
//! tests/perf/compare-original.sh and `elengtis bench` on a real engine.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use elengtis_tests::fake_engine::{Behaviour, FakeEngine, patched_version};
use elengtis_tests::{ChildGuard, elengtis_cmd, scratch, stderr, write};

const USAGE: i32 = 2;

fn bench(engine: &FakeEngine, dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["bench", "--short", "--json"];
    args.extend_from_slice(extra);
    let mut cmd = elengtis_cmd(dir, &args);
    cmd.env("DOCKER_HOST", engine.docker_host());
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("failed to run elengtis");
    ChildGuard::new(child).wait_output(Duration::from_secs(60))
}

fn executable(dir: &Path, name: &str, body: &str) -> String {
    let path = write(dir, name, body);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

#[test]
fn bench_original_arguments_are_refused_before_the_engine_is_reached() {
    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    let exe = executable(dir.path(), "venv/bin/elengtis", "#!/bin/sh\nexit 0\n");
    let plain = write(dir.path(), "plain", "not executable").display().to_string();
    let missing = dir.path().join("nowhere/elengtis").display().to_string();
    let cases: [(&str, Vec<&str>, &str); 8] = [
        (
            "--prove-only with --original",
            vec!["--prove-only", "--original", &exe, "--original-image", "img:1"],
            "--prove-only",
        ),
        ("--prove-only with --stdio-only", vec!["--prove-only", "--stdio-only"], "--prove-only"),
        ("without --original-image", vec!["--original", &exe], "--original-image"),
        ("without --original", vec!["--original-image", "img:1"], "--original <EXE>"),
        (
            "with --provider-only",
            vec!["--provider-only", "--original", &exe, "--original-image", "img:1"],
            "--provider-only",
        ),
        ("a missing EXE", vec!["--original", &missing, "--original-image", "img:1"], "failed to read --original"),
        (
            "a file that is not executable",
            vec!["--original", &plain, "--original-image", "img:1"],
            "is not an executable file",
        ),
        ("an image with a space", vec!["--original", &exe, "--original-image", "img 1"], "must be an image reference"),
    ];
    for (case, extra, needle) in cases {
        let out = bench(&engine, dir.path(), &extra);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(USAGE), "{case}: {err}");
        assert!(err.contains(needle), "{case}: {needle:?} missing from:\n{err}");
    }
    assert_eq!(engine.requests(), Vec::<String>::new(), "the engine was reached");
}

#[test]
fn bench_runs_the_original_with_its_directory_on_path_and_fails_when_it_fails() {
    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    let record = dir.path().join("record.txt");
    let exe = executable(
        dir.path(),
        "venv/bin/elengtis",
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{0}'\nprintf 'PATH=%s\\n' \"$PATH\" >> '{0}'\ncat \"$3\" >> '{0}'\necho 'refused: no such image' >&2\nexit 3\n",
            record.display()
        ),
    );
    let out = bench(&engine, dir.path(), &["--original", &exe, "--original-image", "elengtis/original-fixture:0.1.0"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("the original failed"), "{err}");
    assert!(err.contains("refused: no such image"), "its output is shown: {err}");
    assert!(out.stdout.is_empty(), "no report when the comparison fails: {}", String::from_utf8_lossy(&out.stdout));
    let record = std::fs::read_to_string(&record).expect("the original was run");
    let lines: Vec<&str> = record.lines().collect();
    assert_eq!(lines[0], "run", "{record}");
    assert_eq!(lines[1], "--config", "{record}");
    assert!(lines[2].ends_with("campaign.yaml"), "{record}");
    assert_eq!(lines[3], "--out", "{record}");
    let bin = Path::new(&exe).parent().expect("bin").display().to_string();
    assert!(lines[5].starts_with(&format!("PATH={bin}:")), "{record}");
    // The campaign it was given: the image, the trials of --short, the original fixture's command.
    assert!(record.contains("image: elengtis/original-fixture:0.1.0"), "{record}");
    assert!(record.contains("trials: 3"), "{record}");
    assert!(record.contains("--host, 0.0.0.0"), "{record}");
    // Only the engine gate's reads reached the engine: no trial of ours started.
    assert_eq!(engine.other_requests(), Vec::<String>::new());
}

#[test]
fn bench_stdio_only_prints_throughput_at_jobs_1_and_4_against_its_floor_without_docker() {
    let dir = scratch();
    // No engine at all: the stdio figures need none.
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--stdio-only", "--short"];
        args.extend_from_slice(extra);
        let mut cmd = elengtis_cmd(dir.path(), &args);
        cmd.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("failed to run elengtis");
        ChildGuard::new(child).wait_output(Duration::from_secs(240))
    };
    let out = run(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["trials"], 30, "{report}");
    // The keys a reader compares, each a positive figure; the times themselves are never asserted.
    for key in [
        "trials_per_second_jobs1",
        "trials_per_second_jobs4",
        "wall_s_jobs1",
        "wall_s_jobs4",
        "trial_ms_median",
        "floor_per_second_jobs1",
        "floor_per_second_jobs4",
        "jobs1_floor_ratio",
        "jobs4_floor_ratio",
        "runner_peak_rss_mb",
    ] {
        let value = report[key].as_f64().unwrap_or_else(|| panic!("{key} missing or not a number: {report}"));
        assert!(value.is_finite() && value > 0.0, "{key} = {value}");
    }
    // The ratios are the throughputs over the floors measured in the same run.
    let ratio = report["trials_per_second_jobs4"].as_f64().unwrap_or_default()
        / report["floor_per_second_jobs4"].as_f64().unwrap_or(f64::NAN);
    assert!((ratio - report["jobs4_floor_ratio"].as_f64().unwrap_or_default()).abs() < 1e-9, "{report}");
    let text = run(&[]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let text = String::from_utf8_lossy(&text.stdout);
    for needle in ["trials/s at --jobs 1", "trials/s at --jobs 4", "stdio floor", "runner peak RSS"] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}
