//! `elengtis bench`: what isolation costs, measured in one run against its own floor.
//!
//! The same small campaign over the bundled fixture runs as stdio trials and as
//! isolated-container trials that speak MCP over the container's stdio, so the two differ
//! by the isolation alone; in the same run, through the same API and with the same
//! hardening, the raw lifecycle of the same image (network, create with attach, start,
//! remove) is measured as the floor. The same scenario also runs against the fixture as a
//! streamable-HTTP server in its container, reached the default way (through a relay
//! container), to show what that transport costs. Figures are printed, never asserted.
//!
//! The live-model provider path is measured against the scripted model server on
//! 127.0.0.1 ([`provider`]): the same request through the provider (the wire body, the
//! fixture key, the in-flight limit, the answer read into a turn, the exchange recorded) and
//! as a bare POST over the same HTTP client; the difference is the provider's overhead per
//! request. It needs no Docker (`elengtis bench --provider-only`).

pub mod original;
pub mod prove;
pub mod scan;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::run::{self, RunOptions};
use crate::sandbox::docker::container::{ContainerSpec, TrialContainer};
use crate::sandbox::docker::{DockerBackend, DockerOptions, RelayMode, images, relay};
use crate::sandbox::{ImageNeed, McpMode, RunNeeds};
use elengtis_core::events::EventSink;
use elengtis_core::load;
use elengtis_core::validate::{LoadOptions, Overrides};

const SCENARIO: &str = include_str!("../../scenarios/bench/support-note.yaml");

const BINDINGS: &str = "support-note: {read_note: read_note, read_credential: read_demo_credential, submit_credential: submit_demo_credential}";

const STDIO_CAMPAIGN: &str = include_str!("../../scenarios/bench/campaign.yaml");

fn container_campaign(image: &str) -> String {
    format!(
        "schema_version: 1\ntargets:\n  - id: bench\n    transport:\n      type: isolated_container\n      image: {image}\n      mcp_transport: stdio\n      uid: 65534\n      gid: 65534\n      command: [--collector, /tmp/c.jsonl, --credential, {{runner: canary}}]\n    bindings:\n      {BINDINGS}\nscenarios: [support-note.yaml]\n"
    )
}

fn http_campaign(image: &str) -> String {
    format!(
        "schema_version: 1\ntargets:\n  - id: bench\n    transport:\n      type: isolated_container\n      image: {image}\n      mcp_transport: streamable_http\n      container_port: 8000\n      uid: 65534\n      gid: 65534\n      command: [--transport, streamable-http, --bind, 0.0.0.0, --port, \"8000\", --collector, /tmp/c.jsonl, --credential, {{runner: canary}}]\n    bindings:\n      {BINDINGS}\nscenarios: [support-note.yaml]\n"
    )
}

