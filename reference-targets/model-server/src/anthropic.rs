//! The Anthropic Messages wire format: request reading, answers, streams and errors.

use serde_json::{Value, json};

use crate::{
    conversation::{CallRef, ChatRequest, Conversation, ToolResult},
    faults::SseEvent,
    reply::{Reply, Usage, pieces},
};

/// What renders an answer besides the reply itself.
#[derive(Debug, Clone, Copy)]
pub struct Render<'a> {
    /// `msg_…`.
    pub id: &'a str,
    pub model: &'a str,
    pub usage: Usage,
    pub chunk_bytes: usize,
}

/// Reads a request body. With `validate`, rejects (with the message of a 400) what the
/// Messages API rejects: no `anthropic-version` header, no model, no `max_tokens`, no
/// messages, unknown roles, `tool_use` blocks without a `tool_result` in the next message,
/// and `tool_result` blocks answering no `tool_use` of the previous one.
pub fn parse(body: &Value, version: Option<&str>, validate: bool) -> Result<ChatRequest, String> {
    if validate && version.is_none() {
        return Err("anthropic-version: header is required".to_owned());
    }
    let object = body.as_object().ok_or("the request body must be a JSON object")?;
    let model = object.get("model").and_then(Value::as_str).map(str::to_owned);
    let max_tokens = object.get("max_tokens").and_then(Value::as_u64);
    if validate {
        if model.is_none() {
            return Err("model: Field required".to_owned());
        }
        if max_tokens.is_none_or(|m| m == 0) {
            return Err("max_tokens: Field required (an integer >= 1)".to_owned());
        }
    }
    let stream = match object.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) if validate => return Err("stream: Input should be a valid boolean".to_owned()),
        Some(_) => false,
    };
    let tool_choice = object.get("tool_choice").and_then(|c| c.get("type")).and_then(Value::as_str);
    let mut conversation =
        Conversation { max_tokens, tools_forbidden: tool_choice == Some("none"), ..Conversation::default() };
    match object.get("system") {
        None | Some(Value::Null) => {}
        Some(system @ (Value::String(_) | Value::Array(_))) => conversation.texts.push(blocks_text(system)),
        Some(_) if validate => return Err("system: Input should be a string or a list of text blocks".to_owned()),
        Some(_) => {}
    }
    if let Some(tools) = object.get("tools") {
        let tools = tools.as_array().ok_or("tools: Input should be a valid list")?;
        for (i, tool) in tools.iter().enumerate() {
            if let Some(description) = tool.get("description").and_then(Value::as_str) {
                conversation.tool_descriptions.push(description.to_owned());
            }
            match tool.get("name").and_then(Value::as_str) {
                Some(name) => conversation.offered_tools.push(name.to_owned()),
                None if validate => return Err(format!("tools.{i}.name: Field required")),
                None => {}
            }
        }
    }
    let empty = Vec::new();
    let messages = match object.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ if validate => return Err("messages: at least one message is required".to_owned()),
        _ => &empty,
    };
    // Ids of the previous assistant message's tool_use blocks, still unanswered.
    let mut pending: Vec<String> = Vec::new();
    let mut first_user: Option<String> = None;
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = message.get("content");
        let blocks: Vec<&Value> = match content {
            Some(Value::Array(blocks)) => blocks.iter().collect(),
            _ => Vec::new(),
        };
        match role {
            "user" => {
                let mut texts = Vec::new();
                if let Some(Value::String(text)) = content {
                    texts.push(text.clone());
                }
                for (j, block) in blocks.iter().enumerate() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            texts.push(block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned())
                        }
                        Some("tool_result") => {
                            let id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                            match pending.iter().position(|p| p == id) {
                                Some(at) => {
                                    pending.remove(at);
                                }
                                None if validate => {
                                    return Err(format!(
                                        "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                                    ));
                                }
                                None => {}
                            }
                            let text = block.get("content").map(blocks_text).unwrap_or_default();
                            conversation.texts.push(text.clone());
                            conversation.tool_results.push(ToolResult { call_id: id.to_owned(), text });
                        }
                        _ => {}
                    }
                }
                if validate && !pending.is_empty() {
                    return Err(unanswered(i.saturating_sub(1), &pending));
                }
                let text = texts.join("\n");
                if first_user.is_none() {
                    first_user = Some(text.clone());
                }
                conversation.texts.push(text);
            }
            "assistant" => {
                if validate && !pending.is_empty() {
                    return Err(unanswered(i.saturating_sub(1), &pending));
                }
                if let Some(Value::String(text)) = content {
                    conversation.texts.push(text.clone());
                }
                let mut calls = Vec::new();
                for (j, block) in blocks.iter().enumerate() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => conversation
                            .texts
                            .push(block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned()),
                        Some("tool_use") => {
                            let id = block.get("id").and_then(Value::as_str);
                            let name = block.get("name").and_then(Value::as_str);
                            let input = block.get("input").filter(|v| v.is_object());
                            let (Some(id), Some(name), Some(input)) = (id, name, input) else {
                                if validate {
                                    return Err(format!(
                                        "messages.{i}.content.{j}: a `tool_use` block needs an `id`, a `name` and an object `input`"
                                    ));
                                }
                                continue;
                            };
                            conversation.texts.push(input.to_string());
                            calls.push(CallRef { id: id.to_owned(), name: name.to_owned() });
                        }
                        _ => {}
                    }
                }
                pending = calls.iter().map(|c| c.id.clone()).collect();
                conversation.assistant_turns.push(calls);
            }
            other if validate => {
                return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant', not '{other}'"));
            }
            _ => {}
        }
    }
    if validate && !pending.is_empty() {
        return Err(unanswered(messages.len().saturating_sub(1), &pending));
    }
    conversation.first_user_text = first_user.unwrap_or_default();
    Ok(ChatRequest { model, stream, include_usage: false, conversation })
}

