//! `elengtis init`: start a server the way `elengtis preflight` does ([`crate::preflight::list_tools`]),
//! list its tools, and write a commented campaign, negative control and scenario skeleton
//! that `elengtis validate` accepts and `elengtis run` runs as written (docs/init.md).
//!
//! - [`plan`] decides what the skeleton holds (bindings, the first scripted call, the checks);
//! - [`args`] derives typed placeholder arguments from a tool's `inputSchema`;
//! - [`egress`] is the heuristic for egress-shaped tools (which get a canary sink);
//! - [`yaml`] writes the files' text.
//!
//! The engine never prints: [`Written::summary`] is what the binary shows.

pub mod args;
pub mod cli;
pub mod egress;
pub mod plan;
pub mod yaml;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use elengtis_core::format::Severity;
use elengtis_core::format::campaign::{ContainerMcp, ContainerTransport, StdioTransport, Target, Transport};
use elengtis_core::refs::Templates;
use elengtis_core::toolargs::{self, ListedTool};
use elengtis_core::validate::LoadOptions;
use serde_json::Value;

use crate::preflight::{self, Probe, TargetCheck};
use crate::sandbox::{ImageNeed, RunNeeds, SandboxBackend};
use crate::toolhost::mcp::Limits;

pub use self::plan::{ImageTransport, Plan, TargetSpec};

/// Why `init` wrote nothing (or wrote files that do not load).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The description of the target cannot be used.
    #[error("{0}")]
    Usage(String),
    /// Files it would write exist and `--force` was not given.
    #[error("failed to write the skeleton into {}: {} already exist{} (pass --force to overwrite)", .dir.display(), .files.join(", "), if .files.len() == 1 { "s" } else { "" })]
    Exists {
        /// The output directory.
        dir: PathBuf,
        /// The existing files' names.
        files: Vec<String>,
    },
    /// The target did not start or list its tools.
    #[error("failed to start target {target} and list its tools: {report}")]
    Start {
        /// The target id.
        target: String,
        /// Preflight's report: the problems and the tail of the server's stderr.
        report: String,
    },
    /// The output directory could not be created.
    #[error("failed to create the output directory {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] crate::results::store::StoreError),
    /// The written skeleton does not load: a defect of `init`, reported rather than hidden.
    #[error("failed to load the skeleton init wrote ({}); please report this", .path.display())]
    Invalid {
        /// The campaign written.
        path: PathBuf,
        /// The loader's error.
        #[source]
        source: elengtis_core::format::LoadError,
    },
}

/// What to write, and where.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The target.
    pub spec: TargetSpec,
    /// Its id in the campaign (default: from the image or command name).
    pub target_id: Option<String>,
    /// The scenario id (and file stem).
    pub scenario_id: String,
    /// The output directory (created if missing).
    pub out: PathBuf,
    /// Overwrite existing files.
    pub force: bool,
}

/// What `init` wrote.
#[derive(Debug)]
pub struct Written {
    /// The decisions behind the files.
    pub plan: Plan,
    /// The files, campaign first.
    pub files: Vec<PathBuf>,
    /// Warnings: the start's caution, the loader's warnings, argument findings.
    pub warnings: Vec<String>,
}

