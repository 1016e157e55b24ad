//! Launching a target for one attempt (or a preflight): the transports behind one call, and
//! its teardown on every path.
//!
//! A `stdio` target is a fresh child process; a `streamable_http` target is a fresh client
//! session with an externally managed server; an `isolated_container` target is a fresh
//! sandbox from the run's [`SandboxBackend`]; a `rest` target (a black-box agent behind an
//! HTTP endpoint) has no MCP session: its exercise is [`crate::agent::rest`]. It launches
//! nothing, unless it names a `container`: then each attempt starts a fresh sandbox exactly as
//! an `isolated_container` target speaking streamable HTTP does, waits for its port, and the
//! exercise POSTs to the address the runner has for that port. A canary sink is started beside the target when
//! the scenario names one (`{runner: sink_url}`, `{runner: sink_requests}`): in the sandbox
//! for container targets, as a local process otherwise. Whatever was opened is closed by
//! [`close_target`], which returns the target's lifecycle record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use elengtis_core::format::Bundle;
use elengtis_core::format::campaign::{
    ContainerMcp, ControlLaunch, EgressProxy, EnvRef, RestTransport, Target, Transport,
};
use elengtis_core::refs::{self, Templates, Values};
use serde_json::{Value, json};

use crate::crashpoint::CrashPoint;
use crate::sandbox::{
    EgressProxySpec, ImageNeed, McpMode, NetworkNeeds, RunNeeds, SandboxBackend, SandboxError, SandboxSpec,
    TargetEndpoint, TrialLabels, TrialSandbox,
};
use crate::sink::{SinkHandle, SinkServer};
use crate::toolhost::mcp::{self, CloseReport, HttpLaunch, Limits, Session, StdioLaunch};

/// Who is opening a target, and with what.
#[derive(Debug, Clone, Copy)]
pub struct OpenContext<'a> {
    /// The run (labels).
    pub run_id: &'a str,
    /// The trial (labels).
    pub trial_id: &'a str,
    /// The attempt (labels).
    pub attempt_id: &'a str,
    /// The run's sandbox backend, for container targets.
    pub sandbox: Option<&'a dyn SandboxBackend>,
    /// Start a canary sink for this trial (the scenario or target uses `sink_*` values).
    pub needs_sink: bool,
    /// Ask the sandbox for the trial network's gateway (`{runner: network_gateway}`).
    pub needs_gateway: bool,
    /// Where sink records are served to checks.
    pub sink_server: Option<&'a SinkServer>,
    /// The target's egress proxy (container targets; it implies a sink).
    pub egress_proxy: Option<&'a EgressProxy>,
    /// The target's id (messages).
    pub target_id: &'a str,
    /// The campaign file's directory (relative sandbox paths).
    pub campaign_dir: &'a std::path::Path,
    /// The fresh per-trial directory (a sandboxed stdio target's scratch directory).
    pub trial_dir: Option<&'a std::path::Path>,
    /// The run's results directory (live stdio targets are recorded under it).
    pub results_dir: Option<&'a std::path::Path>,
    /// How `{template: …}` maps in stdio `args` (free-form in the original) are read: by
    /// the campaign's `schema_version`.
    pub args_templates: Templates,
    /// The target's own controls it starts with (`controls_on`): their variables join the
    /// environment and their arguments end the command line; recorded as `controls_on`.
    pub controls: &'a ControlLaunch,
}

/// A target as opened for one attempt.
pub struct Opened {
    /// The MCP session (`None` for a `rest` target, which has none: nothing is launched), or
    /// why the target could not be opened.
    pub session: Result<Option<Session>, String>,
    execution: Value,
    closed: CloseReport,
    sandbox: Option<Box<dyn TrialSandbox>>,
    sink: Option<(Arc<SinkHandle>, &'static str)>,
    /// The egress proxy's record stream (the sink's protocol) and its allowlist.
    proxy: Option<(SinkHandle, Value)>,
    attempt_id: String,
    sink_server: Option<SinkServer>,
    /// A `rest` target's container endpoint: the URL the runner POSTs to (its address for the
    /// container's port, then the target's path).
    rest_url: Option<String>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("session", &self.session).field("sandbox", &self.sandbox).finish_non_exhaustive()
    }
}

