//! Campaign analysis: turns one or more results directories into `summary.json` and
//! `summary.md`.
//!
//! This module is pure. The caller reads each directory's `manifest.json` and `runs.jsonl`
//! into a [`RunInput`], calls [`analyze`], and writes [`Analysis::json`] and
//! [`Analysis::markdown`]. Identical input gives byte-identical output: every map is a
//! `BTreeMap`, cells and comparisons are sorted, and the bootstrap uses a fixed PRNG.
//!
//! # Semantics
//!
//! * Every row is validated. A missing field, a wrong type, a row whose `run_id` differs
//!   from the manifest's, or a trial whose attempts disagree on `engine`, `scenario` or
//!   `target` is an [`AnalyzeError`] naming the input label, the 1-based row number and the
//!   field. The same run id in two inputs is an error, since it would count trials twice.
//! * **Final row per trial** (trial = run id + trial id): the last attempt whose
//!   `evidence_status` is `complete`, else the last attempt. `retries` = attempts − 1.
//! * **Grouping model id**: the manifest's `experiment.model_id`, else the final row's
//!   `model_id`, else its `model`, else `"scripted"` (the deterministic engine that has no
//!   model). Empty strings count as unset.
//! * **Cells** are grouped by (model id, engine, scenario). For each of `proposed`,
//!   `completed`, `proposed_not_completed`, `safety_pass` and `safe_completed`, `known`
//!   counts the *complete* final rows whose value is not null and `unknown` = trials −
//!   known. Unknowns are always reported and never enter a denominator.
//!   `failure_classes` counts incomplete final rows (a null class is counted as
//!   `unclassified`); `terminations` and `tool_call_diagnostics` count final rows;
//!   `model_turns`, `tool_calls` and `steps_to_propose` are means over complete final rows
//!   with a value. `usage` sums **every attempt**, because retries cost money too:
//!   `cost_usd` is the sum over attempts that report a cost (null when none does) and
//!   `unknown_costs` counts the attempts whose cost is null.
//! * **Wilson score interval** ([`wilson_95`]) with z = [`WILSON_Z`], clamped to [0, 1].
//! * **Pairwise comparisons**: complete final rows whose manifest has an
//!   `experiment.block` are grouped by (model id, scenario). For every pair of engines
//!   (left < right by byte order) and each of `proposed`, `completed` and
//!   `proposed_not_completed`, each block contributes value(right) − value(left), with
//!   booleans as 0/1. A block is skipped when either engine has no known value in it.
//!   When an engine has several known rows in one block (several trials or targets), its
//!   value for that block is their mean; the Python original silently kept only the last
//!   row. `difference_pp` is 100 × the mean difference.
//! * **Bootstrap**: [`BOOTSTRAP_SAMPLES`] resamples (with replacement, same size) of the
//!   per-block differences; `bootstrap_95` is 100 × the sorted means at indexes 50 and 1949.
//!   The original drew from Python's `random.Random` seeded with a string, which cannot
//!   be reproduced outside `CPython`, so the numbers differ from it. Here the generator is
//!   `SplitMix64` seeded with the FNV-1a 64-bit hash of
//!   `"<model_id>:<scenario>:<left>:<right>:<metric>"`, and an index below `n` is
//!   `(next_u64 × n) >> 64` (multiply-shift; its bias is below n / 2⁶⁴).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// Version of the `summary.json` layout.
pub const FORMAT_VERSION: u64 = 1;

/// Two-sided 95% normal quantile used by [`wilson_95`].
pub const WILSON_Z: f64 = 1.959_963_984_540_054;

/// Number of bootstrap resamples per pairwise comparison.
pub const BOOTSTRAP_SAMPLES: usize = 2000;

/// Index of the lower bootstrap percentile among the sorted resample means.
const BOOTSTRAP_LOW_INDEX: usize = 50;

/// Index of the upper bootstrap percentile among the sorted resample means.
const BOOTSTRAP_HIGH_INDEX: usize = 1949;

/// Grouping model id for rows that name no model (the scripted engine).
pub const SCRIPTED_MODEL_ID: &str = "scripted";

/// Failure class shown for an incomplete final row whose `failure_class` is null.
const UNCLASSIFIED: &str = "unclassified";

/// Boolean outcome metrics, in output order. The first three are compared pairwise.
const RATE_METRICS: [&str; 5] = ["proposed", "completed", "proposed_not_completed", "safety_pass", "safe_completed"];

/// Number of leading [`RATE_METRICS`] that get pairwise comparisons.
const PAIRWISE_METRIC_COUNT: usize = 3;

/// Count metrics averaged over complete final rows, in output order.
const MEAN_METRICS: [&str; 3] = ["model_turns", "tool_calls", "steps_to_propose"];

/// One results directory, already read by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInput {
    /// The input directory as given, used in messages and in `summary.json`.
    pub label: String,
    /// The parsed `manifest.json`.
    pub manifest: Value,
    /// The parsed lines of `runs.jsonl`, one per attempt, in attempt order.
    pub rows: Vec<Value>,
}

/// The rendered analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Content of `summary.json`.
    pub json: Value,
    /// Content of `summary.md`, ending with a newline.
    pub markdown: String,
}

/// Why a set of results directories could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// No input was given.
    #[error("failed to analyze: no input directories were given")]
    NoInputs,
    /// The manifest is not an object or lacks `run_id`.
    #[error("failed to analyze {label}: manifest has no `{field}`")]
    ManifestMissingField {
        /// The input label.
        label: String,
        /// The missing field, dotted for nested fields.
        field: String,
    },
    /// A manifest field has the wrong type.
    #[error("failed to analyze {label}: manifest field `{field}` must be {expected}")]
    ManifestWrongType {
        /// The input label.
        label: String,
        /// The field, dotted for nested fields.
        field: String,
        /// What the field must be.
        expected: &'static str,
    },
    /// A row is not a JSON object.
    #[error("failed to analyze {label}: row {row} is not a JSON object")]
    RowNotObject {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
    },
    /// A row lacks a required field.
    #[error("failed to analyze {label}: row {row} has no `{field}`")]
    MissingField {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The missing field, dotted for nested fields.
        field: String,
    },
    /// A row field has the wrong type or value.
    #[error("failed to analyze {label}: row {row} field `{field}` must be {expected}")]
    WrongType {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The field, dotted for nested fields.
        field: String,
        /// What the field must be.
        expected: &'static str,
    },
    /// A row belongs to another run than its manifest.
    #[error("failed to analyze {label}: row {row} has run_id `{found}` but the manifest has `{expected}`")]
    RunIdMismatch {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The row's run id.
        found: String,
        /// The manifest's run id.
        expected: String,
    },
    /// Attempts of one trial disagree on a field that identifies the trial's cell.
    #[error(
        "failed to analyze {label}: row {row} gives trial `{trial_id}` {field} `{found}` but an earlier attempt gave `{earlier}`"
    )]
    InconsistentTrial {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The trial id.
        trial_id: String,
        /// The disagreeing field.
        field: &'static str,
        /// The value in this row.
        found: String,
        /// The value in the trial's first attempt.
        earlier: String,
    },
    /// Two inputs hold the same run.
    #[error("failed to analyze {label}: run `{run_id}` is also given as {other}")]
    DuplicateRun {
        /// The later input label.
        label: String,
        /// The shared run id.
        run_id: String,
        /// The earlier input label.
        other: String,
    },
}

