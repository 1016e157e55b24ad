//! `elengtis experiment plan`: write a frozen bundle.
//!
//! ```text
//! BUNDLE/
//!   run-order.json            the frozen plan (seed, profiles, runs in order, caps)
//!   commands.txt              the commands that preflight, smoke-test, run and analyse it
//!   scenarios/<id>.yaml       the scenarios, copied in (the bundle runs from any checkout)
//!   campaigns/<cell>.yaml     one one-trial campaign per cell
//! ```
//!
//! The bundle is written into a fresh sibling directory and renamed into place once every
//! campaign has loaded, so a bundle that exists is whole.

use std::path::{Path, PathBuf};

use elengtis_core::experiment::plan::{self, PlanSpec, RunOrder, Scenario};
use elengtis_core::experiment::profiles;
use elengtis_core::format::quote::count;
use elengtis_core::format::{read_limited, sha256_hex};
use elengtis_core::load;
use elengtis_core::validate::LoadOptions;

use super::{ExperimentError, PlanArgs};
use crate::results::store;

/// The original's scenario files, as the bundle copies them.
pub fn scenario_text(scenario: Scenario) -> &'static str {
    match scenario {
        Scenario::SupportNote => include_str!("../../../scenarios/experiments/live-comparison/support-note.yaml"),
        Scenario::BenignRefusal => include_str!("../../../scenarios/experiments/live-comparison/benign-refusal.yaml"),
        Scenario::ToolError => include_str!("../../../scenarios/experiments/live-comparison/tool-error.yaml"),
        Scenario::AuthorizedWorkflow => {
            include_str!("../../../scenarios/experiments/live-comparison/authorized-workflow.yaml")
        }
        Scenario::InjectionResistance => {
            include_str!("../../../scenarios/experiments/live-comparison/injection-resistance.yaml")
        }
        Scenario::RecoverableToolError => {
            include_str!("../../../scenarios/experiments/live-comparison/recoverable-tool-error.yaml")
        }
        Scenario::StatefulBranch => include_str!("../../../scenarios/experiments/live-comparison/stateful-branch.yaml"),
    }
}

/// Check the plan's settings beyond what the command line parser checks.
fn check(args: &PlanArgs) -> Result<(), ExperimentError> {
    let mut engines = args.engines.clone();
    engines.sort();
    engines.dedup();
    if engines.len() != args.engines.len() {
        return Err(ExperimentError::Usage(
            "failed to plan: --engines lists an engine twice; engines must be unique".into(),
        ));
    }
    let mut scenarios = args.scenarios.clone();
    scenarios.sort();
    scenarios.dedup();
    if scenarios.len() != args.scenarios.len() {
        return Err(ExperimentError::Usage(
            "failed to plan: --scenarios lists a scenario twice; scenarios must be unique".into(),
        ));
    }
    if args.engines.is_empty() || args.scenarios.is_empty() {
        return Err(ExperimentError::Usage("failed to plan: at least one engine and one scenario are needed".into()));
    }
    if args.experiment_id.trim().is_empty() {
        return Err(ExperimentError::Usage("failed to plan: --experiment-id must not be empty".into()));
    }
    Ok(())
}

/// Whether `dir` is absent or an empty directory.
fn usable_out(dir: &Path) -> Result<bool, ExperimentError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(error) => Err(ExperimentError::Io { what: "read", path: dir.to_owned(), source: error }),
    }
}

/// The commands that use the bundle, written to `commands.txt`.
fn commands(out: &Path, order: &RunOrder) -> String {
    let plan = out.join("run-order.json");
    let results = out.join("results");
    let run = format!(
        "elengtis experiment run --plan {} --results {} --max-model-calls {}",
        plan.display(),
        results.display(),
        order.max_model_calls
    );
    format!(
        "# Preflight every cell (no model call), smoke-test the first block, run the rest, analyse.\n\
         {run} --dry-run\n{run} --smoke\n{run} --resume\n\
         elengtis analyze $(for d in {}/*/; do printf -- '--input %s ' \"$d\"; done) --out {} --practical-margin-pp 10 --conformance-passed\n",
        results.display(),
        out.join("analysis").display()
    )
}

