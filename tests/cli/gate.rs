//! `elengtis gate` through the library with the fake sandbox backend (each twin leg a local
//! process): the committed fixtures replay offline; a lookup miss during the replay is *no
//! evidence*, never a pass; a recording locks its directory only when KEPT and then replays
//! without a single model request; custom targets are re-driven live only when allowed, and
//! a required skip fails. The Docker tests (tests/docker/gate.rs) run the binary in
//! hardened containers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis::gate::{self, GateOptions, Status};
use elengtis::prove;
use elengtis::run::SandboxChoice;
use elengtis::sandbox::fake::FakeBackend;
use elengtis_core::format::gate::load_gate;
use elengtis_tests::gate::model_script;
use elengtis_tests::model_server::ModelServer;
use elengtis_tests::{bin, copy_tree, read_json, scratch, workspace, write};

const TWIN_IMAGE: &str = "elengtis/twin:0.1.0";

fn options(dir: &Path) -> GateOptions {
    std::fs::create_dir_all(dir.join("fake")).expect("the fake backend's directory");
    let backend =
        FakeBackend::new(&dir.join("fake")).image(TWIN_IMAGE, &bin("elengtis-twin")).sink(&bin("elengtis-sink"));
    GateOptions {
        jobs: 4,
        out: dir.join("out"),
        sandbox: SandboxChoice::Prepared(Arc::new(backend)),
        ..GateOptions::default()
    }
}

fn run(file: &Path, options: &GateOptions) -> gate::GateOutcome {
    let loaded = load_gate(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let catalogue = prove::catalogue(&workspace().join("scenarios/seeds"));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(gate::run(&loaded, &catalogue, options)).expect("the gate runs")
}

/// A copy of the committed gate and the seeds it names.
fn committed_copy(dir: &Path) -> PathBuf {
    for sub in ["gate", "seeds"] {
        copy_tree(&workspace().join("scenarios").join(sub), &dir.join("scenarios").join(sub));
    }
    dir.join("scenarios/gate/gate.yaml")
}

fn details(outcome: &gate::GateOutcome) -> String {
    serde_json::to_string_pretty(&outcome.findings).expect("json")
}

fn seed_script(id: &str) -> serde_json::Value {
    let seed = elengtis_core::format::seed::load_seed(&workspace().join(format!("scenarios/seeds/{id}.seed.yaml")))
        .expect("seed");
    model_script(id, &serde_json::to_value(&seed.seed.script).expect("script"))
}

#[test]
fn the_committed_fixtures_replay_offline_and_a_lookup_miss_is_no_evidence() {
    let dir = scratch();
    let file = workspace().join("scenarios/gate/gate.yaml");
    let outcome = run(&file, &options(&dir.path().join("ok")));
    assert_eq!(outcome.status, Status::Passed, "{}", details(&outcome));
    assert_eq!(outcome.findings.len(), 4);

    // One fixture gone and the lock's count lowered to hide it: only the replay notices.
    let copy = committed_copy(&dir.path().join("copy"));
    let fixtures = dir.path().join("copy/scenarios/gate/fixtures/w4-send-email-direct-unconfirmed");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.ends_with("gate.lock.json"))
        .collect();
    files.sort();
    std::fs::remove_file(&files[0]).expect("remove");
    let lock_path = fixtures.join("gate.lock.json");
    let mut lock: serde_json::Value = serde_json::from_slice(&std::fs::read(&lock_path).expect("lock")).expect("json");
    lock["fixtures"] = (files.len() - 1).into();
    std::fs::write(&lock_path, lock.to_string()).expect("write the lock");
    let mut only = options(&dir.path().join("miss"));
    only.only = vec!["w4-send-email-direct-unconfirmed".into()];
    let outcome = run(&copy, &only);
    assert_eq!(outcome.status, Status::NoEvidence, "{}", details(&outcome));
    let text = details(&outcome);
    assert!(text.contains("decided nothing") && text.contains("failed to replay: no fixture"), "{text}");
    assert!(text.contains("--record --finding w4-send-email-direct-unconfirmed"), "{text}");

    // A fixture of another format version.
    let copy2 = committed_copy(&dir.path().join("copy2"));
    let fixtures = dir.path().join("copy2/scenarios/gate/fixtures/w1-description-fetch-smuggle");
    let one = std::fs::read_dir(&fixtures)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .find(|p| !p.ends_with("gate.lock.json"))
        .expect("a fixture");
    let mut fixture: serde_json::Value = serde_json::from_slice(&std::fs::read(&one).expect("read")).expect("json");
    fixture["version"] = 2.into();
    std::fs::write(&one, fixture.to_string()).expect("write");
    let mut only = options(&dir.path().join("version"));
    only.only = vec!["w1-description-fetch-smuggle".into()];
    let outcome = run(&copy2, &only);
    assert_eq!(outcome.status, Status::NoEvidence);
    assert!(details(&outcome).contains("has format version 2"), "{}", details(&outcome));
}

