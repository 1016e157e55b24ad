//! Ablation (`elengtis ablate`): which of a guarded side's controls actually carry the
//! security against one attack. Every control is switched off in turn with the others on
//! ("without"), and — with `--redundancy` — on alone ("alone"); two baselines frame it: every
//! control off ("all off", which must let the attack land) and every control on ("all on").
//!
//! Each configuration's runs are read like a prove's legs ([`super::leg`]) and summed up by
//! the repeat filter's thresholds: it **lands** when the attack fired on at least
//! [`Thresholds::min_vulnerable_fire_percent`] of its runs, it **holds** when it never fired
//! (no leak, and no effect the verifier saw without a sighting placing it after the
//! delivery) and was positively resisted on at least [`Thresholds::min_guarded_resist_percent`]
//! of them, anything else is **undecided**. Runs with any control on are read as the guarded
//! side's: an effect after the delivery is a leak whatever the server answered. A control is then:
//!
//! | Role | When |
//! |---|---|
//! | **load-bearing** | without it the attack lands; with every control on it holds |
//! | **redundant** | without it the attack still holds, and alone it holds too (`--redundancy`) |
//! | **theatre** | it does not stop the attack: alone the attack lands, or it lands with every control on |
//! | **covered** | without it the attack still holds; not run alone, so redundant or theatre is not known |
//! | **not tested** | the attack does not land with every control off, or a configuration it rests on is undecided |

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calibration::Calibration;
use super::filter::{SideCounts, Thresholds};
use super::leg::LegRun;

/// What one configuration's runs came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The attack landed (fired on enough runs).
    Lands,
    /// The attack was stopped (never fired, resisted on enough runs).
    Holds,
    /// Neither: too few decided runs, or fires below the threshold next to resists.
    Undecided,
}

impl Outcome {
    /// The name used in the matrix.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Lands => "lands",
            Outcome::Holds => "holds",
            Outcome::Undecided => "undecided",
        }
    }
}

/// One configuration: which controls were on, its runs, and what they came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    /// The controls that were on.
    pub on: Vec<String>,
    /// Its runs' counts.
    pub counts: SideCounts,
    /// What they came to.
    pub outcome: Outcome,
    /// Every run, with its reading and evidence file.
    pub runs: Vec<LegRun>,
}

impl Configuration {
    /// Sum `runs` up under `thresholds`.
    pub fn of(on: Vec<String>, runs: Vec<LegRun>, thresholds: &Thresholds) -> Configuration {
        let counts = SideCounts::of(&runs);
        let at_least =
            |n: u32, percent: u32| counts.runs > 0 && u64::from(n) * 100 >= u64::from(percent) * u64::from(counts.runs);
        let outcome =
            if counts.fired.deterministic() > 0 && at_least(counts.fires(), thresholds.min_vulnerable_fire_percent) {
                Outcome::Lands
            } else if counts.fires() == 0
                && counts.unplaced_effects == 0
                && at_least(counts.resisted, thresholds.min_guarded_resist_percent)
            {
                Outcome::Holds
            } else {
                Outcome::Undecided
            };
        Configuration { on, counts, outcome, runs }
    }
}

/// What a control is to the attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Without it the attack lands.
    LoadBearing,
    /// Not needed (the others stop the attack) but stops it alone.
    Redundant,
    /// Does not stop the attack.
    Theatre,
    /// Not needed; whether it stops the attack alone was not run.
    Covered,
    /// Too little was decided to say.
    NotTested,
}

impl Role {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::LoadBearing => "load-bearing",
            Role::Redundant => "redundant",
            Role::Theatre => "theatre",
            Role::Covered => "covered",
            Role::NotTested => "not tested",
        }
    }
}

/// One control's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlRow {
    /// The control.
    pub control: String,
    /// Every other control on, this one off.
    pub without: Configuration,
    /// This control on alone (null without `--redundancy`).
    pub alone: Option<Configuration>,
    /// What it is to the attack.
    pub role: Role,
    /// Why, in words.
    pub why: String,
}

