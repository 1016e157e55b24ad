//! Classifying a tool for the shim's controls, axis by axis (read, egress, consequential,
//! destructive), in the order of the original's `ControlServerShim`:
//!
//! 1. the target's declared list for that axis (final when present);
//! 2. MCP annotations: `readOnlyHint` (read; a read-only tool is neither consequential nor
//!    destructive, one that is not read-only is consequential), `destructiveHint`,
//!    `openWorldHint` (egress);
//! 3. egress only: a destination-shaped argument in the input schema (`url`, `uri`, `host`,
//!    `endpoint`, … or a name ending `_url`/`_uri`);
//! 4. whole-word tokens of the name (split at non-alphanumerics and camelCase): when any
//!    token is a hint of any role, the tool is classified by its hints (a role without a
//!    matching token is false);
//! 5. otherwise guarded (fail-closed: true), with one note per tool suggesting a declaration.

use elengtis_core::format::campaign::ControlShim;
use elengtis_core::records::{Classified, ClassifiedBy, ShimTool};
use serde_json::Value;

use crate::toolhost::ToolInfo;

/// Name tokens that hint a read tool (its results are untrusted content).
pub const READ_HINTS: [&str; 10] =
    ["read", "get", "fetch", "recall", "list", "search", "retrieve", "view", "load", "lookup"];
/// Name tokens that hint an egress tool.
pub const EGRESS_HINTS: [&str; 7] = ["fetch", "http", "download", "curl", "request", "egress", "web"];
/// Name tokens that hint a consequential tool.
pub const CONSEQUENTIAL_HINTS: [&str; 12] =
    ["send", "email", "transfer", "pay", "delete", "remove", "create", "post", "write", "execute", "issue", "dispatch"];
/// Name tokens that hint a destructive tool.
pub const DESTRUCTIVE_HINTS: [&str; 12] = [
    "delete",
    "remove",
    "destroy",
    "drop",
    "purge",
    "truncate",
    "overwrite",
    "execute",
    "transfer",
    "pay",
    "purchase",
    "revoke",
];
/// Argument names that hold a destination.
const DESTINATION_PARAMS: [&str; 11] =
    ["url", "uri", "href", "link", "endpoint", "host", "hostname", "domain", "webhook", "address", "destination"];

/// A tool's classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Its results are untrusted content.
    pub read: Classified,
    /// It reaches a destination.
    pub egress: Classified,
    /// It has consequences.
    pub consequential: Classified,
    /// It destroys.
    pub destructive: Classified,
}

impl Profile {
    /// A W2 sink: egress, consequential or destructive.
    pub fn sink(&self) -> bool {
        self.egress.value || self.consequential.value || self.destructive.value
    }

    /// The axes decided fail-closed.
    pub fn fail_closed(&self) -> Vec<&'static str> {
        [
            ("read", self.read),
            ("egress", self.egress),
            ("consequential", self.consequential),
            ("destructive", self.destructive),
        ]
        .into_iter()
        .filter(|(_, c)| c.by == ClassifiedBy::FailClosed)
        .map(|(n, _)| n)
        .collect()
    }

    /// The evidence record of this classification.
    pub fn record(&self, name: &str, description_sha256: String) -> ShimTool {
        ShimTool {
            name: name.to_owned(),
            read: self.read,
            egress: self.egress,
            consequential: self.consequential,
            destructive: self.destructive,
            description_sha256,
            pin_matches: None,
            raw_description: None,
        }
    }
}

/// The whole-word tokens of a tool name, lower case: `sendEmail`, `send_email` and
/// `send-email` all give `send`, `email`.
pub fn name_tokens(name: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_numeric();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn hint(tokens: &[String], hints: &[&str]) -> bool {
    tokens.iter().any(|t| hints.contains(&t.as_str()))
}

fn annotation(tool: &ToolInfo, key: &str) -> Option<bool> {
    tool.listing.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_bool)
}

/// Whether an argument name is destination-shaped.
pub fn destination_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    DESTINATION_PARAMS.contains(&lower.as_str())
        || lower.ends_with("_url")
        || lower.ends_with("_uri")
        || ["Url", "URL", "Uri", "URI"].iter().any(|s| name.ends_with(s))
}

