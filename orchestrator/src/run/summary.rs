//! The text summary of a run (`summary.txt`, also printed): per metric, the successes over
//! the known outcomes of each trial's final attempt, with unknowns counted, never dropped;
//! then one line per target × scenario, and per-trial lines only for trials without a complete
//! attempt (every trial's line is [`trial_lines`], printed with `--verbose`).

use std::fmt::Write as _;

use elengtis_core::format::Bundle;
use elengtis_core::format::quote::count;
use elengtis_core::matrix::TrialSpec;
use elengtis_core::records::Row;

/// The final row of each trial: its last complete attempt, else its last attempt.
pub fn final_rows<'a>(trials: &'a [TrialSpec], rows: &'a [Row]) -> Vec<(&'a str, Option<&'a Row>)> {
    // One pass over the rows (a merged campaign has hundreds of thousands), not one per trial.
    let mut by_trial: std::collections::HashMap<&str, Vec<&Row>> = std::collections::HashMap::new();
    for row in rows {
        by_trial.entry(row.trial_id.as_str()).or_default().push(row);
    }
    trials
        .iter()
        .map(|t| {
            let chosen = by_trial
                .get(t.trial_id.as_str())
                .and_then(|of_trial| of_trial.iter().rev().find(|r| r.is_complete()).or(of_trial.last()).copied());
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

/// The text summary (also written to summary.txt): the metrics over the matrix, one line per
/// target × scenario, and one line per trial only for trials without a complete attempt
/// (failed or not run). [`trial_lines`] has every trial's line (`--verbose`).
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
    // One line per target × scenario, in matrix order.
    let mut groups: Vec<(GroupKey, Vec<Option<&Row>>)> = Vec::new();
    for (spec, (_, row)) in trials.iter().zip(&finals) {
        let key = (spec.target, spec.scenario);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(*row),
            None => groups.push((key, vec![*row])),
        }
    }
    for ((target, scenario), members) in &groups {
        let complete: Vec<&Row> = members.iter().flatten().copied().filter(|r| r.is_complete()).collect();
        let rate = |read: fn(&Row) -> Option<bool>| {
            let known: Vec<bool> = complete.iter().filter_map(|r| read(r)).collect();
            format!("{}/{}", known.iter().filter(|&&b| b).count(), known.len())
        };
        let _ = write!(
            out,
            "{} × {}: {} trial{}, {} complete, proposed {}, completed {}",
            campaign.targets[*target].id,
            bundle.scenarios[*scenario].value.id,
            members.len(),
            if members.len() == 1 { "" } else { "s" },
            complete.len(),
            rate(|r| r.proposed),
            rate(|r| r.completed)
        );
        let not_run = members.iter().filter(|r| r.is_none()).count();
        if not_run > 0 {
            let _ = write!(out, ", {not_run} not run");
        }
        out.push('\n');
    }
    let failed: Vec<String> = finals
        .iter()
        .filter(|(_, row)| !row.is_some_and(Row::is_complete))
        .map(|(id, row)| trial_line(id, *row))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "without a complete attempt ({}):", failed.len());
        for line in failed {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// (target index, scenario index).
type GroupKey = (usize, usize);

/// One trial's line: `<trial_id>: <termination>`, with the failure class of an incomplete
/// attempt, or `not run`.
fn trial_line(id: &str, row: Option<&Row>) -> String {
    match row {
        None => format!("{id}: not run"),
        Some(row) => match row.failure_class.filter(|_| !row.is_complete()) {
            Some(class) => format!("{id}: {} ({})", row.termination.as_str(), class.as_str()),
            None => format!("{id}: {}", row.termination.as_str()),
        },
    }
}

/// Every trial's line, in matrix order (`--verbose`).
pub fn trial_lines(trials: &[TrialSpec], rows: &[Row]) -> String {
    let mut out = String::new();
    for (id, row) in final_rows(trials, rows) {
        let _ = writeln!(out, "{}", trial_line(id, row));
    }
    out
}

/// The spend line of a run with a live model: the cost of every attempt that asked it (known
/// costs summed, answers without one counted; a `rest` target's attempts ask no model and are
/// left out) and, with a spend cap, what was charged against it. Empty when no attempt asked
/// the model.
pub fn spend(all: &[Row], cap: Option<f64>) -> String {
    let rows: Vec<&Row> = all.iter().filter(|r| r.usage.endpoint.is_none()).collect();
    if rows.is_empty() && !all.is_empty() {
        return String::new();
    }
    let known: Vec<f64> = rows.iter().filter_map(|r| r.usage.cost_usd).collect();
    let unknown: u64 = rows.iter().map(|r| r.usage.unknown_costs).sum();
    let mut out = if known.is_empty() {
        format!("cost: unknown over {}", count(rows.len(), "attempt"))
    } else {
        format!("cost: ${:.6} over {}", known.iter().fold(0.0, |a, b| a + b), count(rows.len(), "attempt"))
    };
    if unknown > 0 {
        let _ = write!(out, " ({} without a cost)", count(unknown, "answer"));
    }
    if let Some(cap) = cap {
        let charged = rows.iter().map(|r| r.usage.budget_charge_usd).fold(0.0, |a, b| a + b);
        let _ = write!(out, "; spend cap: ${charged:.6} of ${cap:.6} charged");
    }
    out.push('\n');
    out
}

/// The line of a run with `rest` targets: the requests their endpoints were sent (retries
/// included) and the bytes sent and received, over the attempts that sent them. Empty when no
/// attempt did.
pub fn endpoints(rows: &[Row]) -> String {
    let used: Vec<elengtis_core::agent::EndpointUsage> = rows.iter().filter_map(|r| r.usage.endpoint).collect();
    if used.is_empty() {
        return String::new();
    }
    let requests: u64 = used.iter().map(|u| u.requests).sum();
    let sent: u64 = used.iter().map(|u| u.bytes_sent).sum();
    let received: u64 = used.iter().map(|u| u.bytes_received).sum();
    format!(
        "rest endpoints: {} ({sent} bytes sent, {received} received) over {}\n",
        count(requests, "request"),
        count(used.len(), "attempt")
    )
}
