//! Tool-call arguments checked against the tools a target lists.
//!
//! Every call a campaign makes with fixed arguments — a scripted model's calls (`script`
//! steps, or the built-in policy), the `mcp_tool` actions of setup, verify and cleanup, and
//! the rule examples — is checked against the `inputSchema` of the tool it names, with a JSON
//! Schema validator, and every tool name it uses (those too, and the rules' `tool` and
//! `exercise.tools`) against the names listed. `elengtis preflight` checks each target's live
//! listing; `elengtis validate --tools FILE` a recorded one.
//!
//! * Values known only per trial are never type-checked: a one-key map `{binding: …}`,
//!   `{runner: …}`, `{capture: …}` or `{template: …}` (and `{output: …}` in scripts) counts as
//!   present (a required argument given as a reference is not missing), and no schema error
//!   at, below or depending on it is reported.
//! * YAML 1.1 surprises: elengtis reads YAML as the original Python tool did (PyYAML
//!   `safe_load`, YAML 1.1), so an unquoted `14:30` is the base-60 integer 870, `yes`/`no`/
//!   `on`/`off` are booleans and `0755` is the octal integer 493 — in both tools (a YAML 1.2
//!   parser reads `"14:30"`, `"yes"` and 755). Where the tool's schema wants a string there,
//!   the finding says what the value became and to quote it: attached to the schema error
//!   when the value is refused, a warning of its own when the schema also accepts the
//!   number or boolean. `y`/`n` are not booleans to PyYAML (they stay strings), so they are
//!   never reported.
//!
//! Each finding names the file, line and column of the argument (the [`Node`] marks), the
//! tool and the schema error. The check is pure: no I/O, no network (remote `$ref`s are not
//! fetched; a schema that needs one is reported as unusable, and its calls are not checked).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path as FsPath, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::campaign::Target;
use crate::format::path::{Path, Seg};
use crate::format::scenario::{Action, Examples, ToolSelection};
use crate::format::script::Script;
use crate::format::yaml::{Mark, Node, NodeKind};
use crate::format::{Bundle, Severity};
use crate::refs::{self, RefKind, Values};

/// Reference keys whose value is known only per trial, in actions and rule examples.
pub const PER_TRIAL_KEYS: &[&str] = &["binding", "capture", "runner", "template"];
/// The same in a script, where `{output: call_id}` is a reference too.
pub const SCRIPT_PER_TRIAL_KEYS: &[&str] = &["binding", "capture", "runner", "template", "output"];

/// Most schema errors reported for one call.
const MAX_ERRORS_PER_CALL: usize = 20;
/// Longest schema error message kept (the validator quotes the value).
const MAX_MESSAGE: usize = 300;
/// Most tool names an unknown-tool finding lists.
const MAX_NAMES_LISTED: usize = 30;
/// Deepest `$ref`/`anyOf` nesting followed when looking for a string type.
const MAX_SCHEMA_DEPTH: usize = 32;

/// A tool as a target lists it: its name and its argument schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    /// The tool's name.
    pub name: String,
    /// Its `inputSchema`, verbatim.
    pub input_schema: Value,
}

impl ListedTool {
    /// A tool from one entry of a `tools/list` result (`{name, inputSchema, …}`).
    ///
    /// # Errors
    ///
    /// The entry is not an object with a string `name`, or its `inputSchema` is not an object.
    pub fn from_listing(listing: &Value) -> Result<ListedTool, String> {
        let name = listing
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| "a tool without a string `name`; expected {\"name\": …, \"inputSchema\": {…}}".to_owned())?;
        let input_schema = match listing.get("inputSchema") {
            None => Value::Object(Map::new()),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(other) => {
                return Err(format!("tool `{name}`: `inputSchema` is {}, expected an object", json_kind(other)));
            }
        };
        Ok(ListedTool { name: name.to_owned(), input_schema })
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Tool lists read from a file: one for every target, or one per target id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolLists {
    /// A list that stands for every target (a bare list, a `tools/list` result, an evidence file).
    pub all: Option<Vec<ListedTool>>,
    /// Lists by target id (the output of `elengtis preflight --json`).
    pub by_target: BTreeMap<String, Vec<ListedTool>>,
}

impl ToolLists {
    /// The list that applies to `target`, if any.
    pub fn for_target(&self, target: &str) -> Option<&[ListedTool]> {
        self.by_target.get(target).or(self.all.as_ref()).map(Vec::as_slice)
    }

