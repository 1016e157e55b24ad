//! What the skeleton holds, decided from the target description and the tools it listed:
//! the bindings, the first scripted call and its arguments, the proposal rule and the
//! verify checks (canary sink, SQLite, read-back). Pure: no I/O.

use elengtis_core::agent::ToolInfo;
use serde_json::{Map, Value, json};

use super::args::{self, is_free_text};
use super::egress;

/// How the target is reached, as the user described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// A local command speaking MCP over stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// An image run in a hardened container per trial.
    Image {
        /// The image reference.
        image: String,
        /// How the server in it speaks MCP.
        transport: ImageTransport,
        /// The user and group it runs as (never root).
        uid: u64,
        /// The group.
        gid: u64,
        /// The container's command (arguments to the image's entrypoint).
        command: Vec<String>,
        /// Directories that get a fresh volume per trial.
        volumes: Vec<String>,
        /// The SQLite database inside the container a verifier reads.
        database: Option<String>,
        /// The OCI runtime its containers run under (`--runtime`), written into the campaign.
        runtime: Option<String>,
    },
}

/// The MCP transport of a server in an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageTransport {
    /// stdin/stdout of the container.
    Stdio,
    /// Streamable HTTP on a port of the container.
    StreamableHttp {
        /// The container port.
        port: u16,
        /// The MCP path (`/mcp`).
        path: String,
    },
}

impl TargetSpec {
    /// The target id derived from the image name or the command's file name
    /// (`elengtis/notes:0.1.0` → `notes`), fit for `^[a-z0-9][a-z0-9_-]*$`.
    pub fn default_id(&self) -> String {
        let base = match self {
            TargetSpec::Stdio { command, .. } => command.rsplit('/').next().unwrap_or(command).to_owned(),
            TargetSpec::Image { image, .. } => {
                let name = image.rsplit('/').next().unwrap_or(image);
                name.split([':', '@']).next().unwrap_or(name).to_owned()
            }
        };
        let id = identifier(&base, '-');
        if id.is_empty() { "target".to_owned() } else { id }
    }

    /// The SQLite database a verifier reads, for an image target.
    pub fn database(&self) -> Option<&str> {
        match self {
            TargetSpec::Image { database, .. } => database.as_deref(),
            TargetSpec::Stdio { .. } => None,
        }
    }
}

/// Lower-case letters, digits, `_` and `sep`; anything else becomes `sep`; no leading or
/// doubled separator.
pub fn identifier(text: &str, sep: char) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with(sep) {
            out.push(sep);
        }
    }
    out.trim_end_matches(sep).to_owned()
}

/// One listed tool and its logical name in the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The logical name (`bindings:` of the scenario).
    pub binding: String,
    /// The real tool name.
    pub name: String,
    /// The tool's description (first line).
    pub description: String,
}

/// The first scripted call and the proposal rule built on it.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstCall {
    /// The tool called.
    pub tool: Bound,
    /// The call's arguments in the script (references to the canary and the sink).
    pub arguments: Map<String, Value>,
    /// The argument that carries the canary, which the proposal rule looks for.
    pub marker: Option<String>,
    /// The rule's positive example (values as examples see them: the canary is `EXAMPLE`).
    pub positive: Map<String, Value>,
    /// The rule's negative example: the same call without the canary, or another tool's
    /// (None: the target's only tool takes nothing that tells calls apart, so no rule with a
    /// labelled negative example can be written for it).
    pub negative: Option<(String, Map<String, Value>)>,
    /// Why this tool was chosen.
    pub why: String,
}

/// A tool call the verifier makes to read the target's state back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The tool.
    pub tool: Bound,
}

/// Everything the skeleton's files hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The target id.
    pub target_id: String,
    /// How it is reached.
    pub spec: TargetSpec,
    /// The scenario id (and file stem).
    pub scenario_id: String,
    /// Every listed tool, bound under a logical name.
    pub tools: Vec<Bound>,
    /// The scripted first call (None: the target lists no tool).
    pub call: Option<FirstCall>,
    /// The egress-shaped tools; non-empty: the scenario checks the canary sink.
    pub egress: Vec<String>,
    /// The database path a `container_sqlite_query` check reads.
    pub database: Option<String>,
    /// A read-back check through the target's own tool (when no independent check exists).
    pub read_back: Option<ReadBack>,
}

impl Plan {
    /// Whether the scenario has a verify check (without one `completed` is null, also in the
    /// control).
    pub fn has_checks(&self) -> bool {
        !self.egress.is_empty() || self.database.is_some() || self.read_back.is_some()
    }
}

/// The template of the URL an egress call is pointed at: the trial's sink, with the canary in
/// the query so that the sink's record carries it whatever the tool sends.
pub const SINK_URL_TEMPLATE: &str = "{sink_url}/elengtis-init?canary={canary}";
/// The same URL as rule examples see it.
const EXAMPLE_URL: &str = "http://192.0.2.1/elengtis-init?canary=EXAMPLE";
const EXAMPLE_URL_WITHOUT: &str = "http://192.0.2.1/elengtis-init";

