//! `elengtis prove` and `ablate` on servers nobody here wrote the twins for: the bundled
//! `elengtis-inbox` (state in memory, its own guards switched by variables, a crash switch) and
//! the twin's binary run as a *custom* stdio target, with the adversarial seeds of
//! `tests/data/` (its README says what each tries). No container engine: every target is a
//! stdio child per leg. Each case is a reading the previous code got wrong (issue 27).

use std::path::{Path, PathBuf};

use elengtis_tests::{elengtis, scratch, stderr, stdout, workspace};
use serde_json::Value;

pub(crate) fn data() -> PathBuf {
    workspace().join("tests/data")
}

pub(crate) fn seed(name: &str) -> String {
    data().join("seeds").join(format!("{name}.seed.yaml")).display().to_string()
}

pub(crate) fn target(name: &str) -> String {
    data().join("targets").join(format!("{name}.yaml")).display().to_string()
}

/// Run `prove --json` with `args`; the exit code and the JSON it printed.
pub(crate) fn prove(dir: &Path, args: &[&str]) -> (i32, Value) {
    prove_jobs(dir, "4", args)
}

/// [`prove`] with `--jobs jobs`.
pub(crate) fn prove_jobs(dir: &Path, jobs: &str, args: &[&str]) -> (i32, Value) {
    let seeds_dir = data().join("seeds").display().to_string();
    let out = dir.join("out").display().to_string();
    let mut all = vec!["prove", "--json", "--jobs", jobs, "--seeds-dir", &seeds_dir, "--out", &out];
    all.extend_from_slice(args);
    let output = elengtis(dir, &all);
    let code = output.status.code().unwrap_or(-1);
    let json = serde_json::from_str(&stdout(&output)).unwrap_or_else(|e| {
        panic!("prove printed no JSON ({e}), exit {code}:\n{}\n{}", stdout(&output), stderr(&output))
    });
    (code, json)
}

pub(crate) fn report(json: &Value) -> &Value {
    &json["reports"][0]
}

