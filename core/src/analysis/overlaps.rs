//! Inputs that hold the same trials: told apart by what they hold, not by their own run id.
//!
//! An input holds its run (the manifest's `run_id`), the runs its rows name (a merged
//! directory's rows carry their shards' run ids, as do the shards themselves) and its
//! attempts, each named by its campaign, trial id and attempt id. Two inputs that share a run
//! or an attempt overlap: counted as they are, their common trials would count twice. They are
//! refused naming both, or, with [`Overlap::Dedupe`], each trial of a group of overlapping
//! inputs is counted once.

use std::collections::{BTreeMap, BTreeSet};

use super::inputs::Run;
use super::{AnalyzeError, Overlap};

/// A trial's attempts in each input that holds it: (input, its attempt ids), in the order given.
type Holders = Vec<(usize, Vec<String>)>;

/// What one input holds.
struct Holdings {
    runs: BTreeSet<String>,
    /// (campaign, trial id, attempt id) → nothing; kept sorted for a stable first overlap.
    attempts: BTreeSet<(String, String, String)>,
}

fn holdings(run: &Run<'_>) -> Holdings {
    let mut runs: BTreeSet<String> = BTreeSet::new();
    runs.insert(run.manifest.run_id.clone());
    if let Some(merge) = &run.manifest.merge {
        runs.extend(merge.shards.iter().map(|s| s.run_id.clone()));
    }
    runs.extend(run.rows.iter().map(|row| row.run_id.clone()));
    let campaign = run.manifest.campaign();
    let attempts =
        run.rows.iter().map(|row| (campaign.clone(), row.trial_id.clone(), row.attempt_id.clone())).collect();
    Holdings { runs, attempts }
}

/// What two inputs both hold, in words (`None` when nothing).
fn shared(a: &Holdings, b: &Holdings) -> Option<String> {
    if let Some(run) = a.runs.intersection(&b.runs).next() {
        return Some(format!("run `{run}`"));
    }
    a.attempts
        .intersection(&b.attempts)
        .next()
        .map(|(campaign, trial, attempt)| format!("attempt `{attempt}` of trial `{trial}` ({campaign})"))
}

/// Refuses overlapping inputs, or (`Dedupe`) marks in each run the trials counted from
/// another input of its group.
pub(super) fn resolve(runs: &mut [Run<'_>], overlap: Overlap) -> Result<(), AnalyzeError> {
    let held: Vec<Holdings> = runs.iter().map(holdings).collect();
    // Groups of inputs that overlap, each input joined to the first it overlaps.
    let mut group: Vec<usize> = (0..runs.len()).collect();
    for later in 0..runs.len() {
        for earlier in 0..later {
            let Some(what) = shared(&held[earlier], &held[later]) else { continue };
            if overlap == Overlap::Refuse {
                return Err(AnalyzeError::Overlap {
                    label: runs[later].label.to_owned(),
                    other: runs[earlier].label.to_owned(),
                    what,
                });
            }
            let (a, b) = (root(&group, earlier), root(&group, later));
            group[a.max(b)] = a.min(b);
        }
    }
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for input in 0..runs.len() {
        members.entry(root(&group, input)).or_default().push(input);
    }
    for inputs in members.values().filter(|inputs| inputs.len() > 1) {
        dedupe(runs, inputs)?;
    }
    Ok(())
}

fn root(group: &[usize], mut input: usize) -> usize {
    while group[input] != input {
        input = group[input];
    }
    input
}

/// Within one group of overlapping inputs: each (campaign, trial) counted once, from the input
/// holding the most attempts of it (the first given on a tie), whose attempts every other
/// input's must begin (else the histories forked); a trial no input ran, once.
fn dedupe(runs: &mut [Run<'_>], inputs: &[usize]) -> Result<(), AnalyzeError> {
    // (campaign, trial) → (input, its attempt ids), in the order given.
    let mut holders: BTreeMap<(String, String), Holders> = BTreeMap::new();
    let mut planned: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for &input in inputs {
        let run = &runs[input];
        let campaign = run.manifest.campaign();
        for (trial, indexes) in run.trials.iter().enumerate() {
            let attempts = indexes.iter().map(|&row| run.rows[row].attempt_id.clone()).collect();
            holders.entry((campaign.clone(), run.trial_id(trial).to_owned())).or_default().push((input, attempts));
        }
        for trial in run.matrix.unwrap_or_default() {
            planned.entry((campaign.clone(), trial.trial_id.clone())).or_default().push(input);
        }
    }
    let mut excluded: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for ((campaign, trial_id), held) in &holders {
        let mut chosen = 0;
        for (index, (_, attempts)) in held.iter().enumerate() {
            if attempts.len() > held[chosen].1.len() {
                chosen = index;
            }
        }
        let longest = &held[chosen].1;
        for (index, (input, attempts)) in held.iter().enumerate() {
            if !longest.starts_with(attempts) {
                let (earlier, later) = (held[chosen].0.min(*input), held[chosen].0.max(*input));
                return Err(AnalyzeError::Forked {
                    label: runs[later].label.to_owned(),
                    other: runs[earlier].label.to_owned(),
                    trial_id: trial_id.clone(),
                });
            }
            if index != chosen {
                excluded.entry(*input).or_default().insert(trial_id.clone());
            }
        }
        // Counted here: not also as not run elsewhere.
        for &input in planned.get(&(campaign.clone(), trial_id.clone())).into_iter().flatten() {
            if input != held[chosen].0 {
                excluded.entry(input).or_default().insert(trial_id.clone());
            }
        }
    }
    for (key, inputs) in &planned {
        if holders.contains_key(key) {
            continue;
        }
        for &input in inputs.iter().skip(1) {
            excluded.entry(input).or_default().insert(key.1.clone());
        }
    }
    for (input, trials) in excluded {
        runs[input].excluded = trials;
    }
    Ok(())
}
