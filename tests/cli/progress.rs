//! What a run shows while it works: the event stream `--events FILE` writes (one JSON object
//! per line: run started, each trial started, its phases in order, finished with the outcome
//! its row records, run finished), the progress display drawn on an interactive terminal (a
//! real one: a detached tmux session) and cleared before the summary, and its absence when
//! stderr is not a terminal or with `--quiet`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use elengtis_tests::{bin, copy_example, elengtis, read_json, rows, scratch, stderr, stdout, wait_until, workspace};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The phases of an attempt that runs to the end, in order (docs/events.md).
pub const PHASES: [&str; 7] = ["launch", "setup", "exercise", "judge", "verify", "cleanup", "teardown"];

/// The support-note example (stdio fixture, the scripted `comply` model) with `trials`
/// trials, its target started through `command`.
fn campaign(dir: &Path, trials: u32, command: &str) -> PathBuf {
    let path = copy_example("support-note", &dir.join("campaign"));
    let text = std::fs::read_to_string(&path).expect("read campaign");
    assert!(text.contains("trials: 1\n") && text.contains("command: elengtis-fixture\n"), "{text}");
    let text = text.replacen("trials: 1\n", &format!("trials: {trials}\n"), 1).replacen(
        "command: elengtis-fixture\n",
        &format!("command: '{command}'\n"),
        1,
    );
    std::fs::write(&path, text).expect("write campaign");
    path
}

/// A campaign whose every trial takes at least `delay` seconds: the fixture is started
/// through a shell script that sleeps first.
fn slow_campaign(dir: &Path, trials: u32, delay: &str) -> PathBuf {
    let script = dir.join("slow-fixture");
    std::fs::write(&script, format!("#!/bin/sh\nsleep {delay}\nexec '{}' \"$@\"\n", s(&bin("elengtis-fixture"))))
        .expect("write the wrapper");
    let mut perms = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod the wrapper");
    campaign(dir, trials, s(&script))
}

/// The lines of an events file, each parsed.
fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("read the events file");
    assert!(text.ends_with('\n'), "every line of the events file ends with a newline:\n{text}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("an events line is not JSON ({e}): {l}")))
        .collect()
}

/// Whether `ts` reads as an RFC 3339 UTC time (`2026-01-02T03:04:05.678Z`).
fn rfc3339_utc(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let frac = b.get(19..b.len().saturating_sub(1)).unwrap_or_default();
    b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && (frac.is_empty() || (frac[0] == b'.' && frac.len() > 1 && frac[1..].iter().all(u8::is_ascii_digit)))
        && b[b.len() - 1] == b'Z'
}