    /// Read tool lists from JSON: an array of `tools/list` entries; an object with `tools`
    /// (a `tools/list` result, or a trial's evidence file, whose `tools` are the tools
    /// offered to the model); or the output of `elengtis preflight --json` (`targets`, each
    /// with `target` and `tool_list`).
    ///
    /// # Errors
    ///
    /// The JSON has none of these shapes, or an entry is not a tool.
    pub fn from_json(value: &Value) -> Result<ToolLists, String> {
        let list = |items: &Value, what: &str| -> Result<Vec<ListedTool>, String> {
            let Value::Array(items) = items else {
                return Err(format!("{what} is {}, expected an array of tools", json_kind(items)));
            };
            items
                .iter()
                .enumerate()
                .map(|(i, item)| ListedTool::from_listing(item).map_err(|e| format!("{what}[{i}]: {e}")))
                .collect()
        };
        match value {
            Value::Array(_) => Ok(ToolLists { all: Some(list(value, "the list")?), by_target: BTreeMap::new() }),
            Value::Object(map) if map.contains_key("targets") => {
                let Some(targets) = map.get("targets").and_then(Value::as_array) else {
                    return Err("`targets` is not an array; expected the output of `elengtis preflight --json`".into());
                };
                let mut by_target = BTreeMap::new();
                for (i, entry) in targets.iter().enumerate() {
                    let Some(id) = entry.get("target").and_then(Value::as_str) else {
                        return Err(format!("targets[{i}] has no string `target`"));
                    };
                    // A target whose preflight failed before listing has no tool list.
                    let Some(tools) = entry.get("tool_list") else { continue };
                    by_target.insert(id.to_owned(), list(tools, &format!("targets[{i}].tool_list"))?);
                }
                Ok(ToolLists { all: None, by_target })
            }
            Value::Object(map) if map.contains_key("tools") => {
                Ok(ToolLists { all: Some(list(&map["tools"], "tools")?), by_target: BTreeMap::new() })
            }
            other => Err(format!(
                "found {}; expected a JSON array of tools, an object with `tools` (a tools/list result or a trial's evidence file), or the output of `elengtis preflight --json`",
                json_kind(other)
            )),
        }
    }
}

/// Largest tool-list file [`read_tool_lists`] reads.
pub const MAX_TOOL_LIST_BYTES: u64 = 64 * 1024 * 1024;

/// Read a tool-list file (any shape [`ToolLists::from_json`] accepts).
///
/// # Errors
///
/// The file cannot be read, is larger than [`MAX_TOOL_LIST_BYTES`], is not JSON or not a
/// tool list; the diagnostic names the file.
pub fn read_tool_lists(path: &FsPath) -> Result<ToolLists, crate::format::LoadError> {
    let fail = |message: String| {
        crate::format::LoadError::Invalid(vec![crate::format::diagnostic_at(path, 0, 0, String::new(), message)])
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("failed to read the tool list: {e}")))?;
    if !meta.is_file() {
        return Err(fail("failed to read the tool list: not a regular file".into()));
    }
    if meta.len() > MAX_TOOL_LIST_BYTES {
        return Err(fail(format!(
            "failed to read the tool list: {} bytes, more than the {MAX_TOOL_LIST_BYTES} allowed",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("failed to read the tool list: {e}")))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| fail(format!("failed to read the tool list: not JSON ({e})")))?;
    ToolLists::from_json(&value).map_err(|e| fail(format!("failed to read the tool list: {e}")))
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// An argument the tool's schema refuses.
    SchemaViolation,
    /// A required argument not given.
    MissingArgument,
    /// A tool name the target does not list.
    UnknownTool,
    /// An unquoted value YAML 1.1 turned into a number or boolean where the schema also
    /// accepts a string (a warning; when the schema refuses it, the violation carries the hint).
    Yaml11,
    /// A tool whose `inputSchema` is not a usable JSON Schema (its calls are not checked).
    UnusableSchema,
}

/// Which YAML 1.1 rule turned an unquoted value into something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Yaml11Rule {
    /// `14:30` → 870.
    Sexagesimal,
    /// `yes`/`no`/`on`/`off` → true/false.
    Boolean,
    /// `0755` → 493.
    Octal,
}

/// An unquoted scalar that YAML 1.1 read as a number or boolean.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Yaml11 {
    /// The rule that applied.
    pub rule: Yaml11Rule,
    /// The text as written.
    pub written: String,
    /// What elengtis and the original tool (PyYAML, YAML 1.1) read.
    pub became: Value,
    /// What a YAML 1.2 (core schema) parser reads instead.
    pub yaml12: Value,
}

impl Yaml11 {
    /// The scalar's YAML 1.1 surprise, if it has one.
    pub fn of(node: &Node) -> Option<Yaml11> {
        let written = node.plain.as_deref()?;
        let became = node.to_json();
        let (rule, yaml12) = match &node.kind {
            NodeKind::Int(_) | NodeKind::Float(_) if written.contains(':') => {
                (Yaml11Rule::Sexagesimal, Value::String(written.to_owned()))
            }
            NodeKind::Bool(_) if matches!(written.to_ascii_lowercase().as_str(), "yes" | "no" | "on" | "off") => {
                (Yaml11Rule::Boolean, Value::String(written.to_owned()))
            }
            NodeKind::Int(_) => {
                let digits = written.trim_start_matches(['-', '+']);
                let octal = digits.len() > 1
                    && digits.starts_with('0')
                    && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_');
                if !octal {
                    return None;
                }
                // YAML 1.2's core schema reads `[-+]?[0-9]+` as decimal; underscores make it text.
                let decimal = written.parse::<i64>().map_or_else(|_| Value::String(written.to_owned()), Value::from);
                (Yaml11Rule::Octal, decimal)
            }
            _ => return None,
        };
        Some(Yaml11 { rule, written: written.to_owned(), became, yaml12 })
    }

    /// The explanation, ending in what to write instead.
    pub fn hint(&self) -> String {
        let what = match self.rule {
            Yaml11Rule::Sexagesimal => "a YAML 1.1 base-60 (sexagesimal) number",
            Yaml11Rule::Boolean => "a YAML 1.1 boolean",
            Yaml11Rule::Octal => "a YAML 1.1 octal number",
        };
        let yaml12 = match &self.yaml12 {
            Value::String(s) => format!("the text {s:?}"),
            other => other.to_string(),
        };
        format!(
            "the unquoted `{written}` is {what}: elengtis, like the original Python tool (PyYAML safe_load, YAML 1.1), reads it as {became}, while a YAML 1.2 parser reads {yaml12}; quote it ('{written}') to pass the text",
            written = self.written,
            became = self.became,
        )
    }
}