impl Written {
    /// The text the binary prints: the files, what is in them, and the next commands.
    pub fn summary(&self) -> String {
        let plan = &self.plan;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} lists {} tool{}.",
            plan.target_id,
            plan.tools.len(),
            if plan.tools.len() == 1 { "" } else { "s" }
        );
        out.push_str("Wrote:\n");
        for file in &self.files {
            let _ = writeln!(out, "  {}", file.display());
        }
        if let Some(call) = &plan.call {
            let _ = writeln!(out, "The script's first call: {} ({}).", call.tool.name, call.why);
        }
        let mut checks = Vec::new();
        if !plan.egress.is_empty() {
            checks.push(format!("canary sink (egress-shaped: {})", plan.egress.join(", ")));
        }
        if let Some(db) = &plan.database {
            checks.push(match &plan.sql_table {
                Some(table) => format!("SQLite query of {db} (rows of {table} holding the canary)"),
                None => format!("SQLite query of {db} (EDIT its query to count the rows the attack writes)"),
            });
        }
        if let Some(file) = &plan.file {
            checks.push(format!("the file {file} in the container"));
        }
        if !plan.read_back.is_empty() {
            let names: Vec<&str> = plan.read_back.iter().map(|r| r.tool.name.as_str()).collect();
            checks.push(format!("read-back through {} (trusts the target)", names.join(" or ")));
        }
        for call in &plan.setup {
            let _ = writeln!(out, "Setup: {} ({}).", call.tool.name, call.why);
        }
        if checks.is_empty() {
            out.push_str("Verify checks: none fits (completed stays null until you add one).\n");
        } else {
            let _ = writeln!(out, "Verify checks: {}.", checks.join("; "));
        }
        let campaign = self.files.first().map(|p| p.display().to_string()).unwrap_or_default();
        let control = self.files.get(1).map(|p| p.display().to_string()).unwrap_or_default();
        let dir = plan_dir(&self.files);
        out.push_str("Next:\n");
        let _ = writeln!(out, "  elengtis validate {campaign}");
        let _ = writeln!(out, "  elengtis preflight {campaign}");
        let _ = writeln!(out, "  elengtis run --config {campaign} --out {}", dir.join("results").display());
        let _ = writeln!(
            out,
            "  elengtis run --config {control} --out {}   # {}",
            dir.join("results-control").display(),
            yaml::control_expectation(plan)
        );
        let _ = writeln!(
            out,
            "  elengtis analyze --input {} --input {} --out {}   # the attack and its control, side by side",
            dir.join("results").display(),
            dir.join("results-control").display(),
            dir.join("analysis").display()
        );
        out
    }
}

fn plan_dir(files: &[PathBuf]) -> PathBuf {
    files.first().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default()
}

/// The campaign target for a description (no bindings yet).
pub fn target(id: &str, spec: &TargetSpec) -> Target {
    let transport = match spec {
        TargetSpec::Stdio { command, args } => Transport::Stdio(StdioTransport {
            command: command.clone(),
            args: args.iter().map(|a| Value::String(a.clone())).collect(),
            env: BTreeMap::new(),
            sandbox: None,
        }),
        TargetSpec::Image { image, transport, uid, gid, command, volumes, runtime, .. } => {
            let (mcp_transport, container_port, path) = match transport {
                ImageTransport::Stdio => (ContainerMcp::Stdio, None, "/mcp".to_owned()),
                ImageTransport::StreamableHttp { port, path } => {
                    (ContainerMcp::StreamableHttp, Some(u32::from(*port)), path.clone())
                }
            };
            Transport::IsolatedContainer(ContainerTransport {
                image: image.clone(),
                container_port,
                mcp_transport,
                uid: *uid,
                gid: *gid,
                command: command.iter().map(|a| Value::String(a.clone())).collect(),
                env: BTreeMap::new(),
                path,
                startup_timeout_seconds: 30,
                relay_image: None,
                volumes: volumes.clone(),
                runtime: runtime.clone(),
            })
        }
    };
    Target {
        id: id.to_owned(),
        transport,
        bindings: BTreeMap::new(),
        control_shim: None,
        egress_proxy: None,
        control_env: BTreeMap::new(),
        control_args: BTreeMap::new(),
        controls_on: Vec::new(),
    }
}

/// What the sandbox must provide for this target (None: no container).
pub fn sandbox_needs(spec: &TargetSpec) -> Option<RunNeeds> {
    match spec {
        TargetSpec::Image { image, transport, runtime, .. } => Some(RunNeeds {
            images: vec![ImageNeed {
                image: image.clone(),
                http: matches!(transport, ImageTransport::StreamableHttp { .. }),
                relay_image: None,
                runtime: runtime.clone(),
                egress_proxy: false,
            }],
            sink: false,
        }),
        TargetSpec::Stdio { .. } => None,
    }
}

