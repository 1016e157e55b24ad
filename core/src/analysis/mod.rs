//! Campaign analysis: turns one or more results directories into `summary.json` and
//! `summary.md`.
//!
//! This module is pure. The caller reads each directory's `manifest.json` and `runs.jsonl`
//! into a [`RunInput`], calls [`analyze`], and writes [`Analysis::json`] and
//! [`Analysis::markdown`]. Identical input gives byte-identical output: every map is a
//! `BTreeMap`, cells and comparisons are sorted, and the bootstrap uses a fixed PRNG.
//!
//! Concerns, one module each: [`inputs`] validates the runs (rows read as the one
//! [`Row`](crate::records::Row) type, the manifest through [`AnalysisManifest`]) and reduces
//! each trial to its final row; `cells` aggregates the per-cell counts and rates;
//! `compare` computes the pairwise engine differences; `markdown` renders the table.
//! The statistics are in [`crate::stats`].
//!
//! # Semantics
//!
//! * Every row is read as a [`Row`](crate::records::Row) of its producer's version: this
//!   tool's ([`RESULTS_SCHEMA_VERSION`](crate::records::RESULTS_SCHEMA_VERSION)) or, when the
//!   manifest was written by the original tool, the original's (brought to this build's
//!   shape by [`crate::records::original::upgrade_row`]). A missing, unknown or mistyped
//!   field, a row whose `run_id` differs from the manifest's, or a trial whose attempts
//!   disagree on `engine`, `scenario` or `target` is an [`AnalyzeError`] naming the input
//!   label, the 1-based row number and the field.
//! * **Inputs told apart by what they hold**, not by their own run id: two inputs that share
//!   a run (a merged directory's shards are runs of it) or an attempt (campaign, trial id,
//!   attempt id) would count the same trials twice — a merged directory given with its own
//!   shards, two merges of the same shards, a copy of a directory — and are refused naming
//!   both ([`AnalyzeError::Overlap`]), unless [`Overlap::Dedupe`] (`--dedupe`) is asked for:
//!   then each trial of overlapping inputs is counted once, from the input that holds the most
//!   attempts of it (the first given on a tie), and a trial whose inputs hold histories that
//!   do not extend one another (one run resumed in two copies) is refused
//!   ([`AnalyzeError::Forked`]). Inputs of independent runs of one campaign share nothing and
//!   are both counted.
//! * **Denominators from the recorded matrix**: for this tool's runs the caller passes the
//!   trial matrix rebuilt from the manifest's campaign ([`RunInput::matrix`]). A trial of it
//!   with no row counts in its cell's `trials` and `not_run` (and so in `incomplete_trials`
//!   and every metric's `unknown`): trials that never ran are shown, never dropped. A row
//!   whose trial is not in the matrix is refused.
//! * **Final row per trial** (trial = run id + trial id): the last attempt whose
//!   `evidence_status` is `complete`, else the last attempt. `retries` = attempts − 1.
//! * **Grouping model id**: the manifest's `experiment.model_id`, else the final row's
//!   `model_id`, else its `model`, else `"scripted"` (the deterministic engine that has no
//!   model). Empty strings count as unset.
//! * **Campaigns apart**: each input's campaign is [`AnalysisManifest::campaign`] (its
//!   experiment, else the hash of the campaign its manifest records, else its run). Cells of
//!   different campaigns are kept apart — an attack run and its negative control analysed
//!   together are two rows, never one `proposed 3/4` — and each cell, comparison and input
//!   names its campaign; `summary.json` lists the `campaigns` with the inputs that ran them.
//!   [`Campaigns::Pooled`] (`analyze --pool`) counts every input's trials together per
//!   (model id, engine, scenario), as the original's `analyze` does; cells then have
//!   `campaign: null`. The recommendation is computed over every input either way.
//! * **Cells** are grouped by (campaign, model id, engine, scenario). For each of `proposed`,
//!   `completed`, `proposed_not_completed`, `safety_pass`, `safe_completed` and
//!   `recovery_succeeded` (null unless the trial met a tool error), `known`
//!   counts the *complete* final rows whose value is not null and `unknown` = trials −
//!   known. Unknowns are always reported and never enter a denominator.
//!   `failure_classes` counts incomplete final rows (a null class is counted as
//!   `unclassified`); `terminations` and `tool_call_diagnostics` count final rows;
//!   `model_turns`, `tool_calls` and `steps_to_propose` are means over complete final rows
//!   with a value. `tool_error_count` sums the final rows' tool errors, and `tool_sequences`
//!   counts the final rows' `tool_sequence`s, each joined with ` -> ` (an empty sequence is
//!   the key `""`), as the original does. `usage` sums **every attempt**, because retries cost money too:
//!   `cost_usd` is the sum over attempts that report a cost (null when none does) and
//!   `unknown_costs` counts the attempts whose cost is null.
//! * **Wilson score interval** ([`wilson_95`](crate::stats::wilson_95)) with z =
//!   [`WILSON_Z`](crate::stats::WILSON_Z), clamped to [0, 1].
//! * **Pairwise comparisons**: complete final rows whose manifest has an
//!   `experiment.block` are grouped by (model id, scenario). For every pair of engines
//!   (left < right by byte order) and each of `proposed`, `completed` and
//!   `proposed_not_completed`, each block contributes value(right) − value(left), with
//!   booleans as 0/1. A block is skipped when either engine has no known value in it.
//!   When an engine has several known rows in one block (several trials or targets), its
//!   value for that block is their mean; the Python original silently kept only the last
//!   row. `difference_pp` is 100 × the mean difference.
//! * **Bootstrap**: [`BOOTSTRAP_SAMPLES`](crate::stats::BOOTSTRAP_SAMPLES) resamples (with
//!   replacement, same size) of the per-block differences; `bootstrap_95` is 100 × the sorted
//!   means at indexes 50 and 1949. The original drew from Python's `random.Random` seeded
//!   with a string, which cannot be reproduced outside `CPython`, so the numbers differ from
//!   it. Here the generator is `SplitMix64` seeded with the FNV-1a 64-bit hash of
//!   `"<model_id>:<scenario>:<left>:<right>:<metric>"`, and an index below `n` is
//!   `(next_u64 × n) >> 64` (multiply-shift; its bias is below n / 2⁶⁴).
//! * **Recommendation**: the original's predeclared rule, see [`recommend`].

