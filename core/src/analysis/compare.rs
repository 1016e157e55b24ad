//! Pairwise engine comparisons: within-block differences of the pairwise metrics between
//! every two engines of a (campaign, model id, scenario), with a reproducible bootstrap interval.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::cells::Rate;
use super::inputs::{CampaignKey, FinalTrial};
use super::{PAIRWISE_METRIC_COUNT, RATE_METRICS};
use crate::stats::{bootstrap_95, fnv1a_64, mean};

/// One engine-pair difference for one metric.
#[derive(Debug)]
pub(super) struct Comparison {
    /// The campaign (`(0, "")` when the inputs are pooled).
    pub(super) campaign: CampaignKey,
    pub(super) model_id: String,
    pub(super) scenario: String,
    pub(super) left: String,
    pub(super) right: String,
    pub(super) metric: &'static str,
    pub(super) blocks: usize,
    pub(super) difference_pp: f64,
    pub(super) bootstrap_95: (f64, f64),
}

impl Comparison {
    /// The comparison's object in `summary.json`.
    pub(super) fn to_json(&self) -> Value {
        json!({
            "campaign": if self.campaign.1.is_empty() { Value::Null } else { json!(self.campaign.1) },
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

/// Every comparison, sorted by (model id, scenario), then engine pair, then metric.
pub(super) fn build(finals: &[FinalTrial<'_>]) -> Vec<Comparison> {
    // (campaign, model id, scenario) → engine → block → rates.
    let mut groups: BTreeMap<(CampaignKey, String, String), BTreeMap<String, BlockRates>> = BTreeMap::new();
    for trial in finals {
        let (Some(block), true) = (trial.block, trial.row.is_complete()) else {
            continue;
        };
        let rates = groups
            .entry((trial.campaign.clone(), trial.model_id.clone(), trial.row.scenario.clone()))
            .or_default()
            .entry(trial.row.engine.as_str().to_owned())
            .or_default()
            .entry(block)
            .or_default();
        for (rate, outcome) in rates.iter_mut().zip(trial.outcomes()) {
            rate.add(outcome);
        }
    }

    let mut comparisons = Vec::new();
    for ((campaign, model_id, scenario), engines) in &groups {
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
                        campaign: campaign.clone(),
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
