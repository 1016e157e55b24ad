//! Sharded isolated runs (issue 30): 4 shards of a 24-trial isolated campaign run at once on
//! one engine, each trial in its own hardened container, merge to results whose analysis is
//! the unsharded run's; no shard leaves anything of its run in the engine.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use elengtis_tests::{
    ChildGuard, bundled_images, docker_or_skip, elengtis, elengtis_cmd, managed_objects, read_json, scratch, stderr,
    stdout,
};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn cells(dir: &Path, input: &Path, name: &str) -> Value {
    let out = dir.join(name);
    let output = elengtis(dir, &["analyze", "--input", s(input), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "analyze {}:\n{}", input.display(), stderr(&output));
    let summary = read_json(&out.join("summary.json"));
    serde_json::json!({"cells": summary["cells"], "comparisons": summary["comparisons"], "recommendation": summary["recommendation"]})
}

#[test]
fn four_isolated_shards_run_at_once_merge_to_the_unsharded_results() {
    if !docker_or_skip("four_isolated_shards_run_at_once_merge_to_the_unsharded_results") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let whole = dir.path().join("whole");
    let begun = Instant::now();
    let output = elengtis(dir.path(), &["example", "--isolated", "--trials", "24", "--out", s(&whole)]);
    let unsharded = begun.elapsed();
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let config = whole.join("example/campaign.yaml");

    let begun = Instant::now();
    let mut children = Vec::new();
    let mut shards: Vec<PathBuf> = Vec::new();
    for k in 1..=4 {
        let out = dir.path().join(format!("shard-{k}"));
        let spec = format!("{k}/4");
        let child = elengtis_cmd(
            dir.path(),
            &["run", "--config", s(&config), "--trials", "24", "--partition", &spec, "--out", s(&out)],
        )
        .env_remove("ELENGTIS_PARTITION")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a shard");
        children.push(ChildGuard::new(child));
        shards.push(out);
    }
    for (k, child) in children.into_iter().enumerate() {
        let output = child.wait_output(Duration::from_secs(900));
        assert_eq!(output.status.code(), Some(0), "shard {}: {}{}", k + 1, stdout(&output), stderr(&output));
    }
    let sharded = begun.elapsed();
    for shard in &shards {
        let run_id = read_json(&shard.join("manifest.json"))["run_id"].as_str().expect("run_id").to_owned();
        assert_eq!(managed_objects(&run_id), Vec::<String>::new(), "{}: nothing left in the engine", shard.display());
        assert_eq!(read_json(&shard.join("manifest.json"))["partition"]["shard_trials"], 6);
    }

    let merged = dir.path().join("merged");
    let mut args = vec!["merge", "--input"];
    args.extend(shards.iter().map(|p| s(p)));
    args.extend(["--out", s(&merged)]);
    let begun = Instant::now();
    let output = elengtis(dir.path(), &args);
    let merge_time = begun.elapsed();
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let output = elengtis(dir.path(), &["verify", "--require-sealed", s(&merged)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert_eq!(cells(dir.path(), &merged, "a-merged"), cells(dir.path(), &whole, "a-whole"));
    assert_eq!(
        std::fs::read_to_string(merged.join("summary.txt")).expect("summary"),
        std::fs::read_to_string(whole.join("summary.txt")).expect("summary")
    );
    eprintln!(
        "24 isolated trials: unsharded {unsharded:?}, 4 shards at once on one engine {sharded:?}, merge {merge_time:?}"
    );
}