/// One problem with a call's tool or arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// `error` (fails preflight, and validate with `--tools`) or `warning`.
    pub severity: Severity,
    /// What kind of problem.
    pub kind: FindingKind,
    /// The target whose tool list was used.
    pub target: String,
    /// The file of the call.
    pub file: PathBuf,
    /// 1-based line of the argument (or of the nearest node that exists); 0 when unknown.
    pub line: usize,
    /// 1-based column; 0 when unknown.
    pub column: usize,
    /// Field path in the file, e.g. `setup[0].arguments.time`.
    pub path: String,
    /// Which call: `setup action `seed``, `script step 2 call 1`, `rule `r` positive example 1`.
    pub call: String,
    /// The tool named.
    pub tool: String,
    /// The argument, e.g. `arguments.time` (`arguments` for the whole; empty for a tool name).
    pub argument: String,
    /// The schema error, or what is wrong; with the YAML 1.1 hint when there is one.
    pub message: String,
    /// The YAML 1.1 surprise at this argument, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yaml11: Option<Yaml11>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::format::write_place(f, &self.file, self.line, self.column, self.severity)?;
        if self.argument.is_empty() {
            write!(f, ": {}: {} ({})", self.path, self.message, self.call)
        } else {
            write!(f, ": {} of tool {}: {} ({})", self.argument, self.tool, self.message, self.call)
        }
    }
}

/// A tool's schema, compiled once.
pub struct ToolSchema {
    raw: Value,
    validator: Result<::jsonschema::Validator, String>,
}

impl fmt::Debug for ToolSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSchema").field("raw", &self.raw).field("usable", &self.validator.is_ok()).finish()
    }
}

impl ToolSchema {
    /// Compile `schema` (draft from its `$schema`, 2020-12 by default; remote references are
    /// never fetched).
    pub fn new(schema: &Value) -> ToolSchema {
        let validator = ::jsonschema::validator_for(schema).map_err(|e| clip(&e.to_string()));
        ToolSchema { raw: schema.clone(), validator }
    }

    /// Why the schema cannot be used, if it cannot.
    pub fn unusable(&self) -> Option<&str> {
        self.validator.as_ref().err().map(String::as_str)
    }
}

/// One problem found in a call's arguments, relative to the arguments node.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgProblem {
    /// Error or warning.
    pub severity: Severity,
    /// Kind.
    pub kind: FindingKind,
    /// Where below the arguments (empty: the arguments themselves).
    pub at: Vec<Seg>,
    /// The position of the node at `at` (or of its nearest ancestor).
    pub mark: Mark,
    /// The message (with the YAML 1.1 hint when there is one).
    pub message: String,
    /// The YAML 1.1 surprise, if any.
    pub yaml11: Option<Yaml11>,
}

fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_MESSAGE).collect();
    out.push('…');
    out
}

/// A one-key map whose key is one of `keys`: a value known only per trial.
fn is_per_trial(node: &Node, keys: &[&str]) -> bool {
    match &node.kind {
        NodeKind::Map(entries) => entries.len() == 1 && entries[0].0.as_str().is_some_and(|k| keys.contains(&k)),
        _ => false,
    }
}

