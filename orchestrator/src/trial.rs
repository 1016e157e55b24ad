//! One attempt of one trial: open the target, setup, exercise, judge, verify, cleanup,
//! close — then the row and the evidence document.
//!
//! The phases follow the original tool's attempt semantics: setup stops at its first
//! error; only a clean setup lets the model run; safety is always judged; proposals and
//! verification are judged unless the model failed or ran out of budget; cleanup always
//! runs, best effort; the target is always closed. A verifier or setup failure never reads
//! as a pass or a fail: it leaves the outcome `null` and the attempt incomplete.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use elengtis_verifiers::HttpClient;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use crate::actions::{self, ActionContext};
use crate::engine::{self, AgentOutcome, ScriptedModel, Termination};
use crate::sandbox::SandboxContext;
use crate::sandbox::container::{self, ContainerSpec, Endpoint, Mode, TrialContainer};
use crate::sink::{SinkHandle, SinkServer};
use crate::target::{self, CloseReport, HttpLaunch, Limits, Session, StdioLaunch};
use elengtis_core::format::Bundle;
use elengtis_core::format::campaign::Transport;
use elengtis_core::format::scenario::{ToolSelection, VerifyMode};
use elengtis_core::format::script::Script;
use elengtis_core::judge::{self, Patterns};
use elengtis_core::matrix::TrialSpec;
use elengtis_core::refs::{self, Values};

/// Version of the row and evidence formats written by this build.
pub const RESULTS_SCHEMA_VERSION: u64 = 1;
/// Version of the metric definitions (proposed, completed, …) of this build.
pub const METRICS_VERSION: u64 = 1;

/// Error phases that make an attempt incomplete.
const FATAL_PHASES: &[&str] = &["setup", "verification", "cleanup", "target_cleanup", "connection_or_agent"];

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
    /// Engine and images for isolated targets (resolved once per run).
    pub sandbox: Option<&'a SandboxContext>,
    /// Cancelled on Ctrl-C/SIGTERM: the attempt skips to teardown and is not recorded.
    pub cancel: tokio_util::sync::CancellationToken,
    /// Where canary-sink records are served to checks (when any trial needs a sink).
    pub sink_server: Option<&'a SinkServer>,
}

/// Whether a target × scenario pair needs a canary sink: something in the scenario, the
/// target's command line or the campaign's script names `sink_url` or `sink_requests`.
pub fn needs_sink(bundle: &Bundle, target: usize, scenario: usize) -> bool {
    let campaign = &bundle.campaign.value;
    let scenario = &bundle.scenarios[scenario].value;
    let parts = [
        serde_json::to_value(scenario).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.targets[target].transport).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.script).unwrap_or(Value::Null),
    ];
    crate::sink::uses_sink(&parts.iter().collect::<Vec<_>>(), &[&scenario.exercise.system, &scenario.exercise.user])
}

/// What an attempt produced.
#[derive(Debug)]
pub struct AttemptResult {
    /// The `runs.jsonl` row.
    pub row: Value,
    /// The evidence document.
    pub evidence: Value,
    /// The attempt was cancelled; the target was torn down and nothing should be recorded.
    pub interrupted: bool,
}

fn error(phase: &str, action_id: Option<&str>, detail: impl Into<String>) -> Value {
    json!({"phase": phase, "action_id": action_id, "detail": detail.into()})
}

/// Run one attempt.
pub async fn run(attempt: Attempt<'_>) -> AttemptResult {
    let span = tracing::info_span!("trial", trial_id = %attempt.spec.trial_id, attempt_id = %attempt.attempt_id);
    run_inner(attempt).instrument(span).await
}

struct TrialDir(Option<tempfile::TempDir>);

