//! Sequential stopping of `prove`'s repeat legs (`prove --sequential`), by curtailment: the
//! repeat campaign stops as soon as no result of its remaining runs could change the verdict,
//! so the verdict is the one fixed iterations give, always — not only on the runs tried.
//!
//! A keep needs every guarded run clean, so it can never be settled before the last run; a
//! rejection often can. [`settled`] names the two cases where it is:
//!
//! 1. **A guarded leak.** The differential requires no leak, and the most favourable reading
//!    of undecided runs ([`super::verdict::assess`]) keeps every decided run as it is: one
//!    leak rejects the finding whatever else happens.
//! 2. **The vulnerable side cannot reach its rate.** Even if every remaining run, and every
//!    run that decided nothing (or whose accepted call the verifier did not see), fired, the
//!    fire rate would stay under the filter's minimum (with a guarded side, under the rate
//!    gap's too, a leak rate being never below 0): the repeat filter fails, on the real and on
//!    the most favourable reading. With fewer runs the bound holds a fortiori (`a + N − n < pN`
//!    gives `a < pn` for `n ≤ N`), so the report of the runs made says the same.
//!
//! Everything else that can decide the verdict (calibration, the carrier, the rewrites) is
//! run in full, independently of the repeat legs, so it decides as it would have. The unit
//! and property tests below check the promise against [`super::verdict::assess`] itself.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::filter::Thresholds;
use super::leg::LegRun;

/// Why `prove --sequential` stopped a finding's repeat legs early, recorded in its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EarlyStop {
    /// What settled the verdict.
    pub reason: String,
    /// Iterations per side that fixed iterations would have run.
    pub of: u32,
    /// Vulnerable runs made.
    pub vulnerable_runs: u32,
    /// Guarded runs made (null without a guarded side).
    pub guarded_runs: Option<u32>,
}

