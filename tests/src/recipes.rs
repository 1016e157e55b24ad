//! The CI and cluster recipes (docs/ci/, docs/k8s/) run in their own context (issue 38, item
//! 2): GitHub Actions jobs step by step as the runner runs them, GitLab jobs in a container of
//! their job image with the socket-binding executor's path semantics, and the Kubernetes pod
//! template as the kubelet would run it, through `docker run`.
//!
//! What cannot run here is said where it is stood in for: no GitHub or GitLab runner, no cluster,
//! no registry (the job images are stood in for by a local image with the same tools, built from
//! Debian's static busybox), and no `cargo build --release` (the build job's output is the test
//! build's own executables, placed where the build would put them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;

use crate::{bin_dir, stderr, stdout};

/// The YAML documents of a recipe file, as JSON.
///
/// # Panics
///
/// When the file cannot be read or is not YAML (a test input).
pub fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    text.split("\n---\n")
        .map(|doc| {
            elengtis_core::format::yaml::parse(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_json()
        })
        .collect()
}

/// Reads a manifest into its Kubernetes type and back: a field the type does not have (a
/// typo, a field of another version) would be dropped on the way, so the two differ.
///
/// # Errors
///
/// The manifest does not read into `T`, or has fields `T` does not.
pub fn kube<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Result<T, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if back != *doc {
        return Err(format!("fields the Kubernetes 1.33 types do not have: read {doc:#}\nas {back:#}"));
    }
    Ok(typed)
}

/// The same campaign run unsharded on the host into `out` (`--jobs 4`), to compare a merge
/// with.
///
/// # Panics
///
/// When the run does not complete.
pub fn unsharded(campaign: &Path, out: &Path) {
    let (campaign, target) = (campaign.to_str().expect("UTF-8"), out.to_str().expect("UTF-8"));
    let output = crate::elengtis(
        out.parent().expect("a parent"),
        &["run", "--config", campaign, "--out", target, "--jobs", "4"],
    );
    assert_eq!(output.status.code(), Some(0), "the unsharded run:\n{}{}", stdout(&output), stderr(&output));
}

/// The merged directory verifies, sealed, with every one of the campaign's `trials`, and its
/// `summary.txt` is the unsharded run's (`whole`).
///
/// # Panics
///
/// When it does not.
pub fn check_merged(merged: &Path, trials: u64, whole: &Path) {
    let output = crate::elengtis(merged, &["verify", "--json", "--require-sealed", merged.to_str().expect("UTF-8")]);
    assert_eq!(output.status.code(), Some(0), "verify:\n{}{}", stdout(&output), stderr(&output));
    let verdict: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!((verdict["matrix_trials"].as_u64(), verdict["rows"].as_u64()), (Some(trials), Some(trials)));
    assert_eq!(
        std::fs::read_to_string(merged.join("summary.txt")).expect("summary"),
        std::fs::read_to_string(whole.join("summary.txt")).expect("summary"),
        "the merged shards summarise as the unsharded run"
    );
}

/// The group of the local engine's socket (what a node's `supplementalGroups` must hold).
///
/// # Panics
///
/// When there is no socket.
pub fn docker_socket_gid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/var/run/docker.sock").expect("the Docker socket").gid()
}

/// Kubernetes' `$(VAR)` expansion of a command or argument with the container's variables
/// (`$$(VAR)` stays `$(VAR)`; an unknown variable is left as written, as the kubelet does).
pub fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(escaped) = tail.strip_prefix("$$") {
            out.push('$');
            rest = escaped;
            continue;
        }
        if let Some(open) = tail.strip_prefix("$(")
            && let Some(close) = open.find(')')
            && let Some(value) = env.get(&open[..close])
        {
            out.push_str(value);
            rest = &open[close + 1..];
            continue;
        }
        out.push('$');
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// How the test stands in for a pod's volumes on this host.
#[derive(Debug, Clone)]
pub enum Volume {
    /// A host directory bound at the mount (a ConfigMap's files, a claim's directory).
    Dir(PathBuf),
    /// A host path as it is (`hostPath`).
    HostPath,
    /// A tmpfs (`emptyDir` with `medium: Memory`).
    Tmpfs,
}

