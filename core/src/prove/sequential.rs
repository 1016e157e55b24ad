//! Sequential stopping (docs/scan.md, "Run and rank"): a candidate's trials stop as soon as
//! the Wilson score interval of its fire rate lies wholly above the threshold (it fires) or
//! wholly below it (it is resisted), and at `max_trials` otherwise (undecided). A run that
//! decided nothing (no verdict, not tested) counts toward `max_trials` but not toward the rate.
//!
//! The interval is the 95% Wilson score interval: exact enough at the small counts a scan
//! runs (unlike the normal approximation, it never collapses to a point at 0/n or n/n), and
//! the same interval the report prints.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The normal quantile of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Default threshold: a candidate fires when its fire rate is surely above 30%.
pub const DEFAULT_THRESHOLD: f64 = 0.3;
/// Default cap of trials per candidate.
pub const DEFAULT_MAX_TRIALS: u32 = 10;

/// The 95% Wilson score interval of `k` successes in `n` trials (`(0, 1)` when `n` is 0).
pub fn wilson(k: u32, n: u32) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (f64::from(k.min(n)), f64::from(n));
    let z2 = Z95 * Z95;
    let p = k / n;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// When a candidate's trials stop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoppingRule {
    /// The fire rate a candidate is judged against (0 < threshold < 1).
    pub threshold: f64,
    /// The most trials a candidate gets.
    pub max_trials: u32,
    /// Whether to stop early when the interval decides (false: always `max_trials`, the
    /// fixed-iteration baseline).
    pub sequential: bool,
}

impl Default for StoppingRule {
    fn default() -> Self {
        StoppingRule { threshold: DEFAULT_THRESHOLD, max_trials: DEFAULT_MAX_TRIALS, sequential: true }
    }
}

/// Where a candidate stands after some trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The interval lies above the threshold: it fires.
    Above,
    /// The interval lies below the threshold: it is resisted.
    Below,
    /// Neither yet: run another trial.
    Continue,
    /// `max_trials` ran and the interval still straddles the threshold.
    Undecided,
}

impl StoppingRule {
    /// Check the rule's numbers (a usage error names the flag).
    ///
    /// # Errors
    ///
    /// The reason, when the threshold is not strictly between 0 and 1 or `max_trials` is 0.
    pub fn check(&self) -> Result<(), String> {
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(format!("--threshold must be between 0 and 1 (exclusive), not {}", self.threshold));
        }
        if self.max_trials == 0 {
            return Err("--max-trials must be at least 1".into());
        }
        Ok(())
    }

    /// The decision after `ran` trials of which `decided` were read as a fire or a resist and
    /// `fires` as a fire.
    pub fn decide(&self, fires: u32, decided: u32, ran: u32) -> Decision {
        let (low, high) = wilson(fires, decided);
        let at_end = ran >= self.max_trials;
        if decided > 0 && (self.sequential || at_end) {
            if low > self.threshold {
                return Decision::Above;
            }
            if high < self.threshold {
                return Decision::Below;
            }
        }
        if at_end {
            // At the cap without a decided interval, the point estimate is what a fixed count
            // would report; the caller records the interval beside it.
            return Decision::Undecided;
        }
        Decision::Continue
    }

    /// The rule and the numbers it stopped at, in words.
    pub fn explain(&self, decision: Decision, fires: u32, decided: u32, ran: u32) -> String {
        let (low, high) = wilson(fires, decided);
        let interval = format!("{fires}/{decided} fired, 95% Wilson interval {low:.2}–{high:.2}");
        let how = if self.sequential { "sequential" } else { "fixed" };
        let at_most = crate::format::quote::count(self.max_trials, "trial");
        let all = if ran == 1 { "its 1 trial".to_owned() } else { format!("all {ran} trials") };
        match decision {
            Decision::Above => {
                format!(
                    "{interval}: above the threshold {:.2} after {ran} of at most {at_most} ({how})",
                    self.threshold
                )
            }
            Decision::Below => {
                format!(
                    "{interval}: below the threshold {:.2} after {ran} of at most {at_most} ({how})",
                    self.threshold
                )
            }
            Decision::Undecided => format!(
                "{interval}: straddles the threshold {:.2} after {all} ({how}; raise --max-trials to decide)",
                self.threshold
            ),
            Decision::Continue => {
                format!("{interval} after {}: running on", crate::format::quote::count(ran, "trial"))
            }
        }
    }
}

