//! The inventory: a tool's roles for discovery (`elengtis scan`, docs/scan.md) and for the
//! skeletons `elengtis init` writes (docs/init.md): what part it can play in an attack, decided from its name, its description and its `inputSchema`, each role with the
//! words that put it there (`scan --explain` prints them):
//!
//! - **source** — it returns content an outsider can influence (notes, files, mail, issues,
//!   web pages, query results, commit messages…): where a planted payload reaches the model;
//! - **plant** — it stores text a source will return later (the server's own write, create,
//!   insert, save or commit tools): how attacker content gets there;
//! - **sink** — a consequential call (send, post, write, delete, execute, transfer, merge…):
//!   what an injection asks for;
//! - **egress** — it takes a URL or a host: where data can leave.
//!
//! The heuristics are generous on purpose — a role too many costs a candidate that is not
//! tested, a role too few hides an attack path — and a `roles:` file overrides them per tool
//! ([`RoleOverrides`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::toolhost::shim::classify::{destination_param, name_tokens};

/// What part a tool can play in an attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Returns content an outsider can influence.
    Source,
    /// Stores text a source returns later.
    Plant,
    /// A consequential call.
    Sink,
    /// Takes a URL or a host.
    Egress,
}

impl Role {
    /// Every role, in order.
    pub const ALL: [Role; 4] = [Role::Source, Role::Plant, Role::Sink, Role::Egress];

    /// The name used in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Plant => "plant",
            Role::Sink => "sink",
            Role::Egress => "egress",
        }
    }
}

/// Where a word that gave a role was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// A word of the tool's name.
    Name,
    /// A word of its description.
    Description,
    /// An argument name (or format) of its input schema.
    Argument,
    /// An MCP annotation (`readOnlyHint`, `destructiveHint`, `openWorldHint`).
    Annotation,
    /// The `roles:` file.
    Override,
}

/// Why a tool has a role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// The role.
    pub role: Role,
    /// Where the word was.
    pub found: Found,
    /// The word (or the annotation, or the override's file).
    pub word: String,
}

/// A tool and its roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRoles {
    /// The tool's name.
    pub tool: String,
    /// Its roles, in [`Role::ALL`] order.
    pub roles: Vec<Role>,
    /// Every word that gave a role (empty for a role given by the `roles:` file alone).
    pub reasons: Vec<Reason>,
    /// The text argument a plant writes (or a sink carries), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_argument: Option<String>,
    /// The destination argument of an egress tool, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_argument: Option<String>,
}

impl ToolRoles {
    /// Whether the tool has `role`.
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }
}

/// Name words of a tool that returns outside content.
const SOURCE_NAME: &[&str] = &[
    "read", "get", "fetch", "list", "search", "query", "retrieve", "view", "load", "lookup", "open", "show", "browse",
    "find", "recall", "select", "describe", "log", "diff", "inbox", "messages", "notes", "issues", "comments",
    "history",
];
/// Description words of a tool that returns outside content.
const SOURCE_DESCRIPTION: &[&str] = &[
    "returns", "return", "reads", "read", "contents", "content", "body", "text", "note", "notes", "email", "emails",
    "message", "messages", "issue", "issues", "comment", "comments", "page", "file", "files", "document", "commit",
    "rows", "results",
];
/// Name words of a tool that stores text.
const PLANT_NAME: &[&str] = &[
    "write", "save", "create", "insert", "add", "put", "update", "upload", "append", "commit", "store", "set", "new",
    "edit",
];
/// Argument names of the text a tool stores or carries.
const TEXT_ARGUMENTS: &[&str] = &[
    "text",
    "body",
    "content",
    "contents",
    "message",
    "note",
    "data",
    "value",
    "description",
    "comment",
    "markdown",
    "html",
    "payload",
    "sql",
    "query",
];
/// Name words of a consequential tool.
const SINK_NAME: &[&str] = &[
    "send", "post", "write", "delete", "remove", "execute", "exec", "run", "transfer", "pay", "merge", "create",
    "publish", "push", "deploy", "drop", "email", "mail", "forward", "share", "commit", "approve", "grant", "revoke",
    "insert", "update", "confirm", "notify", "upload",
];
/// Name words of a tool that reaches a destination.
const EGRESS_NAME: &[&str] =
    &["fetch", "http", "https", "request", "download", "curl", "wget", "web", "browse", "navigate", "webhook"];

