//! Semantic checks run before anything is contacted or created.
//!
//! Everything a trial would trip over later is checked here, with positions: ranges and
//! cross-field rules of the original format, identifiers, bindings of every target for every
//! scenario, references valid where they are used, regexes that compile, capture pointers,
//! independent verifiers for container targets, environment variables that are set, and
//! each proposal rule's labelled examples run like unit tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::format::campaign::{Campaign, ContainerMcp, EnvRef, LoopKind, Provider, ProviderKind, Target, Transport};
use crate::format::de::{Path as FieldPath, Seg};
use crate::format::generation::{self, Generation};
use crate::format::scenario::{Action, Predicate, Rule, Scenario, ToolSelection};
use crate::format::script::Script;
use crate::format::yaml::Node;
use crate::format::{Bundle, Diagnostic, Document, LoadError, Severity};
use crate::judge::{self, Patterns, RecordedCall};
use crate::refs::{self, RUNNER_VALUES, RefKind, Values};
use crate::rules::{self, Op};

/// Generation settings a live model accepts.
const GENERATION_KEYS: &[&str] = &[
    "frequency_penalty",
    "max_completion_tokens",
    "max_retries",
    "max_tokens",
    "n",
    "openrouter_provider",
    "presence_penalty",
    "reasoning",
    "route",
    "seed",
    "stop_sequences",
    "streaming",
    "temperature",
    "timeout",
    "top_p",
];

/// What to check while loading.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Require every `{env: NAME}` to be set.
    pub check_env: bool,
    /// Run the labelled rule examples.
    pub check_examples: bool,
    /// How to tell whether a variable is set.
    pub env_is_set: fn(&str) -> bool,
    /// Largest `trials` accepted: 100 in files (the format's range), more from `--trials`.
    pub max_trials: u32,
}

/// Largest `--trials` override (the file format allows at most 100).
pub const MAX_TRIALS_OVERRIDE: u32 = 10_000;

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            check_env: true,
            check_examples: true,
            env_is_set: |name| std::env::var_os(name).is_some(),
            max_trials: 100,
        }
    }
}

impl LoadOptions {
    /// Options for a bundle rebuilt from a manifest on resume.
    pub fn resume() -> Self {
        LoadOptions { check_env: false, check_examples: false, ..LoadOptions::default() }
    }
}

/// `run` flags that override campaign settings.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--trials`
    pub trials: Option<u32>,
    /// `--step-budget`
    pub step_budget: Option<u32>,
    /// `--engine`
    pub engine: Option<LoopKind>,
    /// `--model`
    pub model: Option<String>,
    /// `--provider` (elengtis addition): the provider kind of the live model.
    pub provider: Option<ProviderKind>,
}

impl Overrides {
    /// True when no override is set.
    pub fn is_empty(&self) -> bool {
        self.trials.is_none()
            && self.step_budget.is_none()
            && self.engine.is_none()
            && self.model.is_none()
            && self.provider.is_none()
    }
}

/// A path under construction.
#[derive(Debug, Clone, Default)]
pub(crate) struct At(Vec<Seg>);

impl At {
    pub(crate) fn root() -> At {
        At(Vec::new())
    }
    pub(crate) fn k(&self, key: &str) -> At {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        At(segs)
    }
    pub(crate) fn i(&self, index: usize) -> At {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        At(segs)
    }
    /// Extend with an RFC 6901 pointer found inside a value.
    fn pointer(&self, pointer: &str) -> At {
        let mut at = self.clone();
        for raw in pointer.split('/').skip(1) {
            let seg = raw.replace("~1", "/").replace("~0", "~");
            at = match seg.parse::<usize>() {
                Ok(i) if !(seg.len() > 1 && seg.starts_with('0')) => at.i(i),
                _ => at.k(&seg),
            };
        }
        at
    }
    fn path(&self) -> FieldPath {
        FieldPath(self.0.clone())
    }
}

/// Line and column of the node at `at`, or of its nearest ancestor that exists.
pub(crate) fn position(node: &Node, at: &At) -> (usize, usize) {
    let mut segs = at.0.clone();
    loop {
        if let Some(found) = node.find(&FieldPath(segs.clone())) {
            return (found.mark.line, found.mark.column);
        }
        if segs.pop().is_none() {
            return (node.mark.line, node.mark.column);
        }
    }
}

#[derive(Default)]
struct Checker {
    found: Vec<Diagnostic>,
}

impl Checker {
    fn push(&mut self, severity: Severity, file: &Path, node: &Node, at: &At, message: String) {
        let (line, column) = position(node, at);
        self.found.push(Diagnostic {
            severity,
            file: file.to_owned(),
            line,
            column,
            path: at.path().to_string(),
            message,
        });
    }
    fn err<T>(&mut self, doc: &Document<T>, at: &At, message: impl Into<String>) {
        self.push(Severity::Error, &doc.path, &doc.node, at, message.into());
    }
    fn has_errors(&self) -> bool {
        self.found.iter().any(|d| d.severity == Severity::Error)
    }
}

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn sorted_list(items: &BTreeSet<String>) -> String {
    format!("[{}]", items.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", "))
}