/// Who is opening a target (labels for containers).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenContext<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) trial_id: &'a str,
    pub(crate) attempt_id: &'a str,
    pub(crate) sandbox: Option<&'a SandboxContext>,
    /// Start a canary sink for this trial (the scenario or target uses `sink_*` values).
    pub(crate) needs_sink: bool,
    /// Where sink records are served to checks.
    pub(crate) sink_server: Option<&'a SinkServer>,
}

/// A target as opened for one attempt.
pub(crate) struct Opened {
    pub(crate) session: Result<Session, String>,
    pub(crate) execution: Value,
    pub(crate) closed: CloseReport,
    pub(crate) container: Option<TrialContainer>,
    pub(crate) sink: Option<(Arc<SinkHandle>, Option<&'static str>)>,
    pub(crate) attempt_id: String,
    pub(crate) sink_server: Option<SinkServer>,
}

/// Close the session and tear the sandbox down; the target's execution record and the
/// teardown errors.
pub(crate) async fn close_target(opened: Opened) -> (Value, CloseReport, Vec<String>) {
    let Opened { session, execution: mut target_execution, mut closed, container, sink, attempt_id, sink_server } =
        opened;
    let mut open_stderr = None;
    if let Ok(session) = session {
        target_execution["server"] = session.server_info().clone();
        if container.is_some() {
            (closed, open_stderr) = session.close_in_container().await;
        } else {
            closed = session.close().await;
        }
    }
    // The sink is closed before its container goes: end of stdin lets it flush the records
    // of requests that came after the last check.
    let sink = match sink {
        Some((handle, placement)) => {
            if let Some(server) = &sink_server {
                server.unregister(&attempt_id);
            }
            let url = handle.url().to_owned();
            let requests = match Arc::try_unwrap(handle) {
                Ok(handle) => handle.close().await,
                Err(shared) => shared.requests().await.unwrap_or_default(),
            };
            Some(json!({"url": url, "placement": placement.unwrap_or("process"), "requests": requests}))
        }
        None => None,
    };
    let mut cleanup_errors = Vec::new();
    if let Some(container) = container {
        let (record, errors) = container.teardown().await;
        let server = target_execution["server"].take();
        target_execution = record;
        if !server.is_null() {
            target_execution["server"] = server;
        }
        cleanup_errors = errors;
    }
    // A server that ignored the end of its stdin kept its stderr open until the container
    // was removed; what it wrote is collected now.
    if let Some(handle) = open_stderr {
        match crate::target::finish_stderr(handle, std::time::Duration::from_secs(3)).await {
            Ok(captured) => closed.stderr = Some(captured),
            Err(e) => closed.errors.push(e),
        }
    }
    let mut errors = closed.errors.clone();
    errors.extend(cleanup_errors);
    target_execution["close"] = serde_json::to_value(&closed).unwrap_or(Value::Null);
    if let Some(sink) = sink {
        match target_execution.get_mut("sink") {
            Some(Value::Object(existing)) => {
                if let Value::Object(extra) = sink {
                    existing.extend(extra);
                }
            }
            _ => target_execution["sink"] = sink,
        }
    }
    (target_execution, closed, errors)
}

impl Opened {
    fn failed(error: String, execution: Value) -> Opened {
        Opened {
            session: Err(error),
            execution,
            closed: CloseReport::default(),
            container: None,
            sink: None,
            attempt_id: String::new(),
            sink_server: None,
        }
    }

    fn with_session(session: Result<Session, String>, execution: Value, closed: CloseReport) -> Opened {
        Opened { session, execution, closed, ..Opened::failed(String::new(), Value::Null) }
    }

