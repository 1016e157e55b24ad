//! The campaign file: run settings, targets and the scenario files they are tested against.
//!
//! Every type here mirrors the v1 campaign schema of the original tool field for field
//! (same names, defaults and ranges); fields added by elengtis are optional and say so.
//! Parsing is strict (`deny_unknown_fields`); range and cross-field rules are checked in
//! [`super::validate`], which knows the file positions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::script::Script;
use super::seed::Weakness;

/// A campaign: targets × scenarios × trials.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Campaign")]
pub struct Campaign {
    /// Format version: 1 (the original tool's format) or 2 (the same, with one-key
    /// `{template: "…"}` maps in free-form values read as string templates).
    #[schemars(range(min = 1, max = 2))]
    #[serde(deserialize_with = "super::schema_version")]
    pub schema_version: u32,
    /// Trials per target × scenario pair (1–100).
    #[serde(default = "default_trials")]
    #[schemars(range(min = 1, max = 100))]
    pub trials: u32,
    /// Maximum model turns per trial (1–100).
    #[serde(default = "default_step_budget")]
    #[schemars(range(min = 1, max = 100))]
    pub step_budget: u32,
    /// The agent loop that drives the model (the format calls it the orchestration engine).
    #[serde(default)]
    pub engine: LoopKind,
    /// Run only declarative setup, verification and cleanup actions; no model.
    #[serde(default)]
    pub model_free: bool,
    /// Live model name; null means the deterministic scripted model.
    #[serde(default)]
    pub model: Option<String>,
    /// Provider route of a live model (copied into `generation.route` when that is absent).
    #[serde(default)]
    pub provider_route: Option<String>,
    /// Generation settings of a live model.
    #[serde(default)]
    pub generation: Map<String, Value>,
    /// elengtis addition: the provider that serves a live `model`. Absent means OpenRouter
    /// (the original's only path), so a campaign written for the original keeps its meaning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// Experiment label carried into results.
    #[serde(default)]
    pub experiment_id: Option<String>,
    /// Model label used to group results in `analyze`.
    #[serde(default)]
    pub model_id: Option<String>,
    /// Block number of a blocked experiment design.
    #[serde(default)]
    pub block: Option<u64>,
    /// Order within a block.
    #[serde(default)]
    pub order: Option<u64>,
    /// The MCP servers under test (at least one).
    #[schemars(length(min = 1))]
    pub targets: Vec<Target>,
    /// Scenario files, relative to this campaign file (at least one).
    #[schemars(length(min = 1))]
    pub scenarios: Vec<String>,
    /// elengtis addition: the deterministic script the `reference` engine follows when no
    /// live model is configured. Absent means the built-in `comply` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Script>,
    /// elengtis addition: take verifier sightings during the exercise — the scenario's
    /// verify checks run at chosen moments, each recorded with its time in the evidence's
    /// `timeline` — so an effect can be ordered against the calls. Absent: none. `prove` sets
    /// it to sight the moment its payload reaches the model; each sighting costs one run of
    /// the checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sightings: Option<Sightings>,
}

/// When a campaign's trials take verifier sightings (`sightings: {}`: before the agent loop
/// and after every call).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sightings {
    /// Once before the agent loop begins (after the setup). Default true.
    #[serde(default = "yes")]
    pub before_exercise: bool,
    /// After a call's answer comes back from the target (before the model sees it) only when
    /// the answer carries one of these literals — the moments a planted payload can reach the
    /// model; `[]`: after no call. Absent: after every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_results_carrying: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

impl Sightings {
    /// Whether a call whose answer is `answer` is sighted after.
    pub fn after(&self, answer: &Value) -> bool {
        fn carries(value: &Value, literal: &str) -> bool {
            match value {
                Value::String(s) => s.contains(literal),
                Value::Array(items) => items.iter().any(|v| carries(v, literal)),
                Value::Object(map) => map.values().any(|v| carries(v, literal)),
                _ => false,
            }
        }
        match &self.after_results_carrying {
            None => true,
            Some(literals) => literals.iter().any(|l| !l.is_empty() && carries(answer, l)),
        }
    }
}

