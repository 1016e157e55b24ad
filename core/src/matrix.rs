//! The stable trial matrix: targets × scenarios × trial indexes, in campaign order.

use crate::format::Bundle;

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