/// Start the target, list its tools, write the skeleton and load it back.
pub async fn run(options: &InitOptions, sandbox: Option<&dyn SandboxBackend>) -> Result<Written, InitError> {
    let target_id = options.target_id.clone().unwrap_or_else(|| options.spec.default_id());
    if !is_id(&target_id) {
        return Err(InitError::Usage(format!(
            "failed to use the target id {target_id:?}: it must match ^[a-z0-9][a-z0-9_-]*$"
        )));
    }
    if !is_id(&options.scenario_id) {
        return Err(InitError::Usage(format!(
            "failed to use the scenario id {:?}: it must match ^[a-z0-9][a-z0-9_-]*$",
            options.scenario_id
        )));
    }
    let names = [yaml::CAMPAIGN.to_owned(), yaml::CONTROL.to_owned(), format!("{}.yaml", options.scenario_id)];
    let existing: Vec<String> =
        names.iter().filter(|n| options.out.join(n).symlink_metadata().is_ok()).cloned().collect();
    if !existing.is_empty() && !options.force {
        return Err(InitError::Exists { dir: options.out.clone(), files: existing });
    }
    let target = target(&target_id, &options.spec);
    let mut warnings: Vec<String> = preflight::start_warning(&target).into_iter().collect();
    let campaign_dir = if options.out.is_dir() { options.out.clone() } else { PathBuf::from(".") };
    let tools = list_tools(&target, &campaign_dir, sandbox).await?;
    let plan = plan::plan(&target_id, options.spec.clone(), &options.scenario_id, &tools);
    std::fs::create_dir_all(&options.out)
        .map_err(|source| InitError::CreateDir { path: options.out.clone(), source })?;
    let texts = [yaml::campaign(&plan, false), yaml::campaign(&plan, true), yaml::scenario(&plan)];
    let mut files = Vec::new();
    for (name, text) in names.iter().zip(texts) {
        let path = options.out.join(name);
        crate::results::store::write_atomic(&path, text.as_bytes())?;
        files.push(path);
    }
    // Load what was written, as `validate` does, and check its calls against the listing.
    for path in &files[..2] {
        let bundle = elengtis_core::load::load_campaign(path, &LoadOptions::default())
            .map_err(|source| InitError::Invalid { path: path.clone(), source })?;
        warnings.extend(bundle.warnings.iter().map(ToString::to_string));
        let listed: Vec<ListedTool> = tools
            .iter()
            .map(|t| ListedTool { name: t.name.clone(), input_schema: Value::Object(t.input_schema.clone()) })
            .collect();
        for target in &bundle.campaign.value.targets {
            for finding in toolargs::check(&bundle, target, &listed) {
                if finding.severity == Severity::Error || path == &files[0] {
                    warnings.push(finding.to_string());
                }
            }
        }
    }
    Ok(Written { plan, files, warnings })
}

/// Start `target` the way `preflight` does and list its tools; a target that does not start or
/// list them is [`InitError::Start`] with preflight's report (`init` and `scan` share it).
pub async fn list_tools(
    target: &Target,
    campaign_dir: &Path,
    sandbox: Option<&dyn SandboxBackend>,
) -> Result<Vec<elengtis_core::agent::ToolInfo>, InitError> {
    let run_id = preflight::new_run_id();
    let listing = preflight::list_tools(Probe {
        target,
        bindings: serde_json::Map::new(),
        campaign_dir,
        // Version 2: a scan's target may name runner values in string templates.
        templates: Templates::for_version(2),
        limits: Limits::default(),
        run_id: &run_id,
        sandbox,
    })
    .await;
    if listing.problems.is_empty() {
        return Ok(listing.tools);
    }
    let check = TargetCheck {
        target: target.id.clone(),
        transport: target.transport.kind(),
        ok: false,
        tools: Vec::new(),
        tool_list: Vec::new(),
        problems: listing.problems,
        findings: Vec::new(),
        warning: None,
        execution: listing.execution,
    };
    Err(InitError::Start { target: target.id.clone(), report: check.render().trim_end().to_owned() })
}