fn n(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `Some(why)` when no result of the runs still to come (up to `iterations` per side) can
/// change the verdict the runs so far lead to; `None` while it can.
pub fn settled(
    vulnerable: &[LegRun],
    guarded: Option<&[LegRun]>,
    iterations: u32,
    thresholds: &Thresholds,
) -> Option<String> {
    if let Some(guarded) = guarded
        && let Some(at) = guarded.iter().position(|r| r.reading.is_fire())
    {
        return Some(format!(
            "the guarded side leaked on run {} of {}: one leak rejects the finding whatever the other runs show",
            at + 1,
            n(guarded.len())
        ));
    }
    let made = n(vulnerable.len()).min(iterations);
    // Runs that cannot count as fires on any reading: positive resists whose attack call, if
    // any, was not accepted unseen.
    let never = n(vulnerable.iter().filter(|r| r.reading.is_resist() && !r.accepted_unseen()).count());
    let possible = iterations.saturating_sub(never);
    let mut percent = thresholds.min_vulnerable_fire_percent;
    if guarded.is_some() {
        percent = percent.max(thresholds.min_rate_gap_percent);
    }
    let reachable = u64::from(possible) * 100 >= u64::from(percent) * u64::from(iterations);
    if iterations > 0 && !reachable {
        let fires = n(vulnerable.iter().filter(|r| r.reading.is_fire()).count());
        return Some(format!(
            "the vulnerable side fired on {fires} of {made} runs: even if all {} others fired it could not reach \
             {percent}% of {iterations}",
            iterations - made
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prove::leg::{AttackCalls, EvidenceTier, LegReading};
    use crate::prove::verdict::{Assessment, Verdict, assess};
    use crate::prove::{Calibration, CalibrationStatus};
    use proptest::prelude::*;

    fn kinds() -> Vec<LegRun> {
        let accepted = AttackCalls { accepted: 1, ..AttackCalls::default() };
        vec![
            LegRun::bare(LegReading::Fired { tier: EvidenceTier::State }),
            LegRun::bare(LegReading::Fired { tier: EvidenceTier::Trace }),
            LegRun::bare(LegReading::Fired { tier: EvidenceTier::JudgeOnly }),
            LegRun::bare(LegReading::Resisted),
            LegRun { attack: accepted, ..LegRun::bare(LegReading::Resisted) },
            LegRun::bare(LegReading::NotTested { why: "never read".into() }),
            LegRun::bare(LegReading::NoVerdict { why: "crashed".into() }),
        ]
    }

    fn verdict(v: &[LegRun], g: Option<&[LegRun]>, calibration: Option<&Calibration>, carrier: &[LegRun]) -> Verdict {
        let thresholds = Thresholds::default();
        let input = Assessment {
            vulnerable: v,
            guarded: g,
            rewrites: None,
            carrier: Some(carrier),
            layer: None,
            thresholds: &thresholds,
            calibration,
            guarded_calibration: None,
            server_guard: None,
            black_box: false,
        };
        assess(&input).2.verdict
    }

    fn calibration(status: CalibrationStatus) -> Calibration {
        Calibration { status, ..Calibration::not_calibrated() }
    }

    #[test]
    fn a_leak_settles_and_a_clean_guarded_side_never_does() {
        let t = Thresholds::default();
        let fire = kinds()[0].clone();
        let resist = kinds()[3].clone();
        let why =
            settled(std::slice::from_ref(&fire), Some(&[resist.clone(), fire.clone()]), 5, &t).expect("a leak settles");
        assert!(why.contains("leaked on run 2 of 2"), "{why}");
        // Four clean runs of five: the fifth could still leak, or could not.
        let clean = vec![resist.clone(); 4];
        assert_eq!(settled(&vec![fire.clone(); 4], Some(&clean), 5, &t), None);
    }

    #[test]
    fn a_vulnerable_side_that_cannot_reach_its_rate_settles() {
        let t = Thresholds::default();
        let resist = kinds()[3].clone();
        // With a guarded side the gap needs 50%: 3 resists of 5 leave at most 2 fires (40%).
        let why = settled(&vec![resist.clone(); 3], Some(&[]), 5, &t).expect("settled");
        assert!(why.contains("fired on 0 of 3 runs"), "{why}");
        // Without one 40% suffices: 2 possible fires of 5 still can.
        assert_eq!(settled(&vec![resist.clone(); 3], None, 5, &t), None);
        // A run that decided nothing may still count as a fire.
        let mut runs = vec![resist.clone(); 2];
        runs.push(kinds()[6].clone());
        assert_eq!(settled(&runs, Some(&[]), 5, &t), None);
        // And so may a resist whose accepted call the verifier did not see.
        let mut runs = vec![resist; 2];
        runs.push(kinds()[4].clone());
        assert_eq!(settled(&runs, Some(&[]), 5, &t), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        /// Whenever the runs made so far settle, the verdict on them is the verdict on every
        /// completion of them to fixed iterations, whatever the calibration and the carrier.
        #[test]
        fn a_settled_prefix_has_the_verdict_of_every_completion(
            iterations in 1_u32..8,
            v in proptest::collection::vec(0_usize..7, 8),
            g in proptest::collection::vec(0_usize..7, 8),
            made_v in 0_usize..8,
            made_g in 0_usize..8,
            with_guarded in any::<bool>(),
            status in 0_usize..5,
            carrier_fires in any::<bool>(),
        ) {
            let all = kinds();
            let n = iterations as usize;
            let v: Vec<LegRun> = v[..n].iter().map(|&k| all[k].clone()).collect();
            let g: Vec<LegRun> = g[..n].iter().map(|&k| all[k].clone()).collect();
            let (made_v, made_g) = (made_v.min(n), made_g.min(n));
            let guarded = with_guarded.then_some(&g[..made_g]);
            let calibration = [
                CalibrationStatus::Passed,
                CalibrationStatus::NotCalibrated,
                CalibrationStatus::Blind,
                CalibrationStatus::Vacuous,
                CalibrationStatus::Undecided,
            ]
            .map(calibration)[status]
                .clone();
            let carrier = if carrier_fires { vec![all[0].clone()] } else { vec![all[3].clone()] };
            if settled(&v[..made_v], guarded, iterations, &Thresholds::default()).is_some() {
                let full = verdict(&v, with_guarded.then_some(&g[..]), Some(&calibration), &carrier);
                let early = verdict(&v[..made_v], guarded, Some(&calibration), &carrier);
                prop_assert_eq!(early, full);
                prop_assert_ne!(full, Verdict::Kept);
            }
        }
    }
}
