//! `elengtis preflight`: start each target, check the campaign's tool calls, calibrate, tear down.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::{self, SandboxChoice};
use elengtis::sandbox::docker::DockerOptions;
use elengtis_core::load;
use elengtis_core::validate::LoadOptions;
use serde_json::json;

use super::common::{EngineArgs, print_warnings};
use crate::output::{errln, out, outln};
use crate::render::Terminal;

#[derive(Debug, clap::Args)]
pub(crate) struct PreflightArgs {
    /// The campaign file.
    campaign: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    docker: EngineArgs,
}

pub(crate) async fn run(args: PreflightArgs) -> Result<i32, Error> {
    let PreflightArgs { campaign, json, docker } = args;
    preflight(&campaign, json, docker.options()).await
}

async fn preflight(path: &Path, json: bool, docker: DockerOptions) -> Result<i32, Error> {
    let bundle = load::load_campaign(path, &LoadOptions::default())?;
    print_warnings(&bundle.warnings);
    let choice = SandboxChoice::Docker(docker);
    let sandbox = run::prepare_sandbox(&bundle, &choice, &Terminal::new(false)).await?;
    let checks =
        elengtis::preflight::run(&bundle, elengtis::toolhost::mcp::Limits::default(), sandbox.as_deref()).await;
    let mut ok = checks.iter().all(|c| c.ok);
    // The scenarios' `calibrate` actions: can each check see a real effect? Only on targets
    // that passed: a calibration of a server that does not start says nothing more.
    let calibrations = if ok {
        let scratch = tempfile::Builder::new()
            .prefix("elengtis-calibration-")
            .tempdir()
            .map_err(|e| Error::Usage(format!("failed to create a scratch directory for the calibration: {e}")))?;
        let options = run::RunOptions {
            sandbox: sandbox.clone().map_or(choice, SandboxChoice::Prepared),
            jobs: 2,
            ..run::RunOptions::default()
        };
        elengtis::calibrate::run(&bundle, &scratch.path().join("results"), &options).await?
    } else {
        Vec::new()
    };
    ok &= calibrations.iter().all(elengtis::calibrate::Calibrated::ok);
    if json {
        outln!("{}", json!({"ok": ok, "targets": checks, "calibrations": calibrations}));
    } else {
        for check in &checks {
            if let Some(w) = &check.warning {
                errln!("WARNING: {w}");
            }
            // The target's line, then its findings (file:line:column: argument of tool: error).
            out!("{}", check.render());
        }
        for calibration in &calibrations {
            outln!("{}", calibration.line());
        }
    }
    Ok(if ok { exit_codes::SUCCESS } else { exit_codes::RUN_INCOMPLETE })
}