#[test]
fn a_recording_locks_only_a_kept_finding_and_then_replays_without_a_model_request() {
    let dir = scratch();
    let id = "w4-send-email-direct-unconfirmed";
    let server = ModelServer::start(dir.path(), &seed_script(id), &[]);
    let file = write(
        dir.path(),
        "gate.yaml",
        &format!(
            "schema_version: 1\nmodel: {{model: scripted-attacker, provider: {{type: openai_compatible, base_url: 'http://{}/v1'}}}}\nfindings:\n  - {{seed: {}, fixtures: fixtures/{id}}}\n",
            server.addr,
            workspace().join(format!("scenarios/seeds/{id}.seed.yaml")).display()
        ),
    );
    let mut record = options(&dir.path().join("record"));
    record.record = true;
    let outcome = run(&file, &record);
    assert_eq!(outcome.status, Status::Passed, "{}", details(&outcome));
    let lock = dir.path().join(format!("fixtures/{id}/gate.lock.json"));
    let locked: serde_json::Value = serde_json::from_slice(&std::fs::read(&lock).expect("a lock")).expect("json");
    assert_eq!(locked["iterations"], 3);
    assert!(locked["model"]["provider"].get("base_url").is_none(), "the lock keeps no address: {locked:#}");
    let requests = server.requests().len();
    assert!(requests > 0);

    let outcome = run(&file, &options(&dir.path().join("replay")));
    assert_eq!(outcome.status, Status::Passed, "{}", details(&outcome));
    assert_eq!(server.requests().len(), requests, "a replay makes no model request");

    // A model that refuses: the vulnerable side never fires, REJECTED, and nothing is locked.
    let refusing = ModelServer::start(dir.path(), &serde_json::json!({"policy": {"mode": "refuse"}}), &[]);
    let mut record = options(&dir.path().join("refused"));
    record.record = true;
    record.base_url = Some(format!("http://{}/v1", refusing.addr));
    let outcome = run(&file, &record);
    assert_eq!(outcome.status, Status::Rejected, "{}", details(&outcome));
    assert!(!lock.exists(), "a rejected recording leaves no lock");
    assert!(details(&outcome).contains("not locked"));
    let outcome = run(&file, &options(&dir.path().join("after")));
    assert_eq!(outcome.status, Status::NoEvidence, "{}", details(&outcome));
}

