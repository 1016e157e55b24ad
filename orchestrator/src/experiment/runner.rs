//! `elengtis experiment run`: preflight a frozen plan, then run its cells in the recorded
//! order, one results directory per cell (`RESULTS/<cell>`), under one spend cap and one
//! model-call cap over the whole experiment.
//!
//! * **Preflight** (every invocation; `--dry-run` stops after it, with no model call):
//!   `run-order.json` reads strictly; its engines are unique; the plan could make no more
//!   model calls than `--max-model-calls`; the budget is positive and an override is not
//!   above it; every profile has prices and bounded generation (provider retries off, a
//!   timeout, an output cap); every cell's name and campaign path are the ones its fields
//!   give, its campaign loads and says what the plan says (model, profile id, engine,
//!   scenario, block, order, experiment id, one trial, the step budget, the generation), and
//!   it can run here (its provider's key variable is set).
//! * **Spend cap**: the cap is the plan's `budget_usd` (or a lower `--budget-usd`) over every
//!   cell. Each cell runs with the cap minus what the other cells' rows were charged
//!   (`usage.budget_charge_usd`); the run's own budget guard reserves before each request
//!   and stops the cell, and with it the experiment, before the cap could be exceeded.
//! * **Model-call cap**: calls made are the recorded model turns of every attempt (one
//!   request each: retries are off). The experiment stops before a cell that could take them
//!   over `--max-model-calls` (a cell makes at most `step_budget` calls per attempt).
//! * **Resume**: a cell whose directory holds a complete trial is skipped; one that holds
//!   none is resumed (`run --resume`); without `--resume` an existing directory is refused.
//! * **Smoke**: `--smoke` runs the first block, then fails unless every cell of it has a
//!   complete trial whose first model turn made a tool call; each cell's first finish reason
//!   and malformed (invalid) tool calls are reported.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use elengtis_core::experiment::plan::{self, RUN_ORDER_SCHEMA_VERSION, RunOrder};
use elengtis_core::experiment::profiles::is_identifier;
use elengtis_core::format::Bundle;
use elengtis_core::format::quote::count;
use elengtis_core::load;
use elengtis_core::records::strict;
use elengtis_core::validate::LoadOptions;
use serde_json::Value;

use super::{ExperimentError, RunArgs};
use crate::exit_codes;
use crate::model::pricing::Price;
use crate::run::{self, RunEnd, RunError, RunOptions};

/// A plan that passed preflight: the order and each cell's loaded campaign, in run order.
struct Checked {
    order: RunOrder,
    bundles: Vec<Bundle>,
}

/// What a cell's results directory records so far.
#[derive(Debug, Default, Clone, Copy)]
struct CellState {
    exists: bool,
    /// Dollars its rows were charged against the cap.
    charged: f64,
    /// Model calls its attempts made (recorded model turns).
    calls: u64,
    /// It holds a complete trial.
    complete: bool,
}

fn plan_error(path: &Path, detail: impl Into<String>) -> ExperimentError {
    ExperimentError::Plan { path: path.to_owned(), detail: detail.into() }
}

/// A positive number (integer or float).
fn positive(value: Option<&Value>) -> bool {
    value.and_then(Value::as_f64).is_some_and(|v| v.is_finite() && v > 0.0)
}

/// Why a generation map is not bounded as a live comparison requires, if it is not.
fn unbounded(generation: &serde_json::Map<String, Value>) -> Option<&'static str> {
    if generation.get("max_retries").and_then(Value::as_f64).unwrap_or(0.0) != 0.0 {
        Some("max_retries must be 0 (provider retries are off)")
    } else if !positive(generation.get("timeout")) {
        Some("a positive timeout is required")
    } else if !positive(generation.get("max_tokens")) && !positive(generation.get("max_completion_tokens")) {
        Some("a positive max_tokens (or max_completion_tokens) is required")
    } else {
        None
    }
}