    /// The target's container, for container actions (SQLite snapshots).
    pub(crate) fn container(&self) -> Option<&TrialContainer> {
        self.container.as_ref()
    }
}

/// Start the trial's canary sink outside Docker, put its values in `values`.
async fn process_sink(attempt: &OpenContext<'_>, values: &mut Values) -> Result<Arc<SinkHandle>, String> {
    let handle = Arc::new(SinkHandle::spawn_process().await?);
    register_sink(attempt, &handle, values);
    Ok(handle)
}

fn register_sink(attempt: &OpenContext<'_>, handle: &Arc<SinkHandle>, values: &mut Values) {
    values.runner.insert("sink_url".into(), json!(handle.url()));
    if let Some(server) = attempt.sink_server {
        values.runner.insert("sink_requests".into(), json!(server.register(attempt.attempt_id, handle.clone())));
    }
}

/// Resolve command-line items (references rendered as Python's `str()`).
fn command_line(items: &[Value], values: &Values) -> Result<Vec<String>, String> {
    items
        .iter()
        .map(|item| values.resolve(item).map(|v| refs::python_str(&v)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("failed to resolve the target's command line: {e}"))
}

fn env_values(
    env: &std::collections::BTreeMap<String, elengtis_core::format::campaign::EnvRef>,
) -> Result<Vec<(String, String)>, String> {
    env.iter()
        .map(|(name, r)| {
            std::env::var(&r.env)
                .map(|v| (name.clone(), v))
                .map_err(|_| format!("environment variable {} is not set", r.env))
        })
        .collect()
}

pub(crate) async fn open_target(
    attempt: OpenContext<'_>,
    transport: &Transport,
    values: &mut Values,
    limits: Limits,
) -> Opened {
    let mut opened = open_transport(&attempt, transport, values, limits).await;
    opened.attempt_id = attempt.attempt_id.to_owned();
    opened.sink_server = attempt.sink_server.cloned();
    opened
}

async fn open_transport(
    attempt: &OpenContext<'_>,
    transport: &Transport,
    values: &mut Values,
    limits: Limits,
) -> Opened {
    let mut sink = None;
    if attempt.needs_sink && !matches!(transport, Transport::IsolatedContainer(_)) {
        match process_sink(attempt, values).await {
            Ok(handle) => sink = Some((handle, Some("process"))),
            Err(e) => return Opened::failed(format!("failed to start the canary sink: {e}"), json!({})),
        }
    }
    let mut opened = open_inner(attempt, transport, values, limits).await;
    if sink.is_some() {
        opened.sink = sink;
    }
    opened
}

async fn open_inner(attempt: &OpenContext<'_>, transport: &Transport, values: &mut Values, limits: Limits) -> Opened {
    match transport {
        Transport::Stdio(stdio) => {
            let args = match command_line(&stdio.args, values) {
                Ok(args) => args,
                Err(e) => return Opened::failed(e, json!({})),
            };
            let env = match env_values(&stdio.env) {
                Ok(env) => env,
                Err(e) => return Opened::failed(e, json!({})),
            };
            let execution = json!({"isolation": "none", "session": "fresh_process", "reset_asserted": true, "command": stdio.command, "args": args});
            let launch = StdioLaunch { command: stdio.command.clone(), args, env };
            match target::open_stdio(&launch, limits).await {
                Ok(session) => Opened::with_session(Ok(session), execution, CloseReport::default()),
                Err(failure) => Opened::with_session(Err(failure.error.to_string()), execution, failure.closed),
            }
        }
        Transport::StreamableHttp(http) => {
            let execution = json!({"isolation": "externally_managed", "session": "fresh_client", "reset_asserted": false, "egress_controlled": false, "url": http.url});
            let headers = match actions::env_headers(&http.headers) {
                Ok(h) => h,
                Err(e) => return Opened::failed(e, execution),
            };
            let launch = HttpLaunch { url: http.url.clone(), headers, resolve: None };
            match target::open_http(&launch, limits).await {
                Ok(session) => Opened::with_session(Ok(session), execution, CloseReport::default()),
                Err(failure) => Opened::with_session(Err(failure.error.to_string()), execution, failure.closed),
            }
        }
        Transport::IsolatedContainer(c) => {
            let base = json!({"isolation": "isolated_container", "image": {"reference": c.image}});
            let Some(sandbox) = attempt.sandbox else {
                return Opened::failed("no Docker engine connection was prepared for this run".into(), base);
            };
            let Some(image) = sandbox.images.get(&c.image) else {
                return Opened::failed(format!("image `{}` was not resolved before the run", c.image), base);
            };
            let env = match env_values(&c.env) {
                Ok(env) => env,
                Err(e) => return Opened::failed(e, base),
            };
            let mode = match c.mcp_transport {
                elengtis_core::format::campaign::ContainerMcp::Stdio => Mode::Stdio,
                elengtis_core::format::campaign::ContainerMcp::StreamableHttp => Mode::Http {
                    port: c.container_port.and_then(|p| u16::try_from(p).ok()).unwrap_or_default(),
                    path: c.path.clone(),
                },
            };
            let startup = std::time::Duration::from_secs(c.startup_timeout_seconds.into());
            let relay = crate::sandbox::relay_image_for(
                c.mcp_transport == elengtis_core::format::campaign::ContainerMcp::StreamableHttp,
                c.relay_image.as_deref(),
            );
            let relay = match relay.map(|r| sandbox.images.get(&r).ok_or(r)) {
                None => None,
                Some(Ok(image)) => Some(image),
                Some(Err(r)) => {
                    return Opened::failed(format!("relay image `{r}` was not resolved before the run"), base);
                }
            };
            // The runner routes to the trial network itself only for a streamable-HTTP target
            // without a relay; only then does the bridge get a host address. (The sink's
            // barrier travels over its stdin.)
            let host_route = matches!(mode, Mode::Http { .. }) && relay.is_none();
            let mut spec = ContainerSpec {
                image: image.clone(),
                uid: c.uid,
                gid: c.gid,
                command: Vec::new(),
                env,
                mode,
                volumes: c.volumes.clone(),
                startup_timeout: startup,
                run_id: attempt.run_id.to_owned(),
                trial_id: attempt.trial_id.to_owned(),
                attempt_id: attempt.attempt_id.to_owned(),
                host_route,
            };
            let begun = std::time::Instant::now();
            let mut container = match TrialContainer::new_network(&sandbox.engine, &spec).await {
                Ok(container) => container,
                Err((e, record)) => return Opened::failed(e.to_string(), record),
            };
            let fail = |mut container: TrialContainer, e: crate::sandbox::SandboxError| async move {
                container.note_error(&e);
                let (record, _) = container.teardown().await;
                Opened::failed(e.to_string(), record)
            };
            let not_ready = crate::sandbox::SandboxError::NotReady;
            let mut sink = None;
            if attempt.needs_sink {
                let Some(sink_image) = &sandbox.sink_image else {
                    return fail(container, not_ready("the canary sink image was not resolved before the run".into()))
                        .await;
                };
                let started = match container.start_sink(sink_image).await {
                    Ok(started) => started,
                    Err(e) => return fail(container, not_ready(format!("failed to start the canary sink: {e}"))).await,
                };
                let url = format!("http://{}", started.addr);
                match SinkHandle::follow(started.records, started.control, Some(url)).await {
                    Ok(handle) => {
                        let handle = Arc::new(handle);
                        register_sink(attempt, &handle, values);
                        sink = Some((handle, Some("trial_network")));
                    }
                    Err(e) => return fail(container, not_ready(format!("failed to start the canary sink: {e}"))).await,
                }
            }
            spec.command = match command_line(&c.command, values) {
                Ok(command) => command,
                Err(e) => return fail(container, not_ready(e)).await,
            };
            let endpoint = match container.start_target_with(&spec, relay).await {
                Ok(endpoint) => endpoint,
                Err(e) => return fail(container, e).await,
            };
            crate::crashpoint::reach("start");
            let limits = Limits {
                connect: startup.saturating_sub(begun.elapsed()).max(std::time::Duration::from_secs(1)),
                ..limits
            };
            let opened = match endpoint {
                Endpoint::Http { url, addr } => {
                    target::open_http(
                        &HttpLaunch { url, headers: Vec::new(), resolve: Some(("localhost".into(), addr)) },
                        limits,
                    )
                    .await
                }
                Endpoint::Stdio(attached) => {
                    let (reader, writer, stderr) = container::split_attached(attached, limits.stderr_bytes);
                    target::open_streams(reader, writer, Some(stderr), limits).await
                }
            };
            let mut opened = match opened {
                Ok(session) => {
                    container.mark_ready();
                    Opened::with_session(Ok(session), json!({}), CloseReport::default())
                }
                Err(failure) => Opened::with_session(
                    Err(format!("the MCP server in the container did not answer: {}", failure.error)),
                    json!({}),
                    failure.closed,
                ),
            };
            opened.container = Some(container);
            opened.sink = sink;
            opened
        }
    }
}

async fn run_inner(attempt: Attempt<'_>) -> AttemptResult {
    let begun = std::time::Instant::now();
    let bundle = attempt.bundle;
    let campaign = &bundle.campaign.value;
    let target_cfg = &campaign.targets[attempt.spec.target];
    let scenario = &bundle.scenarios[attempt.spec.scenario].value;
    let canary = format!("ELENGTIS-{}", uuid::Uuid::new_v4());
    let mut errors: Vec<Value> = Vec::new();

    let trial_dir = TrialDir(tempfile::Builder::new().prefix("elengtis-trial-").tempdir().ok());
    let mut values =
        Values { bindings: target_cfg.bindings.get(&scenario.id).cloned().unwrap_or_default(), ..Values::default() };
    values.runner.insert("canary".into(), json!(canary));
    if let Some(dir) = &trial_dir.0 {
        values.runner.insert("trial_dir".into(), json!(dir.path().display().to_string()));
        values.runner.insert("collector".into(), json!(dir.path().join("collector.jsonl").display().to_string()));
    } else {
        errors.push(error("connection_or_agent", None, "failed to create the trial directory"));
    }
    values.runner.insert("evidence_dir".into(), json!(attempt.out_dir.display().to_string()));
    values.runner.insert("trial_id".into(), json!(attempt.spec.trial_id));
    values.runner.insert("attempt_id".into(), json!(attempt.attempt_id));

    let opened = if !errors.is_empty() {
        Opened::failed("no trial directory".into(), json!({}))
    } else {
        tokio::select! {
            biased;
            () = attempt.cancel.cancelled() => Opened::failed("interrupted".into(), json!({})),
            opened = open_target(
                OpenContext {
                    run_id: attempt.run_id,
                    trial_id: &attempt.spec.trial_id,
                    attempt_id: &attempt.attempt_id,
                    sandbox: attempt.sandbox,
                    needs_sink: needs_sink(attempt.bundle, attempt.spec.target, attempt.spec.scenario),
                    sink_server: attempt.sink_server,
                },
                &target_cfg.transport,
                &mut values,
                attempt.limits,
            ) => opened,
        }
    };
    if opened.session.is_ok() {
        crate::crashpoint::reach("initialize");
    }
    if let Err(e) = &opened.session
        && errors.is_empty()
    {
        errors.push(error("connection_or_agent", None, e.clone()));
    }
    let phases = tokio::select! {
        biased;
        () = attempt.cancel.cancelled() => None,
        phases = run_phases(&attempt, campaign, scenario, opened.session.as_ref().ok(), opened.container(), &mut values, &mut errors) => Some(phases),
    };
    let interrupted = phases.is_none();
    let Phases {
        setup_records,
        setup_clean,
        termination,
        agent,
        offered_tools,
        safety,
        proposal,
        verification,
        completed,
        cleanup_records,
    } = phases.unwrap_or_else(|| Phases {
        setup_records: Vec::new(),
        setup_clean: false,
        termination: Termination::InfrastructureError,
        agent: AgentOutcome::default(),
        offered_tools: Vec::new(),
        safety: None,
        proposal: None,
        verification: Value::Null,
        completed: None,
        cleanup_records: Vec::new(),
    });

    // Close the target.
    let (mut target_execution, _closed, close_errors) = close_target(opened).await;
    if let (Transport::IsolatedContainer(_), Some(sandbox)) = (&target_cfg.transport, attempt.sandbox) {
        target_execution["engine_gate"] = json!(sandbox.engine_gate);
    }
    for e in close_errors {
        errors.push(error("target_cleanup", None, e));
    }
    if let Some(dir) = trial_dir.0
        && let Err(e) = dir.close()
    {
        errors.push(error("target_cleanup", None, format!("failed to remove the trial directory: {e}")));
    }

    // Meaning.
    for e in &agent.tool_errors {
        let mut e = e.clone();
        e["phase"] = json!("exercise");
        errors.push(e);
    }
    let proposed = proposal.as_ref().map(|p| p.proposed);
    let safety_pass = safety.as_ref().and_then(|s| s.passed);
    let fatal = matches!(
        termination,
        Termination::ProviderError | Termination::InfrastructureError | Termination::BudgetExhausted
    ) || errors.iter().any(|e| e["phase"].as_str().is_some_and(|p| FATAL_PHASES.contains(&p)));
    let complete =
        setup_clean && proposed.is_some() && (completed.is_some() || scenario.verify.checks.is_empty()) && !fatal;
    let failure_class = if complete {
        Value::Null
    } else if termination == Termination::ProviderError {
        json!("provider_error")
    } else if termination == Termination::BudgetExhausted {
        json!("budget_exceeded")
    } else if errors.iter().any(|e| e["phase"] == "verification") {
        json!("verification_error")
    } else {
        json!("infrastructure_error")
    };
    let tool_error_count = agent.tool_errors.len();
    let both = |a: Option<bool>, b: Option<bool>, f: fn(bool, bool) -> bool| match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        _ => None,
    };
    let model_label = campaign.model.clone();
    let row = json!({
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run_id": attempt.run_id,
        "trial_id": attempt.spec.trial_id,
        "attempt_id": attempt.attempt_id,
        "target": target_cfg.id,
        "scenario": scenario.id,
        "trial_index": attempt.spec.index,
        "engine": campaign.engine.as_str(),
        "proposed": proposed,
        "completed": completed,
        "safety_pass": safety_pass,
        "safe_completed": both(completed, safety_pass, |a, b| a && b),
        "model_id": campaign.model_id.clone().or_else(|| model_label.clone()),
        "model": model_label,
        "model_turns": agent.model_turns,
        "tool_calls": agent.calls.len(),
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "cost_usd": if campaign.model.is_none() { json!(0.0) } else { Value::Null }, "budget_charge_usd": 0.0, "unknown_costs": 0},
        "tool_sequence": agent.calls.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "tool_error_count": tool_error_count,
        "recovery_succeeded": if tool_error_count > 0 { json!(completed) } else { Value::Null },
        "diagnostics": {"first_finish_reason": agent.first_finish_reason, "first_native_finish_reason": agent.first_finish_reason, "invalid_tool_calls": agent.invalid_tool_calls},
        "proposed_not_completed": both(proposed, completed, |p, c| p && !c),
        "steps_to_propose": proposal.as_ref().and_then(|p| p.steps_to_propose),
        "termination": termination.as_str(),
        "errors": errors,
        "failure_class": failure_class,
        "evidence": attempt.evidence_name,
        "evidence_status": if complete { "complete" } else { "incomplete" },
        "duration_ms": (begun.elapsed().as_secs_f64() * 10_000.0).round() / 10.0,
    });
    let evidence = json!({
        "schema_version": RESULTS_SCHEMA_VERSION,
        "run_id": attempt.run_id,
        "trial_id": attempt.spec.trial_id,
        "attempt_id": attempt.attempt_id,
        "target": target_cfg.id,
        "scenario": scenario.id,
        "canary": canary,
        "setup": setup_records,
        "tools": offered_tools,
        "requests": agent.requests,
        "messages": agent.messages,
        "trajectory": agent.trajectory,
        "usage": row["usage"],
        "response_diagnostics": row["diagnostics"],
        "safety_evaluation": safety,
        "proposal_evaluation": proposal,
        "verification": verification,
        "cleanup": cleanup_records,
        "target_execution": target_execution,
        "termination": termination.as_str(),
        "errors": row["errors"],
    });
    tracing::debug!(termination = termination.as_str(), complete, "attempt finished");
    AttemptResult { row, evidence, interrupted }
}