#[test]
fn a_custom_target_runs_live_only_when_allowed_and_a_required_skip_fails() {
    let dir = scratch();
    let id = "w2-note-body-direct";
    let server = ModelServer::start(dir.path(), &seed_script(id), &[]);
    // The vulnerable twin as "your own" server: it plants the payload itself, through the
    // scenario's `payload` binding.
    write(
        dir.path(),
        "target.yaml",
        r#"id: my-notes
transport:
  type: isolated_container
  image: elengtis/twin:0.1.0
  mcp_transport: stdio
  uid: 65534
  gid: 65534
  volumes: ["/data"]
  command: ["--build", "vulnerable", "--mail-db", "/data/mail.db", "--note", ["n1=", {binding: payload}],
            "--resolve", ["attacker.example.com=", {runner: sink_url}]]
bindings: {}
"#,
    );
    let gate_file = |guarded: &str| {
        write(
            dir.path(),
            &format!("gate-{guarded}.yaml"),
            &format!(
                "schema_version: 1\nmodel: {{model: scripted-attacker, provider: {{type: openai_compatible, base_url: 'http://{}/v1'}}}}\nfindings:\n  - {{seed: {}, target: target.yaml, guarded: {guarded}}}\n",
                server.addr,
                workspace().join(format!("scenarios/seeds/{id}.seed.yaml")).display()
            ),
        )
    };
    let shim = gate_file("shim");
    let outcome = run(&shim, &options(&dir.path().join("skipped")));
    assert_eq!(outcome.findings[0].status, Status::Skipped);
    assert_eq!(outcome.status, Status::Passed, "a skip alone does not fail the gate");
    assert!(details(&outcome).contains("ELENGTIS_LIVE_TARGET=1"));
    assert_eq!(server.requests().len(), 0, "a skipped finding contacts no model");

    let mut required = options(&dir.path().join("required"));
    required.require_run = true;
    let outcome = run(&shim, &required);
    assert_eq!(outcome.status, Status::NoEvidence, "{}", details(&outcome));
    assert!(details(&outcome).contains("ELENGTIS_REQUIRE_GATE_RUN=1"));

    let mut live = options(&dir.path().join("live"));
    live.live_target = true;
    let outcome = run(&shim, &live);
    assert_eq!(outcome.status, Status::Passed, "{}", details(&outcome));
    assert!(!server.requests().is_empty());
    let report = outcome.findings[0].report.as_ref().expect("a report");
    assert_eq!(report.model, "scripted-attacker");

    // No guarded side: it reproduces, nothing shows a safeguard stops it.
    let mut live = options(&dir.path().join("none"));
    live.live_target = true;
    let outcome = run(&gate_file("none"), &live);
    assert_eq!(outcome.status, Status::NotProven, "{}", details(&outcome));
}

#[test]
fn shards_of_the_committed_gate_re_prove_every_finding_once_with_the_unsharded_verdicts() {
    use elengtis_core::partition::{Partition, Scheme};
    let dir = scratch();
    let file = workspace().join("scenarios/gate/gate.yaml");
    let whole = run(&file, &options(&dir.path().join("whole")));
    assert!(whole.partition.is_none(), "an unsharded gate records no partition");
    let verdicts: BTreeMap<String, Status> = whole.findings.iter().map(|f| (f.seed.clone(), f.status)).collect();
    assert_eq!(verdicts.len(), 4, "{}", details(&whole));
    let file_order: Vec<String> = whole.findings.iter().map(|f| f.seed.clone()).collect();

    for (scheme, total) in [(Scheme::Count, 2), (Scheme::Hash, 3)] {
        let mut seen: BTreeMap<String, Status> = BTreeMap::new();
        let mut hashes = Vec::new();
        for shard in 1..=total {
            let partition = Partition { scheme, shard, total };
            let mut sharded = options(&dir.path().join(format!("{}-{shard}-of-{total}", scheme.as_str())));
            sharded.partition = Some(partition);
            let outcome = run(&file, &sharded);
            let record = outcome.partition.clone().expect("a sharded gate records its partition");
            assert_eq!((record.scheme, record.shard, record.total), (scheme, shard, total));
            assert_eq!(record.list, "findings");
            assert_eq!(record.list_items, 4);
            let ran: Vec<String> = outcome.findings.iter().map(|f| f.seed.clone()).collect();
            assert_eq!(record.items, ran, "the record names exactly the findings this shard re-proved");
            if scheme == Scheme::Count {
                // Round robin over the file's order: finding i is in shard i mod N + 1.
                let expected: Vec<String> = file_order
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 2 + 1 == shard as usize)
                    .map(|(_, s)| s.clone())
                    .collect();
                assert_eq!(ran, expected);
            }
            assert_eq!(outcome.status, gate::overall(outcome.findings.iter().map(|f| f.status)));
            // The JSON a script reads carries the partition.
            let json = serde_json::to_value(&outcome).expect("json");
            assert_eq!(json["partition"]["shard"], shard, "{json:#}");
            assert_eq!(json["partition"]["scheme"], scheme.as_str());
            hashes.push(record.list_sha256.clone());
            for finding in outcome.findings {
                assert!(
                    seen.insert(finding.seed.clone(), finding.status).is_none(),
                    "{} re-proven by two shards of {total}",
                    finding.seed
                );
            }
        }
        assert_eq!(seen, verdicts, "{scheme:?} N={total}: every finding once, with the unsharded verdict");
        assert!(hashes.iter().all(|h| *h == hashes[0]), "every shard records the same finding list: {hashes:?}");
    }

    // N above the number of findings: shard 6 of 6 holds none. It passes, runs nothing, and
    // its record says so.
    let mut empty = options(&dir.path().join("empty"));
    empty.partition = Some(Partition { scheme: Scheme::Count, shard: 6, total: 6 });
    let outcome = run(&file, &empty);
    assert_eq!(outcome.status, Status::Passed);
    assert!(outcome.findings.is_empty());
    let record = outcome.partition.expect("the empty shard's record");
    assert!(record.items.is_empty() && record.list_items == 4);
    assert!(record.line().contains("0 in this shard: none"), "{}", record.line());
    assert!(!dir.path().join("empty/out").exists(), "an empty shard proves nothing");
}