/// Every node below `node` with its path, not descending into per-trial references; the
/// references' paths go to `refs`.
fn walk<'n>(
    node: &'n Node,
    at: &mut Vec<Seg>,
    keys: &[&str],
    refs: &mut Vec<Vec<Seg>>,
    out: &mut Vec<(Vec<Seg>, &'n Node)>,
) {
    if is_per_trial(node, keys) {
        refs.push(at.clone());
        return;
    }
    out.push((at.clone(), node));
    match &node.kind {
        NodeKind::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Seg::Index(i));
                walk(item, at, keys, refs, out);
                at.pop();
            }
        }
        NodeKind::Map(entries) => {
            for (key, value) in entries {
                at.push(Seg::Key(key.as_str().map_or_else(|| key.to_json().to_string(), str::to_owned)));
                walk(value, at, keys, refs, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn is_prefix(prefix: &[Seg], of: &[Seg]) -> bool {
    prefix.len() <= of.len() && prefix.iter().zip(of).all(|(a, b)| a == b)
}

/// The node at `at` below `node`, or its nearest ancestor.
fn nearest<'n>(node: &'n Node, at: &[Seg]) -> &'n Node {
    let mut current = node;
    for seg in at {
        let next = match (seg, &current.kind) {
            (Seg::Key(key), NodeKind::Map(_)) => current.get(key),
            (Seg::Index(i), NodeKind::Seq(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(n) => current = n,
            None => break,
        }
    }
    current
}

fn location_segs(location: &::jsonschema::paths::Location) -> Vec<Seg> {
    location
        .iter()
        .map(|seg| match seg {
            ::jsonschema::paths::LocationSegment::Property(p) => Seg::Key(p.into_owned()),
            ::jsonschema::paths::LocationSegment::Index(i) => Seg::Index(i),
        })
        .collect()
}

/// An error at an ancestor of a reference that does not depend on the reference's value.
fn independent_of_children(kind: &::jsonschema::error::ValidationErrorKind) -> bool {
    use ::jsonschema::error::ValidationErrorKind as K;
    matches!(
        kind,
        K::Required { .. }
            | K::AdditionalProperties { .. }
            | K::Type { .. }
            | K::MinProperties { .. }
            | K::MaxProperties { .. }
            | K::MinItems { .. }
            | K::MaxItems { .. }
            | K::PropertyNames { .. }
    )
}

/// Check one call's arguments against its tool's schema. `keys` are the reference keys
/// whose values are known only per trial ([`PER_TRIAL_KEYS`], [`SCRIPT_PER_TRIAL_KEYS`]).
pub fn check_arguments(arguments: &Node, schema: &ToolSchema, keys: &[&str]) -> Vec<ArgProblem> {
    let Ok(validator) = &schema.validator else { return Vec::new() };
    if is_per_trial(arguments, keys) {
        return Vec::new();
    }
    let mut refs = Vec::new();
    let mut nodes = Vec::new();
    walk(arguments, &mut Vec::new(), keys, &mut refs, &mut nodes);
    let instance = arguments.to_json();
    let mut problems = Vec::new();
    let mut refused: BTreeSet<Vec<Seg>> = BTreeSet::new();
    for error in validator.iter_errors(&instance) {
        let at = location_segs(error.instance_path());
        if refs.iter().any(|r| is_prefix(r, &at)) {
            continue;
        }
        if refs.iter().any(|r| is_prefix(&at, r)) && !independent_of_children(error.kind()) {
            continue;
        }
        if problems.len() >= MAX_ERRORS_PER_CALL {
            break;
        }
        let (kind, at, message) = match error.kind() {
            ::jsonschema::error::ValidationErrorKind::Required { property } => {
                let mut missing = at.clone();
                missing.push(Seg::Key(property.as_str().map_or_else(|| property.to_string(), str::to_owned)));
                (FindingKind::MissingArgument, missing, "missing; the tool's schema requires it".to_owned())
            }
            _ => {
                refused.insert(at.clone());
                (FindingKind::SchemaViolation, at, clip(&error.to_string()))
            }
        };
        let node = nearest(arguments, &at);
        problems.push(ArgProblem { severity: Severity::Error, kind, at, mark: node.mark, message, yaml11: None });
    }
    for (at, node) in nodes {
        let Some(surprise) = Yaml11::of(node) else { continue };
        if refused.contains(&at) {
            // Refused: the violation says why, if the text would pass.
            let mut alternative = instance.clone();
            if let Some(slot) = pointer_mut(&mut alternative, &at) {
                *slot = Value::String(surprise.written.clone());
            }
            let still = validator.iter_errors(&alternative).any(|e| location_segs(e.instance_path()) == at);
            if !still {
                for problem in problems.iter_mut().filter(|p| p.at == at && p.kind == FindingKind::SchemaViolation) {
                    problem.message = format!("{}; {}", problem.message, surprise.hint());
                    problem.yaml11 = Some(surprise.clone());
                }
            }
        } else if wants_string(&schema.raw, &schema.raw, &at, 0) {
            problems.push(ArgProblem {
                severity: Severity::Warning,
                kind: FindingKind::Yaml11,
                at,
                mark: node.mark,
                message: format!("the tool's schema accepts a string here, and {}", surprise.hint()),
                yaml11: Some(surprise),
            });
        }
    }
    problems.sort_by_key(|p| (p.mark.line, p.mark.column));
    problems
}

fn pointer_mut<'v>(value: &'v mut Value, at: &[Seg]) -> Option<&'v mut Value> {
    let mut current = value;
    for seg in at {
        current = match (seg, current) {
            (Seg::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (Seg::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Whether the (sub)schemas that apply at `at` name the type `string` (or a string `const`/`enum`).
fn wants_string(root: &Value, schema: &Value, at: &[Seg], depth: usize) -> bool {
    if depth > MAX_SCHEMA_DEPTH {
        return false;
    }
    if let Some(target) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'))
        && let Some(resolved) = root.pointer(target)
        && wants_string(root, resolved, at, depth + 1)
    {
        return true;
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key)
            && branches.iter().any(|b| wants_string(root, b, at, depth + 1))
        {
            return true;
        }
    }
    let Some((first, rest)) = at.split_first() else {
        let typed = match schema.get("type") {
            Some(Value::String(t)) => t == "string",
            Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
            _ => false,
        };
        let constant = schema.get("const").is_some_and(Value::is_string)
            || schema.get("enum").and_then(Value::as_array).is_some_and(|e| e.iter().any(Value::is_string));
        return typed || constant;
    };
    let child = match first {
        Seg::Key(key) => schema
            .get("properties")
            .and_then(|p| p.get(key))
            .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object())),
        Seg::Index(i) => {
            schema.get("prefixItems").and_then(|p| p.get(*i)).or_else(|| schema.get("items").filter(|a| a.is_object()))
        }
    };
    child.is_some_and(|c| wants_string(root, c, rest, depth + 1))
}

/// One call the campaign makes with fixed arguments, or one place that names a tool.
struct Call<'a> {
    file: &'a FsPath,
    /// The document's tree (for positions).
    doc: &'a Node,
    /// Describes the call for messages.
    describe: String,
    /// The resolved tool name (`None`: known only per trial, not checked).
    tool: Option<String>,
    /// Where the tool name is written.
    tool_at: Path,
    /// The arguments (`None`: a place that only names a tool).
    arguments: Option<(Node, Path)>,
    keys: &'static [&'static str],
    /// When the tool is a `{binding: NAME}` the target binds: the binding and where the
    /// campaign writes it (`campaign.yaml:15:28`), the place of a typo in the tool's name.
    bound: Option<(String, String)>,
}

/// The binding a tool reference names and where the campaign binds it for `target`, when the
/// tool is a `{binding: NAME}` reference the target binds.
fn bound_at(bundle: &Bundle, target: &Target, scenario: &str, tool: &Value) -> Option<(String, String)> {
    let Some((RefKind::Binding, Value::String(name))) = refs::as_reference(tool) else { return None };
    target.bindings.get(scenario)?.get(name)?;
    let t = bundle.campaign.value.targets.iter().position(|x| x.id == target.id)?;
    let at = Path::root().key("targets").index(t).key("bindings").key(scenario).key(name.clone());
    let mark = bundle.campaign.node.find(&at)?.mark;
    let path = &bundle.campaign.path;
    let file = path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
    Some((name.clone(), format!("{file}:{}:{}", mark.line, mark.column)))
}

/// The tool name `tool` stands for with the scenario's bindings (`fallback` when it does not
/// resolve), if it resolves to a string.
fn tool_name(tool: &Value, bindings: &Map<String, Value>, fallback: Option<&str>) -> Option<String> {
    let values = Values { bindings: bindings.clone(), ..Values::default() };
    if refs::find_refs(tool).iter().all(|r| r.kind == RefKind::Binding)
        && let Ok(Value::String(name)) = values.resolve(tool)
    {
        return Some(name);
    }
    fallback.map(str::to_owned)
}

/// The arguments node at `at` in `doc`, or an empty mapping at the call's position.
fn arguments_node(doc: &Node, at: &Path, call: &Path) -> Node {
    doc.find(at).cloned().unwrap_or_else(|| {
        let mark = doc.find(call).map_or(Mark::UNKNOWN, |n| n.mark);
        Node::new(NodeKind::Map(Vec::new()), mark)
    })
}

fn examples<'a>(
    out: &mut Vec<Call<'a>>,
    file: &'a FsPath,
    doc: &'a Node,
    rule_at: &Path,
    rule_id: &str,
    examples: &Examples,
) {
    for (label, list) in [("positive", &examples.positive), ("negative", &examples.negative)] {
        for (i, example) in list.iter().enumerate() {
            let at = rule_at.key("examples").key(label).index(i);
            out.push(Call {
                file,
                doc,
                describe: format!("rule `{rule_id}` {label} example {}", i + 1),
                tool: Some(example.name.clone()),
                tool_at: at.key("name"),
                arguments: Some((arguments_node(doc, &at.key("arguments"), &at), at.key("arguments"))),
                keys: PER_TRIAL_KEYS,
                bound: None,
            });
        }
    }
}

