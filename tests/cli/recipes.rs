//! The GitHub Actions matrix workflow (`docs/ci/elengtis-shards.yml`) run as a runner runs it
//! (issue 38, item 2): every job in a workspace of its own, each `run:` step by `bash -e` with
//! the workflow's, job's and step's variables, `$GITHUB_PATH` carried to the next steps, the
//! artifacts uploaded and downloaded between jobs without their file modes, the matrix's shards
//! at once; then the merged directory against the same campaign run unsharded. The build job's
//! `cargo build --release` is stood in for by this build's executables where it leaves them.
//! (The GitLab and Kubernetes recipes run in containers: tests/docker/recipes.rs.)

use std::collections::BTreeMap;
use std::path::Path;

use elengtis_tests::recipes::{check_merged, github, stand_in_release_build, unsharded, yaml_docs};
use elengtis_tests::{copy_example, read_json, scratch, workspace};
use serde_json::Value;

/// A stdio campaign of `trials` trials at `dir/<relative>` (the example's files beside it).
fn campaign_at(dir: &Path, relative: &str, trials: u32) -> std::path::PathBuf {
    let path = dir.join(relative);
    let parent = path.parent().expect("parent");
    copy_example("support-note", parent);
    let text = std::fs::read_to_string(parent.join("campaign.yaml")).expect("read");
    std::fs::write(&path, text.replacen("trials: 1\n", &format!("trials: {trials}\n"), 1)).expect("write");
    path
}

#[test]
fn the_github_actions_matrix_workflow_runs_step_by_step_as_a_runner_runs_it() {
    let mut workflow = yaml_docs(&workspace().join("docs/ci/elengtis-shards.yml")).remove(0);
    // The whole campaign's $2 cap, divided among the shards by the step itself.
    workflow["env"]["BUDGET_USD"] = "2".into();
    let campaign = workflow["env"]["CAMPAIGN"].as_str().expect("CAMPAIGN").to_owned();
    let shards: u64 = workflow["env"]["SHARDS"].as_str().and_then(|s| s.parse().ok()).expect("SHARDS");
    let matrix: Vec<u64> = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
        .as_array()
        .expect("matrix")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(matrix, (1..=shards).collect::<Vec<_>>(), "the matrix is 1..=SHARDS");
    let dir = scratch();
    let repo = dir.path().join("repo");
    campaign_at(&repo, &campaign, 12);
    let checkout = |workspace: &Path| elengtis_tests::copy_tree(&repo, workspace);
    let artifacts = dir.path().join("artifacts");
    let job = |job: &'static str, name: &str, matrix: BTreeMap<String, String>| github::Job {
        workflow: &workflow,
        job,
        matrix,
        secrets: BTreeMap::new(),
        workspace: dir.path().join(name),
        artifacts: artifacts.clone(),
        replace: vec![("cargo build --release --locked".into(), ":".into())],
        checkout: &checkout,
    };

    // The build job: its cargo build is this build's executables (the ones a stdio shard runs).
    let build = job("build", "build", BTreeMap::new());
    stand_in_release_build(&build.workspace, &["elengtis", "elengtis-stdio-guard", "elengtis-fixture"]);
    build.run();
    // The shards at once, each on its own runner.
    std::thread::scope(|scope| {
        let running: Vec<_> = matrix
            .iter()
            .map(|k| {
                let shard = job("shard", &format!("shard-{k}"), BTreeMap::from([("shard".into(), k.to_string())]));
                scope.spawn(move || shard.run())
            })
            .collect();
        for handle in running {
            handle.join().expect("a shard job");
        }
    });
    for k in &matrix {
        let manifest = read_json(&artifacts.join(format!("shard-{k}/manifest.json")));
        assert_eq!(manifest["partition"]["shard"].as_u64(), Some(*k));
        assert_eq!(manifest["budget_usd"].as_f64(), Some(0.5), "shard {k}: a quarter of the $2 cap");
    }
    let merge = job("merge", "merge", BTreeMap::new());
    let ran = merge.run();
    let (_, log) = ran.logs.iter().find(|(name, _)| name == "Merge the shards").expect("the merge step");
    assert!(log.contains("merged 4 of 4 shards"), "{log}");
    assert!(log.contains("across shards, of caps totalling $2.000000"), "{log}");

    let whole = dir.path().join("whole");
    unsharded(&repo.join(&campaign), &whole);
    // What the merge job uploaded: the merged directory and its analysis.
    check_merged(&artifacts.join("elengtis-merged/merged"), 12, &whole);
    assert!(artifacts.join("elengtis-merged/analysis/summary.json").is_file());
}