/// Every trial's start and end as the events report them, in order.
#[derive(Debug, Default)]
struct TrialEvents(std::sync::Mutex<Vec<(bool, String)>>);

impl elengtis_core::events::EventSink for TrialEvents {
    fn emit(&self, event: &elengtis_core::events::Event) {
        use elengtis_core::events::Event;
        let entry = match event {
            Event::TrialStarted { trial_id, .. } => (true, trial_id.clone()),
            Event::TrialFinished { trial_id, .. } => (false, trial_id.clone()),
            _ => return,
        };
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(entry);
    }
}

#[test]
fn the_gate_proves_two_findings_at_once_and_reports_them_in_the_files_order() {
    let dir = scratch();
    let events = Arc::new(TrialEvents::default());
    let mut options = options(&dir.path().join("out"));
    options.events = events.clone();
    let outcome = run(&workspace().join("scenarios/gate/gate.yaml"), &options);
    assert_eq!(outcome.status, Status::Passed, "{}", details(&outcome));
    let seeds: Vec<&str> = outcome.findings.iter().map(|f| f.seed.as_str()).collect();
    let in_file = [
        "w1-description-fetch-smuggle",
        "w2-note-body-direct",
        "w3-fetch-attacker-url-direct",
        "w4-send-email-direct-unconfirmed",
    ];
    assert_eq!(seeds, in_file, "outcomes keep the gate file's order");
    // Trial ids name their seed's scenario: while one finding's legs run, the next one's
    // start (issue 31: the slots its tail leaves are filled).
    let seed_of =
        |trial: &str| in_file.iter().position(|s| trial.contains(s)).unwrap_or_else(|| panic!("{trial}: no seed"));
    let events = events.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let mut running: BTreeMap<usize, usize> = BTreeMap::new();
    let mut most_findings = 0;
    for (started, trial) in &events {
        let count = running.entry(seed_of(trial)).or_default();
        if *started {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
        }
        most_findings = most_findings.max(running.values().filter(|&&n| n > 0).count());
    }
    assert_eq!(most_findings, 2, "two findings' legs at once, never more: {events:?}");
}

/// What GitHub code scanning keeps of consecutive analyses of one category: an alert is open
/// while the latest analysis has a failing result with its rule and fingerprint, and closed
/// ("fixed") once a later one does not.
#[derive(Debug, Default)]
struct CodeScanning {
    /// (rule, fingerprint) → open.
    alerts: BTreeMap<(String, String), bool>,
}

