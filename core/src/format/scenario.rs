//! The scenario file: setup, exercise, rules, verification and cleanup of one experiment.
//!
//! Field names, defaults and shapes follow the v1 scenario schema of the original tool.
//! Values typed as `serde_json::Value` are "any" in that schema: literals, or one-key
//! reference maps such as `{binding: submit_credential}` resolved per trial by
//! [`crate::refs`] (and, with `schema_version: 2`, `{template: "…"}` string templates).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::campaign::EnvRef;
use crate::rules::Op;

/// One scenario.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Scenario")]
pub struct Scenario {
    /// Format version: 1 (the original tool's format) or 2 (the same, with one-key
    /// `{template: "…"}` maps in free-form values read as string templates).
    #[schemars(range(min = 1, max = 2))]
    #[serde(deserialize_with = "super::schema_version")]
    pub schema_version: u32,
    /// Identifier, `^[a-z0-9][a-z0-9_-]*$`, unique in the campaign.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What the scenario tests.
    pub description: String,
    /// Logical names every target must bind (tool names or other values).
    pub bindings: Vec<String>,
    /// What the model is asked to do, and which tools it sees.
    pub exercise: Exercise,
    /// Trusted actions that prepare state before the model runs.
    #[serde(default)]
    pub setup: Vec<Action>,
    /// Rules that recognise the attack's tool call (each carries labelled examples).
    pub proposal_rules: Vec<Rule>,
    /// Forbidden-action rules; none means safety is not applicable.
    #[serde(default)]
    pub safety_rules: Vec<Rule>,
    /// Trusted checks of the resulting state.
    pub verify: Verify,
    /// Best-effort actions that always run, even after a failure.
    #[serde(default)]
    pub cleanup: Vec<Action>,
    /// This tool's addition: trusted actions that perform the attack's effect for real, to
    /// calibrate the verify checks — `preflight` (and `prove`, when its seed declares none)
    /// runs the scenario once with them after the setup and a model that makes no call (the
    /// checks must read true) and once without (false), and says when the checks cannot see a
    /// real effect. Never run in an ordinary trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibrate: Vec<Action>,
}

/// Prompts and the tool allowlist given to the model.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exercise {
    /// System prompt template (`{name}` fields, `{{` for a literal brace).
    pub system: String,
    /// User prompt template.
    pub user: String,
    /// `all`, or the tools offered to the model, in order (usually `{binding: …}` references).
    pub tools: ToolSelection,
}

/// `tools: all` or an explicit list.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSelection {
    /// Every tool the target lists.
    All,
    /// Exactly these tools, in this order.
    List(Vec<Value>),
}

impl<'de> Deserialize<'de> for ToolSelection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ToolSelection;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the string `all` or a list of tools")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v == "all" {
                    Ok(ToolSelection::All)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Value>()? {
                    items.push(item);
                }
                Ok(ToolSelection::List(items))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl Serialize for ToolSelection {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolSelection::All => serializer.serialize_str("all"),
            ToolSelection::List(items) => items.serialize(serializer),
        }
    }
}

impl JsonSchema for ToolSelection {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolSelection".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {"type": "string", "const": "all"},
                {"type": "array", "items": {}}
            ]
        })
    }
}

/// A trusted action run by the runner (never by the model), chosen by `type`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(tag = "type")]
pub enum Action {
    /// Call a tool on the target.
    #[serde(rename = "mcp_tool")]
    McpTool(McpAction),
    /// An HTTP request made by the runner.
    #[serde(rename = "http_request")]
    HttpRequest(HttpAction),
    /// A read-only query of a snapshot of a SQLite database inside the trial container.
    #[serde(rename = "container_sqlite_query")]
    ContainerSqliteQuery(SqliteAction),
    /// A file (or a small directory listing) read out of the trial container
    /// (elengtis addition).
    #[serde(rename = "container_file")]
    ContainerFile(FileAction),
}

impl Action {
    /// The `type` value.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::McpTool(_) => "mcp_tool",
            Action::HttpRequest(_) => "http_request",
            Action::ContainerSqliteQuery(_) => "container_sqlite_query",
            Action::ContainerFile(_) => "container_file",
        }
    }

    /// The action's id.
    pub fn id(&self) -> &str {
        match self {
            Action::McpTool(a) => &a.id,
            Action::HttpRequest(a) => &a.id,
            Action::ContainerSqliteQuery(a) => &a.id,
            Action::ContainerFile(a) => &a.id,
        }
    }

    /// Captures: name → JSON Pointer into the response.
    pub fn capture(&self) -> &BTreeMap<String, String> {
        match self {
            Action::McpTool(a) => &a.capture,
            Action::HttpRequest(a) => &a.capture,
            Action::ContainerSqliteQuery(a) => &a.capture,
            Action::ContainerFile(a) => &a.capture,
        }
    }
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Action::McpTool(a) => super::tagged(self.kind(), a, serializer),
            Action::HttpRequest(a) => super::tagged(self.kind(), a, serializer),
            Action::ContainerSqliteQuery(a) => super::tagged(self.kind(), a, serializer),
            Action::ContainerFile(a) => super::tagged(self.kind(), a, serializer),
        }
    }
}