fn default_trials() -> u32 {
    1
}

fn default_step_budget() -> u32 {
    4
}

/// The agent loops the format's `engine` setting names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoopKind {
    /// The deterministic baseline loop: sequential tool calls (see docs/engines.md).
    #[default]
    Reference,
    /// An explicit state machine (LangGraph-style): sequential dispatch, a recovery
    /// transition after a tool error, the transitions recorded.
    Graph,
    /// The adapter-control condition: the graph over LangChain's MCP and message adapters.
    Langchain,
    /// LangChain `create_agent`'s default behaviour: a turn's calls run concurrently, a model
    /// call limit ends the run.
    CreateAgent,
}

impl LoopKind {
    /// The name used in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopKind::Reference => "reference",
            LoopKind::Graph => "graph",
            LoopKind::Langchain => "langchain",
            LoopKind::CreateAgent => "create_agent",
        }
    }
}

impl std::fmt::Display for LoopKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for LoopKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reference" => Ok(LoopKind::Reference),
            "graph" => Ok(LoopKind::Graph),
            "langchain" => Ok(LoopKind::Langchain),
            "create_agent" => Ok(LoopKind::CreateAgent),
            other => {
                Err(format!("unknown engine `{other}`, expected one of reference, graph, langchain, create_agent"))
            }
        }
    }
}

/// elengtis addition: the provider of a live model (the wire format, where it is and how to
/// authenticate). Keys and header values are `{env: NAME}` references, read from the runner's
/// environment when each request is made and never written anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// Which service and wire format: `openrouter` (OpenAI Chat Completions with OpenRouter's
    /// extras), `openai_compatible` (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, LiteLLM…) or
    /// `anthropic` (the Messages API).
    #[serde(rename = "type")]
    pub kind: ProviderKind,
    /// Base URL (`…/v1` for the OpenAI wire, the host for Anthropic). Default: OpenRouter's
    /// (or `OPENROUTER_API_BASE`), `https://api.openai.com/v1`, `https://api.anthropic.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The API key's variable. Default: `OPENROUTER_API_KEY` (openrouter), `ANTHROPIC_API_KEY`
    /// (anthropic), none (openai_compatible: no `Authorization` header, as local servers need).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<EnvRef>,
    /// Extra request headers; every value comes from the environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, EnvRef>,
    /// Most requests in flight to this provider at once, over the whole run (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub max_in_flight: Option<u32>,
    /// First retry delay in milliseconds, doubled per retry, with jitter (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 60000))]
    pub backoff_ms: Option<u64>,
}

/// The providers a live model can be served by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenRouter (the original's only live path).
    #[default]
    Openrouter,
    /// Any endpoint speaking OpenAI Chat Completions.
    OpenaiCompatible,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The name used in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openrouter => "openrouter",
            ProviderKind::OpenaiCompatible => "openai_compatible",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openrouter" => Ok(ProviderKind::Openrouter),
            "openai_compatible" => Ok(ProviderKind::OpenaiCompatible),
            "anthropic" => Ok(ProviderKind::Anthropic),
            other => {
                Err(format!("unknown provider `{other}`, expected one of openrouter, openai_compatible, anthropic"))
            }
        }
    }
}

impl Campaign {
    /// The provider kind of the campaign's live model (OpenRouter when none is named).
    pub fn provider_kind(&self) -> ProviderKind {
        self.provider.as_ref().map(|p| p.kind).unwrap_or_default()
    }
}