/// Check the events of the run recorded in `out` against its results: every line valid
/// against docs/schema/events.schema.json with an RFC 3339 `ts`; one `run_started` first and
/// one `run_finished` last for the run; per attempt `trial_started`, the phases in order and
/// `trial_finished` with the outcome its row in runs.jsonl records; one `trial_finished` per
/// row of this invocation. Returns the number of attempts seen.
pub fn check_stream(events: &[Value], out: &Path, phases: &[&str]) -> usize {
    let schema = read_json(&workspace().join("docs/schema/events.schema.json"));
    let validator = jsonschema::validator_for(&schema).expect("the events schema compiles");
    for event in events {
        let errors: Vec<String> = validator.iter_errors(event).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "an event does not match docs/schema/events.schema.json: {errors:?}\n{event}");
        let ts = event["ts"].as_str().expect("every event has a ts");
        assert!(rfc3339_utc(ts), "ts is not RFC 3339 UTC: {ts}");
    }
    let run_id = read_json(&out.join("manifest.json"))["run_id"].as_str().expect("a run id").to_owned();
    let ours: Vec<&Value> = events.iter().filter(|e| e["run_id"] == run_id.as_str()).collect();
    assert!(!ours.is_empty(), "no event names run {run_id}");
    assert_eq!(ours[0]["event"], "run_started", "{}", ours[0]);
    let last = ours[ours.len() - 1];
    assert_eq!(last["event"], "run_finished", "{last}");
    assert_eq!(ours.iter().filter(|e| e["event"] == "run_started").count(), 1);
    assert_eq!(ours.iter().filter(|e| e["event"] == "run_finished").count(), 1);

    let rows = rows(&out.join("runs.jsonl"));
    let by_attempt: BTreeMap<&str, &Value> =
        rows.iter().map(|r| (r["attempt_id"].as_str().expect("an attempt id"), r)).collect();
    // Per attempt, what it reported, in order.
    let mut attempts: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for event in &ours {
        if let Some(attempt) = event["attempt_id"].as_str() {
            attempts.entry(attempt.to_owned()).or_default().push(event);
        }
    }
    let finished = ours.iter().filter(|e| e["event"] == "trial_finished").count();
    assert_eq!(finished, attempts.len(), "every attempt started is finished");
    for (attempt, seen) in &attempts {
        let kinds: Vec<&str> = seen.iter().map(|e| e["event"].as_str().unwrap_or_default()).collect();
        let reported: Vec<&str> =
            seen.iter().filter(|e| e["event"] == "trial_phase").map(|e| e["phase"].as_str().unwrap_or("?")).collect();
        assert_eq!(kinds.first(), Some(&"trial_started"), "{attempt}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"trial_finished"), "{attempt}: {kinds:?}");
        assert_eq!(reported, phases, "{attempt}: the phases, in order");
        let end = seen[seen.len() - 1];
        let row = by_attempt.get(attempt.as_str()).unwrap_or_else(|| panic!("{attempt} has no row in runs.jsonl"));
        assert_eq!(end["trial_id"], row["trial_id"]);
        for field in ["completed", "proposed", "evidence_status", "termination", "failure_class"] {
            assert_eq!(end[field], row[field], "{attempt}: {field} as runs.jsonl records it");
        }
        let outcome = match (row["evidence_status"].as_str(), row["completed"].as_bool()) {
            (Some("complete"), Some(true)) => "completed",
            (Some("complete"), Some(false)) => "not_completed",
            (Some("complete"), None) => "unknown",
            _ => "incomplete",
        };
        assert_eq!(end["outcome"], outcome, "{attempt}");
    }
    let completed = rows.iter().filter(|r| r["completed"] == true && r["evidence_status"] == "complete").count();
    assert_eq!(last["outcomes"]["completed"], completed, "{last}");
    assert_eq!(last["total"], ours[0]["total"], "{last}");
    attempts.len()
}

