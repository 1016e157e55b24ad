//! Cells: final trials grouped by (campaign, model id, engine, scenario), with their counts, rates,
//! means, diagnostics and usage, and each cell's `summary.json` object.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::inputs::{CampaignKey, FinalTrial, UsageTotals};
use super::{MEAN_METRICS, RATE_METRICS};
use crate::stats::wilson_95;

/// Failure class shown for an incomplete final row whose `failure_class` is null.
const UNCLASSIFIED: &str = "unclassified";

/// Successes among known values of a boolean metric.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rate {
    pub(super) successes: u64,
    pub(super) known: u64,
}

impl Rate {
    /// Counts one value; null is not known.
    pub(super) fn add(&mut self, outcome: Option<bool>) {
        if let Some(outcome) = outcome {
            self.known += 1;
            self.successes += u64::from(outcome);
        }
    }
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

/// (campaign, model id, engine, scenario); the campaign is empty when the inputs are pooled.
pub(super) type CellKey = (CampaignKey, String, String, String);

/// One (model id, engine, scenario) cell.
#[derive(Debug, Default)]
pub(super) struct Cell {
    pub(super) trials: u64,
    pub(super) complete_trials: u64,
    /// Trials of the recorded matrix with no attempt at all.
    pub(super) not_run: u64,
    pub(super) retries: u64,
    pub(super) failure_classes: BTreeMap<String, u64>,
    terminations: BTreeMap<String, u64>,
    /// Values of [`RATE_METRICS`], in that order.
    pub(super) rates: [Rate; 6],
    means: [MeanAccumulator; 3],
    pub(super) invalid_tool_calls: u64,
    /// Tool errors over the final rows.
    pub(super) tool_error_count: u64,
    /// Final rows per tool sequence (joined with ` -> `).
    pub(super) tool_sequences: BTreeMap<String, u64>,
    pub(super) first_finish_reasons: BTreeMap<String, u64>,
    pub(super) usage: UsageTotals,
}

/// Groups final trials, and the trials that never ran, into cells, sorted by key.
pub(super) fn build(finals: &[FinalTrial<'_>], not_run: &[CellKey]) -> BTreeMap<CellKey, Cell> {
    let mut cells: BTreeMap<CellKey, Cell> = BTreeMap::new();
    for key in not_run {
        let cell = cells.entry(key.clone()).or_default();
        cell.trials += 1;
        cell.not_run += 1;
    }
    for trial in finals {
        let row = trial.row;
        let key =
            (trial.campaign.clone(), trial.model_id.clone(), row.engine.as_str().to_owned(), row.scenario.clone());
        let cell = cells.entry(key).or_default();
        cell.trials += 1;
        cell.retries = cell.retries.saturating_add(trial.attempts.saturating_sub(1));
        *cell.terminations.entry(row.termination.as_str().to_owned()).or_default() += 1;
        if row.is_complete() {
            cell.complete_trials += 1;
            for (rate, outcome) in cell.rates.iter_mut().zip(trial.outcomes()) {
                rate.add(outcome);
            }
            for (mean, count) in cell.means.iter_mut().zip(trial.counts()) {
                if let Some(count) = count {
                    mean.known += 1;
                    mean.sum += u128::from(count);
                }
            }
        } else {
            let class = row.failure_class.map_or(UNCLASSIFIED, |class| class.as_str());
            *cell.failure_classes.entry(class.to_owned()).or_default() += 1;
        }
        cell.invalid_tool_calls = cell.invalid_tool_calls.saturating_add(row.diagnostics.invalid_tool_calls.into());
        cell.tool_error_count = cell.tool_error_count.saturating_add(row.tool_error_count.into());
        *cell.tool_sequences.entry(row.tool_sequence.join(" -> ")).or_default() += 1;
        if let Some(reason) = &row.diagnostics.first_finish_reason {
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

/// The cell's object in `summary.json`.
pub(super) fn to_json(((_, campaign), model_id, engine, scenario): &CellKey, cell: &Cell) -> Value {
    let mut object = Map::new();
    object.insert("campaign".into(), if campaign.is_empty() { Value::Null } else { json!(campaign) });
    object.insert("model_id".into(), json!(model_id));
    object.insert("engine".into(), json!(engine));
    object.insert("scenario".into(), json!(scenario));
    object.insert("trials".into(), json!(cell.trials));
    object.insert("complete_trials".into(), json!(cell.complete_trials));
    object.insert("incomplete_trials".into(), json!(cell.trials - cell.complete_trials));
    object.insert("not_run".into(), json!(cell.not_run));
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
    object.insert("tool_error_count".into(), json!(cell.tool_error_count));
    object.insert("tool_sequences".into(), count_map_json(&cell.tool_sequences));
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
