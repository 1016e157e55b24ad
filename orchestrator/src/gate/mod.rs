//! `elengtis gate`: the committed regression of proven findings (the gate file, see
//! [`elengtis_core::format::gate`]).
//!
//! - A **reference** finding is re-proven against the bundled twins with every model answer
//!   replayed offline from its fixture directory: no key, no network. Before anything runs,
//!   the directory's [`lock`] must be present and current and every fixture must read; after
//!   the replay, every leg must have decided (fired or resisted). Anything else — a stale,
//!   absent, corrupt or other-version fixture, a lookup miss, an undecided leg — fails the
//!   finding as *no evidence*, never as a pass.
//! - A **custom** finding (`target: FILE`) is re-driven live against the user's target, with
//!   the gate's model, only when `ELENGTIS_LIVE_TARGET=1`; otherwise it is skipped, and a
//!   skip fails the gate when `ELENGTIS_REQUIRE_GATE_RUN=1`.
//! - `--record` re-records reference findings live and writes each lock only when the
//!   recording proved the finding KEPT with every leg decided.
//!
//! The verdict of the whole gate: no evidence, else REJECTED, else STABLE, NOT PROVEN, else
//! passed; the binary maps each to its exit code.

pub mod add;
pub mod lock;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis_core::events::{EventSink, NoEvents};
use elengtis_core::format::gate::{CustomGuard, FindingKind, LiveModel, LoadedFinding, LoadedGate};
use elengtis_core::format::seed::load_seed;
use elengtis_core::format::sha256_hex;
use elengtis_core::prove::{ValidationReport, Verdict};
use serde::Serialize;

use crate::model::ModelOptions;
use crate::model::fixtures::FixtureMode;
use crate::prove::{self, GuardedSide, ProveError, ProveOptions};
use crate::run::SandboxChoice;
use crate::sandbox::docker::images;

/// The variable that allows custom findings to be re-driven live.
pub const LIVE_TARGET_VAR: &str = "ELENGTIS_LIVE_TARGET";
/// The variable that turns a skipped finding into a failure.
pub const REQUIRE_RUN_VAR: &str = "ELENGTIS_REQUIRE_GATE_RUN";

/// How to run a gate.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Legs run at once.
    pub jobs: usize,
    /// Results root: one directory per finding.
    pub out: PathBuf,
    /// The sandbox backend.
    pub sandbox: SandboxChoice,
    /// Where the runs' events go.
    pub events: Arc<dyn EventSink>,
    /// Re-record the reference findings live instead of replaying them.
    pub record: bool,
    /// Only these findings (seed ids); empty: all.
    pub only: Vec<String>,
    /// Replace the live model's provider base URL (recording, custom findings).
    pub base_url: Option<String>,
    /// `ELENGTIS_LIVE_TARGET=1`: re-drive custom findings live.
    pub live_target: bool,
    /// `ELENGTIS_REQUIRE_GATE_RUN=1`: a skipped finding fails the gate.
    pub require_run: bool,
    /// Only this shard of the gate file's findings (by position in the file, or by seed id).
    pub partition: Option<elengtis_core::partition::Partition>,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            jobs: 1,
            out: PathBuf::from("gate-out"),
            sandbox: SandboxChoice::default(),
            events: Arc::new(NoEvents),
            record: false,
            only: Vec::new(),
            base_url: None,
            live_target: false,
            require_run: false,
            partition: None,
        }
    }
}

impl GateOptions {
    /// The two variables as the environment sets them (`1`, `true` or `yes`).
    pub fn from_env(mut self) -> Self {
        let on = |name: &str| {
            std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        };
        self.live_target = on(LIVE_TARGET_VAR);
        self.require_run = on(REQUIRE_RUN_VAR);
        self
    }
}

/// What one finding's gate came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Re-proven KEPT with every leg decided (recorded, when recording).
    Passed,
    /// Re-proven REJECTED: the finding no longer discriminates (a guard regressed, or the
    /// attack no longer lands).
    Rejected,
    /// STABLE, NOT PROVEN: it reproduces, and nothing shows a safeguard stops it.
    NotProven,
    /// The gate has nothing to stand on: fixtures stale, absent, corrupt or of another
    /// version, a leg undecided, or a required run skipped.
    NoEvidence,
    /// Not run (a custom finding without `ELENGTIS_LIVE_TARGET=1`).
    Skipped,
}

impl Status {
    /// The word the report prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Rejected => "REJECTED",
            Status::NotProven => "STABLE, NOT PROVEN",
            Status::NoEvidence => "NO EVIDENCE",
            Status::Skipped => "skipped",
        }
    }
}

