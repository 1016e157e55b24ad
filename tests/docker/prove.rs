//! `elengtis prove` against the reference twins in hardened containers, offline, with the
//! scripted model: every bundled seed is KEPT; a guarded twin with W4 removed rejects exactly
//! the seeds W4 alone stands against; and the cost of one finding's full prove (5 iterations
//! × 2 sides plus 7 rewrites × 2 sides, a fresh container per leg) at `--jobs 1` and `--jobs 4`
//! is printed (never asserted).

use std::path::Path;
use std::time::{Duration, Instant};

use elengtis_tests::{
    bundled_images, docker_or_skip, elengtis, elengtis_cmd, read_json, scratch, stderr, stdout, workspace,
};

const ONLY_W4: [&str; 2] = ["w4-send-email-direct-unconfirmed", "w4-self-confirm"];

fn prove_all(out: &Path, extra: &[&str]) -> serde_json::Value {
    let out_s = out.to_str().expect("a UTF-8 path");
    let mut args = vec!["prove", "--all", "--jobs", "4", "--json", "--out", out_s];
    args.extend_from_slice(extra);
    let output = elengtis(&workspace(), &args);
    let text = stdout(&output);
    let json: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("prove --json printed no JSON ({e}):\n{text}\n{}", stderr(&output)));
    assert_eq!(output.status.code(), json["exit_code"].as_i64().map(|c| c as i32), "{}", stderr(&output));
    json
}

fn verdicts(json: &serde_json::Value) -> Vec<(String, String, String)> {
    json["reports"]
        .as_array()
        .expect("reports")
        .iter()
        .map(|r| {
            (
                r["seed"].as_str().unwrap_or_default().to_owned(),
                r["verdict_label"].as_str().unwrap_or_default().to_owned(),
                r.to_string(),
            )
        })
        .collect()
}

#[test]
fn every_bundled_seed_is_kept_in_isolated_containers() {
    if !docker_or_skip("every_bundled_seed_is_kept_in_isolated_containers") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let json = prove_all(&dir.path().join("out"), &[]);
    let verdicts = verdicts(&json);
    assert_eq!(verdicts.len(), 11);
    for (seed, verdict, report) in &verdicts {
        assert_eq!(verdict, "KEPT", "{seed}: {report}");
    }
    assert_eq!(json["exit_code"], 0);
    let sarif = read_json(&dir.path().join("out/findings.sarif"));
    assert_eq!(sarif["version"], "2.1.0");
    // Every guarded twin held: the side that is shipped let nothing through, so no alert.
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]), "{sarif:#}");
    for (seed, ..) in &verdicts {
        assert!(dir.path().join("out").join(seed).join("validation_report.json").is_file(), "{seed}");
        // Every leg's twin needs only its canary sink: it ran in the sink's namespace (issue
        // 31), the sink in the `none` mode, every hardening fact of both held.
        let evidence = dir.path().join("out").join(seed).join("repeat/results/evidence");
        let mut legs = 0;
        for entry in std::fs::read_dir(&evidence).expect("the repeat evidence") {
            let path = entry.expect("an evidence entry").path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let te = read_json(&path)["target_execution"].clone();
            assert_eq!(te["network"]["mode"], "sink_namespace", "{}: {te}", path.display());
            assert_eq!(te["hardening_asserted"], true, "{}: {te}", path.display());
            let sink_ok = te["sink"]["hardening"].as_array().is_some_and(|f| f.iter().all(|f| f["ok"] == true));
            assert!(sink_ok, "{}: {te}", path.display());
            legs += 1;
        }
        assert_eq!(legs, 10, "{seed}: 5 iterations x 2 sides");
        let carrier = elengtis_tests::rows(&dir.path().join("out").join(seed).join("carrier/results/runs.jsonl"));
        assert_eq!(carrier.len(), 1, "{seed}: one benign-carrier run for the deterministic script");
    }
}

#[test]
fn a_guarded_twin_without_w4_rejects_the_seeds_only_w4_stops() {
    if !docker_or_skip("a_guarded_twin_without_w4_rejects_the_seeds_only_w4_stops") {
        return;
    }
    bundled_images();
    let dir = scratch();
    // Four seeds in containers (every class is covered seed by seed over the fake backend in
    // tests/cli/prove.rs): the two W4 alone stops, one W4 shares with W2, one without W4.
    let seeds = dir.path().join("seeds");
    std::fs::create_dir_all(&seeds).expect("seeds dir");
    for id in ONLY_W4.iter().chain(&["w2-note-body-direct", "w3-fetch-attacker-url-direct"]) {
        for name in [format!("{id}.seed.yaml"), format!("{id}.yaml")] {
            std::fs::copy(workspace().join("scenarios/seeds").join(&name), seeds.join(&name)).expect("copy a seed");
        }
    }
    let seeds_dir = seeds.to_str().expect("UTF-8").to_owned();
    let json = prove_all(&dir.path().join("out"), &["--disable-guard", "W4", "--seeds-dir", &seeds_dir]);
    assert_eq!(verdicts(&json).len(), 4);
    for (seed, verdict, report) in &verdicts(&json) {
        let expected = if ONLY_W4.contains(&seed.as_str()) { "REJECTED" } else { "KEPT" };
        assert_eq!(verdict, expected, "{seed} with W4 disabled: {report}");
    }
    assert_eq!(json["exit_code"], 7, "a rejected finding exits 7");
}