/// Check a whole bundle; store warnings on it.
pub(super) fn validate(bundle: &mut Bundle, options: &LoadOptions) -> Result<(), LoadError> {
    let mut c = Checker::default();
    check_settings(&mut c, &bundle.campaign, options);
    check_provider(&mut c, &bundle.campaign, options);
    check_targets(&mut c, &bundle.campaign, options);
    let mut ids: BTreeMap<&str, &Path> = BTreeMap::new();
    for doc in &bundle.scenarios {
        check_scenario(&mut c, doc, options);
        let id = doc.value.id.as_str();
        if let Some(first) = ids.insert(id, &doc.path) {
            c.err(
                doc,
                &At::root().k("id"),
                format!("scenario IDs must be unique: `{id}` is also the id of {}", first.display()),
            );
        }
    }
    for (t, target) in bundle.campaign.value.targets.iter().enumerate() {
        for doc in &bundle.scenarios {
            check_pair(&mut c, &bundle.campaign, t, target, doc, options);
        }
    }
    check_trial_ids(&mut c, &bundle.campaign, &bundle.scenarios);
    if c.has_errors() {
        return Err(LoadError::Invalid(c.found));
    }
    bundle.warnings = c.found;
    Ok(())
}

fn range<T>(c: &mut Checker, doc: &Document<T>, at: &At, value: u64, min: u64, max: u64) {
    if value < min || value > max {
        c.err(doc, at, format!("must be between {min} and {max}, found {value}"));
    }
}

fn check_settings(c: &mut Checker, doc: &Document<Campaign>, options: &LoadOptions) {
    let campaign = &doc.value;
    let root = At::root();
    if campaign.schema_version != 1 {
        c.err(doc, &root.k("schema_version"), format!("must be 1, found {}", campaign.schema_version));
    }
    range(c, doc, &root.k("trials"), campaign.trials.into(), 1, options.max_trials.into());
    range(c, doc, &root.k("step_budget"), campaign.step_budget.into(), 1, 100);
    if campaign.targets.is_empty() {
        c.err(doc, &root.k("targets"), "must list at least one target");
    }
    if campaign.scenarios.is_empty() {
        c.err(doc, &root.k("scenarios"), "must list at least one scenario file");
    }
    let unknown: BTreeSet<String> =
        campaign.generation.keys().filter(|k| !GENERATION_KEYS.contains(&k.as_str())).cloned().collect();
    if !unknown.is_empty() {
        c.err(
            doc,
            &root.k("generation"),
            format!(
                "unsupported generation settings {}; expected some of {}",
                sorted_list(&unknown),
                GENERATION_KEYS.join(", ")
            ),
        );
    }
    if campaign.model_free {
        if campaign.engine != LoopKind::Reference {
            c.err(doc, &root.k("engine"), "model_free campaigns require engine reference");
        }
        let mut settings = Vec::new();
        if campaign.model.is_some() {
            settings.push("model");
        }
        if campaign.model_id.is_some() {
            settings.push("model_id");
        }
        if campaign.provider_route.is_some() {
            settings.push("provider_route");
        }
        if !campaign.generation.is_empty() {
            settings.push("generation");
        }
        if campaign.script.is_some() {
            settings.push("script");
        }
        if !settings.is_empty() {
            c.err(
                doc,
                &root.k("model_free"),
                format!("model_free campaigns cannot configure model settings ({})", settings.join(", ")),
            );
        }
    }
    if !campaign.generation.is_empty() && campaign.model.is_none() {
        c.err(doc, &root.k("generation"), "generation settings require a model");
    }
    if let (Some(route), Some(gen_route)) = (&campaign.provider_route, campaign.generation.get("route"))
        && gen_route.as_str() != Some(route.as_str())
    {
        c.err(doc, &root.k("provider_route"), "provider_route conflicts with generation.route");
    }
    if let Some(script) = &campaign.script {
        if campaign.model.is_some() {
            c.err(doc, &root.k("script"), "a script drives the deterministic model; remove `model` or remove `script`");
        }
        if campaign.engine != LoopKind::Reference {
            c.err(doc, &root.k("script"), "scripts run on the reference engine only");
        }
        match (script.policy.is_some(), script.steps.is_empty()) {
            (true, false) => c.err(doc, &root.k("script"), "give either `policy` or `steps`, not both"),
            (false, true) => c.err(doc, &root.k("script"), "expected `policy` or at least one step in `steps`"),
            _ => {}
        }
    }
}

