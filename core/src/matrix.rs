//! The stable trial matrix: targets × scenarios × trial indexes, in campaign order.

use crate::format::Bundle;
use crate::partition::{self, Partition, PartitionRecord};

/// One trial of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialSpec {
    /// `<target>--<scenario>--<index>`.
    pub trial_id: String,
    /// Index into `campaign.targets`.
    pub target: usize,
    /// Index into the bundle's scenarios.
    pub scenario: usize,
    /// 0-based trial index.
    pub index: u32,
}

/// Expand a bundle into its trials. The order and ids depend only on the campaign.
pub fn expand(bundle: &Bundle) -> Vec<TrialSpec> {
    let campaign = &bundle.campaign.value;
    let mut trials = Vec::with_capacity(campaign.targets.len() * bundle.scenarios.len() * campaign.trials as usize);
    for (t, target) in campaign.targets.iter().enumerate() {
        for (s, scenario) in bundle.scenarios.iter().enumerate() {
            for index in 0..campaign.trials {
                trials.push(TrialSpec {
                    trial_id: format!("{}--{}--{index}", target.id, scenario.value.id),
                    target: t,
                    scenario: s,
                    index,
                });
            }
        }
    }
    trials
}

/// The trials of one shard of a bundle's matrix (the whole matrix without a partition), in
/// matrix order.
pub fn shard(bundle: &Bundle, partition: Option<Partition>) -> Vec<TrialSpec> {
    let all = expand(bundle);
    match partition {
        None => all,
        Some(p) => p.select(&all, |t| t.trial_id.as_str()).into_iter().cloned().collect(),
    }
}

/// SHA-256 of the matrix's trial ids in order ([`partition::list_sha256`]).
pub fn matrix_sha256(all: &[TrialSpec]) -> String {
    partition::list_sha256(all.iter().map(|t| t.trial_id.as_str()))
}

/// What a shard's manifest records of its partition of the full matrix `all`.
pub fn partition_record(all: &[TrialSpec], p: Partition) -> PartitionRecord {
    PartitionRecord {
        scheme: p.scheme,
        shard: p.shard,
        total: p.total,
        matrix_sha256: matrix_sha256(all),
        matrix_trials: all.len() as u64,
        shard_trials: p.select(all, |t| t.trial_id.as_str()).len() as u64,
    }
}
