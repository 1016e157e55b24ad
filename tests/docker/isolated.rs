//! `isolated_container` targets: hardened per-trial containers, lifecycle evidence, no
//! leftovers, preflight, parallel runs, resume after a crash, and gc scope.

use std::path::Path;

use elengtis_tests::{
    ChildGuard, FixtureMcp, assert_trials_ran_under_the_test_runtime, bundled_images, docker_api, docker_or_skip,
    elengtis, elengtis_cmd, fixture_target, managed_objects, read_json, rows, scratch, stderr, stdout,
    support_note_campaign, write,
};

fn campaign(image: &str, trials: u32) -> String {
    support_note_campaign(
        trials,
        &[
            fixture_target("iso-http", image, FixtureMcp::Http, 65534, &[]),
            fixture_target("iso-stdio", image, FixtureMcp::Stdio, 10001, &[]),
        ],
    )
}

fn fixture() -> String {
    format!("elengtis/fixture:{}", env!("CARGO_PKG_VERSION"))
}

fn setup(dir: &Path, image: &str, trials: u32) {
    write(dir, "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    write(dir, "campaign.yaml", &campaign(image, trials));
}

#[test]
fn isolated_trials_run_in_hardened_containers_and_leave_nothing_behind() {
    if !docker_or_skip("isolated_trials_run_in_hardened_containers_and_leave_nothing_behind") {
        return;
    }
    bundled_images();
    let dir = scratch();
    setup(dir.path(), &fixture(), 2);
    let out = elengtis(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out", "--jobs", "2"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("proposed: 4/4"), "{}", stdout(&out));
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 4);
    assert_eq!(assert_trials_ran_under_the_test_runtime(&dir.path().join("out")), 4);
    let run_id = rows[0]["run_id"].as_str().unwrap().to_owned();
    for row in &rows {
        assert_eq!(row["evidence_status"], "complete", "{row}");
        let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().unwrap()));
        let te = &evidence["target_execution"];
        assert_eq!(te["isolation"], "isolated_container");
        assert_eq!(te["session"], "fresh_container");
        assert_eq!(te["reset_asserted"], true);
        assert_eq!(te["hardening_asserted"], true, "{te}");
        let facts = te["hardening"].as_array().unwrap();
        assert!(facts.len() >= 25, "{facts:?}");
        assert!(facts.iter().all(|f| f["ok"] == true), "{facts:?}");
        let mode = if row["target"] == "iso-http" { "http" } else { "stdio" };
        assert_eq!(te["network"]["scope"], "trial");
        let fact = |name: &str| facts.iter().find(|f| f["fact"] == name).unwrap_or_else(|| panic!("no {name}: {te}"));
        let events = vec!["container_created", "started", "ready", "container_removed"];
        // With no sink and no gateway neither mode needs a network: a stdio server has its
        // attach stream, and a streamable-HTTP server is reached through the relay container
        // in its network namespace. Both run in the engine's `none` mode (loopback only),
        // asserted from the engine's answer.
        assert_eq!(te["network"]["mode"], "none", "{te}");
        assert_eq!(fact("network_mode")["observed"], "none");
        assert_eq!(fact("network_driver")["observed"], "null");
        for absent in ["network_created", "network_removed"] {
            assert!(te["timestamps"][absent].is_null(), "a networkless trial recorded {absent}: {te}");
        }
        if mode == "http" {
            // The relay: the target's namespace exactly, no network of its own, every fact
            // held, and one attach stream that carried the session's connections.
            let relay = &te["relay"];
            let relay_facts = relay["hardening"].as_array().expect("relay facts");
            assert!(relay_facts.iter().all(|f| f["ok"] == true), "{relay}");
            let relay_fact = |name: &str| relay_facts.iter().find(|f| f["fact"] == name).expect("relay fact");
            let target_id = te["container"]["id"].as_str().expect("target id");
            assert_eq!(relay_fact("network_mode")["observed"], format!("container:{target_id}"), "{relay}");
            assert_eq!(relay_fact("attached_networks")["observed"], serde_json::json!([]), "{relay}");
            assert_eq!(relay["upstream"], "127.0.0.1:8000", "{relay}");
            assert!(relay["stream"]["connections"].as_u64().is_some_and(|n| n >= 1), "{relay}");
            assert_eq!(relay["stream"]["error"], serde_json::Value::Null, "{relay}");
            // Still running at teardown, or ended cleanly when the runner closed its stream.
            let end = &relay["state"];
            assert!(end["end"] == "running" || (end["end"] == "exited" && end["exit_code"] == 0), "{relay}");
        }
        assert!(te["image"]["id"].as_str().unwrap().starts_with("sha256:"));
        assert!(te["container"]["id"].as_str().unwrap().len() >= 12);
        assert_eq!(te["cleanup"]["ok"], true, "{te}");
        for event in events {
            assert!(te["timestamps"][event].is_string(), "missing {event}: {te}");
        }
        assert_eq!(te["mode"], mode);
        let user = facts.iter().find(|f| f["fact"] == "user").unwrap();
        assert_eq!(user["observed"], if mode == "http" { "65534:65534" } else { "10001:10001" });
    }
    assert!(managed_objects(&run_id).is_empty(), "leftovers: {:?}", managed_objects(&run_id));
}