/// The `docker run` arguments (after `run`, before nothing: image and command included) that
/// run `container` of `pod` as the kubelet would on a node whose Docker socket's group is
/// `socket_gid`: the pod's user, group and supplemental groups (the one the manifest holds as the
/// socket's, replaced by this node's), the container's read-only root, dropped capabilities
/// and no-new-privileges, its variables (the completion index of an Indexed Job's pod from its
/// annotation), its volume mounts (each volume of the pod mapped by `volumes`: a volume the map
/// lacks fails the test), its working directory, and `command` as the entrypoint with
/// `command[1..]` and `args` after the image, `$(VAR)` expanded.
///
/// # Panics
///
/// When the pod uses something this stand-in does not map (a test input).
pub fn pod_docker_run(
    pod: &PodSpec,
    container: &Container,
    index: Option<u32>,
    volumes: &BTreeMap<String, Volume>,
    socket_gid: u32,
) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let context = pod.security_context.clone().unwrap_or_default();
    let user = context.run_as_user.expect("the pod names its user");
    let group = context.run_as_group.unwrap_or(user);
    assert!(user != 0 && context.run_as_non_root == Some(true), "the pod runs as non-root");
    args.extend(["--user".into(), format!("{user}:{group}")]);
    for supplemental in context.supplemental_groups.iter().flatten() {
        let _placeholder = supplemental;
        args.extend(["--group-add".into(), socket_gid.to_string()]);
    }
    let own = container.security_context.clone().unwrap_or_default();
    if own.read_only_root_filesystem == Some(true) {
        args.push("--read-only".into());
    }
    if own.allow_privilege_escalation == Some(false) {
        args.extend(["--security-opt".into(), "no-new-privileges:true".into()]);
    }
    for cap in own.capabilities.and_then(|c| c.drop).into_iter().flatten() {
        args.extend(["--cap-drop".into(), cap]);
    }
    assert!(own.privileged != Some(true), "never privileged");
    let mut env = BTreeMap::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => value.clone(),
            (None, Some(from)) => {
                let path = from.field_ref.as_ref().map(|f| f.field_path.as_str()).unwrap_or_default();
                assert_eq!(
                    path, "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                    "a variable this stand-in cannot give"
                );
                index.expect("an Indexed Job's pod has an index").to_string()
            }
            (None, None) => String::new(),
        };
        env.insert(var.name.clone(), value);
    }
    for (name, value) in &env {
        args.extend(["-e".into(), format!("{name}={value}")]);
    }
    for mount in container.volume_mounts.iter().flatten() {
        let declared = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a declared volume");
        let read_only = mount.read_only == Some(true) || declared.config_map.is_some();
        let suffix = if read_only { ":ro" } else { "" };
        match volumes.get(&mount.name).unwrap_or_else(|| panic!("no stand-in for the volume {}", mount.name)) {
            Volume::Dir(dir) => args.extend(["-v".into(), format!("{}:{}{suffix}", dir.display(), mount.mount_path)]),
            Volume::HostPath => {
                let path = &declared.host_path.as_ref().expect("a hostPath volume").path;
                args.extend(["-v".into(), format!("{path}:{}{suffix}", mount.mount_path)]);
            }
            Volume::Tmpfs => {
                let empty = declared.empty_dir.as_ref().expect("an emptyDir volume");
                assert_eq!(empty.medium.as_deref(), Some("Memory"));
                let size = empty.size_limit.as_ref().map_or("64Mi".to_owned(), |q| q.0.clone());
                let mb = size.strip_suffix("Mi").expect("a size in Mi");
                args.extend(["--tmpfs".into(), format!("{}:rw,size={mb}m,mode=1777", mount.mount_path)]);
            }
        }
    }
    if let Some(dir) = &container.working_dir {
        args.extend(["-w".into(), dir.clone()]);
    }
    let command: Vec<String> = container.command.iter().flatten().map(|c| expand(c, &env)).collect();
    if let Some((entrypoint, rest)) = command.split_first() {
        args.extend(["--entrypoint".into(), entrypoint.clone()]);
        args.push(container.image.clone().expect("an image"));
        args.extend(rest.iter().cloned());
    } else {
        args.push(container.image.clone().expect("an image"));
    }
    args.extend(container.args.iter().flatten().map(|a| expand(a, &env)));
    args
}

/// `docker` with `args`, its output.
///
/// # Panics
///
/// When the docker CLI cannot be started.
pub fn docker(args: &[String]) -> Output {
    Command::new("docker").args(args).stdin(Stdio::null()).output().expect("failed to run the docker CLI")
}