/// One MCP server under test.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Identifier, `^[a-z0-9][a-z0-9_-]*$`, unique in the campaign.
    pub id: String,
    /// How to reach the server.
    pub transport: Transport,
    /// For each scenario id, the concrete values of the scenario's logical bindings.
    pub bindings: BTreeMap<String, Map<String, Value>>,
    /// This tool's addition: a control shim at the MCP boundary between the model and this
    /// target (a synthesised guarded side for a single-build target, see docs/shim.md). Only
    /// the model's view passes it: setup, verify and cleanup actions and the target's own
    /// start-up arguments (the plant) bypass it by construction. Absent: no shim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_shim: Option<ControlShim>,
    /// This tool's addition (`isolated_container` targets only): an allowlisting egress proxy
    /// on the trial network, W3 enforced on the network (docs/security.md, "The egress
    /// proxy"). The canary sink moves to a second internal network shared only with the
    /// proxy; the `route` hosts resolve to the proxy on the trial network; it forwards a
    /// request to the sink only when its destination host is on `allow`, and refuses (403)
    /// and records every other. Absent: no proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_proxy: Option<EgressProxy>,
    /// This tool's addition: the target's own controls (its safeguards in server code), each
    /// named and switched on by environment variables — the original's `control_env`:
    /// control name → `{VARIABLE: value}`. `prove` runs the guarded side with every declared
    /// control on and the vulnerable side with all off; `ablate` switches them one at a time
    /// (docs/prove.md, "Your own server").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub control_env: BTreeMap<String, BTreeMap<String, String>>,
    /// This tool's addition: command-line arguments that switch a control on (control name →
    /// arguments appended to the stdio `args` or the container `command`), for servers whose
    /// controls are flags. A control may have both variables and arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub control_args: BTreeMap<String, Vec<String>>,
    /// This tool's addition: which declared controls are on when the target starts (default:
    /// none — the target as written). `prove` and `ablate` set it per side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controls_on: Vec<String>,
}

/// What the controls a target starts with add to its launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlLaunch {
    /// The controls switched on, in `controls_on` order.
    pub on: Vec<String>,
    /// Their environment variables.
    pub env: Vec<(String, String)>,
    /// Their arguments, appended in order.
    pub args: Vec<String>,
}

impl Target {
    /// Every declared control (of `control_env` and `control_args`), sorted.
    pub fn declared_controls(&self) -> Vec<String> {
        let mut names: Vec<String> = self.control_env.keys().chain(self.control_args.keys()).cloned().collect();
        names.sort();
        names.dedup();
        names
    }

    /// What `controls_on` adds to the launch (undeclared names are left out: validation
    /// refuses them).
    pub fn control_launch(&self) -> ControlLaunch {
        let mut launch = ControlLaunch::default();
        for name in &self.controls_on {
            let env = self.control_env.get(name);
            let args = self.control_args.get(name);
            if env.is_none() && args.is_none() {
                continue;
            }
            launch.on.push(name.clone());
            launch.env.extend(env.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
            launch.args.extend(args.into_iter().flatten().cloned());
        }
        launch
    }
}

/// The egress proxy of an `isolated_container` target.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressProxy {
    /// The destination hosts the proxy forwards (exact, case-insensitive; no wildcards, no
    /// suffix matching). May be empty: everything is refused.
    pub allow: Vec<String>,
    /// Host names that resolve to the proxy on the trial network (DNS aliases), besides
    /// `egress-proxy` itself. Default: the `allow` hosts. A host in neither list has no route
    /// at all (the network is internal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Vec<String>>,
}

impl EgressProxy {
    /// The hosts that resolve to the proxy: `route`, else `allow`.
    pub fn routed(&self) -> Vec<String> {
        self.route.clone().unwrap_or_else(|| self.allow.clone())
    }
}