/// Read and check the plan and every cell; no model is called.
fn preflight(plan_path: &Path, args: &RunArgs, options: &RunOptions) -> Result<Checked, ExperimentError> {
    let text = std::fs::read_to_string(plan_path).map_err(ExperimentError::io("read", plan_path))?;
    let order: RunOrder = serde_json::from_str(&text)
        .map_err(|e| plan_error(plan_path, format!("not a run order of this version: {e}")))?;
    if order.schema_version != RUN_ORDER_SCHEMA_VERSION {
        return Err(plan_error(
            plan_path,
            format!("schema_version is {}, this build reads {RUN_ORDER_SCHEMA_VERSION}", order.schema_version),
        ));
    }
    let engines: BTreeSet<_> = order.engines.iter().collect();
    if order.engines.is_empty() || engines.len() != order.engines.len() {
        return Err(plan_error(plan_path, "the plan must declare a unique, non-empty set of engines"));
    }
    let expected_calls = order.runs.len() as u64 * u64::from(order.step_budget);
    if order.max_model_calls != expected_calls {
        return Err(plan_error(
            plan_path,
            format!(
                "max_model_calls is {} but the plan's {} × step budget {} make {expected_calls}",
                order.max_model_calls,
                count(order.runs.len(), "run"),
                order.step_budget
            ),
        ));
    }
    if order.max_model_calls > args.max_model_calls {
        return Err(ExperimentError::Usage(format!(
            "failed to preflight {}: the plan allows {}, above the --max-model-calls ceiling of {}",
            plan_path.display(),
            count(order.max_model_calls, "model call"),
            args.max_model_calls
        )));
    }
    if !(order.budget_usd.is_finite() && order.budget_usd > 0.0) {
        return Err(plan_error(plan_path, "the plan must declare a positive budget_usd"));
    }
    if let Some(budget) = args.budget_usd
        && budget > order.budget_usd
    {
        return Err(ExperimentError::Usage(format!(
            "failed to preflight {}: --budget-usd must be no greater than the plan's cap of ${}",
            plan_path.display(),
            order.budget_usd
        )));
    }
    let mut profiles = BTreeMap::new();
    for profile in &order.models {
        let prices = [profile.pricing.input_per_million, profile.pricing.output_per_million];
        if !is_identifier(&profile.id) || profiles.insert(profile.id.as_str(), profile).is_some() {
            return Err(plan_error(
                plan_path,
                format!("model profile id `{}` is not a unique lowercase identifier", profile.id),
            ));
        }
        if prices.iter().any(|p| !p.is_finite() || *p < 0.0) {
            return Err(plan_error(plan_path, format!("model profile {} lacks valid pricing", profile.id)));
        }
        if let Some(why) = unbounded(&profile.generation) {
            return Err(plan_error(plan_path, format!("model profile {}: {why}", profile.id)));
        }
    }
    if profiles.is_empty() {
        return Err(plan_error(plan_path, "the plan must declare model pricing profiles"));
    }
    let bundle_dir = plan_path.parent().unwrap_or(Path::new("."));
    let mut positions = BTreeSet::new();
    let mut bundles = Vec::with_capacity(order.runs.len());
    for run in &order.runs {
        if !positions.insert((run.block, run.order)) {
            return Err(plan_error(plan_path, format!("block {} order {} appears twice", run.block, run.order)));
        }
        let Some(profile) = profiles.get(run.model_id.as_str()) else {
            return Err(plan_error(
                plan_path,
                format!("run {} references unknown model profile {}", run.result, run.model_id),
            ));
        };
        if !order.engines.contains(&run.engine) || !order.scenarios.contains(&run.scenario) {
            return Err(plan_error(
                plan_path,
                format!("run {} names an engine or scenario outside the plan's sets", run.result),
            ));
        }
        let name = plan::cell_name(run.block, run.order, &run.model_id, run.engine, run.scenario);
        if run.result != name || run.config != format!("campaigns/{name}.yaml") {
            return Err(plan_error(
                plan_path,
                format!("run {} must be named {name} with campaign campaigns/{name}.yaml", run.result),
            ));
        }
        let config = bundle_dir.join(&run.config);
        let bundle = load::load_campaign(&config, &LoadOptions { check_env: false, ..LoadOptions::default() })
            .map_err(|source| ExperimentError::Cell { cell: run.result.clone(), source })?;
        let campaign = &bundle.campaign.value;
        let scenario = bundle.scenarios.first().map(|s| s.value.id.as_str());
        let matches = campaign.model_id.as_deref() == Some(run.model_id.as_str())
            && campaign.model.as_deref() == Some(profile.model.as_str())
            && campaign.engine == run.engine
            && scenario == Some(run.scenario.id())
            && bundle.scenarios.len() == 1
            && campaign.targets.len() == 1
            && campaign.block == Some(u64::from(run.block))
            && campaign.order == Some(u64::from(run.order))
            && campaign.experiment_id.as_deref() == Some(order.experiment_id.as_str())
            && campaign.trials == 1
            && campaign.step_budget == order.step_budget
            && campaign.generation == profile.generation
            && campaign.provider == profile.provider;
        if !matches {
            return Err(plan_error(&config, format!("the campaign does not match the plan's cell {}", run.result)));
        }
        if let Some(why) = unbounded(&campaign.generation) {
            return Err(plan_error(&config, format!("campaign generation is not bounded: {why}")));
        }
        run::check_runnable(&bundle, &options.model)
            .map_err(|e| ExperimentError::Unavailable { cell: run.result.clone(), detail: e.to_string() })?;
        bundles.push(bundle);
    }
    Ok(Checked { order, bundles })
}