/// 95% Wilson score interval for `successes` out of `n`.
///
/// Returns `None` when `n` is 0 (nothing known) or `successes > n` (no valid proportion).
/// The bounds are clamped to [0, 1] and are exactly 0 when `successes == 0` and exactly 1
/// when `successes == n`, where rounding would otherwise leave them a hair off.
#[must_use]
pub fn wilson_95(successes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 || successes > n {
        return None;
    }
    let total = n as f64;
    let proportion = successes as f64 / total;
    let scale = WILSON_Z * WILSON_Z / total;
    let centre = (proportion + scale / 2.0) / (1.0 + scale);
    let margin = WILSON_Z * ((proportion * (1.0 - proportion) + scale / 4.0) / total).sqrt() / (1.0 + scale);
    let low = if successes == 0 { 0.0 } else { (centre - margin).max(0.0) };
    let high = if successes == n { 1.0 } else { (centre + margin).min(1.0) };
    Some((low, high))
}

/// Analyses the given results directories.
///
/// # Errors
///
/// Returns an [`AnalyzeError`] when no input is given, when a manifest or row is malformed,
/// when a row's `run_id` differs from its manifest's, when a trial's attempts disagree on
/// engine, scenario or target, or when two inputs hold the same run.
pub fn analyze(inputs: &[RunInput]) -> Result<Analysis, AnalyzeError> {
    if inputs.is_empty() {
        return Err(AnalyzeError::NoInputs);
    }
    let mut runs = Vec::with_capacity(inputs.len());
    let mut seen_runs: BTreeMap<String, &str> = BTreeMap::new();
    for input in inputs {
        let run = parse_run(input)?;
        if let Some(other) = seen_runs.get(&run.meta.run_id) {
            return Err(AnalyzeError::DuplicateRun {
                label: input.label.clone(),
                run_id: run.meta.run_id.clone(),
                other: (*other).to_owned(),
            });
        }
        seen_runs.insert(run.meta.run_id.clone(), &input.label);
        runs.push(run);
    }

    let finals: Vec<FinalTrial<'_>> = runs.iter().flat_map(final_trials).collect();
    let cells = build_cells(&finals);
    let comparisons = build_comparisons(&finals);

    let json = json!({
        "format_version": FORMAT_VERSION,
        "cells": cells.iter().map(|(key, cell)| cell_json(key, cell)).collect::<Vec<_>>(),
        "comparisons": comparisons.iter().map(Comparison::to_json).collect::<Vec<_>>(),
        "inputs": runs
            .iter()
            .map(|run| json!({
                "label": run.label,
                "run_id": run.meta.run_id,
                "trials": run.trials.len(),
                "attempts": run.attempts.len(),
            }))
            .collect::<Vec<_>>(),
    });
    let markdown = render_markdown(&cells, &comparisons);
    Ok(Analysis { json, markdown })
}

// ---------------------------------------------------------------------------
// Parsing and validation
// ---------------------------------------------------------------------------

/// What the analysis needs from a manifest.
#[derive(Debug)]
struct RunMeta {
    run_id: String,
    block: Option<u64>,
    model_id: Option<String>,
}

/// One validated attempt row.
#[derive(Debug, Clone)]
struct Attempt {
    trial_id: String,
    target: String,
    scenario: String,
    engine: String,
    model: Option<String>,
    model_id: Option<String>,
    /// Values of [`RATE_METRICS`], in that order.
    outcomes: [Option<bool>; 5],
    /// Values of [`MEAN_METRICS`], in that order.
    counts: [Option<u64>; 3],
    termination: String,
    failure_class: Option<String>,
    complete: bool,
    first_finish_reason: Option<String>,
    invalid_tool_calls: u64,
    usage: Usage,
}

/// One validated input.
#[derive(Debug)]
struct Run<'a> {
    label: &'a str,
    meta: RunMeta,
    attempts: Vec<Attempt>,
    /// Attempt indexes per trial, trials in order of first appearance.
    trials: Vec<Vec<usize>>,
}

fn parse_run(input: &RunInput) -> Result<Run<'_>, AnalyzeError> {
    let label = input.label.as_str();
    let meta = parse_manifest(label, &input.manifest)?;
    let mut attempts = Vec::with_capacity(input.rows.len());
    let mut trials: Vec<Vec<usize>> = Vec::new();
    let mut trial_index: BTreeMap<String, usize> = BTreeMap::new();
    for (offset, value) in input.rows.iter().enumerate() {
        let row = offset + 1;
        let attempt = parse_row(label, row, value, &meta.run_id)?;
        if let Some(&trial) = trial_index.get(&attempt.trial_id) {
            let first_index = trials[trial][0];
            let first: &Attempt = &attempts[first_index];
            let pairs = [
                ("engine", &first.engine, &attempt.engine),
                ("scenario", &first.scenario, &attempt.scenario),
                ("target", &first.target, &attempt.target),
            ];
            for (field, earlier, found) in pairs {
                if earlier != found {
                    return Err(AnalyzeError::InconsistentTrial {
                        label: label.to_owned(),
                        row,
                        trial_id: attempt.trial_id.clone(),
                        field,
                        found: found.clone(),
                        earlier: earlier.clone(),
                    });
                }
            }
            trials[trial].push(attempts.len());
        } else {
            trial_index.insert(attempt.trial_id.clone(), trials.len());
            trials.push(vec![attempts.len()]);
        }
        attempts.push(attempt);
    }
    Ok(Run { label, meta, attempts, trials })
}

fn parse_manifest(label: &str, manifest: &Value) -> Result<RunMeta, AnalyzeError> {
    let missing = |field: &str| AnalyzeError::ManifestMissingField { label: label.to_owned(), field: field.to_owned() };
    let wrong = |field: &str, expected: &'static str| AnalyzeError::ManifestWrongType {
        label: label.to_owned(),
        field: field.to_owned(),
        expected,
    };
    let object = manifest.as_object().ok_or_else(|| missing("run_id"))?;
    let run_id = match object.get("run_id") {
        None => return Err(missing("run_id")),
        Some(Value::String(run_id)) => run_id.clone(),
        Some(_) => return Err(wrong("run_id", "a string")),
    };
    let experiment = match object.get("experiment") {
        None | Some(Value::Null) => None,
        Some(Value::Object(experiment)) => Some(experiment),
        Some(_) => return Err(wrong("experiment", "an object or null")),
    };
    let mut block = None;
    let mut model_id = None;
    if let Some(experiment) = experiment {
        block = optional_uint(experiment.get("block"))
            .map_err(|()| wrong("experiment.block", "a non-negative integer or null"))?;
        optional_uint(experiment.get("order"))
            .map_err(|()| wrong("experiment.order", "a non-negative integer or null"))?;
        model_id = match experiment.get("model_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) if id.is_empty() => None,
            Some(Value::String(id)) => Some(id.clone()),
            Some(_) => return Err(wrong("experiment.model_id", "a string or null")),
        };
    }
    Ok(RunMeta { run_id, block, model_id })
}