/// One finding's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct FindingOutcome {
    /// The seed id (or the seed file when it could not be read).
    pub seed: String,
    /// `reference` (replayed) or `custom` (live).
    pub kind: &'static str,
    /// What it came to.
    pub status: Status,
    /// Why, one line each (problems of the evidence, the verdict's reasons, the skip).
    pub details: Vec<String>,
    /// The report, when the finding was proven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_path: Option<PathBuf>,
    /// The report itself.
    #[serde(skip)]
    pub report: Option<ValidationReport>,
}

/// The whole gate's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct GateOutcome {
    /// The worst status over the findings (skips count as passed unless required).
    pub status: Status,
    /// Every finding, in file order.
    pub findings: Vec<FindingOutcome>,
    /// Whether this was a recording.
    pub recorded: bool,
    /// The shard of the gate file's findings this gate re-proved (`--partition`); absent
    /// when the findings were not sharded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<elengtis_core::partition::ListShard>,
}

/// Why a gate could not run at all (a finding that fails is an outcome, not an error).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// `--finding` named no finding of the file.
    #[error("failed to select findings: {0}")]
    Selection(String),
    /// Recording needs the gate's `model`.
    #[error("failed to record: {0}")]
    Record(String),
    /// A prove could not start.
    #[error(transparent)]
    Prove(#[from] ProveError),
}

/// The overall status of finding statuses.
pub fn overall(statuses: impl IntoIterator<Item = Status>) -> Status {
    let all: Vec<Status> = statuses.into_iter().collect();
    for worst in [Status::NoEvidence, Status::Rejected, Status::NotProven] {
        if all.contains(&worst) {
            return worst;
        }
    }
    Status::Passed
}

fn status_of(verdict: Verdict) -> Status {
    match verdict {
        Verdict::Kept => Status::Passed,
        Verdict::StableNotProven => Status::NotProven,
        Verdict::Rejected => Status::Rejected,
        Verdict::NotTested => Status::NoEvidence,
    }
}

fn seed_id(finding: &LoadedFinding) -> String {
    load_seed(&finding.seed).map(|s| s.seed.id).unwrap_or_else(|_| finding.seed.display().to_string())
}

fn with_base_url(model: &LiveModel, base_url: Option<&str>) -> LiveModel {
    let mut model = model.clone();
    if let Some(url) = base_url {
        let mut provider = model.provider.clone().unwrap_or_else(|| elengtis_core::format::campaign::Provider {
            kind: elengtis_core::format::campaign::ProviderKind::Openrouter,
            base_url: None,
            api_key: None,
            headers: Default::default(),
            max_in_flight: None,
            backoff_ms: None,
        });
        provider.base_url = Some(url.to_owned());
        model.provider = Some(provider);
    }
    model
}

/// The findings a gate re-proves: those `--finding` names (all when none), narrowed to the
/// shard of `--partition` — by each finding's position in the gate file (`count:`) or its
/// seed id (`hash:`), so every finding of the file is in exactly one shard — with the
/// shard's record (the whole finding list's hash and this shard's seed ids).
///
/// # Errors
///
/// [`GateError::Selection`] when `--finding` names no finding of the file.
pub fn select<'a>(
    gate: &'a LoadedGate,
    options: &GateOptions,
) -> Result<(Vec<&'a LoadedFinding>, Option<elengtis_core::partition::ListShard>), GateError> {
    let known: Vec<String> = gate.findings.iter().map(seed_id).collect();
    if let Some(unknown) = options.only.iter().find(|id| !known.contains(id)) {
        return Err(GateError::Selection(format!(
            "{} has no finding `{unknown}` (it has: {})",
            gate.path.display(),
            known.join(", ")
        )));
    }
    let (in_shard, record) = match options.partition {
        None => ((0..gate.findings.len()).collect::<Vec<usize>>(), None),
        Some(partition) => {
            let (positions, record) = partition.shard_list("findings", &known);
            (positions, Some(record))
        }
    };
    let selected = in_shard
        .into_iter()
        .filter(|&i| options.only.is_empty() || options.only.contains(&known[i]))
        .map(|i| &gate.findings[i])
        .collect();
    Ok((selected, record))
}