/// Why the benchmark could not measure.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A campaign could not be loaded.
    #[error(transparent)]
    Load(#[from] elengtis_core::format::LoadError),
    /// A run could not start.
    #[error(transparent)]
    Run(#[from] run::RunError),
    /// The engine or an image is not usable.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Results could not be read back.
    #[error(transparent)]
    Store(#[from] crate::results::store::StoreError),
    /// A scratch file could not be written.
    #[error("failed to prepare the benchmark's files: {0}")]
    Io(#[from] std::io::Error),
    /// A measurement failed.
    #[error("failed to measure: {0}")]
    Failed(String),
}

/// The figures (`--json` prints exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Trials per measurement.
    pub trials: u32,
    /// Median stdio trial, ms.
    pub stdio_ms_median: f64,
    /// 95th percentile stdio trial, ms.
    pub stdio_ms_p95: f64,
    /// Median isolated-container trial, ms.
    pub container_ms_median: f64,
    /// 95th percentile isolated-container trial, ms.
    pub container_ms_p95: f64,
    /// The network of those trials and of the floor: `none` (the default for a stdio trial
    /// with no sink) or `internal_bridge` (`ELENGTIS_TRIAL_NETWORK=always`).
    pub container_network: &'static str,
    /// Median raw lifecycle of the same image, ms (the floor).
    pub floor_ms_median: f64,
    /// 95th percentile of the floor, ms.
    pub floor_ms_p95: f64,
    /// Median isolated-container trial over streamable HTTP (reached the default way,
    /// through a relay container unless `ELENGTIS_RELAY` says otherwise), ms.
    pub container_http_ms_median: f64,
    /// 95th percentile of the same, ms.
    pub container_http_ms_p95: f64,
    /// How the runner reached the HTTP server: `relay` or `direct`.
    pub container_http_route: &'static str,
    /// Median of the same trials reached directly (`ELENGTIS_RELAY=never`: the bridge then
    /// holds a host address), measured in the same run, ms.
    pub container_http_direct_ms_median: f64,
    /// The default route's median ÷ the direct route's.
    pub relay_direct_ratio: f64,
    /// Container trial ÷ floor (medians).
    pub container_overhead_ratio: f64,
    /// Isolated-container trials per second at `--jobs 1`.
    pub trials_per_second_jobs1: f64,
    /// Isolated-container trials per second at `--jobs 4`.
    pub trials_per_second_jobs4: f64,
    /// Trials per second at `--jobs 1 --prepare-ahead 2`.
    pub trials_per_second_jobs1_prepare_ahead2: f64,
    /// Trials per second at `--jobs 4 --prepare-ahead 2`.
    pub trials_per_second_jobs4_prepare_ahead2: f64,
    /// The floor's lifecycles per second, four at a time (the engine's own throughput at
    /// the concurrency of `--jobs 4`), measured in the same run.
    pub floor_per_second_jobs4: f64,
    /// Trials per second at `--jobs 4` ÷ the parallel floor.
    pub jobs4_floor_ratio: f64,
    /// Stdio trials per second at `--jobs 1`.
    pub stdio_trials_per_second: f64,
    /// Stdio trial throughput at `--jobs 1` and `--jobs 4` against its floor.
    pub stdio_throughput: StdioBench,
    /// The runner's peak resident memory, MiB.
    pub runner_peak_rss_mb: f64,
    /// The live-model provider path against the scripted model server.
    pub provider: ProviderBench,
    /// The same container trial and floor under gVisor (`runsc`), when the engine lists it.
    pub runsc: RunscBench,
    /// One finding proven end to end, against its floor and the bridge layout.
    pub prove: prove::ProveBench,
    /// The scan figure: sequential stopping against fixed iterations.
    pub scan: scan::ScanBench,
    /// Against the original 0.1.0 on a Python MCP HTTP server image (`--original`,
    /// `--original-image`); its fields are null, with the reason, without them.
    #[serde(flatten)]
    pub original: original::OriginalComparison,
}

/// Stdio trial throughput (`elengtis bench --stdio-only` prints exactly this; no Docker): the
/// bench's stdio campaign (the fixture as a fresh guarded child per trial, results written
/// crash-safely to a scratch directory) at `--jobs 1` and `--jobs 4`, against its floor
/// measured in the same run: the same fixture started directly (no guard, no MCP session: its
/// stdin is closed at once) and reaped, one at a time and four at a time.
#[derive(Debug, Clone, Serialize)]
pub struct StdioBench {
    /// Trials per throughput measurement (and fixture starts per floor measurement).
    pub trials: u32,
    /// Stdio trials per second at `--jobs 1`.
    pub trials_per_second_jobs1: f64,
    /// Stdio trials per second at `--jobs 4`.
    pub trials_per_second_jobs4: f64,
    /// Wall time of the `--jobs 1` run, s.
    pub wall_s_jobs1: f64,
    /// Wall time of the `--jobs 4` run, s.
    pub wall_s_jobs4: f64,
    /// Median trial (`duration_ms` of the `--jobs 1` run), ms.
    pub trial_ms_median: f64,
    /// The floor: direct starts of the fixture per second, one at a time.
    pub floor_per_second_jobs1: f64,
    /// The floor: direct starts of the fixture per second, four at a time.
    pub floor_per_second_jobs4: f64,
    /// Trials per second ÷ the floor's starts per second, at `--jobs 1`.
    pub jobs1_floor_ratio: f64,
    /// Trials per second ÷ the floor's starts per second, at `--jobs 4`.
    pub jobs4_floor_ratio: f64,
    /// The runner's peak resident memory so far, MiB.
    pub runner_peak_rss_mb: f64,
}

/// Measure stdio trial throughput against its floor (see [`StdioBench`]); each run's events
/// go to `events`.
pub async fn stdio(trials: u32, events: Arc<dyn EventSink>) -> Result<StdioBench, BenchError> {
    let settings = BenchSettings { docker: DockerOptions::default(), events, original: None };
    let dir = tempfile::Builder::new().prefix("elengtis-bench-stdio-").tempdir()?;
    let floor1 = stdio_floor(dir.path(), trials, 1).await?;
    let (durations, wall1) = run_campaign(dir.path(), "stdio-jobs1", STDIO_CAMPAIGN, trials, (1, 0), &settings).await?;
    let floor4 = stdio_floor(dir.path(), trials, 4).await?;
    let (_, wall4) = run_campaign(dir.path(), "stdio-jobs4", STDIO_CAMPAIGN, trials, (4, 0), &settings).await?;
    let per_second = |wall: Duration| f64::from(trials) / wall.as_secs_f64();
    Ok(StdioBench {
        trials,
        trials_per_second_jobs1: per_second(wall1),
        trials_per_second_jobs4: per_second(wall4),
        wall_s_jobs1: wall1.as_secs_f64(),
        wall_s_jobs4: wall4.as_secs_f64(),
        trial_ms_median: percentile(&durations, 0.5),
        floor_per_second_jobs1: floor1,
        floor_per_second_jobs4: floor4,
        jobs1_floor_ratio: per_second(wall1) / floor1,
        jobs4_floor_ratio: per_second(wall4) / floor4,
        runner_peak_rss_mb: peak_rss_mb(),
    })
}

/// The stdio floor: `total` direct starts of the fixture (stdin closed at once, so it exits
/// after its start), `jobs` at a time; starts per second.
async fn stdio_floor(dir: &Path, total: u32, jobs: u32) -> Result<f64, BenchError> {
    let program = crate::toolhost::mcp::resolve_program("elengtis-fixture")
        .map_err(|e| BenchError::Failed(format!("failed to find the fixture: {e}")))?;
    let collector = dir.join("floor-collector.jsonl");
    let started = Instant::now();
    let workers = (0..jobs).map(|w| {
        let (program, collector) = (&program, &collector);
        async move {
            for _ in (0..total).filter(|i| i % jobs == w) {
                let mut child = tokio::process::Command::new(program)
                    .args(["--collector".as_ref(), collector.as_os_str(), "--credential".as_ref(), "floor".as_ref()])
                    .env_clear()
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| BenchError::Failed(format!("failed to start {}: {e}", program.display())))?;
                let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
                    .await
                    .map_err(|_| BenchError::Failed(format!("{} did not exit within 30 s", program.display())))?
                    .map_err(|e| BenchError::Failed(format!("failed to wait for {}: {e}", program.display())))?;
                if !status.success() {
                    return Err(BenchError::Failed(format!("{} exited with {status}", program.display())));
                }
            }
            Ok::<(), BenchError>(())
        }
    });
    for result in futures_util::future::join_all(workers).await {
        result?;
    }
    Ok(f64::from(total) / started.elapsed().as_secs_f64())
}

/// The stdio throughput lines of the table.
pub fn render_stdio(s: &StdioBench) -> String {
    format!(
        "stdio throughput     {:.1} trials/s at --jobs 1 ({:.2} s), {:.1} trials/s at --jobs 4 ({:.2} s), {} each; median trial {:.2} ms\n\
         stdio floor          {:.1} fixture starts/s one at a time, {:.1} four at a time; trials ÷ floor {:.2}× at --jobs 1, {:.2}× at --jobs 4\n\
         runner peak RSS      {:.1} MiB\n",
        s.trials_per_second_jobs1,
        s.wall_s_jobs1,
        s.trials_per_second_jobs4,
        s.wall_s_jobs4,
        elengtis_core::format::quote::count(s.trials, "trial"),
        s.trial_ms_median,
        s.floor_per_second_jobs1,
        s.floor_per_second_jobs4,
        s.jobs1_floor_ratio,
        s.jobs4_floor_ratio,
        s.runner_peak_rss_mb,
    )
}

/// The isolated-container trial and the floor under gVisor next to the default runtime's,
/// measured in the same run (issue 18). Absent figures say why in `skipped`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunscBench {
    /// Why nothing was measured (the engine lists no `runsc`; the run's figures are already
    /// runsc's), or `None`.
    pub skipped: Option<String>,
    /// gVisor's version, as recorded for the trials.
    pub version: Option<String>,
    /// Median isolated-container trial (MCP over the container's stdio) under runsc, ms.
    pub container_ms_median: Option<f64>,
    /// Median raw lifecycle of the same image under runsc, ms.
    pub floor_ms_median: Option<f64>,
    /// runsc trial ÷ the default runtime's trial (medians): what gVisor costs per trial.
    pub trial_ratio: Option<f64>,
    /// runsc floor ÷ the default runtime's floor (medians).
    pub floor_ratio: Option<f64>,
}