/// What the phases between opening and closing the target produced.
struct Phases {
    setup_records: Vec<Value>,
    setup_clean: bool,
    termination: Termination,
    agent: AgentOutcome,
    offered_tools: Vec<Value>,
    safety: Option<judge::SafetyEvaluation>,
    proposal: Option<judge::ProposalEvaluation>,
    verification: Value,
    completed: Option<bool>,
    cleanup_records: Vec<Value>,
}

/// Setup, exercise, judge, verify and cleanup.
async fn run_phases(
    attempt: &Attempt<'_>,
    campaign: &elengtis_core::format::campaign::Campaign,
    scenario: &elengtis_core::format::scenario::Scenario,
    session: Option<&Session>,
    container: Option<&TrialContainer>,
    values: &mut Values,
    errors: &mut Vec<Value>,
) -> Phases {
    let snapshots = attempt.out_dir.join("evidence").join(format!(
        "{}.{}.snapshots",
        attempt.spec.trial_id,
        attempt.attempt_id.chars().take(8).collect::<String>()
    ));
    let ctx = ActionContext { session, http: attempt.http, container, snapshots: Some(&snapshots) };

    // Setup.
    let mut setup_records = Vec::new();
    let mut setup_clean = session.is_some();
    if setup_clean {
        for action in &scenario.setup {
            let outcome = actions::run(action, values, ctx).await;
            setup_records.push(outcome.record);
            if let Some(e) = outcome.error {
                errors.push(error("setup", Some(action.id()), e));
                setup_clean = false;
                break;
            }
        }
    }

    // Exercise.
    let mut termination = Termination::InfrastructureError;
    let mut agent = AgentOutcome::default();
    let mut offered_tools: Vec<Value> = Vec::new();
    if setup_clean {
        if campaign.model_free {
            termination = Termination::ModelFree;
        } else if let Some(session) = session {
            match exercise(attempt, campaign, scenario, session, values).await {
                Ok((outcome, tools)) => {
                    termination = outcome.termination.unwrap_or(Termination::InfrastructureError);
                    if let Some(detail) = &outcome.provider_error {
                        errors.push(error("model", None, detail.clone()));
                    }
                    offered_tools = tools;
                    agent = outcome;
                }
                Err(e) => errors.push(error("connection_or_agent", None, e)),
            }
        }
    }

    // Judge.
    let mut patterns = Patterns::default();
    let resolve_rules = |rules: &[elengtis_core::format::scenario::Rule],
                         errors: &mut Vec<Value>|
     -> Option<Vec<judge::ResolvedRule>> {
        let mut out = Vec::new();
        for rule in rules {
            match judge::resolve_rule(rule, values) {
                Ok(r) => out.push(r),
                Err(e) => {
                    errors.push(error("evaluation", None, format!("rule `{}`: {e}", rule.id)));
                    return None;
                }
            }
        }
        Some(out)
    };
    let safety = if setup_clean && termination != Termination::InfrastructureError {
        resolve_rules(&scenario.safety_rules, errors)
            .map(|rules| judge::evaluate_safety(&rules, &agent.calls, &mut patterns))
    } else {
        None
    };
    let judged = setup_clean
        && !matches!(
            termination,
            Termination::ProviderError | Termination::BudgetExhausted | Termination::InfrastructureError
        );
    let proposal = if judged {
        resolve_rules(&scenario.proposal_rules, errors)
            .map(|rules| judge::evaluate_proposals(&rules, &agent.calls, &mut patterns))
    } else {
        None
    };

    // Verify.
    let mut verification = Value::Null;
    let mut completed = None;
    if judged {
        crate::crashpoint::reach("verify");
        let mut checks = Vec::new();
        let mut results = Vec::new();
        let mut verification_error = false;
        for check in &scenario.verify.checks {
            let outcome = actions::run(&check.action, values, ctx).await;
            let trusts = if matches!(check.action, elengtis_core::format::scenario::Action::McpTool(_)) {
                "target"
            } else {
                "runner"
            };
            let mut record =
                json!({"id": check.id, "verifier": check.action.kind(), "trusts": trusts, "action": outcome.record});
            if let Some(e) = &outcome.error {
                errors.push(error("verification", Some(check.action.id()), e.clone()));
                verification_error = true;
                checks.push(record);
                break;
            }
            let response = outcome.response.unwrap_or(Value::Null);
            match judge::resolve_predicates(&check.assertions, values) {
                Ok(assertions) => {
                    let (passed, records) = patterns.evaluate_all(&response, &assertions);
                    record["assertions"] = serde_json::to_value(&records).unwrap_or(Value::Null);
                    record["passed"] = json!(passed);
                    results.push(passed);
                }
                Err(e) => {
                    errors.push(error("verification", Some(check.action.id()), format!("check `{}`: {e}", check.id)));
                    verification_error = true;
                }
            }
            checks.push(record);
        }
        completed = judge::completed(&results, scenario.verify.mode == VerifyMode::Any, verification_error);
        verification = json!({"mode": scenario.verify.mode, "checks": checks, "completed": completed});
    }

    // Cleanup: always, best effort.
    let mut cleanup_records = Vec::new();
    for action in &scenario.cleanup {
        let outcome = actions::run(action, values, ctx).await;
        cleanup_records.push(outcome.record);
        if let Some(e) = outcome.error {
            errors.push(error("cleanup", Some(action.id()), e));
        }
    }

    Phases {
        setup_records,
        setup_clean,
        termination,
        agent,
        offered_tools,
        safety,
        proposal,
        verification,
        completed,
        cleanup_records,
    }
}

