//! Malformed MCP input (issue 5): every case of `elengtis-malformed` ends as its expected,
//! classified outcome within the deadlines, with no panic and bounded runner memory. One
//! campaign, one stdio target per case, all trials at once.
//!
//! The expectations below are also the table in `docs/malformed-input.md`; a test keeps them
//! in sync.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant};

use elengtis_tests::{bin, elengtis_cmd, rows, scratch, workspace, write};

/// How a case ends, as the trial row records it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// The trial runs to the end with no error (the server's quirk is tolerated).
    Completes,
    /// `protocol`: a broken frame or an answer that is not what was asked for.
    Protocol,
    /// `timeout`: no (acceptable) answer within the connect or call deadline.
    Timeout,
    /// `closed`: the server closed its output or stopped reading its input.
    Closed,
    /// `initialize`: rmcp refused the handshake (an error answer, a wrong id).
    Initialize,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Completes => "completes",
            Kind::Protocol => "protocol",
            Kind::Timeout => "timeout",
            Kind::Closed => "closed",
            Kind::Initialize => "initialize",
        }
    }

    /// Whether an error message is of this class (the wording of `TargetError`).
    fn matches(self, detail: &str) -> bool {
        let protocol = detail.contains(": protocol violation: ");
        let timeout = detail.contains(": no answer within ");
        let closed = detail.contains(": the server closed the connection");
        match self {
            Kind::Completes => false,
            Kind::Protocol => protocol,
            Kind::Timeout => timeout,
            Kind::Closed => closed,
            Kind::Initialize => {
                detail.starts_with("failed to initialize the MCP session: ") && !protocol && !timeout && !closed
            }
        }
    }
}

use Kind::{Closed, Completes, Initialize, Protocol, Timeout};

/// Case → expected outcome and a phrase of the error that names what was wrong.
const EXPECTED: &[(&str, Kind, &str)] = &[
    ("ok", Completes, ""),
    ("not-json", Timeout, "line 1 `this is not json`"),
    ("truncated-json", Timeout, "EOF while parsing"),
    ("json-array", Protocol, "line 1 is not a JSON-RPC message"),
    ("json-number", Protocol, "line 1 is not a JSON-RPC message"),
    ("json-string", Protocol, "line 1 is not a JSON-RPC message"),
    ("json-null", Protocol, "line 1 is not a JSON-RPC message"),
    ("wrong-jsonrpc-version", Protocol, "line 1 is not a JSON-RPC message"),
    ("missing-jsonrpc", Protocol, "line 1 is not a JSON-RPC message"),
    ("unknown-id", Initialize, "expected 0, got 999999"),
    ("mismatched-id-type", Completes, ""),
    ("null-id", Protocol, "line 1 is not a JSON-RPC message"),
    ("duplicate-answers", Completes, ""),
    ("result-and-error", Protocol, "line 1 is not a JSON-RPC message"),
    ("neither-result-nor-error", Protocol, "line 1 is not a JSON-RPC message"),
    ("malformed-error-object", Protocol, "line 1 is not a JSON-RPC message"),
    ("error-answer", Initialize, "the malformed server refuses to start"),
    ("batch-answer", Protocol, "line 1 is not a JSON-RPC message"),
    ("invalid-utf8", Timeout, "invalid unicode code point"),
    ("nul-bytes", Timeout, "`\\0\\0\\0\\0"),
    ("banner-then-ok", Completes, ""),
    ("bom-then-ok", Completes, ""),
    ("empty-lines", Completes, ""),
    ("crlf-frames", Completes, ""),
    ("split-writes", Completes, ""),
    ("slow-drip-endless", Timeout, "failed to initialize the MCP session: no answer within"),
    ("long-line-64mib", Protocol, "line 1 is longer than the 16777216 byte frame limit"),
    ("endless-line", Protocol, "line 1 is longer than the 16777216 byte frame limit"),
    ("oversized-valid-frame", Protocol, "line 1 is longer than the 16777216 byte frame limit"),
    ("huge-valid-frame", Completes, ""),
    ("deep-nesting", Timeout, "recursion limit exceeded"),
    ("deep-nesting-in-result", Timeout, "recursion limit exceeded"),
    ("notification-flood", Completes, ""),
    ("custom-notification-flood", Completes, ""),
    ("requests-before-init", Completes, ""),
    ("requests-after-init", Completes, ""),
    ("ping-flood", Completes, ""),
    ("init-wrong-protocol-version", Protocol, "protocol version `1999-01-01`"),
    ("init-missing-capabilities", Protocol, "not a valid initialize result: missing field `capabilities`"),
    ("init-serverinfo-not-object", Protocol, "not a valid initialize result"),
    ("init-result-not-object", Protocol, "not a valid initialize result"),
    ("never-answers-initialize", Timeout, "failed to initialize the MCP session: no answer within"),
    ("exit-at-once", Closed, "failed to initialize the MCP session"),
    ("exit-after-initialize", Closed, "failed to initialize the MCP session"),
    ("close-stdout-keep-running", Closed, "failed to initialize the MCP session"),
    ("tools-list-never-answers", Timeout, "failed to list tools: no answer within"),
    ("tools-list-huge", Protocol, "holds more than 200000 JSON values"),
    ("tools-list-endless-pages", Timeout, "failed to list tools: no answer within"),
    ("tools-list-schema-not-object", Protocol, "not a valid tools/list result"),
    ("tools-list-duplicate-names", Protocol, "the tool `read_note` more than once"),
    ("tools-list-name-not-string", Protocol, "not a valid tools/list result"),
    ("tools-list-not-array", Protocol, "not a valid tools/list result"),
    ("tools-list-wrong-result", Protocol, "a result of another MCP type"),
    ("call-unknown-content-type", Protocol, "unknown variant `hologram`"),
    ("call-iserror-not-bool", Protocol, "expected a boolean"),
    ("call-content-not-array", Protocol, "not a valid tools/call result"),
    ("call-never-answers", Timeout, "failed to call tool `read_note`: no answer within"),
    ("exit-mid-call", Closed, "in the middle of a frame"),
    ("stderr-flood", Completes, ""),
];

