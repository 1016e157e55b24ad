//! Results conformance: each tool's `analyze` over the other's result directories.
//!
//! The result directories of [`super::runs`] are analysed four ways: ours and the original's
//! `analyze` over ours, and over the original's. Reading the other tool's directories must
//! give the same cells as the writer's own `analyze` gives: per (model, engine, scenario) the
//! same trials, complete and incomplete counts, tool error count and tool sequences, and for
//! every rate (`recovery_succeeded` included) the same successes, known and unknown counts
//! (the denominators) and Wilson interval. The scripted model is
//! labelled `null` by the original and `scripted` here; the two labels are the same cell.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use elengtis_tests::original::{self, Baseline, Verdicts};
use elengtis_tests::{elengtis_cmd, read_json, scratch};
use serde_json::Value;

use super::runs::{Runs, UNSTARTABLE, final_rows, runs};

/// The rates both tools report per cell.
const RATES: [&str; 6] =
    ["proposed", "completed", "proposed_not_completed", "safety_pass", "safe_completed", "recovery_succeeded"];

type Cells = BTreeMap<(String, String, String), Value>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tool {
    Ours,
    Theirs,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Ours => "elengtis",
            Tool::Theirs => "original",
        }
    }
}

fn analyze(runs: &Runs, tool: Tool, inputs: &[&PathBuf], out: &Path) -> Result<Cells, String> {
    let mut args: Vec<String> = vec!["analyze".into()];
    for input in inputs {
        args.push("--input".into());
        args.push(input.display().to_string());
    }
    args.push("--out".into());
    args.push(out.display().to_string());
    let output = match tool {
        // The inputs are runs of several campaigns: ours keeps campaigns apart unless `--pool`,
        // the original pools them; compared here is the pooled count.
        Tool::Ours => {
            let mut ours = args.clone();
            ours.insert(1, "--pool".into());
            elengtis_cmd(Path::new("/"), &ours.iter().map(String::as_str).collect::<Vec<_>>()).output()
        }
        Tool::Theirs => runs.original.cli().args(&args).output(),
    }
    .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "{} analyze exited {}: {}{}",
            tool.name(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let summary = read_json(&out.join("summary.json"));
    let mut cells = Cells::new();
    for cell in summary["cells"].as_array().ok_or("summary.json has no cells")? {
        let model = match cell["model_id"].as_str() {
            None | Some("scripted") => "<scripted>".to_owned(),
            Some(other) => other.to_owned(),
        };
        let key = (
            model,
            cell["engine"].as_str().unwrap_or("").to_owned(),
            cell["scenario"].as_str().unwrap_or("").to_owned(),
        );
        cells.insert(key, cell.clone());
    }
    Ok(cells)
}

fn close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-12,
                    _ => false,
                })
        }
        _ => a == b,
    }
}

/// Compare the reader's cells with the writer's own, recording each field.
fn compare(
    direction: &str,
    reader: &Cells,
    writer: &Cells,
    baseline: &Baseline,
    verdicts: &mut Verdicts,
    seen: &mut BTreeSet<String>,
) {
    let keys: BTreeSet<_> = reader.keys().chain(writer.keys()).collect();
    for key in keys {
        let (model, engine, scenario) = key;
        let prefix = format!("results/{direction}/{model}/{engine}/{scenario}");
        let (r, w) = (reader.get(key), writer.get(key));
        let mut fields: Vec<(String, Option<Value>, Option<Value>)> = Vec::new();
        for field in ["trials", "complete_trials", "incomplete_trials", "tool_error_count", "tool_sequences"] {
            fields.push((field.into(), r.map(|c| c[field].clone()), w.map(|c| c[field].clone())));
        }
        for rate in RATES {
            for part in ["successes", "known", "unknown", "wilson_95"] {
                fields.push((
                    format!("{rate}.{part}"),
                    r.map(|c| c[rate][part].clone()),
                    w.map(|c| c[rate][part].clone()),
                ));
            }
        }
        for (field, a, b) in fields {
            let name = format!("{prefix}/{field}");
            let agree = match (&a, &b) {
                (Some(a), Some(b)) => close(a, b),
                _ => false,
            };
            verdicts.record(baseline, &name, agree, || format!("reader {a:?}, writer {b:?}"));
            seen.insert(name);
        }
    }
}

