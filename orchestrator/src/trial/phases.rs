//! The phases between opening and closing the target, with the original's attempt
//! semantics: setup stops at its first error; only a clean setup lets the model run; safety
//! is always judged; proposals and verification are judged unless the model failed or ran
//! out of budget; cleanup always runs, best effort.

use std::collections::BTreeMap;
use std::path::Path;

use elengtis_core::agent::{AgentOutcome, ModelErrorKind, Termination};
use elengtis_core::events::PhaseKind;
use elengtis_core::format::campaign::{Campaign, ControlShim, RestTransport};
use elengtis_core::format::scenario::{Action, Rule, Scenario, ToolSelection, VerifyMode};
use elengtis_core::judge::{self, Patterns, ProposalEvaluation, ResolvedRule, SafetyEvaluation};
use elengtis_core::records::{CheckRecord, Phase, RecordedError, ShimRecord, Sighting, Verification};
use elengtis_core::refs::{self, Values};
use elengtis_verifiers::HttpClient;
use serde_json::Value;

use super::sightings::Sightings;
use crate::actions::{self, ActionContext};
use crate::agent::rest::RestAgent;
use crate::agent::{self, AgentTask};
use crate::crashpoint::CrashPoint;
use crate::model;
use crate::sandbox::TrialSandbox;
use crate::toolhost::shim::ShimHost;
use crate::toolhost::{ToolHost, ToolInfo};

/// What the phases produced.
#[derive(Debug, Default)]
pub struct Phases {
    /// Setup action records.
    pub setup_records: Vec<Value>,
    /// Every setup action succeeded.
    pub setup_clean: bool,
    /// How the agent phase ended (`infrastructure_error` when it could not run).
    pub termination: Option<Termination>,
    /// What the agent loop observed.
    pub agent: AgentOutcome,
    /// The tools offered, as listed.
    pub offered_tools: Vec<Value>,
    /// The safety judgement.
    pub safety: Option<SafetyEvaluation>,
    /// The proposal judgement.
    pub proposal: Option<ProposalEvaluation>,
    /// The verification.
    pub verification: Option<Verification>,
    /// Cleanup action records.
    pub cleanup_records: Vec<Value>,
    /// What the control shim classified and decided (targets with a `control_shim`).
    pub shim: Option<ShimRecord>,
    /// The verifier's sightings during the exercise (campaigns with `sightings`).
    pub sightings: Vec<Sighting>,
    /// When the agent loop began ([`crate::clock`]).
    pub exercise_us: Option<u64>,
    /// When the verification's checks began.
    pub verified_us: Option<u64>,
}

impl Phases {
    /// How the agent phase ended.
    pub fn termination(&self) -> Termination {
        self.termination.unwrap_or(Termination::InfrastructureError)
    }

    /// The verified outcome.
    pub fn completed(&self) -> Option<bool> {
        self.verification.as_ref().and_then(|v| v.completed)
    }
}

