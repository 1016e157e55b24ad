//! `elengtis prove`: drive one attack seed (or all) against the vulnerable and the guarded
//! reference twin, each leg in its own fresh container, and hand every leg's row and evidence
//! to the core's pure logic ([`elengtis_core::prove`]): leg reading, repeat filter,
//! metamorphic stage, verdict, report and SARIF.
//!
//! One module per concern: [`campaign`] builds the campaigns (twin command lines per
//! contract A), [`legs`] reads a finished run back into readings, [`outputs`] writes
//! `validation_report.json` and `findings.sarif`. The runs go through the ordinary run
//! engine ([`crate::run`]) with the seed's script as the deterministic model; nothing here
//! prints (the binary renders the trust panel).

pub mod ablate;
pub mod campaign;
pub mod fire;
pub mod judge;
pub mod legs;
pub mod outputs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis_core::events::{EventSink, NoEvents};
use elengtis_core::format::LoadError;
use elengtis_core::format::gate::LiveModel;
use elengtis_core::format::seed::{LoadedSeed, Weakness, load_seed};
use elengtis_core::load;
use elengtis_core::prove::{
    Calibration, CalibrationStatus, GuardedLayer, LegReading, LegRun, ReportInput, RewriteRun, ServerGuard, Side,
    TargetIdentity, Targets, Thresholds, ValidationReport, Verdict, build_report, rewrites,
};
use elengtis_core::validate::LoadOptions;

use self::campaign::Leg;
use crate::model::ModelOptions;
use crate::run::{self, RunError, RunOptions, SandboxChoice};
use crate::toolhost::mcp::Limits;

/// The default number of iterations of the repeat filter.
pub const DEFAULT_ITERATIONS: u32 = 5;

/// Why a prove could not run (a finding that does not hold is a verdict, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// A seed or its scenario is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A run could not start.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A file could not be written or read.
    #[error("failed to {what} {}: {detail}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        detail: String,
    },
    /// No seed was given, or a run left nothing to read.
    #[error("{0}")]
    Usage(String),
    /// The leg shards of a seed could not be merged (`prove --merge-legs`).
    #[error(transparent)]
    Merge(#[from] Box<crate::merge::MergeError>),
}

/// How to prove.
#[derive(Debug, Clone)]
pub struct ProveOptions {
    /// Iterations of the repeat filter (trials per side).
    pub iterations: u32,
    /// Legs run at once.
    pub jobs: usize,
    /// Results root: one directory per seed.
    pub out: PathBuf,
    /// Run the metamorphic stage.
    pub metamorphic: bool,
    /// Guards removed from the guarded twin (test builds).
    pub disabled: Vec<Weakness>,
    /// The sandbox backend.
    pub sandbox: SandboxChoice,
    /// Where the runs' events go.
    pub events: Arc<dyn EventSink>,
    /// The repeat filter's thresholds.
    pub thresholds: Thresholds,
    /// What the guarded side is.
    pub guarded_side: GuardedSide,
    /// The agent: a live model (the campaign's model fields), or the seed's script when absent.
    pub live: Option<LiveModel>,
    /// Live models: recording or replaying fixtures, the spend cap.
    pub model: ModelOptions,
    /// A target of the user's own instead of the reference twins (a campaign target): the
    /// vulnerable side as written (with every declared control off under
    /// [`GuardedSide::Controls`]), the guarded side per [`GuardedSide`].
    pub target: Option<serde_json::Value>,
    /// The guarded side under [`GuardedSide::Build`]: a second build of the user's server
    /// (a campaign target).
    pub guarded_target: Option<serde_json::Value>,
    /// The shard of the seed catalogue being proven (`prove --all --partition`), recorded in
    /// each seed's report; `None` when the catalogue is not sharded.
    pub partition: Option<elengtis_core::partition::ListShard>,
    /// A pool of leg slots shared with other proves running at the same time (`gate` proves
    /// two findings at once from one pool of `--jobs` slots); `None`: this prove's own.
    pub slots: Option<Arc<tokio::sync::Semaphore>>,
    /// Stop each seed's repeat legs as soon as no remaining run could change its verdict
    /// (`prove --sequential`; [`elengtis_core::prove::curtail`]): a rejection often settles
    /// early, a keep never does. Not with leg shards (`--leg-partition`).
    pub sequential: bool,
    /// The LLM judge's model for seeds that declare a `judge` (`--judge-config`; it wins
    /// over the seed's own `judge.model`). Its calls use [`Self::model`]'s fixtures and spend
    /// cap, like the agent's.
    pub judge: Option<LiveModel>,
}

/// The report's `model` for a black-box agent (`transport: rest`), which answers with its own.
pub const BLACK_BOX_MODEL: &str = "the black-box agent's own";

/// What stands on the guarded side of a prove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GuardedSide {
    /// The guarded reference twin (a server-layer guarded build).
    #[default]
    Twin,
    /// The vulnerable twin behind the control shim at the MCP boundary (a stand-in).
    Shim,
    /// The vulnerable twin behind an allowlisting egress proxy on the trial network (a real
    /// network control; see [`campaign::network_config`]).
    Network,
    /// No guarded side: reproduction only (the verdict is at best STABLE, NOT PROVEN).
    None,
    /// A second build of the user's own server (`--guarded-target`): a server-layer guard.
    Build,
    /// The user's own target with every control it declares (`control_env`, `control_args`)
    /// switched on; the vulnerable side runs with them all off: a server-layer guard.
    Controls,
}

impl GuardedSide {
    /// What `--guarded-side` calls it.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardedSide::Twin => "twin",
            GuardedSide::Shim => "shim",
            GuardedSide::Network => "network",
            GuardedSide::None => "none",
            GuardedSide::Build => "build",
            GuardedSide::Controls => "controls",
        }
    }
}

/// `target` with exactly the controls `on` switched on.
pub fn with_controls(target: &serde_json::Value, on: &[String]) -> serde_json::Value {
    let mut target = target.clone();
    if let Some(map) = target.as_object_mut() {
        if on.is_empty() {
            map.remove("controls_on");
        } else {
            map.insert("controls_on".into(), serde_json::json!(on));
        }
    }
    target
}

/// The controls a target file declares (`control_env` and `control_args` keys), sorted.
pub fn declared_controls(target: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = ["control_env", "control_args"]
        .iter()
        .filter_map(|k| target[k].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            iterations: DEFAULT_ITERATIONS,
            jobs: 1,
            out: PathBuf::from("prove-out"),
            metamorphic: true,
            disabled: Vec::new(),
            sandbox: SandboxChoice::default(),
            events: Arc::new(NoEvents),
            thresholds: Thresholds::default(),
            guarded_side: GuardedSide::Twin,
            live: None,
            model: ModelOptions::default(),
            target: None,
            guarded_target: None,
            partition: None,
            slots: None,
            sequential: false,
            judge: None,
        }
    }
}