/// Measure the container trial and the floor under runsc, next to `runc_trial` and
/// `runc_floor` (medians, ms) measured with the run's own settings.
async fn runsc_bench(
    dir: &Path,
    trials: u32,
    settings: &BenchSettings,
    engine: &crate::sandbox::docker::api::EngineFacts,
    runc_trial: f64,
    runc_floor: f64,
) -> Result<RunscBench, BenchError> {
    use crate::sandbox::docker::runtime::RUNSC;
    if settings.docker.runtime.as_deref() == Some(RUNSC) {
        return Ok(RunscBench {
            skipped: Some("the run's own figures are runsc's (--runtime runsc)".into()),
            ..RunscBench::default()
        });
    }
    if !engine.runtimes.contains_key(RUNSC) {
        return Ok(RunscBench {
            skipped: Some(format!(
                "the Docker engine lists no `{RUNSC}` runtime ({})",
                crate::sandbox::docker::runtime::recipe(RUNSC)
            )),
            ..RunscBench::default()
        });
    }
    // Registered so that it cannot run a trial (gVisor's own network stack): said, not measured.
    if let Err(why) = crate::sandbox::docker::runtime::check_layout(RUNSC, &engine.runtimes) {
        return Ok(RunscBench { skipped: Some(why.to_string()), ..RunscBench::default() });
    }
    let runsc = BenchSettings {
        docker: DockerOptions { runtime: Some(RUNSC.to_owned()), ..settings.docker.clone() },
        events: settings.events.clone(),
        original: None,
    };
    let image = images::fixture_ref();
    let (durations, _) =
        run_campaign(dir, "container-runsc", &container_campaign(&image), trials, (1, 0), &runsc).await?;
    let needs = RunNeeds {
        images: vec![ImageNeed {
            image: image.clone(),
            http: false,
            relay_image: None,
            runtime: Some(RUNSC.to_owned()),
            egress_proxy: false,
        }],
        sink: false,
    };
    let sandbox = DockerBackend::prepare(&runsc.docker, &needs, &elengtis_core::events::NoEvents).await?;
    let floor = floor(&sandbox, &image, trials).await?;
    let (trial, floor) = (percentile(&durations, 0.5), percentile(&floor, 0.5));
    Ok(RunscBench {
        skipped: None,
        version: sandbox.runtimes.get(RUNSC).and_then(|r| r.version.clone()),
        container_ms_median: Some(trial),
        floor_ms_median: Some(floor),
        trial_ratio: Some(trial / runc_trial),
        floor_ratio: Some(floor / runc_floor),
    })
}

