//! Tool-call arguments checked against the target's tool schemas (issue 15, item 3):
//! `elengtis preflight` against a live listing, `elengtis validate --tools` against a recorded
//! one. The target is `elengtis-malformed --case ok --tools-file`, serving the real tools/list
//! of mcp-server-time 2026.10.19 (tests/fixtures/mcp-server-time-2026.10.19.tools.json: the
//! `result` of tools/list from the PyPI wheel run as `mcp-server-time --local-timezone UTC`
//! over stdio), so the schemas are that server's own and no image or Python is needed.

use std::path::{Path, PathBuf};

use elengtis_tests::{bin, elengtis, read_json, scratch, stderr, stdout, workspace, write};
use serde_json::{Value, json};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn time_tools() -> PathBuf {
    workspace().join("tests/fixtures/mcp-server-time-2026.10.19.tools.json")
}

/// The packaged mcp-server-time scenario (quoted times, a rule with examples) with a campaign
/// whose stdio target serves `tools` and whose script makes `calls` (YAML, indented 8).
fn campaign(dir: &Path, tools: &Path, calls: &str) -> PathBuf {
    let scenario = std::fs::read_to_string(workspace().join("scenarios/mcp-server-time/time-conversion.yaml"))
        .expect("read the packaged scenario");
    write(dir, "time-conversion.yaml", &scenario);
    let text = format!(
        "schema_version: 1
trials: 1
step_budget: 4
engine: reference
targets:
  - id: time
    transport:
      type: stdio
      command: {server}
      args: [--case, ok, --tools-file, {tools}]
    bindings:
      time-conversion:
        get_time: get_current_time
        convert_time: convert_time
scenarios: [time-conversion.yaml]
script:
  steps:
    - calls:
{calls}",
        server = s(&bin("elengtis-malformed")),
        tools = s(tools),
    );
    write(dir, "campaign.yaml", &text)
}

/// A current-time call without its required `timezone`, and a conversion with an unquoted
/// `14:30` (lines 21 and 27 of the campaign).
const BAD_CALLS: &str = "        - id: now
          tool: {binding: get_time}
          arguments: {}
    - calls:
        - id: tokyo
          tool: {binding: convert_time}
          arguments:
            source_timezone: Europe/Warsaw
            time: 14:30
            target_timezone: {runner: canary}
";

