//! Accept/reject conformance: the original's loader and ours on the same documents.
//!
//! `original.py generate` writes the documents (the original's bundled campaign and
//! scenarios, and seeded mutations of them in named categories) and validates every one
//! with the original's `load_campaign` in one Python process. Here each is loaded with the
//! `elengtis-core` loader in-process. Both must accept (naming the same trials) or both
//! reject; a difference is allowed only when `baseline.txt` lists it by name with a reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use elengtis_core::format::Severity;
use elengtis_core::load::load_campaign;
use elengtis_core::matrix;
use elengtis_core::validate::LoadOptions;
use elengtis_tests::original::{self, Baseline, Verdicts};
use elengtis_tests::{scratch, workspace};
use serde_json::Value;

/// A variable the generated documents name as set (`{env: …}`); set for the original's
/// process and reported set to ours.
const SET_VAR: &str = "ELENGTIS_CONFORMANCE_SET";
/// A variable the generated documents name as unset.
const UNSET_VAR: &str = "ELENGTIS_CONFORMANCE_UNSET";

/// The least number of generated (non-bundled) documents the suite must check.
const MIN_GENERATED: usize = 500;

fn options() -> LoadOptions {
    LoadOptions {
        env_is_set: |name| name == SET_VAR || (name != UNSET_VAR && std::env::var_os(name).is_some()),
        ..LoadOptions::default()
    }
}

/// Our verdict: the trial ids when accepted (and the warnings), or the first error.
struct Ours {
    trials: Option<Vec<String>>,
    warnings: usize,
    first: String,
}

fn ours(path: &Path) -> Ours {
    match load_campaign(path, &options()) {
        Ok(bundle) => Ours {
            trials: Some(matrix::expand(&bundle).into_iter().map(|t| t.trial_id).collect()),
            warnings: bundle.warnings.iter().filter(|d| d.severity == Severity::Warning).count(),
            first: bundle.warnings.first().map(ToString::to_string).unwrap_or_default(),
        },
        Err(e) => Ours {
            trials: None,
            warnings: 0,
            first: e
                .diagnostics()
                .iter()
                .find(|d| d.severity == Severity::Error)
                .map_or_else(|| e.to_string(), ToString::to_string),
        },
    }
}

#[derive(Default)]
struct Tally {
    documents: usize,
    accepted_by_original: usize,
    agreements: usize,
    documented: usize,
    unexplained: usize,
    warned: usize,
}

#[test]
fn both_loaders_make_the_same_decision_on_every_document() {
    let Some(original) = original::require() else { return };
    let begun = Instant::now();
    let dir = scratch();
    let script = workspace().join("tests/conformance/original.py");
    let out = Command::new(original.python())
        .arg(&script)
        .arg("generate")
        .arg(dir.path())
        .env(SET_VAR, "1")
        .env_remove(UNSET_VAR)
        .output()
        .expect("failed to run original.py");
    assert!(
        out.status.success(),
        "original.py generate failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = begun.elapsed();
    let cases: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cases.json")).expect("original.py wrote cases.json"),
    )
    .expect("cases.json is JSON");

    let baseline = Baseline::load();
    let mut verdicts = Verdicts::default();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for case in &cases {
        let name = format!("validate/{}", case["name"].as_str().expect("name"));
        let category = case["category"].as_str().expect("category").to_owned();
        let theirs = &case["original"];
        let their_trials: Option<Vec<String>> = theirs["accepted"].as_bool().expect("accepted").then(|| {
            theirs["trials"].as_array().expect("trials").iter().map(|t| t.as_str().unwrap_or("").to_owned()).collect()
        });
        let mine = ours(&dir.path().join(case["campaign"].as_str().expect("campaign")));
        let agree = mine.trials == their_trials;
        let tally = tallies.entry(category).or_default();
        tally.documents += 1;
        tally.accepted_by_original += usize::from(their_trials.is_some());
        tally.warned += usize::from(agree && mine.warnings > 0);
        let before = (verdicts.agreements, verdicts.documented.len());
        verdicts.record(&baseline, &name, agree, || {
            format!(
                "\n    original: {}\n    elengtis: {}",
                match &their_trials {
                    Some(t) => format!("accepts {t:?}"),
                    None => format!("rejects: {}", theirs["error"].as_str().unwrap_or("").replace('\n', " | ")),
                },
                match &mine.trials {
                    Some(t) => format!("accepts {t:?} ({} warnings) {}", mine.warnings, mine.first),
                    None => format!("rejects: {}", mine.first),
                }
            )
        });
        if verdicts.agreements > before.0 {
            tally.agreements += 1;
        } else if verdicts.documented.len() > before.1 {
            tally.documented += 1;
            if let Some((id, _)) = baseline.entries.get(&name) {
                *reasons.entry(id.clone()).or_default() += 1;
            }
        } else {
            tally.unexplained += 1;
        }
        seen.insert(name);
    }

    original::report(&format!("validation conformance against the original elengtis {}:", original::VERSION));
    original::report(&format!(
        "  {:<20} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8}",
        "category", "documents", "orig-ok", "agreements", "documented", "unexplained", "warned"
    ));
    let mut total = Tally::default();
    for (category, t) in &tallies {
        original::report(&format!(
            "  {category:<20} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8}",
            t.documents, t.accepted_by_original, t.agreements, t.documented, t.unexplained, t.warned
        ));
        total.documents += t.documents;
        total.accepted_by_original += t.accepted_by_original;
        total.agreements += t.agreements;
        total.documented += t.documented;
        total.unexplained += t.unexplained;
        total.warned += t.warned;
    }
    original::report(&format!(
        "  {:<20} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8}",
        "total",
        total.documents,
        total.accepted_by_original,
        total.agreements,
        total.documented,
        total.unexplained,
        total.warned
    ));
    for (id, n) in &reasons {
        original::report(&format!("  documented difference {id}: {n}"));
    }
    original::report(&format!(
        "  generated and validated by the original in {:.1} s; whole test {:.1} s",
        generated.as_secs_f64(),
        begun.elapsed().as_secs_f64()
    ));

    let bundled = tallies.get("bundled").map_or(0, |t| t.documents);
    assert!(
        total.documents - bundled >= MIN_GENERATED,
        "only {} generated documents; the suite needs at least {MIN_GENERATED}",
        total.documents - bundled
    );
    let offline = cases.iter().find(|c| c["name"] == "bundled/examples/offline.yaml").expect("the bundled example");
    let mine = ours(&dir.path().join(offline["campaign"].as_str().expect("campaign")));
    assert_eq!(
        mine.trials.as_deref(),
        Some(&["local-demo--support-note--0".to_owned()][..]),
        "elengtis must accept the original's bundled examples/offline.yaml: {}",
        mine.first
    );
    verdicts.assert_clean(&baseline, "validate/", &seen);
}
