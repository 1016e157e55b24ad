//! Trusted actions: what the runner itself does in setup, verify and cleanup.
//!
//! An action is executed by the trusted runner, never by the model: a call to the target
//! (`mcp_tool`), an HTTP request made from the runner (`http_request`, through the
//! independent `elengtis-verifiers` crate), a SQLite snapshot query, or a file read out of
//! the target's container (`container_file`). Each produces a
//! record `{id, type, status, input, response | error}` for the evidence, and its captures
//! (RFC 6901 pointers into the response) become values for later actions.

use std::collections::BTreeMap;

use elengtis_verifiers::{HttpClient, HttpRequestSpec, Method, SecretValue};
use serde_json::{Value, json};

use crate::sandbox::TrialSandbox;
use crate::toolhost::ToolHost;
use elengtis_core::format::campaign::EnvRef;
use elengtis_core::format::scenario::{Action, FileAction, HttpMethod, Predicate};
use elengtis_core::refs::Values;
use elengtis_core::rules;

/// What an action needs from the trial.
#[derive(Debug, Clone, Copy)]
pub struct ActionContext<'a> {
    /// The target's tools, if the target could be opened.
    pub host: Option<&'a dyn ToolHost>,
    /// The runner's HTTP client.
    pub http: &'a HttpClient,
    /// The target's sandbox (isolated targets), for SQLite snapshots.
    pub sandbox: Option<&'a dyn TrialSandbox>,
    /// Where this attempt keeps snapshot files (beside its evidence).
    pub snapshots: Option<&'a std::path::Path>,
}

/// The result of one action.
#[derive(Debug, Clone)]
pub struct ActionOutcome {
    /// Evidence record.
    pub record: Value,
    /// The response, when the action succeeded.
    pub response: Option<Value>,
    /// The error message, when it failed.
    pub error: Option<String>,
}

fn method(m: HttpMethod) -> Method {
    match m {
        HttpMethod::GET => Method::Get,
        HttpMethod::POST => Method::Post,
        HttpMethod::PUT => Method::Put,
        HttpMethod::PATCH => Method::Patch,
        HttpMethod::DELETE => Method::Delete,
    }
}

/// Resolve `{env: NAME}` headers from the runner's environment.
pub fn env_headers(headers: &BTreeMap<String, EnvRef>) -> Result<Vec<(String, String)>, String> {
    headers
        .iter()
        .map(|(name, r)| match std::env::var(&r.env) {
            Ok(value) => Ok((name.clone(), value)),
            Err(_) => Err(format!("environment variable {} (header `{name}`) is not set", r.env)),
        })
        .collect()
}

