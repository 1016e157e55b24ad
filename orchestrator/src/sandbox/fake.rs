//! A fake sandbox backend for tests of the trial machinery without a container engine.
//!
//! An "image" is a local program; a "container" is that program run as a child process in a
//! fresh directory (its "root"): absolute paths in the target's command are rewritten into
//! that directory, and a snapshot of `/path` reads `<root>/path`. A sink is `elengtis-sink`
//! run as a child on 127.0.0.1. It isolates nothing: every lifecycle record says
//! `"backend": "fake"`, `"isolation": "none"` and `"hardening_asserted": false`. It serves
//! stdio targets only. Faults can be injected per image to test how a trial handles a
//! sandbox that fails at each step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    Fetched, McpMode, SandboxBackend, SandboxError, SandboxSpec, SinkChannel, SnapshotFiles, SweepReport,
    TargetEndpoint, TrialSandbox,
};
use crate::capture::capture;

/// Where a fake sandbox fails, to test how a trial handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeFault {
    /// Creating the sandbox fails.
    Create,
    /// Starting the target fails.
    Start,
    /// Teardown reports an error.
    Teardown,
}

/// A fake backend: images are local programs.
#[derive(Debug, Clone)]
pub struct FakeBackend {
    programs: BTreeMap<String, PathBuf>,
    sink_program: Option<PathBuf>,
    faults: BTreeMap<String, FakeFault>,
    base: PathBuf,
    /// Every sandbox created, with whether its teardown ran (shared with the sandboxes).
    ledger: Arc<Mutex<Vec<(String, bool)>>>,
}

impl FakeBackend {
    /// A backend whose sandboxes live under `base` (which must exist).
    pub fn new(base: &Path) -> Self {
        FakeBackend {
            programs: BTreeMap::new(),
            sink_program: None,
            faults: BTreeMap::new(),
            base: base.to_owned(),
            ledger: Arc::default(),
        }
    }

    /// Serve `image` by running `program`.
    #[must_use]
    pub fn image(mut self, image: &str, program: &Path) -> Self {
        self.programs.insert(image.to_owned(), program.to_owned());
        self
    }

    /// Start canary sinks with `program` (`elengtis-sink`).
    #[must_use]
    pub fn sink(mut self, program: &Path) -> Self {
        self.sink_program = Some(program.to_owned());
        self
    }

    /// Make sandboxes of `image` fail at `fault`.
    #[must_use]
    pub fn fault(mut self, image: &str, fault: FakeFault) -> Self {
        self.faults.insert(image.to_owned(), fault);
        self
    }

