//! `elengtis bench`: measure trials, the container lifecycle and the provider path.

use std::path::PathBuf;
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::sandbox::docker::{self as docker};
use serde_json::json;

use super::common::{EngineArgs, ensure_images};
use crate::output::{out, outln};
use crate::render::{OutputArgs, Terminal};

#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Trials per measurement.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    trials: u32,
    /// A quick run (3 trials per measurement), e.g. to check the benchmark works in CI.
    #[arg(long)]
    short: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    docker: EngineArgs,
    /// Measure only the live-model provider path against the scripted model server
    /// (no Docker needed).
    #[arg(long)]
    provider_only: bool,
    /// Measure only stdio trial throughput at --jobs 1 and --jobs 4, against the fixture's
    /// own start measured in the same run (no Docker needed).
    #[arg(long, conflicts_with_all = ["provider_only", "original"])]
    stdio_only: bool,
    /// Measure only one finding's prove (the bundled seed w4-send-email-via-note-injection,
    /// 29 legs and its calibration on both sides) at --jobs 4 and --jobs 1, against the legs' raw
    /// container lifecycle and a bridge per leg, measured in the same run.
    #[arg(long, conflicts_with_all = ["provider_only", "stdio_only", "original"])]
    prove_only: bool,
    /// Trials per stdio throughput measurement (--short: 30).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    stdio_trials: u32,
    /// Also run one model-free campaign on --original-image with the original Python tool
    /// (its `elengtis` executable, e.g. a venv's `bin/elengtis` from PyPI elengtis 0.1.0)
    /// and with this build at --jobs 1 and --jobs 4, and report ours ÷ original.
    #[arg(long, value_name = "EXE", requires = "original_image", conflicts_with = "provider_only")]
    original: Option<PathBuf>,
    /// The Python MCP HTTP server image for --original (see sandbox-images/pypi/README.md).
    #[arg(long, value_name = "IMAGE", requires = "original")]
    original_image: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) async fn run(args: BenchArgs) -> Result<i32, Error> {
    match args {
        BenchArgs { trials, short, json, provider_only: true, .. } => {
            let trials = if short { 3 } else { trials };
            let report = elengtis::bench::provider(elengtis::bench::provider_requests(trials)).await?;
            if json {
                outln!("{}", json!(report));
            } else {
                out!("{}", elengtis::bench::render_provider(&report));
            }
            Ok(exit_codes::SUCCESS)
        }
        BenchArgs { short, json, stdio_only: true, stdio_trials, output, .. } => {
            let stdio_trials = if short { 30 } else { stdio_trials };
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let report = elengtis::bench::stdio(stdio_trials, terminal.clone()).await;
            print_bench(&terminal, json, report, elengtis::bench::render_stdio)
        }
        BenchArgs { json, docker, prove_only: true, output, .. } => {
            ensure_images(&docker.options()).await?;
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let settings =
                elengtis::bench::BenchSettings { docker: docker.options(), events: terminal.clone(), original: None };
            let report = elengtis::bench::prove::prove(&settings).await;
            print_bench(&terminal, json, report, elengtis::bench::prove::render)
        }
        BenchArgs {
            trials,
            short,
            json,
            docker: engine_args,
            provider_only: false,
            stdio_only: false,
            prove_only: false,
            stdio_trials,
            output,
            original,
            original_image,
        } => {
            let original = match (original, original_image) {
                (Some(exe), Some(image)) => Some(bench_original(exe, image)?),
                _ => None,
            };
            let engine = docker::api::connect().await?;
            docker::check_runtime(&engine, engine_args.runtime.runtime.as_deref())?;
            let gate = docker::engine_gate::check(&engine, engine_args.allow_vulnerable_engine, &[]).await?;
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            if let Some(message) = gate.warning() {
                elengtis_core::events::EventSink::emit(
                    terminal.as_ref(),
                    &elengtis_core::events::Event::Warning { message },
                );
            }
            let trials = if short { 3 } else { trials };
            let settings =
                elengtis::bench::BenchSettings { docker: engine_args.options(), events: terminal.clone(), original };
            let stdio_trials = if short { 30 } else { stdio_trials };
            let report = elengtis::bench::run(trials, stdio_trials, &settings).await;
            print_bench(&terminal, json, report, elengtis::bench::render)
        }
    }
}

/// A benchmark's end: its progress display closed, then its report as one JSON object or as
/// the rendered table.
fn print_bench<T: serde::Serialize>(
    terminal: &Terminal,
    json: bool,
    report: Result<T, elengtis::bench::BenchError>,
    render: impl Fn(&T) -> String,
) -> Result<i32, Error> {
    terminal.finish();
    let report = report?;
    if json {
        outln!("{}", json!(report));
    } else {
        out!("{}", render(&report));
    }
    Ok(exit_codes::SUCCESS)
}

/// `bench --original EXE --original-image IMAGE`, checked before Docker is reached: EXE must
/// be an executable file (the original's `elengtis`), IMAGE a plausible reference.
fn bench_original(exe: PathBuf, image: String) -> Result<elengtis::bench::original::OriginalSettings, Error> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&exe) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {}
        Ok(_) => {
            return Err(Error::Usage(format!("--original {} is not an executable file", exe.display())));
        }
        Err(e) => return Err(Error::Usage(format!("failed to read --original {}: {e}", exe.display()))),
    }
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!("--original-image must be an image reference, got `{image}`")));
    }
    Ok(elengtis::bench::original::OriginalSettings { exe, image })
}
