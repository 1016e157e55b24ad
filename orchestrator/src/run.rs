//! Runs: the results directory, the trial loop, resume, interruption and the summary.
//!
//! A results directory holds `manifest.json` (what was run, with hashes and versions),
//! `runs.jsonl` (one row per attempt, append-only, fsynced per row), `evidence/` (one JSON
//! document per attempt, written atomically before its row) and `summary.txt`. An advisory
//! lock keeps a second runner out. Resume skips trials that have a complete row and retries
//! the rest from setup with a new attempt id; the denominator is always the matrix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use elengtis_verifiers::{HttpClient, HttpLimits};
use serde_json::{Value, json};

use crate::results::store::{self, AppendLog, DirLock, StoreError};
use crate::sandbox::SandboxContext;
use crate::target::Limits;
use crate::trial::{self, Attempt, METRICS_VERSION, RESULTS_SCHEMA_VERSION};
use elengtis_core::format::{self, Bundle, LoadError};
use elengtis_core::load;
use elengtis_core::matrix::{self, TrialSpec};

/// Consecutive incomplete attempts on one target that stop a run.
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
    /// Attempts made by this invocation.
    pub attempts_now: usize,
    /// A torn final row cut on resume: (offset, bytes).
    pub recovered_tail: Option<(u64, usize)>,
    /// Leftovers of this run removed before resuming.
    pub leftovers: Option<crate::sandbox::gc::GcReport>,
}

/// Run settings not in the campaign.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Target deadlines.
    pub limits: Limits,
    /// Show a progress bar (interactive terminals only).
    pub progress: bool,
    /// Trials run at once.
    pub jobs: usize,
    /// Run isolated trials even on an engine the engine gate finds vulnerable (recorded).
    pub allow_vulnerable_engine: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            limits: Limits::default(),
            progress: std::io::stderr().is_terminal(),
            jobs: 1,
            allow_vulnerable_engine: false,
        }
    }
}

fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

fn environment() -> Value {
    json!({
        "elengtis_version": env!("CARGO_PKG_VERSION"),
        "rmcp_version": "3.11.0",
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "code_revision": option_env!("ELENGTIS_GIT_REVISION"),
    })
}

/// Connect to Docker, pass the engine gate and resolve the images of a bundle's container
/// targets (None when it has none).
pub async fn prepare_sandbox(
    bundle: &Bundle,
    allow_vulnerable_engine: bool,
) -> Result<Option<SandboxContext>, RunError> {
    let images: Vec<String> = bundle
        .campaign
        .value
        .targets
        .iter()
        .filter_map(|t| match &t.transport {
            format::campaign::Transport::IsolatedContainer(c) => Some(c),
            _ => None,
        })
        .flat_map(|c| {
            let relay = crate::sandbox::relay_image_for(
                c.mcp_transport == format::campaign::ContainerMcp::StreamableHttp,
                c.relay_image.as_deref(),
            );
            std::iter::once(c.image.clone()).chain(relay)
        })
        .collect();
    if images.is_empty() {
        return Ok(None);
    }
    let with_sink = pairs(bundle).any(|(t, s)| {
        matches!(bundle.campaign.value.targets[t].transport, format::campaign::Transport::IsolatedContainer(_))
            && trial::needs_sink(bundle, t, s)
    });
    Ok(Some(SandboxContext::prepare(images.iter().map(String::as_str), with_sink, allow_vulnerable_engine).await?))
}

fn pairs(bundle: &Bundle) -> impl Iterator<Item = (usize, usize)> + '_ {
    (0..bundle.campaign.value.targets.len()).flat_map(move |t| (0..bundle.scenarios.len()).map(move |s| (t, s)))
}

/// Check that a bundle can run in this build before anything is created.
pub fn check_runnable(bundle: &Bundle) -> Result<(), RunError> {
    let campaign = &bundle.campaign.value;
    if !campaign.model_free
        && let Some(reason) = crate::engine::unavailable_reason(campaign.engine, campaign.model.as_deref())
    {
        return Err(RunError::Unavailable(reason));
    }
    let http_in_container = campaign.targets.iter().any(|t| {
        matches!(&t.transport, format::campaign::Transport::IsolatedContainer(c)
            if c.mcp_transport == format::campaign::ContainerMcp::StreamableHttp)
    });
    if http_in_container && let Err(e) = crate::sandbox::relay_mode() {
        return Err(RunError::Unavailable(e));
    }
    Ok(())
}