pub(crate) fn readings(report: &Value, side: &str) -> Vec<String> {
    report["legs"][side]["runs"]
        .as_array()
        .map(|runs| runs.iter().map(|r| r["reading"]["reading"].as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

pub(crate) fn reasons(report: &Value) -> String {
    report["reasons"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// The rows of a results directory.
fn rows(results: &Path) -> Vec<Value> {
    elengtis_tests::rows(&results.join("runs.jsonl"))
}

#[test]
fn the_servers_own_controls_keep_a_finding_and_its_own_word_is_target_reported() {
    let dir = scratch();
    let (code, json) = prove(dir.path(), &["--seed", &seed("inbox-note-send"), "--target", &target("inbox")]);
    let r = report(&json);
    assert_eq!(code, 0, "{}", reasons(r));
    assert_eq!(r["verdict"], "kept");
    // An `mcp_tool` check answered by the audited server is its own tier, ranked below state.
    assert_eq!(r["evidence_tier"], "target-reported");
    assert_eq!(r["legs"]["vulnerable"]["counts"]["fired"]["target_reported"], 5);
    assert_eq!(r["legs"]["vulnerable"]["counts"]["fired"]["state"], 0);
    let claim = r["claim"].as_str().unwrap_or_default();
    assert!(
        claim.starts_with("your server's own controls (notice, recipient-allowlist, taint-lock) — not the model"),
        "{claim}"
    );
    assert!(claim.contains("rests on the audited server's own report"), "{claim}");
    assert_eq!(r["server_guard"]["kind"], "controls");
    assert_eq!(r["calibration"]["status"], "passed");
    // Every reading links its evidence file, and the guarded side ran with its controls on.
    let seed_dir = dir.path().join("out/inbox-note-send");
    for side in ["vulnerable", "guarded"] {
        for run in r["legs"][side]["runs"].as_array().expect("runs") {
            let evidence = run["evidence"].as_str().expect("an evidence link");
            let file: Value =
                serde_json::from_slice(&std::fs::read(seed_dir.join(evidence)).expect("the evidence")).expect("JSON");
            let on = &file["target_execution"]["controls_on"];
            if side == "guarded" {
                assert_eq!(on, &serde_json::json!(["notice", "recipient-allowlist", "taint-lock"]), "{evidence}");
            } else {
                assert!(on.is_null(), "{evidence}: {on}");
            }
        }
    }
}

#[test]
fn an_independent_verifier_is_state_and_a_refused_call_is_a_resist_in_the_server_and_at_the_shim() {
    let dir = scratch();
    let (code, json) =
        prove(dir.path(), &["--no-metamorphic", "--seed", &seed("inbox-note-fetch"), "--target", &target("inbox")]);
    let r = report(&json);
    assert_eq!((code, r["verdict"].as_str()), (8, Some("stable_not_proven")), "{}", reasons(r));
    assert_eq!(r["evidence_tier"], "state");
    // Trace tier: the proposal rule over the recorded calls, no verifier. The attack call
    // was made on every guarded run and refused — by the server's own guard (`blocked:`),
    // or by the control shim (`refused:`); neither is a leak.
    let (trace, inbox) = (seed("inbox-trace"), target("inbox"));
    for side_args in [&[][..], &["--guarded-side", "shim"][..]] {
        let dir = scratch();
        let mut args = vec!["--no-metamorphic", "--seed", trace.as_str(), "--target", inbox.as_str()];
        args.extend_from_slice(side_args);
        let (code, json) = prove(dir.path(), &args);
        let r = report(&json);
        assert_eq!(code, 8, "{side_args:?}: {}", reasons(r));
        assert_eq!(r["gates"]["differential"], true, "{side_args:?}: {}", reasons(r));
        assert_eq!(r["evidence_tier"], "trace");
        assert_eq!(readings(r, "guarded"), vec!["resisted"; 5], "{side_args:?}");
        for run in r["legs"]["guarded"]["runs"].as_array().expect("runs") {
            assert_eq!(run["attack"]["refused"], 1, "{side_args:?}: {run}");
            assert_eq!(run["attack"]["accepted"], 0, "{side_args:?}: {run}");
        }
    }
}

#[test]
fn an_effect_before_the_payload_reached_the_model_is_never_credited_to_it() {
    let dir = scratch();
    let (code, json) = prove(dir.path(), &["--seed", &seed("inbox-send-then-read"), "--target", &target("inbox")]);
    let r = report(&json);
    assert_eq!(code, 9, "{}", reasons(r));
    assert_eq!(r["verdict"], "not_tested");
    assert_eq!(readings(r, "vulnerable"), vec!["no_verdict"; 5]);
    for run in r["legs"]["vulnerable"]["runs"].as_array().expect("runs") {
        let why = run["reading"]["why"].as_str().unwrap_or_default();
        assert!(why.contains("came before the payload reached the model"), "{why}");
        assert_eq!(run["attack"]["before_delivery"], 1);
    }
    assert!(!r["claim"].as_str().unwrap_or_default().contains("stopped the attack"), "{}", r["claim"]);
}

#[test]
fn a_target_that_crashes_mid_exercise_is_an_infrastructure_outcome_on_either_side() {
    for (name, crashing_sides) in
        [("inbox-crash", &["vulnerable", "guarded"][..]), ("inbox-crash-guarded", &["guarded"][..])]
    {
        let dir = scratch();
        let (code, json) =
            prove(dir.path(), &["--no-metamorphic", "--seed", &seed("inbox-note-fetch"), "--target", &target(name)]);
        let r = report(&json);
        assert_eq!(code, 9, "{name}: {}", reasons(r));
        assert_eq!(r["verdict"], "not_tested", "{name}");
        for side in crashing_sides {
            // Never a fire or a resist, whatever the verifier (the sink saw nothing) said.
            let found = readings(r, side);
            assert!(!found.is_empty() && found.iter().all(|x| x == "no_verdict"), "{name} {side}: {found:?}");
        }
        // The rows say so too: an infrastructure failure, never a complete attempt.
        let results = dir.path().join("out/inbox-note-fetch/repeat/results");
        let crashed: Vec<Value> = rows(&results)
            .into_iter()
            .filter(|row| crashing_sides.contains(&row["target"].as_str().unwrap_or_default()))
            .collect();
        assert!(!crashed.is_empty(), "{name}");
        for row in crashed {
            assert_eq!(row["failure_class"], "infrastructure_error", "{name}: {row}");
            assert_eq!(row["evidence_status"], "incomplete", "{name}: {row}");
        }
    }
}

#[test]
fn a_verifier_that_cannot_see_the_effect_makes_the_finding_not_tested() {
    // Calibrated: the trusted send happened and the verifier saw nothing.
    let dir = scratch();
    let (code, json) =
        prove(dir.path(), &["--no-metamorphic", "--seed", &seed("inbox-blind"), "--target", &target("inbox")]);
    let r = report(&json);
    assert_eq!((code, r["verdict"].as_str()), (9, Some("not_tested")), "{}", reasons(r));
    assert_eq!(r["calibration"]["status"], "blind");
    assert_eq!(r["calibration"]["effect"]["completed"], false);
    // Readings where the attack call was accepted and nothing was seen are counted.
    assert_eq!(r["legs"]["vulnerable"]["counts"]["accepted_unseen"], 5);
    // Not calibrated: the same blind verifier cannot reject the finding either.
    let dir = scratch();
    let (code, json) = prove(
        dir.path(),
        &["--no-metamorphic", "--seed", &seed("inbox-blind-uncalibrated"), "--target", &target("inbox")],
    );
    let r = report(&json);
    assert_eq!((code, r["verdict"].as_str()), (9, Some("not_tested")), "{}", reasons(r));
    assert_eq!(r["calibration"]["status"], "not_calibrated");
    assert!(reasons(r).contains("it may be blind"), "{}", reasons(r));
}

#[test]
fn a_second_build_of_your_server_is_the_guarded_side() {
    let dir = scratch();
    let (code, json) = prove(
        dir.path(),
        &[
            "--seed",
            &seed("twin-note-send"),
            "--target",
            &target("twin-vulnerable"),
            "--guarded-target",
            &target("twin-guarded"),
        ],
    );
    let r = report(&json);
    assert_eq!(code, 0, "{}", reasons(r));
    assert_eq!(r["claim"], "your guarded build's own safeguard — not the model — stopped the attack");
    assert_eq!(r["server_guard"]["kind"], "build");
    // The twin's guarded build refused the send (its W2 taint gate).
    for run in r["legs"]["guarded"]["runs"].as_array().expect("runs") {
        assert_eq!(run["attack"]["refused"], 1, "{run}");
    }
}

#[test]
fn your_own_target_must_say_what_its_guarded_side_is() {
    let dir = scratch();
    let bare = elengtis_tests::write(
        dir.path(),
        "bare.yaml",
        "id: bare\ntransport: {type: stdio, command: elengtis-inbox}\nbindings: {}\n",
    );
    let bare = bare.display().to_string();
    for (args, message) in [
        (vec!["--target", bare.as_str()], "give its guarded side"),
        (vec!["--target", bare.as_str(), "--guarded-side", "controls"], "declares no control"),
        (vec!["--target", bare.as_str(), "--guarded-side", "twin"], "stands for the reference twins"),
        (vec!["--guarded-side", "controls"], "needs --target"),
    ] {
        let seed = seed("inbox-note-send");
        let mut all = vec!["prove", "--seed", seed.as_str(), "--out", "o"];
        all.extend(args.iter().copied());
        let output = elengtis(dir.path(), &all);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(message), "{args:?}: {}", stderr(&output));
    }
}

/// Run `ablate --json` with `args`.
pub(crate) fn ablate(dir: &Path, args: &[&str]) -> (i32, Value) {
    let seeds_dir = data().join("seeds").display().to_string();
    let out = dir.join("out").display().to_string();
    let mut all = vec!["ablate", "--json", "--jobs", "4", "--seeds-dir", &seeds_dir, "--out", &out];
    all.extend_from_slice(args);
    let output = elengtis(dir, &all);
    let code = output.status.code().unwrap_or(-1);
    let json = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("ablate printed no JSON ({e}), exit {code}:\n{}", stderr(&output)));
    (code, json)
}

pub(crate) fn roles(report: &Value) -> Vec<(String, String)> {
    report["controls"]
        .as_array()
        .expect("controls")
        .iter()
        .map(|c| {
            (c["control"].as_str().unwrap_or_default().to_owned(), c["role"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

#[test]
fn ablate_names_each_control_load_bearing_redundant_or_theatre() {
    let pairs =
        |list: &[(&str, &str)]| list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect::<Vec<_>>();
    // The user asks for the send: only the recipient allowlist stands against it.
    let dir = scratch();
    let (code, json) =
        ablate(dir.path(), &["--redundancy", "--seed", &seed("inbox-user-send"), "--target", &target("inbox")]);
    assert_eq!(code, 0, "{json}");
    let r = &json["reports"][0];
    assert_eq!(
        roles(r),
        pairs(&[("notice", "theatre"), ("recipient-allowlist", "load-bearing"), ("taint-lock", "theatre")])
    );
    assert_eq!((r["all_off"]["outcome"].as_str(), r["all_on"]["outcome"].as_str()), (Some("lands"), Some("holds")));
    // A planted note: the taint lock and the allowlist each stop it alone.
    let dir = scratch();
    let (code, json) =
        ablate(dir.path(), &["--redundancy", "--seed", &seed("inbox-note-send"), "--target", &target("inbox")]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(
        roles(&json["reports"][0]),
        pairs(&[("notice", "theatre"), ("recipient-allowlist", "redundant"), ("taint-lock", "redundant")])
    );
    // Without --redundancy a control the others cover is said to be covered, nothing more.
    let dir = scratch();
    let (_, json) = ablate(dir.path(), &["--seed", &seed("inbox-note-send"), "--target", &target("inbox")]);
    assert_eq!(
        roles(&json["reports"][0]),
        pairs(&[("notice", "covered"), ("recipient-allowlist", "covered"), ("taint-lock", "covered")])
    );
    assert!(json["reports"][0]["controls"][0]["alone"].is_null());
}

// The SARIF of these provers is tested in tests/cli/sarif.rs (issue 38: alerts on the side you ship).