/// The calls and tool names of one scenario (with the campaign's script) for `target`.
fn calls<'a>(bundle: &'a Bundle, scenario: usize, target: &Target) -> Vec<Call<'a>> {
    let doc = &bundle.scenarios[scenario];
    let s = &doc.value;
    let bindings = target.bindings.get(&s.id).cloned().unwrap_or_default();
    let mut out = Vec::new();
    let phases =
        s.setup
            .iter()
            .enumerate()
            .map(|(i, a)| (Path::root().key("setup").index(i), "setup", a))
            .chain(
                s.verify.checks.iter().enumerate().map(|(i, c)| {
                    (Path::root().key("verify").key("checks").index(i).key("action"), "verify", &c.action)
                }),
            )
            .chain(s.cleanup.iter().enumerate().map(|(i, a)| (Path::root().key("cleanup").index(i), "cleanup", a)));
    for (at, phase, action) in phases {
        if let Action::McpTool(a) = action {
            out.push(Call {
                file: &doc.path,
                doc: &doc.node,
                describe: format!("{phase} action `{}`", a.id),
                tool: tool_name(&a.tool, &bindings, None),
                tool_at: at.key("tool"),
                arguments: Some((arguments_node(&doc.node, &at.key("arguments"), &at), at.key("arguments"))),
                keys: PER_TRIAL_KEYS,
                bound: bound_at(bundle, target, &s.id, &a.tool),
            });
        }
    }
    for (kind, rules) in [("proposal_rules", &s.proposal_rules), ("safety_rules", &s.safety_rules)] {
        for (i, rule) in rules.iter().enumerate() {
            let at = Path::root().key(kind).index(i);
            out.push(Call {
                file: &doc.path,
                doc: &doc.node,
                describe: format!("rule `{}`", rule.id),
                tool: tool_name(&rule.tool, &bindings, None),
                tool_at: at.key("tool"),
                arguments: None,
                keys: PER_TRIAL_KEYS,
                bound: bound_at(bundle, target, &s.id, &rule.tool),
            });
            examples(&mut out, &doc.path, &doc.node, &at, &rule.id, &rule.examples);
        }
    }
    if let ToolSelection::List(items) = &s.exercise.tools {
        for (i, item) in items.iter().enumerate() {
            out.push(Call {
                file: &doc.path,
                doc: &doc.node,
                describe: "exercise.tools".into(),
                tool: tool_name(item, &bindings, None),
                tool_at: Path::root().key("exercise").key("tools").index(i),
                arguments: None,
                keys: PER_TRIAL_KEYS,
                bound: bound_at(bundle, target, &s.id, item),
            });
        }
    }
    let campaign = &bundle.campaign;
    if !campaign.value.model_free && campaign.value.model.is_none() {
        // The scripted model: the campaign's script, or the built-in default policy.
        let (script, written) = match &campaign.value.script {
            Some(script) => (script.expanded(), script.policy.is_none()),
            None => (Script::default_policy(), false),
        };
        let origin = match (&campaign.value.script, written) {
            (Some(_), true) => "",
            (Some(_), false) => " (the script's policy)",
            (None, _) => " (the built-in default script)",
        };
        for (i, step) in script.steps.iter().enumerate() {
            for (j, call) in step.calls.iter().enumerate() {
                let at = Path::root().key("script").key("steps").index(i).key("calls").index(j);
                let arguments = if written {
                    arguments_node(&campaign.node, &at.key("arguments"), &at)
                } else {
                    let mut node = Node::from_json(&Value::Object(call.arguments.clone()));
                    node.mark = campaign.node.find(&Path::root().key("script")).map_or(Mark::UNKNOWN, |n| n.mark);
                    node
                };
                let name = call.id.as_deref().map(|id| format!(" `{id}`")).unwrap_or_default();
                out.push(Call {
                    file: &campaign.path,
                    doc: &campaign.node,
                    describe: format!("script step {} call {}{name}{origin}", i + 1, j + 1),
                    tool: tool_name(&call.tool, &bindings, call.fallback.as_deref()),
                    tool_at: if written { at.key("tool") } else { Path::root().key("script") },
                    arguments: Some((arguments, at.key("arguments"))),
                    keys: SCRIPT_PER_TRIAL_KEYS,
                    bound: bound_at(bundle, target, &s.id, &call.tool),
                });
            }
        }
    }
    out
}

