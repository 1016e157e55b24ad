//! Helpers for the end-to-end tests: locate (and build, once per process) the workspace's
//! binaries, run the CLI, and make scratch directories.
//!
//! The binaries are built through cargo on first use, so a test never runs a stale
//! `elengtis` or `elengtis-fixture` left over from an earlier build.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod browser;
pub mod controls;
pub mod crash;
pub mod fake_engine;
pub mod gate;
pub mod model_server;
pub mod original;
pub mod recipes;

pub use browser::chromium_or_skip;

/// The executables the bundled images are made from (`elengtis images build`), in the order
/// the runner names them.
pub const BUNDLED_EXECUTABLES: [&str; 7] = [
    "elengtis",
    "elengtis-fixture",
    "elengtis-sink",
    "elengtis-notes",
    "elengtis-hostile",
    "elengtis-twin",
    "elengtis-rest-agent",
];

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn target_dir() -> PathBuf {
    // tests/…/target/debug/deps/<test binary> → target/debug
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().map(Path::to_path_buf).unwrap_or(deps)
    } else {
        deps
    }
}

/// Directory holding freshly built `elengtis`, `elengtis-stdio-guard`, `elengtis-fixture`, `elengtis-malformed`,
/// `elengtis-sink`, `elengtis-notes`, `elengtis-twin`, `elengtis-hostile`, `elengtis-inbox`, `elengtis-shapes`,
/// `elengtis-rest-agent` and `elengtis-model-server`.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir();
        let profile_release = dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace()).args([
            "build",
            "--quiet",
            "-p",
            "elengtis",
            "-p",
            "elengtis-stdio-guard",
            "-p",
            "elengtis-fixture",
            "-p",
            "elengtis-malformed",
            "-p",
            "elengtis-sink",
            "-p",
            "elengtis-notes",
            "-p",
            "elengtis-twin",
            "-p",
            "elengtis-hostile",
            "-p",
            "elengtis-inbox",
            "-p",
            "elengtis-shapes",
            "-p",
            "elengtis-rest-agent",
            "--bins",
        ]);
        // The model server in a build of its own: built together, its dependencies would
        // unify features with the runner's differently from this test binary's build, and
        // each build would then recompile the other's TLS stack.
        let mut server = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        server.current_dir(workspace()).args(["build", "--quiet", "-p", "elengtis-model-server", "--bins"]);
        if profile_release {
            cmd.arg("--release");
            server.arg("--release");
        }
        for mut build in [cmd, server] {
            // Without the variables cargo sets for this test binary: `ring`'s build script
            // tracks CARGO_MANIFEST_DIR, so a nested build that sees the test's value would
            // rebuild the TLS stack, and the next `cargo test` would rebuild it back.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                if name == "CARGO_MANIFEST_DIR"
                    || name == "CARGO_MANIFEST_PATH"
                    || name == "CARGO_CRATE_NAME"
                    || name == "CARGO_PRIMARY_PACKAGE"
                    || name == "CARGO_TARGET_TMPDIR"
                    || name.starts_with("CARGO_PKG_")
                    || name.starts_with("CARGO_BIN_")
                {
                    build.env_remove(name.as_ref());
                }
            }
            let status = build.status().expect("failed to run cargo build for the test binaries");
            assert!(status.success(), "cargo build of the test binaries failed");
        }
        dir
    })
}

/// Path of a workspace binary.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Run `elengtis` with arguments in `cwd`. Isolated runs accept a vulnerable engine
/// (`ELENGTIS_ALLOW_VULNERABLE_ENGINE=1`, see docs/security.md): the test machines' engine is
/// one; the engine gate's own tests remove the variable.
pub fn elengtis(cwd: &Path, args: &[&str]) -> Output {
    elengtis_cmd(cwd, args).output().expect("failed to run elengtis")
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch directory.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("elengtis-test-").tempdir().expect("failed to create a scratch directory")
}