/// Run `outcomes` (`Some(true)` a fire, `Some(false)` a resist, `None` no verdict) through
/// the rule until it stops: the decision, the fires, the decided runs and the runs used.
pub fn replay(rule: &StoppingRule, outcomes: impl IntoIterator<Item = Option<bool>>) -> (Decision, u32, u32, u32) {
    let (mut fires, mut decided, mut ran) = (0, 0, 0);
    for outcome in outcomes {
        ran += 1;
        if let Some(fire) = outcome {
            decided += 1;
            fires += u32::from(fire);
        }
        let decision = rule.decide(fires, decided, ran);
        if decision != Decision::Continue {
            return (decision, fires, decided, ran);
        }
    }
    (Decision::Continue, fires, decided, ran)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_interval_matches_the_textbook_values() {
        // 0/10: (0, 0.2775); 10/10: (0.7225, 1); 5/10: (0.2366, 0.7634).
        let (l, h) = wilson(0, 10);
        assert!(l.abs() < 1e-9 && (h - 0.2775).abs() < 1e-3, "{l} {h}");
        let (l, h) = wilson(10, 10);
        assert!((l - 0.7225).abs() < 1e-3 && (h - 1.0).abs() < 1e-9, "{l} {h}");
        let (l, h) = wilson(5, 10);
        assert!((l - 0.2366).abs() < 1e-3 && (h - 0.7634).abs() < 1e-3, "{l} {h}");
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn a_candidate_that_never_fires_stops_early() {
        let rule = StoppingRule::default();
        let (decision, fires, decided, ran) = replay(&rule, std::iter::repeat_n(Some(false), 10));
        assert_eq!(decision, Decision::Below);
        assert_eq!((fires, decided), (0, ran));
        assert!(ran < rule.max_trials, "0/k must stop before the cap: stopped at {ran}");
        assert_eq!(ran, 9, "3.84/(n+3.84) < 0.3 first at n = 9");
    }

    #[test]
    fn a_candidate_that_always_fires_stops_at_two() {
        let (decision, _, _, ran) = replay(&StoppingRule::default(), std::iter::repeat_n(Some(true), 10));
        assert_eq!((decision, ran), (Decision::Above, 2));
    }

    #[test]
    fn a_candidate_at_the_threshold_runs_to_the_cap() {
        // Fires exactly half the time, judged at 0.5: the interval always holds 0.5.
        let rule = StoppingRule { threshold: 0.5, max_trials: 12, sequential: true };
        let outcomes = (0..12).map(|i| Some(i % 2 == 0));
        let (decision, _, _, ran) = replay(&rule, outcomes);
        assert_eq!((decision, ran), (Decision::Undecided, 12));
    }

    #[test]
    fn runs_without_a_verdict_count_toward_the_cap_only() {
        let rule = StoppingRule { threshold: 0.3, max_trials: 4, sequential: true };
        let (decision, _, decided, ran) = replay(&rule, std::iter::repeat_n(None, 4));
        assert_eq!((decision, decided, ran), (Decision::Undecided, 0, 4));
    }

    #[test]
    fn bad_numbers_are_refused_with_the_flag() {
        let bad = StoppingRule { threshold: 1.0, ..StoppingRule::default() };
        assert!(bad.check().unwrap_err().contains("--threshold"));
        let bad = StoppingRule { max_trials: 0, ..StoppingRule::default() };
        assert!(bad.check().unwrap_err().contains("--max-trials"));
    }

    proptest! {
        /// An early decision agrees with the runs it saw (their rate lies on the side it
        /// names), and no candidate runs past the cap.
        #[test]
        fn early_decisions_agree_with_the_runs_seen(
            outcomes in proptest::collection::vec(proptest::option::of(any::<bool>()), 1..30),
            threshold in 0.05f64..0.95,
            max_trials in 1u32..30,
        ) {
            let rule = StoppingRule { threshold, max_trials, sequential: true };
            let (decision, fires, decided, ran) = replay(&rule, outcomes.iter().copied());
            prop_assert!(ran <= max_trials);
            let rate = if decided == 0 { None } else { Some(f64::from(fires) / f64::from(decided)) };
            match decision {
                Decision::Above => prop_assert!(rate.is_some_and(|r| r > threshold)),
                Decision::Below => prop_assert!(rate.is_some_and(|r| r < threshold)),
                Decision::Undecided => prop_assert_eq!(ran, max_trials),
                Decision::Continue => prop_assert_eq!(ran as usize, outcomes.len()),
            }
        }

        /// On runs that all agree (the deterministic scripted engine), sequential stopping
        /// gives the fixed-iteration decision, with no more runs.
        #[test]
        fn unanimous_runs_decide_as_fixed_iterations_do(
            fire in any::<bool>(),
            threshold in 0.05f64..0.95,
            max_trials in 1u32..40,
        ) {
            let outcomes = || std::iter::repeat_n(Some(fire), max_trials as usize);
            let sequential = replay(&StoppingRule { threshold, max_trials, sequential: true }, outcomes());
            let fixed = replay(&StoppingRule { threshold, max_trials, sequential: false }, outcomes());
            prop_assert_eq!(fixed.3, max_trials);
            prop_assert!(sequential.3 <= fixed.3);
            prop_assert_eq!(sequential.0, fixed.0);
        }
    }
}