fn unanswered(message: usize, pending: &[String]) -> String {
    format!(
        "messages.{message}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        pending.join(", ")
    )
}

/// The text of a string or of a list of blocks (their `text`s).
fn blocks_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| {
                if b.get("type").and_then(Value::as_str) == Some("text") { b.get("text")?.as_str() } else { None }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt,
        "output_tokens": usage.completion,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    })
}

/// The text block of a reply: its text, or its refusal's.
fn reply_text(reply: &Reply) -> &str {
    reply.refusal.as_deref().or(reply.text.as_deref()).unwrap_or_default()
}

/// The non-streaming answer (`type: "message"`).
pub fn message(reply: &Reply, r: &Render<'_>) -> Value {
    let mut content = Vec::new();
    let text = reply_text(reply);
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &reply.calls {
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments.to_input()}));
    }
    let mut body = json!({
        "id": r.id, "type": "message", "role": "assistant", "model": r.model, "content": content,
        "stop_reason": reply.finish.anthropic(reply.refusal.is_some()), "stop_sequence": null,
    });
    if reply.usage {
        body["usage"] = usage_json(r.usage);
    }
    body
}

/// The streamed answer: `message_start`, content blocks (a `ping` after the first one
/// starts), `message_delta`, `message_stop`.
pub fn stream(reply: &Reply, r: &Render<'_>) -> Vec<SseEvent> {
    let mut start = json!({
        "id": r.id, "type": "message", "role": "assistant", "model": r.model, "content": [],
        "stop_reason": null, "stop_sequence": null,
    });
    if reply.usage {
        start["usage"] = usage_json(Usage { completion: 1, ..r.usage });
    }
    let mut events = vec![SseEvent::named("message_start", &json!({"type": "message_start", "message": start}))];
    let mut index = 0;
    let text = reply_text(reply);
    if !text.is_empty() {
        events.push(SseEvent::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in pieces(text, r.chunk_bytes) {
            events.push(SseEvent::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push(SseEvent::named("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    for call in &reply.calls {
        let block = json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
        events.push(SseEvent::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        for piece in pieces(&call.arguments.to_wire_string(), r.chunk_bytes) {
            let delta = json!({"type": "input_json_delta", "partial_json": piece});
            events.push(SseEvent::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(SseEvent::named("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    let mut delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": reply.finish.anthropic(reply.refusal.is_some()), "stop_sequence": null},
    });
    if reply.usage {
        delta["usage"] = json!({"output_tokens": r.usage.completion});
    }
    // Anthropic sends a ping after the first block starts.
    let ping_at = if events.len() > 1 { 2 } else { 1 };
    events.insert(ping_at, SseEvent::named("ping", &json!({"type": "ping"})));
    events.push(SseEvent::named("message_delta", &delta));
    events.push(SseEvent::named("message_stop", &json!({"type": "message_stop"})));
    events
}

/// Anthropic's error object for `status`.
pub fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 | 503 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// `GET /v1/models` with an `anthropic-version` header.
pub fn models(ids: &[String]) -> Value {
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"}))
        .collect();
    json!({"data": data, "has_more": false, "first_id": ids.first(), "last_id": ids.last()})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reply::{Arguments, Call, Finish};

    fn request(messages: Value) -> Value {
        json!({"model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "sys"}],
               "tools": [{"name": "read_note", "input_schema": {"type": "object"}}], "messages": messages})
    }

    #[test]
    fn a_conversation_is_read_with_its_tool_results() {
        let body = request(json!([
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "t1", "name": "read_note", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "read_note", "input": {"x": 1}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}]},
                {"type": "tool_result", "tool_use_id": "t1", "content": "one", "is_error": false}
            ]}
        ]));
        let r = parse(&body, Some("2023-06-01"), true).unwrap();
        let c = &r.conversation;
        assert_eq!(c.step(), 1);
        assert_eq!(c.offered_tools, ["read_note"]);
        assert_eq!(c.first_user_text, "hello");
        assert_eq!(c.tool_result_of(0, 1), Some("two"));
        assert_eq!(c.last_tool_result(), Some("one"));
        assert_eq!(c.max_tokens, Some(100));
        assert!(c.texts.join("\n").starts_with("sys\nhello"));
    }

    #[test]
    fn what_the_messages_api_rejects_is_rejected() {
        let ok = request(json!([{"role": "user", "content": "hi"}]));
        assert!(parse(&ok, None, true).unwrap_err().contains("anthropic-version"));
        assert!(parse(&ok, None, false).is_ok());
        let mut no_max = ok.clone();
        no_max.as_object_mut().unwrap().remove("max_tokens");
        assert!(parse(&no_max, Some("v"), true).unwrap_err().contains("max_tokens"));
        let unanswered = request(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": "no result"}
        ]));
        let e = parse(&unanswered, Some("v"), true).unwrap_err();
        assert!(e.starts_with("messages.1: `tool_use` ids were found without `tool_result` blocks"), "{e}");
        let stray = request(
            json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]}]),
        );
        assert!(parse(&stray, Some("v"), true).unwrap_err().contains("unexpected `tool_use_id`"));
        let system_role = request(json!([{"role": "system", "content": "x"}]));
        assert!(parse(&system_role, Some("v"), true).unwrap_err().contains("'user' or 'assistant'"));
    }

    fn reply() -> Reply {
        Reply {
            text: Some("on it".into()),
            refusal: None,
            calls: vec![Call {
                id: "toolu_0_0".into(),
                name: "a".into(),
                arguments: Arguments::Json(json!({"k": "v"})),
            }],
            finish: Finish::ToolCalls,
            usage: true,
            notes: Vec::new(),
        }
    }

    fn render() -> Render<'static> {
        Render { id: "msg_1", model: "m", usage: Usage { prompt: 9, completion: 4, cost: None }, chunk_bytes: 3 }
    }

    #[test]
    fn messages_have_the_documented_shape() {
        let body = message(&reply(), &render());
        assert_eq!(body["type"], "message");
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(body["content"][0], json!({"type": "text", "text": "on it"}));
        assert_eq!(
            body["content"][1],
            json!({"type": "tool_use", "id": "toolu_0_0", "name": "a", "input": {"k": "v"}})
        );
        assert_eq!(body["usage"]["input_tokens"], 9);
        let refused = Reply { refusal: Some("no".into()), text: None, calls: vec![], finish: Finish::Stop, ..reply() };
        let body = message(&refused, &render());
        assert_eq!((body["stop_reason"].as_str(), body["content"][0]["text"].as_str()), (Some("refusal"), Some("no")));
    }

    #[test]
    fn streams_reassemble_into_the_same_answer() {
        let events = stream(&reply(), &render());
        let names: Vec<_> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
        assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        let mut text = String::new();
        let mut json_text = String::new();
        for e in &events {
            let v: Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(v["type"].as_str(), e.event.as_deref());
            match v["delta"]["type"].as_str() {
                Some("text_delta") => text.push_str(v["delta"]["text"].as_str().unwrap()),
                Some("input_json_delta") => json_text.push_str(v["delta"]["partial_json"].as_str().unwrap()),
                _ => {}
            }
            if e.event.as_deref() == Some("message_delta") {
                assert_eq!(v["delta"]["stop_reason"], "tool_use");
                assert_eq!(v["usage"]["output_tokens"], 4);
            }
        }
        assert_eq!(text, "on it");
        assert_eq!(serde_json::from_str::<Value>(&json_text).unwrap(), json!({"k": "v"}));
    }

    #[test]
    fn errors_carry_the_documented_types() {
        assert_eq!(
            error(429, "slow down"),
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
        );
        assert_eq!(error(529, "x")["error"]["type"], "overloaded_error");
        assert_eq!(error(400, "x")["error"]["type"], "invalid_request_error");
        assert_eq!(error(502, "x")["error"]["type"], "api_error");
    }
}
