//! The `langchain` engine — the original's adapter-control condition — and the LangChain
//! adapters it shares with `create_agent`.
//!
//! **What it controls for.** It is the `graph` state machine, unchanged, with LangChain's
//! abstractions in place of the raw MCP session: the tools the model is offered pass through
//! `langchain-mcp-adapters` and `convert_to_openai_tool` ([`adapted_spec`]), and their results
//! come back as LangChain `ToolMessage`s ([`adapted_result`]). So `graph` vs `langchain`
//! isolates the adapters (same orchestration), and `langchain` vs `create_agent` isolates the
//! prebuilt agent's orchestration (same adapters): a difference between two engines is
//! attributable to one layer of the framework, not to the fixture or the model.
//!
//! The adapters' observable effects, reproduced here from langchain-core 1.x and
//! langchain-mcp-adapters 0.2 (the versions the original 0.1.0 resolves to):
//!
//! - a tool's parameters: `$ref`s inlined (`$defs` kept, cycles broken), then `$defs` and
//!   `definitions` dropped, the top-level `title` and `description` removed and every other
//!   `title` key removed except a property named `title`; the description is the tool's, or
//!   else the schema's;
//! - a result: content blocks (`text`, `image`, `file`) with the structured content as the
//!   artifact, `status: success`; an `isError` result raises `ToolException` and comes back
//!   as `status: error` whose content is the error's text;
//! - a name that is not an adapted tool: `Unknown tool: NAME`, answered without the target.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::turn::{Adapter, Dispatched, ERROR_PREFIX};
use super::{AgentLoop, AgentOutcome, AgentTask, ToolErrorKind};
use crate::model::Model;
use crate::toolhost::{ToolHost, ToolInfo, ToolOutput};

/// The `langchain` engine: the graph over LangChain's model and MCP tool adapters.
#[derive(Debug, Clone, Copy, Default)]
pub struct LangChainLoop;

#[async_trait]
impl AgentLoop for LangChainLoop {
    async fn run(&self, model: &mut dyn Model, host: &dyn ToolHost, task: AgentTask<'_>) -> AgentOutcome {
        let tools: Vec<Value> = task.tools.iter().map(adapted_spec).collect();
        super::graph::run(model, host, task, &tools, Adapter::LangChain).await
    }
}

/// The tool as LangChain offers it: `convert_to_openai_tool` over the adapted MCP tool.
pub(crate) fn adapted_spec(tool: &ToolInfo) -> Value {
    let mut schema = tool.input_schema.clone();
    if !tool.description.is_empty() {
        schema.insert("description".to_owned(), Value::String(tool.description.clone()));
    }
    let full = Value::Object(schema.clone());
    let mut schema = match dereference(&Value::Object(schema), &full, &mut Vec::new()) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    schema.shift_remove("definitions");
    schema.shift_remove("$defs");
    schema.shift_remove("title");
    let schema_description = schema.shift_remove("description");
    let description = if tool.description.is_empty() {
        schema_description.and_then(|d| d.as_str().map(str::to_owned)).unwrap_or_default()
    } else {
        tool.description.clone()
    };
    json!({
        "type": "function",
        "function": {"name": tool.name, "description": description, "parameters": remove_titles(schema, "")},
    })
}

/// langchain-core's `dereference_refs` with its defaults: `$ref`s resolved everywhere but
/// under `$defs`; a reference met again inside itself keeps only its sibling keys; sibling
/// keys override the referenced ones. A reference that does not resolve is kept as written
/// (langchain-core raises, which would end the original's episode).
fn dereference(value: &Value, full: &Value, active: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => {
            let Some(Value::String(path)) = map.get("$ref") else {
                return Value::Object(dereference_map(map, full, active));
            };
            let siblings: Map<String, Value> =
                map.iter().filter(|(k, _)| k.as_str() != "$ref").map(|(k, v)| (k.clone(), v.clone())).collect();
            if active.contains(path) {
                return Value::Object(dereference_map(&siblings, full, active));
            }
            let Some(target) = retrieve(path, full) else {
                return Value::Object(dereference_map(map, full, active));
            };
            active.push(path.clone());
            let resolved = dereference(target, full, active);
            active.pop();
            if siblings.is_empty() {
                return resolved;
            }
            let mut merged = match resolved {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            merged.extend(dereference_map(&siblings, full, active));
            Value::Object(merged)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| dereference(v, full, active)).collect()),
        other => other.clone(),
    }
}