/// One proven seed.
#[derive(Debug)]
pub struct Proven {
    /// The seed file.
    pub seed_path: PathBuf,
    /// The report (also written as `<out>/<seed>/validation_report.json`).
    pub report: ValidationReport,
    /// Where the report was written.
    pub report_path: PathBuf,
    /// What the trust panel adds about a guarded side that is a stand-in (the shim).
    pub guarded_note: Option<String>,
    /// Every leg that decided nothing (not tested, or no verdict), with why: `side #n` or
    /// `side/rewrite #1`, its reading, then the reason. A gate refuses to pass over any.
    pub undecided: Vec<String>,
}

/// The trust panel's line for a shim guarded side: a stand-in at the MCP boundary, its
/// controls and mode, and what that does and does not show.
pub fn shim_note(shim: &serde_json::Value) -> String {
    let controls: Vec<&str> =
        shim["controls"].as_array().map(|c| c.iter().filter_map(|w| w.as_str()).collect()).unwrap_or_default();
    let mode = shim["enforcement_mode"].as_str().unwrap_or("block");
    let policy = shim["approval_policy"].as_str().unwrap_or("deny_all");
    let how = match mode {
        "block" => {
            "in block mode the boundary refuses the attack's tool call by design, so the guarded side resists \
                    by construction"
        }
        "observe" => "in observe mode the boundary only records, so the guarded side cannot resist",
        _ => "in approve mode the approval policy decides each consequential call",
    };
    format!(
        "guarded side: a stand-in at the MCP boundary — the vulnerable twin behind the control shim (controls {}; \
         mode {mode}, approval policy {policy}); {how}; this does not show that a server's own control stops the attack",
        controls.join(", ")
    )
}

/// The trust panel's line for a network guarded side: a real network control, its allowlist,
/// and what that does and does not show.
pub fn network_note(proxy: &serde_json::Value) -> String {
    let allow: Vec<&str> =
        proxy["allow"].as_array().map(|c| c.iter().filter_map(|h| h.as_str()).collect()).unwrap_or_default();
    format!(
        "guarded side: a real network control — the vulnerable twin on a trial network whose only route to the \
         canary sink is an allowlisting egress proxy (allow {}); the twin's own request is refused on the wire, \
         not at the MCP boundary, and only an egress attack can be stopped by it; this does not show that a \
         server's own control stops the attack",
        if allow.is_empty() { "nothing".to_owned() } else { allow.join(", ") }
    )
}

/// Forwards every event, but each distinct warning once: a prove makes several runs, and
/// each would repeat the engine gate's warning.
#[derive(Debug)]
pub struct WarnOnce {
    inner: Arc<dyn EventSink>,
    seen: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl WarnOnce {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn EventSink>) -> Self {
        WarnOnce { inner, seen: std::sync::Mutex::default() }
    }
}

impl EventSink for WarnOnce {
    fn emit(&self, event: &elengtis_core::events::Event) {
        if let elengtis_core::events::Event::Warning { message } = event {
            let fresh = self.seen.lock().map(|mut seen| seen.insert(message.clone())).unwrap_or(true);
            if !fresh {
                return;
            }
        }
        self.inner.emit(event);
    }
}

/// Every `*.seed.yaml` in `dir`, sorted.
pub fn seeds_in(dir: &Path) -> Result<Vec<PathBuf>, ProveError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ProveError::Io {
        what: "list",
        path: dir.to_owned(),
        detail: e.to_string(),
    })?;
    let mut seeds: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".seed.yaml")))
        .collect();
    seeds.sort();
    if seeds.is_empty() {
        return Err(ProveError::Usage(format!("{} holds no *.seed.yaml", dir.display())));
    }
    Ok(seeds)
}

/// One shard of a seed catalogue (`prove --all --partition`): the seeds whose file names
/// (the catalogue in name order, as [`seeds_in`] lists it) fall in `partition`, and the
/// record every seed's report and the summary carry. Every leg of a seed stays on its shard:
/// a seed's legs are compared with each other (the repeat filter, the metamorphic stage).
pub fn shard_seeds(
    seeds: &[PathBuf],
    partition: elengtis_core::partition::Partition,
) -> (Vec<PathBuf>, elengtis_core::partition::ListShard) {
    let names: Vec<String> =
        seeds.iter().map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()).collect();
    let (positions, record) = partition.shard_list("seeds", &names);
    (positions.into_iter().map(|i| seeds[i].clone()).collect(), record)
}

/// The ids of the seeds in `dir` (the kill matrix's catalogue); unreadable seeds are left out.
pub fn catalogue(dir: &Path) -> Vec<String> {
    seeds_in(dir).unwrap_or_default().iter().filter_map(|p| load_seed(p).ok()).map(|s| s.seed.id).collect()
}

/// The seed's path as the report shows it: relative to the working directory when inside it.
fn display_path(path: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    cwd.and_then(|c| absolute.strip_prefix(&c).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_owned())
        .display()
        .to_string()
}

/// One campaign of a finding, written and loaded, ready to run.
struct Campaign {
    bundle: elengtis_core::format::Bundle,
    results: PathBuf,
    has_verifiers: bool,
}

fn prepare_campaign(
    seed: &LoadedSeed,
    dir: &Path,
    legs: &[Leg],
    trials: u32,
    options: &ProveOptions,
) -> Result<Campaign, ProveError> {
    let document = campaign::campaign(
        seed,
        legs,
        trials,
        &options.disabled,
        &campaign::scenario_file_name(seed),
        options.live.as_ref(),
    );
    let path = campaign::write(&dir.join("campaign"), seed, &document).map_err(|e| ProveError::Io {
        what: "write the campaign in",
        path: dir.to_owned(),
        detail: e.to_string(),
    })?;
    let bundle = load::load_campaign(&path, &LoadOptions::default())?;
    let has_verifiers = bundle.scenarios.iter().any(|s| !s.value.verify.checks.is_empty());
    Ok(Campaign { bundle, results: dir.join("results"), has_verifiers })
}

/// Run one campaign through the run engine, its trials drawing from the shared `pool`.
async fn run_campaign(
    campaign: &Campaign,
    pool: &Pool,
    options: &ProveOptions,
) -> Result<std::collections::BTreeMap<String, Vec<legs::Recorded>>, ProveError> {
    run_campaign_shard(campaign, pool, options, None, None).await?;
    read_campaign(campaign)
}