impl Opened {
    fn failed(error: String, execution: Value) -> Opened {
        Opened {
            session: Err(error),
            execution,
            closed: CloseReport::default(),
            sandbox: None,
            sink: None,
            proxy: None,
            attempt_id: String::new(),
            sink_server: None,
            rest_url: None,
        }
    }

    fn with_session(session: Result<Session, String>, execution: Value, closed: CloseReport) -> Opened {
        Opened { session: session.map(Some), execution, closed, ..Opened::failed(String::new(), Value::Null) }
    }

    /// The target's sandbox (isolated targets), for container actions (SQLite snapshots).
    pub fn sandbox(&self) -> Option<&dyn TrialSandbox> {
        self.sandbox.as_deref()
    }

    /// Where a `rest` target's messages go: the address of its container's endpoint when it
    /// runs in one, else `None` (its `url`).
    pub fn rest_url(&self) -> Option<&str> {
        self.rest_url.as_deref()
    }
}

/// Whether a target × scenario pair needs a canary sink: the target has an egress proxy, or
/// something in the scenario, the target's command line or the campaign's script names
/// `sink_url`, `sink_direct_url` or `sink_requests`.
pub fn needs_sink(bundle: &Bundle, target: usize, scenario: usize) -> bool {
    let campaign = &bundle.campaign.value;
    if campaign.targets[target].egress_proxy.is_some() {
        return true;
    }
    let scenario = &bundle.scenarios[scenario].value;
    let parts = [
        serde_json::to_value(scenario).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.targets[target].transport).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.script).unwrap_or(Value::Null),
    ];
    crate::sink::uses_sink(&parts.iter().collect::<Vec<_>>(), &[&scenario.exercise.system, &scenario.exercise.user])
}

/// Whether a target × scenario pair names `{runner: network_gateway}` (in the scenario, the
/// target's command line, the campaign's script or a prompt).
pub fn needs_gateway(bundle: &Bundle, target: usize, scenario: usize) -> bool {
    let campaign = &bundle.campaign.value;
    let scenario = &bundle.scenarios[scenario].value;
    let parts = [
        serde_json::to_value(scenario).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.targets[target].transport).unwrap_or(Value::Null),
        serde_json::to_value(&campaign.script).unwrap_or(Value::Null),
    ];
    elengtis_core::decisive::names_runner_value(
        &parts.iter().collect::<Vec<_>>(),
        &[&scenario.exercise.system, &scenario.exercise.user],
        &[elengtis_core::decisive::NETWORK_GATEWAY],
    )
}

/// Every target × scenario pair of a bundle.
pub fn pairs(bundle: &Bundle) -> impl Iterator<Item = (usize, usize)> + '_ {
    (0..bundle.campaign.value.targets.len()).flat_map(move |t| (0..bundle.scenarios.len()).map(move |s| (t, s)))
}

/// The image a container target needs (None: not a container target). A `rest` target with a
/// `container` is one: its endpoint's image, reached over HTTP.
pub fn image_need(target: &Target) -> Option<ImageNeed> {
    let c = target.transport.container()?;
    Some(ImageNeed {
        image: c.image.clone(),
        http: c.mcp_transport == ContainerMcp::StreamableHttp,
        relay_image: c.relay_image.clone(),
        runtime: c.runtime.clone(),
        egress_proxy: target.egress_proxy.is_some(),
    })
}