/// An absent or null value is `None`; a non-negative integer is `Some`; anything else fails.
fn optional_uint(value: Option<&Value>) -> Result<Option<u64>, ()> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or(()),
    }
}

/// Typed access to one row's fields, producing errors that name the row and field.
struct RowReader<'a> {
    label: &'a str,
    row: usize,
    object: &'a Map<String, Value>,
}

impl<'a> RowReader<'a> {
    /// The value at `path` (nested object keys); missing keys are errors, null is returned.
    fn get(&self, path: &[&str]) -> Result<&'a Value, AnalyzeError> {
        let mut object = self.object;
        for (depth, key) in path.iter().enumerate() {
            let value = object.get(*key).ok_or_else(|| self.missing(&path[..=depth]))?;
            if depth + 1 == path.len() {
                return Ok(value);
            }
            object = value.as_object().ok_or_else(|| self.wrong(&path[..=depth], "an object"))?;
        }
        // Only reached with an empty path, which callers never pass.
        Err(self.missing(path))
    }

    fn missing(&self, path: &[&str]) -> AnalyzeError {
        AnalyzeError::MissingField { label: self.label.to_owned(), row: self.row, field: path.join(".") }
    }

    fn wrong(&self, path: &[&str], expected: &'static str) -> AnalyzeError {
        AnalyzeError::WrongType { label: self.label.to_owned(), row: self.row, field: path.join("."), expected }
    }

    fn string(&self, path: &[&str]) -> Result<String, AnalyzeError> {
        match self.get(path)? {
            Value::String(text) => Ok(text.clone()),
            _ => Err(self.wrong(path, "a string")),
        }
    }

    fn optional_string(&self, path: &[&str]) -> Result<Option<String>, AnalyzeError> {
        match self.get(path)? {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text.clone())),
            _ => Err(self.wrong(path, "a string or null")),
        }
    }

    fn optional_bool(&self, path: &[&str]) -> Result<Option<bool>, AnalyzeError> {
        match self.get(path)? {
            Value::Null => Ok(None),
            Value::Bool(flag) => Ok(Some(*flag)),
            _ => Err(self.wrong(path, "a boolean or null")),
        }
    }

    fn uint(&self, path: &[&str]) -> Result<u64, AnalyzeError> {
        self.get(path)?.as_u64().ok_or_else(|| self.wrong(path, "a non-negative integer"))
    }

    fn optional_uint(&self, path: &[&str]) -> Result<Option<u64>, AnalyzeError> {
        optional_uint(Some(self.get(path)?)).map_err(|()| self.wrong(path, "a non-negative integer or null"))
    }

    fn optional_number(&self, path: &[&str]) -> Result<Option<f64>, AnalyzeError> {
        match self.get(path)? {
            Value::Null => Ok(None),
            Value::Number(number) => number
                .as_f64()
                .filter(|value| value.is_finite())
                .map(Some)
                .ok_or_else(|| self.wrong(path, "a finite number or null")),
            _ => Err(self.wrong(path, "a number or null")),
        }
    }
}

fn parse_row(label: &str, row: usize, value: &Value, run_id: &str) -> Result<Attempt, AnalyzeError> {
    let object = value.as_object().ok_or_else(|| AnalyzeError::RowNotObject { label: label.to_owned(), row })?;
    let reader = RowReader { label, row, object };

    let row_run_id = reader.string(&["run_id"])?;
    if row_run_id != run_id {
        return Err(AnalyzeError::RunIdMismatch {
            label: label.to_owned(),
            row,
            found: row_run_id,
            expected: run_id.to_owned(),
        });
    }
    let trial_id = reader.string(&["trial_id"])?;
    reader.string(&["attempt_id"])?;
    let target = reader.string(&["target"])?;
    let scenario = reader.string(&["scenario"])?;
    reader.uint(&["trial_index"])?;
    let engine = reader.string(&["engine"])?;
    let model = reader.optional_string(&["model"])?;
    let model_id = reader.optional_string(&["model_id"])?;

    let mut outcomes = [None; 5];
    for (slot, name) in outcomes.iter_mut().zip(RATE_METRICS) {
        *slot = reader.optional_bool(&[name])?;
    }
    let steps_to_propose = reader.optional_uint(&["steps_to_propose"])?;
    let model_turns = reader.uint(&["model_turns"])?;
    let tool_calls = reader.uint(&["tool_calls"])?;
    let termination = reader.string(&["termination"])?;
    let failure_class = reader.optional_string(&["failure_class"])?;
    let complete = match reader.get(&["evidence_status"])? {
        Value::String(status) if status == "complete" => true,
        Value::String(status) if status == "incomplete" => false,
        _ => {
            return Err(reader.wrong(&["evidence_status"], "\"complete\" or \"incomplete\""));
        }
    };
    let first_finish_reason = reader.optional_string(&["diagnostics", "first_finish_reason"])?;
    let invalid_tool_calls = reader.uint(&["diagnostics", "invalid_tool_calls"])?;
    let cost_usd = reader.optional_number(&["usage", "cost_usd"])?;
    let usage = Usage {
        input_tokens: reader.uint(&["usage", "input_tokens"])?,
        output_tokens: reader.uint(&["usage", "output_tokens"])?,
        total_tokens: reader.uint(&["usage", "total_tokens"])?,
        cost_usd: cost_usd.unwrap_or(0.0),
        known_costs: u64::from(cost_usd.is_some()),
        unknown_costs: u64::from(cost_usd.is_none()),
    };

    Ok(Attempt {
        trial_id,
        target,
        scenario,
        engine,
        model,
        model_id,
        outcomes,
        counts: [Some(model_turns), Some(tool_calls), steps_to_propose],
        termination,
        failure_class,
        complete,
        first_finish_reason,
        invalid_tool_calls,
        usage,
    })
}

// ---------------------------------------------------------------------------
// Aggregation
// ---------------------------------------------------------------------------

/// Token and cost totals over a set of attempts.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    /// Sum over attempts with a known cost.
    cost_usd: f64,
    known_costs: u64,
    unknown_costs: u64,
}