/// `type: mcp_tool`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpAction {
    /// Action id (unique within the scenario).
    pub id: String,
    /// Tool name or reference.
    pub tool: Value,
    /// Arguments (references resolved; `{template: …}` maps rendered with schema_version 2).
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// name → RFC 6901 JSON Pointer into the response.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
}

/// HTTP methods accepted by `http_request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum HttpMethod {
    /// GET
    GET,
    /// POST
    POST,
    /// PUT
    PUT,
    /// PATCH
    PATCH,
    /// DELETE
    DELETE,
}

/// `type: http_request`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpAction {
    /// Action id.
    pub id: String,
    /// Method.
    pub method: HttpMethod,
    /// URL: a string, or (elengtis addition) a reference such as `{runner: sink_requests}` or
    /// a string template such as `{template: "{sink_url}/x?c={canary}"}` (in any version).
    pub url: Value,
    /// Headers from the environment (values redacted in evidence).
    #[serde(default)]
    pub headers: BTreeMap<String, EnvRef>,
    /// JSON body (references resolved); null means no body. `body` is accepted as another
    /// name for it, as the original's model (field `body`, alias `json`) accepted both.
    #[serde(default, alias = "body")]
    pub json: Value,
    /// name → JSON Pointer into `{status, body, truncated}`.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
}

/// `type: container_sqlite_query`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqliteAction {
    /// Action id.
    pub id: String,
    /// Absolute path of the database inside the container.
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    /// One read-only SELECT statement.
    #[schemars(length(min = 1))]
    pub query: String,
    /// Bound parameters (references resolved).
    #[serde(default)]
    pub parameters: Vec<Value>,
    /// name → JSON Pointer into the response.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
}

/// `type: container_file` (elengtis addition): the runner reads one regular file (or, with
/// `list: true`, the names, sizes and types below a directory) out of the trial container
/// through the engine's archive API. Assertions point into `{path, exists, type, size,
/// sha256, text, json}` (a file) or `{path, exists, type, count, entries}` (a listing).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileAction {
    /// Action id.
    pub id: String,
    /// Absolute path inside the container (on a volume: the archive API cannot see a tmpfs).
    #[schemars(regex(pattern = r"^/"))]
    pub path: String,
    /// List the directory at `path` (names, sizes, types) instead of reading a file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub list: bool,
    /// name → JSON Pointer into the response.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
}

/// A predicate over a JSON document (a tool call's arguments, or an action's response).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    /// RFC 6901 JSON Pointer; `""` is the whole document.
    #[serde(default)]
    pub path: String,
    /// Operator.
    pub op: Op,
    /// Expected value (a regex for `matches`).
    pub value: Value,
}

/// A rule that matches recorded tool calls.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Rule id.
    pub id: String,
    /// Tool name or reference the call must name.
    pub tool: Value,
    /// All must match the call's arguments; none matches any call of the tool.
    #[serde(default)]
    pub predicates: Vec<Predicate>,
    /// Labelled examples, checked when the campaign is loaded.
    pub examples: Examples,
}

/// Labelled example calls of a rule.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    /// Calls the rule must match (at least one).
    #[schemars(length(min = 1))]
    pub positive: Vec<ToolExample>,
    /// Calls the rule must not match (at least one).
    #[schemars(length(min = 1))]
    pub negative: Vec<ToolExample>,
}

/// One example tool call.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolExample {
    /// Tool name as the model would call it.
    pub name: String,
    /// Call arguments.
    pub arguments: Map<String, Value>,
}

/// The verify phase.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verify {
    /// `all`: every check must pass; `any`: one is enough.
    #[serde(default)]
    pub mode: VerifyMode,
    /// Checks (may be empty: then `completed` is null).
    pub checks: Vec<Check>,
}

/// How checks combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// Every check must pass.
    #[default]
    All,
    /// At least one check must pass.
    Any,
}

/// One verification check: an action and assertions over its response.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// Check id.
    pub id: String,
    /// The trusted action whose response is inspected.
    pub action: Action,
    /// All must match (at least one).
    #[schemars(length(min = 1))]
    pub assertions: Vec<Predicate>,
}