/// The properties of an object schema, in order.
fn properties(schema: &Map<String, Value>) -> Vec<(&str, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// A tool's roles from its listing (`name`, `description`, `inputSchema`, `annotations`).
pub fn classify(name: &str, description: &str, schema: &Map<String, Value>, annotations: Option<&Value>) -> ToolRoles {
    let tokens = name_tokens(name);
    let described = words(description);
    let mut reasons: Vec<Reason> = Vec::new();
    let give = |reasons: &mut Vec<Reason>, role: Role, found: Found, word: &str| {
        if !reasons.iter().any(|r| r.role == role && r.word == word) {
            reasons.push(Reason { role, found, word: word.to_owned() });
        }
    };
    let annotated = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_bool);
    let read_only = annotated("readOnlyHint") == Some(true);
    let args = properties(schema);
    // The free text: the first of TEXT_ARGUMENTS's words an argument is named by (not an id,
    // a key or a name of something).
    let text_argument = TEXT_ARGUMENTS.iter().find_map(|word| {
        args.iter()
            .find(|(n, _)| {
                let tokens = name_tokens(n);
                tokens.iter().any(|t| t == word)
                    && !tokens.iter().any(|t| ["id", "key", "name", "ids"].contains(&t.as_str()))
            })
            .map(|(n, _)| (*n).to_owned())
    });
    let destination_argument = args
        .iter()
        .find(|(n, v)| {
            destination_param(n)
                || v.get("format").and_then(Value::as_str).is_some_and(|f| f == "uri" || f == "uri-reference")
        })
        .map(|(n, _)| (*n).to_owned());

    for t in &tokens {
        if SOURCE_NAME.contains(&t.as_str()) {
            give(&mut reasons, Role::Source, Found::Name, t);
        }
        if EGRESS_NAME.contains(&t.as_str()) {
            give(&mut reasons, Role::Egress, Found::Name, t);
        }
        if !read_only {
            if SINK_NAME.contains(&t.as_str()) {
                give(&mut reasons, Role::Sink, Found::Name, t);
            }
            if PLANT_NAME.contains(&t.as_str()) && text_argument.is_some() {
                give(&mut reasons, Role::Plant, Found::Name, t);
            }
        }
    }
    // A description that says what the tool returns, for a tool not named as a writer.
    if !tokens.iter().any(|t| PLANT_NAME.contains(&t.as_str()) || SINK_NAME.contains(&t.as_str())) {
        for w in described.iter().filter(|w| SOURCE_DESCRIPTION.contains(&w.as_str())) {
            give(&mut reasons, Role::Source, Found::Description, w);
        }
    }
    if let Some(arg) = &destination_argument {
        give(&mut reasons, Role::Egress, Found::Argument, arg);
    }
    if let Some(arg) = text_argument.as_ref().filter(|_| !read_only && reasons.iter().any(|r| r.role == Role::Plant)) {
        give(&mut reasons, Role::Plant, Found::Argument, arg);
    }
    if annotated("openWorldHint") == Some(true) {
        give(&mut reasons, Role::Egress, Found::Annotation, "openWorldHint");
    }
    if annotated("destructiveHint") == Some(true) && !read_only {
        give(&mut reasons, Role::Sink, Found::Annotation, "destructiveHint");
    }
    if read_only {
        give(&mut reasons, Role::Source, Found::Annotation, "readOnlyHint");
    }
    let roles = Role::ALL.into_iter().filter(|role| reasons.iter().any(|r| r.role == *role)).collect();
    ToolRoles { tool: name.to_owned(), roles, reasons, text_argument, destination_argument }
}

