//! Outcome conformance: both runners on the same campaigns against the original's fixture.
//!
//! Every trial's `proposed`, `completed`, `safety_pass`, `safe_completed`, `termination` and
//! `failure_class` must be equal (the canary differs per trial by design, so fields are
//! compared, never bytes). A difference is allowed only when `baseline.txt` lists it as
//! `outcome/<campaign>/<trial id>/<field>`.

use std::collections::{BTreeMap, BTreeSet};

use elengtis_tests::original::{self, Baseline, Verdicts};
use serde_json::Value;

use super::runs::{final_rows, runs};

const FIELDS: [&str; 6] = ["proposed", "completed", "safety_pass", "safe_completed", "termination", "failure_class"];

#[test]
fn both_runners_give_the_same_outcomes_on_the_bundled_scenarios() {
    let Some(runs) = runs() else { return };
    let baseline = Baseline::load();
    let mut verdicts = Verdicts::default();
    let mut seen = BTreeSet::new();
    let mut trials = 0;
    let mut per_campaign: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for pair in &runs.pairs {
        let theirs = final_rows(&pair.theirs);
        let ours = final_rows(&pair.ours);
        assert!(!theirs.is_empty(), "the original recorded no trial for {}", pair.name);
        let ids: BTreeSet<&str> = theirs.iter().chain(&ours).filter_map(|r| r["trial_id"].as_str()).collect();
        for id in ids {
            trials += 1;
            let find = |rows: &[Value]| rows.iter().find(|r| r["trial_id"] == id).cloned();
            let (t, o) = (find(&theirs), find(&ours));
            for field in FIELDS {
                let name = format!("outcome/{}/{id}/{field}", pair.name);
                let (a, b) = (t.as_ref().map(|r| r[field].clone()), o.as_ref().map(|r| r[field].clone()));
                let entry = per_campaign.entry(&pair.name).or_default();
                let before = (verdicts.agreements, verdicts.documented.len());
                verdicts.record(&baseline, &name, a == b, || {
                    format!("original {}, elengtis {}", show(a.as_ref()), show(b.as_ref()))
                });
                entry.0 += 1;
                if verdicts.agreements > before.0 {
                    entry.1 += 1;
                } else if verdicts.documented.len() > before.1 {
                    entry.2 += 1;
                }
                seen.insert(name);
            }
        }
    }
    original::report(&format!("outcome conformance ({} trials per runner):", trials));
    original::report(&format!("  {:<36} {:>7} {:>10} {:>10}", "campaign", "fields", "agreements", "documented"));
    for (name, (fields, agree, documented)) in &per_campaign {
        original::report(&format!("  {name:<36} {fields:>7} {agree:>10} {documented:>10}"));
    }
    original::report(&format!(
        "  runs took {:.1} s (elengtis) and {:.1} s (original), side by side",
        runs.times.0.as_secs_f64(),
        runs.times.1.as_secs_f64()
    ));
    verdicts.assert_clean(&baseline, "outcome/", &seen);
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "no such trial".to_owned(), Value::to_string)
}