/// Where the phases act.
#[derive(Debug, Clone, Copy)]
pub struct PhaseContext<'a> {
    /// The campaign.
    pub campaign: &'a Campaign,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The target's tools (absent when the target could not be opened, and for a `rest`
    /// target, which has none).
    pub host: Option<&'a dyn ToolHost>,
    /// A `rest` target that was opened (its id, transport, and the URL its messages go to: its
    /// `url`, or its container's address): the exercise sends its user prompt to the endpoint
    /// instead of running an agent loop.
    pub rest: Option<(&'a str, &'a RestTransport, &'a str)>,
    /// The target's control shim: wraps `host` for the agent loop only (setup, verify and
    /// cleanup actions bypass it).
    pub shim: Option<&'a ControlShim>,
    /// The target's sandbox (isolated targets).
    pub sandbox: Option<&'a dyn TrialSandbox>,
    /// The runner's HTTP client.
    pub http: &'a HttpClient,
    /// Where snapshot files are kept.
    pub snapshots: &'a Path,
    /// What the run's models share.
    pub model: &'a std::sync::Arc<model::ModelContext>,
    /// The trial's index (which recorded answers a replay uses).
    pub trial_index: u32,
    /// Where each phase is reported as it begins.
    pub events: super::PhaseEvents<'a>,
}

/// Setup, exercise, judge, verify and cleanup.
pub async fn run(ctx: PhaseContext<'_>, values: &mut Values, errors: &mut Vec<RecordedError>) -> Phases {
    let PhaseContext { campaign, scenario, host, .. } = ctx;
    let actx = ActionContext { host, http: ctx.http, sandbox: ctx.sandbox, snapshots: Some(ctx.snapshots) };
    let mut out = Phases { setup_clean: host.is_some() || ctx.rest.is_some(), ..Phases::default() };

    // Setup.
    if out.setup_clean {
        ctx.events.enter(PhaseKind::Setup);
        for action in &scenario.setup {
            let outcome = actions::run(action, values, actx).await;
            out.setup_records.push(outcome.record);
            if let Some(e) = outcome.error {
                errors.push(RecordedError::new(Phase::Setup, Some(action.id()), e));
                out.setup_clean = false;
                break;
            }
        }
    }

    // Exercise.
    if out.setup_clean {
        if campaign.model_free {
            out.termination = Some(Termination::ModelFree);
        } else if let Some((target, rest, url)) = ctx.rest {
            ctx.events.enter(PhaseKind::Exercise);
            let sightings = campaign
                .sightings
                .as_ref()
                .filter(|_| !scenario.verify.checks.is_empty())
                .map(|plan| Sightings::new(plan, scenario, values, actx));
            let exercised = exercise_rest(ctx, (target, rest, url), values, sightings.as_ref()).await;
            if let Some(sightings) = sightings {
                out.sightings = sightings.into_taken().await;
            }
            match exercised {
                Ok((outcome, began)) => {
                    out.exercise_us = Some(began);
                    out.termination = outcome.termination;
                    if let Some(detail) = &outcome.provider_error {
                        errors.push(RecordedError::new(Phase::Model, None, detail.clone()));
                    }
                    out.agent = outcome;
                }
                Err(e) => errors.push(RecordedError::new(Phase::ConnectionOrAgent, None, e)),
            }
        } else if let Some(host) = host {
            ctx.events.enter(PhaseKind::Exercise);
            let shim = ctx.shim.map(|config| ShimHost::new(host, config.clone()));
            let agent_host: &dyn ToolHost = match &shim {
                Some(shim) => shim,
                None => host,
            };
            // Sightings go around the shim: a call it refused is sighted too. Their checks
            // reach the target itself, as the verification's do.
            let sightings = campaign
                .sightings
                .as_ref()
                .filter(|_| !scenario.verify.checks.is_empty())
                .map(|plan| Sightings::new(plan, scenario, values, actx));
            let sighted = sightings.as_ref().map(|s| s.host(agent_host));
            let loop_host: &dyn ToolHost = match &sighted {
                Some(sighted) => sighted,
                None => agent_host,
            };
            let exercised = exercise(ctx, loop_host, values, sightings.as_ref()).await;
            if let Some(sightings) = sightings {
                out.sightings = sightings.into_taken().await;
            }
            out.shim = shim.map(|s| s.record());
            match exercised {
                Ok((outcome, tools, began)) => {
                    out.exercise_us = Some(began);
                    out.termination = termination_of(&outcome);
                    if let Some(detail) = &outcome.provider_error {
                        errors.push(RecordedError::new(Phase::Model, None, detail.clone()));
                    }
                    out.offered_tools = tools;
                    out.agent = outcome;
                }
                Err(e) => errors.push(RecordedError::new(Phase::ConnectionOrAgent, None, e)),
            }
        }
    }

    // Judge.
    let termination = out.termination();
    let mut patterns = Patterns::default();
    if out.setup_clean && termination != Termination::InfrastructureError {
        ctx.events.enter(PhaseKind::Judge);
        out.safety = resolve_rules(&scenario.safety_rules, values, errors)
            .map(|rules| judge::evaluate_safety(&rules, &out.agent.calls, &mut patterns));
    }
    let judged = out.setup_clean
        && !matches!(
            termination,
            Termination::ProviderError | Termination::BudgetExhausted | Termination::InfrastructureError
        );
    if judged {
        out.proposal = resolve_rules(&scenario.proposal_rules, values, errors)
            .map(|rules| judge::evaluate_proposals(&rules, &out.agent.calls, &mut patterns));
    }
    // A call a rule could not judge leaves its outcome unknown (null); the row says why.
    let unjudged = out.safety.iter().flat_map(|s| &s.unresolved).chain(out.proposal.iter().flat_map(|p| &p.unresolved));
    errors.extend(unjudged.map(|why| RecordedError::new(Phase::Evaluation, None, why.clone())));

    // Verify.
    if judged {
        ctx.events.enter(PhaseKind::Verify);
        crate::crashpoint::reach(CrashPoint::Verify);
        out.verified_us = Some(crate::clock::now_us());
        let (verification, verify_errors) = check_all(scenario, values, actx, &mut patterns).await;
        errors.extend(verify_errors);
        out.verification = Some(verification);
    }

    // Cleanup: always, best effort.
    ctx.events.enter(PhaseKind::Cleanup);
    for action in &scenario.cleanup {
        let outcome = actions::run(action, values, actx).await;
        out.cleanup_records.push(outcome.record);
        if let Some(e) = outcome.error {
            errors.push(RecordedError::new(Phase::Cleanup, Some(action.id()), e));
        }
    }
    out
}

/// How the agent phase ended: as the loop says, except that a spend-cap stop is the budget
/// running out, as in the original (whose `BudgetExceeded` ends the trial as
/// `budget_exhausted`), not a provider failure.
fn termination_of(outcome: &AgentOutcome) -> Option<Termination> {
    if outcome.provider_error_kind == Some(ModelErrorKind::Budget) {
        return Some(Termination::BudgetExhausted);
    }
    outcome.termination
}

fn resolve_rules(rules: &[Rule], values: &Values, errors: &mut Vec<RecordedError>) -> Option<Vec<ResolvedRule>> {
    let mut out = Vec::new();
    for rule in rules {
        match judge::resolve_rule(rule, values) {
            Ok(r) => out.push(r),
            Err(e) => {
                errors.push(RecordedError::new(Phase::Evaluation, None, format!("rule `{}`: {e}", rule.id)));
                return None;
            }
        }
    }
    Some(out)
}

/// Whom a check's answer comes from (its `trusts`): the runner itself (`runner`) only when it
/// reads the runner's own records — a snapshot taken through the sandbox, a file read out of
/// it, or the canary sink's records at `{runner: sink_requests}`; any other answer comes from
/// someone else: the audited server (`mcp_tool`, or an `http_request` to its own API) or a
/// party beside it (`target`). Decided by who answers, not by the action's type.
fn trusts(action: &Action, values: &Values) -> &'static str {
    match action {
        Action::McpTool(_) => "target",
        Action::HttpRequest(h) => {
            let own = values.runner.get("sink_requests").and_then(serde_json::Value::as_str);
            let url = values.resolve_text(&h.url).ok().and_then(|u| u.as_str().map(str::to_owned));
            match (own, url) {
                (Some(own), Some(url)) if url == own || url.starts_with(&format!("{own}?")) => "runner",
                _ => "target",
            }
        }
        _ => "runner",
    }
}