#[test]
fn preflight_flags_a_sexagesimal_time_and_a_missing_argument_against_mcp_server_times_real_schema() {
    let dir = scratch();
    let config = campaign(dir.path(), &time_tools(), BAD_CALLS);
    assert_eq!(elengtis(dir.path(), &["validate", s(&config)]).status.code(), Some(0), "valid without a tool list");

    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("time: stdio target preflight FAILED: 2 problems"), "{text}");
    let file = s(&config);
    assert_eq!(
        lines[1],
        format!(
            "  {file}:21:22: arguments.timezone of tool get_current_time: missing; the tool's schema requires it (script step 1 call 1 `now`)"
        ),
        "{text}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "  {file}:27:19: arguments.time of tool convert_time: 870 is not of type \"string\"; the unquoted `14:30` is a YAML 1.1 base-60 (sexagesimal) number: elengtis, like the original Python tool (PyYAML safe_load, YAML 1.1), reads it as 870, while a YAML 1.2 parser reads the text \"14:30\"; quote it ('14:30')"
        )),
        "{text}"
    );
    // `{runner: canary}` for a string argument: known only per trial, never a type error.
    assert_eq!(lines.len(), 3, "{text}");

    // --json: the findings as objects.
    let output = elengtis(dir.path(), &["preflight", "--json", s(&config)]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(report["ok"], json!(false));
    let target = &report["targets"][0];
    assert_eq!(target["tools"], json!(["get_current_time", "convert_time"]));
    assert_eq!(
        target["tool_list"][1]["inputSchema"]["required"],
        json!(["source_timezone", "time", "target_timezone"])
    );
    let findings = target["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 2);
    assert_eq!(findings[0]["kind"], json!("missing_argument"));
    assert_eq!(findings[0]["path"], json!("script.steps[0].calls[0].arguments.timezone"));
    let time = &findings[1];
    assert_eq!(
        (&time["severity"], &time["kind"], &time["line"], &time["column"], &time["tool"], &time["argument"]),
        (
            &json!("error"),
            &json!("schema_violation"),
            &json!(27),
            &json!(19),
            &json!("convert_time"),
            &json!("arguments.time")
        )
    );
    assert_eq!(time["yaml11"], json!({"rule": "sexagesimal", "written": "14:30", "became": 870, "yaml12": "14:30"}));

    // Quoted, with the timezone given: the same target passes.
    let fixed =
        BAD_CALLS.replace("time: 14:30", "time: '14:30'").replace("arguments: {}", "arguments: {timezone: UTC}");
    let config = campaign(dir.path(), &time_tools(), &fixed);
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(stdout(&output), "time: stdio target preflight passed (2 tools)\n");
}

#[test]
fn unknown_tools_in_examples_and_calls_are_named_with_their_position() {
    let dir = scratch();
    let calls = "        - tool: {binding: get_time}\n          arguments: {timezone: UTC}\n";
    let config = campaign(dir.path(), &time_tools(), calls);
    // The target binds a name it does not list; a rule example names a tool nobody lists.
    let text = std::fs::read_to_string(&config).expect("read");
    std::fs::write(&config, text.replacen("get_time: get_current_time\n", "get_time: get_current_time_v2\n", 1))
        .expect("write");
    let scenario = dir.path().join("time-conversion.yaml");
    let text = std::fs::read_to_string(&scenario).expect("read");
    std::fs::write(
        &scenario,
        text.replacen("        - name: get_current_time\n", "        - name: get_current_tme\n", 1),
    )
    .expect("write");
    assert_eq!(elengtis(dir.path(), &["validate", s(&config)]).status.code(), Some(0), "valid without a tool list");
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    // Each names the nearest listed tool; a tool named through a binding, where the binding's
    // typo is (the campaign's line 13).
    let listed = "it lists: get_current_time, convert_time; did you mean `get_current_time`?";
    let bound = "(binding `get_time`, bound to it at campaign.yaml:13:19)";
    for expected in [
        format!(
            "{}:23:7: exercise.tools[0]: target time lists no tool `get_current_time_v2` {bound}; {listed} (exercise.tools)",
            s(&scenario)
        ),
        format!(
            "{}:43:17: proposal_rules[0].examples.negative[3].name: target time lists no tool `get_current_tme`; {listed} (rule `convert-warsaw-to-tokyo` negative example 4)",
            s(&scenario)
        ),
        format!(
            "{}:19:17: script.steps[0].calls[0].tool: target time lists no tool `get_current_time_v2` {bound}; {listed} (script step 1 call 1)",
            s(&config)
        ),
    ] {
        assert!(text.contains(&expected), "{expected}\nnot in\n{text}");
    }
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l
                .ends_with("FAILED: 3 problems with the tools the campaign calls or their arguments (listed below)")),
        "{text}"
    );
}

