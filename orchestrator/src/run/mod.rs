//! Runs: the results directory, the trial loop, resume, interruption and the summary.
//!
//! A results directory holds `manifest.json` (what was run, with hashes and versions),
//! `runs.jsonl` (one row per attempt, append-only, fsynced per row), `evidence/` (one JSON
//! document per attempt, written atomically before its row) and `summary.txt`. An advisory
//! lock keeps a second runner out. Resume skips trials that have a complete row and retries
//! the rest from setup with a new attempt id; the denominator is always the matrix.

mod denied;
pub mod summary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis_core::events::{self, Event, EventSink, NoEvents, Outcome, OutcomeCounts};
use elengtis_core::format::campaign::Transport;
use elengtis_core::format::{Bundle, LoadError};
use elengtis_core::load;
use elengtis_core::matrix::{self, TrialSpec};
use elengtis_core::partition::{Partition, PartitionRecord};
use elengtis_core::records::manifest::{Configuration, Environment, Experiment, RestTargetRecord};
use elengtis_core::records::{
    EvidenceStatus, METRICS_VERSION, Manifest, RESULTS_SCHEMA_VERSION, ResumeRecord, Row, ScenarioDump, SealStatus,
};
use elengtis_verifiers::{HttpClient, HttpLimits};
use serde_json::Value;

pub use self::summary::{final_rows, summarize};
use crate::model::{ModelContext, ModelOptions};
use crate::results::store::{self, AppendLog, DirLock, StoreError};
use crate::sandbox::docker::{DockerBackend, DockerOptions};
use crate::sandbox::{SandboxBackend, SweepReport};
use crate::toolhost::mcp::Limits;
use crate::trial::{self, Attempt, AttemptResult, launch};
use elengtis_core::records::{bounds, strict};

/// Consecutive incomplete attempts on one target that stop that target's trials (its breaker):
/// the other targets' trials go on.
pub const MAX_CONSECUTIVE_TARGET_FAILURES: u32 = 3;

/// Why a run could not start or continue.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The output directory of a new run exists.
    #[error(
        "failed to start the run: {} already exists; choose a new --out, or continue that run with `elengtis run --resume --out {}`",
        .0.display(), .0.display()
    )]
    Exists(PathBuf),
    /// The output directory of a new run names something that is not a directory.
    #[error(
        "failed to start the run: {} exists and is not a directory; choose a new --out (a directory that does not exist yet)",
        .0.display()
    )]
    NotADirectory(PathBuf),
    /// The output directory of a new run cannot be created (a read-only parent, a parent that
    /// is a file).
    #[error("failed to start the run: {} cannot be used as the results directory: {detail}; choose another --out", .path.display())]
    Unusable {
        /// The results directory asked for.
        path: PathBuf,
        /// Why, with the OS error.
        detail: String,
    },
    /// Resume found no run.
    #[error("failed to resume: {} has no {file}; it is not a results directory of elengtis", .dir.display())]
    NotARun {
        /// The directory.
        dir: PathBuf,
        /// The missing file.
        file: &'static str,
    },
    /// The manifest cannot be used.
    #[error("failed to resume from {}: {detail}", .path.display())]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Versions differ.
    #[error(
        "failed to resume: {key} is incompatible with this build (the run has {found}, this build writes {expected}); start a new run, or use the elengtis version that started it"
    )]
    Version {
        /// Which version.
        key: &'static str,
        /// In the run.
        found: String,
        /// In this build.
        expected: u64,
    },
    /// The campaign is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The campaign cannot run in this build.
    #[error("failed to start the run: {0}")]
    Unavailable(String),
    /// A results file problem.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Creating the directory failed.
    #[error("failed to create {}: {source}", .path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The Docker engine or an image is not usable.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The HTTP client for actions could not be built.
    #[error("failed to build the runner's HTTP client: {0}")]
    Http(String),
    /// The results do not verify (`elengtis verify` refuses them).
    #[error(
        "failed to resume {}: its results do not verify ({count} problem{}); nothing was run:\n{problems}check with `elengtis verify {}`",
        .dir.display(), if *.count == 1 { "" } else { "s" }, .dir.display()
    )]
    Unverified {
        /// The results directory.
        dir: PathBuf,
        /// How many problems.
        count: usize,
        /// Each problem on its own line.
        problems: String,
    },
    /// The results directory could not be checked.
    #[error(transparent)]
    Verify(#[from] crate::results::verify::VerifyError),
    /// The spend cap is already spent: a resume would stop before its first request.
    #[error("{0}")]
    BudgetSpent(String),
    /// A signing key in the environment cannot be used.
    #[error(transparent)]
    Key(#[from] crate::results::keys::KeyError),
    /// The finished run could not be sealed.
    #[error(transparent)]
    Seal(#[from] crate::results::seal::SealError),
    /// `--partition` on a resume names another shard than the run is.
    #[error(
        "failed to resume {}: it is shard {recorded} of the matrix, not {asked}; a resume keeps the run's partition (leave out --partition, or give {recorded})",
        .dir.display()
    )]
    PartitionMismatch {
        /// The results directory.
        dir: PathBuf,
        /// What the manifest records.
        recorded: String,
        /// What was asked for.
        asked: String,
    },
    /// `run --resume-or-start` found a results directory of another campaign, or one that is
    /// not a run at all.
    #[error("failed to resume or start the run in {}: {detail}", .dir.display())]
    NotThisRun {
        /// The results directory.
        dir: PathBuf,
        /// What differs, and what to do.
        detail: String,
    },
    /// A merged directory is not resumed.
    #[error(
        "failed to resume {}: it was merged from shards (`elengtis merge`), and a merged directory is not resumed; resume the shard whose trials are missing (`elengtis run --resume --out SHARD`) and merge again",
        .0.display()
    )]
    Merged(PathBuf),
    /// Results could not be recorded for a reason other than a file (the recording thread
    /// failed).
    #[error("failed to record results: {0}")]
    Record(String),
    /// A results file the resume would write in place has another hard link.
    #[error(
        "failed to resume {}: {files} {detail}; nothing was written",
        .dir.display()
    )]
    Linked {
        /// The results directory.
        dir: PathBuf,
        /// The linked files, named.
        files: String,
        /// Why that is refused, and what to do.
        detail: String,
    },
    /// A signed directory resumed without its key.
    #[error(
        "failed to resume {}: it is signed by {keys}; resume it with that key (`ELENGTIS_SIGNING_KEY` or `ELENGTIS_SIGNING_KEY_FILE`): resumed without it, its new rows and seal would be signed by nothing and `verify --key` would refuse them; nothing was written",
        .dir.display()
    )]
    SignedWithoutKey {
        /// The results directory.
        dir: PathBuf,
        /// The keys that signed it.
        keys: String,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// Every trial has a complete attempt.
    Complete,
    /// Some trials have no complete attempt.
    Incomplete(String),
    /// The run stopped early.
    Stopped(String),
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// What a run did.
#[derive(Debug)]
pub struct RunReport {
    /// The results directory.
    pub out: PathBuf,
    /// Run id.
    pub run_id: String,
    /// How it ended.
    pub end: RunEnd,
    /// The summary text (also in summary.txt).
    pub summary: String,
    /// Every trial's line (`<trial_id>: <termination>`), for `--verbose`.
    pub trial_lines: String,
    /// Attempts made by this invocation.
    pub attempts_now: usize,
    /// A torn final row cut on resume: (offset, bytes).
    pub recovered_tail: Option<(u64, usize)>,
    /// Leftovers of this run removed before resuming.
    pub leftovers: Option<SweepReport>,
}

/// Which sandbox backend runs container targets.
#[derive(Debug, Clone)]
pub enum SandboxChoice {
    /// The Docker engine (the default), prepared per run with these options.
    Docker(DockerOptions),
    /// A backend the caller prepared (tests use the fake backend).
    Prepared(Arc<dyn SandboxBackend>),
}

impl Default for SandboxChoice {
    fn default() -> Self {
        SandboxChoice::Docker(DockerOptions::default())
    }
}

/// Run settings not in the campaign.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Target deadlines.
    pub limits: Limits,
    /// Trials run at once: sessions (the agent phase, model calls and verification) in
    /// progress at the same time.
    pub jobs: usize,
    /// Trials whose target is opened ahead of a free session slot (`--prepare-ahead`): their
    /// sandbox (network, container, MCP handshake) is prepared while up to `jobs` others run
    /// their sessions, and each trial tears down off the critical path. 0: a trial opens its
    /// target when it takes its slot and holds it until recorded.
    pub prepare_ahead: usize,
    /// The sandbox backend for container targets.
    pub sandbox: SandboxChoice,
    /// Where the run's events go (progress, warnings).
    pub events: Arc<dyn EventSink>,
    /// Live models: the spend cap, prices, recording or replaying fixtures.
    pub model: ModelOptions,
    /// A pool of trial slots shared with other runs (`None`: this run's own `jobs` alone).
    /// Each trial holds one of its permits from its start to its end, so runs that share it
    /// never run more trials at once between them than it has permits, and one run's idle
    /// slots are taken by the others' trials (`elengtis prove` runs its campaigns this way).
    /// `jobs` still bounds this run's own trials in flight.
    pub slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Run only this shard of the trial matrix (`--partition K/N`); a resume keeps the run's.
    pub partition: Option<Partition>,
    /// Asked with each finished attempt (its row and evidence, in the order they finish, before
    /// any further trial starts): `Some(why)` stops the run as the spend cap does (no further
    /// trial starts, those in flight are recorded, the seal says `stopped` with why).
    /// `prove --sequential` stops its repeat legs this way once the verdict is settled. With
    /// it, the trials start round by round (every target's first trial, then every second, …)
    /// instead of in matrix order.
    pub stop_when: Option<StopWhen>,
}