mod cells;
mod compare;
pub mod inputs;
mod markdown;
mod overlaps;
pub mod recommend;

use std::collections::BTreeMap;

use serde_json::{Value, json};

pub use inputs::AnalysisManifest;
pub use recommend::{RecommendOptions, Recommendation};

/// Version of the `summary.json` layout.
pub const FORMAT_VERSION: u64 = 1;

/// Grouping model id for rows that name no model (the scripted engine).
pub const SCRIPTED_MODEL_ID: &str = "scripted";

/// Boolean outcome metrics, in output order. The first three are compared pairwise.
const RATE_METRICS: [&str; 6] =
    ["proposed", "completed", "proposed_not_completed", "safety_pass", "safe_completed", "recovery_succeeded"];

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
    /// The run's trial matrix, rebuilt from the campaign its manifest records (None for runs
    /// of the original tool): the denominators. A trial of the matrix without a row is
    /// counted as not run; a row outside it is refused.
    pub matrix: Option<Vec<PlannedTrial>>,
    /// What the reader established about the input's integrity (`verify`), written into
    /// `summary.json` and `summary.md` as it is.
    pub integrity: Option<InputIntegrity>,
}

/// An input's integrity as its reader established it: a status word and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputIntegrity {
    /// `verified_signed`, `verified_signature_unchecked`, `verified_unsigned`, `unsealed` or
    /// `legacy_unverified`.
    pub status: String,
    /// What it means, in words.
    pub says: String,
}

/// What to do with inputs that hold the same trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Refuse them, naming both ([`AnalyzeError::Overlap`]).
    #[default]
    Refuse,
    /// Count each trial once (`--dedupe`).
    Dedupe,
}

/// One trial of a run's recorded matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTrial {
    /// `<target>--<scenario>--<index>`.
    pub trial_id: String,
    /// Target id.
    pub target: String,
    /// Scenario id.
    pub scenario: String,
    /// The agent loop the campaign names.
    pub engine: String,
    /// The campaign's `model_id`, else its `model` (None: the scripted model).
    pub model_id: Option<String>,
}

/// The rendered analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Content of `summary.json`.
    pub json: Value,
    /// Content of `summary.md`, ending with a newline.
    pub markdown: String,
    /// Trials of the inputs' matrices that have no row at all (never ran).
    pub not_run: u64,
    /// Every trial as the analysis counted it, input by input: trials with rows in order of
    /// first appearance, then those that never ran (in matrix order).
    pub trials: Vec<CountedTrial>,
    /// Campaigns whose cells are shown apart (1 when the inputs ran one campaign or were
    /// pooled).
    pub campaigns: usize,
}

