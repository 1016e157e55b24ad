//! One attempt of one trial, as phases over the trial's interfaces: launch the target
//! ([`launch`]: a tool host, and a sandbox for container targets), run setup, the agent loop,
//! the judge, verification and cleanup ([`phases`]), close the target, then build the row and
//! the evidence ([`record`]).
//!
//! A verifier or setup failure never reads as a pass or a fail: it leaves the outcome `null`
//! and the attempt incomplete. Everything the attempt met is recorded, in order.

pub mod launch;
pub mod phases;
pub mod record;
pub mod sightings;

use std::path::Path;

use elengtis_core::events::{Event, EventSink, PhaseKind};
use elengtis_core::format::Bundle;
use elengtis_core::matrix::TrialSpec;
use elengtis_core::records::{Evidence, Phase, RecordedError, Row};
use elengtis_core::refs::{Templates, Values};
use elengtis_verifiers::HttpClient;
use serde_json::json;
use tracing::Instrument as _;

use self::launch::{OpenContext, Opened};
use self::phases::PhaseContext;
use crate::sandbox::SandboxBackend;
use crate::sink::SinkServer;
use crate::toolhost::ToolHost;
use crate::toolhost::mcp::Limits;

/// Inputs of one attempt.
#[derive(Debug)]
pub struct Attempt<'a> {
    /// The campaign.
    pub bundle: &'a Bundle,
    /// Which trial.
    pub spec: &'a TrialSpec,
    /// Run id.
    pub run_id: &'a str,
    /// Fresh attempt id.
    pub attempt_id: String,
    /// File name of the evidence document.
    pub evidence_name: String,
    /// The results directory.
    pub out_dir: &'a Path,
    /// The runner's HTTP client.
    pub http: &'a HttpClient,
    /// Target deadlines.
    pub limits: Limits,
    /// The run's sandbox backend, for isolated targets (prepared once per run).
    pub sandbox: Option<&'a dyn SandboxBackend>,
    /// Cancelled on Ctrl-C/SIGTERM: the attempt skips to teardown and is not recorded.
    pub cancel: tokio_util::sync::CancellationToken,
    /// Where canary-sink records are served to checks (when any trial needs a sink).
    pub sink_server: Option<&'a SinkServer>,
    /// What the run's models share (connections, limits, the spend cap, fixtures).
    pub model: &'a std::sync::Arc<crate::model::ModelContext>,
    /// With sandboxes prepared ahead (`--prepare-ahead`): the run's session slots (`--jobs`
    /// of them). The attempt opens its target first, then waits here for a slot before its
    /// session, and gives the slot back before its teardown, which runs off the critical
    /// path. `None`: the attempt holds its place in the run from start to end.
    pub session_slots: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// Cancelled when the run stops starting trials: an attempt still waiting for a session
    /// slot is torn down and not recorded (it never started its session).
    pub stop_waiting: tokio_util::sync::CancellationToken,
    /// Where the attempt reports its phases.
    pub events: &'a dyn EventSink,
}

/// Reports an attempt's phases as [`Event::TrialPhase`] events.
#[derive(Debug, Clone, Copy)]
pub struct PhaseEvents<'a> {
    events: &'a dyn EventSink,
    run_id: &'a str,
    trial_id: &'a str,
    attempt_id: &'a str,
}

impl<'a> PhaseEvents<'a> {
    /// Phase events of this attempt, to `events`.
    pub fn new(events: &'a dyn EventSink, run_id: &'a str, trial_id: &'a str, attempt_id: &'a str) -> Self {
        PhaseEvents { events, run_id, trial_id, attempt_id }
    }

    /// The attempt enters `phase`.
    pub fn enter(&self, phase: PhaseKind) {
        self.events.emit(&Event::TrialPhase {
            run_id: self.run_id.to_owned(),
            trial_id: self.trial_id.to_owned(),
            attempt_id: self.attempt_id.to_owned(),
            phase,
        });
    }
}

/// What an attempt produced.
#[derive(Debug)]
pub struct AttemptResult {
    /// The `runs.jsonl` row.
    pub row: Row,
    /// The evidence document.
    pub evidence: Evidence,
    /// The attempt was cancelled; the target was torn down and nothing should be recorded.
    pub interrupted: bool,
}

/// Run one attempt.
pub async fn run(attempt: Attempt<'_>) -> AttemptResult {
    let span = tracing::info_span!("trial", trial_id = %attempt.spec.trial_id, attempt_id = %attempt.attempt_id);
    run_inner(attempt).instrument(span).await
}