/// Whether re-proving `finding` needs the Docker engine (and the bundled images): a reference
/// finding (the twins run in containers), or a target of your own in a container. A stdio
/// target of your own runs as a local process; a custom finding that is skipped (no
/// `ELENGTIS_LIVE_TARGET=1`) or recorded runs nothing.
pub fn needs_engine(finding: &LoadedFinding, options: &GateOptions) -> bool {
    match &finding.kind {
        FindingKind::Reference { .. } => true,
        FindingKind::Custom { target, .. } => {
            options.live_target
                && !options.record
                && matches!(target.transport, elengtis_core::format::campaign::Transport::IsolatedContainer(_))
        }
    }
}

/// Run (or record) the gate.
///
/// # Errors
///
/// [`GateError`] when it cannot run at all; every finding's failure is in the outcome.
pub async fn run(gate: &LoadedGate, catalogue: &[String], options: &GateOptions) -> Result<GateOutcome, GateError> {
    let (selected, partition) = select(gate, options)?;
    if options.record && gate.gate.model.is_none() {
        return Err(GateError::Record(format!("{} names no `model` to record the fixtures with", gate.path.display())));
    }
    // Replayed findings are proven [`FINDINGS_AT_ONCE`] at a time from one pool of `--jobs`
    // leg slots, so the next finding's legs fill the slots the last one's tail leaves (as
    // `prove --all` does); a recording runs its findings one by one. Outcomes keep the file's
    // order.
    let slots = Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let at_once = if options.record { 1 } else { FINDINGS_AT_ONCE };
    let outcomes = futures_util::StreamExt::buffered(
        futures_util::stream::iter(selected.into_iter().map(|finding| {
            let slots = slots.clone();
            async move {
                match &finding.kind {
                    FindingKind::Reference { fixtures } if options.record => {
                        record_reference(gate, finding, fixtures, catalogue, options, slots).await
                    }
                    FindingKind::Reference { fixtures } => {
                        replay_reference(gate, finding, fixtures, catalogue, options, slots).await
                    }
                    FindingKind::Custom { target, guarded, .. } => {
                        custom(gate, finding, target, *guarded, catalogue, options, slots).await
                    }
                }
            }
        })),
        at_once,
    );
    // Every finding in flight finishes (its containers torn down) before an error is returned.
    let results: Vec<Result<FindingOutcome, GateError>> = futures_util::StreamExt::collect(outcomes).await;
    let findings = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let status = overall(findings.iter().map(|f| f.status));
    Ok(GateOutcome { status, findings, recorded: options.record, partition })
}

/// Findings proven at once (replaying): two keep the pool's slots busy across one finding's
/// tail; more would only hold more runs open.
const FINDINGS_AT_ONCE: usize = 2;

/// Prove options of a finding: the gate's iterations, results under `out/<seed id>/`, its
/// legs drawing from the gate's shared `slots`.
fn prove_options(gate: &LoadedGate, options: &GateOptions, slots: Arc<tokio::sync::Semaphore>) -> ProveOptions {
    ProveOptions {
        iterations: gate.iterations(),
        jobs: options.jobs,
        out: options.out.clone(),
        metamorphic: true,
        sandbox: options.sandbox.clone(),
        events: options.events.clone(),
        slots: Some(slots),
        // The gate's default iterations (3) are enough for it to keep a finding; the power line
        // of each report says what they rule out.
        thresholds: elengtis_core::prove::Thresholds {
            min_iterations: elengtis_core::prove::filter::GATE_MIN_ITERATIONS,
            ..elengtis_core::prove::Thresholds::default()
        },
        ..ProveOptions::default()
    }
}

/// The outcome of a proven finding: its verdict, unless a leg decided nothing and the verdict
/// is not a rejection (REJECTED means the decided runs rule the finding out whatever the
/// undecided ones would have shown: the guard regressed or the attack stopped landing).
fn judged(seed: String, kind: &'static str, proven: prove::Proven) -> FindingOutcome {
    let rejected = proven.report.verdict == elengtis_core::prove::Verdict::Rejected;
    let (status, details) = if proven.undecided.is_empty() || rejected {
        let mut details = proven.report.reasons.clone();
        if !proven.undecided.is_empty() {
            details.push(format!(
                "{} leg(s) decided nothing (the decided runs reject it regardless):",
                proven.undecided.len()
            ));
            details.extend(proven.undecided.iter().cloned());
        }
        (status_of(proven.report.verdict), details)
    } else {
        let mut details = vec![format!(
            "{} leg(s) decided nothing, so the replay cannot vouch for the finding:",
            proven.undecided.len()
        )];
        details.extend(proven.undecided.iter().cloned());
        (Status::NoEvidence, details)
    };
    FindingOutcome {
        seed,
        kind,
        status,
        details,
        report_path: Some(proven.report_path.clone()),
        report: Some(proven.report),
    }
}

