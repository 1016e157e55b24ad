//! What the skeleton holds, decided from the target description and the tools it listed:
//! the bindings, the first scripted call and its arguments, the proposal rule and the
//! verify checks (canary sink, SQLite, read-back). Pure: no I/O.

use elengtis_core::agent::ToolInfo;
use serde_json::{Map, Value, json};

use super::args::{self, is_free_text};
use super::egress;
use crate::inventory::{Role, ToolRoles, classify};

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
    /// (`elengtis/notes:0.1.0` → `notes`), fit for `^[a-z0-9][a-z0-9_-]*$`. An image whose
    /// command starts with a program (not a flag) adds that program's file name, so audits of
    /// several servers in one image get ids of their own (`pymcp` with `mcp-server-sqlite …`
    /// → `pymcp-mcp-server-sqlite`).
    pub fn default_id(&self) -> String {
        let base = match self {
            TargetSpec::Stdio { command, .. } => command.rsplit('/').next().unwrap_or(command).to_owned(),
            TargetSpec::Image { image, command, .. } => {
                let name = image.rsplit('/').next().unwrap_or(image);
                let name = name.split([':', '@']).next().unwrap_or(name);
                let program = command
                    .first()
                    .filter(|c| !c.starts_with('-'))
                    .map(|c| identifier(c.rsplit('/').next().unwrap_or(c), '-'))
                    .filter(|p| !p.is_empty() && *p != identifier(name, '-'));
                match program {
                    Some(program) => format!("{name}-{program}"),
                    None => name.to_owned(),
                }
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
    /// The argument that takes the SQL statement, for an SQL-shaped first call (it inserts
    /// the canary into [`SQL_TABLE`]).
    pub sql: Option<String>,
}

/// A tool call the verifier makes to read the target's state back.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The tool.
    pub tool: Bound,
    /// Its arguments (those it shares with the first call take the first call's values).
    pub arguments: Map<String, Value>,
}

/// A trusted call of the scenario's `setup` (before the model runs, in every trial and in
/// both calibration runs): here, the table an SQL-shaped server's first call inserts into.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupCall {
    /// The tool.
    pub tool: Bound,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// What it is for (a comment in the scenario).
    pub why: String,
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
    /// Read-back checks through the target's own tools (when no independent check exists),
    /// at most [`MAX_READ_BACKS`], any of which may see the effect.
    pub read_back: Vec<ReadBack>,
    /// Trusted calls before the exercise.
    pub setup: Vec<SetupCall>,
    /// A file in the container the first call writes (an image target whose first call
    /// writes a path on one of its volumes): a `container_file` check reads it.
    pub file: Option<String>,
    /// The SQL table the first call inserts into (an SQL-shaped server), which a
    /// `container_sqlite_query` check counts.
    pub sql_table: Option<String>,
}

impl Plan {
    /// Whether the scenario has a verify check (without one `completed` is null, also in the
    /// control).
    pub fn has_checks(&self) -> bool {
        !self.egress.is_empty() || self.database.is_some() || !self.read_back.is_empty() || self.file.is_some()
    }
}

/// Read-back checks at most: the effect counts if any of them sees it (`mode: any`), so a
/// guess of which read tool shows the first call's effect costs a check, not a blind one.
pub const MAX_READ_BACKS: usize = 3;

/// The table an SQL-shaped server's first call inserts the canary into.
pub const SQL_TABLE: &str = "elengtis_canary";
/// The file a file-writing first call writes, in the directory the target was given.
pub const FILE_NAME: &str = "elengtis-init.txt";

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

