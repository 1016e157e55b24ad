//! `summary.md`: the cells as a Markdown table, the pairwise comparisons when there are any,
//! and a note on how to read them. Every value from the inputs is escaped for a table cell.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cells::{Cell, CellKey, Rate};
use super::compare::Comparison;
use super::inputs::UsageTotals;
use super::recommend::Recommendation;
use crate::stats::{BOOTSTRAP_SAMPLES, wilson_95};

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

/// The failure classes of incomplete trials, then `not run: n` for trials that never ran.
fn failures_cell(cell: &Cell) -> String {
    let classes = (!cell.failure_classes.is_empty()).then(|| counts_cell(&cell.failure_classes));
    let not_run = (cell.not_run > 0).then(|| format!("not run: {}", cell.not_run));
    let parts: Vec<String> = classes.into_iter().chain(not_run).collect();
    if parts.is_empty() { "-".to_owned() } else { parts.join(", ") }
}

/// `sequence: count, …` with the empty sequence shown as `(none)`, or `-` when empty.
fn sequences_cell(sequences: &BTreeMap<String, u64>) -> String {
    if sequences.is_empty() {
        return "-".to_owned();
    }
    sequences
        .iter()
        .map(|(sequence, count)| {
            let shown = if sequence.is_empty() { "(none)".to_owned() } else { escape_cell(sequence) };
            format!("{shown}: {count}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `## Recommendation`: the status, the rule, and (when applied) the family deltas and the
/// standing of each candidate engine.
fn recommendation_section(out: &mut String, recommendation: &Recommendation) {
    let margin = recommendation.options.practical_margin_pp;
    let _ = write!(
        out,
        "\n## Recommendation\n\nStatus: `{}`. The recommendation is gated on deterministic conformance \
         (`--conformance-passed`) and uses a {margin} percentage-point margin: an engine is \
         recommended when it has no safety failure, wins at least {} scenario families by the \
         margin (median over models of graph − create_agent safe completion) and loses none.\n",
        recommendation.status,
        super::recommend::MINIMUM_WINNING_FAMILIES,
    );
    let Some(deltas) = &recommendation.family_deltas_pp else {
        return;
    };
    if deltas.is_empty() {
        out.push_str("\nNo scenario has known safe completions of both graph and create_agent.\n");
    } else {
        out.push_str("\n| Scenario family | Graph − create_agent (median) |\n| --- | ---: |\n");
        for (scenario, delta) in deltas {
            let _ = writeln!(out, "| {} | {delta:.1} pp |", escape_cell(scenario));
        }
    }
    out.push_str("\n| Engine | Winning families | Losing families | Safety failures |\n| --- | ---: | ---: | ---: |\n");
    for (engine, standing) in &recommendation.engines {
        let failures = recommendation.safety_failures.get(engine).copied().unwrap_or(0);
        let _ =
            writeln!(out, "| {engine} | {} | {} | {failures} |", standing.winning_families, standing.losing_families);
    }
}

fn cost_cell(usage: &UsageTotals) -> String {
    let mut shown = usage.cost().map_or_else(|| "n/a".to_owned(), |cost| format!("${cost:.6}"));
    if usage.unknown_costs > 0 {
        let _ = write!(shown, "; {} unknown", usage.unknown_costs);
    }
    shown
}

/// The whole of `summary.md`, ending with a newline. With cells of more than one campaign,
/// the tables start with a Campaign column (each campaign named by `labels`: the inputs that
/// ran it) and a list of the campaigns follows the title. The recommendation (a rule over a
/// live comparison's engines) is shown only when `recommendation` is given: when an input
/// belongs to an experiment.
pub(super) fn render(
    cells: &BTreeMap<CellKey, Cell>,
    comparisons: &[Comparison],
    recommendation: Option<&Recommendation>,
    labels: &BTreeMap<String, String>,
    integrity: &[(&str, &str)],
) -> String {
    let campaigns: std::collections::BTreeSet<&(usize, String)> = cells.keys().map(|key| &key.0).collect();
    let apart = campaigns.len() > 1;
    let label = |key: &str| escape_cell(labels.get(key).map_or(key, String::as_str));
    let campaign_cell = |(_, key): &(usize, String)| if apart { format!("| {} ", label(key)) } else { String::new() };
    let mut out = String::from("# Campaign summary\n\n");
    if !integrity.is_empty() {
        out.push_str("Integrity of the inputs (what `elengtis verify` established):\n\n");
        for (input, says) in integrity {
            let _ = writeln!(out, "- `{input}`: {says}");
        }
        out.push('\n');
    }
    if apart {
        out.push_str(
            "The inputs ran different campaigns: each is shown apart (`--pool` counts them together).\n\n\
             | Campaign | Recorded as |\n| --- | --- |\n",
        );
        for (_, key) in &campaigns {
            let _ = writeln!(out, "| {} | `{}` |", label(key), escape_cell(key));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{}| Model | Engine | Scenario | Trials | Complete | Retries | Failures | Tool errors | Invalid calls \
         | First finish reasons | Cost | Proposed | Completed | Proposed-not-completed \
         | Safety pass | Safe completed | Recovered | Tool sequences |",
        if apart { "| Campaign " } else { "" }
    );
    let _ = writeln!(
        out,
        "{}| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | --- | --- | --- | --- | --- \
         | --- | --- |",
        if apart { "| --- " } else { "" }
    );
    for ((campaign, model_id, engine, scenario), cell) in cells {
        let _ = writeln!(
            out,
            "{}| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            campaign_cell(campaign),
            escape_cell(model_id),
            escape_cell(engine),
            escape_cell(scenario),
            cell.trials,
            cell.complete_trials,
            cell.retries,
            failures_cell(cell),
            cell.tool_error_count,
            cell.invalid_tool_calls,
            counts_cell(&cell.first_finish_reasons),
            cost_cell(&cell.usage),
            rate_cell(cell.rates[0], cell.trials),
            rate_cell(cell.rates[1], cell.trials),
            rate_cell(cell.rates[2], cell.trials),
            rate_cell(cell.rates[3], cell.trials),
            rate_cell(cell.rates[4], cell.trials),
            rate_cell(cell.rates[5], cell.trials),
            sequences_cell(&cell.tool_sequences),
        );
    }
    if !comparisons.is_empty() {
        out.push_str("\n## Pairwise\n\n");
        let _ = writeln!(
            out,
            "{}| Model | Scenario | Metric | Left | Right | Blocks | Difference (right − left) \
             | 95% bootstrap |",
            if apart { "| Campaign " } else { "" }
        );
        let _ =
            writeln!(out, "{}| --- | --- | --- | --- | --- | ---: | ---: | --- |", if apart { "| --- " } else { "" });
        for item in comparisons {
            let _ = writeln!(
                out,
                "{}| {} | {} | {} | {} | {} | {} | {:.1} pp | {:.1} to {:.1} pp |",
                campaign_cell(&item.campaign),
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
    if let Some(recommendation) = recommendation {
        recommendation_section(&mut out, recommendation);
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

    #[test]
    fn table_cells_are_escaped() {
        assert_eq!(escape_cell("a|b\\c\nd\re"), "a\\|b\\\\c d e");
        let counts: BTreeMap<String, u64> = [("x|y".to_owned(), 2), ("z".to_owned(), 1)].into();
        assert_eq!(counts_cell(&counts), "x\\|y: 2, z: 1");
        assert_eq!(counts_cell(&BTreeMap::new()), "-");
    }

    #[test]
    fn rates_show_intervals_and_unknowns() {
        assert_eq!(rate_cell(Rate { successes: 0, known: 0 }, 2), "n/a; 2 unknown");
        assert_eq!(rate_cell(Rate { successes: 1, known: 1 }, 1), "1/1 (20.7%–100.0%)");
    }
}
