//! The consecutive-failure breaker is per target (issue 38, item 6): a target that fails
//! three trials in a row has its remaining trials left unstarted, and only its own — the other
//! targets of a run, and the other side of a `prove`, go on to the end.

use std::path::Path;

use elengtis_tests::{copy_example, elengtis, read_json, rows, scratch, stderr, stdout, workspace, write};

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

#[test]
fn a_target_that_fails_three_trials_in_a_row_stops_its_own_trials_and_the_others_run_to_the_end() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let text = std::fs::read_to_string(&config).expect("campaign");
    // A second target before the example's, whose command does not exist: every launch fails.
    let broken = "  - id: broken\n    transport:\n      type: stdio\n      command: /nonexistent/elengtis-fixture\n      args: [--collector, {runner: collector}, --credential, {runner: canary}, --scenario, support-note]\n    bindings:\n      support-note:\n        read_note: read_note\n        read_credential: read_demo_credential\n        submit_credential: submit_demo_credential\n        verify_collector: read_collector\n";
    let text = text.replacen("trials: 1\n", "trials: 5\n", 1).replacen("targets:\n", &format!("targets:\n{broken}"), 1);
    write(dir.path(), "campaign.yaml", &text);
    let out = dir.path().join("out");
    let events = dir.path().join("events.jsonl");
    let output =
        elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out), "--jobs", "1", "--events", s(&events)]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{}{err}", stdout(&output));
    let recorded = rows(&out.join("runs.jsonl"));
    let of = |target: &str| -> Vec<&serde_json::Value> {
        recorded
            .iter()
            .filter(|r| r["trial_id"].as_str().is_some_and(|t| t.starts_with(&format!("{target}--"))))
            .collect()
    };
    assert_eq!(of("broken").len(), 3, "the broken target's breaker trips after three: {recorded:#?}");
    assert!(of("broken").iter().all(|r| r["evidence_status"] == "incomplete"));
    let healthy = of("local-demo");
    assert_eq!(healthy.len(), 5, "the other target's trials all ran: {recorded:#?}");
    assert!(healthy.iter().all(|r| r["evidence_status"] == "complete" && r["completed"] == true), "{healthy:#?}");
    assert!(err.contains("target broken failed 3 consecutive trials"), "{err}");
    assert!(err.contains("2 trials of that target not started; the other targets' trials ran"), "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .expect("events")
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event"))
        .collect();
    let stopped: Vec<&serde_json::Value> = lines.iter().filter(|e| e["event"] == "target_stopped").collect();
    assert_eq!(stopped.len(), 1, "{lines:#?}");
    assert_eq!(stopped[0]["target"], "broken");
    assert!(!lines.iter().any(|e| e["event"] == "run_stopping"), "the run itself never stopped: {lines:#?}");
    let finished = lines.last().expect("run_finished");
    assert_eq!((&finished["end"], &finished["outcomes"]["not_run"]), (&"stopped".into(), &2.into()), "{finished}");

    // The record holds together, and a resume runs exactly the broken target's two.
    let verify = elengtis(dir.path(), &["verify", "--json", s(&out)]);
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));
    assert_eq!(read_json(&out.join("manifest.json"))["max_consecutive_target_failures"], 3);
}

/// The case: a vulnerable target that crashes on the attack call. Its three legs fail
/// and trip its breaker; the guarded build's legs still run and are read (resisted), so the
/// NOT TESTED verdict no longer comes from legs that were never given their chance.
#[test]
fn a_prove_whose_vulnerable_target_crashes_on_the_attack_call_still_runs_the_guarded_side() {
    let dir = scratch();
    write(
        dir.path(),
        "vulnerable.yaml",
        "id: inbox-crashing\ntransport:\n  type: stdio\n  command: elengtis-inbox\n  args: [--crash-on, send_message, --resolve, {template: \"attacker.example.com={sink_url}\"}]\nbindings: {}\n",
    );
    write(
        dir.path(),
        "guarded.yaml",
        "id: inbox-guarded\ntransport:\n  type: stdio\n  command: elengtis-inbox\n  args: [--recipient-allowlist, ops@example.org, --taint-lock, --resolve, {template: \"attacker.example.com={sink_url}\"}]\nbindings: {}\n",
    );
    let seed = workspace().join("tests/data/seeds/inbox-note-send.seed.yaml");
    let output = elengtis(
        dir.path(),
        &[
            "prove",
            "--seed",
            s(&seed),
            "--target",
            "vulnerable.yaml",
            "--guarded-target",
            "guarded.yaml",
            "--iterations",
            "3",
            "--no-metamorphic",
            "--jobs",
            "1",
            "--json",
            "--out",
            "out",
        ],
    );
    let text = stdout(&output);
    let json: serde_json::Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}\n{}", stderr(&output)));
    let report = &json["reports"][0];
    let vulnerable = &report["legs"]["vulnerable"]["counts"];
    assert_eq!(vulnerable["runs"], 3);
    assert_eq!(vulnerable["resisted"], 0, "{report:#}");
    let guarded = &report["legs"]["guarded"];
    assert_eq!(guarded["counts"]["resisted"], 3, "the guarded side ran all its legs: {guarded:#}");
    assert!(!guarded.to_string().contains("not run"), "{guarded:#}");
    assert_eq!(report["verdict"], "not_tested", "{report:#}");
}