/// Run the scenario's verify checks; the verification and the errors it met. The verification
/// phase records both; a sighting keeps only what the checks read.
pub(crate) async fn check_all(
    scenario: &Scenario,
    values: &mut Values,
    actx: ActionContext<'_>,
    patterns: &mut Patterns,
) -> (Verification, Vec<RecordedError>) {
    let mut errors = Vec::new();
    let mut checks = Vec::new();
    let mut results = Vec::new();
    let mut verification_error = false;
    for check in &scenario.verify.checks {
        let trusts = trusts(&check.action, values);
        let outcome = actions::run_for(&check.action, &check.assertions, values, actx).await;
        let mut record = CheckRecord {
            id: check.id.clone(),
            verifier: check.action.kind().to_owned(),
            trusts: trusts.to_owned(),
            action: outcome.record,
            assertions: None,
            passed: None,
        };
        if let Some(e) = &outcome.error {
            errors.push(RecordedError::new(Phase::Verification, Some(check.action.id()), e.clone()));
            verification_error = true;
            checks.push(record);
            break;
        }
        let response = outcome.response.unwrap_or(Value::Null);
        match judge::resolve_predicates(&check.assertions, values) {
            Ok(assertions) => {
                let decision = patterns.decide_all(&response, &assertions);
                record.assertions = Some(serde_json::to_value(&decision.records).unwrap_or(Value::Null));
                record.passed = decision.passed;
                match (decision.passed, decision.undecided) {
                    (Some(passed), _) => results.push(passed),
                    (None, why) => {
                        // Undecided is not failed: the outcome is unknown.
                        errors.push(RecordedError::new(
                            Phase::Verification,
                            Some(check.action.id()),
                            format!("check `{}`: {}", check.id, why.unwrap_or_default()),
                        ));
                        verification_error = true;
                    }
                }
            }
            Err(e) => {
                errors.push(RecordedError::new(
                    Phase::Verification,
                    Some(check.action.id()),
                    format!("check `{}`: {e}", check.id),
                ));
                verification_error = true;
            }
        }
        checks.push(record);
    }
    let completed = judge::completed(&results, scenario.verify.mode == VerifyMode::Any, verification_error);
    let decided_by = elengtis_core::records::decided_by(scenario.verify.mode, &checks, completed);
    (Verification { mode: scenario.verify.mode, checks, completed, decided_by }, errors)
}

