//! Preflight: start each target the way a trial would, list its tools, check that every
//! tool the campaign names exists and every call's fixed arguments fit the tool's
//! `inputSchema` ([`elengtis_core::toolargs`]), and tear it down — no scenario action, no model.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::sandbox::SandboxBackend;
use crate::toolhost::mcp::Limits;
use crate::trial::launch::{self, OpenContext};
use elengtis_core::agent::ToolInfo;
use elengtis_core::format::campaign::{Target, Transport};
use elengtis_core::format::{Bundle, Severity};
use elengtis_core::refs::{Templates, Values};
use elengtis_core::toolargs::{self, Finding, ListedTool};

/// The preflight result of one target.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    /// Target id.
    pub target: String,
    /// Transport type.
    pub transport: &'static str,
    /// Everything checked out.
    pub ok: bool,
    /// Tools the target lists.
    pub tools: Vec<String>,
    /// The target's tool listing as it gave it (`name`, `description`, `inputSchema`, …):
    /// what `elengtis validate --tools` reads back.
    pub tool_list: Vec<Value>,
    /// Problems found: the target's start, listing and teardown, and a count of the error
    /// findings.
    pub problems: Vec<String>,
    /// The campaign's tool names and fixed arguments checked against the listed tools.
    pub findings: Vec<Finding>,
    /// A caution that does not fail the check.
    pub warning: Option<String>,
    /// How the target was started and torn down (lifecycle record for containers).
    pub execution: Value,
}

impl TargetCheck {
    /// The one line printed for this target.
    pub fn line(&self) -> String {
        let kind = match self.transport {
            "stdio" => "stdio target",
            "streamable_http" => "remote tool",
            "rest" => "rest agent",
            _ => "isolated container",
        };
        if self.ok && self.transport == "rest" {
            format!("{}: {kind} preflight passed (not contacted; no tools to list)", self.target)
        } else if self.ok {
            format!(
                "{}: {kind} preflight passed ({})",
                self.target,
                elengtis_core::format::quote::count(self.tools.len(), "tool")
            )
        } else {
            format!("{}: {kind} preflight FAILED: {}", self.target, self.problems.join("; "))
        }
    }

