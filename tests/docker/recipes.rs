//! The cluster and GitLab recipes run in their own context (issue 38, item 2), against the
//! local engine:
//!
//! - the Kubernetes Indexed Job (`docs/k8s/shards.yaml`): its pod template run for every index
//!   with `docker run` as the kubelet would — the tool image and `command: [elengtis]`, the pod's
//!   user, group and the node socket's group, the read-only root, the campaign, results, tmpfs
//!   and socket volumes, `JOB_COMPLETION_INDEX` — on an isolated campaign (every trial a
//!   container on the engine the pod reaches through the socket); one index killed mid-run and
//!   its pod run again (it resumes), then the merge Job's pod (`docs/k8s/merge.yaml`), and the
//!   merged results against the same campaign run unsharded;
//! - the GitLab gate and shard jobs (`docs/ci/gitlab-ci.yml`, `docs/ci/gitlab-shards.yml`) in a
//!   container of a stand-in for their job image, with the socket-binding executor's paths.
//!
//! No cluster, runner or registry is here: the scheduler, the claim's storage class, the
//! ConfigMap object and the job images themselves are stood in for (tests/src/recipes.rs).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use elengtis_tests::recipes::{
    Volume, check_merged, docker, docker_socket_gid, gitlab, kube, pod_docker_run, unsharded, yaml_docs,
};
use elengtis_tests::{
    ChildGuard, FixtureMcp, bin_dir, bundled_images, copy_example, copy_tree, docker_or_skip, fixture_image,
    fixture_target, read_json, rows, scratch, stderr, stdout, support_note_campaign, wait_until, workspace, write,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::Value;

#[test]
fn the_kubernetes_indexed_job_runs_as_written_a_retried_index_resumes_and_the_merge_job_merges() {
    if !docker_or_skip("the_kubernetes_indexed_job_runs_as_written_a_retried_index_resumes_and_the_merge_job_merges") {
        return;
    }
    bundled_images();
    let docs = yaml_docs(&workspace().join("docs/k8s/shards.yaml"));
    assert_eq!(docs.len(), 2, "a claim and the Indexed Job");
    let claim: PersistentVolumeClaim = kube(&docs[0]).expect("the results claim");
    let claim = claim.spec.expect("spec");
    assert_eq!(claim.access_modes, Some(vec!["ReadWriteMany".to_owned()]));
    assert!(claim.storage_class_name.is_some_and(|c| !c.is_empty()), "the claim names a ReadWriteMany class");
    let job: Job = kube(&docs[1]).expect("the shard Job");
    // The checker itself: a misspelt field is refused, not dropped.
    let mut typo = docs[1].clone();
    typo["spec"]["completion"] = 4.into();
    assert!(kube::<Job>(&typo).is_err_and(|e| e.contains("fields the Kubernetes 1.33 types do not have")));
    let spec = job.spec.expect("spec");
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    let n = spec.completions.expect("completions");
    assert_eq!(spec.parallelism, Some(n), "every shard at once");
    assert!(spec.backoff_limit_per_index.is_some_and(|b| b >= 1), "a failed index is retried");
    let pod = spec.template.spec.expect("pod spec");
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(format!("elengtis/elengtis:{}", env!("CARGO_PKG_VERSION")).as_str()));
    let args = container.args.clone().expect("args");
    assert!(args.windows(2).any(|w| w == ["--partition", &format!("index/{n}")]), "{args:?}");
    let groups = pod.security_context.as_ref().and_then(|c| c.supplemental_groups.clone()).unwrap_or_default();
    assert_eq!(groups.len(), 1, "the node socket's group, one placeholder: {groups:?}");

    // The node: this engine. The ConfigMap: the campaign's files. The claim: a directory the
    // pod's fsGroup owns (group-writable, setgid), as the kubelet leaves a volume it manages.
    let dir = scratch();
    let campaign_dir = dir.path().join("configmap");
    write(&campaign_dir, "support-note.yaml", include_str!("../../scenarios/bench/support-note.yaml"));
    let trials = 2 * u64::try_from(n).expect("n");
    let campaign =
        support_note_campaign(trials, &[fixture_target("iso", &fixture_image(), FixtureMcp::Stdio, 10001, &[])]);
    write(&campaign_dir, "campaign.yaml", &campaign);
    let results = dir.path().join("claim");
    std::fs::create_dir(&results).expect("mkdir");
    std::os::unix::fs::chown(&results, Some(0), Some(65534)).expect("chown");
    std::fs::set_permissions(&results, std::os::unix::fs::PermissionsExt::from_mode(0o2775)).expect("chmod");
    let volumes = BTreeMap::from([
        ("campaign".to_owned(), Volume::Dir(campaign_dir.clone())),
        ("results".to_owned(), Volume::Dir(results.clone())),
        ("tmp".to_owned(), Volume::Tmpfs),
        ("docker-sock".to_owned(), Volume::HostPath),
    ]);
    let gid = docker_socket_gid();
    let name = |index: i32, attempt: u32| format!("elengtis-test-k8s-{}-{index}-{attempt}", std::process::id());
    let pod_run = |index: i32, attempt: u32| {
        let mut command = Command::new("docker");
        // This machine's engine is one the engine gate refuses (docs/security.md).
        command.args(["run", "--rm", "--name", &name(index, attempt), "-e", "ELENGTIS_ALLOW_VULNERABLE_ENGINE=1"]);
        command.args(pod_docker_run(&pod, container, u32::try_from(index).ok(), &volumes, gid));
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        ChildGuard::new(command.spawn().expect("docker run"))
    };
    let started = std::time::Instant::now();
    let pods: Vec<ChildGuard> = (0..n).map(|index| pod_run(index, 0)).collect();
    // Index 1 fails mid-run (its node goes away): killed once its first trial is recorded.
    let killed_log = results.join("shard-1/runs.jsonl");
    let first_row = wait_until(Duration::from_secs(120), || {
        std::fs::read_to_string(&killed_log).is_ok_and(|t| t.lines().count() >= 1)
    });
    assert!(first_row, "index 1 recorded no trial");
    let kill = docker(&["kill".into(), name(1, 0)]);
    assert!(kill.status.success(), "{}", stderr(&kill));
    for (index, pod) in pods.into_iter().enumerate() {
        let output = pod.wait_output(Duration::from_secs(300));
        if index == 1 {
            assert_ne!(output.status.code(), Some(0), "index 1 was killed");
        } else {
            assert_eq!(output.status.code(), Some(0), "index {index}:\n{}{}", stdout(&output), stderr(&output));
        }
    }
    let before = rows(&killed_log).len();
    assert!(before < 2, "index 1 was killed before its shard was done ({before} rows)");
    // backoffLimitPerIndex: its pod again, the same command on the directory its try left.
    let retry = pod_run(1, 1).wait_output(Duration::from_secs(300));
    assert_eq!(retry.status.code(), Some(0), "the retried index:\n{}{}", stdout(&retry), stderr(&retry));
    assert!(
        stderr(&retry).contains(&format!(
            "resuming run {}",
            read_json(&results.join("shard-1/manifest.json"))["run_id"].as_str().expect("run id")
        )),
        "{}",
        stderr(&retry)
    );
    assert_eq!(rows(&killed_log).len(), 2, "the retried index finished its shard, no trial twice");
    eprintln!("the Indexed Job's pods, index 1 killed and run again: {:.1} s", started.elapsed().as_secs_f64());

    // The merge Job's pod, once every index has completed.
    let merge_docs = yaml_docs(&workspace().join("docs/k8s/merge.yaml"));
    let merge: Job = kube(&merge_docs[0]).expect("the merge Job");
    let merge_pod = merge.spec.expect("spec").template.spec.expect("pod");
    let merge_container = &merge_pod.containers[0];
    let inputs = merge_container.args.iter().flatten().filter(|a| a.contains("/shard-")).count();
    assert_eq!(i32::try_from(inputs).expect("count"), n, "the merge Job names every index's shard");
    let mut command = Command::new("docker");
    command.args(["run", "--rm", "--name", &name(-1, 0)]);
    command.args(pod_docker_run(&merge_pod, merge_container, None, &volumes, gid));
    let output = command.output().expect("docker run");
    assert_eq!(output.status.code(), Some(0), "the merge Job's pod:\n{}{}", stdout(&output), stderr(&output));
    let whole = dir.path().join("whole");
    unsharded(&campaign_dir.join("campaign.yaml"), &whole);
    check_merged(&results.join("merged"), trials, &whole);
}