/// Check every call and tool name of `bundle` against the tools `target` lists. Findings come
/// in file order (by file, line and column); a finding repeated across scenarios (the
/// campaign's script) is reported once.
pub fn check(bundle: &Bundle, target: &Target, tools: &[ListedTool]) -> Vec<Finding> {
    // The first listing of a name counts; schemas are compiled when a call first needs them
    // (a target may list thousands of tools).
    let mut raw: BTreeMap<&str, &Value> = BTreeMap::new();
    for t in tools {
        raw.entry(t.name.as_str()).or_insert(&t.input_schema);
    }
    let mut compiled: BTreeMap<String, ToolSchema> = BTreeMap::new();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).take(MAX_NAMES_LISTED).collect();
    let listed = match tools.len() {
        0 => "none".to_owned(),
        n if n > MAX_NAMES_LISTED => format!("{} and {} more", names.join(", "), n - MAX_NAMES_LISTED),
        _ => names.join(", "),
    };
    let mut findings: Vec<Finding> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut unusable_reported: BTreeSet<String> = BTreeSet::new();
    let mut push = |finding: Finding, findings: &mut Vec<Finding>| {
        if seen.insert(finding.to_string()) {
            findings.push(finding);
        }
    };
    for scenario in 0..bundle.scenarios.len() {
        for call in calls(bundle, scenario, target) {
            let Some(tool) = call.tool.clone() else { continue };
            let finding = |severity, kind, at: &Path, mark: Mark, argument: String, message: String, yaml11| Finding {
                severity,
                kind,
                target: target.id.clone(),
                file: call.file.to_owned(),
                line: mark.line,
                column: mark.column,
                path: at.to_string(),
                call: call.describe.clone(),
                tool: tool.clone(),
                argument,
                message,
                yaml11,
            };
            let Some(input_schema) = raw.get(tool.as_str()) else {
                let mark = nearest(call.doc, &call.tool_at.0).mark;
                push(
                    finding(
                        Severity::Error,
                        FindingKind::UnknownTool,
                        &call.tool_at,
                        mark,
                        String::new(),
                        format!(
                            "target {} lists no tool `{tool}`{}; it lists: {listed}{}",
                            target.id,
                            call.bound
                                .as_ref()
                                .map(|(name, at)| format!(" (binding `{name}`, bound to it at {at})"))
                                .unwrap_or_default(),
                            crate::format::quote::did_you_mean(&tool, tools.iter().map(|t| t.name.as_str())),
                        ),
                        None,
                    ),
                    &mut findings,
                );
                continue;
            };
            let Some((arguments, args_at)) = &call.arguments else { continue };
            let schema = compiled.entry(tool.clone()).or_insert_with(|| ToolSchema::new(input_schema));
            if let Some(why) = schema.unusable() {
                if unusable_reported.insert(tool.clone()) {
                    push(
                        finding(
                            Severity::Warning,
                            FindingKind::UnusableSchema,
                            args_at,
                            arguments.mark,
                            "arguments".into(),
                            format!(
                                "the tool's inputSchema is not a usable JSON Schema ({why}); arguments of this tool are not checked"
                            ),
                            None,
                        ),
                        &mut findings,
                    );
                }
                continue;
            }
            for problem in check_arguments(arguments, schema, call.keys) {
                let mut path = args_at.clone();
                path.0.extend(problem.at.iter().cloned());
                let argument =
                    Path(std::iter::once(Seg::Key("arguments".into())).chain(problem.at.iter().cloned()).collect())
                        .to_string();
                push(
                    finding(
                        problem.severity,
                        problem.kind,
                        &path,
                        problem.mark,
                        argument,
                        problem.message,
                        problem.yaml11,
                    ),
                    &mut findings,
                );
            }
        }
    }
    findings.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    findings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::format::yaml;

    /// The convert_time schema of mcp-server-time 2026.10.19, as its tools/list gives it.
    fn convert_time() -> ToolSchema {
        ToolSchema::new(&json!({
            "type": "object",
            "properties": {
                "source_timezone": {"type": "string", "description": "Source IANA timezone name"},
                "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
                "target_timezone": {"type": "string", "description": "Target IANA timezone name"}
            },
            "required": ["source_timezone", "time", "target_timezone"]
        }))
    }

    fn args(text: &str) -> Node {
        yaml::parse(text).expect("valid yaml")
    }

    #[test]
    fn the_loader_keeps_the_text_of_unquoted_numbers_and_booleans() {
        let node = args("time: 14:30\nquoted: '14:30'\nflag: yes\nmode: 0755\nletter: n\nplain: text\ncount: 3\n");
        let at = |k: &str| node.get(k).expect("key");
        assert_eq!(at("time").kind, NodeKind::Int(870));
        assert_eq!(at("time").plain.as_deref(), Some("14:30"));
        assert_eq!(at("quoted").plain, None);
        assert_eq!(at("flag").plain.as_deref(), Some("yes"));
        assert_eq!(at("mode").kind, NodeKind::Int(493));
        // PyYAML keeps `n` a string, and so do we: nothing to report.
        assert_eq!(at("letter").kind, NodeKind::Str("n".into()));
        assert_eq!(at("plain").plain, None);
        assert_eq!(at("count").plain.as_deref(), Some("3"));
        assert_eq!(Yaml11::of(at("count")), None);
        let octal = Yaml11::of(at("mode")).expect("octal");
        assert_eq!(
            (octal.rule, octal.became.clone(), octal.yaml12.clone()),
            (Yaml11Rule::Octal, json!(493), json!(755))
        );
        let boolean = Yaml11::of(at("flag")).expect("boolean");
        assert_eq!((boolean.rule, boolean.became.clone()), (Yaml11Rule::Boolean, json!(true)));
        assert_eq!(
            Yaml11::of(&args("a: true").get("a").cloned().expect("a")),
            None,
            "true is a boolean in YAML 1.2 too"
        );
    }

    #[test]
    fn a_sexagesimal_time_is_refused_with_the_yaml_hint_and_a_missing_argument_reported() {
        let node = args("source_timezone: Europe/Warsaw\ntime: 14:30\n");
        let problems = check_arguments(&node, &convert_time(), PER_TRIAL_KEYS);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        let time = &problems[1];
        assert_eq!((time.kind, time.severity), (FindingKind::SchemaViolation, Severity::Error));
        assert_eq!(time.at, vec![Seg::Key("time".into())]);
        assert_eq!(time.mark, Mark::new(2, 7));
        assert!(
            time.message.starts_with("870 is not of type \"string\"; the unquoted `14:30` is a YAML 1.1 base-60"),
            "{}",
            time.message
        );
        assert!(
            time.message.contains("reads it as 870") && time.message.contains("quote it ('14:30')"),
            "{}",
            time.message
        );
        let missing = &problems[0];
        assert_eq!(missing.kind, FindingKind::MissingArgument);
        assert_eq!(missing.at, vec![Seg::Key("target_timezone".into())]);
        assert_eq!(missing.mark, Mark::new(1, 1), "at the arguments mapping");
        // Quoted, it passes.
        let ok = args("source_timezone: Europe/Warsaw\ntime: '14:30'\ntarget_timezone: Asia/Tokyo\n");
        assert_eq!(check_arguments(&ok, &convert_time(), PER_TRIAL_KEYS), vec![]);
    }

    #[test]
    fn references_count_as_present_and_are_never_type_checked() {
        let node =
            args("source_timezone: {binding: tz}\ntime: {runner: canary}\ntarget_timezone: {template: 'x {canary}'}\n");
        assert_eq!(check_arguments(&node, &convert_time(), PER_TRIAL_KEYS), vec![]);
        // `{output: …}` is a reference in scripts only; elsewhere a literal map (refused).
        let node = args("source_timezone: a\ntime: {output: now}\ntarget_timezone: b\n");
        assert_eq!(check_arguments(&node, &convert_time(), SCRIPT_PER_TRIAL_KEYS), vec![]);
        let refused = check_arguments(&node, &convert_time(), PER_TRIAL_KEYS);
        assert_eq!(refused.len(), 1);
        assert!(refused[0].message.contains("is not of type \"string\""), "{refused:?}");
        // The whole arguments as a reference: nothing to check.
        assert_eq!(check_arguments(&args("binding: all_args\n"), &convert_time(), PER_TRIAL_KEYS), vec![]);
        // An error that depends on a reference's value (anyOf at the parent) is not reported.
        let schema = ToolSchema::new(&json!({
            "type": "object",
            "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"type": "boolean"}}}],
            "required": ["a", "b"]
        }));
        let problems = check_arguments(&args("a: {capture: x}\n"), &schema, PER_TRIAL_KEYS);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, FindingKind::MissingArgument);
        assert_eq!(problems[0].at, vec![Seg::Key("b".into())]);
    }

    #[test]
    fn a_yaml11_value_the_schema_also_accepts_is_a_warning_only_where_a_string_is_wanted() {
        let schema = ToolSchema::new(&json!({
            "type": "object",
            "properties": {
                "when": {"type": ["string", "integer"]},
                "mode": {"anyOf": [{"$ref": "#/$defs/text"}, {"type": "integer"}]},
                "enabled": {"type": "boolean"},
                "anything": {}
            },
            "$defs": {"text": {"type": "string"}}
        }));
        let node = args("when: 1:30\nmode: 0644\nenabled: on\nanything: off\n");
        let problems = check_arguments(&node, &schema, PER_TRIAL_KEYS);
        let warned: Vec<_> = problems.iter().map(|p| (p.severity, p.kind, p.at.clone())).collect();
        assert_eq!(
            warned,
            vec![
                (Severity::Warning, FindingKind::Yaml11, vec![Seg::Key("when".into())]),
                (Severity::Warning, FindingKind::Yaml11, vec![Seg::Key("mode".into())]),
            ],
            "{problems:#?}"
        );
        assert!(problems[0].message.contains("reads it as 90"), "{}", problems[0].message);
        assert!(
            problems[1].message.contains("reads it as 420, while a YAML 1.2 parser reads 644"),
            "{}",
            problems[1].message
        );
        // A boolean refused where a string is wanted carries the hint; nested too.
        let schema = ToolSchema::new(&json!({
            "type": "object",
            "properties": {"opts": {"type": "array", "items": {"type": "string"}}}
        }));
        let problems = check_arguments(&args("opts: [fast, no]\n"), &schema, PER_TRIAL_KEYS);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].at, vec![Seg::Key("opts".into()), Seg::Index(1)]);
        assert_eq!(problems[0].mark, Mark::new(1, 14));
        assert!(
            problems[0].message.starts_with("false is not of type \"string\"; the unquoted `no` is a YAML 1.1 boolean")
        );
    }

    #[test]
    fn an_unusable_schema_checks_nothing_and_says_why() {
        let schema =
            ToolSchema::new(&json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}));
        assert!(schema.unusable().is_some());
        assert_eq!(check_arguments(&args("a: 1\n"), &schema, PER_TRIAL_KEYS), vec![]);
        let schema = ToolSchema::new(&json!({"type": 12}));
        assert!(schema.unusable().is_some());
    }

    #[test]
    fn tool_lists_are_read_from_every_recorded_shape() {
        let tool = json!({"name": "convert_time", "inputSchema": {"type": "object"}});
        let bare = ToolLists::from_json(&json!([tool])).expect("a bare list");
        assert_eq!(bare.for_target("any").map(<[ListedTool]>::len), Some(1));
        let result = ToolLists::from_json(&json!({"tools": [tool], "nextCursor": null})).expect("a tools/list result");
        assert_eq!(result.for_target("x").map(|t| t[0].name.as_str()), Some("convert_time"));
        let preflight = ToolLists::from_json(&json!({"ok": true, "targets": [
            {"target": "a", "tools": ["convert_time"], "tool_list": [tool]},
            {"target": "b", "tools": [], "problems": ["failed to start"]}
        ]}))
        .expect("preflight output");
        assert!(preflight.for_target("a").is_some());
        assert!(preflight.for_target("b").is_none(), "no list: nothing to check");
        for (bad, says) in [
            (json!({"nothing": 1}), "expected a JSON array of tools"),
            (json!([{"inputSchema": {}}]), "the list[0]: a tool without a string `name`"),
            (json!({"tools": [{"name": "a", "inputSchema": "x"}]}), "`inputSchema` is a string"),
            (json!({"targets": [{"tool_list": []}]}), "targets[0] has no string `target`"),
        ] {
            let e = ToolLists::from_json(&bad).expect_err("refused");
            assert!(e.contains(says), "{e}");
        }
    }

    /// A stdio campaign whose scenario has setup, verify and cleanup `mcp_tool` actions.
    const ACTIONS_SCENARIO: &str = "schema_version: 1