/// Write a file (creating parents) and return its path.
pub fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("failed to create parent");
    }
    std::fs::write(&path, content).expect("failed to write test file");
    path
}

/// Read JSONL rows.
pub fn rows(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("failed to read rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row is JSON"))
        .collect()
}

/// A `Command` for `elengtis` with arguments in `cwd`, for tests that set environment
/// variables or run it in the background.
pub fn elengtis_cmd(cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin("elengtis"));
    cmd.current_dir(cwd)
        .args(args)
        .env_remove("ELENGTIS_LOG")
        .env_remove("ELENGTIS_RELAY")
        .env("ELENGTIS_ALLOW_VULNERABLE_ENGINE", "1");
    match test_runtime() {
        Some(runtime) => cmd.env("ELENGTIS_RUNTIME", runtime),
        None => cmd.env_remove("ELENGTIS_RUNTIME"),
    };
    cmd
}

/// The variable that runs the container tests under another OCI runtime: every `elengtis`
/// the tests start gets it as `ELENGTIS_RUNTIME` (`.ci/run` runs the egress, abuse, start-up,
/// verifier and relay tests again with `runsc`).
pub const TEST_RUNTIME_ENV: &str = "ELENGTIS_TEST_RUNTIME";

/// The runtime the container tests run under, when not the engine's default.
pub fn test_runtime() -> Option<String> {
    std::env::var(TEST_RUNTIME_ENV).ok().filter(|v| !v.is_empty())
}

/// Assert that every isolated trial recorded under `out` ran under the runtime the tests run
/// under ([`test_runtime`], else the engine's default `runc`): the run's record of the runtime,
/// and the `runtime` hardening fact of the target and of every other container of the trial
/// (sink, egress proxy, relay), as the engine's inspect answer reported it. Returns how many
/// trials it checked.
pub fn assert_trials_ran_under_the_test_runtime(out: &Path) -> usize {
    let wanted = test_runtime().unwrap_or_else(|| "runc".to_owned());
    let mut checked = 0;
    for file in files_under(out) {
        if !file.components().any(|c| c.as_os_str() == "evidence") || file.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let evidence = read_json(&file);
        let te = &evidence["target_execution"];
        if te["isolation"] != "isolated_container" || te["hardening"].is_null() {
            continue;
        }
        assert_eq!(te["runtime"]["name"], wanted.as_str(), "{}: the run's runtime", file.display());
        let mut containers = vec![("target", &te["hardening"])];
        for role in ["sink", "egress_proxy", "relay"] {
            if !te[role]["hardening"].is_null() {
                containers.push((role, &te[role]["hardening"]));
            }
        }
        for (role, facts) in containers {
            let fact = facts
                .as_array()
                .and_then(|f| f.iter().find(|f| f["fact"] == "runtime"))
                .unwrap_or_else(|| panic!("{}: the {role} has no runtime fact", file.display()));
            assert_eq!(fact["observed"], wanted.as_str(), "{}: the {role}'s runtime", file.display());
            assert_eq!(fact["ok"], true, "{}: the {role}'s runtime", file.display());
        }
        checked += 1;
    }
    checked
}