/// The local stand-in for a CI job image with a POSIX shell and the usual tools (`alpine`,
/// `busybox`): Debian's static busybox (`/bin/busybox`, package busybox-static) with a link for
/// every applet, `/tmp` (01777), root's home, imported once per process as
/// `elengtis-test/job-shell:busybox`. The docker CLI is not in it, as it is not in the images
/// the GitLab recipes name.
///
/// # Panics
///
/// When busybox is missing (`.ci/run` installs it) or the import fails.
pub fn job_image() -> &'static str {
    static IMAGE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    IMAGE.get_or_init(|| {
        let busybox = Path::new("/bin/busybox");
        assert!(busybox.is_file(), "the GitLab job image's stand-in needs Debian's busybox-static (/bin/busybox)");
        let head = std::fs::read(busybox).map(|b| b.into_iter().take(4096).collect::<Vec<u8>>()).unwrap_or_default();
        assert!(
            !head.windows(8).any(|w| w == b"ld-linux"),
            "/bin/busybox is dynamically linked (Debian's busybox); the stand-in needs busybox-static"
        );
        let dir = crate::scratch();
        let root = dir.path().join("root");
        for sub in ["bin", "tmp", "root", "etc", "builds"] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
        let list = Command::new(busybox).arg("--list").output().expect("busybox --list");
        for applet in String::from_utf8_lossy(&list.stdout).lines().filter(|a| *a != "busybox") {
            let _ = std::os::unix::fs::symlink("busybox", root.join("bin").join(applet));
        }
        std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
        std::fs::write(root.join("etc/group"), "root:x:0:\n").expect("group");
        let tar = dir.path().join("root.tar");
        let packed = Command::new("tar")
            .args(["--owner=0", "--group=0", "-C"])
            .arg(&root)
            .args(["-cf"])
            .arg(&tar)
            .arg(".")
            .status()
            .expect("tar");
        assert!(packed.success());
        std::fs::set_permissions(root.join("tmp"), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).ok();
        let tag = "elengtis-test/job-shell:busybox";
        let out = docker(&[
            "import".into(),
            "--change".into(),
            "ENV PATH=/usr/local/bin:/usr/bin:/bin".into(),
            "--change".into(),
            "WORKDIR /builds".into(),
            tar.display().to_string(),
            tag.into(),
        ]);
        assert!(out.status.success(), "docker import: {}", stderr(&out));
        tag
    })
}

/// The executables the build job's `cargo build --release --locked` leaves in
/// `target/x86_64-unknown-linux-gnu/release/` that the recipe's jobs run: this test build's own
/// (`names`), copied there in `workspace`.
///
/// # Panics
///
/// On I/O errors (test setup).
pub fn stand_in_release_build(workspace: &Path, names: &[&str]) -> PathBuf {
    let release = workspace.join("target/x86_64-unknown-linux-gnu/release");
    std::fs::create_dir_all(&release).expect("mkdir");
    for name in names {
        std::fs::copy(bin_dir().join(name), release.join(name)).expect("copy an executable");
    }
    release
}

/// GitHub Actions, as a runner runs a job's steps.
pub mod github {
    use super::{BTreeMap, Path, PathBuf, Value, stderr, stdout};
    use std::process::Command;

    /// What a `uses:` step the runner cannot run (an action) did in the test's stand-in.
    #[derive(Debug, Clone, Default)]
    pub struct Uploads {
        /// `github/codeql-action/upload-sarif`: the file and category of each upload.
        pub sarif: Vec<(PathBuf, String)>,
    }