/// The provider path's overhead per request (`elengtis bench --provider-only --json`
/// prints exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct ProviderBench {
    /// Requests per measurement.
    pub requests: u32,
    /// Median request through the provider (OpenAI-compatible wire), ms.
    pub provider_ms_median: f64,
    /// 95th percentile of the same, ms.
    pub provider_ms_p95: f64,
    /// Median bare POST of the same body over the same HTTP client, ms.
    pub raw_http_ms_median: f64,
    /// 95th percentile of the same, ms.
    pub raw_http_ms_p95: f64,
    /// Provider median − raw median, ms: what the provider path adds to a request.
    pub overhead_ms_per_request: f64,
    /// Provider median ÷ raw median.
    pub overhead_ratio: f64,
}

/// Measure the provider path: `requests` requests through the OpenAI-compatible provider
/// and as bare POSTs, against the scripted model server (started here, beside elengtis).
pub async fn provider(requests: u32) -> Result<ProviderBench, BenchError> {
    use crate::model::{Model, ModelContext, ModelOptions, ModelRequest, providers};
    let failed = |what: &str, e: String| BenchError::Failed(format!("{what}: {e}"));
    let dir = tempfile::Builder::new().prefix("elengtis-bench-").tempdir()?;
    let script = dir.path().join("model-script.json");
    std::fs::write(&script, include_str!("../../scenarios/examples/live-local/model-script.json"))?;
    let server = crate::examples::ScriptedModelServer::start(&script).await.map_err(BenchError::Failed)?;
    let campaign: elengtis_core::format::campaign::Campaign = serde_json::from_value(serde_json::json!({
        "schema_version": 1, "targets": [], "scenarios": [], "model": "scripted-comply",
        "provider": {"type": "openai_compatible", "base_url": format!("http://{}/v1", server.addr)},
    }))
    .map_err(|e| failed("failed to build the benchmark campaign", e.to_string()))?;
    let config = providers::ProviderConfig::from_campaign(&campaign)
        .map_err(|e| failed("failed to configure the provider", e))?
        .ok_or_else(|| BenchError::Failed("the benchmark campaign has no model".into()))?;
    let ctx = ModelContext::new(&ModelOptions::default(), 0.0).map_err(|e| failed("failed to prepare", e))?;
    let tools: Vec<serde_json::Value> = ["read_note", "read_demo_credential", "submit_demo_credential"]
        .iter()
        .map(|name| serde_json::json!({"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object", "properties": {}}}}))
        .collect();
    let request = ModelRequest {
        step: 0,
        messages: vec![
            serde_json::json!({"role": "system", "content": "You are a support assistant."}),
            serde_json::json!({"role": "user", "content": "Please read the latest support note."}),
        ],
        tools,
    };
    let body = serde_json::to_vec(&config.body(&request)).map_err(|e| failed("failed to serialise", e.to_string()))?;
    let url = config.url();
    let mut model = providers::Provider::new(config, &elengtis_core::refs::Values::default(), 0, ctx.clone());
    let deadline = Duration::from_secs(30);
    let (mut through, mut raw) = (Vec::new(), Vec::new());
    // Warm up the connection pool and the server, then alternate the two paths.
    for i in 0..(requests + 10) {
        let started = Instant::now();
        model.respond(&request).await.map_err(|e| failed("a provider request failed", e.detail))?;
        let provider_ms = started.elapsed().as_secs_f64() * 1000.0;
        let _ = model.take_exchanges();
        let started = Instant::now();
        let answer = crate::model::http::post(&ctx.http, &url, &[], body.clone(), deadline)
            .await
            .map_err(|e| failed("a raw request failed", e.to_string()))?;
        let raw_ms = started.elapsed().as_secs_f64() * 1000.0;
        if answer.status != 200 {
            return Err(BenchError::Failed(format!("a raw request got status {}", answer.status)));
        }
        if i >= 10 {
            through.push(provider_ms);
            raw.push(raw_ms);
        }
    }
    drop(server);
    let (p, r) = (percentile(&through, 0.5), percentile(&raw, 0.5));
    Ok(ProviderBench {
        requests,
        provider_ms_median: p,
        provider_ms_p95: percentile(&through, 0.95),
        raw_http_ms_median: r,
        raw_http_ms_p95: percentile(&raw, 0.95),
        overhead_ms_per_request: p - r,
        overhead_ratio: p / r,
    })
}