/// What a bundle needs from a sandbox backend: the images of its container targets and
/// whether any of them starts a sink. `None` when it has no container target.
pub fn sandbox_needs(bundle: &Bundle) -> Option<RunNeeds> {
    let targets = &bundle.campaign.value.targets;
    let images: Vec<ImageNeed> = targets.iter().filter_map(image_need).collect();
    if images.is_empty() {
        return None;
    }
    let sink = pairs(bundle).any(|(t, s)| targets[t].transport.container().is_some() && needs_sink(bundle, t, s));
    Some(RunNeeds { images, sink })
}

/// Resolve command-line items (references rendered as Python's `str()`).
fn command_line(items: &[Value], values: &Values, templates: Templates) -> Result<Vec<String>, String> {
    items
        .iter()
        .map(|item| values.resolve_as(item, templates).map(|v| refs::python_str(&v)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("failed to resolve the target's command line: {e}"))
}

/// Resolve a container's command items: as [`command_line`], and a list of strings and
/// references is one argument, its parts joined (`[attacker.example.com=, {runner: sink_url}]`).
/// Items are strings in the original, so `{template: …}` is always a template here.
fn container_command(items: &[Value], values: &Values) -> Result<Vec<String>, String> {
    items
        .iter()
        .map(|item| match item {
            Value::Array(parts) => parts
                .iter()
                .map(|part| values.resolve_text(part).map(|v| refs::python_str(&v)))
                .collect::<Result<String, _>>(),
            _ => values.resolve_text(item).map(|v| refs::python_str(&v)),
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("failed to resolve the target's command line: {e}"))
}

fn env_values(env: &std::collections::BTreeMap<String, EnvRef>) -> Result<Vec<(String, String)>, String> {
    env.iter()
        .map(|(name, r)| {
            std::env::var(&r.env)
                .map(|v| (name.clone(), v))
                .map_err(|_| format!("environment variable {} is not set", r.env))
        })
        .collect()
}

fn register_sink(ctx: &OpenContext<'_>, handle: &Arc<SinkHandle>, direct: Option<&str>, values: &mut Values) {
    values.runner.insert("sink_url".into(), json!(handle.url()));
    values.runner.insert("sink_direct_url".into(), json!(direct.unwrap_or(handle.url())));
    if let Some(server) = ctx.sink_server {
        values.runner.insert("sink_requests".into(), json!(server.register(ctx.attempt_id, handle.clone())));
    }
}

/// Open the target of one attempt. `values` gains the sink's values when a sink starts.
pub async fn open_target(ctx: OpenContext<'_>, transport: &Transport, values: &mut Values, limits: Limits) -> Opened {
    let mut opened = match transport {
        Transport::IsolatedContainer(c) => open_container(&ctx, c, values, limits, None).await,
        Transport::Rest(rest @ RestTransport { container: Some(c), .. }) => {
            let mut opened = open_container(&ctx, &c.as_container(&rest.url), values, limits, Some(rest)).await;
            if let Err(e) = &mut opened.session {
                *e = format!(
                    "failed to start the endpoint of rest target `{}` (image `{}`, container_port {}): {e}",
                    ctx.target_id, c.image, c.container_port
                );
            }
            // On success the sandbox's record joins these at teardown; on failure the record
            // is already here.
            if let (Value::Object(execution), Value::Object(rest)) = (&mut opened.execution, rest_execution(rest)) {
                for (key, value) in rest {
                    execution.entry(key).or_insert(value);
                }
            }
            opened
        }
        other => {
            let mut sink = None;
            if ctx.needs_sink {
                match SinkHandle::spawn_process().await {
                    Ok(handle) => {
                        let handle = Arc::new(handle);
                        register_sink(&ctx, &handle, None, values);
                        sink = Some((handle, "process"));
                    }
                    Err(e) => return Opened::failed(format!("failed to start the canary sink: {e}"), json!({})),
                }
            }
            let mut opened = open_local(&ctx, other, values, limits).await;
            opened.sink = sink;
            opened
        }
    };
    opened.attempt_id = ctx.attempt_id.to_owned();
    opened.sink_server = ctx.sink_server.cloned();
    opened
}

async fn open_local(ctx: &OpenContext<'_>, transport: &Transport, values: &Values, limits: Limits) -> Opened {
    match transport {
        Transport::Stdio(stdio) => {
            let mut args = match command_line(&stdio.args, values, ctx.args_templates) {
                Ok(args) => args,
                Err(e) => return Opened::failed(e, json!({})),
            };
            let mut env = match env_values(&stdio.env) {
                Ok(env) => env,
                Err(e) => return Opened::failed(e, json!({})),
            };
            args.extend(ctx.controls.args.iter().cloned());
            env.extend(ctx.controls.env.iter().cloned());
            let sandbox = match (&stdio.sandbox, ctx.trial_dir) {
                (None, _) => None,
                // The trial directory (fresh per trial; the collector lives there) is the
                // target's scratch directory.
                (Some(sandbox), Some(dir)) => Some(mcp::confinement(sandbox, ctx.campaign_dir, dir.to_owned())),
                (Some(_), None) => {
                    return Opened::failed("a sandboxed stdio target needs a trial directory".into(), json!({}));
                }
            };
            let isolation = if sandbox.is_some() { "light_sandbox" } else { "none" };
            let mut execution = json!({"isolation": isolation, "session": "fresh_process", "reset_asserted": true, "command": stdio.command, "args": args, "guard": true});
            if let Some(c) = &sandbox {
                execution["sandbox"] = json!(c);
            }
            if !ctx.controls.on.is_empty() {
                execution["controls_on"] = json!(ctx.controls.on);
            }
            let record = ctx.results_dir.map(|d| d.join(mcp::LIVE_DIR));
            if let Some(dir) = &record
                && let Err(e) = std::fs::create_dir_all(dir)
            {
                return Opened::failed(format!("failed to create {}: {e}", dir.display()), execution);
            }
            let launch = StdioLaunch {
                command: stdio.command.clone(),
                args,
                env,
                target: ctx.target_id.to_owned(),
                sandbox,
                record,
            };
            match mcp::open_stdio(&launch, limits).await {
                Ok(session) => Opened::with_session(Ok(session), execution, CloseReport::default()),
                Err(failure) => Opened::with_session(Err(failure.error.to_string()), execution, failure.closed),
            }
        }
        Transport::StreamableHttp(http) => {
            let execution = json!({"isolation": "externally_managed", "session": "fresh_client", "reset_asserted": false, "egress_controlled": false, "url": http.url});
            let headers = match crate::actions::env_headers(&http.headers) {
                Ok(h) => h,
                Err(e) => return Opened::failed(e, execution),
            };
            let launch = HttpLaunch { url: http.url.clone(), headers, resolve: None };
            match mcp::open_http(&launch, limits).await {
                Ok(session) => Opened::with_session(Ok(session), execution, CloseReport::default()),
                Err(failure) => Opened::with_session(Err(failure.error.to_string()), execution, failure.closed),
            }
        }
        Transport::Rest(rest) => {
            Opened { session: Ok(None), execution: rest_execution(rest), ..Opened::failed(String::new(), Value::Null) }
        }
        Transport::IsolatedContainer(_) => {
            Opened::failed("a container target needs a sandbox backend".into(), json!({}))
        }
    }
}

/// The lifecycle record of a `rest` target: externally managed, nothing launched, the endpoint
/// and the campaign's statement of its egress; the campaign's model is not asked and the
/// scenario's system prompt is not sent. With a `container`, what is launched is the sandbox's
/// record (image and container ids, hardening, network), which these facts join: the path,
/// the statement, and (at teardown, [`egress_enforced`]) what the network enforces.
fn rest_execution(rest: &RestTransport) -> Value {
    if let Some(c) = &rest.container {
        return json!({
            "agent": "rest",
            "launched": true,
            "session_field": rest.session_field,
            "egress_controlled": true,
            "path": rest.url,
            "container_port": c.container_port,
            "egress": rest.egress,
            "model_asked": false,
            "system_prompt_sent": false,
        });
    }
    json!({
        "isolation": "externally_managed",
        "agent": "rest",
        "launched": false,
        "session": "fresh_client",
        "session_field": rest.session_field,
        "reset_asserted": false,
        "egress_controlled": false,
        "url": rest.url,
        "egress": rest.egress,
        "model_asked": false,
        "system_prompt_sent": false,
    })
}

/// What the network of a `rest` target's container enforces, from its sandbox's lifecycle
/// record (only when every hardening fact held): no network at all (loopback only), or an
/// internal network with no route out (and whether the bridge holds a host address). `None`
/// when the record does not establish it.
pub fn egress_enforced(record: &Value) -> Option<&'static str> {
    if record["hardening_asserted"] != true {
        return None;
    }
    match record["network"]["mode"].as_str()? {
        "none" => Some("no network: loopback only (the engine's `none` network mode), no route out"),
        "sink_namespace" => Some("no network: the canary sink's loopback only, no route out"),
        _ if record["network"]["internal"] == true && record["host_address_on_bridge"] == false => {
            Some("internal network, no route out (the bridge holds no host address)")
        }
        _ if record["network"]["internal"] == true => {
            Some("internal network, no route out beyond this host (the bridge holds a host address: ELENGTIS_RELAY)")
        }
        _ => None,
    }
}

async fn open_container(
    ctx: &OpenContext<'_>,
    c: &elengtis_core::format::campaign::ContainerTransport,
    values: &mut Values,
    limits: Limits,
    rest: Option<&RestTransport>,
) -> Opened {
    let base = json!({"isolation": "isolated_container", "image": {"reference": c.image}});
    let Some(backend) = ctx.sandbox else {
        return Opened::failed("no sandbox backend was prepared for this run".into(), base);
    };
    let mut env = match env_values(&c.env) {
        Ok(env) => env,
        Err(e) => return Opened::failed(e, base),
    };
    env.extend(ctx.controls.env.iter().cloned());
    let mode = match c.mcp_transport {
        ContainerMcp::Stdio => McpMode::Stdio,
        ContainerMcp::StreamableHttp => McpMode::Http {
            port: c.container_port.and_then(|p| u16::try_from(p).ok()).unwrap_or_default(),
            path: c.path.clone(),
        },
    };
    let startup = Duration::from_secs(c.startup_timeout_seconds.into());
    let spec = SandboxSpec {
        image: c.image.clone(),
        relay_image: c.relay_image.clone(),
        uid: c.uid,
        gid: c.gid,
        env,
        mode,
        volumes: c.volumes.clone(),
        startup_timeout: startup,
        stderr_bytes: limits.stderr_bytes,
        labels: TrialLabels {
            run_id: ctx.run_id.to_owned(),
            trial_id: ctx.trial_id.to_owned(),
            attempt_id: ctx.attempt_id.to_owned(),
        },
        egress_proxy: ctx.egress_proxy.map(|p| EgressProxySpec { allow: p.allow.clone(), route: p.routed() }),
        network_needs: NetworkNeeds {
            sink: ctx.needs_sink,
            // An HTTP target's relay shares its namespace, and its port could be the sink's:
            // with a sink it gets a bridge.
            other: ctx.egress_proxy.is_some()
                || ctx.needs_gateway
                || (ctx.needs_sink && c.mcp_transport == ContainerMcp::StreamableHttp),
        },
        runtime: c.runtime.clone(),
    };
    let begun = Instant::now();
    let mut sandbox = match backend.create(&spec).await {
        Ok(sandbox) => sandbox,
        Err((e, record)) => return Opened::failed(e.to_string(), record),
    };
    if ctx.needs_gateway {
        match sandbox.network_gateway().await {
            Ok(gateway) => {
                values.runner.insert(elengtis_core::decisive::NETWORK_GATEWAY.into(), json!(gateway));
            }
            Err(e) => return fail(sandbox, e).await,
        }
    }
    let mut sink = None;
    let mut proxy = None;
    if ctx.needs_sink || ctx.egress_proxy.is_some() {
        let started = match sandbox.start_sink().await {
            Ok(channel) => {
                let direct = channel.direct_url.clone();
                let placement = channel.placement;
                let followed_proxy = match channel.proxy {
                    Some(p) => match SinkHandle::follow(p.records, p.control, Some(String::new())).await {
                        Ok(handle) => Ok(Some(handle)),
                        Err(e) => Err(SandboxError::NotReady(format!("failed to start the egress proxy: {e}"))),
                    },
                    None => Ok(None),
                };
                match followed_proxy {
                    Ok(followed_proxy) => SinkHandle::follow(channel.records, channel.control, channel.url)
                        .await
                        .map(|h| (h, direct, placement, followed_proxy))
                        .map_err(|e| SandboxError::NotReady(format!("failed to start the canary sink: {e}"))),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        match started {
            Ok((handle, direct, placement, followed_proxy)) => {
                let handle = Arc::new(handle);
                register_sink(ctx, &handle, direct.as_deref(), values);
                sink = Some((handle, placement));
                proxy = followed_proxy.zip(ctx.egress_proxy.map(|p| json!({"allow": p.allow, "route": p.routed()})));
            }
            Err(e) => return fail(sandbox, e).await,
        }
    }
    let command = match container_command(&c.command, values) {
        Ok(mut command) => {
            command.extend(ctx.controls.args.iter().cloned());
            command
        }
        Err(e) => return fail(sandbox, SandboxError::NotReady(e)).await,
    };
    let endpoint = match sandbox.start_target(command).await {
        Ok(endpoint) => endpoint,
        Err(e) => return fail(sandbox, e).await,
    };
    if let (Some(rest), TargetEndpoint::Http { connect_to, .. }) = (rest, &endpoint) {
        // No MCP session: the endpoint is ready once its port accepts connections (the
        // sandbox waited for that within the start-up deadline); the exercise POSTs to it.
        sandbox.mark_ready();
        let mut opened =
            Opened { session: Ok(None), execution: json!({}), ..Opened::failed(String::new(), Value::Null) };
        opened.rest_url = Some(format!("http://{connect_to}{}", rest.url));
        opened.execution["url"] = json!(opened.rest_url);
        if !ctx.controls.on.is_empty() {
            opened.execution["controls_on"] = json!(ctx.controls.on);
        }
        opened.sandbox = Some(sandbox);
        opened.sink = sink;
        opened.proxy = proxy;
        return opened;
    }
    let limits = Limits { connect: startup.saturating_sub(begun.elapsed()).max(Duration::from_secs(1)), ..limits };
    let session = match endpoint {
        TargetEndpoint::Http { url, connect_to } => {
            mcp::open_http(
                &HttpLaunch { url, headers: Vec::new(), resolve: Some(("localhost".into(), connect_to)) },
                limits,
            )
            .await
        }
        TargetEndpoint::Stdio { output, input, stderr } => mcp::open_streams(output, input, Some(stderr), limits).await,
    };
    let mut opened = match session {
        Ok(session) => {
            sandbox.mark_ready();
            Opened::with_session(Ok(session), json!({}), CloseReport::default())
        }
        Err(failure) => Opened::with_session(
            Err(format!("the MCP server in the container did not answer: {}", failure.error)),
            json!({}),
            failure.closed,
        ),
    };
    if !ctx.controls.on.is_empty() {
        opened.execution["controls_on"] = json!(ctx.controls.on);
    }
    opened.sandbox = Some(sandbox);
    opened.sink = sink;
    opened.proxy = proxy;
    opened
}

/// Tear down a sandbox that failed to start; its record and the error.
async fn fail(mut sandbox: Box<dyn TrialSandbox>, e: SandboxError) -> Opened {
    sandbox.note_error(&e);
    let (record, _) = sandbox.teardown().await;
    Opened::failed(e.to_string(), record)
}

/// Close the session and tear the sandbox down; the target's execution record, what closing
/// the session found, and the teardown errors.
pub async fn close_target(opened: Opened) -> (Value, CloseReport, Vec<String>) {
    let Opened {
        session,
        execution: mut target_execution,
        mut closed,
        sandbox,
        sink,
        proxy,
        attempt_id,
        sink_server,
        rest_url: _,
    } = opened;
    let mut open_stderr = None;
    if let Ok(Some(session)) = session {
        target_execution["server"] = session.server_info().clone();
        if sandbox.is_some() {
            (closed, open_stderr) = session.close_in_container().await;
        } else {
            closed = session.close().await;
        }
    }
    // The egress proxy, then the sink, are closed before their sandbox goes: end of stdin lets
    // each flush the records of requests that came after the last check.
    let proxy = match proxy {
        Some((handle, config)) => {
            let (requests, received) = handle.close().await;
            let allowed = requests.iter().filter(|r| r["egress"]["decision"] == "allowed").count();
            let refused = requests.iter().filter(|r| r["egress"]["decision"] == "refused").count();
            let mut config = config;
            config["requests"] = json!(requests);
            config["received_us"] = json!(received);
            config["allowed"] = json!(allowed);
            config["refused"] = json!(refused);
            Some(config)
        }
        None => None,
    };
    let sink = match sink {
        Some((handle, placement)) => {
            if let Some(server) = &sink_server {
                server.unregister(&attempt_id);
            }
            let url = handle.url().to_owned();
            let (requests, received) = match Arc::try_unwrap(handle) {
                Ok(handle) => handle.close().await,
                Err(shared) => (shared.requests().await.unwrap_or_default(), Vec::new()),
            };
            Some(json!({"url": url, "placement": placement, "requests": requests, "received_us": received}))
        }
        None => None,
    };
    let mut cleanup_errors = Vec::new();
    if let Some(sandbox) = sandbox {
        let (record, errors) = sandbox.teardown().await;
        // What the opening recorded (the server's identity, the controls on, a rest target's
        // facts) joins the sandbox's record.
        let kept = std::mem::replace(&mut target_execution, record);
        if let (Value::Object(kept), Value::Object(execution)) = (kept, &mut target_execution) {
            execution.extend(kept.into_iter().filter(|(_, v)| !v.is_null()));
        }
        cleanup_errors = errors;
    }
    if target_execution["agent"] == "rest" && target_execution["isolation"] == "isolated_container" {
        target_execution["egress_enforced"] = json!(egress_enforced(&target_execution));
    }
    // A server that ignored the end of its stdin kept its stderr open until its sandbox was
    // removed; what it wrote is collected now.
    if let Some(handle) = open_stderr {
        match mcp::finish_stderr(handle, Duration::from_secs(3)).await {
            Ok(captured) => closed.stderr = Some(captured),
            Err(e) => closed.errors.push(e),
        }
    }
    let mut errors = closed.errors.clone();
    errors.extend(cleanup_errors);
    target_execution["close"] = serde_json::to_value(&closed).unwrap_or(Value::Null);
    if let Some(Value::Object(extra)) = proxy {
        match target_execution.get_mut("egress_proxy") {
            Some(Value::Object(existing)) => existing.extend(extra),
            _ => target_execution["egress_proxy"] = Value::Object(extra),
        }
    }
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

/// Reach the `initialize` crashpoint once a session is open.
pub fn reached_initialize(opened: &Opened) {
    if opened.session.is_ok() {
        crate::crashpoint::reach(CrashPoint::Initialize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_rest_container_enforces_is_read_from_its_asserted_record_only() {
        let record = |mode: &str, internal: bool, host: bool, asserted: bool| json!({"hardening_asserted": asserted, "host_address_on_bridge": host, "network": {"mode": mode, "internal": internal}});
        assert_eq!(
            egress_enforced(&record("none", false, false, true)),
            Some("no network: loopback only (the engine's `none` network mode), no route out")
        );
        assert_eq!(
            egress_enforced(&record("internal_bridge", true, false, true)),
            Some("internal network, no route out (the bridge holds no host address)")
        );
        assert!(
            egress_enforced(&record("internal_bridge", true, true, true)).is_some_and(|e| e.contains("host address"))
        );
        assert_eq!(egress_enforced(&record("internal_bridge", false, false, true)), None, "not internal");
        assert_eq!(egress_enforced(&record("none", false, false, false)), None, "a fact did not hold");
        assert_eq!(egress_enforced(&json!({})), None);
    }

    #[test]
    fn a_rest_container_is_launched_as_a_streamable_http_container_at_its_path() {
        let rest: RestTransport = serde_json::from_value(json!({
            "url": "/v1/chat", "reply_path": "/reply/text", "egress": "x",
            "container": {"image": "a:1", "container_port": 8000, "uid": 7, "gid": 8, "command": ["--bind", "0.0.0.0:8000"]},
        }))
        .expect("a rest transport");
        let transport = Transport::Rest(rest);
        let container = transport.container().expect("a container");
        assert_eq!(container.mcp_transport, ContainerMcp::StreamableHttp);
        assert_eq!((container.container_port, container.path.as_str()), (Some(8000), "/v1/chat"));
        assert_eq!((container.uid, container.gid, container.startup_timeout_seconds), (7, 8, 30));
        let target = Target {
            id: "t".into(),
            transport,
            bindings: Default::default(),
            control_shim: None,
            egress_proxy: None,
            control_env: Default::default(),
            control_args: Default::default(),
            controls_on: Vec::new(),
        };
        let need = image_need(&target).expect("an image need");
        assert_eq!((need.image.as_str(), need.http, need.egress_proxy), ("a:1", true, false));
    }

    #[test]
    fn a_list_in_a_container_command_is_one_joined_argument() {
        let mut values = Values::default();
        values.runner.insert("sink_url".into(), json!("http://10.0.0.2:8080"));
        let items = vec![
            json!("--resolve"),
            json!(["attacker.example.com=", {"runner": "sink_url"}]),
            json!({"runner": "sink_url"}),
        ];
        let line = container_command(&items, &values).expect("resolves");
        assert_eq!(line, ["--resolve", "attacker.example.com=http://10.0.0.2:8080", "http://10.0.0.2:8080"]);
        assert!(container_command(&[json!(["x", {"runner": "nope"}])], &values).is_err());
    }

    #[test]
    fn container_commands_always_render_templates_and_stdio_args_by_version() {
        let mut values = Values::default();
        values.runner.insert("canary".into(), json!("ELENGTIS-7"));
        let template = json!({"template": "--user-agent=probe/{canary}"});
        let line = container_command(&[template.clone(), json!(["a=", template.clone()])], &values).expect("renders");
        assert_eq!(line, ["--user-agent=probe/ELENGTIS-7", "a=--user-agent=probe/ELENGTIS-7"]);
        // Stdio args are free-form in the original: literal (its str()) in schema_version 1.
        let v1 = command_line(std::slice::from_ref(&template), &values, Templates::Literal).expect("literal");
        assert_eq!(v1, ["{'template': '--user-agent=probe/{canary}'}"]);
        let v2 = command_line(&[template], &values, Templates::Render).expect("renders");
        assert_eq!(v2, ["--user-agent=probe/ELENGTIS-7"]);
        let unknown = container_command(&[json!({"template": "{nope}"})], &values).unwrap_err();
        assert!(unknown.contains("unknown value `nope`"), "{unknown}");
    }
}