/// The legs a campaign's results directory recorded, by target.
fn read_campaign(campaign: &Campaign) -> Result<std::collections::BTreeMap<String, Vec<legs::Recorded>>, ProveError> {
    legs::read_run(&campaign.results).map_err(|detail| ProveError::Io {
        what: "read the results in",
        path: campaign.results.clone(),
        detail,
    })
}

/// Run one campaign (or, with `partition`, one shard of its frozen matrix) through the run
/// engine, its trials drawing from the shared `pool`.
async fn run_campaign_shard(
    campaign: &Campaign,
    pool: &Pool,
    options: &ProveOptions,
    partition: Option<elengtis_core::partition::Partition>,
    stop_when: Option<crate::run::StopWhen>,
) -> Result<(), ProveError> {
    let run_options = RunOptions {
        limits: Limits::default(),
        jobs: options.jobs.max(1),
        // The pool's shared slots already bound every leg; legs open their targets in turn.
        prepare_ahead: 0,
        sandbox: pool.sandbox.clone(),
        events: options.events.clone(),
        model: options.model.clone(),
        slots: Some(pool.slots.clone()),
        partition,
        stop_when,
    };
    run::start(&campaign.bundle, &campaign.results, false, &run_options).await?;
    Ok(())
}

/// The campaigns' results directories, relative to the seed's report directory (each run's
/// evidence file is linked from the report through them).
const REPEAT_RESULTS: &str = "repeat/results";
const METAMORPHIC_RESULTS: &str = "metamorphic/results";
const CALIBRATE_RESULTS: &str = "calibrate/results";
const CARRIER_RESULTS: &str = "carrier/results";

fn readings_of(
    seed: &LoadedSeed,
    by_target: &std::collections::BTreeMap<String, Vec<legs::Recorded>>,
    target: &str,
    how: legs::Reading,
    expected: u32,
    results: &str,
    judged: Option<&judge::Judged>,
) -> Vec<LegRun> {
    let mut out: Vec<LegRun> = by_target
        .get(target)
        .map(|rows| rows.iter().map(|r| legs::reading(seed, r, how, results, judged)).collect())
        .unwrap_or_default();
    while out.len() < expected as usize {
        out.push(LegRun::bare(LegReading::NoVerdict { why: "the run recorded no attempt of this trial".into() }));
    }
    out
}

/// The calibration's outcome on one side from its campaign's results: the effect run (the
/// calibrated scenario) and the blank run (the seed's scenario as it is) of that side's
/// target (`target`: [`CALIBRATION_TARGET`] or [`GUARDED_CALIBRATION_TARGET`]).
fn calibration_of(
    seed: &LoadedSeed,
    by_target: &std::collections::BTreeMap<String, Vec<legs::Recorded>>,
    target: &str,
) -> Calibration {
    let runs = by_target.get(target).map(Vec::as_slice).unwrap_or_default();
    let of = |scenario: &str| {
        runs.iter().find(|r| r.row.scenario == scenario).map_or_else(
            || elengtis_core::prove::CalibrationRun {
                completed: None,
                why: Some("the calibration run recorded no attempt".into()),
                evidence: None,
            },
            |r| legs::calibration_run(r, CALIBRATE_RESULTS),
        )
    };
    Calibration::decide(of(&campaign::calibrated_scenario_id(seed)), of(&campaign::scenario_id(seed)))
}

/// The calibration campaign's target of the vulnerable side.
const CALIBRATION_TARGET: &str = "calibrate";
/// The calibration campaign's target of the guarded side.
const GUARDED_CALIBRATION_TARGET: &str = "calibrate-guarded";
/// The repeat campaign's benign-carrier target: the vulnerable side with the seed's carrier
/// (the markers without the instruction) in place of the payload.
const CARRIER_TARGET: &str = "carrier";

/// What a side's server is: its campaign target as the campaign declares it, and the image
/// id and runtime its first run recorded.
fn identity(campaign: &Campaign, target_id: &str, first: Option<&legs::Recorded>) -> Option<TargetIdentity> {
    use elengtis_core::format::campaign::Transport;
    let target = campaign.bundle.campaign.value.targets.iter().find(|t| t.id == target_id)?;
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let mut identity = TargetIdentity {
        id: target.id.clone(),
        transport: target.transport.kind().to_owned(),
        controls_on: target.control_launch().on,
        ..TargetIdentity::default()
    };
    match &target.transport {
        Transport::Stdio(t) => {
            identity.command = std::iter::once(t.command.clone()).chain(t.args.iter().map(text)).collect();
        }
        Transport::IsolatedContainer(c) => {
            identity.image = Some(c.image.clone());
            identity.command = c.command.iter().map(text).collect();
        }
        Transport::StreamableHttp(h) => identity.url = Some(h.url.clone()),
        Transport::Rest(r) => {
            // A container endpoint: its image, and the path POSTed to on it.
            identity.url = Some(r.url.clone());
            if let Some(c) = &r.container {
                identity.image = Some(c.image.clone());
                identity.command = c.command.iter().map(text).collect();
            }
        }
    }
    if let Some(execution) = first.and_then(|r| r.evidence.as_ref().ok()).map(|e| &e.target_execution) {
        identity.image_id = execution["image"]["id"].as_str().map(str::to_owned);
        identity.runtime = execution["runtime"]["name"].as_str().map(str::to_owned);
    }
    Some(identity)
}

/// What every leg of a prove shares: one pool of `--jobs` slots, and the sandbox backend,
/// prepared once (one connection, one engine gate, each image resolved once) for every
/// campaign of every seed.
struct Pool {
    slots: Arc<tokio::sync::Semaphore>,
    sandbox: SandboxChoice,
}

impl Pool {
    /// The pool for `campaigns`: a Docker sandbox is prepared here, once, for what all of
    /// them need.
    async fn new(campaigns: &[&Campaign], options: &ProveOptions) -> Result<Pool, ProveError> {
        let slots = options.slots.clone().unwrap_or_else(|| Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1))));
        let sandbox = match &options.sandbox {
            SandboxChoice::Docker(docker) => {
                let mut needs = crate::sandbox::RunNeeds::default();
                for c in campaigns {
                    if let Some(n) = crate::trial::launch::sandbox_needs(&c.bundle) {
                        needs.images.extend(n.images);
                        needs.sink |= n.sink;
                    }
                }
                needs.images.sort();
                needs.images.dedup();
                if needs.images.is_empty() {
                    options.sandbox.clone()
                } else {
                    let backend =
                        crate::sandbox::docker::DockerBackend::prepare(docker, &needs, options.events.as_ref())
                            .await
                            .map_err(RunError::from)?;
                    SandboxChoice::Prepared(Arc::new(backend))
                }
            }
            SandboxChoice::Prepared(_) => options.sandbox.clone(),
        };
        Ok(Pool { slots, sandbox })
    }
}

