//! An attempt's row and evidence, built from what its phases produced. What the results
//! mean is decided by [`Outcome::decide`] in the core; this module only assembles the
//! records.

use elengtis_core::agent::{AgentOutcome, Termination};
use elengtis_core::format::campaign::Campaign;
use elengtis_core::records::{
    Diagnostics, Evidence, EvidenceStatus, Outcome, OutcomeInputs, RESULTS_SCHEMA_VERSION, RecordedError, Row,
    Timeline, Usage, derive, timeline::RUNNER_MONOTONIC_US,
};
use serde_json::Value;

use super::phases::Phases;

/// Who the attempt was.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The trial.
    pub trial_id: &'a str,
    /// The attempt.
    pub attempt_id: &'a str,
    /// Target id.
    pub target: &'a str,
    /// Scenario id.
    pub scenario: &'a str,
    /// Trial index.
    pub trial_index: u32,
    /// The canary of the attempt.
    pub canary: &'a str,
    /// The evidence file, relative to the results directory.
    pub evidence: &'a str,
    /// When the attempt began ([`crate::clock`]).
    pub began_us: u64,
}

/// The row and evidence of an attempt.
pub fn build(
    who: Identity<'_>,
    campaign: &Campaign,
    has_checks: bool,
    phases: Phases,
    target_execution: Value,
    errors: Vec<RecordedError>,
    duration_ms: f64,
) -> (Row, Evidence) {
    let termination = phases.termination();
    let setup_clean = phases.setup_clean;
    let mut agent = phases.agent;
    let mut timeline = Timeline {
        clock: RUNNER_MONOTONIC_US.to_owned(),
        began_us: who.began_us,
        exercise_us: phases.exercise_us,
        calls: std::mem::take(&mut agent.call_times),
        sightings: phases.sightings,
        verified_us: phases.verified_us,
    };
    let after: Vec<Option<String>> =
        timeline.sightings.iter().map(|s| timeline.call_at(s.at_us).map(|c| c.id.clone())).collect();
    for (sighting, after) in timeline.sightings.iter_mut().zip(after) {
        sighting.after = after;
    }
    let (judged_calls, tool_errors) = (agent.calls.len(), agent.tool_errors.len());
    let usage = usage(campaign, &agent);
    let diagnostics = Diagnostics {
        first_finish_reason: agent.first_finish_reason.clone(),
        first_native_finish_reason: agent.first_native_finish_reason.clone(),
        invalid_tool_calls: agent.invalid_tool_calls,
    };
    let evidence = Evidence {
        schema_version: RESULTS_SCHEMA_VERSION,
        run_id: who.run_id.to_owned(),
        trial_id: who.trial_id.to_owned(),
        attempt_id: who.attempt_id.to_owned(),
        target: who.target.to_owned(),
        scenario: who.scenario.to_owned(),
        canary: who.canary.to_owned(),
        setup: phases.setup_records,
        tools: phases.offered_tools,
        requests: agent.requests,
        messages: agent.messages,
        exchanges: agent.exchanges,
        trajectory: agent.trajectory,
        graph_events: agent.graph_events,
        usage,
        response_diagnostics: diagnostics.clone(),
        safety_evaluation: phases.safety,
        proposal_evaluation: phases.proposal,
        verification: phases.verification,
        cleanup: phases.cleanup_records,
        target_execution,
        termination,
        errors,
        shim: phases.shim,
        timeline: Some(timeline),
    };
    // Every field the evidence determines is set from it (`records::derive`), as `verify`
    // checks it: the row cannot say what its evidence does not.
    let mut row = Row {
        schema_version: RESULTS_SCHEMA_VERSION,
        run_id: String::new(),
        trial_id: String::new(),
        attempt_id: String::new(),
        target: String::new(),
        scenario: String::new(),
        trial_index: who.trial_index,
        engine: campaign.engine,
        proposed: None,
        completed: None,
        safety_pass: None,
        safe_completed: None,
        model_id: campaign.model_id.clone().or_else(|| campaign.model.clone()),
        model: campaign.model.clone(),
        model_turns: 0,
        tool_calls: 0,
        usage,
        tool_sequence: Vec::new(),
        tool_error_count: 0,
        recovery_succeeded: None,
        diagnostics,
        proposed_not_completed: None,
        steps_to_propose: None,
        termination,
        errors: Vec::new(),
        failure_class: None,
        evidence: who.evidence.to_owned(),
        evidence_status: EvidenceStatus::Incomplete,
        // Filled in when the row is appended (the evidence's bytes, the previous line).
        evidence_sha256: None,
        prev_row_sha256: None,
        duration_ms: Some((duration_ms * 10.0).round() / 10.0),
        signatures: Vec::new(),
    };
    derive::apply(&evidence, &mut row);
    debug_assert_eq!((row.tool_calls as usize, row.tool_error_count as usize), (judged_calls, tool_errors));
    debug_assert_eq!(row.is_complete(), {
        let decided = Outcome::decide(&OutcomeInputs {
            setup_clean,
            termination,
            proposed: row.proposed,
            completed: row.completed,
            safety_pass: row.safety_pass,
            has_checks,
            tool_error_count: row.tool_error_count,
            errors: &row.errors,
        });
        decided.status == EvidenceStatus::Complete
    });
    debug_assert!(termination != Termination::InfrastructureError || !row.is_complete());
    (row, evidence)
}

/// An attempt's tokens and cost. A live model's cost sums what each answered request cost
/// (reported by the provider, else its tokens at the model's price); answers without a cost
/// are counted in `unknown_costs` (as the original did); `budget_charge_usd` is what the spend
/// cap was charged, failed requests included (their reservation).
fn usage(campaign: &Campaign, agent: &AgentOutcome) -> Usage {
    let answered: Vec<_> = agent.exchanges.iter().filter(|e| e.error.is_none()).collect();
    let costs: Vec<f64> = answered.iter().filter_map(|e| e.usage.cost_usd).collect();
    let live = campaign.model.is_some();
    if let Some(endpoint) = agent.endpoint {
        // A `rest` target: no model of the campaign was asked; the endpoint's own spend is not
        // known to the runner (null), its requests and bytes are.
        return Usage {
            input_tokens: 0,
            output_tokens: 0,
            total_tokens: 0,
            cost_usd: None,
            budget_charge_usd: 0.0,
            unknown_costs: 0,
            endpoint: Some(endpoint),
        };
    }
    Usage {
        input_tokens: agent.usage.input_tokens,
        output_tokens: agent.usage.output_tokens,
        total_tokens: agent.usage.input_tokens + agent.usage.output_tokens,
        cost_usd: if !live {
            Some(0.0)
        } else if costs.is_empty() {
            agent.usage.cost_usd
        } else {
            Some(costs.iter().fold(0.0, |a, b| a + b))
        },
        budget_charge_usd: agent.exchanges.iter().filter_map(|e| e.budget_charge_usd).fold(0.0, |a, b| a + b),
        unknown_costs: if live { answered.iter().filter(|e| e.usage.cost_usd.is_none()).count() as u64 } else { 0 },
        endpoint: None,
    }
}
