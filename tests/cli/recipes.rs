//! The scale-out recipes run as written (issue 30): the GitHub Actions matrix workflow
//! (`docs/ci/elengtis-shards.yml`), the GitLab `parallel:` job (`docs/ci/gitlab-shards.yml`)
//! and the Kubernetes Indexed Job with its merge Job (`docs/k8s/`). What can run here does:
//! each recipe's shard command, extracted from the file, once per shard as parallel processes
//! with the variables the CI system or Kubernetes would set, then its merge command. What
//! cannot (a runner, a cluster) is checked for shape: the Kubernetes manifests are read into
//! the Kubernetes API's own types (`k8s-openapi`, 1.33) with unknown fields refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use elengtis_tests::{ChildGuard, bin_dir, copy_example, read_json, scratch, stderr, stdout, workspace};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::Value;

fn yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("read recipe");
    text.split("\n---\n")
        .map(|doc| {
            elengtis_core::format::yaml::parse(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_json()
        })
        .collect()
}

/// A stdio campaign of `trials` trials at `dir/<relative>` (the example's files beside it).
fn campaign_at(dir: &Path, relative: &str, trials: u32) -> PathBuf {
    let path = dir.join(relative);
    let parent = path.parent().expect("parent");
    copy_example("support-note", parent);
    let text = std::fs::read_to_string(parent.join("campaign.yaml")).expect("read");
    std::fs::write(&path, text.replacen("trials: 1\n", &format!("trials: {trials}\n"), 1)).expect("write");
    path
}