    /// One job's run: its workspace (`GITHUB_WORKSPACE`), the workflow's and job's variables,
    /// the matrix values, the artifact store shared by the workflow's jobs, and `replace`: a
    /// line of a `run:` script the test does itself instead (the build's `cargo build`).
    pub struct Job<'a> {
        /// The workflow.
        pub workflow: &'a Value,
        /// The job's id.
        pub job: &'a str,
        /// `${{ matrix.KEY }}` values.
        pub matrix: BTreeMap<String, String>,
        /// `${{ secrets.KEY }}` values (absent secrets are empty, as on a fork).
        pub secrets: BTreeMap<String, String>,
        /// The job's workspace (the checkout).
        pub workspace: PathBuf,
        /// Where uploaded artifacts are kept, one directory per name.
        pub artifacts: PathBuf,
        /// Run lines replaced by the test: (the line as written, what runs instead).
        pub replace: Vec<(String, String)>,
        /// What `actions/checkout` puts in the workspace.
        pub checkout: &'a (dyn Fn(&Path) + Sync),
    }

    /// The result of a job: each `run:` step's output, the step outputs (`$GITHUB_OUTPUT`), and
    /// what the actions uploaded.
    #[derive(Debug, Default)]
    pub struct Ran {
        /// Step name (or its first line) → its stdout and stderr.
        pub logs: Vec<(String, String)>,
        /// Step id → output name → value.
        pub outputs: BTreeMap<String, BTreeMap<String, String>>,
        /// Uploads.
        pub uploads: Uploads,
    }

    impl std::fmt::Debug for Job<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Job").field("job", &self.job).field("matrix", &self.matrix).finish_non_exhaustive()
        }
    }

    impl Job<'_> {
        fn substitute(&self, text: &str, outputs: &BTreeMap<String, BTreeMap<String, String>>) -> String {
            let mut out = String::new();
            let mut rest = text;
            while let Some(at) = rest.find("${{") {
                out.push_str(&rest[..at]);
                let close = rest[at..].find("}}").unwrap_or_else(|| panic!("an unclosed expression in {text}"));
                let expression = rest[at + 3..at + close].trim();
                let value = if let Some(key) = expression.strip_prefix("matrix.") {
                    self.matrix.get(key).cloned().unwrap_or_else(|| panic!("no matrix value {key}"))
                } else if let Some(key) = expression.strip_prefix("secrets.") {
                    self.secrets.get(key).cloned().unwrap_or_default()
                } else if let Some(path) = expression.strip_prefix("steps.") {
                    let (step, output) = path.split_once(".outputs.").unwrap_or_else(|| panic!("{expression}"));
                    outputs.get(step).and_then(|o| o.get(output)).cloned().unwrap_or_default()
                } else {
                    panic!("an expression this runner does not evaluate: {expression}")
                };
                out.push_str(&value);
                rest = &rest[at + close + 2..];
            }
            out.push_str(rest);
            out
        }

        fn env_of(
            &self,
            holder: &Value,
            outputs: &BTreeMap<String, BTreeMap<String, String>>,
        ) -> Vec<(String, String)> {
            holder["env"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                            (k.clone(), self.substitute(&text, outputs))
                        })
                        .collect()
                })
                .unwrap_or_default()
        }

        /// Run every step in order; a failing `run:` step fails the test with its output.
        ///
        /// # Panics
        ///
        /// When a step fails or uses something the runner does not stand in for.
        pub fn run(&self) -> Ran {
            let job = &self.workflow["jobs"][self.job];
            assert!(job.is_object(), "no job {}", self.job);
            std::fs::create_dir_all(&self.workspace).expect("the workspace");
            // The runner's files of this job run (its step scripts, GITHUB_PATH, GITHUB_ENV,
            // GITHUB_OUTPUT): one folder per workspace, so the jobs of a matrix running at once
            // never write each other's (a shared one let a shard truncate another's PATH file).
            let name =
                self.workspace.file_name().map_or_else(|| self.job.to_owned(), |n| n.to_string_lossy().into_owned());
            let files = self.workspace.parent().expect("a parent").join(format!("{name}-files"));
            std::fs::create_dir_all(&files).expect("mkdir");
            let mut ran = Ran::default();
            let mut env: Vec<(String, String)> = Vec::new();
            let mut path_prefix: Vec<String> = Vec::new();
            let steps = job["steps"].as_array().expect("steps");
            for (i, step) in steps.iter().enumerate() {
                let name = step["name"].as_str().map_or_else(|| format!("step {}", i + 1), str::to_owned);
                if let Some(action) = step["uses"].as_str() {
                    let with = |key: &str| step["with"][key].as_str().map(|v| self.substitute(v, &ran.outputs));
                    match action.split('@').next().unwrap_or_default() {
                        "actions/checkout" => (self.checkout)(&self.workspace),
                        "actions/upload-artifact" => {
                            let name = with("name").expect("an artifact name");
                            let paths = with("path").expect("a path");
                            upload(&self.workspace, &paths, &self.artifacts.join(name));
                        }
                        "actions/download-artifact" => {
                            let into = self.workspace.join(with("path").unwrap_or_default());
                            match (with("name"), with("pattern")) {
                                (Some(name), _) => download(&self.artifacts.join(name), &into),
                                (None, Some(pattern)) => {
                                    for entry in std::fs::read_dir(&self.artifacts).expect("artifacts").flatten() {
                                        let artifact = entry.file_name().to_string_lossy().into_owned();
                                        if glob(&pattern, &artifact) {
                                            download(&entry.path(), &into.join(&artifact));
                                        }
                                    }
                                }
                                (None, None) => panic!("download-artifact without a name or pattern"),
                            }
                        }
                        "github/codeql-action/upload-sarif" => {
                            let file = with("sarif_file").expect("sarif_file");
                            let category = with("category").expect("a category per job");
                            ran.uploads.sarif.push((self.workspace.join(file), category));
                        }
                        other => panic!("an action this runner does not stand in for: {other}"),
                    }
                    continue;
                }
                let script = step["run"].as_str().unwrap_or_else(|| panic!("step {name}: neither uses nor run"));
                let mut script = self.substitute(script, &ran.outputs);
                for (line, instead) in &self.replace {
                    script = script.replace(line.as_str(), instead);
                }
                let file = files.join(format!("step-{i}.sh"));
                std::fs::write(&file, &script).expect("write the step's script");
                let github_path = files.join(format!("path-{i}"));
                let github_env = files.join(format!("env-{i}"));
                let github_output = files.join(format!("output-{i}"));
                for f in [&github_path, &github_env, &github_output] {
                    std::fs::write(f, "").expect("touch");
                }
                let mut command = Command::new("bash");
                // GitHub's default shell on Linux: `bash -e {0}`.
                command.arg("-e").arg(&file).current_dir(&self.workspace);
                for var in ["ELENGTIS_PARTITION", "JOB_COMPLETION_INDEX", "ELENGTIS_CRASHPOINT", "ELENGTIS_SIGNING_KEY"]
                {
                    command.env_remove(var);
                }
                command.env_remove("OPENROUTER_API_KEY");
                let base_path = std::env::var("PATH").unwrap_or_default();
                let path =
                    path_prefix.iter().rev().cloned().chain(std::iter::once(base_path)).collect::<Vec<_>>().join(":");
                command
                    .env("PATH", path)
                    .env("GITHUB_WORKSPACE", &self.workspace)
                    .env("GITHUB_PATH", &github_path)
                    .env("GITHUB_ENV", &github_env)
                    .env("GITHUB_OUTPUT", &github_output)
                    .env("CI", "true")
                    .env("GITHUB_ACTIONS", "true");
                let layers = [
                    self.env_of(self.workflow, &ran.outputs),
                    self.env_of(job, &ran.outputs),
                    env.clone(),
                    self.env_of(step, &ran.outputs),
                ];
                for (key, value) in layers.iter().flatten() {
                    command.env(key, value);
                }
                let output = command.output().expect("bash");
                let log = format!("{}{}", stdout(&output), stderr(&output));
                assert!(output.status.success(), "job {} step `{name}` failed ({}):\n{log}", self.job, output.status);
                for line in std::fs::read_to_string(&github_path).unwrap_or_default().lines().filter(|l| !l.is_empty())
                {
                    path_prefix.push(line.to_owned());
                }
                for line in std::fs::read_to_string(&github_env).unwrap_or_default().lines() {
                    if let Some((k, v)) = line.split_once('=') {
                        env.push((k.to_owned(), v.to_owned()));
                    }
                }
                if let Some(id) = step["id"].as_str() {
                    let outputs = std::fs::read_to_string(&github_output)
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
                        .collect();
                    ran.outputs.insert(id.to_owned(), outputs);
                }
                ran.logs.push((name, log));
            }
            ran
        }
    }

    /// `*` in one path component (never across `/`).
    fn glob(pattern: &str, name: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == name,
            Some((head, tail)) => {
                name.starts_with(head) && name.len() >= head.len() + tail.len() && {
                    let rest = &name[head.len()..];
                    (0..=rest.len()).any(|i| rest.is_char_boundary(i) && glob(tail, &rest[i..]))
                }
            }
        }
    }

    /// The files `pattern` (relative to `root`, `*` within components) names.
    fn matches(root: &Path, pattern: &str) -> Vec<PathBuf> {
        let mut found = vec![root.to_path_buf()];
        for part in pattern.split('/').filter(|p| !p.is_empty()) {
            let mut next = Vec::new();
            for dir in &found {
                if part.contains('*') {
                    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                        if glob(part, &entry.file_name().to_string_lossy()) {
                            next.push(entry.path());
                        }
                    }
                } else if dir.join(part).exists() {
                    next.push(dir.join(part));
                }
            }
            found = next;
        }
        found.sort();
        found
    }

    /// `actions/upload-artifact`: every path (one per line, globs allowed) into the artifact,
    /// relative to their least common ancestor (a single directory's contents at the root);
    /// file modes are not kept.
    fn upload(workspace: &Path, paths: &str, artifact: &Path) {
        let files: Vec<PathBuf> =
            paths.lines().map(str::trim).filter(|l| !l.is_empty()).flat_map(|p| matches(workspace, p)).collect();
        assert!(!files.is_empty(), "nothing matched {paths:?} in {}", workspace.display());
        let mut ancestor = if files.len() == 1 && files[0].is_dir() {
            files[0].clone()
        } else {
            files[0].parent().expect("a parent").to_path_buf()
        };
        while !files.iter().all(|f| f.starts_with(&ancestor)) {
            ancestor = ancestor.parent().expect("a common ancestor").to_path_buf();
        }
        for file in files {
            copy_plain(&file, &artifact.join(file.strip_prefix(&ancestor).expect("under the ancestor")));
        }
    }

    /// `actions/download-artifact`: the artifact's files into `into` (modes 0644).
    fn download(artifact: &Path, into: &Path) {
        copy_plain(artifact, into);
    }

    /// Copy a file or tree, every file mode 0644 (artifacts keep no modes).
    fn copy_plain(from: &Path, to: &Path) {
        use std::os::unix::fs::PermissionsExt as _;
        if from.is_dir() {
            std::fs::create_dir_all(to).expect("mkdir");
            for entry in std::fs::read_dir(from).expect("list").flatten() {
                copy_plain(&entry.path(), &to.join(entry.file_name()));
            }
        } else if from.is_file() {
            std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
            std::fs::copy(from, to).expect("copy");
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
    }
}

