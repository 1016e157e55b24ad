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

pub mod campaign;
pub mod legs;
pub mod outputs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis_core::events::{EventSink, NoEvents};
use elengtis_core::format::LoadError;
use elengtis_core::format::seed::{LoadedSeed, Weakness, load_seed};
use elengtis_core::load;
use elengtis_core::prove::{
    GuardedLayer, LegReading, ReportInput, RewriteRun, Thresholds, ValidationReport, Verdict, build_report, rewrites,
};
use elengtis_core::validate::LoadOptions;

use self::campaign::Leg;
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
}

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

async fn run_campaign(
    seed: &LoadedSeed,
    dir: &Path,
    legs: &[Leg],
    trials: u32,
    options: &ProveOptions,
) -> Result<(std::collections::BTreeMap<String, Vec<legs::Recorded>>, bool), ProveError> {
    let document = campaign::campaign(seed, legs, trials, &options.disabled, &campaign::scenario_file_name(seed));
    let path = campaign::write(&dir.join("campaign"), seed, &document).map_err(|e| ProveError::Io {
        what: "write the campaign in",
        path: dir.to_owned(),
        detail: e.to_string(),
    })?;
    let bundle = load::load_campaign(&path, &LoadOptions::default())?;
    let has_verifiers = bundle.scenarios.iter().any(|s| !s.value.verify.checks.is_empty());
    let run_options = RunOptions {
        limits: Limits::default(),
        jobs: options.jobs.max(1),
        sandbox: options.sandbox.clone(),
        events: options.events.clone(),
        model: Default::default(),
    };
    let results = dir.join("results");
    run::start(&bundle, &results, false, &run_options).await?;
    let read = legs::read_run(&results).map_err(|detail| ProveError::Io {
        what: "read the results in",
        path: results,
        detail,
    })?;
    Ok((read, has_verifiers))
}

fn readings_of(
    seed: &LoadedSeed,
    by_target: &std::collections::BTreeMap<String, Vec<legs::Recorded>>,
    target: &str,
    guarded: bool,
    expected: u32,
    has_verifiers: bool,
) -> Vec<LegReading> {
    let mut out: Vec<LegReading> = by_target
        .get(target)
        .map(|rows| rows.iter().map(|r| legs::reading(seed, r, guarded, has_verifiers)).collect())
        .unwrap_or_default();
    while out.len() < expected as usize {
        out.push(LegReading::NoVerdict { why: "the run recorded no attempt of this trial".into() });
    }
    out
}

/// Prove one seed: the repeat campaign, then (unless disabled) the metamorphic campaign; the
/// report is written to `<out>/<seed id>/validation_report.json`.
pub async fn prove_seed(seed_path: &Path, catalogue: &[String], options: &ProveOptions) -> Result<Proven, ProveError> {
    let seed = load_seed(seed_path)?;
    let dir = options.out.join(&seed.seed.id);
    std::fs::create_dir_all(&dir).map_err(|e| ProveError::Io {
        what: "create",
        path: dir.clone(),
        detail: e.to_string(),
    })?;
    let shim = (options.guarded_side == GuardedSide::Shim).then(|| campaign::shim_config(&seed));
    let network = (options.guarded_side == GuardedSide::Network).then(campaign::network_config);
    let pair = |suffix: &str, payload: &str| {
        let name = |build: &str| if suffix.is_empty() { build.to_owned() } else { format!("{build}-{suffix}") };
        let guarded_build = if options.guarded_side == GuardedSide::Twin { "guarded" } else { "vulnerable" };
        let payload = payload.to_owned();
        [
            Leg { target_id: name("vulnerable"), build: "vulnerable", payload: payload.clone(), ..Leg::default() },
            Leg {
                target_id: name("guarded"),
                build: guarded_build,
                payload,
                shim: shim.clone(),
                egress_proxy: network.clone(),
            },
        ]
    };
    let (repeat, has_verifiers) =
        run_campaign(&seed, &dir.join("repeat"), &pair("", &seed.seed.payload), options.iterations, options).await?;
    let vulnerable = readings_of(&seed, &repeat, "vulnerable", false, options.iterations, has_verifiers);
    let guarded = readings_of(&seed, &repeat, "guarded", true, options.iterations, has_verifiers);
    let mut rewrite_runs = Vec::new();
    if options.metamorphic {
        let variants = rewrites(&seed.seed.payload, &seed.seed.markers);
        let legs: Vec<Leg> = variants.iter().flat_map(|r| pair(r.kind.as_str(), &r.text)).collect();
        let (results, _) = run_campaign(&seed, &dir.join("metamorphic"), &legs, 1, options).await?;
        for r in &variants {
            let v = readings_of(&seed, &results, &format!("vulnerable-{}", r.kind.as_str()), false, 1, has_verifiers);
            let g = readings_of(&seed, &results, &format!("guarded-{}", r.kind.as_str()), true, 1, has_verifiers);
            rewrite_runs.push(RewriteRun {
                kind: r.kind,
                unchanged: r.unchanged,
                vulnerable: v.into_iter().next().unwrap_or(LegReading::NoVerdict { why: "no attempt".into() }),
                guarded: g.into_iter().next(),
            });
        }
    }
    let report = build_report(&ReportInput {
        seed: &seed.seed,
        seed_file: Some(display_path(seed_path)),
        model: None,
        layer: Some(match options.guarded_side {
            GuardedSide::Twin => GuardedLayer::Server,
            GuardedSide::Shim => GuardedLayer::Boundary,
            GuardedSide::Network => GuardedLayer::Network,
        }),
        vulnerable,
        guarded: Some(guarded),
        rewrites: rewrite_runs,
        catalogue,
        thresholds: options.thresholds,
    });
    let report_path = dir.join("validation_report.json");
    outputs::write_report(&report_path, &report)?;
    let guarded_note = shim.as_ref().map(shim_note).or_else(|| network.as_ref().map(network_note));
    Ok(Proven { seed_path: seed_path.to_owned(), report, report_path, guarded_note })
}

/// The exit status of a set of verdicts: any REJECTED, else any STABLE, NOT PROVEN, else KEPT.
pub fn overall(reports: &[ValidationReport]) -> Verdict {
    if reports.iter().any(|r| r.verdict == Verdict::Rejected) {
        Verdict::Rejected
    } else if reports.iter().any(|r| r.verdict == Verdict::StableNotProven) {
        Verdict::StableNotProven
    } else {
        Verdict::Kept
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
                        egress_proxy: (build == "guarded").then(campaign::network_config),
                    });
                }
            }
            let document = campaign::campaign(&seed, &legs, 1, &[Weakness::W4], &campaign::scenario_file_name(&seed));
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
