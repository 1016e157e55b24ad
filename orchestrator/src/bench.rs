//! `elengtis bench`: what isolation costs, measured in one run against its own floor.
//!
//! The same small campaign over the bundled fixture runs as stdio trials and as
//! isolated-container trials that speak MCP over the container's stdio, so the two differ
//! by the isolation alone; in the same run, through the same API and with the same
//! hardening, the raw lifecycle of the same image (network, create with attach, start,
//! remove) is measured as the floor. The same scenario also runs against the fixture as a
//! streamable-HTTP server in its container, reached the default way (through a relay
//! container), to show what that transport costs. Figures are printed, never asserted.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::run::{self, RunOptions};
use crate::sandbox::docker::container::{ContainerSpec, TrialContainer};
use crate::sandbox::docker::{DockerBackend, DockerOptions, RelayMode, images, relay};
use crate::sandbox::{ImageNeed, McpMode, RunNeeds};
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
    /// Container trial ÷ floor (medians).
    pub container_overhead_ratio: f64,
    /// Isolated-container trials per second at `--jobs 1`.
    pub trials_per_second_jobs1: f64,
    /// Isolated-container trials per second at `--jobs 4`.
    pub trials_per_second_jobs4: f64,
    /// Stdio trials per second at `--jobs 1`.
    pub stdio_trials_per_second: f64,
    /// The runner's peak resident memory, MiB.
    pub runner_peak_rss_mb: f64,
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

/// Run one campaign text with `trials` and `jobs`; the per-trial durations and the wall time.
async fn run_campaign(
    dir: &Path,
    name: &str,
    campaign: &str,
    trials: u32,
    jobs: usize,
    docker: &DockerOptions,
) -> Result<(Vec<f64>, Duration), BenchError> {
    let inputs = dir.join(format!("{name}-inputs"));
    std::fs::create_dir_all(&inputs)?;
    std::fs::write(inputs.join("support-note.yaml"), SCENARIO)?;
    std::fs::write(inputs.join("campaign.yaml"), campaign)?;
    let mut bundle = load::load_campaign(&inputs.join("campaign.yaml"), &LoadOptions::default())?;
    load::apply_overrides(&mut bundle, &Overrides { trials: Some(trials), ..Overrides::default() })?;
    let out = dir.join(name);
    let options = RunOptions { jobs, sandbox: run::SandboxChoice::Docker(docker.clone()), ..RunOptions::default() };
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
    let resolved =
        sandbox.images.get(image).ok_or_else(|| BenchError::Failed(format!("image {image} was not resolved")))?;
    let mut durations = Vec::new();
    for i in 0..trials {
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
            // The same network as a stdio trial's: no host address on the bridge.
            host_route: false,
            stderr_bytes: 64 * 1024,
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
/// the Docker engine as `docker` says (the engine gate, the relay).
pub async fn run(trials: u32, docker: &DockerOptions) -> Result<BenchReport, BenchError> {
    let allow = docker;
    let dir = tempfile::Builder::new().prefix("elengtis-bench-").tempdir()?;
    let image = images::fixture_ref();
    let (stdio, stdio_wall) = run_campaign(dir.path(), "stdio", STDIO_CAMPAIGN, trials, 1, allow).await?;
    let (container, _) = run_campaign(dir.path(), "container", &container_campaign(&image), trials, 1, allow).await?;
    let (http, _) = run_campaign(dir.path(), "container-http", &http_campaign(&image), trials, 1, allow).await?;
    let needs =
        RunNeeds { images: vec![ImageNeed { image: image.clone(), http: false, relay_image: None }], sink: false };
    let sandbox = DockerBackend::prepare(docker, &needs, &elengtis_core::events::NoEvents).await?;
    let floor = floor(&sandbox, &image, trials).await?;
    let throughput = 2 * trials;
    let (_, wall1) = run_campaign(dir.path(), "jobs1", &container_campaign(&image), throughput, 1, allow).await?;
    let (_, wall4) = run_campaign(dir.path(), "jobs4", &container_campaign(&image), throughput, 4, allow).await?;
    let median = |v: &[f64]| percentile(v, 0.5);
    let per_second = |n: u32, wall: Duration| f64::from(n) / wall.as_secs_f64();
    Ok(BenchReport {
        trials,
        stdio_ms_median: median(&stdio),
        stdio_ms_p95: percentile(&stdio, 0.95),
        container_ms_median: median(&container),
        container_ms_p95: percentile(&container, 0.95),
        container_http_ms_median: median(&http),
        container_http_ms_p95: percentile(&http, 0.95),
        container_http_route: if relay::relay_image(docker.relay.clone().unwrap_or(RelayMode::Always), true, None)
            .is_some()
        {
            "relay"
        } else {
            "direct"
        },
        floor_ms_median: median(&floor),
        floor_ms_p95: percentile(&floor, 0.95),
        container_overhead_ratio: median(&container) / median(&floor),
        trials_per_second_jobs1: per_second(throughput, wall1),
        trials_per_second_jobs4: per_second(throughput, wall4),
        stdio_trials_per_second: per_second(trials, stdio_wall),
        runner_peak_rss_mb: peak_rss_mb(),
    })
}

/// The human-readable table.
pub fn render(r: &BenchReport) -> String {
    format!(
        "elengtis bench ({} trials per measurement)\n\
         stdio trial          median {:8.1} ms   p95 {:8.1} ms   {:.1} trials/s\n\
         container trial      median {:8.1} ms   p95 {:8.1} ms   (MCP over the container's stdio)\n\
         floor (raw lifecycle) median {:7.1} ms   p95 {:8.1} ms\n\
         container ÷ floor    {:.2}×\n\
         container, HTTP      median {:8.1} ms   p95 {:8.1} ms   (streamable HTTP, {})\n\
         throughput           {:.2} trials/s at --jobs 1, {:.2} trials/s at --jobs 4\n\
         runner peak RSS      {:.1} MiB\n",
        r.trials,
        r.stdio_ms_median,
        r.stdio_ms_p95,
        r.stdio_trials_per_second,
        r.container_ms_median,
        r.container_ms_p95,
        r.floor_ms_median,
        r.floor_ms_p95,
        r.container_overhead_ratio,
        r.container_http_ms_median,
        r.container_http_ms_p95,
        r.container_http_route,
        r.trials_per_second_jobs1,
        r.trials_per_second_jobs4,
        r.runner_peak_rss_mb,
    )
}