#[test]
fn the_event_stream_of_a_stdio_run_has_each_trial_its_phases_in_order_and_its_recorded_outcome() {
    let dir = scratch();
    let config = campaign(dir.path(), 3, "elengtis-fixture");
    let out = dir.path().join("out");
    let events_file = dir.path().join("events.jsonl");
    let output = elengtis(
        dir.path(),
        &["run", "--config", s(&config), "--out", s(&out), "--jobs", "2", "--events", s(&events_file)],
    );
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let first = events(&events_file);
    assert_eq!(check_stream(&first, &out, &PHASES), 3, "one attempt per trial");
    assert_eq!(rows(&out.join("runs.jsonl")).len(), 3);
    let started = &first[0];
    assert_eq!(
        (started["total"].as_u64(), started["todo"].as_u64(), started["jobs"].as_u64()),
        (Some(3), Some(3), Some(2))
    );
    let finished = &first[first.len() - 1];
    assert_eq!(finished["end"], "complete", "{finished}");
    assert_eq!(finished["attempts"], 3, "{finished}");
    assert_eq!(finished["outcomes"]["completed"], 3, "the comply script completes every trial: {finished}");

    // The file is appended to: a resume (nothing left to run) adds its own lines after them.
    let output = elengtis(dir.path(), &["run", "--resume", "--out", s(&out), "--events", s(&events_file)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let both = events(&events_file);
    assert_eq!(&both[..first.len()], &first[..], "earlier lines are kept as they were");
    let added: Vec<&str> = both[first.len()..].iter().map(|e| e["event"].as_str().unwrap_or_default()).collect();
    assert_eq!(added, ["run_started", "run_finished"], "a resume of a complete run runs nothing");
    assert_eq!(both[first.len()]["todo"], 0);
}

#[test]
fn a_failing_target_finishes_its_trials_as_incomplete_after_the_phases_that_ran() {
    let dir = scratch();
    // A target command that does not exist: the launch fails, nothing after it runs but the
    // cleanup, and the run stops after three consecutive failures.
    let config = campaign(dir.path(), 4, "/nonexistent/elengtis-fixture");
    let out = dir.path().join("out");
    let events_file = dir.path().join("events.jsonl");
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out), "--events", s(&events_file)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let all = events(&events_file);
    assert_eq!(check_stream(&all, &out, &["launch", "cleanup", "teardown"]), 3);
    let finished = &all[all.len() - 1];
    assert_eq!(finished["end"], "stopped", "{finished}");
    assert_eq!(finished["outcomes"]["incomplete"], 3, "{finished}");
    assert_eq!(finished["outcomes"]["not_run"], 1, "{finished}");
    assert!(all.iter().any(|e| e["event"] == "target_stopped"), "the target's stop is reported before the end");
}

#[test]
fn a_run_whose_stderr_is_not_a_terminal_prints_lines_without_escape_codes() {
    let dir = scratch();
    let config = slow_campaign(dir.path(), 3, "0.3");
    let out = dir.path().join("out");
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    for (stream, text) in [("stdout", stdout(&output)), ("stderr", stderr(&output))] {
        assert!(!text.contains('\u{1b}'), "{stream} holds an escape code: {text:?}");
        assert!(!text.contains('\r'), "{stream} redraws a line: {text:?}");
        assert!(!text.contains(" trials · "), "{stream} holds the progress display: {text:?}");
    }
    assert!(stdout(&output).contains("completed: 3/3"), "{}", stdout(&output));
}

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server with a detached session running `command` in a 160×40 terminal, or `None`
    /// when tmux is missing (a failure under CI).
    fn start(test: &str, command: &str) -> Option<Tmux> {
        let found = Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: tmux is missing; CI must provide it (.ci/run installs it)"
            );
            eprintln!("SKIP {test}: tmux is missing");
            return None;
        }
        let tmux = Tmux { socket: format!("elengtis-test-{}-{test}", std::process::id()) };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-s", "run", "-x", "160", "-y", "40", command])
            .status()
            .expect("start tmux");
        assert!(status.success(), "tmux new-session failed");
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket, "-f", "/dev/null"]);
        cmd
    }

    /// What the pane shows now.
    fn capture(&self) -> String {
        let output = self.command().args(["capture-pane", "-p", "-t", "run"]).output().expect("tmux capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

/// The shell command a tmux session runs: `elengtis args…`, then its exit status on a line
/// of its own, then a pause so the pane can be read.
fn session_command(dir: &Path, args: &[&str]) -> String {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    format!("cd '{}' && '{}' {}; echo \"exit=$?\"; sleep 120", s(dir), s(&bin("elengtis")), quoted.join(" "))
}

/// The progress lines on the pane: `(done, total, line)` of each line showing
/// `done/total trials · … running … · ETA …`.
fn progress_lines(pane: &str) -> Vec<(u32, u32, String)> {
    pane.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" trials · ").or_else(|| line.split_once(" trial · "))?;
            let fraction = before.rsplit(' ').next()?;
            let (done, total) = fraction.split_once('/')?;
            (after.contains("running") && after.contains("ETA "))
                .then(|| Some((done.parse().ok()?, total.parse().ok()?, line.to_owned())))
                .flatten()
        })
        .collect()
}

/// The progress line on the pane, if shown.
fn progress_line(pane: &str) -> Option<(u32, u32, String)> {
    progress_lines(pane).into_iter().next()
}

#[test]
fn an_interactive_run_shows_its_progress_and_clears_it_before_the_summary() {
    let test = "progress";
    let dir = scratch();
    let config = slow_campaign(dir.path(), 10, "0.4");
    let out = dir.path().join("out");
    let Some(tmux) =
        Tmux::start(test, &session_command(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]))
    else {
        return;
    };
    // While the run works: `done/total trials · running · ETA`, with some done and some not.
    let mut seen = Vec::new();
    let midway = wait_until(Duration::from_secs(60), || {
        let pane = tmux.capture();
        if let Some(line) = progress_line(&pane) {
            seen.push(line);
        }
        seen.iter().any(|(done, total, _)| *total == 10 && (1..10).contains(done)) || pane.contains("exit=")
    });
    assert!(midway, "no progress line within a minute; the pane:\n{}", tmux.capture());
    let (done, total, line) =
        seen.iter().find(|(d, t, _)| *t == 10 && (1..10).contains(d)).cloned().unwrap_or_else(|| {
            panic!(
                "the run ended before a progress line with trials done and to do was seen: {seen:?}\n{}",
                tmux.capture()
            )
        });
    assert!(line.contains(&format!("{done} completed")), "the outcomes so far are counted: {line}");
    assert!(line.contains("[00:00:"), "the elapsed time is shown: {line}");
    assert_eq!(total, 10);
    // At the end: the summary, and the display gone.
    assert!(wait_until(Duration::from_secs(60), || tmux.capture().contains("exit=")), "{}", tmux.capture());
    let pane = tmux.capture();
    assert!(pane.contains("exit=0"), "{pane}");
    assert!(pane.contains("completed: 10/10") && pane.contains("results: "), "{pane}");
    assert_eq!(progress_line(&pane), None, "the display is cleared before the summary:\n{pane}");
}