/// One trial as the analysis counted it: its cell, and which attempt decided its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedTrial {
    /// Index of its input in the inputs given to [`analyze`].
    pub input: usize,
    /// `<target>--<scenario>--<index>`.
    pub trial_id: String,
    /// Target id.
    pub target: String,
    /// The cell: grouping model id, engine, scenario.
    pub model_id: String,
    /// The agent loop.
    pub engine: String,
    /// Scenario id.
    pub scenario: String,
    /// Indexes of its attempts in the input's rows, in order (empty: it never ran).
    pub attempts: Vec<usize>,
    /// Index of its final row (the last complete attempt, else the last); None: never ran.
    pub final_row: Option<usize>,
}

/// Why a set of results directories could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// No input was given.
    #[error("failed to analyze: no input directories were given")]
    NoInputs,
    /// The manifest is not an object or lacks a field analysis needs.
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
        expected: String,
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
    /// A row has a field rows do not have.
    #[error("failed to analyze {label}: row {row} has unknown field `{field}`")]
    UnknownField {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The field, dotted for nested fields.
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
        expected: String,
    },
    /// A row of a format version this build does not read.
    #[error("failed to analyze {label}: row {row} has schema_version {found}, but rows of {producer} have {expected}")]
    UnsupportedVersion {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The row's version.
        found: u64,
        /// The version this build reads from that producer.
        expected: u64,
        /// Who wrote the run (`this tool`, `the original 0.1.0`).
        producer: &'static str,
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
    /// A row names a trial that is not in the run's recorded matrix.
    #[error("failed to analyze {label}: row {row} has trial `{trial_id}`, which is not in the run's recorded matrix")]
    OutsideMatrix {
        /// The input label.
        label: String,
        /// 1-based row number in `runs.jsonl`.
        row: usize,
        /// The trial id.
        trial_id: String,
    },
    /// Two inputs hold the same trials.
    #[error(
        "failed to analyze: inputs {other} and {label} overlap: both hold {what}, so their trials would be counted twice; give each input once, or `--dedupe` to count each trial once"
    )]
    Overlap {
        /// The later input label.
        label: String,
        /// The earlier input label.
        other: String,
        /// What both hold (`run …`, `attempt … of trial …`).
        what: String,
    },
    /// Overlapping inputs hold histories of one trial that do not extend one another.
    #[error(
        "failed to analyze: inputs {other} and {label} hold different attempts of trial `{trial_id}` of one run (it was resumed in two copies), so `--dedupe` cannot tell which to count; analyse one of them"
    )]
    Forked {
        /// The later input label.
        label: String,
        /// The earlier input label.
        other: String,
        /// The trial.
        trial_id: String,
    },
}

/// Analyses the given results directories.
///
/// # Errors
///
/// Returns an [`AnalyzeError`] when no input is given, when a manifest or row is malformed,
/// when a row's `run_id` differs from its manifest's, when a trial's attempts disagree on
/// engine, scenario or target, or when two inputs hold the same run.
pub fn analyze(inputs: &[RunInput]) -> Result<Analysis, AnalyzeError> {
    analyze_with(inputs, &RecommendOptions::default())
}

/// Analyses the given results directories, applying the recommendation rule with `options`
/// (`--practical-margin-pp`, `--conformance-passed`; [`analyze`] uses the original's
/// defaults: a 10 pp margin, conformance not passed).
///
/// # Errors
///
/// As [`analyze`].
pub fn analyze_with(inputs: &[RunInput], options: &RecommendOptions) -> Result<Analysis, AnalyzeError> {
    analyze_inputs(inputs, options, Campaigns::Apart)
}

/// How the cells of runs of different campaigns are counted (`analyze --pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Campaigns {
    /// Each campaign's cells apart: an attack run and its negative control are two rows.
    #[default]
    Apart,
    /// Every input's trials counted together per (model id, engine, scenario), as the
    /// original's `analyze` does.
    Pooled,
}

/// Analyses the given results directories as [`analyze_with`] does, with the cells of runs
/// of different campaigns kept apart or pooled as `campaigns` says.
///
/// # Errors
///
/// As [`analyze`].
pub fn analyze_inputs(
    inputs: &[RunInput],
    options: &RecommendOptions,
    campaigns: Campaigns,
) -> Result<Analysis, AnalyzeError> {
    analyze_counted(inputs, options, campaigns, Overlap::Refuse)
}