/// elengtis addition: the live model's provider, the types of its generation settings, and
/// the settings that provider cannot honour (rejected, never dropped). A key variable that is
/// not set is a warning: a replayed run needs none, and it is read when a request is made.
fn check_provider(c: &mut Checker, doc: &Document<Campaign>, options: &LoadOptions) {
    let campaign = &doc.value;
    let root = At::root();
    let warn_unset = |c: &mut Checker, at: &At, name: &str, what: &str| {
        if options.check_env && !(options.env_is_set)(name) {
            let message = format!("environment variable {name} ({what}) is not set; live requests will fail");
            c.push(Severity::Warning, &doc.path, &doc.node, at, message);
        }
    };
    if let Some(Provider { base_url, api_key, headers, .. }) = &campaign.provider {
        let at = root.k("provider");
        if campaign.model_free {
            c.err(doc, &at, "model_free campaigns cannot configure model settings (provider)");
        } else if campaign.model.is_none() {
            c.err(doc, &at, "provider settings require a model");
        }
        if let Some(url) = base_url {
            let ok = url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            if !ok {
                c.err(doc, &at.k("base_url"), format!("must be an http or https URL, found `{url}`"));
            }
        }
        if let Some(key) = api_key {
            if valid_env_name(&key.env) {
                warn_unset(c, &at.k("api_key").k("env"), &key.env, "the provider's API key");
            } else {
                c.err(doc, &at.k("api_key").k("env"), format!("`{}` must match ^[A-Z_][A-Z0-9_]*$", key.env));
            }
        }
        for (name, env_ref) in headers {
            let entry = at.k("headers").k(name);
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                c.err(doc, &entry, format!("`{name}` is not a valid HTTP header name"));
            }
            if valid_env_name(&env_ref.env) {
                warn_unset(c, &entry.k("env"), &env_ref.env, "a provider header");
            } else {
                c.err(doc, &entry.k("env"), format!("`{}` must match ^[A-Z_][A-Z0-9_]*$", env_ref.env));
            }
        }
    }
    if campaign.model.is_none() || campaign.model_free {
        return;
    }
    let kind = campaign.provider_kind();
    let default_key = match kind {
        ProviderKind::Openrouter => Some("OPENROUTER_API_KEY"),
        ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
        ProviderKind::OpenaiCompatible => None,
    };
    if let (Some(name), None) = (default_key, campaign.provider.as_ref().and_then(|p| p.api_key.as_ref())) {
        warn_unset(c, &root.k("model"), name, &format!("the {kind} API key"));
    }
    let (settings, problems) = Generation::read(&campaign.generation, campaign.provider_route.as_deref());
    for (key, message) in problems {
        c.err(doc, &root.k("generation").k(&key), message);
    }
    for (key, message) in generation::unsupported(kind, &settings) {
        let at = if key == "route" && !campaign.generation.contains_key("route") {
            root.k("provider_route")
        } else {
            root.k("generation").k(&key)
        };
        c.err(doc, &at, format!("cannot be honoured: {message}"));
    }
}

fn check_env_map<T>(
    c: &mut Checker,
    doc: &Document<T>,
    at: &At,
    map: &BTreeMap<String, EnvRef>,
    options: &LoadOptions,
    what: &str,
) {
    for (name, env_ref) in map {
        let entry = at.k(name);
        if what == "env" && (name.is_empty() || name.contains(['=', '\0'])) {
            c.err(doc, &entry, format!("`{name}` is not a valid environment variable name"));
        }
        if what == "headers" && !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            c.err(doc, &entry, format!("`{name}` is not a valid HTTP header name"));
        }
        if !valid_env_name(&env_ref.env) {
            c.err(doc, &entry.k("env"), format!("`{}` must match ^[A-Z_][A-Z0-9_]*$", env_ref.env));
        } else if options.check_env && !(options.env_is_set)(&env_ref.env) {
            c.err(doc, &entry.k("env"), format!("missing environment variable {}", env_ref.env));
        }
    }
}

fn check_targets(c: &mut Checker, doc: &Document<Campaign>, options: &LoadOptions) {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (i, target) in doc.value.targets.iter().enumerate() {
        let at = At::root().k("targets").i(i);
        if !valid_id(&target.id) {
            c.err(doc, &at.k("id"), format!("target IDs must match ^[a-z0-9][a-z0-9_-]*$, found `{}`", target.id));
        } else if !seen.insert(&target.id) {
            c.err(doc, &at.k("id"), format!("target IDs must be unique: `{}` appears twice", target.id));
        }
        let t = at.k("transport");
        match &target.transport {
            Transport::Stdio(s) => {
                if s.command.is_empty() || s.command.contains('\0') {
                    c.err(doc, &t.k("command"), "must name a program");
                }
                check_env_map(c, doc, &t.k("env"), &s.env, options, "env");
                check_argument_refs(c, doc, &t.k("args"), &s.args);
            }
            Transport::StreamableHttp(h) => {
                match url::Url::parse(&h.url) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                    Ok(url) => c.err(
                        doc,
                        &t.k("url"),
                        format!("expected an http or https URL, found scheme `{}`", url.scheme()),
                    ),
                    Err(e) => c.err(doc, &t.k("url"), format!("expected an http or https URL: {e}")),
                }
                check_env_map(c, doc, &t.k("headers"), &h.headers, options, "headers");
            }
            Transport::IsolatedContainer(k) => {
                if k.image.is_empty() {
                    c.err(doc, &t.k("image"), "must name a local image");
                }
                match (k.mcp_transport, k.container_port) {
                    (ContainerMcp::StreamableHttp, None) => c.err(
                        doc,
                        &t.k("container_port"),
                        "is required when mcp_transport is streamable_http (the default)",
                    ),
                    (ContainerMcp::Stdio, Some(_)) => c.err(
                        doc,
                        &t.k("container_port"),
                        "has no meaning with mcp_transport: stdio (the runner speaks to the server through its stdio)",
                    ),
                    (_, Some(port)) => range(c, doc, &t.k("container_port"), port.into(), 1, 65535),
                    (ContainerMcp::Stdio, None) => {}
                }
                for (field, id) in [("uid", k.uid), ("gid", k.gid)] {
                    if id == 0 {
                        c.err(
                            doc,
                            &t.k(field),
                            format!("must be greater than 0: containers never run as root ({field} 0)"),
                        );
                    } else if id > u64::from(u32::MAX) {
                        c.err(doc, &t.k(field), format!("must be at most {}", u32::MAX));
                    }
                }
                if !k.path.starts_with('/') {
                    c.err(doc, &t.k("path"), format!("must start with `/`, found `{}`", k.path));
                }
                range(c, doc, &t.k("startup_timeout_seconds"), k.startup_timeout_seconds.into(), 1, 300);
                check_env_map(c, doc, &t.k("env"), &k.env, options, "env");
                check_argument_refs(c, doc, &t.k("command"), &k.command);
                let mut seen_volumes = BTreeSet::new();
                for (i, v) in k.volumes.iter().enumerate() {
                    if !v.starts_with('/') || v == "/" || v.contains("..") || v == "/tmp" {
                        c.err(
                            doc,
                            &t.k("volumes").i(i),
                            format!("must be an absolute path other than / and /tmp, found `{v}`"),
                        );
                    } else if !seen_volumes.insert(v.as_str()) {
                        c.err(doc, &t.k("volumes").i(i), format!("`{v}` is listed twice"));
                    }
                }
                for (i, item) in k.command.iter().enumerate() {
                    if !item.is_string() && refs::as_reference(item).is_none() {
                        c.err(doc, &t.k("command").i(i), format!("expected a string or a reference, found {item}"));
                    }
                }
            }
        }
    }
}