#[test]
fn an_interactive_run_with_quiet_shows_no_progress() {
    let test = "quiet";
    let dir = scratch();
    let config = slow_campaign(dir.path(), 4, "0.4");
    let out = dir.path().join("out");
    let args = ["run", "--config", s(&config), "--out", s(&out), "--quiet"];
    let Some(tmux) = Tmux::start(test, &session_command(dir.path(), &args)) else {
        return;
    };
    let mut shown = None;
    let mut running = false;
    let ended = wait_until(Duration::from_secs(60), || {
        let pane = tmux.capture();
        running |= out.join("runs.jsonl").is_file() && !pane.contains("exit=");
        shown = shown.take().or_else(|| progress_line(&pane));
        pane.contains("exit=")
    });
    assert!(ended, "{}", tmux.capture());
    assert!(running, "the pane was read while the run worked");
    assert_eq!(shown, None, "--quiet draws no progress display");
    let pane = tmux.capture();
    assert!(pane.contains("exit=0") && pane.contains("completed: 4/4"), "{pane}");
}

#[test]
fn log_lines_during_an_interactive_run_are_printed_above_the_progress_display() {
    let test = "log";
    let dir = scratch();
    let config = slow_campaign(dir.path(), 6, "0.4");
    let out = dir.path().join("out");
    // `--log elengtis=debug`: a log line per attempt ("attempt finished") while the display
    // is drawn.
    let args = ["run", "--log", "elengtis=debug", "--config", s(&config), "--out", s(&out)];
    let Some(tmux) = Tmux::start(test, &session_command(dir.path(), &args)) else {
        return;
    };
    let mut pane = String::new();
    let midway = wait_until(Duration::from_secs(60), || {
        pane = tmux.capture();
        let logged = pane.lines().filter(|l| l.contains("attempt finished")).count();
        let shown = progress_lines(&pane).iter().any(|(done, _, _)| (2..6).contains(done));
        // Read between redraws: the display is the pane's last line.
        let below = pane.lines().rfind(|l| !l.trim().is_empty()).is_some_and(|l| l.contains(" trials · "));
        (shown && below && logged >= 2) || pane.contains("exit=")
    });
    assert!(midway && !pane.contains("exit="), "no progress line beside log lines while the run worked:\n{pane}");
    let lines: Vec<&str> = pane.lines().filter(|l| !l.trim().is_empty()).collect();
    for line in &lines {
        assert!(
            !(line.contains("attempt finished") && line.contains(" trials · ")),
            "a log line ran into the progress display: {line}\n{pane}"
        );
    }
    let drawn: Vec<&&str> = lines.iter().filter(|l| l.contains(" trials · ")).collect();
    assert_eq!(drawn.len(), 1, "the display is drawn once, not left behind by log lines:\n{pane}");
    assert!(wait_until(Duration::from_secs(60), || tmux.capture().contains("exit=0")), "{}", tmux.capture());
}