/// GitLab CI, as a docker executor whose runner binds the host's Docker socket runs a job: in a
/// container of the job's image (the local stand-in, [`job_image`]), the checkout at
/// `/builds/<group>/<project>` inside it — a path the host does not have, as a runner's
/// builds volume is not bound at the same path — the job's and pipeline's variables and the
/// predefined ones, `script:` run by `sh -e`, and the host's socket at /var/run/docker.sock.
pub mod gitlab {
    use super::{BTreeMap, Command, Output, Path, Value};

    /// Where the checkout is inside the job container.
    pub const PROJECT_DIR: &str = "/builds/elengtis/elengtis";

    /// The `docker run` that runs `job`'s script (its lines joined) in the job image, with
    /// `workspace` at [`PROJECT_DIR`] and `variables` (the pipeline's, the job's, the predefined
    /// ones the caller adds).
    ///
    /// # Panics
    ///
    /// When the job names no image or no script.
    pub fn job_command(job: &Value, workspace: &Path, variables: &BTreeMap<String, String>) -> Command {
        let image = job["image"].as_str().expect("the job names its image");
        assert!(!image.is_empty());
        let script: Vec<&str> = job["script"].as_array().expect("a script").iter().filter_map(Value::as_str).collect();
        let mut command = Command::new("docker");
        command.args(["run", "--rm", "-v"]).arg(format!("{}:{PROJECT_DIR}", workspace.display()));
        command.args(["-v", "/var/run/docker.sock:/var/run/docker.sock", "-w", PROJECT_DIR]);
        command.args(["-e", &format!("CI_PROJECT_DIR={PROJECT_DIR}"), "-e", "CI=true", "-e", "GITLAB_CI=true"]);
        for (key, value) in variables {
            command.arg("-e").arg(format!("{key}={value}"));
        }
        command.arg(super::job_image()).args(["sh", "-e", "-c"]).arg(script.join("\n"));
        command
    }

    /// Run a job to its end.
    ///
    /// # Panics
    ///
    /// When docker cannot be started.
    pub fn run_job(job: &Value, workspace: &Path, variables: &BTreeMap<String, String>) -> Output {
        job_command(job, workspace, variables).output().expect("docker run")
    }
}