fn is_id(id: &str) -> bool {
    id.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use elengtis_core::agent::ToolInfo;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.to_owned(),
            description: format!("{name}: \"quoted\" # not a comment\n{{braces}}"),
            input_schema: schema.as_object().cloned().unwrap_or_default(),
            listing: Value::Null,
        }
    }

    /// Write the skeleton of `tools` and load both campaigns as `validate` does.
    fn loads(spec: TargetSpec, tools: &[ToolInfo]) -> Plan {
        let dir = tempfile::tempdir().unwrap();
        let plan = plan::plan("t", spec, "first-call", tools);
        std::fs::write(dir.path().join(yaml::CAMPAIGN), yaml::campaign(&plan, false)).unwrap();
        std::fs::write(dir.path().join(yaml::CONTROL), yaml::campaign(&plan, true)).unwrap();
        std::fs::write(dir.path().join(yaml::scenario_file(&plan)), yaml::scenario(&plan)).unwrap();
        for name in [yaml::CAMPAIGN, yaml::CONTROL] {
            let path = dir.path().join(name);
            let bundle = elengtis_core::load::load_campaign(&path, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{name} does not load: {e:?}\n{}", std::fs::read_to_string(&path).unwrap()));
            // The calls and examples fit the listed schemas (what `validate --tools` checks).
            let listed: Vec<ListedTool> = tools
                .iter()
                .map(|t| ListedTool { name: t.name.clone(), input_schema: Value::Object(t.input_schema.clone()) })
                .collect();
            let errors: Vec<String> = toolargs::check(&bundle, &bundle.campaign.value.targets[0], &listed)
                .into_iter()
                .filter(|f| f.severity == Severity::Error)
                .map(|f| f.to_string())
                .collect();
            assert!(errors.is_empty(), "{name}: {errors:?}");
        }
        plan
    }

    fn stdio() -> TargetSpec {
        TargetSpec::Stdio { command: "srv".into(), args: vec!["--db".into(), "yes".into(), "14:30".into()] }
    }

    #[test]
    fn skeletons_of_every_shape_load_as_written() {
        let send = tool(
            "send-Webhook",
            json!({"type": "object", "properties": {"target_url": {"type": "string", "format": "uri"}, "payload": {"type": "string"}, "retries": {"type": "integer", "minimum": 0, "maximum": 5}}, "required": ["target_url", "retries"]}),
        );
        let list = tool("list.items", json!({"type": "object", "properties": {}}));
        let read = tool(
            "read_item",
            json!({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]}),
        );
        let mode = tool(
            "set_mode",
            json!({"type": "object", "properties": {"mode": {"enum": ["on", "off"]}}, "required": ["mode"]}),
        );
        // Egress with a URL: the sink.
        let plan = loads(stdio(), &[list.clone(), send.clone(), read.clone()]);
        assert_eq!(plan.egress, ["send-Webhook"]);
        // No egress, a list tool: read-back.
        assert!(!loads(stdio(), &[read.clone(), list.clone()]).read_back.is_empty());
        // An image with a database and an HTTP transport.
        let image = TargetSpec::Image {
            image: "example/srv:1.0".into(),
            transport: ImageTransport::StreamableHttp { port: 8000, path: "/mcp".into() },
            uid: 1000,
            gid: 1000,
            command: vec!["--port".into(), "8000".into()],
            volumes: vec!["/data".into()],
            database: Some("/data/app.db".into()),
            runtime: Some("runsc".into()),
        };
        assert_eq!(loads(image, &[read.clone(), mode.clone()]).database.as_deref(), Some("/data/app.db"));
        // No check fits; a tool without free text; a single tool; no tool at all.
        assert!(!loads(stdio(), &[mode.clone(), read.clone()]).has_checks());
        loads(stdio(), &[mode]);
        loads(stdio(), &[]);
    }
}