/// The question [`StopWhen`] asks of each finished attempt.
pub type StopQuestion = dyn Fn(&Row, &elengtis_core::records::Evidence) -> Option<String> + Send + Sync;

/// See [`RunOptions::stop_when`].
#[derive(Clone)]
pub struct StopWhen(pub Arc<StopQuestion>);

impl std::fmt::Debug for StopWhen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopWhen(..)")
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            limits: Limits::default(),
            jobs: 1,
            prepare_ahead: 0,
            sandbox: SandboxChoice::default(),
            events: Arc::new(NoEvents),
            model: ModelOptions::default(),
            slots: None,
            partition: None,
            stop_when: None,
        }
    }
}

/// The runner that writes a record: this build, on this machine.
pub fn environment() -> Environment {
    Environment {
        elengtis_version: env!("CARGO_PKG_VERSION").to_owned(),
        rmcp_version: "3.11.0".to_owned(),
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        code_revision: option_env!("ELENGTIS_GIT_REVISION").map(str::to_owned),
    }
}

/// Prepare the sandbox backend a bundle's container targets need (None when it has none):
/// for Docker, connect, pass the engine gate and resolve every image; its warnings are
/// emitted before any trial.
pub async fn prepare_sandbox(
    bundle: &Bundle,
    choice: &SandboxChoice,
    events: &dyn EventSink,
) -> Result<Option<Arc<dyn SandboxBackend>>, RunError> {
    let Some(needs) = launch::sandbox_needs(bundle) else {
        return Ok(None);
    };
    let backend: Arc<dyn SandboxBackend> = match choice {
        SandboxChoice::Docker(options) => Arc::new(DockerBackend::prepare(options, &needs, events).await?),
        SandboxChoice::Prepared(backend) => {
            for message in backend.warnings() {
                events.emit(&Event::Warning { message });
            }
            backend.clone()
        }
    };
    Ok(Some(backend))
}

/// Check that a bundle can run in this build, with these model options, before anything is
/// created (a live model's key variable, a price for a capped run, a replay directory). A
/// campaign whose targets are all `rest` asks no model, so its model is not checked.
pub fn check_runnable(bundle: &Bundle, model: &ModelOptions) -> Result<(), RunError> {
    let campaign = &bundle.campaign.value;
    let asks_model = campaign.targets.iter().any(|t| !matches!(t.transport, Transport::Rest(_)));
    if !campaign.model_free && asks_model {
        let reason = crate::agent::unavailable_reason(campaign.engine)
            .or_else(|| crate::model::unavailable_reason_with(campaign, model));
        if let Some(reason) = reason {
            return Err(RunError::Unavailable(reason));
        }
    }
    Ok(())
}