impl CodeScanning {
    fn upload(&mut self, sarif: &serde_json::Value) {
        let failing: Vec<(String, String)> = sarif["runs"][0]["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter(|r| r["kind"].as_str().unwrap_or("fail") == "fail")
            .map(|r| {
                let print =
                    r["partialFingerprints"].as_object().and_then(|p| p.values().next()).expect("a fingerprint");
                (r["ruleId"].as_str().expect("ruleId").to_owned(), print.as_str().expect("a string").to_owned())
            })
            .collect();
        for open in self.alerts.values_mut() {
            *open = false;
        }
        for key in failing {
            self.alerts.insert(key, true);
        }
    }

    fn open(&self) -> Vec<&(String, String)> {
        self.alerts.iter().filter(|(_, open)| **open).map(|(k, _)| k).collect()
    }
}

/// The line `line` (1-based) of `file`, trimmed.
fn line_of(file: &Path, line: u64) -> String {
    let text = std::fs::read_to_string(file).expect("read");
    text.lines().nth(usize::try_from(line).expect("line") - 1).expect("the line exists").trim().to_owned()
}

/// Issue 38, item 1: three consecutive gate runs of one finding — your server's own controls
/// hold, regress, are repaired — through the binary, each run's `findings.sarif` uploaded to a
/// model of code scanning: no alert, then one alert (the guarded side's leak, with its
/// evidence, at the gate file's entry), then none, the same finding closed. The target is a
/// stdio server of its own (`elengtis-inbox`, `guarded: controls`) driven live by the scripted
/// model server, so the gate needs no Docker engine.
#[test]
fn a_regressed_guard_opens_one_alert_and_its_repair_closes_it_across_three_gate_runs() {
    use elengtis_tests::{elengtis_cmd, stderr, stdout};
    let dir = scratch();
    let repo = dir.path().join("repo");
    for file in ["inbox-note-send.seed.yaml", "inbox-note-send.yaml"] {
        let text = std::fs::read_to_string(workspace().join("tests/data/seeds").join(file)).expect("seed");
        write(&repo, &format!("seeds/{file}"), &text);
    }
    let seed = elengtis_core::format::seed::load_seed(&repo.join("seeds/inbox-note-send.seed.yaml")).expect("seed");
    let server = ModelServer::start(
        dir.path(),
        &model_script("inbox-note-send", &serde_json::to_value(&seed.seed.script).expect("script")),
        &[],
    );
    let target = |allowlist: &str, taint_lock: &str| {
        write(
            &repo,
            "gate/inbox.target.yaml",
            &format!(
                "# the inbox server we ship, with its own controls\nid: inbox\ntransport:\n  type: stdio\n  command: elengtis-inbox\n  args: [--resolve, {{template: \"attacker.example.com={{sink_url}}\"}}]\nbindings: {{}}\ncontrol_env:\n  recipient-allowlist: {{INBOX_RECIPIENT_ALLOWLIST: \"{allowlist}\"}}\n  taint-lock: {{INBOX_TAINT_LOCK: \"{taint_lock}\"}}\n"
            ),
        );
    };
    write(
        &repo,
        "gate/gate.yaml",
        &format!(
            "schema_version: 1\niterations: 3\nmodel: {{model: scripted-attacker, provider: {{type: openai_compatible, base_url: 'http://{}/v1'}}}}\nfindings:\n  # the inbox's controls stop a planted note's send\n  - seed: ../seeds/inbox-note-send.seed.yaml\n    target: inbox.target.yaml\n    guarded: controls\n",
            server.addr
        ),
    );
    let gate = |out: &str, extra: &[&str]| -> (Option<i32>, serde_json::Value) {
        let mut args =
            vec!["gate", "--file", "gate/gate.yaml", "--seeds-dir", "seeds", "--out", out, "--json", "--jobs", "4"];
        args.extend_from_slice(extra);
        let mut command = elengtis_cmd(&repo, &args);
        command.env("ELENGTIS_LIVE_TARGET", "1").env("ELENGTIS_REQUIRE_GATE_RUN", "1");
        for var in elengtis_tests::PROVIDER_ENV {
            command.env_remove(var);
        }
        let started = std::time::Instant::now();
        let output = command.output().expect("gate");
        eprintln!("gate {out}: {:.1} s", started.elapsed().as_secs_f64());
        let json: serde_json::Value = serde_json::from_str(stdout(&output).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&output), stderr(&output)));
        let sarif = read_json(&repo.join(out).join("findings.sarif"));
        assert_eq!(json["sarif"].as_str().map(|s| s.ends_with("findings.sarif")), Some(true), "{json:#}");
        (output.status.code(), sarif)
    };
    let mut scanning = CodeScanning::default();

    // 1. The controls hold: the gate passes and the SARIF has no alert.
    target("ops@example.org", "1");
    let (code, pass) = gate("out-1", &[]);
    assert_eq!(code, Some(0), "{pass:#}");
    scanning.upload(&pass);
    assert!(scanning.open().is_empty(), "a guard that holds is no alert: {pass:#}");

    // 2. A regression of what we ship: its allowlist admits the attacker, its taint lock is off.
    target("ops@example.org,attacker@example.com", "0");
    let (code, regressed) = gate("out-2", &[]);
    assert_eq!(code, Some(7), "the guarded side leaks: REJECTED\n{regressed:#}");
    scanning.upload(&regressed);
    let open: Vec<(String, String)> = scanning.open().into_iter().cloned().collect();
    assert_eq!(open.len(), 1, "one alert for the one finding: {regressed:#}");
    assert_eq!(open[0].0, "inbox-note-send");
    let alert = &regressed["runs"][0]["results"][0];
    assert_eq!((&alert["kind"], &alert["level"]), (&"fail".into(), &"error".into()));
    let text = alert["message"]["text"].as_str().expect("message");
    assert!(
        text.starts_with("Your target `")
            && text.contains(
                "with its controls on (recipient-allowlist, taint-lock), which is what you ship, lets this attack through"
            ),
        "{text}"
    );
    // The guarded side's evidence, relative to the SARIF file.
    let evidence = alert["properties"]["shipped"]["evidence"].as_array().expect("evidence");
    assert!(!evidence.is_empty(), "{alert:#}");
    for file in evidence {
        assert!(repo.join("out-2").join(file.as_str().expect("a path")).is_file(), "{file}");
    }
    // Lines that exist, relative to the repository's root.
    let at = |i: usize| {
        let physical = &alert["locations"][i]["physicalLocation"];
        assert_eq!(physical["artifactLocation"]["uriBaseId"], "%SRCROOT%");
        let uri = physical["artifactLocation"]["uri"].as_str().expect("uri").to_owned();
        (uri.clone(), line_of(&repo.join(&uri), physical["region"]["startLine"].as_u64().expect("line")))
    };
    assert_eq!(at(0), ("gate/gate.yaml".to_owned(), "- seed: ../seeds/inbox-note-send.seed.yaml".to_owned()));
    assert!(at(1).0 == "seeds/inbox-note-send.seed.yaml" && at(1).1.starts_with("payload: "), "{:?}", at(1));
    assert_eq!(at(2), ("gate/inbox.target.yaml".to_owned(), "id: inbox".to_owned()));

    // 3. Repaired: no alert, and code scanning closes the one it opened.
    target("ops@example.org", "1");
    let (code, repaired) = gate("out-3", &["--sarif-include-rejected"]);
    assert_eq!(code, Some(0), "{repaired:#}");
    scanning.upload(&repaired);
    assert!(scanning.open().is_empty(), "the repair closes the alert: {repaired:#}");
    assert_eq!(scanning.alerts.len(), 1, "one finding, one alert over the three runs");
    // With --sarif-include-rejected the held guard is written as a pass of the same finding.
    let pass = &repaired["runs"][0]["results"][0];
    assert_eq!((&pass["kind"], &pass["level"]), (&"pass".into(), &"none".into()));
    assert_eq!(pass["partialFingerprints"], alert["partialFingerprints"]);
}