#[test]
fn a_missing_image_is_refused_before_anything_starts() {
    if !docker_or_skip("a_missing_image_is_refused_before_anything_starts") {
        return;
    }
    let dir = scratch();
    setup(dir.path(), "elengtis-test/absent:0", 1);
    let out = elengtis(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("elengtis-test/absent:0") && err.contains("never pulls"), "{err}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn preflight_starts_and_tears_down_each_container() {
    if !docker_or_skip("preflight_starts_and_tears_down_each_container") {
        return;
    }
    bundled_images();
    let dir = scratch();
    setup(dir.path(), &fixture(), 1);
    let out = elengtis(dir.path(), &["preflight", "campaign.yaml", "--json"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for target in report["targets"].as_array().unwrap() {
        assert_eq!(target["ok"], true, "{target}");
        assert!(target["tools"].as_array().unwrap().iter().any(|t| t == "read_note"));
        assert_eq!(target["execution"]["cleanup"]["ok"], true);
        assert_eq!(target["execution"]["hardening_asserted"], true);
    }
    let text = elengtis(dir.path(), &["preflight", "campaign.yaml"]);
    assert!(stdout(&text).contains("iso-http: isolated container preflight passed"), "{}", stdout(&text));
}

#[test]
fn two_preflights_on_one_engine_do_not_collide() {
    if !docker_or_skip("two_preflights_on_one_engine_do_not_collide") {
        return;
    }
    bundled_images();
    let dir = scratch();
    setup(dir.path(), &fixture(), 1);
    // Before, every preflight named its objects `elengtis-prefligh-prefligh`: the second one
    // failed with HTTP 409 ("Conflict. The container name … is already in use").
    let spawn = || {
        elengtis_cmd(dir.path(), &["preflight", "campaign.yaml", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn preflight")
    };
    let (first, second) = (ChildGuard::new(spawn()), ChildGuard::new(spawn()));
    for out in [first, second].map(|c| c.wait_output(std::time::Duration::from_secs(300))) {
        assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
        assert!(!stdout(&out).contains("Conflict") && !stderr(&out).contains("Conflict"), "{}", stdout(&out));
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        for target in report["targets"].as_array().unwrap() {
            assert_eq!(target["ok"], true, "{target}");
            assert_eq!(target["execution"]["cleanup"]["ok"], true, "{target}");
        }
    }
}

#[test]
fn parallel_runs_record_the_same_outcomes_as_sequential_runs() {
    if !docker_or_skip("parallel_runs_record_the_same_outcomes_as_sequential_runs") {
        return;
    }
    bundled_images();
    let dir = scratch();
    setup(dir.path(), &fixture(), 2);
    let outcomes = |name: &str, jobs: &str| {
        let out = elengtis(dir.path(), &["run", "--config", "campaign.yaml", "--out", name, "--jobs", jobs]);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut v: Vec<String> = rows(&dir.path().join(name).join("runs.jsonl"))
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {}",
                    r["trial_id"], r["proposed"], r["completed"], r["termination"], r["tool_sequence"]
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(outcomes("seq", "1"), outcomes("par", "4"));
}

#[test]
fn gc_never_touches_objects_it_did_not_create() {
    if !docker_or_skip("gc_never_touches_objects_it_did_not_create") {
        return;
    }
    let name = format!("elengtis-test-foreign-{}", std::process::id());
    let (status, body) =
        docker_api("POST", "/networks/create", Some(&format!("{{\"Name\":\"{name}\",\"Internal\":true}}")));
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["Id"].as_str().unwrap().to_owned();
    // Scoped to a run of its own: a global sweep would also remove the containers of the
    // other tests running in parallel (which is why `gc` takes --run).
    let out = elengtis(Path::new("/"), &["gc", "--run", &format!("test-{}", std::process::id())]);
    let (still, _) = docker_api("GET", &format!("/networks/{id}"), None);
    let _ = docker_api("DELETE", &format!("/networks/{id}"), None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(still, 200, "gc removed a network it did not create");
}

#[test]
fn a_killed_isolated_run_resumes_without_leftovers_or_duplicates() {
    if !docker_or_skip("a_killed_isolated_run_resumes_without_leftovers_or_duplicates") {
        return;
    }
    bundled_images();
    let dir = scratch();
    setup(dir.path(), &fixture(), 3);
    let mut child = elengtis_tests::elengtis_cmd(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the run");
    let log = dir.path().join("out/runs.jsonl");
    let started = elengtis_tests::wait_until(std::time::Duration::from_secs(120), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains('\n'))
    });
    // Kill it in the middle of a later trial: a container of this run is likely alive.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    assert!(started, "no trial finished within 2 minutes");
    // The rows whole at the kill (a torn tail, which resume cuts, is not one of them).
    let text = std::fs::read_to_string(&log).expect("read the log");
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    let before: Vec<serde_json::Value> = whole.lines().map(|l| serde_json::from_str(l).expect("row")).collect();
    assert!(before.len() < 6, "the run finished before it was killed; nothing to resume");
    let run_id = before[0]["run_id"].as_str().unwrap().to_owned();
    let out = elengtis(dir.path(), &["run", "--resume", "--out", "out"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let after = rows(&log);
    let mut complete: Vec<&str> =
        after.iter().filter(|r| r["evidence_status"] == "complete").map(|r| r["trial_id"].as_str().unwrap()).collect();
    complete.sort_unstable();
    let mut unique = complete.clone();
    unique.dedup();
    assert_eq!(complete.len(), 6, "every trial once: {complete:?}");
    assert_eq!(unique.len(), 6, "no duplicates: {complete:?}");
    assert_eq!(&after[..before.len()], &before[..], "rows written before the kill changed");
    assert!(managed_objects(&run_id).is_empty(), "leftovers: {:?}", managed_objects(&run_id));
}