/// The control shim of a target (docs/shim.md). Each tool is classified per axis (read,
/// egress, consequential, destructive) in this order: a declared list below (final for its
/// axis when present), MCP annotations (`readOnlyHint`, `destructiveHint`, `openWorldHint`),
/// for egress a destination-shaped argument, whole-word name-token hints, and otherwise
/// guarded (fail-closed, with a note suggesting a declaration).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlShim {
    /// The controls applied: W1 description pinning and sanitising, W2 information-flow gate,
    /// W3 egress allowlist, W4 confirm gate.
    pub controls: Vec<Weakness>,
    /// The egress tools (W3; W2 sinks); when given, final: no other tool is egress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_tools: Option<Vec<String>>,
    /// The argument holding an egress tool's destination; without it every argument is
    /// searched for URLs, host names and addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_url_param: Option<String>,
    /// The hosts an egress tool may reach (exact, case-insensitive). Default: `localhost`,
    /// `127.0.0.1`, `example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_allowlist: Option<Vec<String>>,
    /// The consequential tools (W4; W2 sinks); when given, final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequential_tools: Option<Vec<String>>,
    /// The tools whose results are untrusted content (W2 sources); when given, final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_tool_names: Option<Vec<String>>,
    /// Sinks that may run after untrusted content was read (W2), unless the session holds
    /// private content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepts_untrusted_tools: Vec<String>,
    /// Tools whose results are private (W2: no sink may run after one was read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_tools: Vec<String>,
    /// Literal strings that make a result private (W2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_markers: Vec<String>,
    /// The destructive tools (W2 sinks); when given, final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_tools: Option<Vec<String>>,
    /// Tool name → SHA-256 (hex) of its raw description (W1): a listed description that does
    /// not match makes every call of that tool refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub description_pins: BTreeMap<String, String>,
    /// What a control does with a call it would refuse: `block` (refuse, the default),
    /// `approve` (ask the approval policy) or `observe` (let it through and record it).
    #[serde(default)]
    pub enforcement_mode: EnforcementMode,
    /// Who approves in `approve` mode: `deny_all` (the default) or `approve_when_trusted`
    /// (approve while the session holds no untrusted content).
    #[serde(default)]
    pub approval_policy: ApprovalPolicy,
}

/// What a shim control does with a call it would refuse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnforcementMode {
    /// Refuse it.
    #[default]
    Block,
    /// Ask the approval policy.
    Approve,
    /// Let it through and record what would have been refused.
    Observe,
}

impl EnforcementMode {
    /// `block`, `approve` or `observe`.
    pub fn as_str(self) -> &'static str {
        match self {
            EnforcementMode::Block => "block",
            EnforcementMode::Approve => "approve",
            EnforcementMode::Observe => "observe",
        }
    }
}

/// Who approves a call in `approve` mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Nobody: every request is denied.
    #[default]
    DenyAll,
    /// Approved while the session has read no untrusted content.
    ApproveWhenTrusted,
}

impl ApprovalPolicy {
    /// `deny_all` or `approve_when_trusted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::DenyAll => "deny_all",
            ApprovalPolicy::ApproveWhenTrusted => "approve_when_trusted",
        }
    }
}

/// How the runner reaches a target, chosen by `type`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(tag = "type")]
pub enum Transport {
    /// A fresh child process per trial, speaking MCP over stdin/stdout.
    #[serde(rename = "stdio")]
    Stdio(StdioTransport),
    /// An externally managed server reached over MCP Streamable HTTP.
    #[serde(rename = "streamable_http")]
    StreamableHttp(HttpTransport),
    /// A fresh hardened container per trial on an internal network.
    #[serde(rename = "isolated_container")]
    IsolatedContainer(ContainerTransport),
    /// elengtis addition: a black-box agent behind an HTTP endpoint (a message in, a reply
    /// out), externally managed. Nothing is launched and no MCP session is opened: the
    /// exercise posts the scenario's user prompt and records the reply.
    #[serde(rename = "rest")]
    Rest(RestTransport),
}

impl Transport {
    /// The `type` value of this transport.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "stdio",
            Transport::StreamableHttp(_) => "streamable_http",
            Transport::IsolatedContainer(_) => "isolated_container",
            Transport::Rest(_) => "rest",
        }
    }
}