/// The trial's values: the target's bindings for the scenario, and the runner's values.
fn trial_values(attempt: &Attempt<'_>, canary: &str, dir: Option<&Path>) -> Values {
    let campaign = &attempt.bundle.campaign.value;
    let scenario = &attempt.bundle.scenarios[attempt.spec.scenario].value;
    let target = &campaign.targets[attempt.spec.target];
    let mut values = Values {
        bindings: target.bindings.get(&scenario.id).cloned().unwrap_or_default(),
        // Free-form values of the scenario (actions, rules, tools) follow its schema_version.
        templates: Templates::for_version(scenario.schema_version),
        ..Values::default()
    };
    values.runner.insert("canary".into(), json!(canary));
    if let Some(dir) = dir {
        values.runner.insert("trial_dir".into(), json!(dir.display().to_string()));
        values.runner.insert("collector".into(), json!(dir.join("collector.jsonl").display().to_string()));
    }
    values.runner.insert("evidence_dir".into(), json!(attempt.out_dir.display().to_string()));
    values.runner.insert("trial_id".into(), json!(attempt.spec.trial_id));
    values.runner.insert("attempt_id".into(), json!(attempt.attempt_id));
    values
}

async fn run_inner(attempt: Attempt<'_>) -> AttemptResult {
    let begun = std::time::Instant::now();
    let began_us = crate::clock::now_us();
    let bundle = attempt.bundle;
    let campaign = &bundle.campaign.value;
    let target = &campaign.targets[attempt.spec.target];
    let scenario = &bundle.scenarios[attempt.spec.scenario].value;
    let canary = format!("ELENGTIS-{}", uuid::Uuid::new_v4());
    let mut errors: Vec<RecordedError> = Vec::new();

    let phase_events = PhaseEvents::new(attempt.events, attempt.run_id, &attempt.spec.trial_id, &attempt.attempt_id);
    // Creating and removing a directory can take milliseconds (a disk-backed temporary
    // directory, a file system that discards freed blocks at once): on a blocking thread, so
    // the trials beside this one go on meanwhile.
    let trial_dir = tokio::task::spawn_blocking(|| tempfile::Builder::new().prefix("elengtis-trial-").tempdir().ok())
        .await
        .ok()
        .flatten();
    let mut values = trial_values(&attempt, &canary, trial_dir.as_ref().map(tempfile::TempDir::path));
    if trial_dir.is_none() {
        errors.push(RecordedError::new(Phase::ConnectionOrAgent, None, "failed to create the trial directory"));
    }

    let controls = target.control_launch();
    let opened = if trial_dir.is_none() {
        None
    } else {
        phase_events.enter(PhaseKind::Launch);
        let ctx = OpenContext {
            run_id: attempt.run_id,
            trial_id: &attempt.spec.trial_id,
            attempt_id: &attempt.attempt_id,
            sandbox: attempt.sandbox,
            needs_sink: launch::needs_sink(bundle, attempt.spec.target, attempt.spec.scenario),
            needs_gateway: launch::needs_gateway(bundle, attempt.spec.target, attempt.spec.scenario),
            sink_server: attempt.sink_server,
            egress_proxy: target.egress_proxy.as_ref(),
            target_id: &target.id,
            campaign_dir: bundle.campaign.path.parent().unwrap_or(Path::new(".")),
            trial_dir: trial_dir.as_ref().map(tempfile::TempDir::path),
            results_dir: Some(attempt.out_dir),
            args_templates: Templates::for_version(campaign.schema_version),
            controls: &controls,
        };
        tokio::select! {
            biased;
            () = attempt.cancel.cancelled() => None,
            opened = launch::open_target(ctx, &target.transport, &mut values, attempt.limits) => Some(opened),
        }
    };
    let mut interrupted_at_open = opened.is_none() && trial_dir.is_some();
    // Prepared ahead: the target is open; its session waits for a slot.
    let mut waited = std::time::Duration::ZERO;
    let mut slot = None;
    if let (Some(slots), false) = (&attempt.session_slots, interrupted_at_open) {
        let wait = std::time::Instant::now();
        slot = tokio::select! {
            biased;
            () = attempt.cancel.cancelled() => None,
            () = attempt.stop_waiting.cancelled() => None,
            permit = slots.clone().acquire_owned() => permit.ok(),
        };
        waited = wait.elapsed();
        interrupted_at_open = slot.is_none();
    }
    let prepared_ahead = attempt.session_slots.is_some();
    let session_began = prepared_ahead.then(crate::results::now_rfc3339);
    if let Some(opened) = &opened {
        launch::reached_initialize(opened);
        if let Err(e) = &opened.session {
            errors.push(RecordedError::new(Phase::ConnectionOrAgent, None, e.clone()));
        }
    }
    let snapshots = attempt.out_dir.join("evidence").join(format!(
        "{}.{}.snapshots",
        attempt.spec.trial_id,
        attempt.attempt_id.chars().take(8).collect::<String>()
    ));
    let phases = if interrupted_at_open {
        None
    } else {
        let ctx = PhaseContext {
            campaign,
            scenario,
            host: opened
                .as_ref()
                .and_then(|o| o.session.as_ref().ok())
                .and_then(Option::as_ref)
                .map(|s| s as &dyn ToolHost),
            rest: match (&target.transport, opened.as_ref().filter(|o| o.session.is_ok())) {
                (elengtis_core::format::campaign::Transport::Rest(rest), Some(opened)) => {
                    Some((target.id.as_str(), rest, opened.rest_url().unwrap_or(&rest.url)))
                }
                _ => None,
            },
            shim: target.control_shim.as_ref(),
            sandbox: opened.as_ref().and_then(Opened::sandbox),
            http: attempt.http,
            snapshots: &snapshots,
            model: attempt.model,
            trial_index: attempt.spec.index,
            events: phase_events,
        };
        tokio::select! {
            biased;
            () = attempt.cancel.cancelled() => None,
            phases = phases::run(ctx, &mut values, &mut errors) => Some(phases),
        }
    };
    let interrupted = phases.is_none();
    let phases = phases.unwrap_or_default();
    // The session is over: its slot goes to the next prepared trial while this one tears down.
    drop(slot);
    let session_ended = prepared_ahead.then(crate::results::now_rfc3339);
    crate::crashpoint::reach(crate::crashpoint::CrashPoint::Teardown);

    // Close the target.
    let mut target_execution = json!({});
    if let Some(opened) = opened {
        phase_events.enter(PhaseKind::Teardown);
        let (execution, _closed, close_errors) = launch::close_target(opened).await;
        target_execution = execution;
        errors.extend(close_errors.into_iter().map(|e| RecordedError::new(Phase::TargetCleanup, None, e)));
    }
    if let (Some(_), Some(sandbox)) = (target.transport.container(), attempt.sandbox) {
        target_execution["engine_gate"] = sandbox.run_facts();
    }
    if prepared_ahead && target_execution.is_object() {
        // Time the prepared target waited for a session slot (not part of the trial's
        // duration), and when it held one.
        target_execution["prepared_ahead"] = json!({
            "wait_ms": waited.as_secs_f64() * 1000.0,
            "session_began": session_began,
            "session_ended": session_ended,
        });
    }
    if let Some(dir) = trial_dir {
        let closed = tokio::task::spawn_blocking(move || dir.close()).await;
        if let Some(e) = match closed {
            Ok(result) => result.err().map(|e| e.to_string()),
            Err(e) => Some(e.to_string()),
        } {
            errors.push(RecordedError::new(
                Phase::TargetCleanup,
                None,
                format!("failed to remove the trial directory: {e}"),
            ));
        }
    }
    errors.extend(phases.agent.tool_errors.iter().map(RecordedError::tool));
    // A call the target never answered (it crashed, closed the session or hung past the
    // call's deadline) is not a tool error the model met: the exercise did not play out, so
    // the attempt is an infrastructure failure, whatever the model did next.
    errors.extend(phases.agent.tool_errors.iter().filter(|e| e.transport).map(|e| {
        RecordedError::new(
            Phase::ConnectionOrAgent,
            None,
            format!("the target failed during the exercise: {} had no answer ({})", e.call_id, e.detail),
        )
    }));

    let who = record::Identity {
        run_id: attempt.run_id,
        trial_id: &attempt.spec.trial_id,
        attempt_id: &attempt.attempt_id,
        target: &target.id,
        scenario: &scenario.id,
        trial_index: attempt.spec.index,
        canary: &canary,
        evidence: &attempt.evidence_name,
        began_us,
    };
    let has_checks = !scenario.verify.checks.is_empty();
    let duration_ms = begun.elapsed().saturating_sub(waited).as_secs_f64() * 1000.0;
    let (row, evidence) = record::build(who, campaign, has_checks, phases, target_execution, errors, duration_ms);
    tracing::debug!(termination = %row.termination, complete = row.is_complete(), "attempt finished");
    AttemptResult { row, evidence, interrupted }
}