/// SHA-256 of a seed's scenario file (empty when unreadable: the lock then reads stale).
fn scenario_sha256(seed: &elengtis_core::format::seed::LoadedSeed) -> String {
    std::fs::read(&seed.scenario_path).map(|b| sha256_hex(&b)).unwrap_or_default()
}

fn no_evidence(seed: String, kind: &'static str, details: Vec<String>) -> FindingOutcome {
    FindingOutcome { seed, kind, status: Status::NoEvidence, details, report_path: None, report: None }
}

fn rerecord_hint(gate: &LoadedGate, seed: &str) -> String {
    format!(
        "re-record with `elengtis gate --file {} --record --finding {seed}` (needs the live model and its key)",
        gate.path.display()
    )
}

async fn replay_reference(
    gate: &LoadedGate,
    finding: &LoadedFinding,
    fixtures: &Path,
    catalogue: &[String],
    options: &GateOptions,
    slots: Arc<tokio::sync::Semaphore>,
) -> Result<FindingOutcome, GateError> {
    let seed = match load_seed(&finding.seed) {
        Ok(seed) => seed,
        Err(e) => return Ok(no_evidence(finding.seed.display().to_string(), "reference", vec![e.to_string()])),
    };
    let id = seed.seed.id.clone();
    let lock = match lock::read(fixtures) {
        Ok(lock) => lock,
        Err(e) => return Ok(no_evidence(id.clone(), "reference", vec![e, rerecord_hint(gate, &id)])),
    };
    let scenario_sha = scenario_sha256(&seed);
    let twin = images::twin_ref();
    let judge = lock::judge_of(&seed.seed);
    let expected = lock::Expected {
        seed: &id,
        seed_sha256: &seed.sha256,
        scenario_sha256: &scenario_sha,
        iterations: gate.iterations(),
        twin: &twin,
        judge: judge.as_ref(),
    };
    let mut problems = lock::stale(&lock, &expected);
    problems.extend(lock::check_files(fixtures, &lock));
    if !problems.is_empty() {
        problems.push(rerecord_hint(gate, &id));
        return Ok(no_evidence(id, "reference", problems));
    }
    let mut prove_options = prove_options(gate, options, slots);
    prove_options.metamorphic = lock.metamorphic;
    prove_options.live = Some(lock.model.clone());
    // The judge replays from the same directory: its model as locked (no address: nothing is
    // contacted).
    prove_options.judge = lock.judge.as_ref().map(|j| j.model.clone());
    prove_options.model =
        ModelOptions { fixtures: FixtureMode::Replay(fixtures.to_owned()), ..ModelOptions::default() };
    let proven = prove::prove_seed(&finding.seed, catalogue, &prove_options).await?;
    let mut outcome = judged(id.clone(), "reference", proven);
    if outcome.status == Status::NoEvidence && outcome.details.iter().any(|d| d.contains("failed to replay")) {
        outcome.details.push(rerecord_hint(gate, &id));
    }
    Ok(outcome)
}