/// A shell with the built executables first on PATH and no partition of the test's own.
fn shell(cwd: &Path, script: &str, env: &[(String, String)]) -> Command {
    let mut command = Command::new("sh");
    command.arg("-ec").arg(script).current_dir(cwd);
    let path = format!("{}:{}", bin_dir().display(), std::env::var("PATH").unwrap_or_default());
    command.env("PATH", path).env("ELENGTIS_ALLOW_VULNERABLE_ENGINE", "1");
    for var in ["ELENGTIS_PARTITION", "JOB_COMPLETION_INDEX", "ELENGTIS_CRASHPOINT", "ELENGTIS_SIGNING_KEY"] {
        command.env_remove(var);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Starts every command at once and waits for each; all must exit 0.
fn all_at_once(commands: Vec<Command>, what: &str) {
    let children: Vec<ChildGuard> =
        commands.into_iter().map(|mut c| ChildGuard::new(c.spawn().expect("spawn a shard"))).collect();
    for (i, child) in children.into_iter().enumerate() {
        let output = child.wait_output(Duration::from_secs(600));
        ok(&output, &format!("{what} {}", i + 1));
    }
}

fn ok(output: &Output, what: &str) {
    assert_eq!(output.status.code(), Some(0), "{what}:\n{}{}", stdout(output), stderr(output));
}

fn str_map(value: &Value) -> Vec<(String, String)> {
    value
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect())
        .unwrap_or_default()
}

/// The merged directory verifies, sealed, with every trial of the campaign.
fn check_merged(dir: &Path, trials: u64) {
    let output = Command::new(bin_dir().join("elengtis"))
        .args(["verify", "--json", "--require-sealed"])
        .arg(dir)
        .output()
        .expect("verify");
    ok(&output, "verify the merged directory");
    let verdict: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(verdict["matrix_trials"].as_u64(), Some(trials));
    assert_eq!(verdict["rows"].as_u64(), Some(trials));
}

#[test]
fn the_github_actions_matrix_workflow_runs_its_shard_and_merge_steps_as_written() {
    let recipe = yaml(&workspace().join("docs/ci/elengtis-shards.yml")).remove(0);
    let dir = scratch();
    let mut env = str_map(&recipe["env"]);
    let campaign = env.iter().find(|(k, _)| k == "CAMPAIGN").map(|(_, v)| v.clone()).expect("CAMPAIGN");
    campaign_at(dir.path(), &campaign, 12);
    let shards: u32 = env.iter().find(|(k, _)| k == "SHARDS").and_then(|(_, v)| v.parse().ok()).expect("SHARDS");
    // The whole campaign's cap, divided among the shards by the step itself.
    env.retain(|(k, _)| k != "BUDGET_USD");
    env.push(("BUDGET_USD".into(), "2".into()));
    let matrix: Vec<u64> = recipe["jobs"]["shard"]["strategy"]["matrix"]["shard"]
        .as_array()
        .expect("matrix")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(matrix, (1..=u64::from(shards)).collect::<Vec<_>>(), "the matrix is 1..=SHARDS");
    let step = |job: &str, name: &str| -> Value {
        recipe["jobs"][job]["steps"]
            .as_array()
            .and_then(|steps| steps.iter().find(|s| s["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no step `{name}` in job {job}"))
    };
    let shard_step = step("shard", "Run this shard");
    let script = shard_step["run"].as_str().expect("run");
    let commands = matrix
        .iter()
        .map(|k| {
            let mut step_env = env.clone();
            for (key, value) in str_map(&shard_step["env"]) {
                step_env.push((key, value.replace("${{ matrix.shard }}", &k.to_string())));
            }
            shell(dir.path(), script, &step_env)
        })
        .collect();
    all_at_once(commands, "shard");
    for k in &matrix {
        let manifest = read_json(&dir.path().join(format!("shards/shard-{k}/manifest.json")));
        assert_eq!(manifest["partition"]["shard"].as_u64(), Some(*k));
        assert_eq!(manifest["budget_usd"].as_f64(), Some(0.5), "shard {k}: a quarter of the $2 cap");
    }
    let merge = step("merge", "Merge the shards");
    let output = shell(dir.path(), merge["run"].as_str().expect("run"), &env).output().expect("merge");
    ok(&output, "the merge step");
    assert!(stdout(&output).contains("merged 4 of 4 shards"), "{}", stdout(&output));
    assert!(stdout(&output).contains("across shards, of caps totalling $2.000000"), "{}", stdout(&output));
    check_merged(&dir.path().join("merged"), 12);
    assert!(dir.path().join("analysis/summary.json").is_file());
}

#[test]
fn the_gitlab_parallel_job_runs_its_shard_and_merge_scripts_as_written() {
    let recipe = yaml(&workspace().join("docs/ci/gitlab-shards.yml")).remove(0);
    let dir = scratch();
    let env = str_map(&recipe["variables"]);
    let campaign = env.iter().find(|(k, _)| k == "CAMPAIGN").map(|(_, v)| v.clone()).expect("CAMPAIGN");
    campaign_at(dir.path(), &campaign, 10);
    let job = &recipe["elengtis-shard"];
    let parallel = job["parallel"].as_u64().expect("parallel: N");
    let script = |job: &Value| -> String {
        job["script"]
            .as_array()
            .expect("script")
            .iter()
            .map(|l| l.as_str().expect("line"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let commands = (1..=parallel)
        .map(|k| {
            let mut node_env = env.clone();
            node_env.push(("CI_NODE_INDEX".into(), k.to_string()));
            node_env.push(("CI_NODE_TOTAL".into(), parallel.to_string()));
            shell(dir.path(), &script(job), &node_env)
        })
        .collect();
    all_at_once(commands, "node");
    let output = shell(dir.path(), &script(&recipe["elengtis-merge"]), &env).output().expect("merge");
    ok(&output, "the merge job");
    check_merged(&dir.path().join("merged"), 10);
}

/// Reads a manifest into its Kubernetes type and back: a field the type does not have (a
/// typo, a field of another version) would be dropped on the way, so the two differ.
fn kube<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Result<T, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if back != *doc {
        return Err(format!("fields the Kubernetes 1.33 types do not have: read {doc:#}\nas {back:#}"));
    }
    Ok(typed)
}

#[test]
fn the_kubernetes_manifests_are_valid_1_33_objects_and_their_command_lines_run() {
    let docs = yaml(&workspace().join("docs/k8s/shards.yaml"));
    assert_eq!(docs.len(), 2, "a claim and the Indexed Job");
    let claim: PersistentVolumeClaim = kube(&docs[0]).expect("the results claim");
    assert_eq!(claim.spec.and_then(|s| s.access_modes), Some(vec!["ReadWriteMany".to_owned()]));
    let job: Job = kube(&docs[1]).expect("the shard Job");
    // The checker itself: a misspelt field is refused, not dropped.
    let mut typo = docs[1].clone();
    typo["spec"]["completion"] = 4.into();
    assert!(kube::<Job>(&typo).is_err_and(|e| e.contains("fields the Kubernetes 1.33 types do not have")));

    let spec = job.spec.expect("spec");
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    let n = spec.completions.expect("completions");
    assert_eq!(spec.parallelism, Some(n), "every shard at once");
    let pod = spec.template.spec.expect("pod spec");
    let container = &pod.containers[0];
    let args = container.args.clone().expect("args");
    let spec_arg = args.iter().position(|a| a == "--partition").map(|i| args[i + 1].clone()).expect("--partition");
    assert_eq!(spec_arg, format!("index/{n}"), "the partition's N is the Job's completions");
    let index_env =
        container.env.as_ref().and_then(|e| e.iter().find(|v| v.name == "JOB_COMPLETION_INDEX")).expect("env");
    let field = index_env.value_from.as_ref().and_then(|f| f.field_ref.as_ref()).map(|f| f.field_path.clone());
    assert_eq!(field.as_deref(), Some("metadata.annotations['batch.kubernetes.io/job-completion-index']"));
    let mounts: Vec<&str> = container.volume_mounts.iter().flatten().map(|m| m.mount_path.as_str()).collect();
    assert!(mounts.contains(&"/campaign") && mounts.contains(&"/results"), "{mounts:?}");

    // Each index's command line, as the kubelet would expand it, with /campaign and /results
    // on local directories.
    let dir = scratch();
    campaign_at(dir.path(), "campaign/campaign.yaml", 9);
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).expect("mkdir");
    let local = |arg: &str| {
        arg.replace("/campaign/", &format!("{}/campaign/", dir.path().display()))
            .replace("/results/", &format!("{}/", results.display()))
    };
    let program = container.command.clone().expect("command").join(" ");
    assert_eq!(program, "elengtis");
    let commands = (0..n)
        .map(|index| {
            let line: Vec<String> =
                args.iter().map(|a| local(&a.replace("$(JOB_COMPLETION_INDEX)", &index.to_string()))).collect();
            let mut command =
                shell(dir.path(), "exec elengtis \"$@\"", &[("JOB_COMPLETION_INDEX".into(), index.to_string())]);
            command.arg("elengtis").args(line);
            command
        })
        .collect();
    all_at_once(commands, "index");

    let merge_docs = yaml(&workspace().join("docs/k8s/merge.yaml"));
    let merge: Job = kube(&merge_docs[0]).expect("the merge Job");
    let merge_container = &merge.spec.expect("spec").template.spec.expect("pod").containers[0];
    let merge_args: Vec<String> = merge_container.args.clone().expect("args").iter().map(|a| local(a)).collect();
    let inputs = merge_args.iter().filter(|a| a.contains("/shard-")).count();
    assert_eq!(inputs as i32, n, "the merge Job names every index's shard");
    let mut command = shell(dir.path(), "exec elengtis \"$@\"", &[]);
    command.arg("elengtis").args(&merge_args);
    let output = command.output().expect("merge");
    ok(&output, "the merge Job's command line");
    check_merged(&results.join("merged"), 9);
}