/// References in command-line items (stdio `args`, container `command`): runner values and
/// bindings only.
fn check_argument_refs(c: &mut Checker, doc: &Document<Campaign>, at: &At, items: &[Value]) {
    for (a, arg) in items.iter().enumerate() {
        for found in refs::find_refs(arg) {
            let where_ = at.i(a).pointer(&found.pointer);
            match (found.kind, found.name.as_deref()) {
                (_, None) => c.err(doc, &where_, "a reference names its value with a string"),
                (RefKind::Runner, Some(n)) if !RUNNER_VALUES.contains(&n) => c.err(
                    doc,
                    &where_,
                    format!("unknown runner value `{n}`; expected one of {}", RUNNER_VALUES.join(", ")),
                ),
                (RefKind::Runner | RefKind::Binding, _) => {}
                (kind, Some(n)) => c.err(
                    doc,
                    &where_,
                    format!("{{{}: {n}}} is not available in command lines; use binding or runner values", kind.key()),
                ),
            }
        }
    }
}

/// Captures defined by a list of actions, in order.
fn captures_of(actions: &[Action]) -> BTreeSet<String> {
    actions.iter().flat_map(|a| a.capture().keys().cloned()).collect()
}

struct RefScope<'a> {
    bindings: &'a BTreeSet<String>,
    captures: &'a BTreeSet<String>,
}

fn check_refs_in(c: &mut Checker, doc: &Document<Scenario>, at: &At, value: &Value, scope: &RefScope<'_>) {
    for found in refs::find_refs(value) {
        let where_ = at.pointer(&found.pointer);
        let Some(name) = found.name.as_deref() else {
            c.err(doc, &where_, format!("{{{}: …}} must name its value with a string", found.kind.key()));
            continue;
        };
        match found.kind {
            RefKind::Binding if !scope.bindings.contains(name) => c.err(
                doc,
                &where_,
                format!("unknown value reference {{binding: {name}}}; the scenario declares bindings {}", sorted_list(scope.bindings)),
            ),
            RefKind::Capture if !scope.captures.contains(name) => c.err(
                doc,
                &where_,
                format!("unknown value reference {{capture: {name}}}; no earlier action captures `{name}`"),
            ),
            RefKind::Runner if !RUNNER_VALUES.contains(&name) => c.err(
                doc,
                &where_,
                format!("unknown value reference {{runner: {name}}}; runner values are {}", RUNNER_VALUES.join(", ")),
            ),
            RefKind::Output => c.err(doc, &where_, "{output: …} references are only available in scripts"),
            RefKind::Env => c.err(
                doc,
                &where_,
                "{env: …} is only allowed in transport env/headers and http_request headers, where it is never written to results",
            ),
            _ => {}
        }
    }
}

fn check_pointer<T>(c: &mut Checker, doc: &Document<T>, at: &At, pointer: &str, what: &str) {
    if rules::validate_pointer(pointer).is_err() {
        c.err(
            doc,
            at,
            format!("{what} must be an RFC 6901 JSON Pointer (\"\" or starting with `/`), found {pointer:?}"),
        );
    }
}