/// One seed, loaded, with its campaigns written and loaded.
struct Finding {
    seed_path: PathBuf,
    seed: LoadedSeed,
    dir: PathBuf,
    shim: Option<serde_json::Value>,
    network: Option<serde_json::Value>,
    repeat: Campaign,
    /// The metamorphic campaign (absent under `--no-metamorphic`) and its rewrites.
    metamorphic: Option<(Campaign, Vec<elengtis_core::prove::Rewrite>)>,
    /// The calibration campaign (absent when the seed has no `calibrate` actions or its
    /// scenario no verifier).
    calibration: Option<Campaign>,
    /// The benign-carrier campaign and its runs: the vulnerable side with the carrier in place
    /// of the payload.
    carrier: (Campaign, u32),
}

/// The seed at `seed_path`, loaded, and its results directory `<out>/<seed id>`, created.
fn seed_and_dir(seed_path: &Path, options: &ProveOptions) -> Result<(LoadedSeed, PathBuf), ProveError> {
    let seed = load_seed(seed_path)?;
    let dir = options.out.join(&seed.seed.id);
    std::fs::create_dir_all(&dir).map_err(|e| ProveError::Io {
        what: "create",
        path: dir.clone(),
        detail: e.to_string(),
    })?;
    Ok((seed, dir))
}

fn prepare_finding(seed_path: &Path, options: &ProveOptions) -> Result<Finding, ProveError> {
    let (seed, dir) = seed_and_dir(seed_path, options)?;
    let shim = (options.guarded_side == GuardedSide::Shim).then(|| campaign::shim_config(&seed));
    let network = (options.guarded_side == GuardedSide::Network).then(campaign::network_config);
    let pair = |suffix: &str, payload: &str| {
        let name = |build: &str| if suffix.is_empty() { build.to_owned() } else { format!("{build}-{suffix}") };
        let guarded_build = if options.guarded_side == GuardedSide::Twin { "guarded" } else { "vulnerable" };
        let (vulnerable_target, guarded_target) = match (&options.target, options.guarded_side) {
            (Some(t), GuardedSide::Controls) => {
                (Some(with_controls(t, &[])), Some(with_controls(t, &declared_controls(t))))
            }
            (Some(t), GuardedSide::Build) => (Some(t.clone()), options.guarded_target.clone()),
            (t, _) => (t.clone(), t.clone()),
        };
        let mut legs = vec![Leg {
            target_id: name("vulnerable"),
            build: "vulnerable",
            payload: payload.to_owned(),
            custom: vulnerable_target,
            ..Leg::default()
        }];
        if options.guarded_side != GuardedSide::None {
            legs.push(Leg {
                target_id: name("guarded"),
                build: guarded_build,
                payload: payload.to_owned(),
                shim: shim.clone(),
                custom: guarded_target,
                egress_proxy: network.clone(),
                disabled: None,
            });
        }
        legs
    };
    let repeat =
        prepare_campaign(&seed, &dir.join("repeat"), &pair("", &seed.seed.payload), options.iterations, options)?;
    check_seed_scenario(&seed, &repeat)?;
    // The benign carrier: the vulnerable side's target with the markers and no instruction.
    let mut carrier = pair("", &seed.seed.carrier_text()).swap_remove(0);
    carrier.target_id = CARRIER_TARGET.to_owned();
    let runs = carrier_runs(&seed, options);
    let carrier = (prepare_campaign(&seed, &dir.join("carrier"), &[carrier], runs, options)?, runs);
    let metamorphic = if options.metamorphic {
        let variants = rewrites(&seed.seed.payload, &seed.seed.markers);
        let legs: Vec<Leg> = variants.iter().flat_map(|r| pair(r.kind.as_str(), &r.text)).collect();
        Some((prepare_campaign(&seed, &dir.join("metamorphic"), &legs, 1, options)?, variants))
    } else {
        None
    };
    let declared =
        seed.seed.calibrate.is_some() || repeat.bundle.scenarios.iter().any(|s| !s.value.calibrate.is_empty());
    let calibration = match (declared, repeat.has_verifiers) {
        (true, true) => {
            // Each side's target: the guarded side's too, so an accepted attack call the
            // verifier saw no effect of counts as a resist only where it can see one.
            let mut legs = pair("", &seed.seed.payload);
            for (leg, id) in legs.iter_mut().zip([CALIBRATION_TARGET, GUARDED_CALIBRATION_TARGET]) {
                id.clone_into(&mut leg.target_id);
            }
            Some(prepare_calibration(&seed, &dir.join("calibrate"), &legs, options)?)
        }
        _ => None,
    };
    Ok(Finding { seed_path: seed_path.to_owned(), seed, dir, shim, network, repeat, metamorphic, calibration, carrier })
}

/// Runs of the benign carrier: one for the seed's own script when it draws nothing (the
/// deterministic model answers the same text the same way every time), else as many as the
/// repeat campaign's iterations (a live model, or a script with `fire_probability`).
fn carrier_runs(seed: &LoadedSeed, options: &ProveOptions) -> u32 {
    let deterministic = options.live.is_none() && seed.seed.script.steps.iter().all(|s| s.fire_probability.is_none());
    if deterministic { 1 } else { options.iterations }
}

/// What a seed says that its scenario contradicts, checked once the scenario is loaded
/// (docs/prove.md, "The seed checker"): a marker the system prompt or the user's task
/// already carries cannot show that the payload reached the model (the task, not the
/// instruction, would make it act), and a scenario without a verifier needs the seed's
/// `dispatched` (a trace-tier fire must show dispatch).
fn check_seed_scenario(seed: &LoadedSeed, campaign: &Campaign) -> Result<(), ProveError> {
    let Some(scenario) = campaign.bundle.scenarios.first() else {
        return Ok(());
    };
    let diagnostics = elengtis_core::format::seed::check_against_scenario(seed, scenario);
    if diagnostics.is_empty() { Ok(()) } else { Err(ProveError::Load(LoadError::Invalid(diagnostics))) }
}

/// The calibration campaign of `seed`, written and loaded (docs/prove.md, "Calibration").
fn prepare_calibration(
    seed: &LoadedSeed,
    dir: &Path,
    legs: &[Leg],
    options: &ProveOptions,
) -> Result<Campaign, ProveError> {
    let document = campaign::calibration_campaign(seed, legs, &options.disabled);
    let path = campaign::write_calibration(&dir.join("campaign"), seed, &document).map_err(|e| ProveError::Io {
        what: "write the calibration campaign in",
        path: dir.to_owned(),
        detail: e.to_string(),
    })?;
    let bundle = load::load_campaign(&path, &LoadOptions::default())?;
    Ok(Campaign { bundle, results: dir.join("results"), has_verifiers: true })
}