    /// Every sandbox created (attempt id) and whether it was torn down.
    pub fn ledger(&self) -> Vec<(String, bool)> {
        self.ledger.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

fn record(spec: &SandboxSpec, root: &Path) -> serde_json::Map<String, Value> {
    let Value::Object(map) = json!({
        "backend": "fake",
        "isolation": "none",
        "session": "fresh_process",
        "reset_asserted": true,
        "hardening_asserted": false,
        "image": {"reference": spec.image},
        "root": root.display().to_string(),
        "mode": spec.mode.name(),
    }) else {
        return serde_json::Map::new();
    };
    map
}

#[async_trait]
impl SandboxBackend for FakeBackend {
    fn run_facts(&self) -> Value {
        json!({"backend": "fake"})
    }

    fn warnings(&self) -> Vec<String> {
        vec!["the fake sandbox backend isolates nothing (tests only)".to_owned()]
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn TrialSandbox>, (SandboxError, Value)> {
        let root = self.base.join(&spec.labels.attempt_id);
        let mut rec = record(spec, &root);
        if self.faults.get(&spec.image) == Some(&FakeFault::Create) {
            rec.insert("error".into(), json!({"kind": "engine", "detail": "injected fault"}));
            return Err((SandboxError::Unusable("injected fault: create".into()), Value::Object(rec)));
        }
        let Some(program) = self.programs.get(&spec.image) else {
            return Err((SandboxError::ImageMissing { image: spec.image.clone() }, Value::Object(rec)));
        };
        if spec.egress_proxy.is_some() {
            return Err((
                SandboxError::Unusable(
                    "the fake sandbox backend has no network to place an egress proxy on (use Docker)".into(),
                ),
                Value::Object(rec),
            ));
        }
        if spec.mode != McpMode::Stdio {
            return Err((
                SandboxError::Unusable("the fake sandbox backend runs stdio targets only".into()),
                Value::Object(rec),
            ));
        }
        if let Err(e) = std::fs::create_dir_all(&root) {
            return Err((
                SandboxError::Unusable(format!("failed to create {}: {e}", root.display())),
                Value::Object(rec),
            ));
        }
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.push((spec.labels.attempt_id.clone(), false));
        }
        Ok(Box::new(FakeSandbox {
            program: program.clone(),
            sink_program: self.sink_program.clone(),
            fault: self.faults.get(&spec.image).copied(),
            spec: spec.clone(),
            root,
            record: rec,
            children: Vec::new(),
            ledger: self.ledger.clone(),
        }))
    }

    async fn sweep(&self, _run_id: &str) -> Result<SweepReport, SandboxError> {
        Ok(SweepReport::default())
    }
}

/// One fake trial sandbox: child processes in a directory.
#[derive(Debug)]
struct FakeSandbox {
    program: PathBuf,
    sink_program: Option<PathBuf>,
    fault: Option<FakeFault>,
    spec: SandboxSpec,
    root: PathBuf,
    record: serde_json::Map<String, Value>,
    children: Vec<tokio::process::Child>,
    ledger: Arc<Mutex<Vec<(String, bool)>>>,
}

impl FakeSandbox {
    /// A container path inside this sandbox's root.
    fn inside(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn spawn(&mut self, program: &Path, args: &[String]) -> Result<tokio::process::Child, SandboxError> {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command.spawn().map_err(|e| SandboxError::NotReady(format!("failed to start {}: {e}", program.display())))
    }
}

#[async_trait]
impl TrialSandbox for FakeSandbox {
    async fn start_sink(&mut self) -> Result<SinkChannel, SandboxError> {
        let program = self
            .sink_program
            .clone()
            .ok_or_else(|| SandboxError::NotReady("the fake backend has no sink program".into()))?;
        let args = ["--bind", "127.0.0.1", "--port", "0"].map(str::to_owned);
        let mut child = self.spawn(&program, &args)?;
        let (Some(records), Some(control)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(SandboxError::NotReady("the sink's pipes are missing".into()));
        };
        self.children.push(child);
        self.record.insert("sink".into(), json!({"program": program.display().to_string()}));
        Ok(SinkChannel {
            records: Box::new(records),
            control: Box::pin(control),
            url: None,
            direct_url: None,
            proxy: None,
            placement: "trial_network",
        })
    }

    async fn start_target(&mut self, command: Vec<String>) -> Result<TargetEndpoint, SandboxError> {
        if self.fault == Some(FakeFault::Start) {
            return Err(SandboxError::NotReady("injected fault: start".into()));
        }
        let args: Vec<String> = command
            .iter()
            .map(|a| if a.starts_with('/') { self.inside(a).display().to_string() } else { a.clone() })
            .collect();
        for arg in &args {
            if let Some(parent) = Path::new(arg).parent().filter(|p| p.starts_with(&self.root)) {
                let _ = std::fs::create_dir_all(parent);
            }
        }
        let program = self.program.clone();
        let mut child = self.spawn(&program, &args)?;
        let (Some(output), Some(input), Some(stderr)) = (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            return Err(SandboxError::NotReady("the target's pipes are missing".into()));
        };
        self.children.push(child);
        self.record.insert("command".into(), json!(args));
        crate::crashpoint::reach(crate::crashpoint::CrashPoint::Start);
        Ok(TargetEndpoint::Stdio {
            output: Box::new(output),
            input: Box::pin(input),
            stderr: capture(stderr, self.spec.stderr_bytes),
        })
    }

    async fn network_gateway(&mut self) -> Result<String, SandboxError> {
        Err(SandboxError::NotReady(
            "the fake backend runs targets as local processes: there is no trial network, so no network_gateway".into(),
        ))
    }

    fn mark_ready(&mut self) {
        self.record.insert("ready".into(), json!(true));
    }

    fn note_error(&mut self, error: &SandboxError) {
        self.record.insert("error".into(), json!({"kind": error.kind(), "detail": error.to_string()}));
    }

    async fn snapshot(&self, path: &str, max_bytes: u64) -> Result<SnapshotFiles, SandboxError> {
        let read = |p: PathBuf| -> Result<Option<Vec<u8>>, SandboxError> {
            match std::fs::read(&p) {
                Ok(bytes) if bytes.len() as u64 > max_bytes => {
                    Err(SandboxError::NotReady(format!("{} is larger than {max_bytes} bytes", p.display())))
                }
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(SandboxError::NotReady(format!("failed to read {}: {e}", p.display()))),
            }
        };
        let db = read(self.inside(path))?
            .ok_or_else(|| SandboxError::NotReady(format!("no file at {path} in the sandbox")))?;
        Ok(SnapshotFiles {
            db,
            wal: read(self.inside(&format!("{path}-wal")))?,
            journal: read(self.inside(&format!("{path}-journal")))?,
        })
    }

    /// A tar of `<root>/path` built like the engine builds it (the last path component as the
    /// top name, links stored as links, never followed).
    async fn archive(&self, path: &str, max_bytes: u64) -> Result<Fetched, SandboxError> {
        let inside = self.inside(path);
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        let failed = |e: std::io::Error| SandboxError::NotReady(format!("failed to archive {}: {e}", inside.display()));
        let metadata = match std::fs::symlink_metadata(&inside) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Fetched::Missing),
            Err(e) => return Err(failed(e)),
        };
        let mut builder = tar::Builder::new(Vec::new());
        builder.follow_symlinks(false);
        if metadata.is_dir() {
            builder.append_dir_all(&name, &inside).map_err(failed)?;
        } else {
            builder.append_path_with_name(&inside, &name).map_err(failed)?;
        }
        let tar = builder.into_inner().map_err(failed)?;
        if tar.len() as u64 > max_bytes {
            return Ok(Fetched::OverCap { cap: max_bytes });
        }
        Ok(Fetched::Tar(tar))
    }

    async fn teardown(mut self: Box<Self>) -> (Value, Vec<String>) {
        let mut errors = Vec::new();
        for mut child in std::mem::take(&mut self.children) {
            drop(child.stdin.take());
            if tokio::time::timeout(std::time::Duration::from_secs(3), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
        if self.fault == Some(FakeFault::Teardown) {
            errors.push("injected fault: teardown".to_owned());
        }
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            errors.push(format!("failed to remove {}: {e}", self.root.display()));
        }
        if let Ok(mut ledger) = self.ledger.lock()
            && let Some(entry) = ledger.iter_mut().find(|(id, _)| *id == self.spec.labels.attempt_id)
        {
            entry.1 = true;
        }
        self.record.insert("cleanup".into(), json!({"ok": errors.is_empty(), "errors": errors}));
        (Value::Object(std::mem::take(&mut self.record)), errors)
    }
}