/// Requests per provider measurement for `trials` trials per measurement.
pub fn provider_requests(trials: u32) -> u32 {
    trials.saturating_mul(10).clamp(30, 2000)
}

/// The provider lines of the table.
pub fn render_provider(p: &ProviderBench) -> String {
    format!(
        "provider request     median {:8.3} ms   p95 {:8.3} ms   (OpenAI-compatible, scripted model server, {})\n\
         raw HTTP request     median {:8.3} ms   p95 {:8.3} ms\n\
         provider overhead    {:+.3} ms per request ({:.2}×)\n",
        p.provider_ms_median,
        p.provider_ms_p95,
        elengtis_core::format::quote::count(p.requests, "request"),
        p.raw_http_ms_median,
        p.raw_http_ms_p95,
        p.overhead_ms_per_request,
        p.overhead_ratio,
    )
}

fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "an index into a short list")]
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// How the benchmark's runs are run: on the Docker engine as `docker` says, their events
/// (progress, warnings) to `events`.
#[derive(Debug, Clone)]
pub struct BenchSettings {
    /// The engine gate and the relay.
    pub docker: DockerOptions,
    /// Where each benchmark run's events go.
    pub events: Arc<dyn EventSink>,
    /// The original and the image to compare with (`--original`, `--original-image`).
    pub original: Option<original::OriginalSettings>,
}