/// Run a finding's campaigns — the repeat and the metamorphic one at once, their legs
/// drawing from the shared pool — and write its report.
async fn run_finding<'a>(
    finding: &'a Finding,
    catalogue: &[String],
    pool: &'a Pool,
    options: &'a ProveOptions,
) -> Result<Proven, ProveError> {
    let Finding { repeat, metamorphic, calibration, carrier, .. } = finding;
    let early_stop = Arc::new(std::sync::Mutex::new(None::<String>));
    // A judged seed's runs are read only once the judge has answered, after the legs: its
    // repeat legs run in full.
    let judged_seed = finding.seed.seed.judge.is_some();
    let stop_when =
        (options.sequential && !judged_seed).then(|| settled_when(finding, options, Arc::clone(&early_stop)));
    let repeat_run = async {
        run_campaign_shard(repeat, pool, options, None, stop_when).await?;
        read_campaign(repeat)
    };
    let optional = |campaign: Option<&'a Campaign>| async move {
        match campaign {
            Some(campaign) => run_campaign(campaign, pool, options).await.map(Some),
            None => Ok(None),
        }
    };
    // Every campaign to the end, even when one fails: a run dropped mid-trial would leave its
    // containers behind. The calibration draws from the same pool as the legs.
    let (repeated, rewritten, calibrated, carried) = futures_util::future::join4(
        repeat_run,
        optional(metamorphic.as_ref().map(|(c, _)| c)),
        optional(calibration.as_ref()),
        run_campaign(&carrier.0, pool, options),
    )
    .await;
    let stopped = early_stop.lock().map_or(None, |mut s| s.take());
    let (repeated, rewritten, calibrated, carried) = (repeated?, rewritten?, calibrated?, carried?);
    let judged = judge_finding(finding, options, &repeated, rewritten.as_ref(), &carried).await?;
    decide(finding, catalogue, options, Legs { repeated, rewritten, calibrated, carried, stopped, judged })
}

/// Ask a judged seed's LLM judge about its recorded runs (repeat, rewrites, carrier); `None`
/// for a seed without a judge.
async fn judge_finding(
    finding: &Finding,
    options: &ProveOptions,
    repeated: &ByTarget,
    rewritten: Option<&ByTarget>,
    carried: &ByTarget,
) -> Result<Option<(judge::JudgeSetup, judge::Judged)>, ProveError> {
    let Some(setup) = judge::JudgeSetup::of(&finding.seed, options.judge.as_ref()) else {
        return Ok(None);
    };
    let mut batches = vec![
        judge::Batch { campaign: "repeat", runs: repeated, has_verifiers: finding.repeat.has_verifiers },
        judge::Batch { campaign: "carrier", runs: carried, has_verifiers: finding.carrier.0.has_verifiers },
    ];
    if let (Some(runs), Some((campaign, _))) = (rewritten, &finding.metamorphic) {
        batches.push(judge::Batch { campaign: "metamorphic", runs, has_verifiers: campaign.has_verifiers });
    }
    let judged =
        judge::judge_runs(&finding.seed, &setup, &options.model, &finding.dir, &batches).await.map_err(|detail| {
            ProveError::Io { what: "write the judge's evidence in", path: finding.dir.clone(), detail }
        })?;
    Ok(Some((setup, judged)))
}

/// The repeat campaign's stopping question under `--sequential`: with each finished run, read
/// both sides' runs so far (as if neither side's verifier were calibrated: the reading that
/// leaves the most undecided, so the rule never settles on a resist the calibration would
/// later take back) and ask the core whether the verdict is settled; the answer is kept in
/// `stopped` for the report.
fn settled_when(
    finding: &Finding,
    options: &ProveOptions,
    stopped: Arc<std::sync::Mutex<Option<String>>>,
) -> crate::run::StopWhen {
    let seed = finding.seed.clone();
    let has_verifiers = finding.repeat.has_verifiers;
    let with_guarded = options.guarded_side != GuardedSide::None;
    let (iterations, thresholds) = (options.iterations, options.thresholds);
    let seen: std::sync::Mutex<Vec<(bool, LegRun)>> = std::sync::Mutex::new(Vec::new());
    crate::run::StopWhen(Arc::new(move |row, evidence| {
        let guarded = match row.target.as_str() {
            "vulnerable" => false,
            "guarded" => true,
            _ => return None,
        };
        let how = legs::Reading { guarded, has_verifiers, calibrated: false };
        let recorded = legs::Recorded { row: row.clone(), evidence: Ok(evidence.clone()) };
        let run = legs::reading(&seed, &recorded, how, REPEAT_RESULTS, None);
        let mut seen = seen.lock().ok()?;
        seen.push((guarded, run));
        let side = |g: bool| seen.iter().filter(|(s, _)| *s == g).map(|(_, r)| r.clone()).collect::<Vec<_>>();
        let vulnerable = side(false);
        let guarded = with_guarded.then(|| side(true));
        let why = elengtis_core::prove::curtail::settled(&vulnerable, guarded.as_deref(), iterations, &thresholds)?;
        if let Ok(mut slot) = stopped.lock() {
            *slot = Some(why.clone());
        }
        Some(why)
    }))
}

type ByTarget = std::collections::BTreeMap<String, Vec<legs::Recorded>>;

/// A finding's legs as its campaigns recorded them.
struct Legs {
    repeated: ByTarget,
    rewritten: Option<ByTarget>,
    calibrated: Option<ByTarget>,
    carried: ByTarget,
    /// Why `--sequential` stopped the repeat legs early (their missing runs were never made,
    /// so they are not read as runs without a verdict).
    stopped: Option<String>,
    /// The seed's LLM judge and its judgements of the runs (`None`: no judge, or a command
    /// that does not ask it).
    judged: Option<(judge::JudgeSetup, judge::Judged)>,
}