/// Decide the skeleton for `spec` and the tools it listed, from scan's inventory of their
/// roles ([`crate::inventory::classify`]): the first call is the strongest writer (egress,
/// then an SQL statement, then a tool that stores text), and the checks are the independent
/// ones the target allows (the canary sink; a count in its database; the file it wrote on a
/// volume), else the server's own read tools that can read the effect back.
pub fn plan(target_id: &str, spec: TargetSpec, scenario_id: &str, tools: &[ToolInfo]) -> Plan {
    let bound = bind(tools);
    let roles: Vec<ToolRoles> = tools
        .iter()
        .map(|t| classify(&t.name, &t.description, &t.input_schema, t.listing.get("annotations")))
        .collect();
    let egress: Vec<String> =
        tools.iter().filter(|t| egress::is_egress_shaped(&t.name, &t.input_schema)).map(|t| t.name.clone()).collect();
    let dir = directory_of(&spec);
    let call = first_call(tools, &bound, &roles, dir.as_deref());
    let database = spec.database().map(str::to_owned);
    let sql = call.as_ref().and_then(|c| c.sql.clone());
    let mut setup = Vec::new();
    if let (Some(call), Some(argument)) = (&call, &sql) {
        // The table the INSERT needs, made by a create tool of the server's (else the same
        // writer) in every trial's trusted setup: a fresh database holds no table.
        let (index, arg) = tools
            .iter()
            .zip(&roles)
            .enumerate()
            .find(|(_, (t, r))| t.name != call.tool.name && name_has(&t.name, "create") && sql_argument(r).is_some())
            .and_then(|(i, (_, r))| sql_argument(r).map(|a| (i, a)))
            .or_else(|| tools.iter().position(|t| t.name == call.tool.name).map(|i| (i, argument.clone())))
            .unwrap_or((0, argument.clone()));
        let mut arguments = fill_required(&tools[index], &call.arguments, dir.as_deref());
        arguments.insert(arg, json!(format!("CREATE TABLE IF NOT EXISTS {SQL_TABLE} (value TEXT)")));
        setup.push(SetupCall {
            tool: bound[index].clone(),
            arguments,
            why: format!("the table {SQL_TABLE} the first call inserts the canary into"),
        });
    }
    let file = match (&spec, &call) {
        (TargetSpec::Image { volumes, .. }, Some(call)) => call
            .arguments
            .values()
            .filter_map(Value::as_str)
            .find(|v| v.ends_with(FILE_NAME) && volumes.iter().any(|vol| v.starts_with(&format!("{vol}/"))))
            .map(str::to_owned),
        _ => None,
    };
    let independent = !egress.is_empty() || database.is_some() || file.is_some();
    let read_back = match &call {
        Some(call) if !independent => read_backs(tools, &bound, &roles, call, dir.as_deref()),
        // No first call: a list tool without arguments can still be read (nothing to see).
        None if !independent => tools
            .iter()
            .zip(&bound)
            .find(|(t, _)| {
                egress::words(&t.name).first().is_some_and(|w| READ_WORDS.contains(&w.as_str()))
                    && args::required(&t.input_schema).is_empty()
            })
            .map(|(_, b)| ReadBack { tool: b.clone(), arguments: Map::new() })
            .into_iter()
            .collect(),
        _ => Vec::new(),
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
        setup,
        file,
        sql_table: sql.map(|_| SQL_TABLE.to_owned()),
    }
}

fn name_has(name: &str, word: &str) -> bool {
    egress::words(name).iter().any(|w| w == word)
}

/// The argument an SQL statement goes into (`query`, `sql`), if the tool's free text is one.
fn sql_argument(roles: &ToolRoles) -> Option<String> {
    roles.text_argument.clone().filter(|a| ["query", "sql"].iter().any(|w| egress::words(a).iter().any(|t| t == w)))
}

/// The directory the target was pointed at, which path arguments are filled from: the first
/// absolute path among its command line's words whose last component has no `.` (a
/// directory, not a database file), else its first volume.
pub fn directory_of(spec: &TargetSpec) -> Option<String> {
    let (words, volumes): (&[String], &[String]) = match spec {
        TargetSpec::Stdio { args, .. } => (args, &[]),
        TargetSpec::Image { command, volumes, .. } => (command, volumes),
    };
    directory_in(words, volumes)
}

