//! The text summary of a run (`summary.txt`, also printed): per metric, the successes over
//! the known outcomes of each trial's final attempt, with unknowns counted, never dropped.

use std::fmt::Write as _;

use elengtis_core::format::Bundle;
use elengtis_core::matrix::TrialSpec;
use elengtis_core::records::Row;

/// The final row of each trial: its last complete attempt, else its last attempt.
pub fn final_rows<'a>(trials: &'a [TrialSpec], rows: &'a [Row]) -> Vec<(&'a str, Option<&'a Row>)> {
    trials
        .iter()
        .map(|t| {
            let of_trial: Vec<&Row> = rows.iter().filter(|r| r.trial_id == t.trial_id).collect();
            let chosen = of_trial.iter().rev().find(|r| r.is_complete()).or(of_trial.last()).copied();
            (t.trial_id.as_str(), chosen)
        })
        .collect()
}

/// A metric's name and how to read it from a row.
type Metric = (&'static str, fn(&Row) -> Option<bool>);

/// The metrics of the summary, in order.
const METRICS: [Metric; 5] = [
    ("proposed", |r| r.proposed),
    ("completed", |r| r.completed),
    ("safety_pass", |r| r.safety_pass),
    ("safe_completed", |r| r.safe_completed),
    ("proposed_not_completed", |r| r.proposed_not_completed),
];

/// The text summary (also written to summary.txt).
pub fn summarize(bundle: &Bundle, trials: &[TrialSpec], rows: &[Row]) -> String {
    let finals = final_rows(trials, rows);
    let campaign = &bundle.campaign.value;
    let mut out = format!("Campaign via the {} engine.\ntrials: {}\n", campaign.engine, trials.len());
    for (metric, read) in METRICS {
        let known: Vec<bool> =
            finals.iter().filter_map(|(_, r)| r.filter(|r| r.is_complete()).and_then(read)).collect();
        let successes = known.iter().filter(|&&b| b).count();
        let unknown = trials.len() - known.len();
        if known.is_empty() && metric.starts_with("safe") {
            let _ = writeln!(out, "{metric}: not_applicable");
            continue;
        }
        let _ = write!(out, "{metric}: {successes}/{}", known.len());
        if unknown > 0 {
            let _ = write!(out, " ({unknown} unknown)");
        }
        out.push('\n');
    }
    if rows.len() > trials.len() || rows.len() > finals.iter().filter(|(_, r)| r.is_some()).count() {
        let distinct = finals.iter().filter(|(_, r)| r.is_some()).count();
        let _ = writeln!(out, "attempts: {}, of which {} were retried", rows.len(), rows.len() - distinct);
    }
    for (id, row) in finals {
        let termination = row.map_or("not run", |r| r.termination.as_str());
        let _ = writeln!(out, "{id}: {termination}");
    }
    out
}

/// The spend line of a run with a live model: the cost of every attempt (known costs summed,
/// answers without one counted) and, with a spend cap, what was charged against it.
pub fn spend(rows: &[Row], cap: Option<f64>) -> String {
    let known: Vec<f64> = rows.iter().filter_map(|r| r.usage.cost_usd).collect();
    let unknown: u64 = rows.iter().map(|r| r.usage.unknown_costs).sum();
    let mut out = if known.is_empty() {
        format!("cost: unknown over {} attempts", rows.len())
    } else {
        format!("cost: ${:.6} over {} attempts", known.iter().fold(0.0, |a, b| a + b), rows.len())
    };
    if unknown > 0 {
        let _ = write!(out, " ({unknown} answers without a cost)");
    }
    if let Some(cap) = cap {
        let charged = rows.iter().map(|r| r.usage.budget_charge_usd).fold(0.0, |a, b| a + b);
        let _ = write!(out, "; spend cap: ${charged:.6} of ${cap:.6} charged");
    }
    out.push('\n');
    out
}