async fn execute(
    action: &Action,
    assertions: &[Predicate],
    values: &Values,
    ctx: ActionContext<'_>,
) -> (Value, Result<Value, String>) {
    match action {
        Action::McpTool(a) => {
            let tool = values.resolve(&a.tool);
            let arguments = values.resolve_map(&a.arguments);
            match (tool, arguments) {
                (Ok(Value::String(name)), Ok(arguments)) => {
                    let input = json!({"tool": name, "arguments": arguments});
                    let result = match ctx.host {
                        None => Err("the target session is not open".to_owned()),
                        Some(host) => {
                            host.call_tool(&name, arguments).await.map(|r| r.record).map_err(|e| e.to_string())
                        }
                    };
                    (input, result)
                }
                (Err(e), _) | (_, Err(e)) => (json!({"tool": a.tool, "arguments": a.arguments}), Err(e.to_string())),
                (Ok(other), Ok(_)) => {
                    (json!({"tool": other}), Err(format!("the tool resolves to {other}, expected a tool name")))
                }
            }
        }
        Action::HttpRequest(a) => {
            let header_names: BTreeMap<&String, &EnvRef> = a.headers.iter().collect();
            let mut input = json!({"method": method(a.method).to_string(), "url": a.url, "headers": header_names});
            // `url` is a string in the original: `{template: …}` is always a template there.
            let url = match values.resolve_text(&a.url) {
                Ok(Value::String(url)) => url,
                Ok(other) => return (input, Err(format!("the url resolves to {other}, expected a string"))),
                Err(e) => return (input, Err(e.to_string())),
            };
            input["resolved_url"] = Value::String(url.clone());
            let body = match values.resolve(&a.json) {
                Ok(Value::Null) => None,
                Ok(body) => Some(body),
                Err(e) => return (input, Err(e.to_string())),
            };
            if let Some(body) = &body {
                input["json"] = body.clone();
            }
            let headers = match env_headers(&a.headers) {
                Ok(h) => h.into_iter().map(|(k, v)| (k, SecretValue::new(v))).collect(),
                Err(e) => return (input, Err(e)),
            };
            let spec = HttpRequestSpec { method: method(a.method), url, headers, json: body };
            let result = match ctx.http.execute(&spec).await {
                Ok(record) => serde_json::to_value(&record).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            (input, result)
        }
        Action::ContainerSqliteQuery(a) => {
            let mut input = json!({"path": a.path, "query": a.query, "parameters": a.parameters});
            let parameters = match values.resolve(&Value::Array(a.parameters.clone())) {
                Ok(Value::Array(p)) => p,
                Ok(_) => Vec::new(),
                Err(e) => return (input, Err(e.to_string())),
            };
            input["parameters"] = Value::Array(parameters.clone());
            (input, sqlite_query(a, &parameters, ctx).await)
        }
        Action::ContainerFile(a) => {
            let mut input = json!({"path": a.path});
            if a.list {
                input["list"] = json!(true);
            }
            let pointers = assertions.iter().map(|p| p.path.as_str()).chain(a.capture.values().map(String::as_str));
            let needs = elengtis_verifiers::file::Needs::from_pointers(pointers);
            (input, container_file(a, needs, ctx).await.map_err(|e| format!("{} ({})", e.0, e.1)))
        }
    }
}

/// Reads the file (or listing) out of the container, keeps a copy of a file beside the
/// evidence, and builds the document the assertions see. The error is `(message, kind)`.
async fn container_file(
    a: &FileAction,
    needs: elengtis_verifiers::file::Needs,
    ctx: ActionContext<'_>,
) -> Result<Value, (String, &'static str)> {
    use elengtis_verifiers::file::{self, FileLimits, Found};
    let classified = |e: file::FileError| (e.to_string(), e.kind_name());
    let limits = FileLimits::default();
    let name = file::check_path(&a.path).map_err(classified)?;
    let (Some(sandbox), Some(base)) = (ctx.sandbox, ctx.snapshots) else {
        return Err(("container_file needs an isolated_container target".to_owned(), "no_container"));
    };
    let fetched = sandbox.archive(&a.path, limits.archive_cap(a.list)).await.map_err(|e| (e.to_string(), e.kind()))?;
    let found = file::read_archive(&a.path, &fetched, a.list, &limits).map_err(classified)?;
    let mut response = file::response(&a.path, &found, needs).map_err(classified)?;
    if let Found::File(bytes) = &found {
        let kept = file::keep(&base.join(&a.id), name, bytes).map_err(classified)?;
        response["kept_path"] = json!(kept.display().to_string());
    }
    Ok(response)
}

async fn sqlite_query(
    a: &elengtis_core::format::scenario::SqliteAction,
    parameters: &[Value],
    ctx: ActionContext<'_>,
) -> Result<Value, String> {
    let limits = elengtis_verifiers::SqliteLimits::default();
    elengtis_verifiers::check_query(&a.query, parameters.len()).map_err(|e| e.to_string())?;
    let (Some(sandbox), Some(base)) = (ctx.sandbox, ctx.snapshots) else {
        return Err("container_sqlite_query needs an isolated_container target".to_owned());
    };
    let files = sandbox.snapshot(&a.path, limits.max_snapshot_bytes).await.map_err(|e| e.to_string())?;
    let dir = base.join(&a.id);
    std::fs::create_dir_all(base).map_err(|e| format!("failed to create {}: {e}", base.display()))?;
    std::fs::create_dir(&dir).map_err(|e| format!("failed to create {}: {e}", dir.display()))?;
    let (query, parameters, dir_owned) = (a.query.clone(), parameters.to_vec(), dir.clone());
    let record = tokio::task::spawn_blocking(move || {
        elengtis_verifiers::query_snapshot(&files, &dir_owned, &query, &parameters, &limits)
    })
    .await
    .map_err(|e| format!("the snapshot query failed to run: {e}"))?
    .map_err(|e| format!("{} ({})", e, e.kind_name()))?;
    let mut response = serde_json::to_value(&record).map_err(|e| e.to_string())?;
    response["source_path"] = json!(a.path);
    Ok(response)
}

/// Run one action and apply its captures to `values`.
pub async fn run(action: &Action, values: &mut Values, ctx: ActionContext<'_>) -> ActionOutcome {
    run_for(action, &[], values, ctx).await
}

/// [`run`] for a verification check: `assertions` are the check's, which tell a
/// `container_file` action what its document must hold (`/exists`: absence is an answer;
/// `/json/…`: the file must parse as JSON).
pub async fn run_for(
    action: &Action,
    assertions: &[Predicate],
    values: &mut Values,
    ctx: ActionContext<'_>,
) -> ActionOutcome {
    let (input, result) = execute(action, assertions, values, ctx).await;
    let mut record = json!({"id": action.id(), "type": action.kind(), "input": input});
    let result = result.and_then(|response| {
        let mut captured = BTreeMap::new();
        for (name, pointer) in action.capture() {
            match rules::pointer_get(&response, pointer) {
                Ok(value) => {
                    captured.insert(name.clone(), value.clone());
                }
                Err(e) => return Err(format!("capture `{name}`: {e}")),
            }
        }
        values.captures.extend(captured);
        Ok(response)
    });
    match result {
        Ok(response) => {
            record["status"] = json!("ok");
            record["response"] = response.clone();
            ActionOutcome { record, response: Some(response), error: None }
        }
        Err(error) => {
            record["status"] = json!("error");
            record["error"] = json!(error);
            ActionOutcome { record, response: None, error: Some(error) }
        }
    }
}
