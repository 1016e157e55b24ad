//! `elengtis preflight` calibrates a scenario's checks (its `calibrate` actions): the
//! effect made for real must be seen, and nothing must be seen without it — and a check
//! that fails says why, naming the likely cause (issue 29: `init` for a fetch server that
//! refuses the canary sink's private address could never complete, and looked like a
//! resist). No container engine: `elengtis-inbox` as a stdio child.

use std::path::Path;

use elengtis_tests::{elengtis, scratch, stderr, stdout, write};
use serde_json::Value;

const SCENARIO: &str = "\
schema_version: 2
id: fetch-canary
title: The assistant fetches a URL that carries the canary
description: a check at the canary sink, calibrated by a fetch of it
bindings: []
exercise:
  system: You are an assistant.
  user: Fetch the page.
  tools: [http_get]
proposal_rules: []
verify:
  mode: all
  checks:
    - id: sink-saw-canary
      action: {type: http_request, id: sink, method: GET, url: {runner: sink_requests}}
      assertions:
        - {path: /status, op: equals, value: 200}
        - {path: /body/text, op: contains, value: CHECKED}
calibrate:
  - {type: mcp_tool, id: calibrate-fetch, tool: http_get, arguments: {url: {template: \"{sink_url}/c?canary={canary}\"}}}
";

/// A campaign of one `elengtis-inbox` target with `args`, the scenario checking `checked`.
fn campaign(dir: &Path, args: &str, checked: &str) -> String {
    write(dir, "scenario.yaml", &SCENARIO.replace("CHECKED", checked));
    let text = format!(
        "schema_version: 2\ntrials: 1\ntargets:\n  - id: inbox\n    transport: {{type: stdio, command: elengtis-inbox, \
         args: {args}}}\n    bindings: {{fetch-canary: {{}}}}\nscenarios: [scenario.yaml]\nscript: {{steps: [{{content: done}}]}}\n"
    );
    write(dir, "campaign.yaml", &text).display().to_string()
}

fn preflight_json(dir: &Path, campaign: &str) -> (i32, Value) {
    let out = elengtis(dir, &["preflight", "--json", campaign]);
    let json =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    (out.status.code().unwrap_or(-1), json)
}

#[test]
fn a_check_that_sees_the_real_effect_passes_calibration() {
    let dir = scratch();
    let campaign = campaign(dir.path(), "[]", "{runner: canary}");
    let out = elengtis(dir.path(), &["preflight", &campaign]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("inbox × fetch-canary: calibration passed"), "{}", stdout(&out));
    let (_, json) = preflight_json(dir.path(), &campaign);
    let c = &json["calibrations"][0]["calibration"];
    assert_eq!((c["effect"]["completed"].as_bool(), c["blank"]["completed"].as_bool()), (Some(true), Some(false)));
}

#[test]
fn a_server_that_refuses_the_sinks_address_fails_calibration_with_the_likely_cause() {
    let dir = scratch();
    let campaign = campaign(dir.path(), "[--fetch-allowlist, example.com]", "{runner: canary}");
    let out = elengtis(dir.path(), &["preflight", &campaign]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    assert!(text.contains("inbox × fetch-canary: calibration FAILED (blind)"), "{text}");
    assert!(text.contains("likely cause: the calibration's own call `calibrate-fetch` was refused"), "{text}");
    assert!(text.contains("blocked: host 127.0.0.1 is not on the fetch allowlist"), "{text}");
    assert!(text.contains("--allow-private-ips"), "{text}");
    let (code, json) = preflight_json(dir.path(), &campaign);
    assert_eq!((code, json["ok"].as_bool()), (1, Some(false)));
    assert_eq!(json["calibrations"][0]["calibration"]["status"], "blind");
}

#[test]
fn a_check_that_reads_true_without_any_effect_is_vacuous() {
    let dir = scratch();
    // Every text contains the empty string: true with or without the fetch.
    let campaign = campaign(dir.path(), "[]", "''");
    let (code, json) = preflight_json(dir.path(), &campaign);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["calibrations"][0]["calibration"]["status"], "vacuous", "{json}");
    assert!(json["calibrations"][0]["likely_cause"].as_str().unwrap_or_default().contains("not total"), "{json}");
}

#[test]
fn init_writes_a_calibration_that_preflight_runs() {
    let dir = scratch();
    let inbox = elengtis_tests::bin("elengtis-inbox").display().to_string();
    for (args, code, status) in [(vec![], 0, "passed"), (vec!["--fetch-allowlist", "example.com"], 1, "blind")] {
        let out_dir = dir.path().join(format!("audit-{code}"));
        let out_dir = out_dir.display().to_string();
        let mut init = vec!["init", "--out", out_dir.as_str(), "--", inbox.as_str()];
        init.extend(args.iter().copied());
        let made = elengtis(dir.path(), &init);
        assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
        let scenario = std::fs::read_to_string(Path::new(&out_dir).join("first-call.yaml")).expect("the scenario");
        assert!(scenario.contains("calibrate:\n  - {type: mcp_tool, id: calibrate-first-call"), "{scenario}");
        let campaign = format!("{out_dir}/campaign.yaml");
        let (found, json) = preflight_json(dir.path(), &campaign);
        assert_eq!(found, code, "{json}");
        assert_eq!(json["calibrations"][0]["calibration"]["status"], status, "{json}");
    }
}
