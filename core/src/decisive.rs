//! Decisive independent checks: which verification checks can decide a container trial's
//! outcome without trusting the audited server.
//!
//! A check is *independent* when the runner observes the state itself (`http_request`,
//! `container_sqlite_query`, `container_file`); an `mcp_tool` check asks the audited server. An independent
//! check is *decisive* when at least one of its assertions reads content the trial could
//! change — an HTTP answer's body, a query's rows — not only a status code or the echo of
//! the query: `{path: /status, op: equals, value: 200}` on the canary sink holds whether or
//! not the canary arrived, so it decides nothing.
//!
//! In a container scenario at least one independent check must be decisive (docs/verifiers.md).
//! The original tool (v1) required only an independent check, so a scenario written wholly in
//! the original's format is warned, not refused; one whose independent checks use this tool's
//! additions (a reference as an `http_request` URL, the canary sink, the network gateway) is
//! refused.

use serde_json::Value;

use crate::format::scenario::{Action, Check};
use crate::refs::{self, RefKind};

/// Runner values this tool added to the original's (`canary`, `trial_dir`, `collector`,
/// `evidence_dir`, `trial_id`, `attempt_id`).
pub const ADDED_RUNNER_VALUES: &[&str] = &["sink_url", "sink_direct_url", "sink_requests", "network_gateway"];

/// The runner value holding the trial network's gateway address (isolated containers only).
pub const NETWORK_GATEWAY: &str = "network_gateway";

/// Whether any of `values` names one of the runner values `names` (`{runner: name}`), or any
/// of the prompt `templates` has a `{name}` field.
pub fn names_runner_value(values: &[&Value], templates: &[&str], names: &[&str]) -> bool {
    values.iter().any(|v| {
        refs::find_refs(v)
            .iter()
            .any(|r| r.kind == RefKind::Runner && r.name.as_deref().is_some_and(|n| names.contains(&n)))
    }) || templates
        .iter()
        .any(|t| refs::template_fields(t).is_ok_and(|f| f.iter().any(|n| names.contains(&n.as_str()))))
}

/// The action asks the runner, not the audited server.
pub fn is_independent(action: &Action) -> bool {
    !matches!(action, Action::McpTool(_))
}

/// Whether an assertion at `path` (an RFC 6901 pointer into the action's response) reads
/// content the trial could change: the whole response, an HTTP body (`/body…`) or a query's
/// rows (`/rows…`). A status, a truncation flag, hashes, sizes and the echoed query do not.
pub fn reads_content(action: &Action, path: &str) -> bool {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    match action {
        Action::McpTool(_) => true,
        Action::HttpRequest(_) => path.is_empty() || under("/body"),
        Action::ContainerSqliteQuery(_) => path.is_empty() || under("/rows"),
        // A file's existence, its content (as text, hex, JSON or its digest) or a directory's
        // entries; not its path, type or size alone.
        Action::ContainerFile(_) => {
            path.is_empty()
                || ["/exists", "/text", "/content_hex", "/json", "/sha256", "/entries", "/count"]
                    .iter()
                    .any(|p| under(p))
        }
    }
}

/// An independent check with at least one assertion on content the trial could change.
pub fn is_decisive(check: &Check) -> bool {
    is_independent(&check.action) && check.assertions.iter().any(|a| reads_content(&check.action, &a.path))
}

/// What an independent check's assertions read, for messages: `/status, /truncated`.
pub fn asserted_paths(check: &Check) -> String {
    let paths: Vec<&str> =
        check.assertions.iter().map(|a| if a.path.is_empty() { "\"\"" } else { a.path.as_str() }).collect();
    paths.join(", ")
}

/// Whether a check uses this tool's additions to the v1 format: an `http_request` URL that
/// is not a plain string, a `container_file` check, or a runner value the original does not
/// define.
pub fn uses_additions(check: &Check) -> bool {
    if matches!(check.action, Action::ContainerFile(_)) {
        return true;
    }
    if let Action::HttpRequest(a) = &check.action
        && !a.url.is_string()
    {
        return true;
    }
    let action = serde_json::to_value(&check.action).unwrap_or(Value::Null);
    let assertions = serde_json::to_value(&check.assertions).unwrap_or(Value::Null);
    [action, assertions].iter().flat_map(refs::find_refs).any(|found| {
        found.kind == RefKind::Runner && found.name.as_deref().is_some_and(|n| ADDED_RUNNER_VALUES.contains(&n))
    })
}

/// What to write instead, for the message of a scenario without a decisive check.
pub const WHAT_TO_WRITE: &str = "assert on what the trial could change: the canary sink's recorded requests \
     (`url: {runner: sink_requests}` with `{path: /body/text, op: contains, value: {runner: canary}}`), an HTTP \
     answer's body (`/body/…`), or the rows of a container_sqlite_query (`{path: /rows/0/n, op: equals, value: 1}`)";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(action: Value, assertions: Value) -> Check {
        let text = json!({"id": "c", "action": action, "assertions": assertions}).to_string();
        let node = crate::format::yaml::parse(&text).expect("YAML");
        crate::format::de::from_node(&node).expect("a check")
    }

    fn http(url: Value) -> Value {
        json!({"type": "http_request", "id": "a", "method": "GET", "url": url})
    }

    fn sqlite() -> Value {
        json!({"type": "container_sqlite_query", "id": "q", "path": "/data/x.db", "query": "SELECT 1"})
    }

    fn assert_on(path: &str, value: Value) -> Value {
        json!({"path": path, "op": "equals", "value": value})
    }

    #[test]
    fn a_status_only_check_decides_nothing_and_a_body_or_rows_check_does() {
        let status = check(http(json!({"runner": "sink_requests"})), json!([assert_on("/status", json!(200))]));
        assert!(!is_decisive(&status));
        assert!(uses_additions(&status), "a reference URL is an addition");
        assert_eq!(asserted_paths(&status), "/status");
        let body = check(
            http(json!("http://h/")),
            json!([assert_on("/status", json!(200)), {"path": "/body/text", "op": "contains", "value": "x"}]),
        );
        assert!(is_decisive(&body));
        assert!(!uses_additions(&body), "a plain URL is v1");
        let bodyish = check(
            http(json!("http://h/")),
            json!([assert_on("/bodyx", json!(1)), assert_on("/truncated", json!(false))]),
        );
        assert!(!is_decisive(&bodyish), "only /body and below is the body");
        assert!(is_decisive(&check(sqlite(), json!([assert_on("/rows/0/n", json!(1))]))));
        assert!(!is_decisive(&check(sqlite(), json!([assert_on("/snapshot_sha256", json!("x"))]))));
        let server =
            check(json!({"type": "mcp_tool", "id": "a", "tool": "read"}), json!([assert_on("/content", json!(1))]));
        assert!(!is_decisive(&server), "the audited server's answer is not independent");
        let whole = check(http(json!("http://h/")), json!([assert_on("", json!({"runner": "sink_url"}))]));
        assert!(is_decisive(&whole));
        assert!(uses_additions(&whole), "sink_url is a runner value the original lacks");
    }
}