/// Classify one control from the baselines and its own configurations.
pub fn classify(all_off: Outcome, all_on: Outcome, without: Outcome, alone: Option<Outcome>) -> (Role, String) {
    match (all_off, all_on, without, alone) {
        (Outcome::Holds | Outcome::Undecided, ..) => (
            Role::NotTested,
            format!("with every control off the attack {} (it must land to ablate)", all_off.as_str()),
        ),
        (_, Outcome::Lands, ..) => {
            (Role::Theatre, "the attack lands with every control on: no control stops it".into())
        }
        (_, Outcome::Undecided, ..) => (Role::NotTested, "with every control on the outcome is undecided".into()),
        (_, _, Outcome::Lands, _) => (Role::LoadBearing, "without it the attack lands; with it, it holds".into()),
        (_, _, Outcome::Undecided, _) => (Role::NotTested, "without it the outcome is undecided".into()),
        (_, _, Outcome::Holds, None) => (
            Role::Covered,
            "without it the attack still holds (the others stop it); run with --redundancy to tell redundant from \
             theatre"
                .into(),
        ),
        (_, _, Outcome::Holds, Some(Outcome::Holds)) => {
            (Role::Redundant, "without it the attack still holds, and it stops the attack alone".into())
        }
        (_, _, Outcome::Holds, Some(Outcome::Lands)) => {
            (Role::Theatre, "alone it does not stop the attack (the others do)".into())
        }
        (_, _, Outcome::Holds, Some(Outcome::Undecided)) => {
            (Role::NotTested, "without it the attack holds; alone the outcome is undecided".into())
        }
    }
}

/// Version of the ablation report format.
pub const ABLATION_SCHEMA_VERSION: u32 = 1;

/// `ablation.json`: one attack's ablation over a guarded side's controls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "AblationReport")]
pub struct AblationReport {
    /// Format version ([`ABLATION_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The seed's id.
    pub seed: String,
    /// What was ablated: `the reference twin's guards` or `your server's own controls`.
    pub subject: String,
    /// Runs per configuration.
    pub iterations: u32,
    /// The effect verifier's calibration (null when the scenario has no verifier). A
    /// verifier that fails it makes every control not tested.
    pub calibration: Option<Calibration>,
    /// Every control off.
    pub all_off: Configuration,
    /// Every control on.
    pub all_on: Configuration,
    /// One row per control, in the order declared.
    pub controls: Vec<ControlRow>,
}

impl AblationReport {
    /// Build the report from the configurations' runs.
    pub fn build(
        seed: &str,
        subject: &str,
        iterations: u32,
        calibration: Option<Calibration>,
        all_off: Configuration,
        all_on: Configuration,
        rows: Vec<(String, Configuration, Option<Configuration>)>,
    ) -> AblationReport {
        let blind = calibration.as_ref().filter(|c| c.status.disqualifies());
        let controls = rows
            .into_iter()
            .map(|(control, without, alone)| {
                let (role, why) = match blind {
                    Some(c) => (Role::NotTested, format!("calibration {}: {}", c.status.as_str(), c.detail)),
                    None => {
                        classify(all_off.outcome, all_on.outcome, without.outcome, alone.as_ref().map(|a| a.outcome))
                    }
                };
                ControlRow { control, without, alone, role, why }
            })
            .collect();
        AblationReport {
            schema_version: ABLATION_SCHEMA_VERSION,
            seed: seed.to_owned(),
            subject: subject.to_owned(),
            iterations,
            calibration,
            all_off,
            all_on,
            controls,
        }
    }

    /// Whether every control got a role (none is not tested).
    pub fn decided(&self) -> bool {
        self.controls.iter().all(|c| c.role != Role::NotTested)
    }
}