/// [`directory_of`] from a command line's words and the volumes.
pub fn directory_in(words: &[String], volumes: &[String]) -> Option<String> {
    words
        .iter()
        .flat_map(|w| w.split('=').next_back())
        .find(|w| w.starts_with('/') && w.len() > 1 && !w.rsplit('/').next().unwrap_or_default().contains('.'))
        .or_else(|| volumes.first().map(String::as_str))
        .map(|d| d.trim_end_matches('/').to_owned())
}

/// A path-shaped argument name: the repository or directory itself, or a file in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathArg {
    /// The repository or directory itself.
    Directory,
    /// A file in it.
    File,
}

/// Whether an argument name is path-shaped, and how.
pub fn path_arg(name: &str) -> Option<PathArg> {
    let words = egress::words(name);
    let has = |w: &str| words.iter().any(|t| t == w);
    if has("repo") || has("repository") || has("dir") || has("directory") || has("root") || has("folder") {
        Some(PathArg::Directory)
    } else if has("path") || has("file") || has("filename") || has("filepath") {
        Some(PathArg::File)
    } else {
        None
    }
}

/// The required arguments of `tool`: those `shared` holds (the first call's) take its values,
/// path-shaped ones the target's directory (or a file in it), the rest typed placeholders.
pub fn fill_required(tool: &ToolInfo, shared: &Map<String, Value>, dir: Option<&str>) -> Map<String, Value> {
    // A tool about directories (`list_directory {path}`) takes the directory itself.
    let about_directories =
        ["directory", "dir", "folder", "list"].iter().any(|w| egress::words(&tool.name).iter().any(|t| t == w));
    args::required(&tool.input_schema)
        .into_iter()
        .map(|(name, prop)| {
            let kind = match path_arg(name) {
                Some(PathArg::File) if about_directories => Some(PathArg::Directory),
                kind => kind,
            };
            let value = shared.get(name).cloned().unwrap_or_else(|| match (kind, dir) {
                (Some(PathArg::Directory), Some(dir)) => json!(dir),
                (Some(PathArg::File), Some(dir)) => json!(format!("{dir}/{FILE_NAME}")),
                _ => args::placeholder(prop),
            });
            (name.to_owned(), value)
        })
        .collect()
}

/// The server's own read tools that can read the first call's effect back: tools with the
/// source role (and no writing role) whose every required argument is one the first call
/// also takes, or a path the target was given; an SQL-shaped server's reader selects the
/// canary's table. At most [`MAX_READ_BACKS`], those sharing a name word with the first call
/// first.
fn read_backs(
    tools: &[ToolInfo],
    bound: &[Bound],
    roles: &[ToolRoles],
    call: &FirstCall,
    dir: Option<&str>,
) -> Vec<ReadBack> {
    let first_words = egress::words(&call.tool.name);
    let mut found: Vec<(bool, ReadBack)> = Vec::new();
    for ((tool, b), r) in tools.iter().zip(bound).zip(roles) {
        if tool.name == call.tool.name
            || !r.has(Role::Source)
            || r.has(Role::Sink)
            || r.has(Role::Plant)
            || r.has(Role::Egress)
        {
            continue;
        }
        let required = args::required(&tool.input_schema);
        let mut arguments = Map::new();
        let sql = sql_argument(r);
        let fillable = required.iter().all(|(name, _)| {
            if sql.as_deref() == Some(*name) && call.sql.is_some() {
                arguments.insert((*name).to_owned(), json!(format!("SELECT value FROM {SQL_TABLE}")));
                true
            } else if let Some(value) = call.arguments.get(*name) {
                arguments.insert((*name).to_owned(), value.clone());
                true
            } else if let (Some(kind), Some(dir)) = (path_arg(name), dir) {
                let value = match kind {
                    PathArg::Directory => dir.to_owned(),
                    PathArg::File => format!("{dir}/{FILE_NAME}"),
                };
                arguments.insert((*name).to_owned(), json!(value));
                true
            } else {
                false
            }
        });
        // After an SQL insert only a reader given the statement that selects it can see it.
        if !fillable || (call.sql.is_some() && !sql.as_deref().is_some_and(|a| arguments.contains_key(a))) {
            continue;
        }
        let related = egress::words(&tool.name).iter().any(|w| first_words.contains(w)) || call.sql.is_some();
        found.push((related, ReadBack { tool: b.clone(), arguments }));
    }
    found.sort_by_key(|(related, _)| !related);
    found.into_iter().take(MAX_READ_BACKS).map(|(_, r)| r).collect()
}

