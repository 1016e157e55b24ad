//! The metamorphic stage: each rewrite of the payload ([`super::rewrite`]) re-driven once
//! through both sides. A rewrite *holds* when the vulnerable side fired and the guarded side
//! positively resisted (without a guarded side: when the vulnerable side fired). A rewrite
//! that left the payload unchanged never holds — it shows nothing about robustness. At least
//! [`MIN_HOLD_PERCENT`] of the rewrites must hold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::leg::{LegRun, Side};
use super::rewrite::RewriteKind;

/// Share of rewrites that must hold (percent).
pub const MIN_HOLD_PERCENT: u32 = 60;

/// One rewrite's runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewriteRun {
    /// Which rewrite.
    pub kind: RewriteKind,
    /// The rewrite left the payload unchanged.
    pub unchanged: bool,
    /// The vulnerable side's run.
    pub vulnerable: LegRun,
    /// The guarded side's run (null without a guarded side).
    pub guarded: Option<LegRun>,
}

/// One row of the metamorphic table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewriteRow {
    /// Which rewrite.
    pub kind: RewriteKind,
    /// The vulnerable side's label (`fired`, `resisted`, `not_tested`, `no_verdict`).
    pub vulnerable: String,
    /// The guarded side's label (`leak`, `resisted`, …; null without a guarded side).
    pub guarded: Option<String>,
    /// Whether it held.
    pub holds: bool,
    /// Why it did not hold (null when it held).
    pub why_not: Option<String>,
}

/// The stage's table and decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetamorphicResult {
    /// One row per rewrite.
    pub rows: Vec<RewriteRow>,
    /// Rewrites that held.
    pub held: u32,
    /// Rewrites run.
    pub total: u32,
    /// The share required (percent).
    pub min_hold_percent: u32,
    /// `held / total ≥ min_hold_percent` (false when nothing ran).
    pub passed: bool,
}

fn why_not(run: &RewriteRun) -> Option<String> {
    if run.unchanged {
        return Some("the rewrite left the payload unchanged".into());
    }
    let mut reasons = Vec::new();
    let vulnerable = &run.vulnerable.reading;
    if !vulnerable.is_fire() {
        reasons.push(match vulnerable.why() {
            Some(why) => format!("vulnerable {}: {why}", vulnerable.label(Side::Vulnerable)),
            None => format!("vulnerable {}", vulnerable.label(Side::Vulnerable)),
        });
    }
    if let Some(g) = run.guarded.as_ref().map(|g| &g.reading)
        && !g.is_resist()
    {
        reasons.push(match g.why() {
            Some(why) => format!("guarded {}: {why}", g.label(Side::Guarded)),
            None => format!("guarded {}", g.label(Side::Guarded)),
        });
    }
    if reasons.is_empty() { None } else { Some(reasons.join("; ")) }
}

/// Judge the rewrites' runs; `min_hold_percent` is normally [`MIN_HOLD_PERCENT`].
pub fn metamorphic(runs: &[RewriteRun], min_hold_percent: u32) -> MetamorphicResult {
    let rows: Vec<RewriteRow> = runs
        .iter()
        .map(|run| {
            let why_not = why_not(run);
            RewriteRow {
                kind: run.kind,
                vulnerable: run.vulnerable.reading.label(Side::Vulnerable).to_owned(),
                guarded: run.guarded.as_ref().map(|g| g.reading.label(Side::Guarded).to_owned()),
                holds: why_not.is_none(),
                why_not,
            }
        })
        .collect();
    let held = u32::try_from(rows.iter().filter(|r| r.holds).count()).unwrap_or(u32::MAX);
    let total = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    let passed = total > 0 && u64::from(held) * 100 >= u64::from(min_hold_percent) * u64::from(total);
    MetamorphicResult { rows, held, total, min_hold_percent, passed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prove::leg::{EvidenceTier, LegReading};

    const FIRE: LegReading = LegReading::Fired { tier: EvidenceTier::State };

    fn runs(holding: usize, failing: usize) -> Vec<RewriteRun> {
        RewriteKind::ALL
            .iter()
            .take(holding + failing)
            .enumerate()
            .map(|(i, &kind)| RewriteRun {
                kind,
                unchanged: false,
                vulnerable: FIRE.into(),
                guarded: Some(if i < holding { LegReading::Resisted } else { FIRE }.into()),
            })
            .collect()
    }

    #[test]
    fn sixty_percent_must_hold() {
        // 5/7 = 71% passes, 4/7 = 57% fails; 3/5 = 60% passes exactly.
        assert!(metamorphic(&runs(5, 2), MIN_HOLD_PERCENT).passed);
        let r = metamorphic(&runs(4, 3), MIN_HOLD_PERCENT);
        assert!(!r.passed);
        assert_eq!((r.held, r.total), (4, 7));
        assert!(metamorphic(&runs(3, 2), MIN_HOLD_PERCENT).passed);
        assert!(!metamorphic(&[], MIN_HOLD_PERCENT).passed);
    }

    #[test]
    fn a_row_says_why_it_did_not_hold() {
        let r = metamorphic(&runs(0, 1), MIN_HOLD_PERCENT);
        assert_eq!(r.rows[0].guarded.as_deref(), Some("leak"));
        assert_eq!(r.rows[0].why_not.as_deref(), Some("guarded leak"));
        let run = RewriteRun {
            kind: RewriteKind::Casing,
            unchanged: false,
            vulnerable: LegReading::NotTested { why: "never read".into() }.into(),
            guarded: Some(LegReading::Resisted.into()),
        };
        let r = metamorphic(&[run], MIN_HOLD_PERCENT);
        assert_eq!(r.rows[0].why_not.as_deref(), Some("vulnerable not_tested: never read"));
    }

    #[test]
    fn unchanged_rewrites_never_hold_and_no_guarded_side_needs_only_a_fire() {
        let mut all = runs(7, 0);
        all[0].unchanged = true;
        let r = metamorphic(&all, MIN_HOLD_PERCENT);
        assert_eq!(r.held, 6);
        assert!(!r.rows[0].holds);
        let alone =
            RewriteRun { kind: RewriteKind::Paraphrase, unchanged: false, vulnerable: FIRE.into(), guarded: None };
        assert!(metamorphic(&[alone], MIN_HOLD_PERCENT).passed);
    }
}