/// What `dir` (a cell's results directory) records so far. A line that does not parse (a
/// row torn by a crash) is left to `run --resume`, which cuts it.
fn cell_state(dir: &Path) -> Result<CellState, ExperimentError> {
    let path = dir.join("runs.jsonl");
    if !dir.exists() {
        return Ok(CellState::default());
    }
    let read = crate::results::store::read_file_bounded(&path, elengtis_core::records::bounds::LOG);
    let text = match read.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(ExperimentError::Io { what: "read", path, source: error }),
    };
    if std::fs::read_dir(dir).map_err(ExperimentError::io("read", dir))?.next().is_none() {
        // Left empty by a stop between creating the directory and writing the manifest:
        // nothing was recorded, so the cell starts afresh.
        std::fs::remove_dir(dir).map_err(ExperimentError::io("remove the empty", dir))?;
        return Ok(CellState::default());
    }
    let mut state = CellState { exists: true, ..CellState::default() };
    for row in text.lines().filter_map(|line| strict::parse(line.as_bytes()).ok()) {
        state.charged += row["usage"]["budget_charge_usd"].as_f64().unwrap_or(0.0);
        state.calls += row["model_turns"].as_u64().unwrap_or(0);
        state.complete |= row["evidence_status"] == "complete";
    }
    Ok(state)
}

/// The smoke check of one block: every cell has a complete trial whose first model turn
/// made a tool call. Returns one report line per cell and the failures.
fn smoke_check(results: &Path, runs: &[&plan::PlannedRun]) -> (String, Vec<String>) {
    let mut report = String::new();
    let mut failures = Vec::new();
    for run in runs {
        let dir = results.join(&run.result);
        let path = dir.join("runs.jsonl");
        let text = crate::results::store::read_file_bounded(&path, elengtis_core::records::bounds::LOG)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let rows: Vec<Value> = text.lines().filter_map(|line| strict::parse(line.as_bytes()).ok()).collect();
        let Some(row) = rows.iter().rev().find(|row| row["evidence_status"] == "complete") else {
            failures.push(format!("{} (no completed result)", run.result));
            let _ = writeln!(report, "  {}: no completed result", run.result);
            continue;
        };
        let evidence_path = dir.join(row["evidence"].as_str().unwrap_or_default());
        let Some(evidence) =
            crate::results::store::read_file_bounded(&evidence_path, elengtis_core::records::bounds::EVIDENCE)
                .ok()
                .and_then(|bytes| strict::parse(&bytes).ok())
        else {
            failures.push(format!("{} (its evidence {} cannot be read)", run.result, evidence_path.display()));
            let _ = writeln!(report, "  {}: evidence unreadable", run.result);
            continue;
        };
        let first_call = evidence["trajectory"][0]["calls"].as_array().is_some_and(|calls| !calls.is_empty());
        let diagnostics = &row["diagnostics"];
        let shown = |value: &Value| value.as_str().map_or_else(|| "null".to_owned(), |s| format!("'{s}'"));
        let detail = format!(
            "finish_reason={}; native_finish_reason={}; invalid_tool_calls={}",
            shown(&diagnostics["first_finish_reason"]),
            shown(&diagnostics["first_native_finish_reason"]),
            diagnostics["invalid_tool_calls"].as_u64().unwrap_or(0)
        );
        let _ = writeln!(
            report,
            "  {}: first tool call {}; {detail}",
            run.result,
            if first_call { "made" } else { "MISSING" }
        );
        if !first_call {
            failures.push(format!("{} (no valid first tool call; {detail})", run.result));
        }
    }
    (report, failures)
}