/// The matrix over several reports: one line per seed, one column per control (the union,
/// in order of first appearance), each cell the control's role; then the legend.
pub fn render_matrix(reports: &[AblationReport]) -> String {
    let mut controls: Vec<&str> = Vec::new();
    for r in reports {
        for c in &r.controls {
            if !controls.contains(&c.control.as_str()) {
                controls.push(&c.control);
            }
        }
    }
    let seed_width = reports.iter().map(|r| r.seed.chars().count()).chain([4]).max().unwrap_or(4);
    let widths: Vec<usize> = controls.iter().map(|c| c.chars().count().max(12)).collect();
    let mut out = format!("{:<seed_width$}", "seed");
    for (c, w) in controls.iter().zip(&widths) {
        let _ = write!(out, "  {c:<w$}");
    }
    out.push_str("  baselines (all off / all on)\n");
    for r in reports {
        let _ = write!(out, "{:<seed_width$}", r.seed);
        for (c, w) in controls.iter().zip(&widths) {
            let cell = r.controls.iter().find(|row| row.control == *c).map_or("-", |row| row.role.as_str());
            let _ = write!(out, "  {cell:<w$}");
        }
        let _ = writeln!(out, "  {} / {}", r.all_off.outcome.as_str(), r.all_on.outcome.as_str());
    }
    out.push_str(
        "load-bearing: without it the attack lands · redundant: not needed, stops it alone · theatre: does not stop \
         it · covered: not needed (run --redundancy) · not tested: too little decided\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prove::leg::{EvidenceTier, LegReading};

    fn config(fires: usize, resists: usize, undecided: usize) -> Configuration {
        let mut runs = vec![LegRun::bare(LegReading::Fired { tier: EvidenceTier::State }); fires];
        runs.extend(vec![LegRun::bare(LegReading::Resisted); resists]);
        runs.extend(vec![LegRun::bare(LegReading::NoVerdict { why: "x".into() }); undecided]);
        Configuration::of(Vec::new(), runs, &Thresholds::default())
    }

    #[test]
    fn configurations_land_hold_or_are_undecided_by_the_filters_thresholds() {
        assert_eq!(config(3, 0, 0).outcome, Outcome::Lands);
        assert_eq!(config(2, 3, 0).outcome, Outcome::Lands);
        assert_eq!(config(1, 4, 0).outcome, Outcome::Undecided);
        assert_eq!(config(0, 3, 0).outcome, Outcome::Holds);
        assert_eq!(config(0, 3, 2).outcome, Outcome::Holds);
        assert_eq!(config(0, 2, 3).outcome, Outcome::Undecided);
        assert_eq!(config(0, 0, 3).outcome, Outcome::Undecided);
    }

    #[test]
    fn every_role_from_its_configurations() {
        use Outcome::*;
        let role = |off, on, without, alone| classify(off, on, without, alone).0;
        assert_eq!(role(Lands, Holds, Lands, None), Role::LoadBearing);
        assert_eq!(role(Lands, Holds, Lands, Some(Holds)), Role::LoadBearing);
        assert_eq!(role(Lands, Holds, Holds, None), Role::Covered);
        assert_eq!(role(Lands, Holds, Holds, Some(Holds)), Role::Redundant);
        assert_eq!(role(Lands, Holds, Holds, Some(Lands)), Role::Theatre);
        assert_eq!(role(Lands, Lands, Lands, Some(Lands)), Role::Theatre);
        assert_eq!(role(Holds, Holds, Holds, Some(Holds)), Role::NotTested);
        assert_eq!(role(Undecided, Holds, Lands, None), Role::NotTested);
        assert_eq!(role(Lands, Undecided, Lands, None), Role::NotTested);
        assert_eq!(role(Lands, Holds, Undecided, None), Role::NotTested);
        assert_eq!(role(Lands, Holds, Holds, Some(Undecided)), Role::NotTested);
    }

    #[test]
    fn the_matrix_has_a_row_per_seed_and_a_column_per_control() {
        let report = AblationReport::build(
            "demo",
            "your server's own controls",
            3,
            None,
            config(3, 0, 0),
            config(0, 3, 0),
            vec![
                ("allowlist".into(), config(3, 0, 0), None),
                ("notice".into(), config(0, 3, 0), Some(config(3, 0, 0))),
            ],
        );
        assert!(report.decided());
        let text = render_matrix(&[report]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("seed  allowlist     notice"), "{text}");
        assert!(lines[1].starts_with("demo  load-bearing  theatre"), "{text}");
        assert!(lines[1].ends_with("lands / holds"), "{text}");
    }
}