    /// What the text output prints for this target: [`TargetCheck::line`], each finding
    /// indented, and, when the check failed, the tail of what the server wrote on stderr (the
    /// traceback that explains a server that failed to start), each line indented.
    pub fn render(&self) -> String {
        let mut out = self.line();
        out.push('\n');
        for finding in &self.findings {
            let _ = writeln!(out, "  {finding}");
        }
        // The server's stderr explains a target that failed to start or list its tools, not
        // a campaign whose calls do not fit them.
        let only_findings = self.problems.len() == 1 && self.findings.iter().any(|f| f.severity == Severity::Error);
        if self.ok || only_findings {
            return out;
        }
        let close = &self.execution["close"];
        let Some(text) = close["stderr"]["text"].as_str().filter(|t| !t.trim().is_empty()) else {
            return out;
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
        let shown = if tail.len() < lines.len() {
            format!("last {} of {} lines", tail.len(), lines.len())
        } else {
            format!("{} line{}", lines.len(), if lines.len() == 1 { "" } else { "s" })
        };
        let exit = close["exit"].as_str().map(|e| format!(", {e}")).unwrap_or_default();
        let _ = writeln!(out, "  stderr of {} ({shown}{exit}):", self.target);
        for line in tail {
            let line: String = line.chars().take(STDERR_TAIL_WIDTH).collect();
            let _ = writeln!(out, "    {line}");
        }
        out
    }
}

/// Lines of a failed server's stderr shown in text output.
pub const STDERR_TAIL_LINES: usize = 20;
/// Characters shown of each such line.
const STDERR_TAIL_WIDTH: usize = 300;

/// The run id of one preflight invocation: unique, so that two preflights on one engine
/// never name their objects alike (the container and network names derive from it and
/// from [`attempt_id`]; the objects carry the same labels as a run's, so `gc` knows them).
fn run_id() -> String {
    format!("preflight-{}", uuid::Uuid::new_v4())
}

/// The attempt id of one target's check: unique per invocation and target. Object names
/// use the first 8 letters and digits of the run and attempt ids, so the attempt id starts
/// with random hex digits.
fn attempt_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The warning for a stdio target without `sandbox` when the runner is root.
pub fn unconfined_root_warning(target: &str) -> String {
    format!(
        "{target} is an unconfined stdio target and will run as root (uid 0): it can write anywhere on this host and reach any address; add `sandbox:` to its transport (docs/security.md) or run elengtis as an unprivileged user"
    )
}

/// Check every target of a bundle. `sandbox` is needed for container targets.
pub async fn run(bundle: &Bundle, limits: Limits, sandbox: Option<&dyn SandboxBackend>) -> Vec<TargetCheck> {
    let run_id = run_id();
    let mut checks = Vec::new();
    for target in &bundle.campaign.value.targets {
        checks.push(check_target(bundle, target, limits, &run_id, sandbox).await);
    }
    checks
}

async fn check_target(
    bundle: &Bundle,
    target: &Target,
    limits: Limits,
    run_id: &str,
    sandbox: Option<&dyn SandboxBackend>,
) -> TargetCheck {
    let mut check = TargetCheck {
        target: target.id.clone(),
        transport: target.transport.kind(),
        ok: false,
        tools: Vec::new(),
        tool_list: Vec::new(),
        problems: Vec::new(),
        findings: Vec::new(),
        warning: start_warning(target),
        execution: Value::Null,
    };
    if let Transport::Rest(_) = &target.transport {
        // Nothing to start and no tools to list: the campaign's checks of its tools (none can
        // name one: validation refuses mcp_tool actions for a rest target) have nothing to do.
        check.ok = true;
        return check;
    }
    // Arguments may bind per scenario; the first scenario's bindings stand in.
    let bindings =
        bundle.scenarios.first().and_then(|first| target.bindings.get(&first.value.id).cloned()).unwrap_or_default();
    let probe = Probe {
        target,
        bindings,
        campaign_dir: bundle.campaign.path.parent().unwrap_or(std::path::Path::new(".")),
        templates: Templates::for_version(bundle.campaign.value.schema_version),
        limits,
        run_id,
        sandbox,
    };
    let listing = list_tools(probe).await;
    check.execution = listing.execution;
    check.problems = listing.problems;
    let listed = listing.tools;
    check.tools = listed.iter().map(|t| t.name.clone()).collect();
    check.tool_list = listed.iter().map(|t| t.listing.clone()).collect();
    if check.problems.is_empty() {
        let tools: Vec<ListedTool> = listed
            .iter()
            .map(|t| ListedTool { name: t.name.clone(), input_schema: Value::Object(t.input_schema.clone()) })
            .collect();
        check.findings = toolargs::check(bundle, target, &tools);
        let errors = check.findings.iter().filter(|f| f.severity == Severity::Error).count();
        if errors > 0 {
            check.problems.push(format!(
                "{errors} problem{} with the tools the campaign calls or their arguments (listed below)",
                if errors == 1 { "" } else { "s" }
            ));
        }
    }
    check.ok = check.problems.is_empty();
    check
}

/// Why a `rest` target cannot be scanned or listed.
pub fn rest_has_no_tools(target: &str) -> String {
    format!(
        "{target} is a rest target: a rest target has no tools to scan or list (it is a black-box agent behind an HTTP endpoint: a message in, a reply out)"
    )
}

/// The caution printed before a target is started: an externally managed server or agent, or
/// an unconfined stdio target run as root.
pub fn start_warning(target: &Target) -> Option<String> {
    match &target.transport {
        Transport::Rest(rest) if rest.container.is_some() => Some(format!(
            "{} is a rest target in a container: preflight does not start it; each trial starts a fresh hardened container, sends the scenario's user prompt and records the reply",
            target.id
        )),
        Transport::Rest(_) => Some(format!(
            "{} is a rest target (an externally managed agent): preflight does not contact it; its trials send the scenario's user prompt and record the reply",
            target.id
        )),
        Transport::StreamableHttp(_) => {
            Some(format!("{} is externally managed; reset and isolation are not asserted", target.id))
        }
        Transport::Stdio(stdio) if stdio.sandbox.is_none() && nix::unistd::geteuid().is_root() => {
            Some(unconfined_root_warning(&target.id))
        }
        _ => None,
    }
}

/// What [`list_tools`] needs to start one target.
pub struct Probe<'a> {
    /// The target to start.
    pub target: &'a Target,
    /// The values its command line may name as `{binding: …}`.
    pub bindings: serde_json::Map<String, Value>,
    /// Relative paths of the target (a sandbox's `writable`) are relative to this directory.
    pub campaign_dir: &'a std::path::Path,
    /// How `{template: …}` maps in the command line read (the campaign's version).
    pub templates: Templates,
    /// Frame and deadline limits of the MCP session.
    pub limits: Limits,
    /// The run id objects are named and labelled by ([`new_run_id`]).
    pub run_id: &'a str,
    /// The sandbox, needed for container targets.
    pub sandbox: Option<&'a dyn SandboxBackend>,
}

impl std::fmt::Debug for Probe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("target", &self.target.id).field("run_id", &self.run_id).finish_non_exhaustive()
    }
}

/// The tools one target listed, and how its start and teardown went.
#[derive(Debug)]
pub struct Listing {
    /// The tools, as listed (empty when the target failed).
    pub tools: Vec<ToolInfo>,
    /// How the target was started and torn down (lifecycle record for containers).
    pub execution: Value,
    /// What went wrong starting, listing or tearing down (empty: all went well).
    pub problems: Vec<String>,
}

/// A fresh run id for [`Probe::run_id`].
pub fn new_run_id() -> String {
    run_id()
}