fn has_destination_argument(tool: &ToolInfo) -> bool {
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.keys().any(|k| destination_param(k)))
}

/// Classify `tool` under `config`.
pub fn classify(tool: &ToolInfo, config: &ControlShim) -> Profile {
    let name = tool.name.as_str();
    let tokens = name_tokens(name);
    let hinted = [READ_HINTS.as_slice(), &EGRESS_HINTS, &CONSEQUENTIAL_HINTS, &DESTRUCTIVE_HINTS]
        .iter()
        .any(|h| hint(&tokens, h));
    let read_only = annotation(tool, "readOnlyHint");
    let declared = |list: &Option<Vec<String>>| list.as_ref().map(|l| l.iter().any(|t| t == name));
    let decide = |declared: Option<bool>, annotated: Option<bool>, destination: Option<bool>, hints: &[&str]| {
        if let Some(value) = declared {
            return Classified { value, by: ClassifiedBy::Declared };
        }
        if let Some(value) = annotated {
            return Classified { value, by: ClassifiedBy::Annotation };
        }
        if let Some(value) = destination {
            return Classified { value, by: ClassifiedBy::Destination };
        }
        if hinted {
            return Classified { value: hint(&tokens, hints), by: ClassifiedBy::NameHint };
        }
        Classified { value: true, by: ClassifiedBy::FailClosed }
    };
    let not_if_read_only = read_only.and_then(|r| r.then_some(false));
    Profile {
        read: decide(declared(&config.read_tool_names), read_only, None, &READ_HINTS),
        egress: decide(
            declared(&config.egress_tools),
            annotation(tool, "openWorldHint"),
            has_destination_argument(tool).then_some(true),
            &EGRESS_HINTS,
        ),
        consequential: decide(declared(&config.consequential_tools), read_only.map(|r| !r), None, &CONSEQUENTIAL_HINTS),
        destructive: decide(
            declared(&config.destructive_tools),
            not_if_read_only.or(annotation(tool, "destructiveHint")),
            None,
            &DESTRUCTIVE_HINTS,
        ),
    }
}

/// The note for a tool classified fail-closed on some axis: what was assumed and a
/// paste-ready declaration.
pub fn fail_closed_note(name: &str, profile: &Profile) -> Option<String> {
    let axes = profile.fail_closed();
    if axes.is_empty() {
        return None;
    }
    let lists: Vec<String> = axes
        .iter()
        .map(|axis| {
            let field = match *axis {
                "read" => "read_tool_names",
                "egress" => "egress_tools",
                "consequential" => "consequential_tools",
                _ => "destructive_tools",
            };
            format!("{field}: [{name}]")
        })
        .collect();
    Some(format!(
        "tool '{name}' could not be classified ({}): treated as guarded (fail-closed); declare it in the \
         target's control_shim, e.g. control_shim: {{{}}} (leave it out of a list to mean not that role)",
        axes.join(", "),
        lists.join(", ")
    ))
}