fn dereference_map(map: &Map<String, Value>, full: &Value, active: &mut Vec<String>) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            let v = if k == "$defs" { v.clone() } else { dereference(v, full, active) };
            (k.clone(), v)
        })
        .collect()
}

/// A `#/a/b/0` reference in `schema`, segment by segment as langchain-core walks it (no
/// `~0`/`~1` unescaping).
fn retrieve<'a>(path: &str, schema: &'a Value) -> Option<&'a Value> {
    let mut parts = path.split('/');
    if parts.next() != Some("#") {
        return None;
    }
    parts.try_fold(schema, |at, part| match at {
        Value::Object(map) => map.get(part),
        Value::Array(items) if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) => {
            part.parse::<usize>().ok().and_then(|i| items.get(i))
        }
        _ => None,
    })
}

/// langchain-core's `_rm_titles`: drop `title` keys, except a property named `title` (an
/// object under `properties`); lists are left as they are.
fn remove_titles(map: Map<String, Value>, parent: &str) -> Value {
    let mut out = Map::new();
    for (k, v) in map {
        match v {
            Value::Object(inner) if k == "title" && parent == "properties" => {
                out.insert(k.clone(), remove_titles(inner, &k));
            }
            _ if k == "title" => {}
            Value::Object(inner) => {
                out.insert(k.clone(), remove_titles(inner, &k));
            }
            other => {
                out.insert(k, other);
            }
        }
    }
    Value::Object(out)
}

/// A LangChain `ToolMessage` as the original records it (`model_dump`), without the random
/// ids LangChain gives messages and content blocks.
pub(crate) fn tool_message(content: Value, name: &str, tool_call_id: &str, artifact: Value, status: &str) -> Value {
    json!({
        "content": content,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "tool",
        "name": name,
        "id": null,
        "tool_call_id": tool_call_id,
        "artifact": artifact,
        "status": status,
    })
}

/// A tool's answer through the adapted MCP tool. `in_agent`: under `create_agent`, whose
/// `ToolErrorMiddleware` turns a failure into an `ERROR: …` message; otherwise the graph's
/// dispatcher prefixes `ERROR: ` to an error message's text. Either way the model sees
/// `ERROR: <error>` and the detail recorded is the error's text.
pub(crate) fn adapted_result(
    output: Result<ToolOutput, String>,
    name: &str,
    tool_call_id: &str,
    in_agent: bool,
) -> Dispatched {
    let converted = output.map(|o| (o.is_error, content_blocks(&o.record), o.record.get("structuredContent").cloned()));
    let error = match converted {
        Ok((false, Ok(blocks), structured)) => {
            let artifact = structured.map_or(Value::Null, |sc| json!({"structured_content": sc}));
            return Dispatched {
                text: joined_text(&blocks),
                result: tool_message(Value::Array(blocks), name, tool_call_id, artifact, "success"),
                error: None,
                transport: false,
                times: (0, 0),
            };
        }
        // `ToolException`: the text blocks joined, or the blocks themselves when none is text.
        Ok((true, Ok(blocks), _)) => {
            if blocks.iter().any(|b| b["type"] == "text") {
                joined_text(&blocks)
            } else {
                Value::Array(blocks).to_string()
            }
        }
        Ok((_, Err(conversion), _)) => conversion,
        Err(failure) => failure,
    };
    let text = format!("{ERROR_PREFIX}{error}");
    let content = if in_agent { text.clone() } else { error.clone() };
    Dispatched {
        text,
        result: tool_message(Value::String(content), name, tool_call_id, Value::Null, "error"),
        error: Some((ToolErrorKind::ToolError, error)),
        transport: false,
        times: (0, 0),
    }
}