/// Start one target the way a trial would (no sink: sink values point nowhere), list its
/// tools and tear it down. Used by preflight and by `elengtis init`.
pub async fn list_tools(probe: Probe<'_>) -> Listing {
    let Probe { target, bindings, campaign_dir, templates, limits, run_id, sandbox } = probe;
    if let Transport::Rest(_) = &target.transport {
        return Listing { tools: Vec::new(), execution: Value::Null, problems: vec![rest_has_no_tools(&target.id)] };
    }
    let dir = match tempfile::Builder::new().prefix("elengtis-preflight-").tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            return Listing {
                tools: Vec::new(),
                execution: Value::Null,
                problems: vec![format!("failed to create a temporary directory: {e}")],
            };
        }
    };
    let mut values = Values::default();
    values.runner.insert("canary".into(), json!("ELENGTIS-PREFLIGHT"));
    values.runner.insert("trial_dir".into(), json!(dir.path().display().to_string()));
    values.runner.insert("collector".into(), json!(dir.path().join("collector.jsonl").display().to_string()));
    values.runner.insert("evidence_dir".into(), json!(dir.path().display().to_string()));
    values.runner.insert("trial_id".into(), json!(format!("{}--preflight--0", target.id)));
    let attempt_id = attempt_id();
    values.runner.insert("attempt_id".into(), json!(attempt_id));
    values.bindings = bindings;
    let trial_id = format!("{}--preflight--0", target.id);
    // Preflight starts no sink; sink values point nowhere.
    values.runner.insert("sink_url".into(), json!("http://192.0.2.1:9"));
    values.runner.insert("sink_direct_url".into(), json!("http://192.0.2.1:9"));
    values.runner.insert("sink_requests".into(), json!("http://192.0.2.1:9"));
    let controls = target.control_launch();
    let context = OpenContext {
        run_id,
        trial_id: &trial_id,
        attempt_id: &attempt_id,
        sandbox,
        needs_sink: false,
        // The target's command line may name the gateway; the sandbox reports it.
        needs_gateway: elengtis_core::decisive::names_runner_value(
            &[&serde_json::to_value(&target.transport).unwrap_or_default()],
            &[],
            &[elengtis_core::decisive::NETWORK_GATEWAY],
        ),
        sink_server: None,
        egress_proxy: None,
        target_id: &target.id,
        campaign_dir,
        trial_dir: Some(dir.path()),
        results_dir: None,
        args_templates: templates,
        controls: &controls,
    };
    let opened = launch::open_target(context, &target.transport, &mut values, limits).await;
    let listed = match &opened.session {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(session)) => session
            .list_tools()
            .await
            .map_err(|e| e.to_string())
            .map(|t| t.iter().map(crate::toolhost::mcp::tool_info).collect::<Vec<_>>()),
        Err(e) => Err(e.clone()),
    };
    let (execution, _, teardown) = launch::close_target(opened).await;
    let mut problems = Vec::new();
    let tools = match listed {
        Ok(tools) => tools,
        Err(e) => {
            problems.push(e);
            Vec::new()
        }
    };
    problems.extend(teardown.iter().map(|e| format!("teardown: {e}")));
    Listing { tools, execution, problems }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::docker::container::object_name;

    #[test]
    fn two_preflights_name_their_objects_apart() {
        // Before, every preflight was `elengtis-prefligh-prefligh`: a second one on the same
        // engine failed with HTTP 409 (name in use).
        let first = object_name(&run_id(), &attempt_id());
        let second = object_name(&run_id(), &attempt_id());
        assert_ne!(first, second);
        assert!(first.starts_with("elengtis-prefligh-") && first.len() == "elengtis-prefligh-".len() + 8, "{first}");
        // Two targets of one invocation too.
        let run = run_id();
        assert_ne!(object_name(&run, &attempt_id()), object_name(&run, &attempt_id()));
    }

    fn failed(execution: Value) -> TargetCheck {
        TargetCheck {
            target: "py".into(),
            transport: "stdio",
            ok: false,
            tools: Vec::new(),
            tool_list: Vec::new(),
            problems: vec!["failed to initialize the MCP session: the server closed the connection".into()],
            findings: Vec::new(),
            warning: None,
            execution,
        }
    }

    #[test]
    fn text_output_shows_the_tail_of_a_failed_servers_stderr() {
        let stderr: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let check = failed(json!({"close": {"stderr": {"text": stderr}, "exit": "exit status 1"}}));
        let text = check.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("py: stdio target preflight FAILED: failed to initialize"), "{text}");
        assert_eq!(lines[1], "  stderr of py (last 20 of 30 lines, exit status 1):");
        assert_eq!(lines[2], "    line 11");
        assert_eq!(lines.last().copied(), Some("    line 30"));
        assert_eq!(lines.len(), 22);
        // Nothing written, or a passing check: the one line.
        assert_eq!(failed(json!({"close": {"errors": []}})).render().lines().count(), 1);
        let mut ok = failed(json!({"close": {"stderr": {"text": "noise\n"}}}));
        ok.ok = true;
        assert_eq!(ok.render().lines().count(), 1);
    }
}