/// Peak resident memory (VmHWM) of a running process, KiB.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn one_findings_full_prove_wall_time_and_peak_memory() {
    if !docker_or_skip("one_findings_full_prove_wall_time_and_peak_memory") {
        return;
    }
    bundled_images();
    let seed = workspace().join("scenarios/seeds/w4-send-email-via-note-injection.seed.yaml");
    for jobs in ["1", "4"] {
        let dir = scratch();
        let out = dir.path().join("out");
        let begun = Instant::now();
        let mut child = elengtis_cmd(
            &workspace(),
            &[
                "prove",
                "--seed",
                seed.to_str().expect("UTF-8"),
                "--jobs",
                jobs,
                "--json",
                "--out",
                out.to_str().expect("UTF-8"),
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prove starts");
        let mut peak_kib = 0;
        let status = loop {
            if let Some(kib) = vm_hwm(child.id()) {
                peak_kib = peak_kib.max(kib);
            }
            if let Some(status) = child.try_wait().expect("wait for prove") {
                break status;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let wall = begun.elapsed();
        assert!(status.success(), "prove --jobs {jobs} exited {status}");
        println!(
            "prove of one finding (5 iterations x 2 sides + 7 rewrites x 2 sides + 1 benign-carrier run = 25 legs and 4 \
             calibration runs, scripted model, isolated containers) --jobs {jobs}: wall {:.1} s, peak RSS {:.1} MiB",
            wall.as_secs_f64(),
            peak_kib as f64 / 1024.0
        );
    }
}

/// The bundled reply-only seed through the binary, the twins in containers and the bundled rule
/// judge on 127.0.0.1: decided by the judge alone, so REJECTED with that reason; the judge's
/// answers recorded with `--record-fixtures` replay offline with the server gone.
#[test]
fn the_reply_only_seed_is_decided_by_the_judge_and_replays_offline() {
    if !docker_or_skip("the_reply_only_seed_is_decided_by_the_judge_and_replays_offline") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let script: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("scenarios/judge/rule-judge.model-server.json")).expect("script"),
    )
    .expect("JSON");
    let server = elengtis_tests::model_server::ModelServer::start(dir.path(), &script, &[]);
    let config = elengtis_tests::write(
        dir.path(),
        "judge.yaml",
        &format!(
            "model: scripted-judge\nprovider: {{type: openai_compatible, base_url: 'http://{}/v1'}}\n",
            server.addr
        ),
    );
    let seed = workspace().join("scenarios/judge/reply-claim.seed.yaml");
    let fixtures = dir.path().join("fixtures");
    let prove = |out: &str, fixture_flag: &str| {
        let out = dir.path().join(out);
        let args = [
            "prove",
            "--seed",
            seed.to_str().expect("UTF-8"),
            "--judge-config",
            config.to_str().expect("UTF-8"),
            fixture_flag,
            fixtures.to_str().expect("UTF-8"),
            "--jobs",
            "4",
            "--json",
            "--out",
            out.to_str().expect("UTF-8"),
        ];
        let output = elengtis(&workspace(), &args);
        let json: serde_json::Value = serde_json::from_str(stdout(&output).trim())
            .unwrap_or_else(|e| panic!("no JSON ({e}): {}{}", stdout(&output), stderr(&output)));
        (output.status.code(), json["reports"][0].clone())
    };
    let (code, report) = prove("live", "--record-fixtures");
    assert_eq!(code, Some(7), "REJECTED exits 7: {report:#}");
    assert_eq!(report["verdict_label"], "REJECTED");
    assert!(
        report["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r == "every firing run rested on the LLM judge alone")),
        "{report:#}"
    );
    assert_eq!(report["evidence_tier"], "judge-only");
    assert_eq!(report["judge"]["vulnerable"]["landed"], 5, "{:#}", report["judge"]);
    let asked = server.requests().len();
    assert_eq!(report["judge"]["all"]["calls"].as_u64(), Some(asked as u64));
    drop(server);
    let (code, replayed) = prove("replayed", "--replay-fixtures");
    assert_eq!(code, Some(7));
    for field in ["verdict_label", "reasons", "evidence_tier"] {
        assert_eq!(replayed[field], report[field], "{field}");
    }
    assert_eq!(replayed["judge"]["all"], report["judge"]["all"], "the replay rules as the recording did");
}