/// A `roles:` file: each tool's roles as the user declares them, replacing the heuristics'
/// for that tool (`[]`: no role, the tool is left out of every attack path).
///
/// ```yaml
/// roles:
///   get_issue: [source]
///   create_comment: [plant, sink]
///   run_query: []
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleOverrides {
    /// Tool name → its roles.
    pub roles: BTreeMap<String, Vec<Role>>,
}

impl RoleOverrides {
    /// `found` with the declared roles of its tool, if the file names it (the heuristics'
    /// reasons are kept for the record; the roles are the file's).
    pub fn apply(&self, mut found: ToolRoles, file: &str) -> ToolRoles {
        if let Some(declared) = self.roles.get(&found.tool) {
            let mut roles = declared.clone();
            roles.sort();
            roles.dedup();
            found.reasons.retain(|r| roles.contains(&r.role));
            for role in &roles {
                found.reasons.push(Reason { role: *role, found: Found::Override, word: file.to_owned() });
            }
            found.roles = roles;
        }
        found
    }

    /// Tools the file names that the server does not list (each a mistake to report).
    pub fn unknown<'a>(&'a self, listed: &[&str]) -> Vec<&'a str> {
        self.roles.keys().map(String::as_str).filter(|t| !listed.contains(t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn roles(name: &str, description: &str, schema: Value) -> ToolRoles {
        classify(name, description, schema.as_object().expect("an object schema"), None)
    }

    fn string_args(names: &[&str]) -> Value {
        let props: Map<String, Value> = names.iter().map(|n| ((*n).to_owned(), json!({"type": "string"}))).collect();
        json!({"type": "object", "properties": props})
    }

    #[test]
    fn the_twins_tools_play_their_parts() {
        let read = roles("read_note", "Read a note by its id and return its body.", string_args(&["note_id"]));
        assert_eq!(read.roles, [Role::Source]);
        let write =
            roles("write_note", "Write a note: store the body under the id.", string_args(&["note_id", "body"]));
        assert_eq!(write.roles, [Role::Plant, Role::Sink]);
        assert_eq!(write.text_argument.as_deref(), Some("body"));
        let fetch = roles("web_fetch", "Fetch a URL with an HTTP GET and return the body.", string_args(&["url"]));
        assert_eq!(fetch.roles, [Role::Source, Role::Egress]);
        assert_eq!(fetch.destination_argument.as_deref(), Some("url"));
        let send = roles("send_email", "Send an email to one recipient.", string_args(&["to", "subject", "body"]));
        assert!(send.has(Role::Sink) && !send.has(Role::Source), "{send:?}");
        // Each role says which words gave it.
        assert!(send.reasons.iter().any(|r| r.role == Role::Sink && r.found == Found::Name && r.word == "send"));
    }

    #[test]
    fn annotations_and_the_roles_file_decide_over_words() {
        let ro = classify(
            "delete_preview",
            "Show what a delete would remove.",
            string_args(&["id"]).as_object().expect("object"),
            Some(&json!({"readOnlyHint": true})),
        );
        assert!(!ro.has(Role::Sink) && ro.has(Role::Source), "{ro:?}");
        let overrides: RoleOverrides =
            serde_json::from_value(json!({"roles": {"delete_preview": ["sink"], "ghost": []}})).expect("a roles file");
        let applied = overrides.apply(ro, "roles.yaml");
        assert_eq!(applied.roles, [Role::Sink]);
        assert!(applied.reasons.iter().any(|r| r.found == Found::Override));
        assert_eq!(overrides.unknown(&["delete_preview"]), ["ghost"]);
        assert!(serde_json::from_value::<RoleOverrides>(json!({"roles": {"x": ["writer"]}})).is_err());
    }

    #[test]
    fn a_tool_with_no_known_word_has_no_role() {
        let clock = roles("get_current_time", "Get the current time in a timezone.", string_args(&["timezone"]));
        // `get` makes it a source of (server-made) content; nothing plants or sends.
        assert_eq!(clock.roles, [Role::Source]);
        assert!(roles("frobnicate", "Does a thing.", string_args(&["x"])).roles.is_empty());
    }
}