fn joined_text(blocks: &[Value]) -> String {
    blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// MCP content blocks as LangChain content blocks; audio is refused, as by the adapter.
fn content_blocks(record: &Value) -> Result<Vec<Value>, String> {
    let blocks = record.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks.iter().map(content_block).collect()
}

fn content_block(block: &Value) -> Result<Value, String> {
    let mime = block.get("mimeType").and_then(Value::as_str).filter(|m| !m.is_empty());
    let media = |kind: &str, key: &str, data: &Value| {
        let mut out = json!({"type": kind, key: data});
        if let Some(mime) = mime {
            out["mime_type"] = json!(mime);
        }
        out
    };
    let is_image = mime.is_some_and(|m| m.starts_with("image/"));
    Ok(match block["type"].as_str() {
        Some("text") => json!({"type": "text", "text": block["text"]}),
        Some("image") => media("image", "base64", &block["data"]),
        Some("audio") => {
            return Err(format!(
                "AudioContent conversion to LangChain content blocks is not yet supported. Received audio with mime type: {}",
                mime.unwrap_or("None")
            ));
        }
        Some("resource_link") => media(if is_image { "image" } else { "file" }, "url", &block["uri"]),
        Some("resource") => {
            let resource = &block["resource"];
            let mime = resource.get("mimeType").and_then(Value::as_str).filter(|m| !m.is_empty());
            if let Some(text) = resource.get("text") {
                json!({"type": "text", "text": text})
            } else {
                let kind = if mime.is_some_and(|m| m.starts_with("image/")) { "image" } else { "file" };
                let mut out = json!({"type": kind, "base64": resource["blob"]});
                if let Some(mime) = mime {
                    out["mime_type"] = json!(mime);
                }
                out
            }
        }
        _ => block.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(description: &str, schema: Value) -> ToolInfo {
        let Value::Object(input_schema) = schema else { panic!("a schema object") };
        ToolInfo { name: "t".into(), description: description.into(), input_schema, listing: Value::Null }
    }

    #[test]
    fn titles_go_except_a_property_named_title() {
        let spec = adapted_spec(&tool(
            "Does t.",
            json!({"title": "tArguments", "type": "object", "properties": {
                "title": {"title": "Title", "type": "string"},
                "n": {"title": "N", "type": "integer", "anyOf": [{"title": "kept in lists"}]},
            }, "required": ["title"]}),
        ));
        assert_eq!(
            spec,
            json!({"type": "function", "function": {"name": "t", "description": "Does t.", "parameters": {
                "type": "object", "properties": {
                    "title": {"type": "string"},
                    "n": {"type": "integer", "anyOf": [{"title": "kept in lists"}]},
                }, "required": ["title"]}}})
        );
    }

    #[test]
    fn refs_are_inlined_and_defs_dropped() {
        let spec = adapted_spec(&tool(
            "",
            json!({"description": "From the schema.", "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A", "description": "an a"}, "b": {"$ref": "#/$defs/Missing"}},
                "$defs": {"A": {"type": "object", "properties": {"self": {"$ref": "#/$defs/A"}}}}}),
        ));
        assert_eq!(spec["function"]["description"], "From the schema.");
        assert_eq!(
            spec["function"]["parameters"],
            json!({"type": "object", "properties": {
                "a": {"type": "object", "properties": {"self": {}}, "description": "an a"},
                "b": {"$ref": "#/$defs/Missing"},
            }})
        );
    }

    #[test]
    fn an_error_result_is_the_error_text_with_status_error() {
        let output = ToolOutput {
            is_error: true,
            text: "ERROR: boom".into(),
            record: json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
        };
        let graph = adapted_result(Ok(output.clone()), "t", "dispatch_t", false);
        assert_eq!(graph.text, "ERROR: boom");
        assert_eq!(graph.result["content"], "boom");
        assert_eq!(graph.result["status"], "error");
        assert_eq!(graph.error, Some((ToolErrorKind::ToolError, "boom".into())));
        let agent = adapted_result(Ok(output), "t", "call_0_0", true);
        assert_eq!(agent.text, "ERROR: boom");
        assert_eq!(agent.result["content"], "ERROR: boom");
        assert_eq!(agent.result["tool_call_id"], "call_0_0");
    }

    #[test]
    fn a_result_keeps_its_blocks_and_structured_content() {
        let output = ToolOutput {
            is_error: false,
            text: "a\nb".into(),
            record: json!({"content": [
                {"type": "text", "text": "a"},
                {"type": "resource", "resource": {"uri": "x:", "text": "b"}},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
            ], "structuredContent": {"result": "a"}}),
        };
        let out = adapted_result(Ok(output), "t", "dispatch_t", false);
        assert_eq!(out.text, "a\nb");
        assert_eq!(out.error, None);
        assert_eq!(
            out.result["content"],
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                {"type": "image", "base64": "AA==", "mime_type": "image/png"}])
        );
        assert_eq!(out.result["artifact"], json!({"structured_content": {"result": "a"}}));
        assert_eq!(out.result["status"], "success");
    }
}