/// The runner's deadlines (`Limits::default()`): connect, call, shutdown.
const CONNECT: Duration = Duration::from_secs(10);
const CALL: Duration = Duration::from_secs(30);
const SHUTDOWN: Duration = Duration::from_secs(2);
/// Scheduling slack on a loaded 2-core machine running every case at once.
const SLACK: Duration = Duration::from_secs(30);
/// The runner's peak resident memory, with every case (64 MiB lines included) at once.
const PEAK_RSS_KIB: u64 = 256 * 1024;

fn cases() -> Vec<(String, String)> {
    let out = std::process::Command::new(bin("elengtis-malformed")).arg("--list").output().expect("run --list");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8 list")
        .lines()
        .map(|l| {
            let (name, about) = l.split_once('\t').expect("name<TAB>about");
            (name.to_owned(), about.to_owned())
        })
        .collect()
}

fn campaign(dir: &Path, names: &[String]) -> std::path::PathBuf {
    let scenario = std::fs::read_to_string(workspace().join("scenarios/examples/support-note/support-note.yaml"))
        .expect("read the support-note scenario");
    write(dir, "support-note.yaml", &scenario);
    let mut text = String::from("schema_version: 1\ntrials: 1\nstep_budget: 4\nengine: reference\ntargets:\n");
    for name in names {
        let _ = write!(
            text,
            "  - id: {name}\n    transport:\n      type: stdio\n      command: elengtis-malformed\n      args: [--case, {name}]\n    bindings:\n      support-note:\n        read_note: read_note\n        read_credential: read_demo_credential\n        submit_credential: submit_demo_credential\n        verify_collector: read_collector\n"
        );
    }
    text.push_str("scenarios: [support-note.yaml]\n");
    write(dir, "campaign.yaml", &text)
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn every_malformed_case_ends_classified_in_time_without_panic_and_with_bounded_memory() {
    let listed = cases();
    let names: Vec<String> = listed.iter().map(|(n, _)| n.clone()).collect();
    assert!(names.len() >= 40, "the corpus has {} cases", names.len());
    let expected: Vec<&str> = EXPECTED.iter().map(|(n, ..)| *n).collect();
    assert_eq!(names, expected, "every listed case has exactly one expectation, in order");

    let dir = scratch();
    let config = campaign(dir.path(), &names);
    let out = dir.path().join("results");
    let started = Instant::now();
    let mut child = elengtis_cmd(
        dir.path(),
        &["run", "--config", config.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8"), "--jobs", "64"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("start elengtis run");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    // Every trial runs at once: the run takes at most one connect and one call deadline,
    // plus teardown (TERM, then KILL) and scheduling slack.
    let bound = CONNECT + CALL + 3 * SHUTDOWN + SLACK;
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = vm_hwm_kib(child.id()) {
            peak = peak.max(hwm);
        }
        if let Some(status) = child.try_wait().expect("wait for elengtis") {
            break status;
        }
        if started.elapsed() > 2 * bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not end within {:?}", 2 * bound);
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let elapsed = started.elapsed();
    let stderr = stderr_reader.join().expect("stderr reader");
    assert!(!stderr.contains("panicked"), "the runner panicked:\n{stderr}");
    // Incomplete attempts make the run exit non-zero; it must still be an orderly end.
    assert!(status.code().is_some(), "the runner was killed: {status:?}\n{stderr}");
    assert!(elapsed <= bound, "the run took {elapsed:?}, more than {bound:?}");
    assert!(peak > 0, "VmHWM of the runner was never read");
    assert!(peak < PEAK_RSS_KIB, "the runner's peak RSS was {peak} KiB (bound {PEAK_RSS_KIB} KiB)");
    eprintln!("malformed corpus: {} cases in {elapsed:?}, runner peak RSS {} MiB", names.len(), peak / 1024);

    let rows = rows(&out.join("runs.jsonl"));
    assert_eq!(rows.len(), names.len(), "one row per case");
    let mut failures = Vec::new();
    for (name, kind, phrase) in EXPECTED {
        let row = rows.iter().find(|r| r["target"] == *name).unwrap_or_else(|| panic!("no row for `{name}`"));
        let errors: Vec<&str> =
            row["errors"].as_array().expect("errors").iter().filter_map(|e| e["detail"].as_str()).collect();
        let duration = row["duration_ms"].as_f64().expect("duration_ms");
        if duration > (CONNECT + CALL + 3 * SHUTDOWN + SLACK).as_secs_f64() * 1000.0 {
            failures.push(format!("{name}: took {duration} ms"));
        }
        match kind {
            Completes => {
                if !errors.is_empty() || row["evidence_status"] != "complete" {
                    failures.push(format!("{name}: expected to complete, got {errors:?} ({})", row["evidence_status"]));
                }
            }
            _ => {
                if row["evidence_status"] == "complete" {
                    failures.push(format!("{name}: expected an incomplete attempt, got {row}"));
                }
                if !errors.iter().any(|e| kind.matches(e) && e.contains(phrase)) {
                    failures
                        .push(format!("{name}: expected a `{}` error naming `{phrase}`, got {errors:?}", kind.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} case(s) ended unexpectedly:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_documented_case_table_matches_the_corpus() {
    let doc =
        std::fs::read_to_string(workspace().join("docs/malformed-input.md")).expect("read docs/malformed-input.md");
    let listed = cases();
    let table: Vec<(String, String, String)> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (cells.len() == 3).then(|| {
                (
                    cells[0].trim_end_matches('`').to_owned(),
                    cells[1].to_owned(),
                    cells[2].trim_end_matches(" |").trim_matches('`').to_owned(),
                )
            })
        })
        .collect();
    let want: Vec<(String, String, String)> = listed
        .iter()
        .map(|(name, about)| {
            let kind = EXPECTED.iter().find(|(n, ..)| n == name).map_or("?", |(_, k, _)| k.name());
            (name.clone(), about.clone(), kind.to_owned())
        })
        .collect();
    assert_eq!(table, want, "docs/malformed-input.md lists every case, what it does and its outcome, in order");
}
