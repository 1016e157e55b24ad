//! `elengtis ablate`: switch a guarded side's controls off one at a time (and, with
//! `--redundancy`, on one at a time) against one attack seed, and say which carry the security
//! (the core's [`elengtis_core::prove::ablation`]). The controls are the reference twin's
//! guards W1–W4 (its `--disable-guard`) or the ones a target of your own declares
//! (`control_env`, `control_args`, switched by `controls_on`).
//!
//! Every configuration is a target of one campaign (`<out>/<seed>/ablation/`), its legs run
//! through the run engine from the same pool of `--jobs` slots as `prove`'s, and read as
//! `prove` reads a leg; the effect verifier is calibrated first when the seed says how.

use std::path::{Path, PathBuf};

use elengtis_core::format::seed::{LoadedSeed, Weakness};
use elengtis_core::prove::ablation::{AblationReport, Configuration};
use elengtis_core::prove::{Calibration, LegReading, LegRun};

use super::campaign::Leg;
use super::{
    CALIBRATION_TARGET, Campaign, Pool, ProveError, ProveOptions, calibration_of, declared_controls,
    prepare_calibration, prepare_campaign, readings_of, run_campaign, with_controls,
};

/// The ablation campaign's results directory, relative to the seed's directory.
const ABLATION_RESULTS: &str = "ablation/results";

/// One seed's ablation.
#[derive(Debug)]
pub struct Ablated {
    /// The seed file.
    pub seed_path: PathBuf,
    /// The report (also written as `<out>/<seed>/ablation.json`).
    pub report: AblationReport,
    /// Where it was written.
    pub report_path: PathBuf,
}

/// One configuration of the campaign: its target id and the controls it has on.
struct Config {
    target_id: String,
    on: Vec<String>,
}

/// The controls being ablated: your target's declared ones, else the twin's guards.
fn controls(options: &ProveOptions) -> Vec<String> {
    match &options.target {
        Some(target) => declared_controls(target),
        None => Weakness::ALL.iter().map(|w| w.as_str().to_owned()).collect(),
    }
}

/// A control's name as part of a target id (`^[a-z0-9][a-z0-9_-]*$`), made unique by its
/// position.
fn id_part(i: usize, control: &str) -> String {
    let cleaned: String =
        control.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    format!("{i}-{cleaned}")
}

fn configurations(controls: &[String], redundancy: bool) -> Vec<Config> {
    let mut configs = vec![
        Config { target_id: "all-off".into(), on: Vec::new() },
        Config { target_id: "all-on".into(), on: controls.to_vec() },
    ];
    for (i, control) in controls.iter().enumerate() {
        let others = controls.iter().filter(|c| *c != control).cloned().collect();
        configs.push(Config { target_id: format!("without-{}", id_part(i, control)), on: others });
        if redundancy {
            configs.push(Config { target_id: format!("alone-{}", id_part(i, control)), on: vec![control.clone()] });
        }
    }
    configs
}

/// The leg of one configuration: your target with exactly `on` switched on, or the guarded
/// twin with every other guard disabled.
fn leg(seed: &LoadedSeed, config: &Config, options: &ProveOptions) -> Leg {
    match &options.target {
        Some(target) => Leg {
            target_id: config.target_id.clone(),
            build: "vulnerable",
            payload: seed.seed.payload.clone(),
            custom: Some(with_controls(target, &config.on)),
            ..Leg::default()
        },
        None => Leg {
            target_id: config.target_id.clone(),
            build: "guarded",
            payload: seed.seed.payload.clone(),
            disabled: Some(Weakness::ALL.into_iter().filter(|w| !config.on.iter().any(|c| c == w.as_str())).collect()),
            ..Leg::default()
        },
    }
}

struct Prepared {
    seed_path: PathBuf,
    seed: LoadedSeed,
    dir: PathBuf,
    configs: Vec<Config>,
    campaign: Campaign,
    calibration: Option<Campaign>,
}