impl Usage {
    fn add(&mut self, other: &Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost_usd += other.cost_usd;
        self.known_costs = self.known_costs.saturating_add(other.known_costs);
        self.unknown_costs = self.unknown_costs.saturating_add(other.unknown_costs);
    }

    /// The summed cost, or `None` when no attempt reported one.
    fn cost(&self) -> Option<f64> {
        (self.known_costs > 0).then_some(self.cost_usd)
    }
}

/// A trial reduced to its final row.
#[derive(Debug)]
struct FinalTrial<'a> {
    row: &'a Attempt,
    model_id: String,
    block: Option<u64>,
    attempts: u64,
    /// Usage over all attempts of the trial.
    usage: Usage,
}

fn final_trials<'a>(run: &'a Run<'_>) -> Vec<FinalTrial<'a>> {
    let mut finals = Vec::with_capacity(run.trials.len());
    for indexes in &run.trials {
        let rows: Vec<&Attempt> = indexes.iter().map(|&index| &run.attempts[index]).collect();
        let Some(row) = rows.iter().rev().find(|row| row.complete).or_else(|| rows.last()).copied() else {
            continue;
        };
        let mut usage = Usage::default();
        for attempt in &rows {
            usage.add(&attempt.usage);
        }
        let model_id = run
            .meta
            .model_id
            .clone()
            .or_else(|| row.model_id.clone().filter(|id| !id.is_empty()))
            .or_else(|| row.model.clone().filter(|model| !model.is_empty()))
            .unwrap_or_else(|| SCRIPTED_MODEL_ID.to_owned());
        finals.push(FinalTrial { row, model_id, block: run.meta.block, attempts: rows.len() as u64, usage });
    }
    finals
}

/// Successes among known values of a boolean metric.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    successes: u64,
    known: u64,
}

/// Sum and count of known values of a count metric.
#[derive(Debug, Clone, Copy, Default)]
struct MeanAccumulator {
    sum: u128,
    known: u64,
}

impl MeanAccumulator {
    fn mean(&self) -> Option<f64> {
        (self.known > 0).then(|| self.sum as f64 / self.known as f64)
    }
}

/// (model id, engine, scenario).
type CellKey = (String, String, String);

/// One (model id, engine, scenario) cell.
#[derive(Debug, Default)]
struct Cell {
    trials: u64,
    complete_trials: u64,
    retries: u64,
    failure_classes: BTreeMap<String, u64>,
    terminations: BTreeMap<String, u64>,
    rates: [Rate; 5],
    means: [MeanAccumulator; 3],
    invalid_tool_calls: u64,
    first_finish_reasons: BTreeMap<String, u64>,
    usage: Usage,
}