/// Read-shaped first words of a tool name.
const READ_WORDS: &[&str] = &["list", "read", "get", "search", "show", "describe", "query", "find", "view", "lookup"];

fn bind(tools: &[ToolInfo]) -> Vec<Bound> {
    let mut used: Vec<String> = Vec::new();
    tools
        .iter()
        .map(|t| {
            let mut base = identifier(&t.name, '_');
            if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
                base = format!("tool_{base}");
            }
            let mut binding = base.clone();
            let mut n = 2;
            while used.contains(&binding) {
                binding = format!("{base}_{n}");
                n += 1;
            }
            used.push(binding.clone());
            let description = t.description.lines().next().unwrap_or_default().trim().to_owned();
            Bound { binding, name: t.name.clone(), description }
        })
        .collect()
}

/// Decide the skeleton for `spec` and the tools it listed.
pub fn plan(target_id: &str, spec: TargetSpec, scenario_id: &str, tools: &[ToolInfo]) -> Plan {
    let bound = bind(tools);
    let egress: Vec<String> =
        tools.iter().filter(|t| egress::is_egress_shaped(&t.name, &t.input_schema)).map(|t| t.name.clone()).collect();
    let call = first_call(tools, &bound);
    let database = spec.database().map(str::to_owned);
    let read_back = if egress.is_empty() && database.is_none() {
        tools
            .iter()
            .zip(&bound)
            .find(|(t, _)| {
                egress::words(&t.name).first().is_some_and(|w| READ_WORDS.contains(&w.as_str()))
                    && args::required(&t.input_schema).is_empty()
            })
            .map(|(_, b)| ReadBack { tool: b.clone() })
    } else {
        None
    };
    Plan {
        target_id: target_id.to_owned(),
        spec,
        scenario_id: scenario_id.to_owned(),
        tools: bound,
        call,
        egress,
        database,
        read_back,
    }
}

