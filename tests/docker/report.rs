//! `elengtis report` over isolated runs with a canary sink and a SQLite snapshot check (the
//! packaged examples), opened in headless Chromium: each trial shows its container and image
//! ids, the hardening asserted, the sink's records and the snapshot's hash; and a `prove`
//! output's validation report with its trust panel, legs and kill matrix (docs/report.md).

use std::path::Path;

use elengtis_tests::browser::{dump_dom, file_url, tags_with, unescape};
use elengtis_tests::{
    bundled_images, chromium_or_skip, docker_or_skip, elengtis, read_json, rows, scratch, stderr, stdout, workspace,
};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The text of the element carrying `data-field="<field>"` (a `<dd>` the report renders).
fn field_text(dom: &str, field: &str) -> Option<String> {
    let needle = format!("data-field=\"{field}\">");
    let at = dom.find(&needle)? + needle.len();
    let end = at + dom[at..].find('<')?;
    Some(unescape(&dom[at..end]))
}

#[test]
fn the_report_shows_container_ids_hardening_sink_records_and_snapshot_hashes() {
    let test = "the_report_shows_container_ids_hardening_sink_records_and_snapshot_hashes";
    if !docker_or_skip(test) {
        return;
    }
    let Some(chromium) = chromium_or_skip(test) else { return };
    bundled_images();
    let dir = scratch();
    let mut inputs = Vec::new();
    for example in ["sink-exfil", "sqlite-state"] {
        let out = dir.path().join(example);
        let run = elengtis(dir.path(), &["example", example, "--out", s(&out)]);
        assert_eq!(run.status.code(), Some(0), "{example}: {}{}", stdout(&run), stderr(&run));
        inputs.push(out);
    }
    // A prove output root (one iteration, no metamorphic stage: quick): its validation report
    // and its legs' results directory are found under it.
    let prove = dir.path().join("prove");
    let seeds = workspace().join("scenarios/seeds");
    let proved = elengtis(
        &workspace(),
        &[
            "prove",
            "--seed",
            s(&seeds.join("w2-note-body-direct.seed.yaml")),
            "--seeds-dir",
            s(&seeds),
            "--iterations",
            "1",
            "--no-metamorphic",
            "--out",
            s(&prove),
        ],
    );
    assert!(
        prove.join("w2-note-body-direct/validation_report.json").is_file(),
        "{}{}",
        stdout(&proved),
        stderr(&proved)
    );
    let report = dir.path().join("report.html");
    let mut args = vec!["report", "--input", s(&prove)];
    for input in &inputs {
        args.extend(["--input", s(input)]);
    }
    args.extend(["--out", s(&report)]);
    let made = elengtis(dir.path(), &args);
    assert_eq!(made.status.code(), Some(0), "{}{}", stdout(&made), stderr(&made));

    for input in &inputs {
        let row = rows(&input.join("runs.jsonl")).remove(0);
        let evidence = read_json(&input.join(row["evidence"].as_str().expect("evidence")));
        let execution = &evidence["target_execution"];
        let trial = row["trial_id"].as_str().expect("trial id");
        let (dom, _) = dump_dom(&chromium, &format!("{}#trial={trial}", file_url(&report)), &[]);
        assert!(dom.contains(&format!("data-trial-id=\"{trial}\"")), "{trial} is listed");
        let shown = |field: &str| field_text(&dom, field).unwrap_or_else(|| panic!("{trial}: no {field} shown"));
        assert_eq!(shown("container-id"), execution["container"]["id"].as_str().expect("container id"), "{trial}");
        assert_eq!(shown("image-id"), execution["image"]["id"].as_str().expect("image id"), "{trial}");
        assert_eq!(execution["hardening_asserted"], true, "{trial}");
        assert_eq!(shown("hardening-asserted"), "true", "{trial}");
        // How the trial was networked (the sink example: in the sink's namespace).
        assert_eq!(shown("network-mode"), execution["network"]["mode"].as_str().expect("network mode"), "{trial}");
        if execution["sink"].is_object() {
            assert_eq!(shown("network-mode"), "sink_namespace", "{trial}");
        }
        let facts = execution["hardening"].as_array().expect("hardening facts");
        assert!(!facts.is_empty());
        for fact in facts {
            let name = fact["fact"].as_str().expect("a fact name");
            assert!(dom.contains(&format!(">{name}<")), "{trial}: the hardening fact {name} is shown");
        }
        if let Some(requests) = execution["sink"]["requests"].as_array() {
            assert!(!requests.is_empty(), "the sink recorded the exfiltration");
            assert_eq!(shown("sink-container-id"), execution["sink"]["container"]["id"].as_str().expect("sink id"));
            let records = dom.matches("class=\"json sink-record\"").count();
            assert_eq!(records, requests.len(), "{trial}: every sink record is shown");
            for request in requests {
                let body = request["body"].as_str().expect("a body");
                assert!(dom.contains(body), "{trial}: the sink record's body {body} is shown");
            }
        }
        let hashes: Vec<&str> = evidence["verification"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["action"]["response"]["snapshot_sha256"].as_str())
            .collect();
        for hash in &hashes {
            assert!(dom.contains(&format!("data-sha256=\"{hash}\"")), "{trial}: the snapshot hash {hash} is shown");
        }
        if input.ends_with("sqlite-state") {
            assert_eq!(hashes.len(), 1, "the SQLite example has a snapshot: {}", evidence["verification"]);
            assert!(dom.contains("trusts: runner"), "the snapshot check is the runner's own");
        } else {
            assert!(execution["sink"]["requests"].is_array(), "the sink example has sink records: {execution}");
        }
        assert_eq!(row["completed"], Value::Bool(true), "{trial}");
    }

    // The validation report: verdict, trust panel, legs, kill matrix.
    let validation = read_json(&prove.join("w2-note-body-direct/validation_report.json"));
    let html = std::fs::read_to_string(&report).expect("the report");
    let articles = tags_with(&html, "data-verdict");
    assert_eq!(articles.len(), 1, "one validation report");
    assert_eq!(articles[0]["data-seed"], "w2-note-body-direct");
    assert_eq!(articles[0]["data-verdict"], validation["verdict"].as_str().expect("verdict"));
    assert!(html.contains("<pre class=\"panel\">prove w2-note-body-direct"), "the trust panel as prove prints it");
    let legs: Vec<String> = tags_with(&html, "data-side").into_iter().map(|t| t["data-side"].clone()).collect();
    assert_eq!(legs, ["vulnerable", "guarded"]);
    // Each run's reading with the evidence file it rests on.
    let first = validation["legs"]["vulnerable"]["runs"][0]["evidence"].as_str().expect("an evidence link");
    assert!(html.contains(&format!("[{first}]")), "the legs table links {first}");
    assert!(prove.join("w2-note-body-direct").join(first).is_file(), "{first}");
    let matrix = validation["mutation"]["matrix"].as_array().expect("kill matrix");
    let shown = tags_with(&html, "data-status");
    assert_eq!(shown.len(), matrix.len(), "every seed of the catalogue in the kill matrix");
    for (entry, row) in matrix.iter().zip(&shown) {
        assert_eq!(row["data-seed"], entry["seed"].as_str().expect("seed"));
        assert_eq!(row["data-status"], entry["status"].as_str().expect("status"));
    }
    assert!(stdout(&made).contains("1 validation report"), "{}", stdout(&made));
}
