//! The prove figure (issue 31, item 2): one finding proven end to end — the bundled seed
//! `w4-send-email-via-note-injection` against the reference twins, 29 legs (5 iterations × 2
//! sides, 5 benign-carrier runs, 7 rewrites × 2 sides) and the four calibration runs (both
//! sides' builds), every one in fresh hardened containers with its verifier's sightings — timed at `--jobs 4` and
//! `--jobs 1`, with the runner's peak memory, against two baselines measured in the same run:
//!
//! - the same prove with every leg on an internal bridge of its own
//!   (`ELENGTIS_TRIAL_NETWORK=always`, the layout every leg had before the sink's namespace);
//! - the floor: the legs' raw lifecycle alone (the sink, then the twin, both removed, no MCP
//!   session and no verifier), as many as the prove ran, four at a time, in each layout.
//!
//! Figures are printed, never asserted.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{BenchError, BenchSettings, peak_rss_mb};
use crate::prove::{self, GuardedSide, ProveOptions};
use crate::run::SandboxChoice;
use crate::sandbox::docker::{DockerBackend, DockerOptions, TrialNetwork, images};
use crate::sandbox::{ImageNeed, McpMode, NetworkNeeds, RunNeeds, SandboxBackend as _, SandboxSpec, TrialLabels};

/// The seed proven (the figure of docs/performance.md and tests/docker/prove.rs).
const SEED_ID: &str = "w4-send-email-via-note-injection";
const SEED: &str = include_str!("../../../scenarios/seeds/w4-send-email-via-note-injection.seed.yaml");
const SEED_SCENARIO: &str = include_str!("../../../scenarios/seeds/w4-send-email-via-note-injection.yaml");

/// The prove figures (`elengtis bench --prove-only --json` prints exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct ProveBench {
    /// The seed proven.
    pub seed: &'static str,
    /// Its verdict (the same in every prove of the run, or the measurement fails).
    pub verdict: String,
    /// Legs each prove ran (repeat, metamorphic and calibration runs).
    pub legs: usize,
    /// Wall time at `--jobs 4`, s.
    pub wall_s_jobs4: f64,
    /// Wall time at `--jobs 1`, s.
    pub wall_s_jobs1: f64,
    /// Wall time at `--jobs 4` with every leg on a bridge of its own, s.
    pub wall_s_jobs4_bridge: f64,
    /// The legs' raw lifecycle, four at a time, in the layout the prove used, s.
    pub floor_s_jobs4: f64,
    /// The same on a bridge per leg, s.
    pub floor_s_jobs4_bridge: f64,
    /// The bridge prove's wall time ÷ this one's (what the sink's namespace saves).
    pub bridge_ratio: f64,
    /// The prove's wall time ÷ its floor (what the runner adds to the engine's work).
    pub floor_ratio: f64,
    /// The runner's peak resident memory after the first prove (`--jobs 4`), MiB.
    pub runner_peak_rss_mb: f64,
    /// The goal of issue 31 at `--jobs 4`, s.
    pub goal_s: f64,
}

/// Measure the prove figures, the runs' events to `settings.events`.
pub async fn prove(settings: &BenchSettings) -> Result<ProveBench, BenchError> {
    let dir = tempfile::Builder::new().prefix("elengtis-bench-prove-").tempdir()?;
    let seeds = dir.path().join("seeds");
    std::fs::create_dir_all(&seeds)?;
    let seed_path = seeds.join(format!("{SEED_ID}.seed.yaml"));
    std::fs::write(&seed_path, SEED)?;
    std::fs::write(seeds.join(format!("{SEED_ID}.yaml")), SEED_SCENARIO)?;
    let catalogue = vec![SEED_ID.to_owned()];
    let auto = DockerOptions { network: Ok(TrialNetwork::Auto), ..settings.docker.clone() };
    let bridge = DockerOptions { network: Ok(TrialNetwork::Always), ..settings.docker.clone() };

    let (wall4, verdict, legs) = prove_once(dir.path(), "jobs4", &seed_path, &catalogue, 4, &auto, settings).await?;
    let runner_peak_rss_mb = peak_rss_mb();
    let (wall1, v1, _) = prove_once(dir.path(), "jobs1", &seed_path, &catalogue, 1, &auto, settings).await?;
    let (wall4_bridge, v4b, _) =
        prove_once(dir.path(), "jobs4-bridge", &seed_path, &catalogue, 4, &bridge, settings).await?;
    for (what, v) in [("--jobs 1", v1), ("--jobs 4 on bridges", v4b)] {
        if v != verdict {
            return Err(BenchError::Failed(format!("the prove at {what} gave {v}, the first one {verdict}")));
        }
    }
    let floor4 = floor(&auto, legs, 4).await?;
    let floor4_bridge = floor(&bridge, legs, 4).await?;
    let s = |d: Duration| d.as_secs_f64();
    Ok(ProveBench {
        seed: SEED_ID,
        verdict,
        legs,
        wall_s_jobs4: s(wall4),
        wall_s_jobs1: s(wall1),
        wall_s_jobs4_bridge: s(wall4_bridge),
        floor_s_jobs4: s(floor4),
        floor_s_jobs4_bridge: s(floor4_bridge),
        bridge_ratio: s(wall4_bridge) / s(wall4),
        floor_ratio: s(wall4) / s(floor4),
        runner_peak_rss_mb,
        goal_s: 10.0,
    })
}