fn manifest(bundle: &Bundle, run_id: &str) -> Manifest {
    let campaign = &bundle.campaign.value;
    Manifest {
        schema_version: RESULTS_SCHEMA_VERSION,
        metrics_version: METRICS_VERSION,
        run_id: run_id.to_owned(),
        started_at: crate::results::now_rfc3339(),
        campaign_path: bundle.campaign.path.display().to_string(),
        campaign: serde_json::to_value(campaign).unwrap_or(Value::Null),
        scenarios: bundle
            .scenarios
            .iter()
            .map(|s| ScenarioDump {
                path: s.path.display().to_string(),
                sha256: s.sha256.clone(),
                dump: serde_json::to_value(&s.value).unwrap_or(Value::Null),
            })
            .collect(),
        configuration: Configuration {
            campaign_sha256: bundle.campaign.sha256.clone(),
            scenario_sha256: bundle.scenarios.iter().map(|s| (s.value.id.clone(), s.sha256.clone())).collect(),
            recorded_campaign_sha256: Some(recorded_campaign_sha256(campaign)),
        },
        experiment: Experiment {
            id: campaign.experiment_id.clone(),
            block: campaign.block,
            order: campaign.order,
            model_id: campaign.model_id.clone(),
            generation: campaign.generation.clone(),
        },
        environment: environment(),
        max_consecutive_target_failures: MAX_CONSECUTIVE_TARGET_FAILURES,
        resumes: Vec::new(),
        engine_gate: None,
        budget_usd: None,
        partition: None,
        merge: None,
        rest_targets: rest_targets(campaign),
        signatures: Vec::new(),
    }
}

/// What the manifest records as enforced for a `rest` target's container (each trial's evidence
/// asserts the network it ran on: `target_execution.egress_enforced`).
pub const REST_CONTAINER_EGRESS: &str = "internal network, no route out: a fresh hardened container per trial, on a trial network of its own with no route out (or none at all)";

/// The campaign's `rest` targets as the manifest records them.
fn rest_targets(campaign: &elengtis_core::format::campaign::Campaign) -> Vec<RestTargetRecord> {
    campaign
        .targets
        .iter()
        .filter_map(|target| match &target.transport {
            Transport::Rest(rest) => Some(RestTargetRecord {
                target: target.id.clone(),
                url: rest.url.clone(),
                egress: rest.egress.clone(),
                model_asked: false,
                system_prompt_sent: false,
                image: rest.container.as_ref().map(|c| c.image.clone()),
                egress_enforced: rest.container.as_ref().map(|_| REST_CONTAINER_EGRESS.to_owned()),
            }),
            _ => None,
        })
        .collect()
}

/// The warning a run with `rest` targets prints once, before its trials: what their trials do
/// not do. None without one.
pub fn rest_warning(bundle: &Bundle) -> Option<String> {
    let campaign = &bundle.campaign.value;
    let records = rest_targets(campaign);
    let ids: Vec<String> = records.iter().map(|r| format!("`{}`", r.target)).collect();
    if ids.is_empty() {
        return None;
    }
    let contained: Vec<&str> = records.iter().filter(|r| r.image.is_some()).map(|r| r.target.as_str()).collect();
    let model = match campaign.model.as_deref().filter(|m| !m.is_empty()) {
        Some(model) => format!("the campaign's model `{model}`"),
        None => "the campaign's scripted model".to_owned(),
    };
    let (what, its) = if ids.len() == 1 {
        ("is a rest target (a black-box agent behind an HTTP endpoint): its", "the endpoint's")
    } else {
        ("are rest targets (black-box agents behind HTTP endpoints): their", "each endpoint's")
    };
    if contained.is_empty() {
        return Some(format!(
            "{} {what} trials launch nothing and do not ask {model} — the endpoint answers with its own — and the scenario's system prompt is not sent, only its user prompt; {its} `egress` (in the manifest) is the campaign's statement, not checked by the runner",
            ids.join(", ")
        ));
    }
    let contained: Vec<String> = contained.iter().map(|id| format!("`{id}`")).collect();
    Some(format!(
        "{} {what} trials do not ask {model} — the endpoint answers with its own — and the scenario's system prompt is not sent, only its user prompt; {} {} in a fresh hardened container per trial with no route out (enforced, and asserted in each trial's evidence), the others' `egress` is the campaign's statement, not checked by the runner",
        ids.join(", "),
        contained.join(", "),
        if contained.len() == 1 { "runs" } else { "run" }
    ))
}

/// SHA-256 of the canonical JSON of a campaign as validated: what the manifest pins as
/// `configuration.recorded_campaign_sha256`, and what `verify` recomputes from `campaign`.
pub fn recorded_campaign_sha256(campaign: &elengtis_core::format::campaign::Campaign) -> String {
    elengtis_core::format::sha256_hex(&elengtis_core::format::canonical_json(campaign))
}

/// Start a new run. `out` must not exist, unless `precreated` (an empty directory the
/// caller just made, as `elengtis example` does).
pub async fn start(bundle: &Bundle, out: &Path, precreated: bool, options: &RunOptions) -> Result<RunReport, RunError> {
    let keys = signing_keys()?;
    check_runnable(bundle, &options.model)?;
    let sandbox = prepare_sandbox(bundle, &options.sandbox, options.events.as_ref()).await?;
    if precreated {
        if out.join("manifest.json").exists() || out.join("runs.jsonl").exists() {
            return Err(RunError::Exists(out.to_owned()));
        }
    } else {
        create_results_dir(out)?;
    }
    let lock = DirLock::acquire(out)?;
    std::fs::create_dir_all(out.join("evidence"))
        .map_err(|e| RunError::Create { path: out.join("evidence"), source: e })?;
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut manifest = manifest(bundle, &run_id);
    manifest.partition = options.partition.map(|p| matrix::partition_record(&matrix::expand(bundle), p));
    manifest.engine_gate = sandbox.as_ref().map(|s| s.run_facts());
    manifest.budget_usd = options.model.budget_usd;
    crate::results::seal::sign_manifest(&mut manifest, &keys);
    store::write_json_atomic(&out.join("manifest.json"), &manifest)?;
    let log = AppendLog::create_new(&out.join("runs.jsonl"))?;
    let state = RunState {
        run_id,
        log,
        rows: Vec::new(),
        recovered_tail: None,
        sandbox,
        keys,
        partition: options.partition,
        _lock: lock,
    };
    execute(bundle, out, state, options).await
}

/// Create the results directory of a new run (and its parents). It must not exist yet.
///
/// # Errors
///
/// [`RunError::Exists`] when it is a directory already, [`RunError::NotADirectory`] when it is
/// something else, [`RunError::Unusable`] when it cannot be created (a read-only parent, a
/// parent that is a file), [`RunError::Create`] when the disk is full.
pub fn create_results_dir(out: &Path) -> Result<(), RunError> {
    match std::fs::metadata(out) {
        Ok(meta) if meta.is_dir() => return Err(RunError::Exists(out.to_owned())),
        Ok(_) => return Err(RunError::NotADirectory(out.to_owned())),
        Err(_) => {}
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| create_error(out, parent, e))?;
    }
    std::fs::create_dir(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists && out.is_dir() {
            RunError::Exists(out.to_owned())
        } else {
            create_error(out, out, e)
        }
    })
}