/// `bin/` as the build job's artifact leaves it: its executables (linked to this build's).
fn artifact_bin(dir: &Path, executables: &[&str]) {
    std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
    for name in executables {
        let (from, to) = (bin_dir().join(name), dir.join("bin").join(name));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).expect("copy an executable");
        }
    }
}

/// A job's variables: the pipeline's, then the job's own.
fn variables(recipe: &Value, job: &Value) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for holder in [&recipe["variables"], &job["variables"]] {
        for (k, v) in holder.as_object().into_iter().flatten() {
            vars.insert(k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        }
    }
    vars
}

#[test]
fn the_gitlab_gate_job_runs_in_its_image_with_the_socket_binding_executors_paths() {
    if !docker_or_skip("the_gitlab_gate_job_runs_in_its_image_with_the_socket_binding_executors_paths") {
        return;
    }
    bundled_images();
    let recipe = yaml_docs(&workspace().join("docs/ci/gitlab-ci.yml")).remove(0);
    let build = &recipe["elengtis-build"];
    assert!(build["image"].as_str().is_some_and(|i| i.starts_with("rust:")), "the build job names the Rust image");
    assert_eq!(build["artifacts"]["paths"], serde_json::json!(["bin/"]));
    let job = &recipe["elengtis-gate"];
    assert_eq!(job["needs"], serde_json::json!(["elengtis-build"]));
    let dir = scratch();
    let checkout = dir.path().join("checkout");
    let bundled = elengtis_tests::BUNDLED_EXECUTABLES;
    // The checkout, its gate trimmed to one finding, and the build job's artifact bin/.
    elengtis_tests::gate::one_finding_checkout(&checkout);
    artifact_bin(&checkout, &[&bundled[..], &["elengtis-stdio-guard"]].concat());
    let mut vars = variables(&recipe, job);
    vars.insert("ELENGTIS_ALLOW_VULNERABLE_ENGINE".into(), "1".into());
    let started = std::time::Instant::now();
    let output = gitlab::run_job(job, &checkout, &vars);
    eprintln!("the GitLab gate job: {:.1} s", started.elapsed().as_secs_f64());
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "the job failed:\n{out}\n{}", stderr(&output));
    assert!(out.contains("gate: passed (exit 0)"), "{out}");
    let sarif = read_json(&checkout.join("gate-out/gate/findings.sarif"));
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]), "a gate that holds has no alert");
    let reports = std::fs::read_dir(checkout.join("gate-out/gate"))
        .expect("gate-out")
        .flatten()
        .filter(|e| e.path().join("validation_report.json").is_file())
        .count();
    assert_eq!(reports, 1, "the artifact's validation report");
}