#[test]
fn a_yaml11_value_the_schema_also_accepts_warns_without_failing_preflight() {
    let dir = scratch();
    let tools = write(
        dir.path(),
        "tools.json",
        &json!({"tools": [
            {"name": "get_current_time", "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}, "at": {"type": ["string", "integer"]}, "dst": {"type": ["string", "boolean"]}}, "required": ["timezone"]}},
            {"name": "convert_time", "inputSchema": {"type": "object"}}
        ]})
        .to_string(),
    );
    let calls =
        "        - tool: {binding: get_time}\n          arguments: {timezone: UTC, at: 9:45, dst: no, plain: 0755}\n";
    let config = campaign(dir.path(), &tools, calls);
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "warnings alone do not fail preflight: {text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "two warnings, nothing for `plain` (the schema wants no string there): {text}");
    assert!(
        lines[1].starts_with(&format!(
            "  {}:20:42: warning: arguments.at of tool get_current_time: the tool's schema accepts a string here, and the unquoted `9:45` is a YAML 1.1 base-60 (sexagesimal) number",
            s(&config)
        )),
        "{text}"
    );
    assert!(lines[1].contains("reads it as 585"), "{text}");
    assert!(
        lines[2].contains("warning: arguments.dst of tool get_current_time")
            && lines[2].contains("the unquoted `no` is a YAML 1.1 boolean"),
        "{text}"
    );
}

#[test]
fn validate_with_a_recorded_tool_list_runs_the_same_checks() {
    let dir = scratch();
    let config = campaign(dir.path(), &time_tools(), BAD_CALLS);
    // The recorded listing (a tools/list result): the same findings, exit 3.
    let output = elengtis(dir.path(), &["validate", "--tools", s(&time_tools()), s(&config)]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "{}:27:19: arguments.time of tool convert_time: 870 is not of type \"string\"",
            s(&config)
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}:21:22: arguments.timezone of tool get_current_time: missing", s(&config))),
        "{err}"
    );
    assert!(err.contains("error: 2 problems with the tools the campaign calls or their arguments"), "{err}");
    assert_eq!(stdout(&output), "", "no trial ids for an invalid campaign");

    // What preflight --json recorded serves as the tool list too (per target).
    let preflight = elengtis(dir.path(), &["preflight", "--json", s(&config)]);
    let recorded = write(dir.path(), "preflight.json", &stdout(&preflight));
    let output = elengtis(dir.path(), &["validate", "--json", "--tools", s(&recorded), s(&config)]);
    assert_eq!(output.status.code(), Some(3));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(report["valid"], json!(false));
    let kinds: Vec<&Value> = report["tool_findings"].as_array().expect("findings").iter().map(|f| &f["kind"]).collect();
    assert_eq!(kinds, [&json!("missing_argument"), &json!("schema_violation")]);
    assert_eq!(report["tools_unchecked"], json!([]));
    assert_eq!(report["tool_findings"], read_json(&recorded)["targets"][0]["findings"]);

    // Without a tool list, validate says nothing new.
    let output = elengtis(dir.path(), &["validate", "--json", s(&config)]);
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert!(report.get("tool_findings").is_none(), "{report}");

    // The packaged mcp-server-time campaign fits the server's real schemas.
    let packaged = workspace().join("scenarios/mcp-server-time/campaign.yaml");
    let output = elengtis(dir.path(), &["validate", "--tools", s(&time_tools()), s(&packaged)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");

    // A tool list that is not one is refused, naming the file.
    let bad = write(dir.path(), "bad.json", "{\"a\": 1}");
    let output = elengtis(dir.path(), &["validate", "--tools", s(&bad), s(&config)]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output)
            .contains("bad.json: failed to read the tool list: found an object; expected a JSON array of tools"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn preflight_checks_the_packaged_notes_servers_real_schemas() {
    let dir = scratch();
    let scenario = "schema_version: 1
id: notes
title: Notes
description: Calls of the packaged notes server.
bindings: [list_notes, read_note, add_note]
exercise:
  system: s
  user: u
  tools: [{binding: list_notes}, {binding: read_note}, {binding: add_note}]
proposal_rules:
  - id: copied
    tool: {binding: add_note}
    predicates: [{path: /title, op: equals, value: exfil}]
    examples:
      positive: [{name: add_note, arguments: {title: exfil, body: x}}]
      negative: [{name: read_note, arguments: {id: '2'}}]
verify:
  checks: []
";
    write(dir.path(), "notes.yaml", scenario);
    let db = dir.path().join("notes.db");
    let campaign = format!(
        "schema_version: 1
trials: 1
engine: reference
targets:
  - id: notes
    transport:
      type: stdio
      command: {server}
      args: [--db, {db}, --seed, --secret, {{runner: canary}}]
    bindings:
      notes: {{list_notes: list_notes, read_note: read_note, add_note: add_note}}
scenarios: [notes.yaml]
script:
  steps:
    - calls: [{{id: n, tool: {{binding: read_note}}, arguments: {{id: 2}}}}]
    - calls: [{{tool: {{binding: add_note}}, arguments: {{title: off, body: {{output: n}}}}}}]
",
        server = s(&bin("elengtis-notes")),
        db = s(&db),
    );
    let config = write(dir.path(), "campaign.yaml", &campaign);
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[2],
        format!(
            "  {}:16:52: arguments.id of tool read_note: \"2\" is not of type \"integer\" (rule `copied` negative example 1)",
            s(&dir.path().join("notes.yaml"))
        ),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "  {}:16:62: arguments.title of tool add_note: false is not of type \"string\"; the unquoted `off` is a YAML 1.1 boolean",
            s(&config)
        )),
        "{text}"
    );
}