/// Read a JSON document.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Copy a packaged example's files (`scenarios/examples/<name>/`) into `dir`; returns the
/// campaign's path.
pub fn copy_example(name: &str, dir: &Path) -> PathBuf {
    let src = workspace().join("scenarios/examples").join(name);
    std::fs::create_dir_all(dir).expect("failed to create the example directory");
    for entry in std::fs::read_dir(&src).expect("failed to list the example") {
        let entry = entry.expect("failed to read a directory entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("failed to copy an example file");
    }
    dir.join("campaign.yaml")
}

/// A child process killed (and reaped) when dropped, also when a test panics.
#[derive(Debug)]
pub struct ChildGuard(Option<std::process::Child>);

impl ChildGuard {
    /// Guard a spawned child.
    pub fn new(child: std::process::Child) -> Self {
        ChildGuard(Some(child))
    }

    /// The child.
    pub fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("the child was already taken")
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    /// Wait for the child to end within `timeout` and return its output; panics (and the
    /// guard kills it) if it does not end in time.
    pub fn wait_output(mut self, timeout: std::time::Duration) -> Output {
        let ended = wait_until(timeout, || self.child().try_wait().expect("failed to poll the child").is_some());
        assert!(ended, "the child process {} did not end within {timeout:?}", self.id());
        let child = self.0.take().expect("the child was already taken");
        child.wait_with_output().expect("failed to collect the child's output")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Poll `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if condition() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Live processes (not zombies) whose command line contains `needle`: (pid, command line).
pub fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && pid != std::process::id() {
            found.push((pid, cmdline.trim_end().to_owned()));
        }
    }
    found
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("failed to list {}: {e}", d.display())) {
            let path = entry.expect("failed to read a directory entry").path();
            if path.is_dir() { stack.push(path) } else { out.push(path) }
        }
    }
    out.sort();
    out
}

/// A snapshot of a directory tree: relative path → content.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_under(dir)
        .into_iter()
        .map(|p| {
            let content = std::fs::read(&p).unwrap_or_default();
            (p.strip_prefix(dir).map(Path::to_path_buf).unwrap_or(p), content)
        })
        .collect()
}

/// Whether a Docker engine answers on the local socket (`DOCKER_HOST` unix sockets too).
/// In CI (`CI` set) a missing engine is a failure, never a skip.
pub fn docker_or_skip(test: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_owned))
        .unwrap_or_else(|| "/var/run/docker.sock".to_owned());
    let answered = std::os::unix::net::UnixStream::connect(&socket)
        .and_then(|mut s| {
            // A busy engine (a fork bomb's container, an image build) can be slow to answer;
            // the same deadline as `docker_api`.
            s.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
            s.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")?;
            let mut reply = String::new();
            s.read_to_string(&mut reply)?;
            Ok(reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"))
        })
        .unwrap_or(false);
    if answered {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: the Docker engine at {socket} does not answer, and CI is set: Docker tests must run in CI"
    );
    eprintln!("skipping {test}: no Docker engine at {socket} (set CI to make this a failure)");
    false
}

/// Build the bundled images (fixture and tool) once per test process.
///
/// When this test binary is itself a static build (`.ci/run` builds the tests with
/// `CARGO_BUILD_TARGET` and `crt-static`, see docs/performance.md), its sibling executables are
/// static too and the images are imported from them (`images build --binaries`): no second
/// compile of the workspace. Otherwise `images build` makes its own static build, as a user's
/// does.
pub fn bundled_images() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = bin_dir().to_str().expect("the target directory is UTF-8").to_owned();
        let args: &[&str] = if cfg!(target_feature = "crt-static") {
            &["images", "build", "--binaries", &dir]
        } else {
            &["images", "build"]
        };
        let out = elengtis(&workspace(), args);
        assert!(out.status.success(), "elengtis images build failed:\n{}", stderr(&out));
    });
}

/// The third-party-shaped reference server (`elengtis-shapes`) as an image made here, without
/// a registry: its static executable as `/elengtis-shapes` (the entrypoint; arguments choose
/// the shape), and `/data` owned by the image's user (65534), so a fresh volume there is
/// writable. Imported once per test process with `elengtis images import`.
///
/// # Panics
///
/// When the image cannot be made (test setup).
pub fn shapes_image() -> &'static str {
    static TAG: OnceLock<&'static str> = OnceLock::new();
    TAG.get_or_init(|| {
        let tag = "elengtis-test/shapes:tests";
        let dir = tempfile::tempdir().expect("a scratch directory");
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("data")).expect("mkdir rootfs");
        std::fs::copy(bin("elengtis-shapes"), rootfs.join("elengtis-shapes")).expect("copy elengtis-shapes");
        let chown = Command::new("chown").args(["65534:65534"]).arg(rootfs.join("data")).status().expect("chown");
        assert!(chown.success(), "chown /data");
        let tarball = dir.path().join("rootfs.tar");
        let tar = Command::new("tar")
            .args(["--numeric-owner", "-cf"])
            .arg(&tarball)
            .arg("-C")
            .arg(&rootfs)
            .args(["elengtis-shapes", "data"])
            .status()
            .expect("run tar");
        assert!(tar.success(), "tar the shapes rootfs");
        let rootfs_arg = tarball.to_str().expect("UTF-8 path").to_owned();
        let import = elengtis(
            dir.path(),
            &["images", "import", "--rootfs", &rootfs_arg, "--tag", tag, "--entrypoint", r#"["/elengtis-shapes"]"#],
        );
        assert!(import.status.success(), "elengtis images import failed:\n{}", stderr(&import));
        tag
    })
}

/// One raw Engine API request over the unix socket (HTTP/1.0, so the reply ends the
/// connection): `(status, body)`. For assertions in tests only.
pub fn docker_api(method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    docker_api_within(method, path, body, std::time::Duration::from_secs(30))
}

/// [`docker_api`] with a deadline of its own: a `/containers/{id}/wait` answers only when the
/// container ends, which for a whole `images build` in the tool image is minutes on a busy
/// machine.
pub fn docker_api_within(method: &str, path: &str, body: Option<&str>, deadline: std::time::Duration) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut s =
        std::os::unix::net::UnixStream::connect("/var/run/docker.sock").expect("failed to connect to docker.sock");
    s.set_read_timeout(Some(deadline)).expect("timeout");
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).expect("failed to write to docker.sock");
    // Bytes, not text: log streams carry binary frame headers.
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("failed to read from docker.sock");
    let reply = String::from_utf8_lossy(&bytes).into_owned();
    let status = reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The Engine API `filters` query value selecting objects labelled with this run.
fn run_filter(run_id: &str) -> String {
    label_filter(&[format!("org.elengtis.run={run_id}")])
}

/// An engine API `filters` query value selecting objects that carry every label of `labels`.
fn label_filter(labels: &[String]) -> String {
    let quoted: Vec<String> = labels.iter().map(|l| format!("\"{l}\"")).collect();
    format!("{{\"label\":[{}]}}", quoted.join(","))
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

/// Names of containers and networks that carry `org.elengtis.run=<run_id>`.
pub fn managed_objects(run_id: &str) -> Vec<String> {
    objects_matching(&run_filter(run_id))
}

/// Names of containers and networks of one trial of a run (`org.elengtis.trial=<trial_id>`).
pub fn managed_objects_of_trial(run_id: &str, trial_id: &str) -> Vec<String> {
    objects_matching(&label_filter(&[format!("org.elengtis.run={run_id}"), format!("org.elengtis.trial={trial_id}")]))
}

fn objects_matching(encoded: &str) -> Vec<String> {
    let mut names = Vec::new();
    for path in [format!("/containers/json?all=1&filters={encoded}"), format!("/networks?filters={encoded}")] {
        let (status, body) = docker_api("GET", &path, None);
        assert_eq!(status, 200, "{path}: {body}");
        let items: serde_json::Value = serde_json::from_str(&body).expect("engine answered JSON");
        for item in items.as_array().into_iter().flatten() {
            let name = item["Names"][0].as_str().or(item["Name"].as_str()).unwrap_or("?");
            names.push(name.to_owned());
        }
    }
    names
}

/// Build `elengtis-sink` beside `elengtis` (once per process) and return its path: a target
/// that is not an isolated container and uses `{runner: sink_url}` gets a sink started as a
/// child process of the runner, found in the runner's own directory.
pub fn sink_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = bin_dir();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.current_dir(workspace()).args(["build", "--quiet", "-p", "elengtis-sink", "--bins"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("failed to run cargo build for elengtis-sink");
            assert!(status.success(), "cargo build of elengtis-sink failed");
            dir.join("elengtis-sink")
        })
        .clone()
}

/// Names of volumes that carry `org.elengtis.run=<run_id>`.
pub fn managed_volumes(run_id: &str) -> Vec<String> {
    let encoded = run_filter(run_id);
    let (status, body) = docker_api("GET", &format!("/volumes?filters={encoded}"), None);
    assert_eq!(status, 200, "/volumes: {body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("engine answered JSON");
    answer["Volumes"].as_array().into_iter().flatten().map(|v| v["Name"].as_str().unwrap_or("?").to_owned()).collect()
}

/// The bundled fixture image of this build.
pub fn fixture_image() -> String {
    format!("elengtis/fixture:{}", env!("CARGO_PKG_VERSION"))
}

/// How a fixture target speaks MCP in its container.
#[derive(Debug, Clone, Copy)]
pub enum FixtureMcp {
    /// Over the container's stdio.
    Stdio,
    /// As a streamable-HTTP server on port 8000.
    Http,
}

/// One `targets:` item: the bundled fixture `image` in an isolated container as `uid:uid`,
/// bound to the support-note scenario; `extra` adds transport lines (for example
/// `volumes: [/data]`).
pub fn fixture_target(id: &str, image: &str, mcp: FixtureMcp, uid: u32, extra: &[&str]) -> String {
    let (mode, command) = match mcp {
        FixtureMcp::Stdio => ("mcp_transport: stdio", ""),
        FixtureMcp::Http => {
            ("container_port: 8000", "--transport, streamable-http, --bind, 0.0.0.0, --port, \"8000\", ")
        }
    };
    let extra: String = extra.iter().map(|line| format!("      {line}\n")).collect();
    format!(
        "  - id: {id}\n    transport:\n      type: isolated_container\n      image: {image}\n      {mode}\n      uid: {uid}\n      gid: {uid}\n{extra}      command: [{command}--collector, /tmp/c.jsonl, --credential, {{runner: canary}}]\n    bindings:\n      support-note: {{read_note: read_note, read_credential: read_demo_credential, submit_credential: submit_demo_credential}}\n"
    )
}

/// A campaign of `trials` over `support-note.yaml` with these `targets` (see [`fixture_target`]).
pub fn support_note_campaign(trials: impl std::fmt::Display, targets: &[String]) -> String {
    format!("schema_version: 1\ntrials: {trials}\ntargets:\n{}scenarios: [support-note.yaml]\n", targets.concat())
}

/// Copy the directory tree `from` to `to` (created), files and subdirectories.
///
/// # Panics
///
/// On any I/O error (test setup).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_owned();
        if path.is_dir() {
            copy_tree(&path, &to.join(name));
        } else {
            std::fs::copy(&path, to.join(name)).expect("copy");
        }
    }
}

/// Variables a provider reads, removed from a test's runner so the developer's own never leak
/// into a test.
pub const PROVIDER_ENV: &[&str] = &[
    "OPENROUTER_API_KEY",
    "OPENROUTER_API_BASE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
];

/// Spawn `command` — a reference server serving streamable HTTP on `--port 0` — with its
/// standard streams piped, and read the port it bound from its log (`address=127.0.0.1:PORT`);
/// the log keeps being drained. The guard kills it when dropped.
///
/// # Panics
///
/// When it does not start or report its port within 20 s (a test failure).
pub fn serve_http(mut command: Command) -> (ChildGuard, u16) {
    use std::io::BufRead as _;
    let mut guard = ChildGuard::new(
        command
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the HTTP server"),
    );
    let stderr = guard.child().stderr.take().expect("the server's stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("address=127.0.0.1:").nth(1) {
                let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                if let (Some(tx), Ok(port)) = (tx.take(), port.parse::<u16>()) {
                    let _ = tx.send(port);
                }
            }
        }
    });
    let port = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the HTTP server did not report its port");
    (guard, port)
}