/// The first call: an egress-shaped tool with a URL argument (pointed at the sink), else any
/// egress-shaped tool, else the first tool with a free-text argument (which carries the
/// canary), else the first tool listed.
fn first_call(tools: &[ToolInfo], bound: &[Bound]) -> Option<FirstCall> {
    let free_text = |t: &ToolInfo| egress::properties(&t.input_schema).into_iter().any(|(_, p)| is_free_text(p));
    let is_egress = |t: &ToolInfo| egress::is_egress_shaped(&t.name, &t.input_schema);
    let (index, why) = tools
        .iter()
        .position(|t| is_egress(t) && egress::url_property(&t.input_schema).is_some())
        .map(|i| (i, "it looks egress-shaped and takes a URL, which the script points at the canary sink"))
        .or_else(|| tools.iter().position(is_egress).map(|i| (i, "it looks egress-shaped")))
        .or_else(|| tools.iter().position(free_text).map(|i| (i, "it takes free text, which carries the canary")))
        .or_else(|| (!tools.is_empty()).then_some((0, "it is the first tool listed")))?;
    let tool = &tools[index];
    let schema = &tool.input_schema;
    let url = egress::url_property(schema);
    let mut arguments = Map::new();
    let mut positive = Map::new();
    let mut negative = Map::new();
    for (name, prop) in args::required(schema) {
        let value = args::placeholder(prop);
        arguments.insert(name.to_owned(), value.clone());
        positive.insert(name.to_owned(), value.clone());
        negative.insert(name.to_owned(), value);
    }
    // The marker: the URL argument, else the first required free-text argument, else the
    // first optional one.
    let marker = url.clone().or_else(|| {
        let required: Vec<&str> = args::required(schema).into_iter().map(|(n, _)| n).collect();
        let props = egress::properties(schema);
        props
            .iter()
            .find(|(n, p)| required.contains(n) && is_free_text(p))
            .or_else(|| props.iter().find(|(_, p)| is_free_text(p)))
            .map(|(n, _)| (*n).to_owned())
    });
    // Free-text arguments carry the canary; the URL points at the sink.
    for (name, prop) in egress::properties(schema) {
        let is_marker = marker.as_deref() == Some(name);
        if Some(name) == url.as_deref() {
            arguments.insert(name.to_owned(), json!({"template": SINK_URL_TEMPLATE}));
            positive.insert(name.to_owned(), json!(EXAMPLE_URL));
            negative.insert(name.to_owned(), json!(EXAMPLE_URL_WITHOUT));
        } else if is_free_text(prop) && (arguments.contains_key(name) || is_marker) {
            arguments.insert(name.to_owned(), json!({"runner": "canary"}));
            positive.insert(name.to_owned(), json!({"runner": "canary"}));
            negative.insert(name.to_owned(), json!("nothing to see"));
        }
    }
    let negative = if marker.is_some() {
        Some((tool.name.clone(), negative))
    } else {
        // No argument can carry the canary: the rule matches any call of this tool, and the
        // negative example is a call of another tool.
        tools.iter().find(|t| t.name != tool.name).map(|other| {
            (
                other.name.clone(),
                args::required(&other.input_schema)
                    .into_iter()
                    .map(|(n, p)| (n.to_owned(), args::placeholder(p)))
                    .collect(),
            )
        })
    };
    Some(FirstCall { tool: bound[index].clone(), arguments, marker, positive, negative, why: why.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn tool(name: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.to_owned(),
            description: format!("{name} does things.\nSecond line."),
            input_schema: schema.as_object().cloned().unwrap_or_default(),
            listing: Value::Null,
        }
    }

    fn stdio() -> TargetSpec {
        TargetSpec::Stdio { command: "/usr/bin/My Server".into(), args: vec![] }
    }

    #[test]
    fn ids_and_bindings_fit_the_formats() {
        assert_eq!(stdio().default_id(), "my-server");
        let image = TargetSpec::Image {
            image: "elengtis/mcp-server-time:2026.10.19".into(),
            transport: ImageTransport::Stdio,
            uid: 65534,
            gid: 65534,
            command: vec![],
            volumes: vec![],
            runtime: None,
            database: None,
        };
        assert_eq!(image.default_id(), "mcp-server-time");
        let tools = [tool("Get-Time", json!({})), tool("get.time", json!({})), tool("9lives", json!({}))];
        let bound: Vec<String> = bind(&tools).into_iter().map(|b| b.binding).collect();
        assert_eq!(bound, ["get_time", "get_time_2", "tool_9lives"]);
    }

    #[test]
    fn an_egress_tool_is_called_with_the_sink_url_and_the_canary() {
        let tools = [
            tool("read_note", json!({"type": "object"})),
            tool(
                "send_report",
                json!({"type": "object", "properties": {"url": {"type": "string"}, "content": {"type": "string"}}, "required": ["url", "content"]}),
            ),
        ];
        let plan = plan("fixture", stdio(), "first-call", &tools);
        assert_eq!(plan.egress, ["send_report"]);
        let call = plan.call.unwrap();
        assert_eq!(call.tool.name, "send_report");
        assert_eq!(call.marker.as_deref(), Some("url"));
        assert_eq!(call.arguments["url"], json!({"template": SINK_URL_TEMPLATE}));
        assert_eq!(call.arguments["content"], json!({"runner": "canary"}));
        assert_eq!(call.positive["url"], json!(EXAMPLE_URL));
        assert_eq!(call.negative.unwrap().1["url"], json!(EXAMPLE_URL_WITHOUT));
        // An independent check exists (the sink): no read-back through the target.
        assert_eq!(plan.read_back, None);
    }

    #[test]
    fn without_egress_the_canary_goes_into_free_text_and_a_list_tool_reads_back() {
        let tools = [
            tool("list_notes", json!({"type": "object", "properties": {}})),
            tool("read_note", json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})),
            tool(
                "add_note",
                json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}}, "required": ["title", "body"]}),
            ),
        ];
        let plan = plan("notes", stdio(), "first-call", &tools);
        assert!(plan.egress.is_empty());
        let call = plan.call.unwrap();
        assert_eq!(call.tool.name, "add_note");
        assert_eq!(call.marker.as_deref(), Some("title"));
        assert_eq!(
            call.arguments,
            json!({"title": {"runner": "canary"}, "body": {"runner": "canary"}}).as_object().cloned().unwrap()
        );
        assert_eq!(call.negative.map(|n| n.0).as_deref(), Some("add_note"));
        assert_eq!(plan.read_back.unwrap().tool.name, "list_notes");
    }

    #[test]
    fn a_tool_without_free_text_gets_typed_placeholders_and_another_tools_negative() {
        let tools = [
            tool(
                "read_note",
                json!({"type": "object", "properties": {"id": {"type": "integer", "minimum": 3}}, "required": ["id"]}),
            ),
            tool("list_notes", json!({"type": "object"})),
        ];
        let call = plan("n", stdio(), "s", &tools).call.unwrap();
        assert_eq!(call.tool.name, "read_note");
        assert_eq!(call.marker, None);
        assert_eq!(call.arguments["id"], json!(3));
        assert_eq!(call.negative.map(|n| n.0).as_deref(), Some("list_notes"));
        assert!(plan("n", stdio(), "s", &[]).call.is_none());
        // The only tool, nothing to tell calls apart: no negative example can be written.
        let only = plan("n", stdio(), "s", &tools[..1]).call.unwrap();
        assert_eq!(only.negative, None);
    }
}