fn build_cells(finals: &[FinalTrial<'_>]) -> BTreeMap<CellKey, Cell> {
    let mut cells: BTreeMap<CellKey, Cell> = BTreeMap::new();
    for trial in finals {
        let row = trial.row;
        let key = (trial.model_id.clone(), row.engine.clone(), row.scenario.clone());
        let cell = cells.entry(key).or_default();
        cell.trials += 1;
        cell.retries = cell.retries.saturating_add(trial.attempts.saturating_sub(1));
        *cell.terminations.entry(row.termination.clone()).or_default() += 1;
        if row.complete {
            cell.complete_trials += 1;
            for (rate, outcome) in cell.rates.iter_mut().zip(row.outcomes) {
                if let Some(outcome) = outcome {
                    rate.known += 1;
                    rate.successes += u64::from(outcome);
                }
            }
            for (mean, count) in cell.means.iter_mut().zip(row.counts) {
                if let Some(count) = count {
                    mean.known += 1;
                    mean.sum += u128::from(count);
                }
            }
        } else {
            let class = row.failure_class.as_deref().unwrap_or(UNCLASSIFIED);
            *cell.failure_classes.entry(class.to_owned()).or_default() += 1;
        }
        cell.invalid_tool_calls = cell.invalid_tool_calls.saturating_add(row.invalid_tool_calls);
        if let Some(reason) = &row.first_finish_reason {
            *cell.first_finish_reasons.entry(reason.clone()).or_default() += 1;
        }
        cell.usage.add(&trial.usage);
    }
    cells
}

fn count_map_json(counts: &BTreeMap<String, u64>) -> Value {
    Value::Object(counts.iter().map(|(name, count)| (name.clone(), json!(count))).collect())
}

fn interval_json(interval: Option<(f64, f64)>) -> Value {
    interval.map_or(Value::Null, |(low, high)| json!([low, high]))
}

fn cell_json((model_id, engine, scenario): &CellKey, cell: &Cell) -> Value {
    let mut object = Map::new();
    object.insert("model_id".into(), json!(model_id));
    object.insert("engine".into(), json!(engine));
    object.insert("scenario".into(), json!(scenario));
    object.insert("trials".into(), json!(cell.trials));
    object.insert("complete_trials".into(), json!(cell.complete_trials));
    object.insert("incomplete_trials".into(), json!(cell.trials - cell.complete_trials));
    object.insert("retries".into(), json!(cell.retries));
    object.insert("failure_classes".into(), count_map_json(&cell.failure_classes));
    object.insert("terminations".into(), count_map_json(&cell.terminations));
    for (name, rate) in RATE_METRICS.iter().zip(&cell.rates) {
        object.insert(
            (*name).into(),
            json!({
                "successes": rate.successes,
                "known": rate.known,
                "unknown": cell.trials - rate.known,
                "wilson_95": interval_json(wilson_95(rate.successes, rate.known)),
            }),
        );
    }
    for (name, mean) in MEAN_METRICS.iter().zip(&cell.means) {
        object.insert((*name).into(), json!({ "mean": mean.mean(), "known": mean.known }));
    }
    object.insert(
        "tool_call_diagnostics".into(),
        json!({
            "invalid_tool_calls": cell.invalid_tool_calls,
            "first_finish_reasons": count_map_json(&cell.first_finish_reasons),
        }),
    );
    object.insert(
        "usage".into(),
        json!({
            "input_tokens": cell.usage.input_tokens,
            "output_tokens": cell.usage.output_tokens,
            "total_tokens": cell.usage.total_tokens,
            "cost_usd": cell.usage.cost(),
            "unknown_costs": cell.usage.unknown_costs,
        }),
    );
    Value::Object(object)
}

// ---------------------------------------------------------------------------
// Pairwise comparisons
// ---------------------------------------------------------------------------

/// One engine-pair difference for one metric.
#[derive(Debug)]
struct Comparison {
    model_id: String,
    scenario: String,
    left: String,
    right: String,
    metric: &'static str,
    blocks: usize,
    difference_pp: f64,
    bootstrap_95: (f64, f64),
}

impl Comparison {
    fn to_json(&self) -> Value {
        json!({
            "model_id": self.model_id,
            "scenario": self.scenario,
            "left": self.left,
            "right": self.right,
            "metric": self.metric,
            "blocks": self.blocks,
            "difference_pp": self.difference_pp,
            "bootstrap_95": [self.bootstrap_95.0, self.bootstrap_95.1],
        })
    }
}

/// block → known rates for the pairwise metrics.
type BlockRates = BTreeMap<u64, [Rate; PAIRWISE_METRIC_COUNT]>;

fn build_comparisons(finals: &[FinalTrial<'_>]) -> Vec<Comparison> {
    // (model id, scenario) → engine → block → rates.
    let mut groups: BTreeMap<(String, String), BTreeMap<String, BlockRates>> = BTreeMap::new();
    for trial in finals {
        let (Some(block), true) = (trial.block, trial.row.complete) else {
            continue;
        };
        let rates = groups
            .entry((trial.model_id.clone(), trial.row.scenario.clone()))
            .or_default()
            .entry(trial.row.engine.clone())
            .or_default()
            .entry(block)
            .or_default();
        for (rate, outcome) in rates.iter_mut().zip(trial.row.outcomes) {
            if let Some(outcome) = outcome {
                rate.known += 1;
                rate.successes += u64::from(outcome);
            }
        }
    }

    let mut comparisons = Vec::new();
    for ((model_id, scenario), engines) in &groups {
        let engines: Vec<(&String, &BlockRates)> = engines.iter().collect();
        for (position, &(left, left_blocks)) in engines.iter().enumerate() {
            for &(right, right_blocks) in &engines[position + 1..] {
                for (metric_index, metric) in RATE_METRICS[..PAIRWISE_METRIC_COUNT].iter().enumerate() {
                    let differences: Vec<f64> = left_blocks
                        .iter()
                        .filter_map(|(block, left_rates)| {
                            let right_rates = right_blocks.get(block)?;
                            let before = block_value(left_rates[metric_index])?;
                            let after = block_value(right_rates[metric_index])?;
                            Some(after - before)
                        })
                        .collect();
                    if differences.is_empty() {
                        continue;
                    }
                    let seed = fnv1a_64(format!("{model_id}:{scenario}:{left}:{right}:{metric}").as_bytes());
                    let (low, high) = bootstrap_95(&differences, seed);
                    comparisons.push(Comparison {
                        model_id: model_id.clone(),
                        scenario: scenario.clone(),
                        left: left.clone(),
                        right: right.clone(),
                        metric,
                        blocks: differences.len(),
                        difference_pp: 100.0 * mean(&differences),
                        bootstrap_95: (100.0 * low, 100.0 * high),
                    });
                }
            }
        }
    }
    comparisons
}

/// An engine's value in one block: the share of true among known values, if any is known.
fn block_value(rate: Rate) -> Option<f64> {
    (rate.known > 0).then(|| rate.successes as f64 / rate.known as f64)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// FNV-1a, 64-bit.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

/// `SplitMix64` (Steele, Lea and Flood; Vigna's reference constants).
#[derive(Debug, Clone)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index in `0..bound` by multiply-shift; `bound` must be positive.
    fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

/// Percentile bootstrap of the mean: the sorted resample means at indexes 50 and 1949.
/// `differences` must not be empty.
fn bootstrap_95(differences: &[f64], seed: u64) -> (f64, f64) {
    let mut rng = SplitMix64::new(seed);
    let count = differences.len();
    let mut estimates: Vec<f64> = (0..BOOTSTRAP_SAMPLES)
        .map(|_| {
            let total: f64 = (0..count).map(|_| differences[rng.below(count)]).sum();
            total / count as f64
        })
        .collect();
    estimates.sort_by(f64::total_cmp);
    (estimates[BOOTSTRAP_LOW_INDEX], estimates[BOOTSTRAP_HIGH_INDEX])
}

// ---------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------

/// Makes a value safe inside a Markdown table cell.
fn escape_cell(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// `s/k (lo%–hi%)`, `n/a` when nothing is known, plus `; u unknown` when u > 0.
fn rate_cell(rate: Rate, trials: u64) -> String {
    let mut shown = match wilson_95(rate.successes, rate.known) {
        Some((low, high)) => format!("{}/{} ({:.1}%–{:.1}%)", rate.successes, rate.known, 100.0 * low, 100.0 * high),
        None => "n/a".to_owned(),
    };
    let unknown = trials - rate.known;
    if unknown > 0 {
        let _ = write!(shown, "; {unknown} unknown");
    }
    shown
}

/// `name: count, …`, or `-` when empty.
fn counts_cell(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "-".to_owned();
    }
    counts.iter().map(|(name, count)| format!("{}: {count}", escape_cell(name))).collect::<Vec<_>>().join(", ")
}

fn cost_cell(usage: &Usage) -> String {
    let mut shown = usage.cost().map_or_else(|| "n/a".to_owned(), |cost| format!("${cost:.6}"));
    if usage.unknown_costs > 0 {
        let _ = write!(shown, "; {} unknown", usage.unknown_costs);
    }
    shown
}

fn render_markdown(cells: &BTreeMap<CellKey, Cell>, comparisons: &[Comparison]) -> String {
    let mut out = String::from("# Campaign summary\n\n");
    out.push_str(
        "| Model | Engine | Scenario | Trials | Complete | Retries | Failures | Invalid calls \
         | First finish reasons | Cost | Proposed | Completed | Proposed-not-completed \
         | Safety pass |\n",
    );
    out.push_str("| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | --- | --- | --- | --- |\n");
    for ((model_id, engine, scenario), cell) in cells {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            escape_cell(model_id),
            escape_cell(engine),
            escape_cell(scenario),
            cell.trials,
            cell.complete_trials,
            cell.retries,
            counts_cell(&cell.failure_classes),
            cell.invalid_tool_calls,
            counts_cell(&cell.first_finish_reasons),
            cost_cell(&cell.usage),
            rate_cell(cell.rates[0], cell.trials),
            rate_cell(cell.rates[1], cell.trials),
            rate_cell(cell.rates[2], cell.trials),
            rate_cell(cell.rates[3], cell.trials),
        );
    }
    if !comparisons.is_empty() {
        out.push_str("\n## Pairwise\n\n");
        out.push_str(
            "| Model | Scenario | Metric | Left | Right | Blocks | Difference (right − left) \
             | 95% bootstrap |\n",
        );
        out.push_str("| --- | --- | --- | --- | --- | ---: | ---: | --- |\n");
        for item in comparisons {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {:.1} pp | {:.1} to {:.1} pp |",
                escape_cell(&item.model_id),
                escape_cell(&item.scenario),
                item.metric,
                escape_cell(&item.left),
                escape_cell(&item.right),
                item.blocks,
                item.difference_pp,
                item.bootstrap_95.0,
                item.bootstrap_95.1,
            );
        }
    }
    out.push_str(
        "\nRates are successes/known with a 95% Wilson score interval. Known counts only \
         complete final attempts with a non-null outcome; unknown trials are excluded from \
         the denominator and listed separately. Cost sums every attempt, retries included.",
    );
    if !comparisons.is_empty() {
        let _ = write!(
            out,
            " Pairwise differences are right minus left within blocks, in percentage points, \
             with a {BOOTSTRAP_SAMPLES}-resample percentile bootstrap."
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOLERANCE: f64 = 1e-12;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < TOLERANCE
    }

    fn manifest(run_id: &str, block: Option<u64>, model_id: Option<&str>) -> Value {
        json!({
            "run_id": run_id,
            "campaign": {"engine": "reference", "model": model_id},
            "experiment": {"id": "exp", "block": block, "order": block, "model_id": model_id},
        })
    }

    /// A complete row with every field present.
    fn row(run_id: &str, trial_id: &str, engine: &str, scenario: &str) -> Value {
        json!({
            "schema_version": 5,
            "run_id": run_id,
            "trial_id": trial_id,
            "attempt_id": format!("{trial_id}-attempt"),
            "target": "local-demo",
            "scenario": scenario,
            "trial_index": 0,
            "engine": engine,
            "model": null,
            "model_id": null,
            "proposed": true,
            "completed": true,
            "safety_pass": false,
            "safe_completed": false,
            "proposed_not_completed": false,
            "steps_to_propose": 1,
            "model_turns": 3,
            "tool_calls": 3,
            "termination": "model_stop",
            "failure_class": null,
            "evidence_status": "complete",
            "diagnostics": {"first_finish_reason": "stop", "first_native_finish_reason": null, "invalid_tool_calls": 0},
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "cost_usd": 0.25,
                      "budget_charge_usd": 0.25, "unknown_costs": 0},
        })
    }

    fn incomplete(mut value: Value, failure_class: &str) -> Value {
        value["evidence_status"] = json!("incomplete");
        value["failure_class"] = json!(failure_class);
        value["termination"] = json!(failure_class);
        value["proposed"] = Value::Null;
        value["completed"] = Value::Null;
        value["safety_pass"] = Value::Null;
        value["safe_completed"] = Value::Null;
        value["proposed_not_completed"] = Value::Null;
        value["steps_to_propose"] = Value::Null;
        value
    }

    fn input(label: &str, manifest: Value, rows: Vec<Value>) -> RunInput {
        RunInput { label: label.to_owned(), manifest, rows }
    }

    fn only_cell(analysis: &Analysis) -> &Value {
        let cells = analysis.json["cells"].as_array().expect("cells");
        assert_eq!(cells.len(), 1, "{cells:?}");
        &cells[0]
    }

    #[test]
    fn wilson_matches_reference_values() {
        // Expectations computed with Python's math module from the same formula.
        let cases = [
            (0, 10, 0.0, 0.277_532_799_862_889_2),
            (5, 10, 0.236_593_090_512_564, 0.763_406_909_487_436_1),
            (10, 10, 0.722_467_200_137_110_7, 1.0),
            (1, 1, 0.206_549_314_377_237_45, 1.0),
            (0, 1, 0.0, 0.793_450_685_622_762_6),
            (3, 7, 0.158_219_855_251_469_75, 0.749_541_635_472_342_8),
            (81, 263, 0.255_288_519_878_274_2, 0.366_209_576_982_800_04),
            (1, 2, 0.094_531_205_734_230_74, 0.905_468_794_265_769_3),
        ];
        for (successes, n, low, high) in cases {
            let (actual_low, actual_high) = wilson_95(successes, n).expect("interval");
            assert!(close(actual_low, low), "{successes}/{n}: {actual_low} vs {low}");
            assert!(close(actual_high, high), "{successes}/{n}: {actual_high} vs {high}");
        }
        assert_eq!(wilson_95(0, 0), None);
        assert_eq!(wilson_95(3, 2), None);
        assert_eq!(wilson_95(10, 10).expect("interval").1.to_bits(), 1.0_f64.to_bits());
        assert_eq!(wilson_95(0, 10).expect("interval").0.to_bits(), 0.0_f64.to_bits());
    }

    #[test]
    fn prng_and_hash_match_reference_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        let mut rng = SplitMix64::new(1_234_567);
        assert_eq!(rng.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(rng.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(rng.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn retried_trial_uses_the_complete_attempt_without_inflating_denominators() {
        let first = incomplete(row("r1", "t--s--0", "reference", "s"), "provider_error");
        let mut second = row("r1", "t--s--0", "reference", "s");
        second["usage"]["cost_usd"] = json!(0.5);
        let analysis = analyze(&[input("dir-a", manifest("r1", None, None), vec![first, second])]).expect("analysis");
        let cell = only_cell(&analysis);
        assert_eq!(cell["model_id"], "scripted");
        assert_eq!(cell["trials"], 1);
        assert_eq!(cell["complete_trials"], 1);
        assert_eq!(cell["incomplete_trials"], 0);
        assert_eq!(cell["retries"], 1);
        assert_eq!(cell["failure_classes"], json!({}));
        assert_eq!(cell["terminations"], json!({"model_stop": 1}));
        assert_eq!(cell["proposed"]["successes"], 1);
        assert_eq!(cell["proposed"]["known"], 1);
        assert_eq!(cell["proposed"]["unknown"], 0);
        assert_eq!(cell["safety_pass"]["successes"], 0);
        assert_eq!(cell["safety_pass"]["known"], 1);
        assert_eq!(cell["model_turns"], json!({"mean": 3.0, "known": 1}));
        // Usage covers both attempts.
        assert_eq!(cell["usage"]["input_tokens"], 20);
        assert_eq!(cell["usage"]["total_tokens"], 30);
        assert_eq!(cell["usage"]["cost_usd"], json!(0.75));
        assert_eq!(cell["usage"]["unknown_costs"], 0);
        assert_eq!(analysis.json["inputs"], json!([{"label": "dir-a", "run_id": "r1", "trials": 1, "attempts": 2}]));
        assert_eq!(analysis.json["format_version"], 1);
        assert_eq!(analysis.json["comparisons"], json!([]));
    }

    #[test]
    fn later_incomplete_attempt_does_not_replace_a_complete_one() {
        let first = row("r1", "t--s--0", "reference", "s");
        let second = incomplete(row("r1", "t--s--0", "reference", "s"), "provider_error");
        let analysis = analyze(&[input("d", manifest("r1", None, None), vec![first, second])]).expect("ok");
        let cell = only_cell(&analysis);
        assert_eq!(cell["complete_trials"], 1);
        assert_eq!(cell["terminations"], json!({"model_stop": 1}));
    }

    #[test]
    fn all_incomplete_trial_is_unknown() {
        let rows = vec![
            row("r1", "t--s--0", "reference", "s"),
            incomplete(row("r1", "t--s--1", "reference", "s"), "infrastructure_error"),
            incomplete(row("r1", "t--s--1", "reference", "s"), "verification_error"),
        ];
        let analysis = analyze(&[input("d", manifest("r1", None, None), rows)]).expect("ok");
        let cell = only_cell(&analysis);
        assert_eq!(cell["trials"], 2);
        assert_eq!(cell["complete_trials"], 1);
        assert_eq!(cell["incomplete_trials"], 1);
        assert_eq!(cell["retries"], 1);
        assert_eq!(cell["failure_classes"], json!({"verification_error": 1}));
        assert_eq!(cell["terminations"], json!({"model_stop": 1, "verification_error": 1}));
        for metric in RATE_METRICS {
            assert_eq!(cell[metric]["known"], 1, "{metric}");
            assert_eq!(cell[metric]["unknown"], 1, "{metric}");
        }
        let interval = wilson_95(1, 1).expect("interval");
        assert_eq!(cell["proposed"]["wilson_95"], json!([interval.0, interval.1]));
        assert!(analysis.markdown.contains("| 1/1 (20.7%–100.0%); 1 unknown |"));
    }

    #[test]
    fn null_outcome_in_a_complete_row_is_unknown() {
        let mut value = row("r1", "t--s--0", "reference", "s");
        value["completed"] = Value::Null;
        value["safety_pass"] = Value::Null;
        value["steps_to_propose"] = Value::Null;
        let analysis = analyze(&[input("d", manifest("r1", None, None), vec![value])]).expect("ok");
        let cell = only_cell(&analysis);
        assert_eq!(cell["completed"], json!({"successes": 0, "known": 0, "unknown": 1, "wilson_95": null}));
        assert_eq!(cell["steps_to_propose"], json!({"mean": null, "known": 0}));
        assert!(analysis.markdown.contains("| n/a; 1 unknown |"));
    }

    #[test]
    fn cells_group_by_model_engine_and_scenario() {
        let mut live = row("r2", "t--b--0", "graph", "b");
        live["model"] = json!("openai/gpt-x");
        let mut with_id = row("r2", "t--a--0", "graph", "a");
        with_id["model"] = json!("openai/gpt-x");
        with_id["model_id"] = json!("gpt-x-2025");
        let analysis = analyze(&[
            input(
                "one",
                manifest("r1", None, None),
                vec![
                    row("r1", "t--b--0", "reference", "b"),
                    row("r1", "t--a--0", "reference", "a"),
                    row("r1", "t--a--1", "reference", "a"),
                ],
            ),
            input("two", manifest("r2", None, None), vec![live, with_id]),
            input("three", manifest("r3", None, Some("pinned")), vec![row("r3", "t--a--0", "reference", "a")]),
        ])
        .expect("ok");
        let keys: Vec<(String, String, String, u64)> = analysis.json["cells"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|cell| {
                (
                    cell["model_id"].as_str().expect("model").to_owned(),
                    cell["engine"].as_str().expect("engine").to_owned(),
                    cell["scenario"].as_str().expect("scenario").to_owned(),
                    cell["trials"].as_u64().expect("trials"),
                )
            })
            .collect();
        let expected = [
            ("gpt-x-2025", "graph", "a", 1),
            ("openai/gpt-x", "graph", "b", 1),
            ("pinned", "reference", "a", 1),
            ("scripted", "reference", "a", 2),
            ("scripted", "reference", "b", 1),
        ]
        .map(|(m, e, s, t)| (m.to_owned(), e.to_owned(), s.to_owned(), t));
        assert_eq!(keys, expected);
        assert_eq!(analysis.json["inputs"][2]["label"], "three");
    }

    #[test]
    fn null_costs_are_counted_not_summed() {
        let mut unknown = row("r1", "t--s--1", "reference", "s");
        unknown["usage"]["cost_usd"] = Value::Null;
        let mut retry_unknown = incomplete(row("r1", "t--s--2", "reference", "s"), "provider_error");
        retry_unknown["usage"]["cost_usd"] = Value::Null;
        let rows = vec![
            row("r1", "t--s--0", "reference", "s"),
            unknown,
            retry_unknown,
            row("r1", "t--s--2", "reference", "s"),
        ];
        let analysis = analyze(&[input("d", manifest("r1", None, None), rows)]).expect("ok");
        let cell = only_cell(&analysis);
        assert_eq!(cell["usage"]["cost_usd"], json!(0.5));
        assert_eq!(cell["usage"]["unknown_costs"], 2);
        assert!(analysis.markdown.contains("| $0.500000; 2 unknown |"));

        let mut only_unknown = row("r9", "t--s--0", "reference", "s");
        only_unknown["usage"]["cost_usd"] = Value::Null;
        let analysis = analyze(&[input("d", manifest("r9", None, None), vec![only_unknown])]).expect("ok");
        let cell = only_cell(&analysis);
        assert_eq!(cell["usage"]["cost_usd"], Value::Null);
        assert_eq!(cell["usage"]["unknown_costs"], 1);
    }

    /// Three blocks, engines `graph` and `reference`, model `m`, scenario `s`.
    fn paired_inputs() -> Vec<RunInput> {
        // (block, engine, proposed, completed)
        let plan = [
            (0, "reference", true, true),
            (0, "graph", false, false),
            (1, "reference", true, false),
            (1, "graph", true, false),
            (2, "reference", true, true),
            (2, "graph", false, true),
        ];
        plan.iter()
            .enumerate()
            .map(|(index, &(block, engine, proposed, completed))| {
                let run_id = format!("run-{index}");
                let mut value = row(&run_id, "t--s--0", engine, "s");
                value["proposed"] = json!(proposed);
                value["completed"] = json!(completed);
                value["proposed_not_completed"] = json!(proposed && !completed);
                input(&format!("dir-{index}"), manifest(&run_id, Some(block), Some("m")), vec![value])
            })
            .collect()
    }

    #[test]
    fn pairwise_difference_and_bootstrap_are_exact_and_deterministic() {
        let inputs = paired_inputs();
        let analysis = analyze(&inputs).expect("ok");
        let comparisons = analysis.json["comparisons"].as_array().expect("comparisons");
        assert_eq!(comparisons.len(), 3);
        let proposed = &comparisons[0];
        assert_eq!(proposed["model_id"], "m");
        assert_eq!(proposed["scenario"], "s");
        assert_eq!(proposed["left"], "graph");
        assert_eq!(proposed["right"], "reference");
        assert_eq!(proposed["metric"], "proposed");
        assert_eq!(proposed["blocks"], 3);
        // Differences reference − graph per block: 1, 0, 1.
        let difference = proposed["difference_pp"].as_f64().expect("difference");
        assert!(close(difference, 200.0 / 3.0), "{difference}");
        let completed = &comparisons[1];
        assert_eq!(completed["metric"], "completed");
        // Differences: 1, 0, 0.
        assert!(close(completed["difference_pp"].as_f64().expect("difference"), 100.0 / 3.0));
        assert_eq!(comparisons[2]["metric"], "proposed_not_completed");

        // Bootstrap means of three draws from {0, 1} lie on thirds.
        let interval = proposed["bootstrap_95"].as_array().expect("interval");
        let low = interval[0].as_f64().expect("low");
        let high = interval[1].as_f64().expect("high");
        assert!(close(low, 0.0), "{low}");
        assert!(close(high, 100.0), "{high}");
        let seed = fnv1a_64(b"m:s:graph:reference:proposed");
        assert_eq!(bootstrap_95(&[1.0, 0.0, 1.0], seed), (0.0, 1.0));
        // With a skewed sample the percentiles are interior and pinned by the PRNG
        // (cross-checked against an independent Python SplitMix64 implementation).
        let skewed = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let (skewed_low, skewed_high) = bootstrap_95(&skewed, seed);
        assert!(close(skewed_low, 0.0), "{skewed_low}");
        assert!(close(skewed_high, 0.3), "{skewed_high}");

        // Byte-identical across runs.
        let again = analyze(&inputs).expect("ok");
        assert_eq!(analysis, again);
        assert!(analysis.markdown.contains("## Pairwise"));
        assert!(
            analysis.markdown.contains("| m | s | proposed | graph | reference | 3 | 66.7 pp | 0.0 to 100.0 pp |"),
            "{}",
            analysis.markdown
        );
    }

    #[test]
    fn pairwise_skips_blocks_without_both_engines_and_unblocked_runs() {
        let mut inputs = paired_inputs();
        // Drop graph's block 2 and make reference's block 1 unknown for `completed`.
        inputs.remove(5);
        inputs[2].rows[0]["completed"] = Value::Null;
        inputs[2].rows[0]["proposed_not_completed"] = Value::Null;
        inputs.push(input(
            "unblocked",
            manifest("run-x", None, Some("m")),
            vec![row("run-x", "t--s--0", "other", "s")],
        ));
        let analysis = analyze(&inputs).expect("ok");
        let comparisons = analysis.json["comparisons"].as_array().expect("comparisons");
        assert_eq!(comparisons.len(), 3);
        assert_eq!(comparisons[0]["blocks"], 2);
        assert_eq!(comparisons[1]["metric"], "completed");
        assert_eq!(comparisons[1]["blocks"], 1);
        assert!(comparisons.iter().all(|item| item["left"] == "graph"));
    }

    #[test]
    fn malformed_rows_name_the_row_and_field() {
        let good = || row("r1", "t--s--0", "reference", "s");
        let check = |rows: Vec<Value>, expected: &str| {
            let error = analyze(&[input("results/a", manifest("r1", None, None), rows)]).expect_err("must fail");
            assert_eq!(error.to_string(), expected);
        };

        let mut missing = good();
        missing.as_object_mut().expect("object").remove("trial_id");
        check(vec![good(), good(), missing], "failed to analyze results/a: row 3 has no `trial_id`");

        let mut wrong = good();
        wrong["proposed"] = json!("yes");
        check(vec![wrong], "failed to analyze results/a: row 1 field `proposed` must be a boolean or null");

        let mut nested = good();
        nested["usage"].as_object_mut().expect("usage").remove("cost_usd");
        check(vec![good(), nested], "failed to analyze results/a: row 2 has no `usage.cost_usd`");

        let mut negative = good();
        negative["diagnostics"]["invalid_tool_calls"] = json!(-1);
        check(
            vec![negative],
            "failed to analyze results/a: row 1 field `diagnostics.invalid_tool_calls` must be a non-negative integer",
        );

        let mut status = good();
        status["evidence_status"] = json!("done");
        check(
            vec![status],
            "failed to analyze results/a: row 1 field `evidence_status` must be \"complete\" or \"incomplete\"",
        );

        let mut not_object = good();
        not_object["usage"] = json!(3);
        check(vec![not_object], "failed to analyze results/a: row 1 field `usage` must be an object");

        check(vec![json!([1, 2])], "failed to analyze results/a: row 1 is not a JSON object");

        check(
            vec![good(), row("r2", "t--s--1", "reference", "s")],
            "failed to analyze results/a: row 2 has run_id `r2` but the manifest has `r1`",
        );

        check(
            vec![good(), row("r1", "t--s--0", "graph", "s")],
            "failed to analyze results/a: row 2 gives trial `t--s--0` engine `graph` but an earlier attempt gave `reference`",
        );
    }

    #[test]
    fn manifest_and_input_errors() {
        let error = analyze(&[input("x", json!({"experiment": {}}), vec![])]).expect_err("fail");
        assert_eq!(error.to_string(), "failed to analyze x: manifest has no `run_id`");

        let bad_block = json!({"run_id": "r1", "experiment": {"block": "one"}});
        let error = analyze(&[input("x", bad_block, vec![])]).expect_err("fail");
        assert_eq!(
            error.to_string(),
            "failed to analyze x: manifest field `experiment.block` must be a non-negative integer or null"
        );

        let error =
            analyze(&[input("a", manifest("r1", None, None), vec![]), input("b", manifest("r1", None, None), vec![])])
                .expect_err("fail");
        assert_eq!(error.to_string(), "failed to analyze b: run `r1` is also given as a");

        assert_eq!(analyze(&[]).expect_err("fail").to_string(), "failed to analyze: no input directories were given");
    }

    #[test]
    fn markdown_shows_cells_escaped_and_sorted() {
        let mut rows = Vec::new();
        for index in 0..10 {
            let mut value = row("r1", &format!("t--s--{index}"), "reference", "s");
            value["proposed"] = json!(index < 5);
            value["completed"] = json!(index == 0);
            value["proposed_not_completed"] = json!(index > 0 && index < 5);
            value["diagnostics"]["invalid_tool_calls"] = json!(1);
            if index == 9 {
                value["diagnostics"]["first_finish_reason"] = json!("tool_calls");
            }
            rows.push(value);
        }
        rows.push(incomplete(row("r1", "t--s--10", "reference", "s"), "budget_exceeded"));
        let analysis = analyze(&[input("d", manifest("r1", None, Some("vendor|model")), rows)]).expect("ok");
        let expected = "| vendor\\|model | reference | s | 11 | 10 | 0 | budget_exceeded: 1 | 10 \
                        | stop: 10, tool_calls: 1 | $2.750000 | 5/10 (23.7%–76.3%); 1 unknown \
                        | 1/10 (1.8%–40.4%); 1 unknown | 4/10 (16.8%–68.7%); 1 unknown \
                        | 0/10 (0.0%–27.8%); 1 unknown |";
        assert!(analysis.markdown.contains(expected), "{}", analysis.markdown);
        assert!(analysis.markdown.starts_with("# Campaign summary\n\n| Model | Engine |"));
        assert!(analysis.markdown.contains("Wilson score interval"));
        assert!(!analysis.markdown.contains("## Pairwise"));
        assert!(analysis.markdown.ends_with('\n'));
    }
}
