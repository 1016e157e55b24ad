//! Reading a finished run back: each trial's final row and its evidence, and each leg's
//! reading through the core's [`read_leg`] — from the recorded calls, the tools offered and
//! the independent verifiers, never from what the agent says.

use std::collections::BTreeMap;
use std::path::Path;

use elengtis_core::format::seed::{Delivery, LoadedSeed};
use elengtis_core::prove::{
    CalibrationRun, LegContext, LegReading, LegRun, Side, judge_wanted, read_leg, with_judgement,
};
use elengtis_core::records::{Evidence, Row};

use crate::results::store;

/// The line the guarded twin writes to stderr when the W1 allowlist refuses the payload.
pub const W1_REFUSAL: &str = "twin: refused read_note description";

/// One trial's final attempt.
#[derive(Debug)]
pub struct Recorded {
    /// The row.
    pub row: Row,
    /// Its evidence, when it could be read.
    pub evidence: Result<Evidence, String>,
}

/// Every trial's final attempt in the results directory `out`, by target id, in trial order.
pub fn read_run(out: &Path) -> Result<BTreeMap<String, Vec<Recorded>>, String> {
    let values = store::read_rows(&out.join("runs.jsonl")).map_err(|e| e.to_string())?;
    let mut last: BTreeMap<String, Row> = BTreeMap::new();
    for value in values {
        let row: Row = serde_json::from_value(value).map_err(|e| format!("a row of {}: {e}", out.display()))?;
        last.insert(row.trial_id.clone(), row);
    }
    let mut rows: Vec<Row> = last.into_values().collect();
    rows.sort_by(|a, b| (&a.target, a.trial_index).cmp(&(&b.target, b.trial_index)));
    let mut by_target: BTreeMap<String, Vec<Recorded>> = BTreeMap::new();
    for row in rows {
        let path = out.join(&row.evidence);
        let evidence =
            std::fs::read(&path).map_err(|e| format!("failed to read {}: {e}", path.display())).and_then(|bytes| {
                serde_json::from_slice::<Evidence>(&bytes)
                    .map_err(|e| format!("failed to parse {}: {e}", path.display()))
            });
        by_target.entry(row.target.clone()).or_default().push(Recorded { row, evidence });
    }
    Ok(by_target)
}

/// Whether the run's evidence shows that the guard itself kept a description-delivered
/// payload from the model: the guarded twin's W1 refusal line ([`W1_REFUSAL`], in the
/// target's stderr), or the control shim's sanitised description or pin refusal (the
/// evidence's `shim` section). A fact for the core's [`read_leg`], which decides what it means
/// (docs/prove.md, "Readings").
pub fn delivery_stopped_by_guard(seed: &LoadedSeed, evidence: &Evidence) -> bool {
    if seed.seed.delivery != Delivery::Description {
        return false;
    }
    let shim_w1 = evidence
        .shim
        .as_ref()
        .is_some_and(|s| s.tools.iter().any(|t| t.raw_description.is_some() || t.pin_matches == Some(false)));
    shim_w1 || evidence.target_execution.to_string().contains(W1_REFUSAL)
}

/// How a side's legs are read: which side, whether the scenario has verifiers, and whether
/// the verifier was shown able to see the effect on that side's build (its calibration there
/// passed).
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// The guarded side (or an ablation configuration with a control on).
    pub guarded: bool,
    /// The scenario declares verify checks.
    pub has_verifiers: bool,
    /// The verifier's calibration on this side's build passed.
    pub calibrated: bool,
}

/// The reading of one recorded leg of `seed`, through the core's [`read_leg`]; this only
/// gathers the facts it needs. `results` is the leg's results directory relative to the
/// report's (`repeat/results`): the run's evidence file is linked from there.
///
/// For a seed with an LLM judge, `judged` holds the judgements of the campaign's runs (the
/// campaign is the first part of `results`): a run the judge was asked about takes its
/// consensus ([`with_judgement`]); a run that wanted the judge but has no judgement (the judge
/// could not be asked, or this command does not ask it) is no verdict, never a resist.
pub fn reading(
    seed: &LoadedSeed,
    recorded: &Recorded,
    how: Reading,
    results: &str,
    judged: Option<&super::judge::Judged>,
) -> LegRun {
    let Reading { guarded, has_verifiers, calibrated } = how;
    let link = Some(format!("{results}/{}", recorded.row.evidence));
    let evidence = match &recorded.evidence {
        Ok(evidence) => evidence,
        Err(e) => {
            return LegRun {
                evidence: link,
                ..LegRun::bare(LegReading::NoVerdict { why: format!("the evidence could not be read: {e}") })
            };
        }
    };
    let context = LegContext {
        delivery: seed.seed.delivery,
        markers: &seed.seed.markers,
        has_verifiers,
        side: if guarded { Side::Guarded } else { Side::Vulnerable },
        delivery_stopped_by_guard: guarded && delivery_stopped_by_guard(seed, evidence),
        dispatched: &seed.seed.dispatched,
        deferred: &seed.seed.deferred,
        calibrated,
    };
    let run = LegRun { evidence: link, ..read_leg(&recorded.row, evidence, &context) };
    if seed.seed.judge.is_none() {
        return run;
    }
    let campaign = results.split('/').next().unwrap_or(results);
    match judged.and_then(|j| j.of(campaign, &recorded.row.trial_id)) {
        Some((consensus, file)) => with_judgement(run, consensus.clone(), file.clone()),
        None => match judge_wanted(&recorded.row, evidence, &LegContext { calibrated: false, ..context }) {
            Ok(()) => {
                let why = match judged {
                    Some(j) => match &j.unavailable {
                        Some(why) => format!("the seed's LLM judge could not be asked: {why}"),
                        None => "the seed's LLM judge was not asked about this run".to_owned(),
                    },
                    None => {
                        "no predicate decided the run and this command does not ask the seed's LLM judge".to_owned()
                    }
                };
                LegRun { reading: LegReading::NoVerdict { why }, basis: None, ..run }
            }
            Err(_) => run,
        },
    }
}

/// What the verifier read in one calibration run (no model call was made: only the trusted
/// setup, with or without the seed's `calibrate` actions): `completed` of a complete attempt,
/// or why the run cannot be read.
pub fn calibration_run(recorded: &Recorded, results: &str) -> CalibrationRun {
    let evidence = Some(format!("{results}/{}", recorded.row.evidence));
    let why = match &recorded.evidence {
        Err(e) => Some(format!("the evidence could not be read: {e}")),
        Ok(e) if e.attempt_id != recorded.row.attempt_id => Some("the evidence belongs to another attempt".into()),
        Ok(_) if !recorded.row.is_complete() => {
            let class = recorded.row.failure_class.map_or("incomplete", |c| c.as_str());
            let detail = recorded.row.errors.first().map(|e| format!(": {}", e.detail)).unwrap_or_default();
            Some(format!("the attempt is incomplete ({class}){detail}"))
        }
        Ok(_) => None,
    };
    match why {
        Some(why) => CalibrationRun { completed: None, why: Some(why), evidence },
        None => CalibrationRun { completed: recorded.row.completed, why: None, evidence },
    }
}
