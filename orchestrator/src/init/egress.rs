//! Which tools look like they can send something out of the server (an *egress-shaped*
//! tool): `elengtis init` gives a campaign with such a tool a canary sink to send to.
//!
//! A heuristic over names only — the tool's name and its argument names — and deliberately
//! generous: a sink the scenario does not need costs a few milliseconds per trial, a missing
//! one hides an exfiltration path.

use serde_json::{Map, Value};

/// Words in a tool name that suggest it sends data somewhere.
const TOOL_WORDS: &[&str] = &[
    "fetch", "http", "https", "request", "send", "post", "email", "mail", "webhook", "upload", "notify", "download",
    "browse", "curl", "wget", "url", "publish", "forward", "share",
];

/// Words in an argument name that name a destination.
const URL_WORDS: &[&str] = &["url", "uri", "endpoint", "webhook", "href", "link", "callback"];
/// Words in an argument name that name a recipient.
const RECIPIENT_WORDS: &[&str] = &["email", "recipient", "recipients", "to", "cc", "bcc", "address", "mailto"];

/// The lower-case words of an identifier (`sendWebhookURL` → `send`, `webhook`, `url`): the
/// same tokens the control shim classifies tool names by.
pub use crate::toolhost::shim::classify::name_tokens as words;

/// The properties of an object schema (empty when it has none).
pub fn properties(schema: &Map<String, Value>) -> Vec<(&str, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

fn is_string_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
        None => schema.get("format").is_some_and(|f| f == "uri" || f == "email" || f == "uri-reference"),
        _ => false,
    }
}

/// The string argument that names a destination URL (`url`, `webhook_url`, `endpoint`, or
/// `format: uri`), if the tool has one: `init` points it at the canary sink.
pub fn url_property(schema: &Map<String, Value>) -> Option<String> {
    properties(schema)
        .into_iter()
        .find(|(name, prop)| {
            is_string_schema(prop)
                && (words(name).iter().any(|w| URL_WORDS.contains(&w.as_str()))
                    || prop.get("format").is_some_and(|f| f == "uri" || f == "uri-reference"))
        })
        .map(|(name, _)| name.to_owned())
}

/// Whether a tool looks egress-shaped: its name has a word such as fetch, http, send, post,
/// email or webhook, or it takes a URL-like or recipient-like argument (`url`, `uri`,
/// `endpoint`, `webhook`, `email`, `recipient`, `to`, or a string of `format: uri`/`email`).
pub fn is_egress_shaped(name: &str, schema: &Map<String, Value>) -> bool {
    if words(name).iter().any(|w| TOOL_WORDS.contains(&w.as_str())) {
        return true;
    }
    url_property(schema).is_some()
        || properties(schema).into_iter().any(|(prop, value)| {
            words(prop).iter().any(|w| RECIPIENT_WORDS.contains(&w.as_str()))
                || value.get("format").is_some_and(|f| f == "email")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn words_split_snake_kebab_and_camel_case() {
        assert_eq!(words("sendWebhookURL"), ["send", "webhook", "url"]);
        assert_eq!(words("read-note_v2"), ["read", "note", "v2"]);
        assert_eq!(words("HTTPGet"), ["httpget"]);
        assert!(words("__").is_empty());
    }

    #[test]
    fn egress_shaped_by_tool_name() {
        let empty = schema(json!({"type": "object"}));
        for name in ["fetch", "http_get", "send_report", "post_message", "sendEmail", "call-webhook", "upload_file"] {
            assert!(is_egress_shaped(name, &empty), "{name}");
        }
        // Words, not substrings: `postpone` and `resend_count` are not `post`/`send`… but
        // `resend` is a word of its own and stays unmatched.
        for name in ["read_note", "list_notes", "postpone_task", "get_current_time", "convert_time", "resend"] {
            assert!(!is_egress_shaped(name, &empty), "{name}");
        }
    }

    #[test]
    fn egress_shaped_by_argument() {
        let by_url = schema(json!({"properties": {"target_url": {"type": "string"}, "body": {"type": "string"}}}));
        assert!(is_egress_shaped("notify_ops", &by_url));
        assert!(is_egress_shaped("do_thing", &by_url));
        assert_eq!(url_property(&by_url).as_deref(), Some("target_url"));
        let by_format = schema(json!({"properties": {"where": {"type": "string", "format": "uri"}}}));
        assert!(is_egress_shaped("do_thing", &by_format));
        assert_eq!(url_property(&by_format).as_deref(), Some("where"));
        let by_recipient = schema(json!({"properties": {"to": {"type": "string"}, "subject": {"type": "string"}}}));
        assert!(is_egress_shaped("compose", &by_recipient));
        assert_eq!(url_property(&by_recipient), None);
        let endpoint = schema(json!({"properties": {"endpoint": {"type": ["string", "null"]}}}));
        assert!(is_egress_shaped("configure", &endpoint));
        // A number called `url_count` is not a destination; `link` as an integer neither.
        let not_a_string = schema(json!({"properties": {"link": {"type": "integer"}}}));
        assert_eq!(url_property(&not_a_string), None);
        let plain = schema(json!({"properties": {"title": {"type": "string"}, "body": {"type": "string"}}}));
        assert!(!is_egress_shaped("add_note", &plain));
    }
}
