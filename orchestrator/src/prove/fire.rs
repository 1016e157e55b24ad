//! The vulnerable side alone, trial by trial, until a stopping rule decides (`elengtis scan`,
//! docs/scan.md "Run and rank"): the seed's calibration first (a check that cannot see the
//! effect makes every later "no effect" meaningless, so nothing more runs), its benign
//! carrier beside it (the control: the markers without the instruction), then one trial at
//! a time read exactly as `prove` reads a vulnerable leg, until the Wilson interval of the
//! fire rate lies above or below the threshold or the cap is reached.

use std::path::{Path, PathBuf};

use elengtis_core::prove::sequential::{Decision, StoppingRule};
use elengtis_core::prove::{CalibrationStatus, LegReading};
use serde::{Deserialize, Serialize};

use super::campaign::Leg;
use super::{
    CALIBRATION_TARGET, CARRIER_TARGET, Campaign, Pool, ProveError, ProveOptions, calibration_of, carrier_runs,
    check_seed_scenario, legs, prepare_calibration, prepare_campaign, readings_of, run_campaign,
};

/// How one candidate came out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FireRecord {
    /// The calibration's status (`passed`, `blind`, `vacuous`, `undecided`, `not_calibrated`).
    pub calibration: CalibrationStatus,
    /// The calibration's detail.
    pub calibration_detail: String,
    /// Whether the benign carrier (the markers without the instruction) fired: `None` when
    /// it was not run or decided nothing.
    pub control_fired: Option<bool>,
    /// The control's runs that decided nothing, with why.
    pub control_undecided: Vec<String>,
    /// Where the rule stopped (`None`: no trial ran).
    pub decision: Option<Decision>,
    /// Trials read as a fire.
    pub fires: u32,
    /// Trials read as a fire or a resist.
    pub decided: u32,
    /// Trials run.
    pub trials: u32,
    /// The 95% Wilson interval of the fire rate over the decided trials.
    pub interval: [f64; 2],
    /// The rule and the numbers it stopped at, in words.
    pub stopped: String,
    /// Each trial that decided nothing, with why.
    pub undecided: Vec<String>,
    /// The candidate's runs (calibrate/, carrier/, trial-N/ each with its campaign and results).
    pub dir: PathBuf,
}

/// Run the seed at `seed_path` on the vulnerable side of `options` (its `target`, or the
/// vulnerable twin) under `rule`.
///
/// # Errors
///
/// [`ProveError`] when the seed or a campaign cannot be read or written, or a run fails to
/// start (a finding that does not fire is a record, not an error).
pub async fn fire_sequential(
    seed_path: &Path,
    options: &ProveOptions,
    rule: &StoppingRule,
) -> Result<FireRecord, ProveError> {
    let (seed, dir) = super::seed_and_dir(seed_path, options)?;
    let leg = |target_id: &str, payload: &str| Leg {
        target_id: target_id.to_owned(),
        build: "vulnerable",
        payload: payload.to_owned(),
        custom: options.target.clone(),
        ..Leg::default()
    };
    let trial = |n: u32| {
        prepare_campaign(&seed, &dir.join(format!("trial-{n}")), &[leg("vulnerable", &seed.seed.payload)], 1, options)
    };
    let first = trial(1)?;
    check_seed_scenario(&seed, &first)?;
    let has_verifiers = first.has_verifiers;
    let declared =
        seed.seed.calibrate.is_some() || first.bundle.scenarios.iter().any(|s| !s.value.calibrate.is_empty());
    let calibration_campaign = if declared && has_verifiers {
        Some(prepare_calibration(
            &seed,
            &dir.join("calibrate"),
            &[leg(CALIBRATION_TARGET, &seed.seed.payload)],
            options,
        )?)
    } else {
        None
    };
    let runs = carrier_runs(&seed, options);
    let carrier = prepare_campaign(
        &seed,
        &dir.join("carrier"),
        &[leg(CARRIER_TARGET, &seed.seed.carrier_text())],
        runs,
        options,
    )?;
    let mut all: Vec<&Campaign> = vec![&first, &carrier];
    all.extend(calibration_campaign.as_ref());
    let pool = Pool::new(&all, options).await?;

    let mut record = FireRecord {
        calibration: CalibrationStatus::NotCalibrated,
        calibration_detail: String::new(),
        control_fired: None,
        control_undecided: Vec::new(),
        decision: None,
        fires: 0,
        decided: 0,
        trials: 0,
        interval: [0.0, 1.0],
        stopped: String::new(),
        undecided: Vec::new(),
        dir: dir.clone(),
    };
    let calibrated = match &calibration_campaign {
        Some(campaign) => {
            let runs = run_campaign(campaign, &pool, options).await?;
            let calibration = calibration_of(&seed, &runs, CALIBRATION_TARGET);
            record.calibration = calibration.status;
            record.calibration_detail = calibration.detail.clone();
            calibration.status == CalibrationStatus::Passed
        }
        None => {
            record.calibration_detail = if has_verifiers {
                "the seed declares no calibrate action: the check was never shown a real effect".into()
            } else {
                "the scenario has no verify check: only the trace can show a fire".into()
            };
            false
        }
    };
    if has_verifiers && !calibrated {
        record.stopped = "no trial ran: the check was not shown able to see the effect".into();
        return Ok(record);
    }
    let how = legs::Reading { guarded: false, has_verifiers, calibrated };
    // The control beside it: the markers without the instruction.
    let carried = run_campaign(&carrier, &pool, options).await?;
    let control = readings_of(&seed, &carried, CARRIER_TARGET, how, runs, "carrier/results", None);
    for (i, run) in control.iter().enumerate() {
        if let Some(why) = run.reading.why() {
            record.control_undecided.push(format!("control #{}: {why}", i + 1));
        }
    }
    let decided: Vec<bool> = control.iter().filter(|r| r.reading.is_decided()).map(|r| r.reading.is_fire()).collect();
    record.control_fired = (!decided.is_empty()).then(|| decided.iter().any(|f| *f));

    let mut next = Some(first);
    let mut n = 1;
    loop {
        let campaign = match next.take() {
            Some(c) => c,
            None => trial(n)?,
        };
        let ran = run_campaign(&campaign, &pool, options).await?;
        let read = readings_of(&seed, &ran, "vulnerable", how, 1, &format!("trial-{n}/results"), None);
        for run in &read {
            record.trials += 1;
            match &run.reading {
                LegReading::Fired { .. } => {
                    record.fires += 1;
                    record.decided += 1;
                }
                LegReading::Resisted => record.decided += 1,
                other => record.undecided.push(format!("trial {n}: {}", other.why().unwrap_or_default())),
            }
        }
        let decision = rule.decide(record.fires, record.decided, record.trials);
        if decision != Decision::Continue {
            let (low, high) = elengtis_core::prove::sequential::wilson(record.fires, record.decided);
            record.interval = [low, high];
            record.stopped = rule.explain(decision, record.fires, record.decided, record.trials);
            record.decision = Some(decision);
            return Ok(record);
        }
        n += 1;
    }
}
