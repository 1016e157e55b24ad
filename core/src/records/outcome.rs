//! What an attempt's phase results mean, decided in one pure function: whether the attempt
//! is complete, why not, and the metrics derived from the judged ones.
//!
//! The rules are the original's: an attempt is complete when setup was clean, proposals were
//! judged, the outcome is known (or no check was declared) and nothing fatal happened —
//! a provider error, an infrastructure error, a budget run out, or an error in a fatal phase
//! ([`Phase::is_fatal`]). Unknown is never false: a metric that could not be established
//! stays null.

use super::row::{EvidenceStatus, FailureClass, Phase, RecordedError};
use crate::agent::Termination;

/// What the phases established.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeInputs<'a> {
    /// Every setup action succeeded.
    pub setup_clean: bool,
    /// How the agent phase ended.
    pub termination: Termination,
    /// Proposal judgement (null when not judged).
    pub proposed: Option<bool>,
    /// Verified outcome (null when unknown or not verified).
    pub completed: Option<bool>,
    /// Safety judgement (null when not applicable or not judged).
    pub safety_pass: Option<bool>,
    /// The scenario declares verification checks.
    pub has_checks: bool,
    /// Tool errors the model met.
    pub tool_error_count: u32,
    /// Every error of the attempt.
    pub errors: &'a [RecordedError],
}

/// What they mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Complete or not.
    pub status: EvidenceStatus,
    /// Why not (null when complete).
    pub failure_class: Option<FailureClass>,
    /// `completed ∧ safety_pass`.
    pub safe_completed: Option<bool>,
    /// `proposed ∧ ¬completed`.
    pub proposed_not_completed: Option<bool>,
    /// `completed`, when a tool error occurred.
    pub recovery_succeeded: Option<bool>,
}

fn both(a: Option<bool>, b: Option<bool>, f: fn(bool, bool) -> bool) -> Option<bool> {
    Some(f(a?, b?))
}

impl Outcome {
    /// Decide.
    pub fn decide(inputs: &OutcomeInputs<'_>) -> Outcome {
        let fatal = matches!(
            inputs.termination,
            Termination::ProviderError | Termination::InfrastructureError | Termination::BudgetExhausted
        ) || inputs.errors.iter().any(|e| e.phase.is_fatal());
        let complete = inputs.setup_clean
            && inputs.proposed.is_some()
            && (inputs.completed.is_some() || !inputs.has_checks)
            && !fatal;
        let failure_class = if complete {
            None
        } else if inputs.termination == Termination::ProviderError {
            Some(FailureClass::ProviderError)
        } else if inputs.termination == Termination::BudgetExhausted {
            Some(FailureClass::BudgetExceeded)
        } else if inputs.errors.iter().any(|e| e.phase == Phase::Verification) {
            Some(FailureClass::VerificationError)
        } else {
            Some(FailureClass::InfrastructureError)
        };
        Outcome {
            status: if complete { EvidenceStatus::Complete } else { EvidenceStatus::Incomplete },
            failure_class,
            safe_completed: both(inputs.completed, inputs.safety_pass, |a, b| a && b),
            proposed_not_completed: both(inputs.proposed, inputs.completed, |p, c| p && !c),
            recovery_succeeded: if inputs.tool_error_count > 0 { inputs.completed } else { None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(errors: &[RecordedError]) -> OutcomeInputs<'_> {
        OutcomeInputs {
            setup_clean: true,
            termination: Termination::ModelStop,
            proposed: Some(true),
            completed: Some(false),
            safety_pass: Some(true),
            has_checks: true,
            tool_error_count: 0,
            errors,
        }
    }

    #[test]
    fn a_judged_attempt_with_a_known_outcome_is_complete() {
        let o = Outcome::decide(&inputs(&[]));
        assert_eq!(o.status, EvidenceStatus::Complete);
        assert_eq!(o.failure_class, None);
        assert_eq!(o.safe_completed, Some(false));
        assert_eq!(o.proposed_not_completed, Some(true));
        assert_eq!(o.recovery_succeeded, None);
    }

    #[test]
    fn an_unknown_outcome_with_checks_is_incomplete_but_without_checks_is_not() {
        let mut i = inputs(&[]);
        i.completed = None;
        assert_eq!(Outcome::decide(&i).failure_class, Some(FailureClass::InfrastructureError));
        assert_eq!(Outcome::decide(&i).safe_completed, None);
        i.has_checks = false;
        assert_eq!(Outcome::decide(&i).status, EvidenceStatus::Complete);
    }

    #[test]
    fn failure_classes_follow_the_originals_order() {
        let verification = [RecordedError::new(Phase::Verification, Some("check"), "down")];
        let mut i = inputs(&verification);
        i.completed = None;
        assert_eq!(Outcome::decide(&i).failure_class, Some(FailureClass::VerificationError));
        i.termination = Termination::BudgetExhausted;
        assert_eq!(Outcome::decide(&i).failure_class, Some(FailureClass::BudgetExceeded));
        i.termination = Termination::ProviderError;
        assert_eq!(Outcome::decide(&i).failure_class, Some(FailureClass::ProviderError));
    }

    #[test]
    fn tool_errors_are_data_but_fatal_phases_are_not() {
        let tool = [RecordedError::new(Phase::Exercise, None, "tool failed")];
        let mut i = inputs(&tool);
        i.tool_error_count = 1;
        let o = Outcome::decide(&i);
        assert_eq!(o.status, EvidenceStatus::Complete);
        assert_eq!(o.recovery_succeeded, Some(false));
        let cleanup = [RecordedError::new(Phase::Cleanup, Some("c"), "failed")];
        assert_eq!(Outcome::decide(&inputs(&cleanup)).failure_class, Some(FailureClass::InfrastructureError));
    }
}