/// The exercise of a `rest` target: render the user prompt and send it to the endpoint, which is
/// the agent (no tools are offered, no loop runs and the campaign's model is not asked; the
/// system prompt is not sent, which the target's lifecycle record states). A container endpoint
/// gets a client of its own (no proxy from the environment, no connection kept for another
/// trial's container).
async fn exercise_rest(
    ctx: PhaseContext<'_>,
    (target, rest, url): (&str, &RestTransport, &str),
    values: &Values,
    sightings: Option<&Sightings<'_>>,
) -> Result<(AgentOutcome, u64), String> {
    let user = refs::render_template(&ctx.scenario.exercise.user, &values.flat())
        .map_err(|e| format!("exercise.user: {e}"))?;
    if let Some(sightings) = sightings {
        sightings.before_exercise().await;
    }
    let began = crate::clock::now_us();
    let http = match &rest.container {
        Some(_) => crate::model::http::HttpClient::local()?,
        None => ctx.model.http.clone(),
    };
    let mut agent = RestAgent::new(target, rest, http).at(url.to_owned());
    Ok((agent.exercise(&user).await, began))
}

/// Offer the tools, render the prompts and run the agent loop. A request the spend cap
/// stopped ends the exercise as `budget_exhausted` (failure class `budget_exceeded`), as the
/// original recorded it.
async fn exercise(
    ctx: PhaseContext<'_>,
    host: &dyn ToolHost,
    values: &Values,
    sightings: Option<&Sightings<'_>>,
) -> Result<(AgentOutcome, Vec<Value>, u64), String> {
    let PhaseContext { campaign, scenario, .. } = ctx;
    let listed = host.list_tools().await.map_err(|e| e.to_string())?;
    let offered: Vec<ToolInfo> = match &scenario.exercise.tools {
        ToolSelection::All => listed,
        ToolSelection::List(items) => {
            let by_name: BTreeMap<&str, &ToolInfo> = listed.iter().map(|t| (t.name.as_str(), t)).collect();
            let mut offered = Vec::new();
            let mut missing = Vec::new();
            for item in items {
                let name = values.resolve(item).map_err(|e| format!("exercise.tools: {e}"))?;
                let name = refs::python_str(&name);
                match by_name.get(name.as_str()) {
                    Some(tool) => offered.push((*tool).clone()),
                    None => missing.push(format!("'{name}'")),
                }
            }
            if !missing.is_empty() {
                missing.sort();
                return Err(format!("target is missing exercise tools [{}]", missing.join(", ")));
            }
            offered
        }
    };
    let flat = values.flat();
    let system =
        refs::render_template(&scenario.exercise.system, &flat).map_err(|e| format!("exercise.system: {e}"))?;
    let user = refs::render_template(&scenario.exercise.user, &flat).map_err(|e| format!("exercise.user: {e}"))?;
    let agent_loop = agent::for_kind(campaign.engine)?;
    let mut model = model::for_campaign(campaign, values.clone(), ctx.trial_index, ctx.model).map_err(|e| e.detail)?;
    let task = AgentTask { system: &system, user: &user, tools: &offered, step_budget: campaign.step_budget };
    // What the verifier sees before the model does anything (the baseline of a payload in
    // the user's message or a tool description).
    if let Some(sightings) = sightings {
        sightings.before_exercise().await;
    }
    let began = crate::clock::now_us();
    let mut outcome = agent_loop.run(model.as_mut(), host, task).await;
    if let Some(reason) = model.budget_stop() {
        outcome.termination = Some(Termination::BudgetExhausted);
        outcome.provider_error = Some(reason);
    }
    let tools = offered.iter().map(|t| t.listing.clone()).collect();
    Ok((outcome, tools, began))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_list_that_never_ran_reads_as_an_infrastructure_error() {
        let phases = Phases::default();
        assert_eq!(phases.termination(), Termination::InfrastructureError);
        assert_eq!(phases.completed(), None);
    }

    #[test]
    fn a_spend_cap_stop_ends_the_trial_as_budget_exhausted() {
        let failed = |kind| AgentOutcome {
            termination: Some(Termination::ProviderError),
            provider_error: Some("stopped".into()),
            provider_error_kind: Some(kind),
            ..AgentOutcome::default()
        };
        assert_eq!(termination_of(&failed(ModelErrorKind::Budget)), Some(Termination::BudgetExhausted));
        assert_eq!(termination_of(&failed(ModelErrorKind::Status)), Some(Termination::ProviderError));
        let stopped = AgentOutcome { termination: Some(Termination::ModelStop), ..AgentOutcome::default() };
        assert_eq!(termination_of(&stopped), Some(Termination::ModelStop));
    }
}