/// Tools for the controls' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use serde_json::{Map, Value, json};

    use crate::toolhost::ToolInfo;

    /// A tool with string `properties` and `extra` listing keys (e.g. annotations).
    pub(crate) fn tool_with(name: &str, extra: Value, properties: &[&str]) -> ToolInfo {
        let props: Map<String, Value> =
            properties.iter().map(|p| ((*p).to_owned(), json!({"type": "string"}))).collect();
        let mut listing =
            json!({"name": name, "description": "d", "inputSchema": {"type": "object", "properties": props}});
        if let (Value::Object(l), Value::Object(extra)) = (&mut listing, extra) {
            l.extend(extra);
        }
        ToolInfo {
            name: name.into(),
            description: "d".into(),
            input_schema: listing["inputSchema"].as_object().cloned().unwrap_or_default(),
            listing,
        }
    }

    /// A tool without annotations.
    pub(crate) fn tool(name: &str, properties: &[&str]) -> ToolInfo {
        tool_with(name, json!({}), properties)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::tests_support::tool_with as tool;
    use super::*;

    fn config() -> ControlShim {
        serde_json::from_value(json!({"controls": ["W2", "W3", "W4"]})).expect("config")
    }

    #[test]
    fn tokens_are_whole_words_across_spellings() {
        assert_eq!(name_tokens("send_email"), ["send", "email"]);
        assert_eq!(name_tokens("sendEmail"), ["send", "email"]);
        assert_eq!(name_tokens("web-fetch.v2"), ["web", "fetch", "v2"]);
        // Whole words only: `spreadsheet` does not hint `read`, `sender` does not hint `send`.
        let p = classify(&tool("spreadsheet_sender", json!({}), &[]), &config());
        assert_eq!(p.read.by, ClassifiedBy::FailClosed);
        assert!(p.read.value && p.egress.value && p.consequential.value && p.destructive.value);
        assert!(
            fail_closed_note("spreadsheet_sender", &p)
                .expect("a note")
                .contains("read_tool_names: [spreadsheet_sender]")
        );
    }

    #[test]
    fn name_hints_classify_the_twin_tools() {
        let c = config();
        let read = classify(&tool("read_note", json!({}), &["note_id"]), &c);
        assert_eq!((read.read.value, read.egress.value, read.consequential.value), (true, false, false));
        assert_eq!(read.read.by, ClassifiedBy::NameHint);
        let send = classify(&tool("send_email", json!({}), &["to", "subject", "body"]), &c);
        assert_eq!((send.read.value, send.egress.value, send.consequential.value), (false, false, true));
        assert!(send.sink());
        let fetch = classify(&tool("web_fetch", json!({}), &["url"]), &c);
        assert!(fetch.read.value && fetch.egress.value && !fetch.consequential.value);
        // The destination-shaped `url` decides egress before the name does.
        assert_eq!(fetch.egress.by, ClassifiedBy::Destination);
        assert!(fail_closed_note("read_note", &read).is_none());
    }

    #[test]
    fn declared_lists_are_final_for_their_axis() {
        let c: ControlShim = serde_json::from_value(json!({
            "controls": ["W3"], "egress_tools": ["poster"], "read_tool_names": [], "consequential_tools": ["web_fetch"]
        }))
        .expect("config");
        let fetch = classify(&tool("web_fetch", json!({"annotations": {"openWorldHint": true}}), &["url"]), &c);
        assert_eq!(fetch.egress, Classified { value: false, by: ClassifiedBy::Declared });
        assert_eq!(fetch.read, Classified { value: false, by: ClassifiedBy::Declared });
        assert_eq!(fetch.consequential, Classified { value: true, by: ClassifiedBy::Declared });
        let poster = classify(&tool("poster", json!({}), &[]), &c);
        assert_eq!(poster.egress, Classified { value: true, by: ClassifiedBy::Declared });
    }

    #[test]
    fn annotations_come_before_destinations_and_names() {
        let c = config();
        let t =
            tool("delete_everything", json!({"annotations": {"readOnlyHint": true, "openWorldHint": false}}), &["url"]);
        let p = classify(&t, &c);
        assert_eq!(p.read, Classified { value: true, by: ClassifiedBy::Annotation });
        assert_eq!(p.egress, Classified { value: false, by: ClassifiedBy::Annotation });
        assert_eq!(p.consequential, Classified { value: false, by: ClassifiedBy::Annotation });
        assert_eq!(p.destructive, Classified { value: false, by: ClassifiedBy::Annotation });
        let w = classify(
            &tool("frobnicate", json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}}), &[]),
            &c,
        );
        assert_eq!(w.consequential, Classified { value: true, by: ClassifiedBy::Annotation });
        assert_eq!(w.destructive, Classified { value: true, by: ClassifiedBy::Annotation });
        assert_eq!(w.read, Classified { value: false, by: ClassifiedBy::Annotation });
        // No openWorldHint and no hints: egress is fail-closed.
        assert_eq!(w.egress.by, ClassifiedBy::FailClosed);
    }

    #[test]
    fn destination_shaped_arguments_mark_egress() {
        let p = classify(&tool("frobnicate", json!({}), &["callback_url"]), &config());
        assert_eq!(p.egress, Classified { value: true, by: ClassifiedBy::Destination });
        assert!(destination_param("targetUrl") && destination_param("URL") && !destination_param("curly"));
    }
}