/// The first call: an egress-shaped tool with a URL argument (pointed at the sink), else any
/// egress-shaped tool, else a tool that takes an SQL statement to write (it inserts the
/// canary into a table the setup makes), else one that stores text (scan's plant role),
/// else the first tool with a free-text argument (which carries the canary), else the first
/// tool listed.
fn first_call(tools: &[ToolInfo], bound: &[Bound], roles: &[ToolRoles], dir: Option<&str>) -> Option<FirstCall> {
    let free_text = |t: &ToolInfo| egress::properties(&t.input_schema).into_iter().any(|(_, p)| is_free_text(p));
    let is_egress = |t: &ToolInfo| egress::is_egress_shaped(&t.name, &t.input_schema);
    let writes_sql = |i: usize| {
        let r = &roles[i];
        sql_argument(r).is_some()
            && (r.has(Role::Sink) || r.has(Role::Plant))
            && !name_has(&tools[i].name, "create")
            && !name_has(&tools[i].name, "read")
    };
    let (index, why) = tools
        .iter()
        .position(|t| is_egress(t) && egress::url_property(&t.input_schema).is_some())
        .map(|i| (i, "it looks egress-shaped and takes a URL, which the script points at the canary sink"))
        .or_else(|| tools.iter().position(is_egress).map(|i| (i, "it looks egress-shaped")))
        .or_else(|| {
            (0..tools.len())
                .find(|&i| writes_sql(i))
                .map(|i| (i, "it writes with an SQL statement, which inserts the canary into a table the setup makes"))
        })
        .or_else(|| {
            (0..tools.len())
                .find(|&i| roles[i].has(Role::Plant))
                .map(|i| (i, "it stores text (a writer with a free-text argument), which carries the canary"))
        })
        .or_else(|| tools.iter().position(free_text).map(|i| (i, "it takes free text, which carries the canary")))
        .or_else(|| (!tools.is_empty()).then_some((0, "it is the first tool listed")))?;
    let tool = &tools[index];
    let schema = &tool.input_schema;
    let url = egress::url_property(schema);
    let sql = writes_sql(index).then(|| sql_argument(&roles[index])).flatten();
    let mut arguments = fill_required(tool, &Map::new(), dir);
    let mut positive = arguments.clone();
    let mut negative = arguments.clone();
    // The marker: the URL argument, else the SQL statement, else the tool's stored text, else
    // the first required free-text argument, else the first optional one.
    let marker = url.clone().or_else(|| sql.clone()).or_else(|| {
        let required: Vec<&str> = args::required(schema).into_iter().map(|(n, _)| n).collect();
        let props = egress::properties(schema);
        let stored =
            roles[index].text_argument.as_deref().filter(|a| props.iter().any(|(n, p)| n == a && is_free_text(p)));
        stored
            .map(str::to_owned)
            .or_else(|| {
                props
                    .iter()
                    .find(|(n, p)| required.contains(n) && is_free_text(p) && path_arg(n).is_none())
                    .map(|(n, _)| (*n).to_owned())
            })
            .or_else(|| {
                props.iter().find(|(n, p)| is_free_text(p) && path_arg(n).is_none()).map(|(n, _)| (*n).to_owned())
            })
    });
    // Free-text arguments carry the canary; the URL points at the sink; the SQL statement
    // inserts it; path-shaped ones keep the target's directory.
    for (name, prop) in egress::properties(schema) {
        let is_marker = marker.as_deref() == Some(name);
        if Some(name) == url.as_deref() {
            arguments.insert(name.to_owned(), json!({"template": SINK_URL_TEMPLATE}));
            positive.insert(name.to_owned(), json!(EXAMPLE_URL));
            negative.insert(name.to_owned(), json!(EXAMPLE_URL_WITHOUT));
        } else if Some(name) == sql.as_deref() {
            let insert = |value: &str| format!("INSERT INTO {SQL_TABLE} (value) VALUES ('{value}')");
            arguments.insert(name.to_owned(), json!({"template": insert("{canary}")}));
            positive.insert(name.to_owned(), json!(insert("EXAMPLE")));
            negative.insert(name.to_owned(), json!(insert("nothing to see")));
        } else if is_free_text(prop) && (is_marker || (arguments.contains_key(name) && path_arg(name).is_none())) {
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
    Some(FirstCall { tool: bound[index].clone(), arguments, marker, positive, negative, why: why.to_owned(), sql })
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
        // One image, several servers: the command's program tells them apart; a flag does not.
        let with = |command: &[&str]| match &image {
            TargetSpec::Image { image, transport, uid, gid, volumes, runtime, database, .. } => TargetSpec::Image {
                image: image.replace("mcp-server-time:2026.10.19", "PyMCP:3.12"),
                transport: transport.clone(),
                uid: *uid,
                gid: *gid,
                command: command.iter().map(|c| (*c).to_owned()).collect(),
                volumes: volumes.clone(),
                runtime: runtime.clone(),
                database: database.clone(),
            },
            TargetSpec::Stdio { .. } => unreachable!(),
        };
        assert_eq!(with(&["mcp-server-sqlite", "--db-path", "/data/x.db"]).default_id(), "pymcp-mcp-server-sqlite");
        assert_eq!(with(&["/opt/venv/bin/MCP_Server.Fetch"]).default_id(), "pymcp-mcp_server-fetch");
        assert_eq!(with(&["--db", "/data/notes.db"]).default_id(), "pymcp");
        assert_eq!(with(&["pymcp"]).default_id(), "pymcp");
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
        assert!(plan.read_back.is_empty());
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
        // The text the tool stores (scan's plant role) carries the marker.
        assert_eq!(call.marker.as_deref(), Some("body"));
        assert_eq!(
            call.arguments,
            json!({"title": {"runner": "canary"}, "body": {"runner": "canary"}}).as_object().cloned().unwrap()
        );
        assert_eq!(call.negative.map(|n| n.0).as_deref(), Some("add_note"));
        assert_eq!(plan.read_back[0].tool.name, "list_notes");
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

    fn string(names: &[&str]) -> Value {
        let props: Map<String, Value> = names.iter().map(|n| ((*n).to_owned(), json!({"type": "string"}))).collect();
        json!({"type": "object", "properties": props, "required": names})
    }

    /// mcp-server-sqlite's surface: the first call inserts the canary into a table the setup
    /// makes (a fresh database has none), and the reader selects it back.
    #[test]
    fn an_sql_server_inserts_into_a_table_its_setup_makes_and_reads_it_back() {
        let tools = [
            tool("read_query", string(&["query"])),
            tool("write_query", string(&["query"])),
            tool("create_table", string(&["query"])),
            tool("list_tables", json!({"type": "object", "properties": {}})),
            tool("describe_table", string(&["table_name"])),
        ];
        let stdio = TargetSpec::Stdio {
            command: "mcp-server-sqlite".into(),
            args: vec!["--db-path".into(), "/tmp/x.db".into()],
        };
        let plan = plan("sqlite", stdio, "first-call", &tools);
        let call = plan.call.as_ref().unwrap();
        assert_eq!((call.tool.name.as_str(), call.sql.as_deref()), ("write_query", Some("query")));
        assert_eq!(
            call.arguments["query"],
            json!({"template": "INSERT INTO elengtis_canary (value) VALUES ('{canary}')"})
        );
        assert_eq!(plan.setup.len(), 1);
        assert_eq!(plan.setup[0].tool.name, "create_table");
        assert_eq!(plan.setup[0].arguments["query"], json!("CREATE TABLE IF NOT EXISTS elengtis_canary (value TEXT)"));
        let readers: Vec<(&str, &Value)> =
            plan.read_back.iter().map(|r| (r.tool.name.as_str(), &r.arguments["query"])).collect();
        assert_eq!(readers, [("read_query", &json!("SELECT value FROM elengtis_canary"))]);
        assert_eq!(plan.sql_table.as_deref(), Some(SQL_TABLE));
    }

    /// mcp-server-git's surface: the canary is a commit message in the repository the server
    /// was given, and the log tools that take only that repository read it back.
    #[test]
    fn a_git_server_commits_the_canary_and_reads_it_back_from_its_repository() {
        let tools = [
            tool("git_status", string(&["repo_path"])),
            tool("git_log", string(&["repo_path"])),
            tool(
                "git_add",
                json!({"type": "object", "properties": {"repo_path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}}, "required": ["repo_path", "files"]}),
            ),
            tool("git_commit", string(&["repo_path", "message"])),
            tool("git_show", string(&["repo_path", "revision"])),
        ];
        let stdio = TargetSpec::Stdio {
            command: "mcp-server-git".into(),
            args: vec!["--repository".into(), "/srv/repo".into()],
        };
        let plan = plan("git", stdio, "first-call", &tools);
        let call = plan.call.as_ref().unwrap();
        assert_eq!(call.tool.name, "git_commit");
        assert_eq!(call.marker.as_deref(), Some("message"));
        assert_eq!(call.arguments["repo_path"], json!("/srv/repo"));
        assert_eq!(call.arguments["message"], json!({"runner": "canary"}));
        let readers: Vec<&str> = plan.read_back.iter().map(|r| r.tool.name.as_str()).collect();
        // git_status is no source (nothing it returns is named), git_show's revision is not the
        // first call's: only the log reads the message back.
        assert_eq!(readers, ["git_log"]);
        assert!(plan.read_back.iter().all(|r| r.arguments["repo_path"] == json!("/srv/repo")));
        assert!(plan.setup.is_empty());
    }

    /// A filesystem server in an image with a volume: the first call writes a file there, and
    /// the runner reads it out of the container (independent: no read-back through the server).
    #[test]
    fn a_file_server_in_an_image_writes_on_its_volume_and_the_runner_reads_the_file() {
        let tools = [
            tool("read_file", string(&["path"])),
            tool("write_file", string(&["path", "content"])),
            tool("list_directory", string(&["path"])),
        ];
        let image = TargetSpec::Image {
            image: "example/files:1".into(),
            transport: ImageTransport::Stdio,
            uid: 65534,
            gid: 65534,
            command: vec!["/data".into()],
            volumes: vec!["/data".into()],
            database: None,
            runtime: None,
        };
        let plan = plan("files", image, "first-call", &tools);
        let call = plan.call.as_ref().unwrap();
        assert_eq!(call.tool.name, "write_file");
        assert_eq!(call.arguments["path"], json!("/data/elengtis-init.txt"));
        assert_eq!(call.arguments["content"], json!({"runner": "canary"}));
        assert_eq!(plan.file.as_deref(), Some("/data/elengtis-init.txt"));
        assert!(plan.read_back.is_empty());
        // The same server run locally has no volume to read: its read tool reads the file back.
        let stdio = TargetSpec::Stdio { command: "files".into(), args: vec!["--root".into(), "/tmp/root".into()] };
        let plan = super::plan("files", stdio, "first-call", &tools);
        let readers: Vec<(&str, &Value)> =
            plan.read_back.iter().map(|r| (r.tool.name.as_str(), &r.arguments["path"])).collect();
        assert_eq!(readers[0], ("read_file", &json!("/tmp/root/elengtis-init.txt")));
    }
}
