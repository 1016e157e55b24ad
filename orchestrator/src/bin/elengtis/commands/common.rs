//! What several commands share: Docker options, the bundled images, target and model files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::run::{RunOptions, SandboxChoice};
use elengtis::sandbox::docker::runtime::RuntimeArg;
use elengtis::sandbox::docker::{self as docker, DockerOptions, RelayMode, TrialNetwork};
use elengtis_core::format;

use crate::output::errln;
use crate::render::{Terminal, interactive};

pub(super) fn print_warnings(warnings: &[format::Diagnostic]) {
    for w in warnings {
        errln!("{w}");
    }
}

/// `--partition SPEC` (or `ELENGTIS_PARTITION`), with K from `JOB_COMPLETION_INDEX` for
/// `index/N`.
pub(super) fn partition_arg(spec: Option<&str>) -> Result<Option<elengtis_core::partition::Partition>, Error> {
    let Some(spec) = spec else { return Ok(None) };
    let index = std::env::var("JOB_COMPLETION_INDEX").ok();
    elengtis_core::partition::parse(spec, index.as_deref()).map(Some).map_err(|e| Error::Usage(e.to_string()))
}

/// A target file (`--target`, `--guarded-target`) as a campaign target.
pub(super) fn target_file(path: &Path) -> Result<serde_json::Value, Error> {
    let target = elengtis_core::format::gate::load_target(path)?;
    serde_json::to_value(target).map_err(|e| Error::Usage(format!("failed to read the target {}: {e}", path.display())))
}

/// A model file: the campaign's model fields (as a gate file's `model`), strictly parsed.
pub(super) fn load_model_config(path: &Path) -> Result<elengtis_core::format::gate::LiveModel, Error> {
    use elengtis_core::format::{LoadError, parse_document_all};
    let text = elengtis_core::format::read_limited(path)?;
    parse_document_all::<elengtis_core::format::gate::LiveModel>(path, &text)
        .map(|(model, _)| model)
        .map_err(|d| Error::Load(LoadError::Invalid(d)))
}

/// The Docker sandbox a described target needs (`init`, `scan`); none for a stdio command.
/// The sandbox `init` and `scan` start their target in to list its tools (None: a stdio target).
pub(super) async fn target_sandbox(
    needs: Option<elengtis::sandbox::RunNeeds>,
    target: &elengtis::init::cli::TargetArgs,
) -> Result<Option<docker::DockerBackend>, Error> {
    match needs {
        Some(needs) => Ok(Some(
            docker::DockerBackend::prepare(
                &docker_options(target.allow_vulnerable_engine, &target.runtime),
                &needs,
                &Terminal::new(false),
            )
            .await?,
        )),
        None => Ok(None),
    }
}

/// Check the runtime the command's containers run under (`--runtime`, else the engine's
/// default: listed, and registered so that it runs the trial layout), pass the engine gate,
/// then make sure the bundled images exist and are made from the executables beside this one,
/// (re)making them when they are not: imported from those executables (seconds), else compiled
/// from the source tree (minutes, announced with progress), else an error saying what is
/// needed. A campaign's own `runtime:` is checked by the run, also before any trial.
pub(super) async fn ensure_images(options: &DockerOptions) -> Result<(), Error> {
    let engine = docker::api::connect().await?;
    docker::check_runtime(&engine, options.runtime.as_deref())?;
    // An engine accepted despite findings is reported by the run that follows.
    docker::engine_gate::check(&engine, options.allow_vulnerable_engine, &[]).await?;
    docker::images::ensure_bundled(&engine, &docker::images::Notify::stderr(interactive())).await?;
    Ok(())
}

/// `--record-fixtures DIR` / `--replay-fixtures DIR` (clap makes them exclusive).
pub(super) fn fixture_mode(
    record: Option<&PathBuf>,
    replay: Option<&PathBuf>,
) -> elengtis::model::fixtures::FixtureMode {
    use elengtis::model::fixtures::FixtureMode;
    match (record, replay) {
        (Some(dir), _) => FixtureMode::Record(dir.clone()),
        (None, Some(dir)) => FixtureMode::Replay(dir.clone()),
        (None, None) => FixtureMode::Off,
    }
}

/// `--allow-vulnerable-engine` and `--runtime`: how a command that starts containers reaches
/// the engine.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct EngineArgs {
    /// Run isolated trials even on a Docker engine or runtime with known container-escape
    /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
    #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
    pub(super) allow_vulnerable_engine: bool,
    #[command(flatten)]
    pub(super) runtime: RuntimeArg,
}

impl EngineArgs {
    /// The Docker options these flags (and the environment) give.
    pub(super) fn options(&self) -> DockerOptions {
        docker_options(self.allow_vulnerable_engine, &self.runtime)
    }
}

/// How runs use Docker: the engine gate as the flag says, the relay as `ELENGTIS_RELAY` says.
pub(super) fn docker_options(allow_vulnerable_engine: bool, runtime: &RuntimeArg) -> DockerOptions {
    DockerOptions {
        allow_vulnerable_engine,
        relay: RelayMode::from_env(),
        network: TrialNetwork::from_env(),
        runtime: runtime.runtime.clone(),
    }
}

pub(super) fn run_options(jobs: u16, docker: DockerOptions, events: Arc<Terminal>) -> RunOptions {
    RunOptions { jobs: jobs.into(), sandbox: SandboxChoice::Docker(docker), events, ..RunOptions::default() }
}