/// Why the results directory `out` could not be created at `path` (itself or a parent): a
/// full disk is an I/O failure; anything else (a read-only or missing parent, a parent that
/// is a file) makes `out` unusable, said with the ancestor at fault.
fn create_error(out: &Path, path: &Path, source: std::io::Error) -> RunError {
    if matches!(source.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) {
        return RunError::Create { path: path.to_owned(), source };
    }
    let detail = match out.ancestors().skip(1).find(|a| !a.as_os_str().is_empty() && a.exists() && !a.is_dir()) {
        Some(file) => format!("{} is a file, not a directory", file.display()),
        None if source.kind() == std::io::ErrorKind::PermissionDenied => denied::explain(path, &source),
        None => format!("failed to create {}: {source}", path.display()),
    };
    RunError::Unusable { path: out.to_owned(), detail }
}

/// What `run --resume-or-start` does with its results directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeOrStart {
    /// Nothing is there: a new run.
    Start,
    /// A try that died before it wrote its manifest left the directory (empty, or only an
    /// empty `evidence/` and temporary files): a new run in it.
    StartInPlace,
    /// A run of this very campaign (and scenarios) is there: resume it.
    Resume,
}

/// Decide what `run --resume-or-start --config CAMPAIGN --out OUT` does: the convention for a
/// retried job (a Kubernetes Indexed Job's `backoffLimitPerIndex`, a CI retry) whose earlier
/// try left `out` behind. A run of another campaign or scenarios, or a directory holding
/// anything else, is refused (exit 4): a retry never mixes two runs.
///
/// # Errors
///
/// [`RunError::NotADirectory`], [`RunError::NotThisRun`], or an error reading the manifest.
pub fn resume_or_start(bundle: &Bundle, out: &Path) -> Result<ResumeOrStart, RunError> {
    match std::fs::metadata(out) {
        Err(_) => return Ok(ResumeOrStart::Start),
        Ok(meta) if !meta.is_dir() => return Err(RunError::NotADirectory(out.to_owned())),
        Ok(_) => {}
    }
    let not_this = |detail: String| RunError::NotThisRun { dir: out.to_owned(), detail };
    if out.join("manifest.json").exists() {
        let manifest_path = out.join("manifest.json");
        let bytes = store::read_beneath(out, Path::new("manifest.json"), elengtis_core::records::bounds::MANIFEST)
            .map_err(|e| RunError::Manifest { path: manifest_path.clone(), detail: e.to_string() })?;
        let manifest: Value = elengtis_core::records::strict::parse(&bytes).map_err(|e| RunError::Manifest {
            path: manifest_path.clone(),
            detail: format!("it is not valid JSON: {e}; restore it from a copy, or start a new run in another --out"),
        })?;
        let recorded = &manifest["configuration"];
        let campaign = recorded_campaign_sha256(&bundle.campaign.value);
        if recorded["recorded_campaign_sha256"].as_str() != Some(campaign.as_str()) {
            return Err(not_this(format!(
                "it holds a run of another campaign (its manifest's configuration.recorded_campaign_sha256 is {}, {} gives {campaign}); choose another --out",
                recorded["recorded_campaign_sha256"],
                bundle.campaign.path.display()
            )));
        }
        for scenario in &bundle.scenarios {
            let was = recorded["scenario_sha256"][&scenario.value.id].as_str();
            if was != Some(scenario.sha256.as_str()) {
                return Err(not_this(format!(
                    "it holds a run with another scenario `{}` (configuration.scenario_sha256 records {}, {} is {}); choose another --out",
                    scenario.value.id,
                    was.unwrap_or("none"),
                    scenario.path.display(),
                    scenario.sha256
                )));
            }
        }
        return Ok(ResumeOrStart::Resume);
    }
    // No manifest: only what a start writes before it (an empty `evidence/`), and temporary
    // files of a killed writer. The lock proves no runner is in there now.
    let _lock = DirLock::acquire(out)?;
    store::remove_stale_temps(out);
    let entries = std::fs::read_dir(out).map_err(|e| not_this(format!("it cannot be listed: {e}")))?;
    for entry in entries.flatten() {
        let empty_evidence = entry.file_name() == "evidence"
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::read_dir(entry.path()).is_ok_and(|mut d| d.next().is_none());
        if !empty_evidence {
            return Err(not_this(format!(
                "it has no manifest.json but holds {}: it is not a run an earlier try of this command left; choose another --out",
                entry.file_name().to_string_lossy()
            )));
        }
    }
    Ok(ResumeOrStart::StartInPlace)
}