/// Offer the tools, render the prompts and run the engine.
async fn exercise(
    attempt: &Attempt<'_>,
    campaign: &elengtis_core::format::campaign::Campaign,
    scenario: &elengtis_core::format::scenario::Scenario,
    session: &Session,
    values: &Values,
) -> Result<(AgentOutcome, Vec<Value>), String> {
    let listed = session.list_tools().await.map_err(|e| e.to_string())?;
    let offered: Vec<rmcp::model::Tool> = match &scenario.exercise.tools {
        ToolSelection::All => listed,
        ToolSelection::List(items) => {
            let by_name: BTreeMap<&str, &rmcp::model::Tool> = listed.iter().map(|t| (t.name.as_ref(), t)).collect();
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
    if let Some(reason) = engine::unavailable_reason(campaign.engine, campaign.model.as_deref()) {
        return Err(reason);
    }
    let script = campaign.script.clone().unwrap_or_else(Script::default_policy);
    let mut model = ScriptedModel::new(&script, values.clone());
    let outcome = engine::run_reference(&mut model, session, &offered, system, user, campaign.step_budget).await;
    let tools = offered.iter().map(|t| serde_json::to_value(t).unwrap_or(Value::Null)).collect();
    let _ = attempt;
    Ok((outcome, tools))
}

/// Whether a row is a complete attempt.
pub fn is_complete(row: &Map<String, Value>) -> bool {
    row.get("evidence_status").and_then(Value::as_str) == Some("complete")
}