impl Serialize for Transport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Transport::Stdio(t) => super::tagged(self.kind(), t, serializer),
            Transport::StreamableHttp(t) => super::tagged(self.kind(), t, serializer),
            Transport::IsolatedContainer(t) => super::tagged(self.kind(), t, serializer),
            Transport::Rest(t) => super::tagged(self.kind(), t, serializer),
        }
    }
}

/// `{env: NAME}`: a value read from the runner's environment when the trial starts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvRef {
    /// Variable name, `^[A-Z_][A-Z0-9_]*$`.
    #[schemars(regex(pattern = r"^[A-Z_][A-Z0-9_]*$"))]
    pub env: String,
}

/// A local server started as a child process for each trial.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdioTransport {
    /// Program to run (never through a shell). A bare name is looked up in `PATH`;
    /// names starting with `elengtis-` are looked up beside the elengtis executable first.
    pub command: String,
    /// Arguments; each may be a typed reference such as `{runner: canary}` (and, in a
    /// schema_version 2 campaign, a string template such as `{template: "--id={canary}"}`).
    #[serde(default)]
    pub args: Vec<Value>,
    /// Extra environment variables for the child, from the runner's environment.
    #[serde(default)]
    pub env: BTreeMap<String, EnvRef>,
    /// Opt-in light sandbox (Linux only): applied before the program starts; a requested
    /// confinement that cannot be applied fails the trial (never runs unconfined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<StdioSandbox>,
}

/// The light sandbox of a stdio target: an empty network namespace, Landlock write (and TCP)
/// rules, no capabilities, no-new-privileges and resource limits. Weaker than
/// `isolated_container` (same kernel, same filesystem view, reads allowed): see
/// docs/security.md.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdioSandbox {
    /// `none` (default): an empty network namespace (no interfaces but a down loopback) and,
    /// where Landlock has it, TCP bind and connect denied. `host`: the runner's network.
    #[serde(default)]
    pub network: StdioNetwork,
    /// Paths the target may write under besides its fresh per-trial scratch directory (its
    /// working directory, `HOME` and `TMPDIR`); relative paths are relative to the campaign
    /// file. Each must exist when the trial starts. Everything else is read-only.
    #[serde(default)]
    pub writable: Vec<String>,
    /// Address-space limit in MiB (`RLIMIT_AS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16))]
    pub memory_mb: Option<u64>,
    /// Most open file descriptors (`RLIMIT_NOFILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16))]
    pub max_open_files: Option<u64>,
    /// CPU seconds (`RLIMIT_CPU`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cpu_seconds: Option<u64>,
    /// Largest file the target may write, in MiB (`RLIMIT_FSIZE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_file_mb: Option<u64>,
}

/// The network of a sandboxed stdio target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StdioNetwork {
    /// An empty network namespace; TCP bind/connect denied by Landlock where available.
    #[default]
    None,
    /// The runner's network (only the filesystem, capabilities and limits are confined).
    Host,
}

/// A remote server reached over Streamable HTTP (externally managed).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpTransport {
    /// The MCP endpoint URL.
    pub url: String,
    /// Request headers; every value comes from the environment.
    #[serde(default)]
    pub headers: BTreeMap<String, EnvRef>,
}