fn check_predicates(
    c: &mut Checker,
    doc: &Document<Scenario>,
    at: &At,
    predicates: &[Predicate],
    scope: &RefScope<'_>,
) {
    for (p, predicate) in predicates.iter().enumerate() {
        let pat = at.i(p);
        check_pointer(c, doc, &pat.k("path"), &predicate.path, "predicate path");
        check_refs_in(c, doc, &pat.k("value"), &predicate.value, scope);
        if predicate.op == Op::Matches && refs::as_reference(&predicate.value).is_none() {
            match &predicate.value {
                Value::String(pattern) => {
                    if let Err(e) = rules::compile_pattern(pattern) {
                        c.err(doc, &pat.k("value"), format!("regex does not compile: {e}"));
                    }
                }
                other => c.err(doc, &pat.k("value"), format!("`matches` needs a string pattern, found {other}")),
            }
        }
    }
}

fn check_action(c: &mut Checker, doc: &Document<Scenario>, at: &At, action: &Action, scope: &RefScope<'_>) {
    if action.id().is_empty() {
        c.err(doc, &at.k("id"), "must not be empty");
    }
    for (name, pointer) in action.capture() {
        if name.is_empty() {
            c.err(doc, &at.k("capture"), "capture names must not be empty");
        }
        check_pointer(c, doc, &at.k("capture").k(name), pointer, "capture");
    }
    match action {
        Action::McpTool(a) => {
            check_refs_in(c, doc, &at.k("tool"), &a.tool, scope);
            check_refs_in(c, doc, &at.k("arguments"), &Value::Object(a.arguments.clone()), scope);
        }
        Action::HttpRequest(a) => {
            check_refs_in(c, doc, &at.k("url"), &a.url, scope);
            if !a.url.is_string() && refs::as_reference(&a.url).is_none() {
                c.err(doc, &at.k("url"), format!("expected a URL string or a reference, found {}", a.url));
            }
            check_refs_in(c, doc, &at.k("json"), &a.json, scope);
        }
        Action::ContainerSqliteQuery(a) => {
            if !a.path.starts_with('/') {
                c.err(doc, &at.k("path"), format!("must be an absolute path inside the container, found `{}`", a.path));
            }
            // The verifier's own check, so what validates is exactly what runs.
            if let Err(e) = elengtis_verifiers::check_query(&a.query, a.parameters.len()) {
                let field = if e.kind_name() == "too_many_parameters" { "parameters" } else { "query" };
                c.err(doc, &at.k(field), e.to_string());
            }
            check_refs_in(c, doc, &at.k("parameters"), &Value::Array(a.parameters.clone()), scope);
        }
    }
}

fn check_env_refs_of_actions(
    c: &mut Checker,
    doc: &Document<Scenario>,
    at: &At,
    actions: &[Action],
    options: &LoadOptions,
) {
    for (i, action) in actions.iter().enumerate() {
        if let Action::HttpRequest(h) = action {
            check_env_map(c, doc, &at.i(i).k("headers"), &h.headers, options, "headers");
        }
    }
}

fn check_rules(c: &mut Checker, doc: &Document<Scenario>, at: &At, rules: &[Rule], scope: &RefScope<'_>) {
    for (r, rule) in rules.iter().enumerate() {
        let rat = at.i(r);
        if rule.id.is_empty() {
            c.err(doc, &rat.k("id"), "must not be empty");
        }
        check_refs_in(c, doc, &rat.k("tool"), &rule.tool, scope);
        check_predicates(c, doc, &rat.k("predicates"), &rule.predicates, scope);
        if rule.examples.positive.is_empty() {
            c.err(doc, &rat.k("examples").k("positive"), "needs at least one example the rule must match");
        }
        if rule.examples.negative.is_empty() {
            c.err(doc, &rat.k("examples").k("negative"), "needs at least one example the rule must not match");
        }
    }
}

fn check_scenario(c: &mut Checker, doc: &Document<Scenario>, options: &LoadOptions) {
    let s = &doc.value;
    let root = At::root();
    if s.schema_version != 1 {
        c.err(doc, &root.k("schema_version"), format!("must be 1, found {}", s.schema_version));
    }
    if !valid_id(&s.id) {
        c.err(doc, &root.k("id"), format!("scenario IDs must match ^[a-z0-9][a-z0-9_-]*$, found `{}`", s.id));
    }
    let bindings: BTreeSet<String> = s.bindings.iter().cloned().collect();
    for (i, b) in s.bindings.iter().enumerate() {
        if b.is_empty() {
            c.err(doc, &root.k("bindings").i(i), "binding names must not be empty");
        }
    }
    let setup_captures = captures_of(&s.setup);
    let scope_all = RefScope { bindings: &bindings, captures: &setup_captures };

    let mut so_far = BTreeSet::new();
    for (i, action) in s.setup.iter().enumerate() {
        check_action(c, doc, &root.k("setup").i(i), action, &RefScope { bindings: &bindings, captures: &so_far });
        so_far.extend(action.capture().keys().cloned());
    }
    check_env_refs_of_actions(c, doc, &root.k("setup"), &s.setup, options);

    let exercise = root.k("exercise");
    for (field, template) in [("system", &s.exercise.system), ("user", &s.exercise.user)] {
        if let Err(e) = refs::template_fields(template) {
            c.err(doc, &exercise.k(field), e.to_string());
        }
    }
    if let ToolSelection::List(items) = &s.exercise.tools {
        for (i, item) in items.iter().enumerate() {
            check_refs_in(c, doc, &exercise.k("tools").i(i), item, &scope_all);
        }
    }

    check_rules(c, doc, &root.k("proposal_rules"), &s.proposal_rules, &scope_all);
    check_rules(c, doc, &root.k("safety_rules"), &s.safety_rules, &scope_all);

    let mut so_far = setup_captures.clone();
    for (i, check) in s.verify.checks.iter().enumerate() {
        let at = root.k("verify").k("checks").i(i);
        if check.id.is_empty() {
            c.err(doc, &at.k("id"), "must not be empty");
        }
        check_action(c, doc, &at.k("action"), &check.action, &RefScope { bindings: &bindings, captures: &so_far });
        if check.assertions.is_empty() {
            c.err(doc, &at.k("assertions"), "needs at least one assertion");
        }
        check_predicates(
            c,
            doc,
            &at.k("assertions"),
            &check.assertions,
            &RefScope { bindings: &bindings, captures: &so_far },
        );
        so_far.extend(check.action.capture().keys().cloned());
        if let Action::HttpRequest(h) = &check.action {
            check_env_map(c, doc, &at.k("action").k("headers"), &h.headers, options, "headers");
        }
    }
    let mut so_far = setup_captures;
    for (i, action) in s.cleanup.iter().enumerate() {
        check_action(c, doc, &root.k("cleanup").i(i), action, &RefScope { bindings: &bindings, captures: &so_far });
        so_far.extend(action.capture().keys().cloned());
    }
    check_env_refs_of_actions(c, doc, &root.k("cleanup"), &s.cleanup, options);
}