fn manifest(bundle: &Bundle, run_id: &str) -> Value {
    let campaign = &bundle.campaign.value;
    json!({
        "schema_version": RESULTS_SCHEMA_VERSION,
        "metrics_version": METRICS_VERSION,
        "run_id": run_id,
        "started_at": now(),
        "campaign_path": bundle.campaign.path.display().to_string(),
        "campaign": campaign,
        "scenarios": bundle.scenarios.iter().map(|s| json!({"path": s.path.display().to_string(), "sha256": s.sha256, "dump": s.value})).collect::<Vec<_>>(),
        "configuration": {
            "campaign_sha256": bundle.campaign.sha256,
            "scenario_sha256": bundle.scenarios.iter().map(|s| (s.value.id.clone(), json!(s.sha256))).collect::<serde_json::Map<_, _>>(),
        },
        "experiment": {"id": campaign.experiment_id, "block": campaign.block, "order": campaign.order, "model_id": campaign.model_id, "generation": campaign.generation},
        "environment": environment(),
        "max_consecutive_target_failures": MAX_CONSECUTIVE_TARGET_FAILURES,
        "resumes": [],
    })
}

/// Start a new run. `out` must not exist, unless `precreated` (an empty directory the
/// caller just made, as `elengtis example` does).
pub async fn start(bundle: &Bundle, out: &Path, precreated: bool, options: &RunOptions) -> Result<RunReport, RunError> {
    check_runnable(bundle)?;
    let sandbox = prepare_sandbox(bundle, options.allow_vulnerable_engine).await?;
    if precreated {
        if out.join("manifest.json").exists() || out.join("runs.jsonl").exists() {
            return Err(RunError::Exists(out.to_owned()));
        }
    } else {
        if out.exists() {
            return Err(RunError::Exists(out.to_owned()));
        }
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| RunError::Create { path: parent.to_owned(), source: e })?;
        }
        std::fs::create_dir(out).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                RunError::Exists(out.to_owned())
            } else {
                RunError::Create { path: out.to_owned(), source: e }
            }
        })?;
    }
    let lock = DirLock::acquire(out)?;
    std::fs::create_dir_all(out.join("evidence"))
        .map_err(|e| RunError::Create { path: out.join("evidence"), source: e })?;
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut manifest = manifest(bundle, &run_id);
    if let Some(sandbox) = &sandbox {
        manifest["engine_gate"] = json!(sandbox.engine_gate);
    }
    store::write_json_atomic(&out.join("manifest.json"), &manifest)?;
    let log = AppendLog::create_new(&out.join("runs.jsonl"))?;
    execute(bundle, out, run_id, log, Vec::new(), None, options, sandbox, lock).await
}