/// elengtis addition: an agent (not an MCP server) reached over HTTP, externally managed. Each
/// trial POSTs one JSON message `{"<message_field>": "<user prompt>"}` to `url` and reads the
/// reply text at `reply_path` in the JSON answer. There are no tool calls to record: the reply
/// is all there is. The scenario's system prompt is not sent (the endpoint has its own) and the
/// campaign's model is not asked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestTransport {
    /// Where the message is POSTed. Without `container`: the endpoint's absolute URL (http or
    /// https). With `container`: the path on the container (starting with `/`, for example
    /// `/chat`), POSTed to at the address the runner has for the container's port.
    pub url: String,
    /// Request headers; every value comes from the environment, is read when each request is
    /// made and is never written anywhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, EnvRef>,
    /// The request body's field that carries the user prompt (default `message`).
    #[serde(default = "default_message_field")]
    #[schemars(length(min = 1))]
    pub message_field: String,
    /// Where the reply text is in the JSON answer: an RFC 6901 pointer starting with `/`
    /// (for example `/reply/text`). An answer without a string there fails the trial.
    #[schemars(regex(pattern = r"^/"))]
    pub reply_path: String,
    /// The session field, when the endpoint keeps a conversation: the answer's top-level
    /// field of this name is read and sent back, under the same name, with the next message of
    /// the same trial. The first message carries none. Absent: no session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub session_field: Option<String>,
    /// Seconds one request may take, the whole answer included (1–600, default 60).
    #[serde(default = "default_rest_timeout")]
    #[schemars(range(min = 1, max = 600))]
    pub timeout_s: u32,
    /// Retries after a connection failure, a timeout, 429 or 5xx (0–10, default 2), with
    /// exponential backoff and `Retry-After` honoured up to 60 s.
    #[serde(default = "default_rest_retries")]
    #[schemars(range(min = 0, max = 10))]
    pub max_retries: u32,
    /// Where the endpoint runs and what it may reach, in words (for example `staging deployment
    /// at agent.staging.example; its own model provider`): the user's statement, written into
    /// the run manifest and every trial's evidence. The runner reaches only `url`. With
    /// `container` the runner also records what it enforces (`egress_enforced`: the container's
    /// network has no route out) beside this statement.
    #[schemars(length(min = 1))]
    pub egress: String,
    /// elengtis addition: run the endpoint in a fresh hardened container per trial (an image
    /// of yours, on the trial's internal network, exactly as an `isolated_container` target
    /// with `mcp_transport: streamable_http`), instead of reaching a deployment at a URL.
    /// `url` is then the path on the container. Absent: the endpoint is externally managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<RestContainer>,
}

/// elengtis addition: the container a `rest` target's endpoint runs in, started fresh for every
/// trial. The fields mean what they mean in an `isolated_container` transport (same types,
/// defaults and checks); there is no `mcp_transport` (the endpoint is plain HTTP) and no
/// `path` (the rest target's `url` is the path).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestContainer {
    /// Local image reference (never pulled).
    #[schemars(length(min = 1))]
    pub image: String,
    /// Port the endpoint listens on inside the container (required).
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: u32,
    /// Non-root user id.
    #[schemars(range(min = 1))]
    pub uid: u64,
    /// Non-root group id.
    #[schemars(range(min = 1))]
    pub gid: u64,
    /// Command (overrides the image's default arguments); items as in an `isolated_container`
    /// transport's `command` (strings, references, templates, joined lists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<Value>,
    /// Environment for the container, from the runner's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, EnvRef>,
    /// Seconds to wait for the endpoint's port to accept connections (1–300, default 30).
    #[serde(default = "default_startup_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub startup_timeout_seconds: u32,
    /// Optional relay image used when the runner cannot route to the internal network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_image: Option<String>,
    /// Absolute paths that get a fresh anonymous volume per trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// The OCI runtime the engine runs this target's containers with (see
    /// `isolated_container`'s `runtime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub runtime: Option<String>,
}

impl RestContainer {
    /// The `isolated_container` transport this container is launched as: streamable HTTP on
    /// `container_port` at `path` (the rest target's `url`), so that it gets the very same
    /// launch, hardening, readiness wait and lifecycle record.
    pub fn as_container(&self, path: &str) -> ContainerTransport {
        ContainerTransport {
            image: self.image.clone(),
            container_port: Some(self.container_port),
            mcp_transport: ContainerMcp::StreamableHttp,
            uid: self.uid,
            gid: self.gid,
            command: self.command.clone(),
            env: self.env.clone(),
            path: path.to_owned(),
            startup_timeout_seconds: self.startup_timeout_seconds,
            relay_image: self.relay_image.clone(),
            volumes: self.volumes.clone(),
            runtime: self.runtime.clone(),
        }
    }
}