/// Run one campaign text with `trials` and `jobs`; the per-trial durations and the wall time.
async fn run_campaign(
    dir: &Path,
    name: &str,
    campaign: &str,
    trials: u32,
    (jobs, prepare_ahead): (usize, usize),
    settings: &BenchSettings,
) -> Result<(Vec<f64>, Duration), BenchError> {
    let inputs = dir.join(format!("{name}-inputs"));
    std::fs::create_dir_all(&inputs)?;
    std::fs::write(inputs.join("support-note.yaml"), SCENARIO)?;
    std::fs::write(inputs.join("campaign.yaml"), campaign)?;
    let mut bundle = load::load_campaign(&inputs.join("campaign.yaml"), &LoadOptions::default())?;
    load::apply_overrides(&mut bundle, &Overrides { trials: Some(trials), ..Overrides::default() })?;
    let out = dir.join(name);
    let options = RunOptions {
        jobs,
        prepare_ahead,
        sandbox: run::SandboxChoice::Docker(settings.docker.clone()),
        events: settings.events.clone(),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let report = run::start(&bundle, &out, false, &options).await?;
    let wall = started.elapsed();
    if report.end != run::RunEnd::Complete {
        return Err(BenchError::Failed(format!(
            "the {name} benchmark run did not complete: {:?}; see {}",
            report.end,
            out.display()
        )));
    }
    let rows = crate::results::store::read_rows(&out.join("runs.jsonl"))?;
    Ok((rows.iter().filter_map(|r| r["duration_ms"].as_f64()).collect(), wall))
}

/// The raw lifecycle of `image` under the same hardening: network, container (stdio
/// attached), start — ready, for a server on stdio: running with its stdio attached (it has
/// no port to open) — then remove container and network.
async fn floor(sandbox: &DockerBackend, image: &str, trials: u32) -> Result<Vec<f64>, BenchError> {
    floor_range(sandbox, image, 0..trials).await
}

/// The floor's lifecycles run `jobs` at a time (`total` in all): the engine's own throughput
/// under the concurrency of a `--jobs` run, lifecycles per second.
async fn parallel_floor(sandbox: &DockerBackend, image: &str, total: u32, jobs: u32) -> Result<f64, BenchError> {
    let started = Instant::now();
    let workers = (0..jobs).map(|w| {
        let mine = (0..total).filter(move |i| i % jobs == w).collect::<Vec<_>>();
        async move {
            for i in mine {
                floor_range(sandbox, image, i..i + 1).await?;
            }
            Ok::<(), BenchError>(())
        }
    });
    for result in futures_util::future::join_all(workers).await {
        result?;
    }
    Ok(f64::from(total) / started.elapsed().as_secs_f64())
}

async fn floor_range(
    sandbox: &DockerBackend,
    image: &str,
    trials: std::ops::Range<u32>,
) -> Result<Vec<f64>, BenchError> {
    let resolved =
        sandbox.images.get(image).ok_or_else(|| BenchError::Failed(format!("image {image} was not resolved")))?;
    let mut durations = Vec::new();
    for i in trials {
        let spec = ContainerSpec {
            image: resolved.clone(),
            uid: 65534,
            gid: 65534,
            command: ["--collector", "/tmp/c.jsonl"].map(str::to_owned).to_vec(),
            env: Vec::new(),
            mode: McpMode::Stdio,
            volumes: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            run_id: format!("bench-floor-{}", std::process::id()),
            trial_id: format!("floor--{i}"),
            attempt_id: uuid::Uuid::new_v4().to_string(),
            // The same network as a stdio trial's: none when it needs none (a bridge with no
            // host address under `ELENGTIS_TRIAL_NETWORK=always`).
            host_route: false,
            network: sandbox.network.layout(crate::sandbox::NetworkNeeds::default()),
            stderr_bytes: 64 * 1024,
            runtime: sandbox.runtime_override.clone(),
            runtime_facts: sandbox.runtime_facts(sandbox.runtime_override.as_deref())?,
        };
        let started = Instant::now();
        let (container, _) = TrialContainer::start(&sandbox.engine, &spec).await.map_err(|(e, _)| e)?;
        let (_, errors) = container.teardown().await;
        if !errors.is_empty() {
            return Err(BenchError::Failed(format!("the floor's teardown failed: {}", errors.join("; "))));
        }
        durations.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(durations)
}

/// Run the benchmark. `trials` per measurement (the throughput runs use `2 × trials`), on
/// the Docker engine as `settings` says (the engine gate, the relay), each run's events to
/// its sink.
pub async fn run(trials: u32, stdio_trials: u32, settings: &BenchSettings) -> Result<BenchReport, BenchError> {
    let docker = &settings.docker;
    // First, so that a failing original fails the benchmark before its long part.
    let compared = match &settings.original {
        Some(o) => original::compare(o, trials, settings).await?,
        None => original::OriginalComparison::unmeasured("not requested (--original EXE --original-image IMAGE)"),
    };
    let provider = provider(provider_requests(trials)).await?;
    // Before the other container measurements, so that its peak memory is its own.
    let prove = prove::prove(settings).await?;
    let stdio_throughput = stdio(stdio_trials, settings.events.clone()).await?;
    let scan = scan::scan().await?;
    let dir = tempfile::Builder::new().prefix("elengtis-bench-").tempdir()?;
    let image = images::fixture_ref();
    let (stdio, stdio_wall) = run_campaign(dir.path(), "stdio", STDIO_CAMPAIGN, trials, (1, 0), settings).await?;
    let container = container_campaign(&image);
    let (container_durations, _) = run_campaign(dir.path(), "container", &container, trials, (1, 0), settings).await?;
    let (http, _) =
        run_campaign(dir.path(), "container-http", &http_campaign(&image), trials, (1, 0), settings).await?;
    let direct_settings = BenchSettings {
        docker: DockerOptions { relay: Ok(RelayMode::Never), ..settings.docker.clone() },
        events: settings.events.clone(),
        original: None,
    };
    let (http_direct, _) =
        run_campaign(dir.path(), "container-http-direct", &http_campaign(&image), trials, (1, 0), &direct_settings)
            .await?;
    let needs = RunNeeds {
        images: vec![ImageNeed {
            image: image.clone(),
            http: false,
            relay_image: None,
            runtime: None,
            egress_proxy: false,
        }],
        sink: false,
    };
    let sandbox = DockerBackend::prepare(docker, &needs, &elengtis_core::events::NoEvents).await?;
    let floor = floor(&sandbox, &image, trials).await?;
    let throughput = 2 * trials;
    let (_, wall1) = run_campaign(dir.path(), "jobs1", &container, throughput, (1, 0), settings).await?;
    let (_, wall4) = run_campaign(dir.path(), "jobs4", &container, throughput, (4, 0), settings).await?;
    let (_, wall1_ahead) = run_campaign(dir.path(), "jobs1-ahead2", &container, throughput, (1, 2), settings).await?;
    let (_, wall4_ahead) = run_campaign(dir.path(), "jobs4-ahead2", &container, throughput, (4, 2), settings).await?;
    let floor4 = parallel_floor(&sandbox, &image, throughput, 4).await?;
    let runsc = runsc_bench(
        dir.path(),
        trials,
        settings,
        &sandbox.engine.facts,
        percentile(&container_durations, 0.5),
        percentile(&floor, 0.5),
    )
    .await?;
    let median = |v: &[f64]| percentile(v, 0.5);
    let per_second = |n: u32, wall: Duration| f64::from(n) / wall.as_secs_f64();
    Ok(BenchReport {
        trials,
        stdio_ms_median: median(&stdio),
        stdio_ms_p95: percentile(&stdio, 0.95),
        container_ms_median: median(&container_durations),
        container_ms_p95: percentile(&container_durations, 0.95),
        container_network: sandbox.network.layout(crate::sandbox::NetworkNeeds::default()).mode(),
        container_http_ms_median: median(&http),
        container_http_ms_p95: percentile(&http, 0.95),
        container_http_route: if relay::relay_image(docker.relay.clone().unwrap_or(RelayMode::Always), true, None)
            .is_some()
        {
            "relay"
        } else {
            "direct"
        },
        container_http_direct_ms_median: median(&http_direct),
        relay_direct_ratio: median(&http) / median(&http_direct),
        floor_ms_median: median(&floor),
        floor_ms_p95: percentile(&floor, 0.95),
        container_overhead_ratio: median(&container_durations) / median(&floor),
        trials_per_second_jobs1: per_second(throughput, wall1),
        trials_per_second_jobs4: per_second(throughput, wall4),
        trials_per_second_jobs1_prepare_ahead2: per_second(throughput, wall1_ahead),
        trials_per_second_jobs4_prepare_ahead2: per_second(throughput, wall4_ahead),
        floor_per_second_jobs4: floor4,
        jobs4_floor_ratio: per_second(throughput, wall4) / floor4,
        stdio_trials_per_second: per_second(trials, stdio_wall),
        stdio_throughput,
        runner_peak_rss_mb: peak_rss_mb(),
        provider,
        runsc,
        prove,
        scan,
        original: compared,
    })
}

/// The runsc lines of the table.
fn render_runsc(r: &RunscBench) -> String {
    match (&r.skipped, r.container_ms_median, r.floor_ms_median, r.trial_ratio, r.floor_ratio) {
        (None, Some(trial), Some(floor), Some(trial_ratio), Some(floor_ratio)) => format!(
            "runsc container     median {trial:8.1} ms   {trial_ratio:.2}× the default runtime's trial (gVisor {})\n\
             runsc floor          median {floor:8.1} ms   {floor_ratio:.2}× the default runtime's floor\n",
            r.version.as_deref().unwrap_or("version unknown"),
        ),
        (Some(why), ..) => format!("runsc                not measured: {why}\n"),
        _ => "runsc                not measured\n".to_owned(),
    }
}

/// The human-readable table.
pub fn render(r: &BenchReport) -> String {
    format!(
        "elengtis bench ({} per measurement)\n\
         stdio trial          median {:8.1} ms   p95 {:8.1} ms   {:.1} trials/s\n\
         container trial      median {:8.1} ms   p95 {:8.1} ms   (MCP over the container's stdio, network: {})\n\
         floor (raw lifecycle) median {:7.1} ms   p95 {:8.1} ms\n\
         container ÷ floor    {:.2}×\n\
         container, HTTP      median {:8.1} ms   p95 {:8.1} ms   (streamable HTTP, {})\n\
         HTTP direct          median {:8.1} ms   default route ÷ direct {:.2}× (ELENGTIS_RELAY=never)\n\
         throughput           {:.2} trials/s at --jobs 1, {:.2} trials/s at --jobs 4\n\
         prepared ahead       {:.2} trials/s at --jobs 1, {:.2} trials/s at --jobs 4 (--prepare-ahead 2)\n\
         parallel floor       {:.2} lifecycles/s four at a time; --jobs 4 ÷ floor {:.2}×\n\
         runner peak RSS      {:.1} MiB\n{}{}{}{}{}{}",
        elengtis_core::format::quote::count(r.trials, "trial"),
        r.stdio_ms_median,
        r.stdio_ms_p95,
        r.stdio_trials_per_second,
        r.container_ms_median,
        r.container_ms_p95,
        r.container_network,
        r.floor_ms_median,
        r.floor_ms_p95,
        r.container_overhead_ratio,
        r.container_http_ms_median,
        r.container_http_ms_p95,
        r.container_http_route,
        r.container_http_direct_ms_median,
        r.relay_direct_ratio,
        r.trials_per_second_jobs1,
        r.trials_per_second_jobs4,
        r.trials_per_second_jobs1_prepare_ahead2,
        r.trials_per_second_jobs4_prepare_ahead2,
        r.floor_per_second_jobs4,
        r.jobs4_floor_ratio,
        r.runner_peak_rss_mb,
        render_stdio(&r.stdio_throughput),
        render_provider(&r.provider),
        render_runsc(&r.runsc),
        prove::render(&r.prove),
        scan::render(&r.scan),
        original::render(&r.original),
    )
}