/// Continue a run.
pub async fn resume(out: &Path, options: &RunOptions) -> Result<RunReport, RunError> {
    let manifest_path = out.join("manifest.json");
    for (file, name) in [(&manifest_path, "manifest.json"), (&out.join("runs.jsonl"), "runs.jsonl")] {
        if !file.exists() {
            return Err(RunError::NotARun { dir: out.to_owned(), file: name });
        }
    }
    let keys = signing_keys()?;
    let lock = DirLock::acquire(out)?;
    // Nothing is written — no leftover reaped, no temporary file removed, no torn row cut —
    // before the directory verifies with the keys this resume will sign with.
    let manifest_error = |detail: String| RunError::Manifest { path: manifest_path.clone(), detail };
    let bytes = store::read_beneath(out, Path::new("manifest.json"), bounds::MANIFEST)
        .map_err(|e| manifest_error(e.to_string()))?;
    let raw: Value = strict::parse(&bytes).map_err(|e| {
        let what = match &e {
            strict::StrictError::Syntax { truncated: true, detail, .. } => {
                format!("it is truncated (malformed: not valid JSON: {detail}")
            }
            strict::StrictError::Syntax { detail, .. } => format!("it is malformed (not valid JSON: {detail}"),
            other => format!("it is malformed ({other}"),
        };
        manifest_error(format!("{what} at line {}); restore it from a copy, or start a new run", e.line()))
    })?;
    for (key, expected) in [("schema_version", RESULTS_SCHEMA_VERSION), ("metrics_version", METRICS_VERSION)] {
        if raw[key].as_u64() != Some(expected) {
            return Err(RunError::Version { key, found: raw[key].to_string(), expected });
        }
    }
    // Refuse what `elengtis verify` refuses with these keys: rows outside the matrix,
    // duplicated attempts, a broken chain, missing, changed or contradicting evidence, an edited
    // campaign, a seal that does not hold, links, a history no runner writes, and — with a key —
    // a manifest or a row its holder's runner did not sign.
    let checkers = keys.iter().map(|k| crate::results::keys::Checker::Key(Arc::clone(k))).collect();
    let options_verify = crate::results::verify::VerifyOptions { checkers, require_sealed: false };
    let verification = crate::results::verify::verify_with(out, &options_verify)?;
    if verification.verdict() != crate::results::verify::Verdict::Verified {
        return Err(RunError::Unverified {
            dir: out.to_owned(),
            count: verification.problems.len(),
            problems: verification.render_problems(),
        });
    }
    if let Some(links) = linked_files(out, &verification) {
        return Err(links);
    }
    if keys.is_empty() && !verification.signed_by.is_empty() {
        let keys: Vec<&str> = verification.signed_by.iter().map(String::as_str).collect();
        return Err(RunError::SignedWithoutKey { dir: out.to_owned(), keys: keys.join(", ") });
    }
    // stdio targets a killed predecessor's guards could not take down (the guard itself was
    // SIGKILLed): the lock proves that run is gone.
    for reaped in crate::toolhost::mcp::reap_stdio_leftovers(out) {
        tracing::warn!(record = %reaped.record, "reaped a stdio target left by the killed run: {}", reaped.detail);
    }
    // Temporary files of documents a killed predecessor was writing (never renamed into
    // place, so never recorded): the lock proves that writer is gone.
    let stale = store::remove_stale_temps(out) + store::remove_stale_temps(&out.join("evidence"));
    if stale > 0 {
        tracing::warn!("removed {stale} temporary file(s) left by the killed run");
    }
    let raw = verification.manifest.clone().unwrap_or(raw);
    let mut manifest: Manifest =
        serde_json::from_value(raw).map_err(|e| manifest_error(format!("not a manifest of this version: {e}")))?;
    if manifest.merge.is_some() {
        return Err(RunError::Merged(out.to_owned()));
    }
    let partition = manifest.partition.as_ref().map(PartitionRecord::partition);
    if let Some(asked) = options.partition
        && partition != Some(asked)
    {
        return Err(RunError::PartitionMismatch {
            dir: out.to_owned(),
            recorded: partition.map_or_else(|| "none (the whole matrix)".to_owned(), |p| p.to_string()),
            asked: asked.to_string(),
        });
    }
    let run_id = manifest.run_id.clone();
    let scenarios: Vec<(PathBuf, Value)> =
        manifest.scenarios.iter().map(|s| (PathBuf::from(&s.path), s.dump.clone())).collect();
    let campaign_sha = manifest.configuration.campaign_sha256.clone();
    let bundle = load::bundle_from_dumps(&manifest_path, &manifest.campaign, &scenarios, campaign_sha)?;
    // The spend cap carries over: the one given now, else the one the run started with; the
    // spend so far is what the rows were charged.
    let mut options = options.clone();
    options.model.budget_usd = options.model.budget_usd.or(manifest.spend_cap());
    let options = &options;
    check_runnable(&bundle, &options.model)?;
    let sandbox = prepare_sandbox(&bundle, &options.sandbox, options.events.as_ref()).await?;
    let (log, recovery) = AppendLog::open_existing(&out.join("runs.jsonl"))?;
    let rows_path = out.join("runs.jsonl");
    // The rows are those verified (nothing changed them since).
    if recovery.rows.len() != verification.rows
        || Some(log.last_line_sha256()) != verification.last_line_sha256.as_deref()
    {
        return Err(RunError::Manifest {
            path: rows_path,
            detail: "it changed while it was being checked; nothing was run: check it with `elengtis verify` and resume again".into(),
        });
    }
    let mut rows = Vec::with_capacity(recovery.rows.len());
    for (i, row) in recovery.rows.into_iter().enumerate() {
        if row["run_id"].as_str() != Some(run_id.as_str()) {
            return Err(RunError::Manifest {
                path: rows_path,
                detail: format!("row {} belongs to run {}, not {run_id}", i + 1, row["run_id"]),
            });
        }
        if row["schema_version"].as_u64() != Some(RESULTS_SCHEMA_VERSION) {
            return Err(RunError::Version {
                key: "schema_version",
                found: row["schema_version"].to_string(),
                expected: RESULTS_SCHEMA_VERSION,
            });
        }
        let row: Row = serde_json::from_value(row).map_err(|e| RunError::Manifest {
            path: rows_path.clone(),
            detail: format!("row {} is not a valid row: {e}", i + 1),
        })?;
        rows.push(row);
    }
    if let Some(limit) = options.model.budget_usd {
        let committed = committed_spend(&rows);
        if committed >= limit - 1e-12 {
            return Err(RunError::BudgetSpent(format!(
                "failed to resume: the spend cap of ${limit:.6} is spent (${committed:.6} committed); raise it with `elengtis run --resume --out {} --budget-usd USD`",
                out.display()
            )));
        }
    }
    manifest.resumes.push(ResumeRecord {
        resumed_at: crate::results::now_rfc3339(),
        environment: environment(),
        engine_gate: sandbox.as_ref().map(|s| s.run_facts()),
        budget_usd: options.model.budget_usd,
    });
    crate::results::seal::sign_manifest(&mut manifest, &keys);
    store::write_json_atomic(&manifest_path, &manifest)?;
    let recovered_tail = recovery.truncated_tail.map(|t| (t.offset, t.bytes));
    let leftovers = match &sandbox {
        Some(sandbox) => Some(sandbox.sweep(&run_id).await?),
        None => None,
    };
    let state = RunState { run_id, log, rows, recovered_tail, sandbox, keys, partition, _lock: lock };
    let mut report = execute(&bundle, out, state, options).await?;
    report.leftovers = leftovers;
    Ok(report)
}

/// What a run carries from start or resume into the trial loop.
struct RunState {
    run_id: String,
    log: AppendLog,
    rows: Vec<Row>,
    recovered_tail: Option<(u64, usize)>,
    sandbox: Option<Arc<dyn SandboxBackend>>,
    /// Keys that sign the seal (from the environment).
    keys: Vec<Arc<crate::results::keys::Key>>,
    /// The shard of the matrix this run is.
    partition: Option<Partition>,
    _lock: DirLock,
}