/// One prove of the seed at `jobs`: its wall time, verdict and the legs it ran.
async fn prove_once(
    dir: &Path,
    name: &str,
    seed: &Path,
    catalogue: &[String],
    jobs: usize,
    docker: &DockerOptions,
    settings: &BenchSettings,
) -> Result<(Duration, String, usize), BenchError> {
    let out = dir.join(name);
    let options = ProveOptions {
        iterations: prove::DEFAULT_ITERATIONS,
        jobs,
        out: out.clone(),
        metamorphic: true,
        disabled: Vec::new(),
        sandbox: SandboxChoice::Docker(docker.clone()),
        events: settings.events.clone(),
        thresholds: Default::default(),
        guarded_side: GuardedSide::Twin,
        live: None,
        model: crate::model::ModelOptions::default(),
        target: None,
        guarded_target: None,
        partition: None,
        slots: None,
        sequential: false,
        judge: None,
    };
    let started = Instant::now();
    let proven = prove::prove_seed(seed, catalogue, &options)
        .await
        .map_err(|e| BenchError::Failed(format!("the prove at --jobs {jobs} failed: {e}")))?;
    let wall = started.elapsed();
    if !proven.undecided.is_empty() {
        return Err(BenchError::Failed(format!(
            "the prove at --jobs {jobs} left legs undecided: {}",
            proven.undecided.join("; ")
        )));
    }
    let mut legs = 0;
    for campaign in ["repeat", "metamorphic", "calibrate"] {
        let log = out.join(SEED_ID).join(campaign).join("results/runs.jsonl");
        legs += crate::results::store::read_rows(&log)?.len();
    }
    Ok((wall, proven.report.verdict_label.clone(), legs))
}

/// The legs' raw lifecycle `total` times, `jobs` at a time, under `docker`'s network policy:
/// the trial's sandbox as a prove leg gets it (the sink started, then the twin with its
/// `--resolve` to the sink), then torn down; no MCP session, no verifier.
async fn floor(docker: &DockerOptions, total: usize, jobs: usize) -> Result<Duration, BenchError> {
    let twin = images::twin_ref();
    let needs = RunNeeds {
        images: vec![ImageNeed {
            image: twin.clone(),
            http: false,
            relay_image: None,
            runtime: None,
            egress_proxy: false,
        }],
        sink: true,
    };
    let backend = Arc::new(DockerBackend::prepare(docker, &needs, &elengtis_core::events::NoEvents).await?);
    let run_id = format!("bench-prove-floor-{}", uuid::Uuid::new_v4());
    let started = Instant::now();
    let workers = (0..jobs).map(|w| {
        let backend = backend.clone();
        let (twin, run_id) = (twin.clone(), run_id.clone());
        async move {
            for i in (0..total).filter(|i| i % jobs == w) {
                lifecycle(&backend, &twin, &run_id, i).await?;
            }
            Ok::<(), BenchError>(())
        }
    });
    for result in futures_util::future::join_all(workers).await {
        result?;
    }
    Ok(started.elapsed())
}

/// One leg's sandbox: created, the sink and the twin started, torn down.
async fn lifecycle(backend: &DockerBackend, twin: &str, run_id: &str, i: usize) -> Result<(), BenchError> {
    let spec = SandboxSpec {
        image: twin.to_owned(),
        relay_image: None,
        uid: 65534,
        gid: 65534,
        env: Vec::new(),
        mode: McpMode::Stdio,
        volumes: vec!["/data".into()],
        startup_timeout: Duration::from_secs(30),
        stderr_bytes: 64 * 1024,
        labels: TrialLabels {
            run_id: run_id.to_owned(),
            trial_id: format!("floor--{i}"),
            attempt_id: uuid::Uuid::new_v4().to_string(),
        },
        egress_proxy: None,
        network_needs: NetworkNeeds { sink: true, other: false },
        runtime: None,
    };
    let mut sandbox = backend.create(&spec).await.map_err(|(e, _)| e)?;
    let started = async {
        let sink = sandbox.start_sink().await?;
        let url = sink.url.clone().unwrap_or_default();
        let command = ["--build", "vulnerable", "--mail-db", "/data/mail.db", "--resolve"]
            .map(str::to_owned)
            .into_iter()
            .chain([format!("attacker.example.com={url}")])
            .collect();
        let endpoint = sandbox.start_target(command).await?;
        // Closed before the teardown, as a leg's session is: the twin's stdin ends it.
        drop((endpoint, sink));
        Ok::<(), crate::sandbox::SandboxError>(())
    }
    .await;
    let (_, errors) = sandbox.teardown().await;
    started?;
    if !errors.is_empty() {
        return Err(BenchError::Failed(format!("the floor's teardown failed: {}", errors.join("; "))));
    }
    Ok(())
}

/// The human-readable lines.
pub fn render(p: &ProveBench) -> String {
    format!(
        "prove ({}, {}, {})\n\
         prove --jobs 4       {:8.2} s   (goal ≤ {:.0} s); on a bridge per leg {:.2} s: {:.2}× slower\n\
         prove --jobs 1       {:8.2} s\n\
         legs' floor, 4 at a time {:6.2} s (sink namespace), {:.2} s (bridge per leg); prove ÷ floor {:.2}×\n\
         runner peak RSS      {:8.1} MiB after the first prove\n",
        p.seed,
        elengtis_core::format::quote::count(p.legs, "leg"),
        p.verdict,
        p.wall_s_jobs4,
        p.goal_s,
        p.wall_s_jobs4_bridge,
        p.bridge_ratio,
        p.wall_s_jobs1,
        p.floor_s_jobs4,
        p.floor_s_jobs4_bridge,
        p.floor_ratio,
        p.runner_peak_rss_mb,
    )
}