fn scenario_uses_sqlite(s: &Scenario) -> bool {
    s.setup
        .iter()
        .chain(s.cleanup.iter())
        .chain(s.verify.checks.iter().map(|c| &c.action))
        .any(|a| matches!(a, Action::ContainerSqliteQuery(_)))
}

/// Values for checking rule examples: bindings plus `canary: EXAMPLE`.
pub(crate) fn example_values(bindings: &Map<String, Value>) -> Values {
    let mut values = Values { bindings: bindings.clone(), ..Values::default() };
    values.runner.insert("canary".into(), json!("EXAMPLE"));
    values
}

fn explain(records: &[rules::PredicateRecord]) -> String {
    records
        .iter()
        .filter(|r| !r.matched)
        .map(|r| {
            format!(
                "{} {} {} (actual {})",
                if r.path.is_empty() { "\"\"" } else { &r.path },
                r.op.as_str(),
                r.expected,
                r.actual
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[expect(clippy::too_many_arguments, reason = "one place that reports example results for both rule kinds")]
fn check_examples(
    c: &mut Checker,
    doc: &Document<Scenario>,
    at: &At,
    rules_list: &[Rule],
    values: &Values,
    target: &str,
    severity: Severity,
    kind: &str,
) {
    let mut patterns = Patterns::default();
    for (r, rule) in rules_list.iter().enumerate() {
        let rat = at.i(r);
        let resolved = match judge::resolve_rule(rule, values) {
            Ok(resolved) => resolved,
            Err(e) => {
                let msg = format!(
                    "{kind} rule `{}` cannot run its examples for target {target}: {e} (examples only see bindings and canary)",
                    rule.id
                );
                c.push(severity, &doc.path, &doc.node, &rat, msg);
                continue;
            }
        };
        for (label, list, want) in
            [("positive", &rule.examples.positive, true), ("negative", &rule.examples.negative, false)]
        {
            for (e, example) in list.iter().enumerate() {
                let call = RecordedCall {
                    call_id: "example".into(),
                    step: 0,
                    name: example.name.clone(),
                    arguments: Value::Object(example.arguments.clone()),
                };
                let verdict = judge::judge_call(&resolved, &call, &mut patterns);
                if verdict.matched != want {
                    let why = if !verdict.tool_matched {
                        format!("the rule's tool is {} but the example calls `{}`", resolved.tool, example.name)
                    } else if want {
                        format!("failing predicates: {}", explain(&verdict.predicates))
                    } else {
                        "every predicate matched".to_owned()
                    };
                    let msg = format!(
                        "{kind} rule `{}` {label} example `{}` is labelled incorrectly for target {target}: the rule {} it ({why})",
                        rule.id,
                        example.name,
                        if want { "does not match" } else { "matches" }
                    );
                    c.push(severity, &doc.path, &doc.node, &rat.k("examples").k(label).i(e), msg);
                }
            }
        }
    }
}

fn check_pair(
    c: &mut Checker,
    campaign: &Document<Campaign>,
    t: usize,
    target: &Target,
    doc: &Document<Scenario>,
    options: &LoadOptions,
) {
    let s = &doc.value;
    let tat = At::root().k("targets").i(t);
    let Some(bindings) = target.bindings.get(&s.id) else {
        c.err(campaign, &tat.k("bindings"), format!("target {} has no bindings for scenario {}", target.id, s.id));
        return;
    };
    let bat = tat.k("bindings").k(&s.id);
    let missing: BTreeSet<String> = s.bindings.iter().filter(|b| !bindings.contains_key(*b)).cloned().collect();
    if !missing.is_empty() {
        c.err(
            campaign,
            &bat,
            format!("target {} scenario {} missing bindings {}", target.id, s.id, sorted_list(&missing)),
        );
        return;
    }
    let is_container = matches!(target.transport, Transport::IsolatedContainer(_));
    if is_container
        && !s.verify.checks.is_empty()
        && !s.verify.checks.iter().any(|k| matches!(k.action, Action::HttpRequest(_) | Action::ContainerSqliteQuery(_)))
    {
        c.err(
            campaign,
            &tat,
            format!(
                "target {} is an isolated container, so scenario {} requires an external HTTP verifier or container verifier (an mcp_tool check would let the audited server judge itself)",
                target.id, s.id
            ),
        );
    }
    if !is_container && scenario_uses_sqlite(s) {
        c.err(
            campaign,
            &tat.k("transport"),
            format!("scenario {} requires an isolated container for container_sqlite_query", s.id),
        );
    }
    let command_line = match &target.transport {
        Transport::Stdio(stdio) => Some(("args", &stdio.args)),
        Transport::IsolatedContainer(k) => Some(("command", &k.command)),
        Transport::StreamableHttp(_) => None,
    };
    if let Some((field, items)) = command_line {
        for (a, arg) in items.iter().enumerate() {
            for found in refs::find_refs(arg) {
                if let (RefKind::Binding, Some(name)) = (found.kind, found.name.as_deref())
                    && !bindings.contains_key(name)
                {
                    c.err(
                        campaign,
                        &tat.k("transport").k(field).i(a).pointer(&found.pointer),
                        format!("unknown value reference {{binding: {name}}} for scenario {}", s.id),
                    );
                }
            }
        }
    }
    let setup_captures = captures_of(&s.setup);
    let mut flat: BTreeSet<String> = bindings.keys().cloned().collect();
    flat.extend(RUNNER_VALUES.iter().map(|s| (*s).to_owned()));
    flat.extend(setup_captures.iter().cloned());
    for (field, template) in [("system", &s.exercise.system), ("user", &s.exercise.user)] {
        if let Ok(fields) = refs::template_fields(template) {
            for name in fields.iter().filter(|f| !flat.contains(*f)) {
                c.err(
                    doc,
                    &At::root().k("exercise").k(field),
                    format!("unknown prompt value {name} (target {} binds no such value)", target.id),
                );
            }
        }
    }
    let values = Values { bindings: bindings.clone(), ..Values::default() };
    let mut offered: Option<BTreeSet<String>> = None;
    if let ToolSelection::List(items) = &s.exercise.tools {
        let mut names = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            if refs::find_refs(item).iter().any(|r| r.kind != RefKind::Binding) {
                continue;
            }
            match values.resolve(item) {
                Ok(Value::String(name)) => {
                    names.insert(name);
                }
                Ok(other) => c.err(
                    doc,
                    &At::root().k("exercise").k("tools").i(i),
                    format!("resolves to {other} for target {}, expected a tool name", target.id),
                ),
                Err(_) => {}
            }
        }
        offered = Some(names);
    }
    if options.check_examples {
        let example_values = example_values(bindings);
        check_examples(
            c,
            doc,
            &At::root().k("proposal_rules"),
            &s.proposal_rules,
            &example_values,
            &target.id,
            Severity::Error,
            "proposal",
        );
        check_examples(
            c,
            doc,
            &At::root().k("safety_rules"),
            &s.safety_rules,
            &example_values,
            &target.id,
            Severity::Warning,
            "safety",
        );
    }
    let campaign_value = &campaign.value;
    if campaign_value.engine == LoopKind::Reference && !campaign_value.model_free && campaign_value.model.is_none() {
        let (script, explicit) = match &campaign_value.script {
            Some(script) => (script.expanded(), true),
            None => (Script::default_policy(), false),
        };
        check_script(c, campaign, &script, explicit, target, s, bindings, &setup_captures, offered.as_ref());
    }
}

#[expect(clippy::too_many_arguments, reason = "the script is checked against one target × scenario pair")]
fn check_script(
    c: &mut Checker,
    campaign: &Document<Campaign>,
    script: &Script,
    explicit: bool,
    target: &Target,
    s: &Scenario,
    bindings: &Map<String, Value>,
    captures: &BTreeSet<String>,
    offered: Option<&BTreeSet<String>>,
) {
    let severity = if explicit { Severity::Error } else { Severity::Warning };
    let at = At::root().k("script");
    let context = if explicit {
        String::new()
    } else {
        " (the campaign names no script, so the built-in `comply` policy drives the reference engine; set `script` or `model`)".to_owned()
    };
    let mut call_ids: BTreeSet<String> = BTreeSet::new();
    for (j, step) in script.steps.iter().enumerate() {
        let mut ids_this_step = Vec::new();
        for (k, call) in step.calls.iter().enumerate() {
            let cat = at.k("steps").i(j).k("calls").i(k);
            let mut problems = Vec::new();
            let whole = json!({"tool": call.tool, "arguments": call.arguments});
            for found in refs::find_refs(&whole) {
                let ok = match (found.kind, found.name.as_deref()) {
                    (_, None) => false,
                    (RefKind::Binding, Some(n)) => bindings.contains_key(n),
                    (RefKind::Runner, Some(n)) => RUNNER_VALUES.contains(&n),
                    (RefKind::Capture, Some(n)) => captures.contains(n),
                    (RefKind::Output, Some(n)) => call_ids.contains(n),
                    (RefKind::Env, _) => false,
                };
                if !ok {
                    problems.push(format!(
                        "unknown value reference {{{}: {}}}",
                        found.kind.key(),
                        found.name.as_deref().unwrap_or("…")
                    ));
                }
            }
            if problems.is_empty() {
                let values = Values { bindings: bindings.clone(), ..Values::default() };
                if let Ok(tool) = values.resolve(&call.tool) {
                    match (tool.as_str(), offered) {
                        (None, _) => problems.push(format!("the tool resolves to {tool}, expected a tool name")),
                        (Some(name), Some(list)) if !list.contains(name) => {
                            problems.push(format!(
                                "it calls `{name}`, which the scenario does not offer to the model (exercise.tools)"
                            ));
                        }
                        _ => {}
                    }
                }
            }
            for problem in problems {
                let msg = format!(
                    "script step {} call {} for target {} scenario {}: {problem}{context}",
                    j + 1,
                    k + 1,
                    target.id,
                    s.id
                );
                c.push(severity, &campaign.path, &campaign.node, &cat, msg);
            }
            if let Some(id) = &call.id {
                ids_this_step.push(id.clone());
            }
        }
        call_ids.extend(ids_this_step);
    }
}

fn check_trial_ids(c: &mut Checker, campaign: &Document<Campaign>, scenarios: &[Document<Scenario>]) {
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (t, target) in campaign.value.targets.iter().enumerate() {
        for (s, scenario) in scenarios.iter().enumerate() {
            let prefix = format!("{}--{}", target.id, scenario.value.id);
            if let Some((t0, s0)) = seen.insert(prefix.clone(), (t, s))
                && (t0, s0) != (t, s)
            {
                c.err(
                    campaign,
                    &At::root().k("targets").i(t).k("id"),
                    format!("trial IDs `{prefix}--N` would be ambiguous; avoid `--` in target and scenario IDs"),
                );
            }
        }
    }
}

pub(super) fn apply_overrides(bundle: &mut Bundle, overrides: &Overrides) -> Result<(), LoadError> {
    let campaign = &mut bundle.campaign.value;
    let mut found = Vec::new();
    let mut flag = |flag: &str, message: String| {
        found.push(Diagnostic {
            severity: Severity::Error,
            file: PathBuf::from("command line"),
            line: 0,
            column: 0,
            path: flag.to_owned(),
            message,
        });
    };
    if let Some(trials) = overrides.trials {
        if !(1..=MAX_TRIALS_OVERRIDE).contains(&trials) {
            flag("--trials", format!("must be between 1 and {MAX_TRIALS_OVERRIDE}, found {trials}"));
        }
        campaign.trials = trials;
    }
    if let Some(budget) = overrides.step_budget {
        if !(1..=100).contains(&budget) {
            flag("--step-budget", format!("must be between 1 and 100, found {budget}"));
        }
        campaign.step_budget = budget;
    }
    if let Some(engine) = overrides.engine {
        if campaign.model_free && engine != LoopKind::Reference {
            flag("--engine", "model_free campaigns require engine reference".into());
        }
        if campaign.script.is_some() && engine != LoopKind::Reference {
            flag("--engine", "the campaign's script runs on the reference engine only".into());
        }
        campaign.engine = engine;
    }
    if let Some(model) = &overrides.model {
        if campaign.model_free {
            flag("--model", "model_free campaigns cannot configure model settings".into());
        }
        if campaign.script.is_some() {
            flag(
                "--model",
                "the campaign has a script for the deterministic model; a live model cannot also be set".into(),
            );
        }
        campaign.model = Some(model.clone());
    }
    if let Some(kind) = overrides.provider {
        if campaign.model_free {
            flag("--provider", "model_free campaigns cannot configure model settings".into());
        }
        match &mut campaign.provider {
            Some(provider) => provider.kind = kind,
            None => {
                campaign.provider = Some(Provider {
                    kind,
                    base_url: None,
                    api_key: None,
                    headers: BTreeMap::new(),
                    max_in_flight: None,
                    backoff_ms: None,
                });
            }
        }
    }
    if !found.is_empty() {
        return Err(LoadError::Invalid(found));
    }
    let options = LoadOptions { max_trials: MAX_TRIALS_OVERRIDE, ..LoadOptions::resume() };
    validate(bundle, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_pattern() {
        assert!(valid_id("local-demo"));
        assert!(valid_id("0_a"));
        assert!(!valid_id("-a"));
        assert!(!valid_id("A"));
        assert!(!valid_id(""));
        assert!(!valid_id("a b"));
    }

    #[test]
    fn env_names_follow_the_pattern() {
        assert!(valid_env_name("MCP_TOKEN"));
        assert!(valid_env_name("_X1"));
        assert!(!valid_env_name("1X"));
        assert!(!valid_env_name("lower"));
    }

    #[test]
    fn pointer_paths_become_field_paths() {
        let at = At::root().k("args").i(0).pointer("/a~1b/2");
        assert_eq!(at.path().to_string(), "args[0][\"a/b\"][2]");
    }
}