/// The error of a directory whose results files have other hard links (a resume would write
/// through them into every copy); `None` when none has.
fn linked_files(out: &Path, verification: &crate::results::verify::Verification) -> Option<RunError> {
    let mut files = verification.linked.clone();
    // The log of live stdio targets is appended to by the guards; `verify` notes it too.
    files.sort();
    files.dedup();
    let first = files.first()?;
    let links = std::fs::symlink_metadata(out.join(first)).map_or(2, |m| std::os::unix::fs::MetadataExt::nlink(&m));
    let shown: Vec<&str> = files.iter().take(3).map(String::as_str).collect();
    let more =
        if files.len() > shown.len() { format!(" and {} more", files.len() - shown.len()) } else { String::new() };
    Some(RunError::Linked {
        dir: out.to_owned(),
        files: format!("{}{more}", shown.join(", ")),
        detail: store::linked_message(links),
    })
}

/// The signing keys the environment gives, read before anything is created or run.
fn signing_keys() -> Result<Vec<Arc<crate::results::keys::Key>>, RunError> {
    Ok(crate::results::keys::Key::from_env()?.into_iter().map(Arc::new).collect())
}

/// Dollars the rows of a run were charged against its spend cap.
pub fn committed_spend(rows: &[Row]) -> f64 {
    rows.iter().map(|r| r.usage.budget_charge_usd).fold(0.0, |a, b| a + b)
}