#[test]
fn the_gitlab_parallel_jobs_run_in_their_image_at_once_and_the_merge_job_merges_them() {
    if !docker_or_skip("the_gitlab_parallel_jobs_run_in_their_image_at_once_and_the_merge_job_merges_them") {
        return;
    }
    let recipe = yaml_docs(&workspace().join("docs/ci/gitlab-shards.yml")).remove(0);
    let job = &recipe["elengtis-shard"];
    let parallel = job["parallel"].as_u64().expect("parallel: N");
    let campaign = recipe["variables"]["CAMPAIGN"].as_str().expect("CAMPAIGN");
    let dir = scratch();
    let checkout = |at: &Path| {
        let path = at.join(campaign);
        copy_example("support-note", path.parent().expect("parent"));
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.replacen("trials: 1\n", "trials: 12\n", 1)).expect("write");
        artifact_bin(at, &["elengtis", "elengtis-stdio-guard", "elengtis-fixture"]);
    };
    let started = std::time::Instant::now();
    let nodes: Vec<(std::path::PathBuf, ChildGuard)> = (1..=parallel)
        .map(|k| {
            let at = dir.path().join(format!("shard-job-{k}"));
            checkout(&at);
            let mut vars = variables(&recipe, job);
            vars.insert("CI_NODE_INDEX".into(), k.to_string());
            vars.insert("CI_NODE_TOTAL".into(), parallel.to_string());
            let mut command = gitlab::job_command(job, &at, &vars);
            command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
            (at, ChildGuard::new(command.spawn().expect("docker run")))
        })
        .collect();
    // The merge job's checkout, with every shard job's artifact (shards/) extracted into it.
    let merge_at = dir.path().join("merge-job");
    checkout(&merge_at);
    for (at, node) in nodes {
        let output = node.wait_output(Duration::from_secs(300));
        assert_eq!(output.status.code(), Some(0), "{}:\n{}{}", at.display(), stdout(&output), stderr(&output));
        copy_tree(&at.join("shards"), &merge_at.join("shards"));
    }
    let merge = &recipe["elengtis-merge"];
    let output = gitlab::run_job(merge, &merge_at, &variables(&recipe, merge));
    assert_eq!(output.status.code(), Some(0), "the merge job:\n{}{}", stdout(&output), stderr(&output));
    eprintln!("the GitLab shard and merge jobs: {:.1} s", started.elapsed().as_secs_f64());
    let whole = dir.path().join("whole");
    unsharded(&merge_at.join(campaign), &whole);
    check_merged(&merge_at.join("merged"), 12, &whole);
    assert!(merge_at.join("analysis/summary.json").is_file());
}