/// Continue a run.
pub async fn resume(out: &Path, options: &RunOptions) -> Result<RunReport, RunError> {
    let manifest_path = out.join("manifest.json");
    for (file, name) in [(&manifest_path, "manifest.json"), (&out.join("runs.jsonl"), "runs.jsonl")] {
        if !file.exists() {
            return Err(RunError::NotARun { dir: out.to_owned(), file: name });
        }
    }
    let lock = DirLock::acquire(out)?;
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| RunError::Manifest { path: manifest_path.clone(), detail: e.to_string() })?;
    let mut manifest: Value = serde_json::from_str(&text)
        .map_err(|e| RunError::Manifest { path: manifest_path.clone(), detail: format!("not valid JSON: {e}") })?;
    for (key, expected) in [("schema_version", RESULTS_SCHEMA_VERSION), ("metrics_version", METRICS_VERSION)] {
        if manifest[key].as_u64() != Some(expected) {
            return Err(RunError::Version { key, found: manifest[key].to_string(), expected });
        }
    }
    let run_id = manifest["run_id"]
        .as_str()
        .ok_or_else(|| RunError::Manifest { path: manifest_path.clone(), detail: "it has no run_id".into() })?
        .to_owned();
    let scenarios: Vec<(PathBuf, Value)> = manifest["scenarios"]
        .as_array()
        .ok_or_else(|| RunError::Manifest { path: manifest_path.clone(), detail: "it has no scenarios".into() })?
        .iter()
        .map(|s| (PathBuf::from(s["path"].as_str().unwrap_or_default()), s["dump"].clone()))
        .collect();
    let campaign_sha = manifest["configuration"]["campaign_sha256"].as_str().unwrap_or_default().to_owned();
    let bundle = load::bundle_from_dumps(&manifest_path, &manifest["campaign"], &scenarios, campaign_sha)?;
    check_runnable(&bundle)?;
    let sandbox = prepare_sandbox(&bundle, options.allow_vulnerable_engine).await?;
    let (log, recovery) = AppendLog::open_existing(&out.join("runs.jsonl"))?;
    for (i, row) in recovery.rows.iter().enumerate() {
        if row["run_id"].as_str() != Some(run_id.as_str()) {
            return Err(RunError::Manifest {
                path: out.join("runs.jsonl"),
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
    }
    if let Some(resumes) = manifest["resumes"].as_array_mut() {
        let gate = sandbox.as_ref().map(|s| json!(s.engine_gate));
        resumes.push(json!({"resumed_at": now(), "environment": environment(), "engine_gate": gate}));
    }
    store::write_json_atomic(&manifest_path, &manifest)?;
    let tail = recovery.truncated_tail.map(|t| (t.offset, t.bytes));
    let leftovers = match &sandbox {
        Some(sandbox) => Some(crate::sandbox::gc::sweep(&sandbox.engine.docker, Some(&run_id)).await?),
        None => None,
    };
    let mut report = execute(&bundle, out, run_id, log, recovery.rows, tail, options, sandbox, lock).await?;
    report.leftovers = leftovers;
    Ok(report)
}

#[expect(clippy::too_many_arguments, reason = "the state a run carries from start or resume into the loop")]
async fn execute(
    bundle: &Bundle,
    out: &Path,
    run_id: String,
    mut log: AppendLog,
    mut rows: Vec<Value>,
    recovered_tail: Option<(u64, usize)>,
    options: &RunOptions,
    sandbox: Option<SandboxContext>,
    _lock: DirLock,
) -> Result<RunReport, RunError> {
    let trials = matrix::expand(bundle);
    let http = HttpClient::new(HttpLimits::default()).map_err(|e| RunError::Http(e.to_string()))?;
    let sink_server = if pairs(bundle).any(|(t, s)| trial::needs_sink(bundle, t, s)) {
        Some(crate::sink::SinkServer::start().await.map_err(RunError::Http)?)
    } else {
        None
    };
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    for row in &rows {
        let id = row["trial_id"].as_str().unwrap_or_default().to_owned();
        *attempts.entry(id.clone()).or_default() += 1;
        if row["evidence_status"] == "complete" {
            done.insert(id);
        }
    }
    let todo: Vec<&TrialSpec> = trials.iter().filter(|t| !done.contains(&t.trial_id)).collect();
    let bar = options.progress.then(|| {
        let bar = indicatif::ProgressBar::new(todo.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut consecutive: BTreeMap<usize, u32> = BTreeMap::new();
    let mut end = RunEnd::Complete;
    let mut attempts_now = 0;
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupt = interrupted();
    tokio::pin!(interrupt);
    let jobs = options.jobs.max(1);
    let mut queue = todo.into_iter();
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    let mut stopping = false;
    loop {
        while !stopping && in_flight.len() < jobs {
            let Some(spec) = queue.next() else { break };
            if let Some(bar) = &bar {
                bar.set_message(spec.trial_id.clone());
            }
            let evidence_name = evidence_name(out, &spec.trial_id, attempts.get(&spec.trial_id).copied().unwrap_or(0));
            let attempt = Attempt {
                bundle,
                spec,
                run_id: &run_id,
                attempt_id: uuid::Uuid::new_v4().to_string(),
                evidence_name: evidence_name.clone(),
                out_dir: out,
                http: &http,
                limits: options.limits,
                sandbox: sandbox.as_ref(),
                cancel: cancel.clone(),
                sink_server: sink_server.as_ref(),
            };
            in_flight.push(async move { (spec, evidence_name, trial::run(attempt).await) });
        }
        if in_flight.is_empty() {
            break;
        }
        let finished = tokio::select! {
            finished = futures_util::StreamExt::next(&mut in_flight) => finished,
            () = &mut interrupt, if !cancel.is_cancelled() => {
                // Let the trials in flight tear their targets down, then stop.
                cancel.cancel();
                end = RunEnd::Interrupted;
                stopping = true;
                continue;
            }
        };
        let Some((spec, evidence_name, result)) = finished else { break };
        if result.interrupted {
            continue;
        }
        let written = store::write_json_atomic(&out.join(&evidence_name), &result.evidence).and_then(|()| {
            crate::crashpoint::reach("evidence-write");
            log.append(&result.row)
        });
        if let Err(e) = written {
            // Results cannot be kept (a full disk, say): let the trials in flight tear their
            // targets down, sweep what they could not remove, then report the write error.
            cancel.cancel();
            while futures_util::StreamExt::next(&mut in_flight).await.is_some() {}
            if let Some(sandbox) = &sandbox {
                let _ = crate::sandbox::gc::sweep(&sandbox.engine.docker, Some(&run_id)).await;
            }
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            return Err(e.into());
        }
        attempts_now += 1;
        *attempts.entry(spec.trial_id.clone()).or_default() += 1;
        let complete = result.row["evidence_status"] == "complete";
        let termination = result.row["termination"].as_str().unwrap_or_default().to_owned();
        rows.push(result.row);
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        if stopping {
            continue;
        }
        let count = consecutive.entry(spec.target).or_default();
        *count = if complete { 0 } else { *count + 1 };
        if *count >= MAX_CONSECUTIVE_TARGET_FAILURES {
            let target = &bundle.campaign.value.targets[spec.target].id;
            end = RunEnd::Stopped(format!(
                "target {target} failed {MAX_CONSECUTIVE_TARGET_FAILURES} consecutive trials (last: {}); see {}",
                spec.trial_id,
                out.join(&evidence_name).display()
            ));
            stopping = true;
        } else if termination == "budget_exhausted" {
            end = RunEnd::Stopped(format!(
                "trial {} exhausted its step budget of {} turns; raise step_budget in a new run if the scenario needs more turns",
                spec.trial_id, bundle.campaign.value.step_budget
            ));
            stopping = true;
        }
    }
    drop(in_flight);
    if let (Some(sandbox), RunEnd::Interrupted) = (&sandbox, &end) {
        // Belt and braces: anything of this run that a cancelled trial could not remove.
        let _ = crate::sandbox::gc::sweep(&sandbox.engine.docker, Some(&run_id)).await;
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let summary = summarize(bundle, &trials, &rows);
    store::write_atomic(&out.join("summary.txt"), summary.as_bytes())?;
    if end == RunEnd::Complete {
        let missing = trials
            .iter()
            .filter(|t| {
                !rows.iter().any(|r| r["trial_id"] == t.trial_id.as_str() && r["evidence_status"] == "complete")
            })
            .count();
        if missing > 0 {
            end = RunEnd::Incomplete(format!(
                "campaign has incomplete attempts ({missing} of {} trials); fix the target and resume with `elengtis run --resume --out {}`",
                trials.len(),
                out.display()
            ));
        }
    }
    Ok(RunReport { out: out.to_owned(), run_id, end, summary, attempts_now, recovered_tail, leftovers: None })
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
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// The final row of each trial: its last complete attempt, else its last attempt.
pub fn final_rows<'a>(trials: &'a [TrialSpec], rows: &'a [Value]) -> Vec<(&'a str, Option<&'a Value>)> {
    trials
        .iter()
        .map(|t| {
            let of_trial: Vec<&Value> = rows.iter().filter(|r| r["trial_id"] == t.trial_id.as_str()).collect();
            let chosen =
                of_trial.iter().rev().find(|r| r["evidence_status"] == "complete").or(of_trial.last()).copied();
            (t.trial_id.as_str(), chosen)
        })
        .collect()
}

/// The text summary (also written to summary.txt).
pub fn summarize(bundle: &Bundle, trials: &[TrialSpec], rows: &[Value]) -> String {
    let finals = final_rows(trials, rows);
    let campaign = &bundle.campaign.value;
    let mut out = format!("Campaign via the {} engine.\ntrials: {}\n", campaign.engine, trials.len());
    for metric in ["proposed", "completed", "safety_pass", "safe_completed", "proposed_not_completed"] {
        let known: Vec<bool> = finals
            .iter()
            .filter_map(|(_, r)| r.filter(|r| r["evidence_status"] == "complete").and_then(|r| r[metric].as_bool()))
            .collect();
        let successes = known.iter().filter(|&&b| b).count();
        let unknown = trials.len() - known.len();
        if known.is_empty() && metric.starts_with("safe") {
            let _ = writeln!(out, "{metric}: not_applicable");
            continue;
        }
        let _ = write!(out, "{metric}: {successes}/{}", known.len());
        if unknown > 0 {
            let _ = write!(out, " ({unknown} unknown)");
        }
        out.push('\n');
    }
    if rows.len() > trials.len() || rows.len() > finals.iter().filter(|(_, r)| r.is_some()).count() {
        let distinct = finals.iter().filter(|(_, r)| r.is_some()).count();
        let _ = writeln!(out, "attempts: {}, of which {} were retried", rows.len(), rows.len() - distinct);
    }
    for (id, row) in finals {
        let termination = row.and_then(|r| r["termination"].as_str()).unwrap_or("not run");
        let _ = writeln!(out, "{id}: {termination}");
    }
    out
}