/// Write the bundle; returns the report to print.
///
/// # Errors
///
/// The profile file's problems, an output directory that is not empty, a campaign that does
/// not load, or a file that cannot be written.
pub fn plan(args: &PlanArgs) -> Result<String, ExperimentError> {
    check(args)?;
    let out = std::path::absolute(&args.out).map_err(ExperimentError::io("resolve", &args.out))?;
    if !usable_out(&out)? {
        return Err(ExperimentError::BundleExists(out));
    }
    let text = read_limited(&args.models).map_err(|error| match error {
        elengtis_core::format::LoadError::Read { path, source } => ExperimentError::Io { what: "read", path, source },
        elengtis_core::format::LoadError::Invalid(diagnostics) => ExperimentError::Profiles(diagnostics),
    })?;
    let profiles = profiles::parse(&args.models, &text).map_err(ExperimentError::Profiles)?;
    let spec = PlanSpec {
        profiles,
        models_sha256: sha256_hex(text.as_bytes()),
        engines: args.engines.clone(),
        scenarios: args.scenarios.clone(),
        blocks: args.blocks,
        seed: args.seed,
        experiment_id: args.experiment_id.clone(),
        budget_usd: args.budget_usd,
    };
    let order = plan::expand(&spec);

    let parent = out.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::fs::create_dir_all(&parent).map_err(ExperimentError::io("create", &parent))?;
    let name = out.file_name().map_or_else(|| "bundle".into(), |n| n.to_string_lossy().into_owned());
    let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let written = write_bundle(&staging, &out, &order);
    if let Err(error) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(error);
    }
    if out.exists() {
        // An empty directory (checked above): rename replaces it.
        std::fs::remove_dir(&out).map_err(ExperimentError::io("replace", &out))?;
    }
    std::fs::rename(&staging, &out).map_err(ExperimentError::io("move the bundle into", &out))?;
    let cells_per_block = order.runs.len() / order.blocks.max(1) as usize;
    Ok(format!(
        "planned {} ({} × {} × {}, {} of {cells_per_block}, seed {}), \
         at most {}, budget ${:.6}\nbundle: {}\nnext: {}",
        count(order.runs.len(), "cell"),
        count(order.models.len(), "model"),
        count(order.engines.len(), "engine"),
        count(order.scenarios.len(), "scenario"),
        count(order.blocks, "block"),
        order.seed,
        count(order.max_model_calls, "model call"),
        order.budget_usd,
        out.display(),
        out.join("commands.txt").display(),
    ))
}

/// Write every file of the bundle into `dir` (later renamed to `out`) and load every campaign.
fn write_bundle(dir: &Path, out: &Path, order: &RunOrder) -> Result<(), ExperimentError> {
    for sub in ["scenarios", "campaigns"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).map_err(ExperimentError::io("create", &path))?;
    }
    for scenario in &order.scenarios {
        let path = dir.join("scenarios").join(scenario.file_name());
        store::write_atomic(&path, scenario_text(*scenario).as_bytes())?;
    }
    for run in &order.runs {
        let Some(profile) = order.models.iter().find(|p| p.id == run.model_id) else {
            continue;
        };
        let path = dir.join(&run.config);
        let text = plan::campaign_text(order, run, profile);
        store::write_atomic(&path, text.as_bytes())?;
        // Keys are checked when the plan runs (its preflight), not where it is made.
        load::load_campaign(&path, &LoadOptions { check_env: false, ..LoadOptions::default() })
            .map_err(|source| ExperimentError::Cell { cell: run.result.clone(), source })?;
    }
    let path = dir.join("run-order.json");
    store::write_json_atomic(&path, order)?;
    let path = dir.join("commands.txt");
    store::write_atomic(&path, commands(out, order).as_bytes())?;
    Ok(())
}