fn prepare(seed_path: &Path, options: &ProveOptions, redundancy: bool) -> Result<Prepared, ProveError> {
    let (seed, dir) = super::seed_and_dir(seed_path, options)?;
    let controls = controls(options);
    if controls.is_empty() {
        return Err(ProveError::Usage(
            "the target declares no control to ablate: add `control_env: {NAME: {VARIABLE: value}}` or \
             `control_args` to its file"
                .into(),
        ));
    }
    let configs = configurations(&controls, redundancy);
    let legs: Vec<Leg> = configs.iter().map(|c| leg(&seed, c, options)).collect();
    let campaign = prepare_campaign(&seed, &dir.join("ablation"), &legs, options.iterations, options)?;
    let declared =
        seed.seed.calibrate.is_some() || campaign.bundle.scenarios.iter().any(|s| !s.value.calibrate.is_empty());
    let calibration = match (declared, campaign.has_verifiers) {
        (true, true) => {
            let all_off = &configs[0];
            let mut leg = leg(&seed, all_off, options);
            leg.target_id = CALIBRATION_TARGET.to_owned();
            Some(prepare_calibration(&seed, &dir.join("calibrate"), std::slice::from_ref(&leg), options)?)
        }
        _ => None,
    };
    Ok(Prepared { seed_path: seed_path.to_owned(), seed, dir, configs, campaign, calibration })
}

async fn run_one(prepared: &Prepared, pool: &Pool, options: &ProveOptions) -> Result<Ablated, ProveError> {
    let optional = async {
        match &prepared.calibration {
            Some(c) => run_campaign(c, pool, options).await.map(Some),
            None => Ok(None),
        }
    };
    let (results, calibrated) =
        futures_util::future::join(run_campaign(&prepared.campaign, pool, options), optional).await;
    let (results, calibrated) = (results?, calibrated?);
    let has_verifiers = prepared.campaign.has_verifiers;
    let calibration = has_verifiers.then(|| {
        calibrated
            .as_ref()
            .map_or_else(Calibration::not_calibrated, |runs| calibration_of(&prepared.seed, runs, CALIBRATION_TARGET))
    });
    let calibrated_off =
        calibration.as_ref().is_some_and(|c| c.status == elengtis_core::prove::CalibrationStatus::Passed);
    let configuration = |config: &Config| {
        // Every configuration with a control on is read as a guarded side (a leak is a leak,
        // whatever the server answered); its verifier is calibrated on the all-off build
        // only, so an accepted call with no effect seen is no resist there.
        let how = super::legs::Reading {
            guarded: !config.on.is_empty(),
            has_verifiers,
            calibrated: config.on.is_empty() && calibrated_off,
        };
        let runs: Vec<LegRun> =
            readings_of(&prepared.seed, &results, &config.target_id, how, options.iterations, ABLATION_RESULTS, None);
        Configuration::of(config.on.clone(), runs, &options.thresholds)
    };
    let mut configs = prepared.configs.iter();
    let (Some(off), Some(on)) = (configs.next(), configs.next()) else {
        return Err(ProveError::Usage("failed to ablate: no configuration".into()));
    };
    let controls = controls(options);
    let rows = controls
        .iter()
        .enumerate()
        .map(|(i, control)| {
            let find = |prefix: &str| {
                prepared.configs.iter().find(|c| c.target_id == format!("{prefix}-{}", id_part(i, control)))
            };
            let without = find("without").map_or_else(
                || {
                    Configuration::of(
                        Vec::new(),
                        vec![LegRun::bare(LegReading::NoVerdict { why: "not run".into() })],
                        &options.thresholds,
                    )
                },
                configuration,
            );
            (control.clone(), without, find("alone").map(configuration))
        })
        .collect();
    let subject = if options.target.is_some() { "your server's own controls" } else { "the reference twin's guards" };
    let report = AblationReport::build(
        &prepared.seed.seed.id,
        subject,
        options.iterations,
        calibration,
        configuration(off),
        configuration(on),
        rows,
    );
    let report_path = prepared.dir.join("ablation.json");
    super::outputs::write_json(&report_path, &report)?;
    Ok(Ablated { seed_path: prepared.seed_path.clone(), report, report_path })
}

/// Ablate `seed_paths` in order, every configuration's legs drawing from one pool of
/// `options.jobs` slots; `each` gets every seed's result in seed order.
pub async fn ablate_seeds(
    seed_paths: &[PathBuf],
    options: &ProveOptions,
    redundancy: bool,
    mut each: impl FnMut(&Ablated),
) -> Result<Vec<Ablated>, ProveError> {
    let prepared: Vec<Prepared> =
        seed_paths.iter().map(|p| prepare(p, options, redundancy)).collect::<Result<_, _>>()?;
    let campaigns: Vec<&Campaign> =
        prepared.iter().flat_map(|p| std::iter::once(&p.campaign).chain(p.calibration.as_ref())).collect();
    let pool = Pool::new(&campaigns, options).await?;
    let mut done = Vec::with_capacity(prepared.len());
    // One seed at a time: each already holds many configurations to fill the pool.
    for p in &prepared {
        let ablated = run_one(p, &pool, options).await?;
        each(&ablated);
        done.push(ablated);
    }
    Ok(done)
}