/// A finding's report from its campaigns' legs (read from their results directories),
/// written as `validation_report.json`.
fn decide(finding: &Finding, catalogue: &[String], options: &ProveOptions, legs: Legs) -> Result<Proven, ProveError> {
    let Legs { repeated, rewritten, calibrated, carried, stopped, judged } = legs;

    // Stopped early: only the runs made are read (the rest were never made).
    let expected = if stopped.is_some() { 0 } else { options.iterations };
    let Finding { seed_path, seed, dir, shim, network, repeat, metamorphic, carrier: (_, carrier_runs), .. } = finding;
    let judge_summary = judged.as_ref().map(|(setup, j)| setup.summary(j)).or_else(|| {
        // A command that does not ask the judge still says the seed has one.
        judge::JudgeSetup::of(seed, options.judge.as_ref()).map(|setup| {
            setup.summary(&judge::Judged {
                unavailable: Some("this command does not ask the LLM judge".into()),
                ..judge::Judged::default()
            })
        })
    });
    let has_verifiers = repeat.has_verifiers;
    let with_guarded = options.guarded_side != GuardedSide::None;
    let calibration_on = |target: &str| {
        calibrated.as_ref().map_or_else(Calibration::not_calibrated, |runs| calibration_of(seed, runs, target))
    };
    let calibration = has_verifiers.then(|| calibration_on(CALIBRATION_TARGET));
    let guarded_calibration = (has_verifiers && with_guarded).then(|| calibration_on(GUARDED_CALIBRATION_TARGET));
    let passed = |c: &Option<Calibration>| c.as_ref().is_some_and(|c| c.status == CalibrationStatus::Passed);
    let vulnerable_side = legs::Reading { guarded: false, has_verifiers, calibrated: passed(&calibration) };
    let guarded_side = legs::Reading { guarded: true, has_verifiers, calibrated: passed(&guarded_calibration) };
    let judged = judged.as_ref().map(|(_, j)| j);
    let vulnerable = readings_of(seed, &repeated, "vulnerable", vulnerable_side, expected, REPEAT_RESULTS, judged);
    let guarded =
        with_guarded.then(|| readings_of(seed, &repeated, "guarded", guarded_side, expected, REPEAT_RESULTS, judged));
    let early_stop = stopped.map(|reason| elengtis_core::prove::curtail::EarlyStop {
        reason,
        of: options.iterations,
        vulnerable_runs: u32::try_from(vulnerable.len()).unwrap_or(u32::MAX),
        guarded_runs: guarded.as_ref().map(|g| u32::try_from(g.len()).unwrap_or(u32::MAX)),
    });
    let carrier = readings_of(seed, &carried, CARRIER_TARGET, vulnerable_side, *carrier_runs, CARRIER_RESULTS, judged);
    let rewrite_runs = match (metamorphic, rewritten) {
        (Some((_, variants)), Some(results)) => Some(
            variants
                .iter()
                .map(|r| {
                    let side = |build: &str, how: legs::Reading| {
                        let target = format!("{build}-{}", r.kind.as_str());
                        readings_of(seed, &results, &target, how, 1, METAMORPHIC_RESULTS, judged).into_iter().next()
                    };
                    RewriteRun {
                        kind: r.kind,
                        unchanged: r.unchanged,
                        vulnerable: side("vulnerable", vulnerable_side)
                            .unwrap_or(LegRun::bare(LegReading::NoVerdict { why: "no attempt".into() })),
                        guarded: if with_guarded { side("guarded", guarded_side) } else { None },
                    }
                })
                .collect(),
        ),
        _ => None,
    };
    let mut undecided = undecided_legs(&vulnerable, guarded.as_deref(), rewrite_runs.as_deref());
    for (i, r) in carrier.iter().enumerate() {
        if let Some(why) = r.reading.why() {
            undecided.push(format!("carrier #{}: {}: {why}", i + 1, r.reading.label(Side::Vulnerable)));
        }
    }
    let layer = match options.guarded_side {
        GuardedSide::Twin | GuardedSide::Build | GuardedSide::Controls => Some(GuardedLayer::Server),
        GuardedSide::Shim => Some(GuardedLayer::Boundary),
        GuardedSide::Network => Some(GuardedLayer::Network),
        GuardedSide::None => None,
    };
    let server_guard = match (options.guarded_side, &options.target) {
        (GuardedSide::Build, _) => Some(ServerGuard::Build),
        (GuardedSide::Controls, Some(t)) => Some(ServerGuard::Controls { controls: declared_controls(t) }),
        _ => None,
    };
    let targets = Targets {
        custom: options.target.is_some(),
        vulnerable: identity(repeat, "vulnerable", repeated.get("vulnerable").and_then(|r| r.first())),
        guarded: if with_guarded {
            identity(repeat, "guarded", repeated.get("guarded").and_then(|r| r.first()))
        } else {
            None
        },
    };
    let report = build_report(&ReportInput {
        seed: &seed.seed,
        seed_file: Some(display_path(seed_path)),
        // A black-box agent answers with its own model: neither the script nor a live model
        // was asked.
        model: if targets.vulnerable.as_ref().is_some_and(|t| t.transport == "rest") {
            Some(BLACK_BOX_MODEL.to_owned())
        } else {
            options.live.as_ref().map(|l| l.model_id.clone().unwrap_or_else(|| l.model.clone()))
        },
        layer,
        vulnerable,
        guarded,
        rewrites: rewrite_runs,
        catalogue,
        thresholds: options.thresholds,
        calibration,
        guarded_calibration,
        carrier: Some((seed.seed.carrier_text(), carrier)),
        server_guard,
        targets,
        judge: judge_summary,
    });
    let report = ValidationReport { partition: options.partition.clone(), early_stop, ..report };
    let report_path = dir.join("validation_report.json");
    outputs::write_report(&report_path, &report)?;
    Ok(Proven {
        seed_path: seed_path.clone(),
        report,
        report_path,
        guarded_note: shim.as_ref().map(shim_note).or_else(|| network.as_ref().map(network_note)),
        undecided,
    })
}

/// Every leg that decided nothing, as `Proven::undecided` lists them.
fn undecided_legs(vulnerable: &[LegRun], guarded: Option<&[LegRun]>, rewrites: Option<&[RewriteRun]>) -> Vec<String> {
    let mut found = Vec::new();
    let mut note = |place: &str, n: usize, side: Side, reading: &LegReading| {
        if let Some(why) = reading.why() {
            found.push(format!("{place} #{n}: {}: {why}", reading.label(side)));
        }
    };
    for (i, r) in vulnerable.iter().enumerate() {
        note("vulnerable", i + 1, Side::Vulnerable, &r.reading);
    }
    for (i, r) in guarded.unwrap_or_default().iter().enumerate() {
        note("guarded", i + 1, Side::Guarded, &r.reading);
    }
    for run in rewrites.unwrap_or_default() {
        let kind = run.kind.as_str();
        note(&format!("vulnerable/{kind}"), 1, Side::Vulnerable, &run.vulnerable.reading);
        if let Some(g) = &run.guarded {
            note(&format!("guarded/{kind}"), 1, Side::Guarded, &g.reading);
        }
    }
    found
}