async fn execute(bundle: &Bundle, out: &Path, state: RunState, options: &RunOptions) -> Result<RunReport, RunError> {
    let RunState { run_id, log, mut rows, recovered_tail, sandbox, keys, partition, _lock } = state;
    let events = options.events.as_ref();
    let trials = matrix::shard(bundle, partition);
    let http = HttpClient::new(HttpLimits::default()).map_err(|e| RunError::Http(e.to_string()))?;
    let model = ModelContext::new(&options.model, committed_spend(&rows)).map_err(RunError::Http)?;
    let sink_server = if launch::pairs(bundle).any(|(t, s)| launch::needs_sink(bundle, t, s)) {
        Some(crate::sink::SinkServer::start().await.map_err(RunError::Http)?)
    } else {
        None
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    for row in &rows {
        *attempts.entry(row.trial_id.clone()).or_default() += 1;
        if row.is_complete() {
            done.insert(row.trial_id.clone());
        }
    }
    let mut todo: Vec<&TrialSpec> = trials.iter().filter(|t| !done.contains(&t.trial_id)).collect();
    if options.stop_when.is_some() {
        // A run that may stop early starts its trials round by round (every target's first
        // trial, then every second, …), so what settles it — a comparison of the targets, in
        // `prove --sequential` — is seen as early as it can be. Trial ids do not change.
        todo.sort_by_key(|t| (t.index, t.target, t.scenario));
    }
    let jobs = options.jobs.max(1);
    if let Some(message) = rest_warning(bundle) {
        events.emit(&Event::Warning { message });
    }
    events.emit(&Event::RunStarted { run_id: run_id.clone(), total: trials.len(), todo: todo.len(), jobs });
    let mut consecutive: BTreeMap<usize, u32> = BTreeMap::new();
    // Targets whose breaker tripped, with why: their trials not yet started are skipped.
    let mut tripped: BTreeMap<usize, String> = BTreeMap::new();
    let mut end = RunEnd::Complete;
    let mut attempts_now = 0;
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupt = interrupted();
    tokio::pin!(interrupt);
    let mut queue = todo.into_iter();
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    let mut stopping = false;
    let backend = sandbox.as_deref();
    // Prepared ahead: up to `prepare_ahead` more trials open their targets while `jobs` run
    // their sessions (and others tear down); the session slots keep `--jobs` its meaning.
    let session_slots = (options.prepare_ahead > 0).then(|| Arc::new(tokio::sync::Semaphore::new(jobs)));
    let stop_waiting = tokio_util::sync::CancellationToken::new();
    // Group commit: finished attempts wait in `pending` while one batch is being recorded
    // (evidence files synced together, one directory sync, the rows in one append and one
    // sync) on a blocking thread; the trials go on meanwhile. A trial is reported (its
    // `TrialFinished` event) and counted only once its row and evidence are durable.
    let mut log = Some(log);
    // Each row is signed with the run's keys as it is appended.
    let row_keys = Arc::new(keys.clone());
    let mut pending: Vec<(Finished, Committable)> = Vec::new();
    let mut committing: Option<(Vec<Finished>, tokio::task::JoinHandle<Committed>)> = None;
    loop {
        while !stopping && in_flight.len() < jobs + options.prepare_ahead && pending.len() < MAX_PENDING {
            let Some(spec) = queue.by_ref().find(|t| !tripped.contains_key(&t.target)) else { break };
            let evidence_name = evidence_name(out, &spec.trial_id, attempts.get(&spec.trial_id).copied().unwrap_or(0));
            let attempt_id = uuid::Uuid::new_v4().to_string();
            let started = Event::TrialStarted {
                run_id: run_id.clone(),
                trial_id: spec.trial_id.clone(),
                attempt_id: attempt_id.clone(),
            };
            let slots = options.slots.clone();
            let waiting = cancel.clone();
            let attempt = Attempt {
                bundle,
                spec,
                run_id: &run_id,
                attempt_id,
                evidence_name: evidence_name.clone(),
                out_dir: out,
                http: &http,
                limits: options.limits,
                sandbox: backend,
                cancel: cancel.clone(),
                sink_server: sink_server.as_ref(),
                model: &model,
                session_slots: session_slots.clone(),
                stop_waiting: stop_waiting.clone(),
                events,
            };
            in_flight.push(async move {
                // A shared slot first (none while the run is being cancelled: the trial then
                // ends at once, interrupted); the trial starts when it has one.
                let _slot = match slots {
                    Some(slots) => tokio::select! {
                        biased;
                        () = waiting.cancelled() => None,
                        permit = slots.acquire_owned() => permit.ok(),
                    },
                    None => None,
                };
                events.emit(&started);
                (spec, evidence_name, trial::run(attempt).await)
            });
        }
        if committing.is_none()
            && !pending.is_empty()
            && let Some(writer) = log.take()
        {
            let take = pending.len().min(MAX_BATCH);
            let (finished, batch): (Vec<Finished>, Vec<Committable>) = pending.drain(..take).unzip();
            let keys = Arc::clone(&row_keys);
            committing = Some((finished, tokio::task::spawn_blocking(move || commit(writer, batch, &keys))));
        }
        if in_flight.is_empty() && committing.is_none() {
            break;
        }
        let next = tokio::select! {
            finished = futures_util::StreamExt::next(&mut in_flight), if !in_flight.is_empty() => Next::Finished(finished),
            joined = async {
                match committing.as_mut() {
                    Some((_, handle)) => handle.await,
                    None => std::future::pending().await,
                }
            }, if committing.is_some() => Next::Committed(joined),
            () = &mut interrupt, if !cancel.is_cancelled() => Next::Interrupted,
        };
        match next {
            Next::Interrupted => {
                // Let the trials in flight tear their targets down, then stop.
                cancel.cancel();
                end = RunEnd::Interrupted;
                stopping = true;
                events.emit(&Event::RunStopping { run_id: run_id.clone(), reason: "interrupted".into() });
            }
            Next::Committed(joined) => {
                let Some((finished, _)) = committing.take() else { continue };
                let (writer, committed, error) = match joined {
                    Ok(Committed { log, rows, error }) => (Some(log), rows, error),
                    Err(e) => {
                        (None, Vec::new(), Some(RunError::Record(format!("the thread that writes them failed: {e}"))))
                    }
                };
                log = writer;
                for (done, row) in finished.into_iter().zip(committed) {
                    attempts_now += 1;
                    *attempts.entry(done.trial_id).or_default() += 1;
                    events.emit(&Event::TrialFinished {
                        run_id: run_id.clone(),
                        trial_id: row.trial_id.clone(),
                        attempt_id: row.attempt_id.clone(),
                        outcome: Outcome::of(row.evidence_status, row.completed),
                        termination: row.termination,
                        evidence_status: row.evidence_status,
                        failure_class: row.failure_class,
                        proposed: row.proposed,
                        completed: row.completed,
                        duration_ms: row.duration_ms,
                    });
                    rows.push(row);
                    if let Some((target, reason)) = done.target_stop {
                        events.emit(&Event::TargetStopped { run_id: run_id.clone(), target, reason });
                    }
                    if let Some(reason) = done.stop {
                        events.emit(&Event::RunStopping { run_id: run_id.clone(), reason });
                    }
                }
                if let Some(e) = error {
                    // Results cannot be kept (a full disk, say): let the trials in flight tear
                    // their targets down, sweep what they could not remove, then report the
                    // write error. Attempts not yet committed are not recorded.
                    cancel.cancel();
                    while futures_util::StreamExt::next(&mut in_flight).await.is_some() {}
                    if let Some(sandbox) = backend {
                        let _ = sandbox.sweep(&run_id).await;
                    }
                    return Err(e);
                }
            }
            Next::Finished(finished) => {
                let Some((spec, evidence_name, result)) = finished else { continue };
                if result.interrupted {
                    continue;
                }
                let row = &result.row;
                // Whether the run stops is decided now, in the order trials finish, so no
                // further trial starts; the stop is reported after this trial's record.
                let mut stop = None;
                let mut target_stop = None;
                // The target's breaker: consecutive failures stop its trials only.
                let count = consecutive.entry(spec.target).or_default();
                *count = if row.is_complete() { 0 } else { *count + 1 };
                if *count >= MAX_CONSECUTIVE_TARGET_FAILURES && !tripped.contains_key(&spec.target) {
                    let target = &bundle.campaign.value.targets[spec.target].id;
                    let reason = format!(
                        "target {target} failed {MAX_CONSECUTIVE_TARGET_FAILURES} consecutive trials (last: {}); see {}",
                        spec.trial_id,
                        out.join(&evidence_name).display()
                    );
                    tripped.insert(spec.target, reason.clone());
                    target_stop = Some((target.clone(), reason));
                }
                if !stopping {
                    stop = if let Some(budget) = model.budget.as_ref().filter(|b| b.tripped().is_some()) {
                        Some(format!(
                            "the spend cap of ${:.6} is reached (${:.6} committed); every finished trial is kept. Raise the cap and continue with `elengtis run --resume --out {} --budget-usd USD`",
                            budget.limit(),
                            budget.committed(),
                            out.display()
                        ))
                    } else if let Some(reason) =
                        options.stop_when.as_ref().and_then(|ask| (ask.0)(row, &result.evidence))
                    {
                        Some(reason)
                    } else if row.termination == elengtis_core::agent::Termination::BudgetExhausted {
                        Some(format!(
                            "trial {} exhausted its step budget of {}; raise step_budget in a new run if the scenario needs more turns",
                            spec.trial_id,
                            elengtis_core::format::quote::count(bundle.campaign.value.step_budget, "turn")
                        ))
                    } else {
                        None
                    };
                    if let Some(reason) = &stop {
                        // Trials prepared ahead that have not begun their session are torn
                        // down unrecorded.
                        stop_waiting.cancel();
                        end = RunEnd::Stopped(reason.clone());
                        stopping = true;
                    }
                }
                let AttemptResult { row, evidence, .. } = result;
                pending.push((
                    Finished { trial_id: spec.trial_id.clone(), stop, target_stop },
                    Committable { path: out.join(&evidence_name), evidence, row },
                ));
            }
        }
    }
    drop(in_flight);
    // The log of live stdio targets, when every guard is done; one still cleaning up after a
    // cancelled trial keeps it for the next resume or `gc --out`.
    crate::toolhost::mcp::remove_stdio_records_if_done(out);
    let Some(log) = log else {
        return Err(RunError::Record("the run log was lost by a failed commit".into()));
    };
    if let Some(sandbox) = backend {
        // Belt and braces: anything of this run that a cancelled trial could not remove, and
        // what a killed earlier runner of it had asked the engine for just before it died (a
        // create the engine completed after the resume's first sweep).
        let _ = sandbox.sweep(&run_id).await;
    }
    if !tripped.is_empty() && end == RunEnd::Complete {
        let not_run = trials
            .iter()
            .filter(|t| tripped.contains_key(&t.target) && !rows.iter().any(|r| r.trial_id == t.trial_id))
            .count();
        let reasons: Vec<&str> = tripped.values().map(String::as_str).collect();
        let others =
            if tripped.len() < bundle.campaign.value.targets.len() { "; the other targets' trials ran" } else { "" };
        end = RunEnd::Stopped(format!(
            "{}; {not_run} trial{} of {} not started{others}. Fix the target and resume with `elengtis run --resume --out {}`",
            reasons.join("; "),
            if not_run == 1 { "" } else { "s" },
            if tripped.len() == 1 { "that target" } else { "those targets" },
            out.display()
        ));
    }
    let mut summary = summarize(bundle, &trials, &rows);
    if bundle.campaign.value.model.is_some() {
        summary.push_str(&summary::spend(&rows, model.budget.as_ref().map(|b| b.limit())));
    }
    summary.push_str(&summary::endpoints(&rows));
    store::write_atomic(&out.join("summary.txt"), summary.as_bytes())?;
    if end == RunEnd::Complete {
        let missing = trials
            .iter()
            .filter(|t| !rows.iter().any(|r| r.trial_id == t.trial_id && r.evidence_status == EvidenceStatus::Complete))
            .count();
        if missing > 0 {
            end = RunEnd::Incomplete(format!(
                "campaign has incomplete attempts ({missing} of {}); fix the target and resume with `elengtis run --resume --out {}`",
                elengtis_core::format::quote::count(trials.len(), "trial"),
                out.display()
            ));
        }
    }
    // The seal: the chain's last link, signed with the environment's keys.
    let status = match &end {
        RunEnd::Complete => SealStatus::Complete,
        RunEnd::Incomplete(_) => SealStatus::Incomplete,
        RunEnd::Stopped(_) => SealStatus::Stopped,
        RunEnd::Interrupted => SealStatus::Interrupted,
    };
    let sealed_log = crate::results::seal::LogState {
        run_id: &run_id,
        rows: rows.len() as u64,
        last_row_sha256: log.last_line_sha256(),
    };
    let keys: Vec<&crate::results::keys::Key> = keys.iter().map(AsRef::as_ref).collect();
    crate::results::seal::write(out, sealed_log, status, &keys)?;
    let trial_lines = summary::trial_lines(&trials, &rows);
    events.emit(&finished_event(&run_id, &end, &trials, &rows, attempts_now));
    Ok(RunReport {
        out: out.to_owned(),
        run_id,
        end,
        summary,
        trial_lines,
        attempts_now,
        recovered_tail,
        leftovers: None,
    })
}

/// Finished attempts a commit takes at most (a batch's evidence files are synced together).
const MAX_BATCH: usize = 256;

/// Finished attempts that may wait for a commit before no further trial is started.
const MAX_PENDING: usize = 1024;

/// What the trial loop keeps of a finished attempt while its records are committed.
struct Finished {
    trial_id: String,
    /// The run stops after this attempt (reported once it is recorded).
    stop: Option<String>,
    /// Its target's breaker tripped with this attempt: (target id, why), reported once it is
    /// recorded.
    target_stop: Option<(String, String)>,
}

/// A finished attempt's records, to commit.
struct Committable {
    /// The evidence file (absolute).
    path: PathBuf,
    evidence: elengtis_core::records::Evidence,
    row: Row,
}

/// What one commit recorded.
struct Committed {
    /// The log, handed back for the next commit.
    log: AppendLog,
    /// The rows now in the log and durable, from the first of the batch, in order.
    rows: Vec<Row>,
    /// Why the rest of the batch was not recorded.
    error: Option<RunError>,
}

/// What the trial loop waits for.
enum Next<T> {
    Finished(Option<T>),
    Committed(Result<Committed, tokio::task::JoinError>),
    Interrupted,
}

/// Record a batch of finished attempts (on a blocking thread): every evidence document
/// durable first (written to temporary files, synced together, renamed into place, their
/// directory synced once), then the rows that pin them, chained, in one append and one sync.
/// A failure records the attempts before it and none after it. With keys, each row is signed
/// once its chain link is set.
fn commit(mut log: AppendLog, batch: Vec<Committable>, keys: &[Arc<crate::results::keys::Key>]) -> Committed {
    let mut documents = Vec::with_capacity(batch.len());
    let mut rows = Vec::with_capacity(batch.len());
    let mut error = None;
    for Committable { path, evidence, mut row } in batch {
        match store::json_document(path, &evidence) {
            Ok(document) => {
                row.evidence_sha256 = Some(elengtis_core::format::sha256_hex(&document.bytes));
                documents.push(document);
                rows.push(row);
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let written = store::write_documents(&documents);
    rows.truncate(written.durable);
    let error = written.error.or(error);
    // Each row pins its evidence (above) and the row before it (the chain `verify` checks).
    let (appended, append_error) = log.append_batch(&mut rows, |row, prev| {
        row.prev_row_sha256 = Some(prev.to_owned());
        crate::results::seal::sign_row(row, keys);
    });
    rows.truncate(appended);
    Committed { log, rows, error: append_error.or(error).map(RunError::from) }
}

/// The [`Event::RunFinished`] of a run that ended as `end` with these rows.
fn finished_event(run_id: &str, end: &RunEnd, trials: &[TrialSpec], rows: &[Row], attempts: usize) -> Event {
    let mut outcomes = OutcomeCounts::default();
    for (_, row) in final_rows(trials, rows) {
        match row {
            Some(row) => outcomes.add(Outcome::of(row.evidence_status, row.completed)),
            None => outcomes.not_run += 1,
        }
    }
    let (end, message) = match end {
        RunEnd::Complete => (events::RunEnd::Complete, None),
        RunEnd::Incomplete(m) => (events::RunEnd::Incomplete, Some(m.clone())),
        RunEnd::Stopped(m) => (events::RunEnd::Stopped, Some(m.clone())),
        RunEnd::Interrupted => (events::RunEnd::Interrupted, Some("interrupted".to_owned())),
    };
    Event::RunFinished { run_id: run_id.to_owned(), end, message, total: trials.len(), attempts, outcomes }
}

/// The evidence file of a new attempt: `<trial>.json` for the first, `<trial>.retry-<n>.json`
/// after. A file left by an attempt whose row was lost (a crash between the evidence write
/// and the row append) is never overwritten.
fn evidence_name(out: &Path, trial_id: &str, previous_rows: usize) -> String {
    let name = |n: usize| {
        if n == 0 { format!("evidence/{trial_id}.json") } else { format!("evidence/{trial_id}.retry-{n}.json") }
    };
    let mut n = previous_rows;
    while out.join(name(n)).exists() {
        n += 1;
    }
    name(n)
}

async fn interrupted() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminate = async {
        match term.as_mut() {
            Some(s) => {
                s.recv().await;
                crate::exit_codes::note_sigterm();
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