fn report(direction: &str, verdicts: &Verdicts, seen: &BTreeSet<String>, baseline: &Baseline) {
    let cells: BTreeSet<String> =
        seen.iter().filter_map(|n| n.rsplit_once('/').map(|(cell, _)| cell.to_owned())).collect();
    original::report(&format!(
        "results conformance ({direction}): {} cells, {} fields compared, {} agreements, {} documented",
        cells.len(),
        seen.len(),
        verdicts.agreements,
        verdicts.documented.len()
    ));
    verdicts.assert_clean(baseline, &format!("results/{direction}/"), seen);
}

/// Every row's `evidence` names a JSON file, relative to the results directory as the
/// original resolves it, holding the same trial and attempt.
fn evidence_resolves(dir: &Path) {
    for row in final_rows(dir) {
        let name = row["evidence"].as_str().unwrap_or_else(|| panic!("{}: a row without evidence", dir.display()));
        let evidence = read_json(&dir.join(name));
        assert_eq!(evidence["trial_id"], row["trial_id"], "{}", dir.join(name).display());
        assert_eq!(evidence["attempt_id"], row["attempt_id"], "{}", dir.join(name).display());
    }
}

#[test]
fn the_originals_analyze_reads_our_results_as_ours_does() {
    let Some(runs) = runs() else { return };
    let baseline = Baseline::load();
    let dir = scratch();
    let ours: Vec<&PathBuf> = runs.pairs.iter().map(|p| &p.ours).collect();
    for d in &ours {
        evidence_resolves(d);
    }
    let theirs_reading =
        analyze(runs, Tool::Theirs, &ours, &dir.path().join("theirs")).unwrap_or_else(|e| panic!("{e}"));
    let ours_reading = analyze(runs, Tool::Ours, &ours, &dir.path().join("ours")).unwrap_or_else(|e| panic!("{e}"));
    let (mut verdicts, mut seen) = (Verdicts::default(), BTreeSet::new());
    compare("original-reads-elengtis", &theirs_reading, &ours_reading, &baseline, &mut verdicts, &mut seen);
    report("original-reads-elengtis", &verdicts, &seen, &baseline);
}

fn our_reading_of_theirs(runs: &Runs, pick: impl Fn(&str) -> bool, direction: &str) {
    let baseline = Baseline::load();
    let dir = scratch();
    let theirs: Vec<&PathBuf> = runs.pairs.iter().filter(|p| pick(&p.name)).map(|p| &p.theirs).collect();
    for d in &theirs {
        evidence_resolves(d);
    }
    let theirs_reading =
        analyze(runs, Tool::Theirs, &theirs, &dir.path().join("theirs")).unwrap_or_else(|e| panic!("{e}"));
    let ours_reading = analyze(runs, Tool::Ours, &theirs, &dir.path().join("ours")).unwrap_or_else(|e| panic!("{e}"));
    let (mut verdicts, mut seen) = (Verdicts::default(), BTreeSet::new());
    compare(direction, &ours_reading, &theirs_reading, &baseline, &mut verdicts, &mut seen);
    report(direction, &verdicts, &seen, &baseline);
}

#[test]
fn our_analyze_reads_the_originals_results_as_it_does() {
    let Some(runs) = runs() else { return };
    our_reading_of_theirs(runs, |name| name != UNSTARTABLE, "elengtis-reads-original");
}

/// The original writes `model_turns` and `tool_calls` as null for a trial that failed before
/// its model ran (here: a target that cannot start); `elengtis analyze` refuses such a row
/// ("field `model_turns` must be a non-negative integer") and with it the whole directory.
#[test]
fn our_analyze_reads_the_originals_rows_of_trials_that_never_reached_a_model() {
    let Some(runs) = runs() else { return };
    our_reading_of_theirs(runs, |name| name == UNSTARTABLE, "elengtis-reads-original-unstarted");
}