id: actions
title: Actions
description: Setup, verify and cleanup calls.
bindings: [add, get]
exercise:
  system: s
  user: u
  tools: [{binding: get}]
setup:
  - type: mcp_tool
    id: seed
    tool: {binding: add}
    arguments: {title: yes, body: {runner: canary}, size: 0755}
proposal_rules:
  - id: r
    tool: {binding: get}
    examples:
      positive: [{name: get, arguments: {id: 1}}]
      negative: [{name: add, arguments: {title: x}}]
verify:
  checks:
    - id: read
      action: {type: mcp_tool, id: fetch, tool: {binding: get}}
      assertions: [{path: '', op: contains, value: x}]
cleanup:
  - {type: mcp_tool, id: wipe, tool: wipe_all}
";

    #[test]
    fn setup_verify_and_cleanup_actions_and_examples_are_checked_with_their_positions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let campaign = "schema_version: 1\nmodel_free: true\ntargets:\n  - id: t\n    transport: {type: stdio, command: x}\n    bindings:\n      actions: {add: add_note, get: get}\nscenarios: [s.yaml]\n";
        std::fs::write(dir.path().join("c.yaml"), campaign).expect("write");
        std::fs::write(dir.path().join("s.yaml"), ACTIONS_SCENARIO).expect("write");
        let bundle = crate::load::load_campaign(&dir.path().join("c.yaml"), &crate::validate::LoadOptions::default())
            .expect("a valid campaign");
        let tools = vec![
            ListedTool {
                name: "add_note".into(),
                input_schema: json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}, "size": {"type": "integer"}}, "required": ["title", "body"]}),
            },
            ListedTool {
                name: "get".into(),
                input_schema: json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            },
        ];
        let findings = check(&bundle.clone(), &bundle.campaign.value.targets[0], &tools);
        let lines: Vec<String> =
            findings.iter().map(|f| f.to_string().replace(&format!("{}/", dir.path().display()), "")).collect();
        assert_eq!(
            lines,
            [
                "s.yaml:14:24: arguments.title of tool add_note: true is not of type \"string\"; the unquoted `yes` is a YAML 1.1 boolean: elengtis, like the original Python tool (PyYAML safe_load, YAML 1.1), reads it as true, while a YAML 1.2 parser reads the text \"yes\"; quote it ('yes') to pass the text (setup action `seed`)",
                "s.yaml:20:25: proposal_rules[0].examples.negative[0].name: target t lists no tool `add`; it lists: add_note, get (rule `r` negative example 1)",
                "s.yaml:24:15: arguments.id of tool get: missing; the tool's schema requires it (verify action `fetch`)",
                "s.yaml:27:38: cleanup[0].tool: target t lists no tool `wipe_all`; it lists: add_note, get (cleanup action `wipe`)",
            ],
            "{findings:#?}"
        );
        // `size: 0755` is an integer where an integer is wanted: nothing to say.
        assert!(findings.iter().all(|f| f.yaml11.as_ref().is_none_or(|y| y.rule != Yaml11Rule::Octal)));
        // Against no tools at all, every name is unknown.
        assert!(
            check(&bundle, &bundle.campaign.value.targets[0], &[]).iter().all(|f| f.kind == FindingKind::UnknownTool)
        );
    }
}