/// Why the experiment stopped early.
enum Stop {
    /// The spend cap or a run's own stop (the reason).
    Stopped(String),
    /// Ctrl-C.
    Interrupted,
}

/// Preflight, then run (see the module documentation). Returns the exit code.
///
/// # Errors
///
/// A plan or cell that fails preflight, a cell directory that exists without `--resume`, or a
/// run that cannot start or continue.
pub async fn run(
    args: &RunArgs,
    mut options: RunOptions,
    print: &(dyn Fn(&str) + Sync),
) -> Result<i32, ExperimentError> {
    let plan_path = if args.plan.is_dir() { args.plan.join("run-order.json") } else { args.plan.clone() };
    let Checked { order, bundles } = preflight(&plan_path, args, &options)?;
    print(&format!(
        "Preflight passed: {}, at most {}.",
        count(order.runs.len(), "cell"),
        count(order.max_model_calls, "model call")
    ));
    if args.dry_run {
        return Ok(exit_codes::SUCCESS);
    }
    for profile in &order.models {
        let price = Price {
            input_per_million: profile.pricing.input_per_million,
            output_per_million: profile.pricing.output_per_million,
        };
        options.model.prices.insert(&profile.model, price);
    }
    // A shard of the plan's blocks: whole blocks only, assigned from the frozen plan alone.
    let partition = match args.partition.as_deref() {
        None => None,
        Some(spec) => {
            let index = std::env::var("JOB_COMPLETION_INDEX").ok();
            Some(
                elengtis_core::partition::parse(spec, index.as_deref())
                    .map_err(|e| ExperimentError::Usage(e.to_string()))?,
            )
        }
    };
    let all_blocks: Vec<u32> = order.runs.iter().map(|run| run.block).collect::<BTreeSet<u32>>().into_iter().collect();
    let shard_blocks: BTreeSet<u32> = match partition {
        None => all_blocks.iter().copied().collect(),
        Some(p) => {
            let ids: Vec<String> = all_blocks.iter().map(u32::to_string).collect();
            p.select(&ids, String::as_str).into_iter().filter_map(|b| b.parse().ok()).collect()
        }
    };
    if let Some(p) = partition {
        print(&format!(
            "Shard {p}: blocks {} of {} ({}).",
            shard_blocks.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            all_blocks.len(),
            count(order.runs.iter().filter(|r| shard_blocks.contains(&r.block)).count(), "cell")
        ));
    }
    let budget = args.budget_usd.unwrap_or(order.budget_usd / f64::from(partition.map_or(1, |p| p.total)));
    let results = &args.results;
    let mut states: BTreeMap<&str, CellState> = BTreeMap::new();
    for run in order.runs.iter().filter(|run| shard_blocks.contains(&run.block)) {
        states.insert(run.result.as_str(), cell_state(&results.join(&run.result))?);
    }
    let resume_hint = format!(
        "continue with `elengtis experiment run --plan {} --results {} --max-model-calls {} --resume`",
        plan_path.display(),
        results.display(),
        args.max_model_calls
    );
    let spent = |states: &BTreeMap<&str, CellState>| states.values().map(|s| s.charged).sum::<f64>();
    if spent(&states) >= budget - 1e-12 {
        print(&format!(
            "Budget stopped the experiment: prior results already consume the ${budget:.6} budget (${:.6} charged); raise it with --budget-usd (up to the plan's ${}) or plan anew",
            spent(&states),
            order.budget_usd
        ));
        return Ok(exit_codes::RUN_INCOMPLETE);
    }
    if !results.exists() {
        std::fs::create_dir_all(results).map_err(ExperimentError::io("create", results))?;
    }
    let blocks: BTreeSet<u32> = shard_blocks.clone();
    let total = order.runs.iter().filter(|run| shard_blocks.contains(&run.block)).count();
    let mut incomplete: Vec<&str> = Vec::new();
    let mut stop: Option<Stop> = None;
    let mut position = 0;
    'blocks: for block in blocks {
        let block_runs: Vec<(&plan::PlannedRun, &Bundle)> =
            order.runs.iter().zip(&bundles).filter(|(run, _)| run.block == block).collect();
        for (run, bundle) in &block_runs {
            position += 1;
            let name = run.result.as_str();
            let state = states.get(name).copied().unwrap_or_default();
            let out = results.join(name);
            if state.exists && !args.resume {
                return Err(ExperimentError::CellExists { cell: name.to_owned(), dir: out });
            }
            if state.complete {
                print(&format!("[{position}/{total}] {name}: complete (kept)"));
                continue;
            }
            let calls: u64 = states.values().map(|s| s.calls).sum();
            if calls + u64::from(order.step_budget) > args.max_model_calls {
                stop = Some(Stop::Stopped(format!(
                    "the model-call cap of {} could be exceeded by cell {name} ({} made, up to {} more)",
                    args.max_model_calls,
                    count(calls, "call"),
                    order.step_budget
                )));
                break 'blocks;
            }
            let others = spent(&states) - state.charged;
            let limit = budget - others;
            if limit <= state.charged + 1e-12 {
                stop = Some(Stop::Stopped(format!(
                    "the spend cap of ${budget:.6} is spent (${:.6} charged)",
                    spent(&states)
                )));
                break 'blocks;
            }
            options.model.budget_usd = Some(limit);
            let result = if state.exists {
                run::resume(&out, &options).await
            } else {
                run::start(bundle, &out, false, &options).await
            };
            let after = cell_state(&out)?;
            states.insert(name, after);
            match result {
                Ok(report) => match report.end {
                    RunEnd::Complete => print(&format!("[{position}/{total}] {name}: complete")),
                    RunEnd::Incomplete(reason) => {
                        print(&format!("[{position}/{total}] {name}: INCOMPLETE: {reason}"));
                        incomplete.push(name);
                    }
                    RunEnd::Stopped(reason) => {
                        print(&format!("[{position}/{total}] {name}: stopped: {reason}"));
                        stop = Some(Stop::Stopped(reason));
                        break 'blocks;
                    }
                    RunEnd::Interrupted => {
                        stop = Some(Stop::Interrupted);
                        break 'blocks;
                    }
                },
                Err(RunError::BudgetSpent(reason)) => {
                    stop = Some(Stop::Stopped(reason));
                    break 'blocks;
                }
                Err(source) => return Err(ExperimentError::Run { cell: name.to_owned(), source }),
            }
        }
        if args.smoke {
            let runs: Vec<&plan::PlannedRun> = block_runs.iter().map(|(run, _)| *run).collect();
            let (report, failures) = smoke_check(results, &runs);
            print(&format!("Smoke check of block {block}:\n{}", report.trim_end()));
            if !failures.is_empty() {
                print(&format!("Smoke check FAILED: no first tool call in: {}", failures.join(", ")));
                return Ok(exit_codes::RUN_INCOMPLETE);
            }
            print(&format!("Smoke check passed for block {block}: every cell made a first tool call."));
            print(&format!("Spent ${:.6} of ${budget:.6}; {}", spent(&states), resume_hint));
            return Ok(exit_codes::SUCCESS);
        }
    }
    let charged = spent(&states);
    let calls: u64 = states.values().map(|s| s.calls).sum();
    match stop {
        Some(Stop::Interrupted) => {
            print(&format!("Interrupted; {resume_hint}"));
            Ok(exit_codes::interrupted())
        }
        Some(Stop::Stopped(reason)) => {
            print(&format!(
                "The experiment stopped: {reason}\nSpent ${charged:.6} of ${budget:.6}, {}; {resume_hint}",
                count(calls, "model call")
            ));
            Ok(exit_codes::RUN_INCOMPLETE)
        }
        None if !incomplete.is_empty() => {
            print(&format!(
                "{} incomplete: {}\nSpent ${charged:.6} of ${budget:.6}, {}; {resume_hint}",
                count(incomplete.len(), "cell"),
                incomplete.join(", "),
                count(calls, "model call")
            ));
            Ok(exit_codes::RUN_INCOMPLETE)
        }
        None => {
            print(&format!(
                "Experiment complete: {}; spent ${charged:.6} of ${budget:.6}, {}.\nanalyze: elengtis analyze $(for d in {}/*/; do printf -- '--input %s ' \"$d\"; done) --out ANALYSIS --conformance-passed",
                count(total, "cell"),
                count(calls, "model call"),
                results.display()
            ));
            Ok(exit_codes::SUCCESS)
        }
    }
}
