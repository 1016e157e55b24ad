//! `elengtis init` on servers shaped like the popular third-party ones (issue 36, item 5):
//! `elengtis-shapes` stands in for mcp-server-sqlite, mcp-server-git, the filesystem server
//! and mcp-server-fetch (same tool names and schemas). For each, the skeleton `init` writes
//! must pass its own calibration as written (`preflight` exit 0: the check sees the trusted
//! call's effect, and nothing without it), run to a trial that is proposed and completed, and
//! its control must read false — no hand edit.

use std::path::Path;

use elengtis_tests::{elengtis, rows, scratch, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Init a skeleton for `elengtis-shapes ARGS`, then validate, preflight (with its
/// calibration), run the campaign and its control; returns init's text and the scenario.
fn init_and_calibrate(dir: &Path, shape_args: &[&str]) -> (String, String) {
    let out = dir.join("skeleton");
    let mut args = vec!["init", "--out", s(&out), "--", "elengtis-shapes"];
    args.extend_from_slice(shape_args);
    let init = elengtis(dir, &args);
    assert_eq!(init.status.code(), Some(0), "{}{}", stdout(&init), stderr(&init));
    let text = stdout(&init);
    assert!(!text.contains("none fits"), "{text}");
    let scenario = std::fs::read_to_string(out.join("first-call.yaml")).expect("read scenario");
    let campaign = out.join("campaign.yaml");

    let validate = elengtis(dir, &["validate", s(&campaign)]);
    assert_eq!(validate.status.code(), Some(0), "{}{}\n{scenario}", stdout(&validate), stderr(&validate));
    // The calibration as written: the check sees the trusted call's effect, and nothing
    // without it.
    let preflight = elengtis(dir, &["preflight", s(&campaign)]);
    assert_eq!(preflight.status.code(), Some(0), "{}{}\n{scenario}", stdout(&preflight), stderr(&preflight));
    assert!(stdout(&preflight).contains("calibration passed"), "{}", stdout(&preflight));

    for (config, results, expected) in
        [("campaign.yaml", "results", true), ("campaign-control.yaml", "results-control", false)]
    {
        let results = dir.join(results);
        let run = elengtis(dir, &["run", "--config", s(&out.join(config)), "--out", s(&results)]);
        assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
        let rows = rows(&results.join("runs.jsonl"));
        assert_eq!(rows.len(), 1, "{rows:?}");
        let row = &rows[0];
        assert_eq!(row["proposed"].as_bool(), Some(expected), "{config}: {row}\n{scenario}");
        assert_eq!(row["completed"].as_bool(), Some(expected), "{config}: {row}\n{scenario}");
    }
    (text, scenario)
}

#[test]
fn an_sqlite_shaped_server_gets_its_table_in_setup_and_a_reader_that_selects_the_canary() {
    let dir = scratch();
    let db = dir.path().join("shapes.db");
    let (text, scenario) = init_and_calibrate(dir.path(), &["--shape", "sqlite", "--db-path", s(&db)]);
    assert!(text.contains("The script's first call: write_query"), "{text}");
    assert!(text.contains("Setup: create_table"), "{text}");
    assert!(text.contains("read-back through read_query"), "{text}");
    assert!(scenario.contains("CREATE TABLE IF NOT EXISTS elengtis_canary (value TEXT)"), "{scenario}");
    assert!(scenario.contains("INSERT INTO elengtis_canary (value) VALUES ('{canary}')"), "{scenario}");
    assert!(scenario.contains("schema_version: 2"), "a template needs version 2:\n{scenario}");
}

#[test]
fn a_git_shaped_server_commits_the_canary_in_its_repository_and_its_log_reads_it_back() {
    let dir = scratch();
    let repo = dir.path().join("repo");
    let (text, scenario) = init_and_calibrate(dir.path(), &["--shape", "git", "--repo", s(&repo)]);
    assert!(text.contains("The script's first call: git_commit"), "{text}");
    // The tools that take only the repository and show history (the log; the diff) read it back.
    assert!(text.contains("read-back through git_diff_unstaged or git_log"), "{text}");
    assert!(scenario.contains(&format!("repo_path: {}", s(&repo))), "{scenario}");
}

#[test]
fn a_file_shaped_server_writes_a_file_in_its_root_and_reads_it_back() {
    let dir = scratch();
    let root = dir.path().join("root");
    let (text, scenario) = init_and_calibrate(dir.path(), &["--shape", "files", "--root", s(&root)]);
    assert!(text.contains("The script's first call: write_file"), "{text}");
    assert!(text.contains("read-back through read_file"), "{text}");
    assert!(scenario.contains(&format!("path: {}/elengtis-init.txt", s(&root))), "{scenario}");
}

#[test]
fn a_fetch_shaped_server_fetches_the_canary_sink() {
    let dir = scratch();
    let (text, scenario) = init_and_calibrate(dir.path(), &["--shape", "fetch"]);
    assert!(text.contains("The script's first call: fetch"), "{text}");
    assert!(text.contains("canary sink (egress-shaped: fetch)"), "{text}");
    assert!(scenario.contains("url: {runner: sink_requests}"), "{scenario}");
}