#[test]
fn an_interrupted_run_reports_its_stop_and_leaves_the_cut_attempt_unfinished() {
    let dir = scratch();
    let config = slow_campaign(dir.path(), 6, "0.3");
    let out = dir.path().join("out");
    let events_file = dir.path().join("events.jsonl");
    let runner = elengtis_tests::ChildGuard::new(
        elengtis_tests::elengtis_cmd(
            dir.path(),
            &["run", "--config", s(&config), "--out", s(&out), "--events", s(&events_file)],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the runner"),
    );
    // SIGINT once a trial is recorded and the next one has started.
    let read = || std::fs::read_to_string(&events_file).unwrap_or_default();
    let midway = wait_until(Duration::from_secs(30), || {
        let text = read();
        text.contains("\"trial_finished\"") && text.matches("\"trial_started\"").count() >= 2
    });
    assert!(midway, "no trial recorded within 30 s:\n{}", read());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(runner.id()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT the runner");
    let output = runner.wait_output(Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(130), "{}{}", stdout(&output), stderr(&output));

    let all = events(&events_file);
    let kinds: Vec<&str> = all.iter().map(|e| e["event"].as_str().unwrap_or_default()).collect();
    let stopping = kinds.iter().position(|k| *k == "run_stopping").expect("the stop is reported");
    assert_eq!(all[stopping]["reason"], "interrupted");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    let finished = &all[all.len() - 1];
    assert_eq!(finished["end"], "interrupted", "{finished}");
    let rows = rows(&out.join("runs.jsonl"));
    assert!(rows.len() < 6, "the run was cut short ({} rows)", rows.len());
    assert_eq!(finished["attempts"], rows.len(), "{finished}");
    assert_eq!(finished["outcomes"]["not_run"], 6 - rows.len(), "{finished}");
    assert_eq!(kinds.iter().filter(|k| **k == "trial_finished").count(), rows.len(), "one per recorded row");
    let recorded: Vec<&str> = rows.iter().filter_map(|r| r["attempt_id"].as_str()).collect();
    let cut: Vec<&Value> = all
        .iter()
        .filter(|e| e["event"] == "trial_started" && !recorded.contains(&e["attempt_id"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(cut.len(), 1, "the attempt in flight started and was never finished: {cut:?}");
}

/// Before any trial is done the display has nothing to estimate from: no `ETA 0s`, and one
/// trial is `1 trial`, not `1 trials` (issue 29, item 8).
#[test]
fn the_display_has_no_eta_before_a_trial_is_done_and_counts_one_trial_in_the_singular() {
    let test = "eta";
    let dir = scratch();
    let config = slow_campaign(dir.path(), 1, "3");
    let out = dir.path().join("out");
    let Some(tmux) =
        Tmux::start(test, &session_command(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]))
    else {
        return;
    };
    let mut first = None;
    let seen = wait_until(Duration::from_secs(60), || {
        let pane = tmux.capture();
        first = first.take().or_else(|| progress_line(&pane));
        first.is_some() || pane.contains("exit=")
    });
    let (done, total, line) = first.unwrap_or_else(|| panic!("no progress line (seen: {seen}):\n{}", tmux.capture()));
    assert_eq!((done, total), (0, 1), "{line}");
    assert!(line.contains("0/1 trial · ") && !line.contains("trials"), "one trial, in the singular: {line}");
    assert!(line.contains("ETA –") && !line.contains("ETA 0s"), "no estimate from nothing: {line}");
    assert!(wait_until(Duration::from_secs(60), || tmux.capture().contains("exit=")), "{}", tmux.capture());
    let pane = tmux.capture();
    assert!(pane.contains("exit=0") && pane.contains("1 trial, 1 complete"), "{pane}");
}

/// `run --resume` says what it found and what it does now before it starts.
#[test]
fn a_resume_says_how_many_trials_are_complete_and_how_many_it_runs() {
    let dir = scratch();
    // The target starts once (the first trial), then fails: 1 complete, 3 incomplete.
    let script = dir.path().join("once-fixture");
    let flag = dir.path().join("start-once");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -e '{flag}' ]; then rm -f '{flag}'; exec '{}' \"$@\"; fi\nexit 1\n",
            s(&bin("elengtis-fixture")),
            flag = s(&flag)
        ),
    )
    .expect("write the wrapper");
    let mut perms = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod the wrapper");
    let config = campaign(dir.path(), 4, s(&script));
    std::fs::write(&flag, "").expect("flag");
    let out = dir.path().join("out");
    let first = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    assert!(!stderr(&first).contains("resuming run"), "a new run has no plan to announce: {}", stderr(&first));
    let resumed = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    let run_id = read_json(&out.join("manifest.json"))["run_id"].as_str().expect("run id").to_owned();
    let err = stderr(&resumed);
    assert!(err.starts_with(&format!("resuming run {run_id}: 1 of 4 trials complete, 3 to run\n")), "{err}");
    let quiet = elengtis(dir.path(), &["run", "--resume", "--out", s(&out), "--quiet"]);
    assert!(!stderr(&quiet).contains("resuming run"), "--quiet drops the note: {}", stderr(&quiet));
}