/// [`analyze_inputs`], with inputs that hold the same trials refused or counted once as
/// `overlap` says (see the module docs).
///
/// # Errors
///
/// As [`analyze`], and [`AnalyzeError::Overlap`] / [`AnalyzeError::Forked`].
pub fn analyze_counted(
    inputs: &[RunInput],
    options: &RecommendOptions,
    campaigns: Campaigns,
    overlap: Overlap,
) -> Result<Analysis, AnalyzeError> {
    if inputs.is_empty() {
        return Err(AnalyzeError::NoInputs);
    }
    let mut runs = Vec::with_capacity(inputs.len());
    for input in inputs {
        runs.push(inputs::Run::read(input)?);
    }
    overlaps::resolve(&mut runs, overlap)?;
    // Each campaign and the inputs that ran it, in order of first appearance.
    let mut campaign_inputs: Vec<(String, Vec<&str>)> = Vec::new();
    for run in &runs {
        match campaign_inputs.iter_mut().find(|(key, _)| *key == run.campaign.1) {
            Some((_, labels)) => labels.push(run.label),
            None => campaign_inputs.push((run.campaign.1.clone(), vec![run.label])),
        }
    }
    for run in &mut runs {
        run.campaign = match campaigns {
            Campaigns::Pooled => (0, String::new()),
            Campaigns::Apart => (
                campaign_inputs.iter().position(|(key, _)| *key == run.campaign.1).unwrap_or(0),
                run.campaign.1.clone(),
            ),
        };
    }
    let labels: BTreeMap<String, String> =
        campaign_inputs.iter().map(|(key, inputs)| (key.clone(), campaign_label(inputs))).collect();

    let finals: Vec<inputs::FinalTrial<'_>> = runs.iter().flat_map(inputs::Run::final_trials).collect();
    let not_run: Vec<cells::CellKey> = runs.iter().flat_map(inputs::Run::not_run).collect();
    let cells = cells::build(&finals, &not_run);
    let comparisons = compare::build(&finals);
    let recommendation = recommend::recommend(&finals, options);

    let json = json!({
        "format_version": FORMAT_VERSION,
        "pooled": campaigns == Campaigns::Pooled,
        "campaigns": campaign_inputs
            .iter()
            .map(|(key, inputs)| json!({"campaign": key, "label": labels[key], "inputs": inputs}))
            .collect::<Vec<_>>(),
        "cells": cells.iter().map(|(key, cell)| cells::to_json(key, cell)).collect::<Vec<_>>(),
        "comparisons": comparisons.iter().map(compare::Comparison::to_json).collect::<Vec<_>>(),
        "dedupe": overlap == Overlap::Dedupe,
        "inputs": runs
            .iter()
            .zip(inputs)
            .map(|(run, input)| {
                let mut entry = json!({
                    "label": run.label,
                    "run_id": run.manifest.run_id,
                    "campaign": run.manifest.campaign(),
                    "trials": run.counted_trials() + run.not_run().len(),
                    "not_run": run.not_run().len(),
                    "attempts": run.rows.len(),
                });
                if overlap == Overlap::Dedupe {
                    entry["counted_in_another_input"] = json!(run.excluded.len());
                }
                if let Some(integrity) = &input.integrity {
                    entry["integrity"] = json!({"status": integrity.status, "says": integrity.says});
                }
                entry
            })
            .collect::<Vec<_>>(),
        "recommendation": recommendation.to_json(),
    });
    let integrity: Vec<(&str, &str)> =
        inputs.iter().filter_map(|i| i.integrity.as_ref().map(|x| (i.label.as_str(), x.says.as_str()))).collect();
    // The recommendation is a rule over a live comparison's engines: summary.md shows it for
    // an experiment's runs only (summary.json always carries it).
    let experiment = runs.iter().any(|run| run.manifest.experiment_id().is_some());
    let markdown = markdown::render(&cells, &comparisons, experiment.then_some(&recommendation), &labels, &integrity);
    let mut trials = Vec::new();
    for (input, run) in runs.iter().enumerate() {
        for trial in run.final_trials() {
            let row = trial.row;
            trials.push(CountedTrial {
                input,
                trial_id: row.trial_id.clone(),
                target: row.target.clone(),
                model_id: trial.model_id,
                engine: row.engine.as_str().to_owned(),
                scenario: row.scenario.clone(),
                attempts: trial.indexes.to_vec(),
                final_row: Some(trial.final_index),
            });
        }
        for ((_, model_id, engine, scenario), planned) in run.not_run_trials() {
            trials.push(CountedTrial {
                input,
                trial_id: planned.trial_id.clone(),
                target: planned.target.clone(),
                model_id,
                engine,
                scenario,
                attempts: Vec::new(),
                final_row: None,
            });
        }
    }
    let campaigns_shown_apart = if campaigns == Campaigns::Apart { campaign_inputs.len() } else { 1 };
    Ok(Analysis { json, markdown, not_run: not_run.len() as u64, trials, campaigns: campaigns_shown_apart })
}

/// How a campaign is named in `summary.md` and the report: the inputs that ran it.
fn campaign_label(inputs: &[&str]) -> String {
    match inputs {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [one, two] => format!("{one}, {two}"),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}

#[cfg(test)]
mod tests;
