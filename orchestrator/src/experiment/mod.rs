//! `elengtis experiment plan` and `elengtis experiment run`: the live engine comparison
//! (docs/experiments.md).
//!
//! `plan` ([`bundle`]) turns a model profile file into a frozen bundle: the scenarios, one
//! one-trial campaign per cell and `run-order.json` (the pure parts are
//! [`elengtis_core::experiment`]). `run` ([`runner`]) preflights every cell, then runs the
//! frozen order, one results directory per cell, under one spend cap and one model-call cap
//! over the whole experiment, and resumes after a stop.

pub mod bundle;
pub mod runner;

use std::path::PathBuf;

use elengtis_core::experiment::Scenario;
use elengtis_core::format::Diagnostic;
use elengtis_core::format::campaign::LoopKind;

use crate::exit_codes;
use crate::run::{RunError, RunOptions};

/// `elengtis experiment …`.
#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCommand {
    /// Freeze a live comparison: models × engines × scenarios in seeded, shuffled blocks,
    /// one one-trial campaign per cell, the scenarios copied in, and run-order.json.
    Plan(PlanArgs),
    /// Preflight and run a frozen plan in its recorded order under a spend cap and a
    /// model-call cap (one results directory per cell); --dry-run, --smoke, --resume.
    Run(RunArgs),
}

/// `elengtis experiment plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The model profile file: `models: [{id, model, pricing: {input_per_million,
    /// output_per_million}, generation, provider}]`.
    #[arg(long)]
    pub models: PathBuf,
    /// Blocks: each is a fresh shuffle of every cell.
    #[arg(long, default_value_t = elengtis_core::experiment::plan::DEFAULT_BLOCKS,
          value_parser = clap::value_parser!(u32).range(1..=999))]
    pub blocks: u32,
    /// The shuffle's seed.
    #[arg(long, default_value_t = elengtis_core::experiment::plan::DEFAULT_SEED)]
    pub seed: u64,
    /// Engines of each (model, scenario) cell, comma-separated or as several values (default:
    /// all four).
    #[arg(long, value_delimiter = ',', num_args = 1.., action = clap::ArgAction::Append, default_values_t = [LoopKind::Reference, LoopKind::Graph, LoopKind::Langchain, LoopKind::CreateAgent])]
    pub engines: Vec<LoopKind>,
    /// Scenarios, comma-separated or as several values: support-note, benign-refusal, tool-error (the default),
    /// authorized-workflow, injection-resistance, recoverable-tool-error, stateful-branch.
    #[arg(long, value_delimiter = ',', num_args = 1.., action = clap::ArgAction::Append, default_values_t = Scenario::DEFAULT)]
    pub scenarios: Vec<Scenario>,
    /// The experiment id every cell carries.
    #[arg(long, default_value = elengtis_core::experiment::plan::DEFAULT_EXPERIMENT_ID)]
    pub experiment_id: String,
    /// The hard spend cap over the whole experiment, in US dollars.
    #[arg(long, value_parser = parse_usd)]
    pub budget_usd: f64,
    /// The bundle directory to write (must not exist, or be empty).
    #[arg(long)]
    pub out: PathBuf,
}

/// `elengtis experiment run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The bundle's run-order.json (or the bundle directory).
    #[arg(long)]
    pub plan: PathBuf,
    /// Where the cells' results directories go (one per cell, named after it).
    #[arg(long)]
    pub results: PathBuf,
    /// The ceiling on model calls: a plan that could make more is refused, and the run stops
    /// before a cell that could take the calls made over it.
    #[arg(long)]
    pub max_model_calls: u64,
    /// A spend cap below the plan's (the plan's cap is the default and the ceiling).
    #[arg(long, value_parser = parse_usd)]
    pub budget_usd: Option<f64>,
    /// Preflight every cell (its campaign, its match with the plan, keys and bounds) and stop:
    /// no model call.
    #[arg(long, conflicts_with = "smoke")]
    pub dry_run: bool,
    /// Run the first block only, then fail unless every cell completed and made its required
    /// first tool call (finish reasons and malformed tool calls are reported).
    #[arg(long)]
    pub smoke: bool,
    /// Continue: cells already complete are skipped, incomplete ones resumed.
    #[arg(long)]
    pub resume: bool,
    /// Run one shard of the plan's blocks (`K/N`, `count:K/N`, `hash:K/N`, `index/N`; as `run
    /// --partition`, over the plan's blocks in order): every cell of a block runs on the same
    /// shard, so the blocked design survives. The spend cap is the plan's divided by N (or
    /// --budget-usd). Also ELENGTIS_PARTITION.
    #[arg(long, env = "ELENGTIS_PARTITION", value_name = "SPEC")]
    pub partition: Option<String>,
}