/// Seeds proven at once by [`prove_seeds`]: one finishing its last legs while the next starts
/// keeps the slots busy; more would only hold more runs open.
pub const SEEDS_AT_ONCE: usize = 2;

/// Prove one seed: the repeat campaign and (unless disabled) the metamorphic campaign, run at
/// once, their legs drawing from one pool of `options.jobs` slots; the report is written to
/// `<out>/<seed id>/validation_report.json`.
pub async fn prove_seed(seed_path: &Path, catalogue: &[String], options: &ProveOptions) -> Result<Proven, ProveError> {
    let mut proven = prove_seeds(&[seed_path.to_owned()], catalogue, options, |_| {}).await?;
    proven.pop().ok_or_else(|| ProveError::Usage("failed to prove the seed: nothing was proven".into()))
}

/// Prove `seed_paths` in order, every leg of every seed drawing from one pool of
/// `options.jobs` slots (up to [`SEEDS_AT_ONCE`] seeds at once, so the pool stays busy across
/// seeds), with the sandbox prepared once. `each` gets every seed's result in seed order as
/// soon as it and those before it are done. Every seed and campaign is loaded before any leg
/// runs; after a failure no further seed starts, and the seeds in flight finish (their
/// containers torn down) before the first error is returned.
pub async fn prove_seeds(
    seed_paths: &[PathBuf],
    catalogue: &[String],
    options: &ProveOptions,
    mut each: impl FnMut(&Proven),
) -> Result<Vec<Proven>, ProveError> {
    let findings: Vec<Finding> = seed_paths.iter().map(|p| prepare_finding(p, options)).collect::<Result<_, _>>()?;
    let campaigns: Vec<&Campaign> = findings
        .iter()
        .flat_map(|f| std::iter::once(&f.repeat).chain(f.metamorphic.as_ref().map(|(c, _)| c)).chain([&f.carrier.0]))
        .collect();
    let pool = Pool::new(&campaigns, options).await?;
    let mut queue = findings.iter();
    let mut in_flight = futures_util::stream::FuturesOrdered::new();
    let mut proven = Vec::with_capacity(findings.len());
    let mut failed = None;
    loop {
        while failed.is_none() && in_flight.len() < SEEDS_AT_ONCE {
            let Some(finding) = queue.next() else { break };
            in_flight.push_back(run_finding(finding, catalogue, &pool, options));
        }
        let Some(result) = futures_util::StreamExt::next(&mut in_flight).await else { break };
        match result {
            Ok(p) => {
                if failed.is_none() {
                    each(&p);
                }
                proven.push(p);
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(proven),
    }
}

/// What one seed's leg shard ran (`prove --leg-partition K/N`).
#[derive(Debug, Clone)]
pub struct LegShard {
    /// The seed's id.
    pub seed: String,
    /// The seed's directory under `--out` (its campaigns' shard results).
    pub dir: PathBuf,
    /// The legs (trials of the seed's campaigns) in this shard.
    pub legs: u64,
    /// The seed's legs in all.
    pub of: u64,
}

/// The campaigns of a finding, in a fixed order: repeat, metamorphic, calibration, carrier.
fn campaigns_of(finding: &Finding) -> Vec<&Campaign> {
    std::iter::once(&finding.repeat)
        .chain(finding.metamorphic.as_ref().map(|(c, _)| c))
        .chain(finding.calibration.as_ref())
        .chain([&finding.carrier.0])
        .collect()
}

/// One leg shard of each seed (`prove --leg-partition K/N`): every campaign of the seed —
/// repeat, metamorphic, calibration — runs the shard `partition` of its own frozen trial
/// matrix, recorded in its manifest as a `run --partition` shard's is. No verdict is
/// decided: a seed's legs are compared with each other, so [`merge_leg_shards`] decides
/// once every shard is back.
///
/// # Errors
///
/// [`ProveError`] when a seed cannot be read or a run cannot start.
pub async fn run_leg_shard(
    seed_paths: &[PathBuf],
    options: &ProveOptions,
    partition: elengtis_core::partition::Partition,
) -> Result<Vec<LegShard>, ProveError> {
    let findings: Vec<Finding> = seed_paths.iter().map(|p| prepare_finding(p, options)).collect::<Result<_, _>>()?;
    let all: Vec<&Campaign> = findings.iter().flat_map(campaigns_of).collect();
    let pool = Pool::new(&all, options).await?;
    let mut shards = Vec::with_capacity(findings.len());
    for finding in &findings {
        let campaigns = campaigns_of(finding);
        // Every campaign to the end, even when one fails (no container left behind).
        let results = futures_util::future::join_all(
            campaigns.iter().map(|c| run_campaign_shard(c, &pool, options, Some(partition), None)),
        )
        .await;
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        let (mut legs, mut of) = (0, 0);
        for campaign in &campaigns {
            let matrix = elengtis_core::matrix::expand(&campaign.bundle);
            of += matrix.len() as u64;
            legs += partition.select(&matrix, |t| t.trial_id.as_str()).len() as u64;
        }
        shards.push(LegShard { seed: finding.seed.seed.id.clone(), dir: finding.dir.clone(), legs, of });
    }
    Ok(shards)
}

/// The seeds' verdicts from their leg shards (`prove --merge-legs SHARD_OUT...`): each
/// seed's campaigns are written again from the seed and `options` — which must be the
/// shards' (the written campaigns are compared byte for byte with every shard's) — each
/// campaign's shards are merged ([`crate::merge::merge`]: verified, sealed, of one campaign
/// and matrix, no overlap) into `<out>/<seed>/<campaign>/results`, and the legs are read and
/// decided there exactly as an unsharded prove decides them. A leg no shard ran reads *no
/// verdict* (the seed is then NOT TESTED, never KEPT).
///
/// # Errors
///
/// [`ProveError`] when a seed cannot be read, a shard's campaign differs, or a merge is
/// refused.
pub async fn merge_leg_shards(
    seed_paths: &[PathBuf],
    shard_roots: &[PathBuf],
    catalogue: &[String],
    options: &ProveOptions,
    merge: &crate::merge::MergeOptions,
    mut each: impl FnMut(&Proven),
) -> Result<Vec<Proven>, ProveError> {
    if shard_roots.is_empty() {
        return Err(ProveError::Usage("failed to merge leg shards: no shard directory given".into()));
    }
    let mut proven = Vec::with_capacity(seed_paths.len());
    for seed_path in seed_paths {
        let finding = prepare_finding(seed_path, options)?;
        let mut read = Vec::new();
        for campaign in campaigns_of(&finding) {
            let results_rel = campaign.results.strip_prefix(&options.out).map_err(|_| {
                ProveError::Usage(format!(
                    "failed to place {} under {}",
                    campaign.results.display(),
                    options.out.display()
                ))
            })?;
            let campaign_dir = campaign.results.with_file_name("campaign");
            let campaign_rel = results_rel.with_file_name("campaign");
            let written = read_campaign_files(&campaign_dir)?;
            let mut inputs = Vec::with_capacity(shard_roots.len());
            for root in shard_roots {
                let theirs = read_campaign_files(&root.join(&campaign_rel))?;
                if theirs != written {
                    return Err(ProveError::Usage(format!(
                        "failed to merge the leg shards of {}: {} differs from the campaign these flags write ({}); \
                         give --merge-legs the seed and the flags (--iterations, --no-metamorphic, --disable-guard, \
                         --guarded-side, --target, --model-config) the shards ran with",
                        finding.seed.seed.id,
                        root.join(&campaign_rel).display(),
                        campaign_dir.display()
                    )));
                }
                inputs.push(root.join(results_rel));
            }
            crate::merge::merge(&inputs, &campaign.results, merge).map_err(Box::new)?;
            read.push(read_campaign(campaign)?);
        }
        let mut read = read.into_iter();
        let repeated = read.next().unwrap_or_default();
        let rewritten = finding.metamorphic.as_ref().map(|_| read.next().unwrap_or_default());
        let calibrated = finding.calibration.as_ref().map(|_| read.next().unwrap_or_default());
        let carried = read.next().unwrap_or_default();
        // A judged seed's judge reads the merged runs, as it reads an unsharded prove's.
        let judged = judge_finding(&finding, options, &repeated, rewritten.as_ref(), &carried).await?;
        let p = decide(
            &finding,
            catalogue,
            options,
            Legs { repeated, rewritten, calibrated, carried, stopped: None, judged },
        )?;
        each(&p);
        proven.push(p);
    }
    Ok(proven)
}

/// A written campaign directory's files, by name (the campaign and its scenario).
fn read_campaign_files(dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<u8>>, ProveError> {
    let io = |e: std::io::Error| ProveError::Io {
        what: "read the campaign in",
        path: dir.to_owned(),
        detail: e.to_string(),
    };
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        files.insert(entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).map_err(io)?);
    }
    Ok(files)
}

/// The exit status of a set of verdicts: any REJECTED, else any NOT TESTED, else any STABLE,
/// NOT PROVEN, else KEPT.
pub fn overall(reports: &[ValidationReport]) -> Verdict {
    if reports.iter().any(|r| r.verdict == Verdict::Rejected) {
        Verdict::Rejected
    } else if reports.iter().any(|r| r.verdict == Verdict::NotTested) {
        Verdict::NotTested
    } else if reports.iter().any(|r| r.verdict == Verdict::StableNotProven) {
        Verdict::StableNotProven
    } else {
        Verdict::Kept
    }
}

/// The exit status of `elengtis prove` over `reports` ([`overall`]): 0 when every finding is
/// KEPT, [`exit_codes::NOT_PROVEN`](crate::exit_codes::NOT_PROVEN) (8) when the worst is
/// STABLE, NOT PROVEN, [`exit_codes::NO_EVIDENCE`](crate::exit_codes::NO_EVIDENCE) (9) when
/// the worst is NOT TESTED, [`exit_codes::REJECTED`](crate::exit_codes::REJECTED) (7) when any
/// is REJECTED.
pub fn exit_code(reports: &[ValidationReport]) -> i32 {
    match overall(reports) {
        Verdict::Kept => crate::exit_codes::SUCCESS,
        Verdict::StableNotProven => crate::exit_codes::NOT_PROVEN,
        Verdict::NotTested => crate::exit_codes::NO_EVIDENCE,
        Verdict::Rejected => crate::exit_codes::REJECTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/seeds")
    }

    #[test]
    fn every_bundled_seed_builds_valid_campaigns() {
        let seeds = seeds_in(&seeds_dir()).expect("the bundled seeds");
        assert_eq!(seeds.len(), 11, "eleven bundled seeds");
        assert_eq!(catalogue(&seeds_dir()).len(), 11, "every bundled seed loads");
        let dir = tempfile::tempdir().expect("tempdir");
        for path in seeds {
            let seed = load_seed(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut legs = Vec::new();
            for r in rewrites(&seed.seed.payload, &seed.seed.markers) {
                for build in ["vulnerable", "guarded"] {
                    legs.push(Leg {
                        target_id: format!("{build}-{}", r.kind.as_str()),
                        build,
                        payload: r.text.clone(),
                        shim: (build == "guarded").then(|| campaign::shim_config(&seed)),
                        custom: None,
                        egress_proxy: (build == "guarded").then(campaign::network_config),
                        disabled: None,
                    });
                }
            }
            let document =
                campaign::campaign(&seed, &legs, 1, &[Weakness::W4], &campaign::scenario_file_name(&seed), None);
            let written =
                campaign::write(&dir.path().join(&seed.seed.id), &seed, &document).expect("write the campaign");
            let bundle = load::load_campaign(&written, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", seed.seed.id));
            assert!(bundle.scenarios[0].value.verify.checks.len() == 1, "{}: one independent verifier", seed.seed.id);
            assert!(
                crate::trial::launch::needs_sink(&bundle, 0, 0),
                "{}: the twin's --resolve needs the sink",
                seed.seed.id
            );
        }
    }

    #[test]
    fn the_twin_command_follows_the_delivery() {
        let seed = load_seed(&seeds_dir().join("w1-description-fetch-smuggle.seed.yaml")).expect("seed");
        let line = campaign::twin_command(&seed, "guarded", "P", &[Weakness::W1]);
        let text = serde_json::to_string(&line).expect("json");
        assert!(text.contains(r#""--w1-payload","P""#), "{text}");
        assert!(text.contains(r#""--resolve",["attacker.example.com=",{"runner":"sink_url"}]"#), "{text}");
        assert!(text.contains(r#""--disable-guard","W1""#), "{text}");
        let vulnerable =
            serde_json::to_string(&campaign::twin_command(&seed, "vulnerable", "P", &[Weakness::W1])).expect("json");
        assert!(!vulnerable.contains("--disable-guard"), "only the guarded twin takes --disable-guard");
        let note = load_seed(&seeds_dir().join("w2-note-body-direct.seed.yaml")).expect("seed");
        let text = serde_json::to_string(&campaign::twin_command(&note, "vulnerable", "P", &[])).expect("json");
        assert!(text.contains(r#""--note","n1=P""#), "{text}");
    }
}