async fn record_reference(
    gate: &LoadedGate,
    finding: &LoadedFinding,
    fixtures: &Path,
    catalogue: &[String],
    options: &GateOptions,
    slots: Arc<tokio::sync::Semaphore>,
) -> Result<FindingOutcome, GateError> {
    let seed = load_seed(&finding.seed).map_err(|e| GateError::Prove(e.into()))?;
    let id = seed.seed.id.clone();
    let Some(model) = gate.gate.model.as_ref() else {
        return Err(GateError::Record(format!("{} names no `model`", gate.path.display())));
    };
    let model = with_base_url(model, options.base_url.as_deref());
    // A fresh directory: fixtures of an earlier recording would hide a request that is no
    // longer made, and the lock counts what this recording wrote.
    if fixtures.exists() {
        for file in lock::fixture_files(fixtures).map_err(GateError::Record)? {
            std::fs::remove_file(&file)
                .map_err(|e| GateError::Record(format!("failed to remove {}: {e}", file.display())))?;
        }
        let _ = std::fs::remove_file(fixtures.join(lock::FILE));
    }
    std::fs::create_dir_all(fixtures)
        .map_err(|e| GateError::Record(format!("failed to create {}: {e}", fixtures.display())))?;
    let mut prove_options = prove_options(gate, options, slots);
    prove_options.live = Some(model.clone());
    prove_options.model =
        ModelOptions { fixtures: FixtureMode::Record(fixtures.to_owned()), ..ModelOptions::default() };
    let proven = prove::prove_seed(&finding.seed, catalogue, &prove_options).await?;
    let mut outcome = judged(id.clone(), "reference", proven);
    if outcome.status != Status::Passed {
        outcome.details.push(format!(
            "not locked: only a KEPT recording with every leg decided is committed as a gate ({} holds no {})",
            fixtures.display(),
            lock::FILE
        ));
        return Ok(outcome);
    }
    let count = lock::fixture_files(fixtures).map_err(GateError::Record)?.len();
    let scenario_sha = scenario_sha256(&seed);
    // The lock keeps the model without where it was served from: a replay contacts nothing.
    let mut locked_model = model;
    if let Some(provider) = locked_model.provider.as_mut() {
        provider.base_url = None;
    }
    let written = lock::Lock {
        format: lock::FORMAT.into(),
        version: lock::VERSION,
        seed: id.clone(),
        seed_sha256: seed.sha256.clone(),
        scenario_sha256: scenario_sha,
        iterations: gate.iterations(),
        metamorphic: true,
        fixture_version: crate::model::fixtures::VERSION,
        twin: images::twin_ref(),
        model: locked_model,
        judge: lock::judge_of(&seed.seed),
        fixtures: count,
        recorded_with: format!("elengtis {}", env!("CARGO_PKG_VERSION")),
        recorded_at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
    };
    lock::write(fixtures, &written).map_err(GateError::Record)?;
    outcome.details.push(format!("recorded {count} fixtures into {}", fixtures.display()));
    Ok(outcome)
}

async fn custom(
    gate: &LoadedGate,
    finding: &LoadedFinding,
    target: &elengtis_core::format::campaign::Target,
    guarded: CustomGuard,
    catalogue: &[String],
    options: &GateOptions,
    slots: Arc<tokio::sync::Semaphore>,
) -> Result<FindingOutcome, GateError> {
    let id = seed_id(finding);
    if options.record {
        return Ok(FindingOutcome {
            seed: id,
            kind: "custom",
            status: Status::Skipped,
            details: vec!["a custom finding is re-driven live on every gate run; there is nothing to record".into()],
            report_path: None,
            report: None,
        });
    }
    if !options.live_target {
        let mut details = vec![format!(
            "skipped: a custom target is re-driven live (the model's key, network egress); set {LIVE_TARGET_VAR}=1 to run it"
        )];
        let status = if options.require_run {
            details.push(format!("{REQUIRE_RUN_VAR}=1: a skipped gate is a failure"));
            Status::NoEvidence
        } else {
            Status::Skipped
        };
        return Ok(FindingOutcome { seed: id, kind: "custom", status, details, report_path: None, report: None });
    }
    let Some(model) = gate.gate.model.as_ref() else {
        return Err(GateError::Record(format!("{} names no `model`", gate.path.display())));
    };
    let mut prove_options = prove_options(gate, options, slots);
    prove_options.live = Some(with_base_url(model, options.base_url.as_deref()));
    prove_options.target = serde_json::to_value(target).ok();
    prove_options.guarded_side = match guarded {
        CustomGuard::Shim => GuardedSide::Shim,
        CustomGuard::None => GuardedSide::None,
        CustomGuard::Controls => GuardedSide::Controls,
    };
    let proven = prove::prove_seed(&finding.seed, catalogue, &prove_options).await?;
    Ok(judged(id, "custom", proven))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_evidence_outranks_rejected_which_outranks_not_proven() {
        use Status::*;
        assert_eq!(overall([Passed, Skipped]), Passed);
        assert_eq!(overall([Passed, NotProven]), NotProven);
        assert_eq!(overall([NotProven, Rejected]), Rejected);
        assert_eq!(overall([Rejected, NoEvidence, Passed]), NoEvidence);
        assert_eq!(overall([]), Passed);
    }

    #[test]
    fn a_base_url_override_keeps_the_provider_kind() {
        let model: LiveModel = serde_json::from_value(serde_json::json!({
            "model": "m", "provider": {"type": "anthropic", "base_url": "https://api.anthropic.com"}
        }))
        .expect("model");
        let moved = with_base_url(&model, Some("http://127.0.0.1:9/"));
        let provider = moved.provider.expect("provider");
        assert_eq!(provider.base_url.as_deref(), Some("http://127.0.0.1:9/"));
        assert_eq!(serde_json::to_value(provider.kind).expect("kind"), "anthropic");
    }
}