/// A dollar amount: a positive, finite number.
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!("expected a positive amount of US dollars, found `{text}`")),
    }
}

/// Why an experiment command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// The profile file has problems.
    #[error("failed to read the model profiles: {} problem{}\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" },
            .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Profiles(Vec<Diagnostic>),
    /// A file could not be read or written.
    #[error("failed to {what} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A bundle or results file could not be written.
    #[error(transparent)]
    Store(#[from] crate::results::store::StoreError),
    /// The command line asks for something that cannot be done.
    #[error("{0}")]
    Usage(String),
    /// The bundle directory already holds something.
    #[error("failed to plan: {} already exists and is not empty; choose a new --out (a frozen bundle is never overwritten)", .0.display())]
    BundleExists(PathBuf),
    /// The plan or one of its cells is not what the plan says.
    #[error("failed to preflight {}: {detail}", .path.display())]
    Plan {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A cell's campaign does not load.
    #[error("failed to preflight cell {cell}: {source}")]
    Cell {
        /// The cell.
        cell: String,
        /// The cause.
        source: elengtis_core::format::LoadError,
    },
    /// A cell cannot run here (a key variable not set, …).
    #[error("failed to preflight cell {cell}: {detail}")]
    Unavailable {
        /// The cell.
        cell: String,
        /// Why.
        detail: String,
    },
    /// A cell's results directory exists but `--resume` was not given.
    #[error("failed to run cell {cell}: {} exists; continue the recorded experiment with --resume", .dir.display())]
    CellExists {
        /// The cell.
        cell: String,
        /// Its results directory.
        dir: PathBuf,
    },
    /// A cell's run could not start or continue.
    #[error("failed to run cell {cell}: {source}")]
    Run {
        /// The cell.
        cell: String,
        /// The cause.
        source: RunError,
    },
}

impl ExperimentError {
    fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ExperimentError {
        let path = path.into();
        move |source| ExperimentError::Io { what, path, source }
    }

    /// The process exit code for this error (docs/exit-codes.md); `None` for a cell's run
    /// error, whose code is that [`RunError`]'s (see [`ExperimentError::run_error`]).
    pub fn exit_code(&self) -> Option<i32> {
        Some(match self {
            ExperimentError::Profiles(_) | ExperimentError::Plan { .. } | ExperimentError::Cell { .. } => {
                exit_codes::INVALID_CONFIG
            }
            ExperimentError::Io { .. } | ExperimentError::Store(_) => exit_codes::IO,
            ExperimentError::Usage(_) => exit_codes::USAGE,
            ExperimentError::BundleExists(_) | ExperimentError::CellExists { .. } => exit_codes::RESULTS_DIR,
            ExperimentError::Unavailable { .. } => exit_codes::UNAVAILABLE,
            ExperimentError::Run { .. } => return None,
        })
    }

    /// The run error of a cell that could not start or continue.
    pub fn run_error(&self) -> Option<&RunError> {
        match self {
            ExperimentError::Run { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Run an experiment command; `print` shows each line of its report as it comes.
///
/// # Errors
///
/// An [`ExperimentError`] when the plan cannot be made, or the run cannot start or continue.
pub async fn command(
    command: ExperimentCommand,
    options: RunOptions,
    print: &(dyn Fn(&str) + Sync),
) -> Result<i32, ExperimentError> {
    match command {
        ExperimentCommand::Plan(args) => {
            let report = bundle::plan(&args)?;
            print(&report);
            Ok(exit_codes::SUCCESS)
        }
        ExperimentCommand::Run(args) => runner::run(&args, options, print).await,
    }
}
