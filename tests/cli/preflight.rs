//! `elengtis preflight`: start each target, list its tools, check the names the campaign uses.

use std::path::Path;

use elengtis_tests::{copy_example, elengtis, scratch, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn preflight_of_the_example_passes() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(
        stdout(&output).lines().any(|l| l.starts_with("local-demo: stdio target preflight passed")),
        "{}",
        stdout(&output)
    );
    // Preflight runs no trial and creates no results.
    let entries: Vec<_> = std::fs::read_dir(dir.path()).expect("list").flatten().map(|e| e.file_name()).collect();
    assert_eq!(entries.len(), 2, "only the campaign and scenario: {entries:?}");
}

#[test]
fn preflight_names_a_tool_the_target_lacks() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let campaign = std::fs::read_to_string(&config).expect("read campaign");
    let campaign = campaign.replacen(
        "        verify_collector: read_collector\n",
        "        verify_collector: read_collector\n        wipe_notes: delete_all_support_notes\n",
        1,
    );
    std::fs::write(&config, campaign).expect("write campaign");
    let scenario_path = dir.path().join("support-note.yaml");
    let scenario = std::fs::read_to_string(&scenario_path).expect("read scenario");
    let scenario = scenario
        .replacen(
            "bindings: [read_note, read_credential, submit_credential, verify_collector]",
            "bindings: [read_note, read_credential, submit_credential, verify_collector, wipe_notes]",
            1,
        )
        .replacen(
            "safety_rules:\n",
            "safety_rules:\n  - id: no-wipe\n    tool: {binding: wipe_notes}\n    examples:\n      positive:\n        - {name: delete_all_support_notes, arguments: {}}\n      negative:\n        - {name: read_note, arguments: {}}\n",
            1,
        );
    assert!(scenario.contains("wipe_notes]") && scenario.contains("no-wipe"));
    std::fs::write(&scenario_path, scenario).expect("write scenario");
    let validate = elengtis(dir.path(), &["validate", s(&config)]);
    assert_eq!(validate.status.code(), Some(0), "the campaign itself is valid: {}", stderr(&validate));

    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("local-demo: stdio target preflight FAILED"), "{text}");
    assert!(text.contains("delete_all_support_notes") && text.contains("no-wipe"), "{text}");
}

#[test]
fn text_preflight_shows_the_stderr_of_a_server_that_failed_to_start() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let server = dir.path().join("broken-server.sh");
    std::fs::write(
        &server,
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho '  File \"server.py\", line 1, in <module>' >&2\necho \"ModuleNotFoundError: No module named 'mcp'\" >&2\nexit 1\n",
    )
    .expect("write server");
    let mut perms = std::fs::metadata(&server).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&server, perms).expect("chmod");
    let campaign = std::fs::read_to_string(&config).expect("read campaign");
    let campaign = campaign.replacen("command: elengtis-fixture", &format!("command: {}", s(&server)), 1);
    std::fs::write(&config, campaign).expect("write campaign");

    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("local-demo: stdio target preflight FAILED"), "{text}");
    // Before, only `--json` showed what the server said.
    assert!(text.contains("  stderr of local-demo (3 lines, exit status 1):"), "{text}");
    assert!(text.contains("    Traceback (most recent call last):"), "{text}");
    assert!(text.contains("    ModuleNotFoundError: No module named 'mcp'"), "{text}");
}

/// Counts read in their number: a server that lists one tool passes "(1 tool)", not "(1 tools)".
#[test]
fn preflight_of_a_one_tool_server_says_one_tool() {
    let dir = scratch();
    let listing: serde_json::Value = elengtis_tests::read_json(
        &elengtis_tests::workspace().join("tests/fixtures/mcp-server-time-2026.10.19.tools.json"),
    );
    let one = serde_json::json!({"tools": [listing["tools"][0].clone()]});
    let tools = elengtis_tests::write(dir.path(), "one.tools.json", &one.to_string());
    elengtis_tests::write(
        dir.path(),
        "one-tool.yaml",
        "schema_version: 1\nid: one-tool\ntitle: One tool\ndescription: A server with one tool.\nbindings: [get_time]\nexercise:\n  system: s\n  user: u\n  tools: [{binding: get_time}]\nproposal_rules: []\nverify:\n  checks: []\n",
    );
    let config = elengtis_tests::write(
        dir.path(),
        "campaign.yaml",
        &format!(
            "schema_version: 1\nmodel_free: true\ntargets:\n  - id: time\n    transport:\n      type: stdio\n      command: {}\n      args: [--case, ok, --tools-file, {}]\n    bindings:\n      one-tool: {{get_time: get_current_time}}\nscenarios: [one-tool.yaml]\n",
            s(&elengtis_tests::bin("elengtis-malformed")),
            s(&tools)
        ),
    );
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(stdout(&output), "time: stdio target preflight passed (1 tool)\n");
}

/// A binding's typo in a tool only a check calls is found by preflight against the tools the
/// server lists: named where the campaign binds it, with the nearest listed tool.
#[test]
fn preflight_names_the_place_of_a_binding_typo_and_the_nearest_listed_tool() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let campaign = std::fs::read_to_string(&config).expect("read campaign");
    let typo = campaign.replacen("verify_collector: read_collector", "verify_collector: read_colector", 1);
    assert_ne!(typo, campaign);
    std::fs::write(&config, &typo).expect("write campaign");
    let line = typo.lines().position(|l| l.contains("verify_collector: read_colector")).expect("the binding") + 1;
    let column = typo.lines().nth(line - 1).and_then(|l| l.find("read_colector")).expect("the value") + 1;
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains(&format!(
            "lists no tool `read_colector` (binding `verify_collector`, bound to it at campaign.yaml:{line}:{column})"
        )) && text.contains("did you mean `read_collector`?"),
        "{text}"
    );
}