impl Transport {
    /// The container a target's trials start, as an `isolated_container` transport: its own for
    /// an `isolated_container` target, the endpoint's for a `rest` target with a `container`;
    /// `None` for the others.
    pub fn container(&self) -> Option<std::borrow::Cow<'_, ContainerTransport>> {
        match self {
            Transport::IsolatedContainer(c) => Some(std::borrow::Cow::Borrowed(c)),
            Transport::Rest(RestTransport { container: Some(c), url, .. }) => {
                Some(std::borrow::Cow::Owned(c.as_container(url)))
            }
            _ => None,
        }
    }
}

fn default_message_field() -> String {
    "message".to_owned()
}

fn default_rest_timeout() -> u32 {
    60
}

fn default_rest_retries() -> u32 {
    2
}

/// A local image run as a fresh hardened container per trial.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerTransport {
    /// Local image reference (never pulled).
    #[schemars(length(min = 1))]
    pub image: String,
    /// Port the server listens on inside the container (required for `streamable_http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: Option<u32>,
    /// elengtis addition: how the runner speaks MCP with the server — `streamable_http` on
    /// `container_port` (default), or `stdio` through the engine's attach stream (for
    /// servers that only speak stdio; the container needs no port and no route).
    #[serde(default, skip_serializing_if = "ContainerMcp::is_default")]
    pub mcp_transport: ContainerMcp,
    /// Non-root user id.
    #[schemars(range(min = 1))]
    pub uid: u64,
    /// Non-root group id.
    #[schemars(range(min = 1))]
    pub gid: u64,
    /// Command (overrides the image's default arguments). elengtis addition: an item may
    /// also be a `{runner: …}` or `{binding: …}` reference, resolved per trial like stdio
    /// arguments (for example `--credential {runner: canary}`), a string template (for example
    /// `{template: "--user-agent=probe/{canary}"}`), or a list of strings, references and
    /// templates joined into one argument (for example
    /// `[attacker.example.com=, {runner: sink_url}]`).
    #[serde(default)]
    pub command: Vec<Value>,
    /// Environment for the container, from the runner's environment.
    #[serde(default)]
    pub env: BTreeMap<String, EnvRef>,
    /// MCP endpoint path.
    #[serde(default = "default_mcp_path")]
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    /// Seconds to wait for the endpoint to answer.
    #[serde(default = "default_startup_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub startup_timeout_seconds: u32,
    /// Optional relay image used when the runner cannot route to the internal network.
    #[serde(default)]
    pub relay_image: Option<String>,
    /// elengtis addition: absolute paths that get a fresh anonymous volume per trial
    /// (writable state such as a SQLite database; removed at teardown). The image should
    /// own the directory as the trial user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// elengtis addition: the OCI runtime the engine runs this target's containers with (the
    /// target, its relay, canary sink and egress proxy), by the name the engine lists it under
    /// (for example `runsc`, gVisor's). Omitted: the engine's default runtime. `--runtime`
    /// overrides it for every container target of a run. The runtime is asserted from the
    /// engine's inspect answer in every trial's evidence (docs/security.md, "Runtimes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub runtime: Option<String>,
}

/// Whether `name` can name an OCI runtime registered with the engine (letters, digits, `.`,
/// `_`, `-`, starting with a letter or digit, at most 64 bytes): the check of `runtime:` and
/// of `--runtime`.
pub fn valid_runtime_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// How MCP reaches a server inside its container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContainerMcp {
    /// Streamable HTTP on `container_port` and `path`.
    #[default]
    StreamableHttp,
    /// stdio through the engine's attach stream.
    Stdio,
}

impl ContainerMcp {
    /// Whether this is the default (omitted from dumps, so a compat document dumps as one).
    pub fn is_default(&self) -> bool {
        *self == ContainerMcp::StreamableHttp
    }
}

fn default_mcp_path() -> String {
    "/mcp".to_owned()
}

fn default_startup_timeout() -> u32 {
    30
}
