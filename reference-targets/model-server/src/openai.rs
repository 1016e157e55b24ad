//! The OpenAI Chat Completions wire format (also OpenRouter's, vLLM's, llama.cpp's,
//! Ollama's and LiteLLM's): request reading, answers, streams and errors.

use serde_json::{Map, Value, json};

use crate::{
    conversation::{CallRef, ChatRequest, Conversation, ToolResult},
    faults::SseEvent,
    reply::{Reply, Usage, pieces},
};

/// What renders an answer besides the reply itself.
#[derive(Debug, Clone, Copy)]
pub struct Render<'a> {
    /// `chatcmpl-…`.
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub usage: Usage,
    /// OpenRouter's extra fields.
    pub openrouter: bool,
    /// Send the usage chunk at the end of a stream.
    pub include_usage: bool,
    pub chunk_bytes: usize,
}

/// Reads a request body. With `validate`, rejects (with the message of a 400) what
/// OpenAI rejects: no model, no messages, unknown roles, tool calls left unanswered, tool
/// messages answering nothing, malformed tools.
pub fn parse(body: &Value, validate: bool) -> Result<ChatRequest, String> {
    let object = body.as_object().ok_or("the request body must be a JSON object")?;
    let model = object.get("model").and_then(Value::as_str).map(str::to_owned);
    if validate && model.is_none() {
        return Err("you must provide a model parameter".to_owned());
    }
    let stream = match object.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) if validate => return Err("'stream' must be a boolean".to_owned()),
        Some(_) => false,
    };
    let include_usage = object.get("stream_options").and_then(|o| o.get("include_usage")) == Some(&Value::Bool(true));
    let max_tokens = object
        .get("max_completion_tokens")
        .and_then(Value::as_u64)
        .or_else(|| object.get("max_tokens").and_then(Value::as_u64));
    let mut conversation = Conversation {
        max_tokens,
        tools_forbidden: object.get("tool_choice").and_then(Value::as_str) == Some("none"),
        ..Conversation::default()
    };
    if let Some(tools) = object.get("tools") {
        let tools = tools.as_array().ok_or("'tools' must be an array")?;
        for (i, tool) in tools.iter().enumerate() {
            if let Some(description) = tool.get("function").and_then(|f| f.get("description")).and_then(Value::as_str) {
                conversation.tool_descriptions.push(description.to_owned());
            }
            match tool.get("function").and_then(|f| f.get("name")).and_then(Value::as_str) {
                Some(name) => conversation.offered_tools.push(name.to_owned()),
                None if validate => return Err(format!("tools[{i}].function.name: a string is required")),
                None => {}
            }
        }
    }
    let empty = Vec::new();
    let messages = match object.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ if validate => return Err("'messages' must be a non-empty array".to_owned()),
        _ => &empty,
    };
    // Call ids of the last assistant message still waiting for their tool message.
    let mut pending: Vec<String> = Vec::new();
    let mut first_user: Option<String> = None;
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role != "tool" && !pending.is_empty() && validate {
            return Err(unanswered(&pending));
        }
        let text = content_text(message.get("content"));
        match role {
            "system" | "developer" | "function" => conversation.texts.push(text),
            "user" => {
                first_user.get_or_insert_with(|| text.clone());
                conversation.texts.push(text);
            }
            "assistant" => {
                conversation.texts.push(text);
                let mut calls = Vec::new();
                let tool_calls = message.get("tool_calls").and_then(Value::as_array).unwrap_or(&empty);
                for (j, call) in tool_calls.iter().enumerate() {
                    let id = call.get("id").and_then(Value::as_str);
                    let function = call.get("function");
                    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
                    let arguments = function.and_then(|f| f.get("arguments"));
                    let (Some(id), Some(name), Some(Value::String(arguments))) = (id, name, arguments) else {
                        if validate {
                            return Err(format!(
                                "messages[{i}].tool_calls[{j}]: needs an 'id', a 'function.name' and 'function.arguments' as a string"
                            ));
                        }
                        continue;
                    };
                    conversation.texts.push(arguments.clone());
                    calls.push(CallRef { id: id.to_owned(), name: name.to_owned() });
                }
                pending = calls.iter().map(|c| c.id.clone()).collect();
                conversation.assistant_turns.push(calls);
            }
            "tool" => {
                let Some(id) = message.get("tool_call_id").and_then(Value::as_str) else {
                    if validate {
                        return Err(format!("messages[{i}]: a 'tool' message needs a 'tool_call_id'"));
                    }
                    continue;
                };
                match pending.iter().position(|p| p == id) {
                    Some(at) => {
                        pending.remove(at);
                    }
                    None if validate => {
                        return Err(format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[{i}], tool_call_id {id})"
                        ));
                    }
                    None => {}
                }
                conversation.texts.push(text.clone());
                conversation.tool_results.push(ToolResult { call_id: id.to_owned(), text });
            }
            other if validate => return Err(format!("messages[{i}].role: unknown role '{other}'")),
            _ => {}
        }
    }
    if validate && !pending.is_empty() {
        return Err(unanswered(&pending));
    }
    conversation.first_user_text = first_user.unwrap_or_default();
    Ok(ChatRequest { model, stream, include_usage, conversation })
}

fn unanswered(pending: &[String]) -> String {
    format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        pending.join(", ")
    )
}

/// The text of a message `content`: a string, or the `text` of its text parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| {
                if p.get("type").and_then(Value::as_str) == Some("text") { p.get("text")?.as_str() } else { None }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn usage_json(usage: Usage) -> Value {
    let mut object = json!({
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
    });
    if let (Some(cost), Some(map)) = (usage.cost, object.as_object_mut()) {
        map.insert("cost".to_owned(), json!(cost));
    }
    object
}

/// The non-streaming answer (`chat.completion`).
pub fn completion(reply: &Reply, r: &Render<'_>) -> Value {
    let mut message = Map::new();
    message.insert("role".to_owned(), json!("assistant"));
    message.insert("content".to_owned(), json!(reply.text));
    message.insert("refusal".to_owned(), json!(reply.refusal));
    if !reply.calls.is_empty() {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_wire_string()}})
            })
            .collect();
        message.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    let mut choice = json!({"index": 0, "message": message, "logprobs": null, "finish_reason": reply.finish.openai()});
    let mut body = json!({"id": r.id, "object": "chat.completion", "created": r.created, "model": r.model, "choices": [], "system_fingerprint": null});
    if r.openrouter {
        choice["native_finish_reason"] = json!(reply.finish.openai());
        body["provider"] = json!("elengtis-model-server");
    }
    body["choices"] = json!([choice]);
    if reply.usage {
        body["usage"] = usage_json(r.usage);
    }
    body
}

/// The streamed answer: `chat.completion.chunk` events, then `[DONE]`.
pub fn stream(reply: &Reply, r: &Render<'_>) -> Vec<SseEvent> {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut choice = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish});
        let mut body = json!({"id": r.id, "object": "chat.completion.chunk", "created": r.created, "model": r.model, "system_fingerprint": null});
        if r.openrouter {
            choice["native_finish_reason"] = json!(finish);
            body["provider"] = json!("elengtis-model-server");
        }
        body["choices"] = json!([choice]);
        SseEvent::data(body.to_string())
    };
    let mut events = Vec::new();
    if r.openrouter {
        events.push(SseEvent::comment("OPENROUTER PROCESSING"));
    }
    events.push(chunk(json!({"role": "assistant", "content": "", "refusal": null}), None));
    for piece in pieces(reply.text.as_deref().unwrap_or_default(), r.chunk_bytes) {
        events.push(chunk(json!({"content": piece}), None));
    }
    for piece in pieces(reply.refusal.as_deref().unwrap_or_default(), r.chunk_bytes) {
        events.push(chunk(json!({"refusal": piece}), None));
    }
    for (index, call) in reply.calls.iter().enumerate() {
        let head = json!({"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}});
        events.push(chunk(json!({"tool_calls": [head]}), None));
        for piece in pieces(&call.arguments.to_wire_string(), r.chunk_bytes) {
            events.push(chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), None));
        }
    }
    events.push(chunk(json!({}), Some(reply.finish.openai())));
    if reply.usage && (r.include_usage || r.openrouter) {
        let body = json!({
            "id": r.id, "object": "chat.completion.chunk", "created": r.created, "model": r.model,
            "system_fingerprint": null, "choices": [], "usage": usage_json(r.usage),
        });
        events.push(SseEvent::data(body.to_string()));
    }
    events.push(SseEvent::data("[DONE]".to_owned()));
    events
}

/// OpenAI's error object for `status`.
pub fn error(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        400 | 413 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("invalid_request_error", json!("not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        _ => ("server_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// `GET /v1/models`.
pub fn models(ids: &[String]) -> Value {
    let data: Vec<Value> =
        ids.iter().map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "elengtis"})).collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::reply::{Arguments, Call, Finish};

    fn request(messages: Value) -> Value {
        json!({"model": "m", "messages": messages, "tools": [
            {"type": "function", "function": {"name": "read_note", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "submit", "parameters": {"type": "object"}}}
        ]})
    }

    #[test]
    fn a_conversation_is_read_with_its_tool_results() {
        let body = request(json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_note", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "submit", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "b", "content": "second"},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "first"}]}
        ]));
        let r = parse(&body, true).unwrap();
        let c = &r.conversation;
        assert_eq!(c.step(), 1);
        assert_eq!(c.offered_tools, ["read_note", "submit"]);
        assert_eq!(c.first_user_text, "hello");
        assert_eq!(c.tool_result_of(0, 0), Some("first"));
        assert_eq!(c.last_tool_result(), Some("first"));
        assert!(c.texts.join("\n").contains("{\"x\":1}"));
        assert!(!r.stream);
    }

    #[test]
    fn what_openai_rejects_is_rejected() {
        let unanswered = request(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "user", "content": "and?"}
        ]));
        assert!(parse(&unanswered, true).unwrap_err().contains("did not have response messages: a"));
        assert!(parse(&unanswered, false).is_ok());
        let stray =
            request(json!([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "z", "content": "x"}]));
        assert!(parse(&stray, true).unwrap_err().contains("must be a response to a preceeding message"));
        assert!(parse(&json!({"messages": [{"role": "user", "content": "x"}]}), true).unwrap_err().contains("model"));
        assert!(parse(&json!({"model": "m", "messages": []}), true).unwrap_err().contains("non-empty"));
        let bad_args = request(json!([{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "x", "arguments": {}}}]}]));
        assert!(parse(&bad_args, true).unwrap_err().contains("arguments' as a string"));
        assert!(parse(&json!([1]), false).is_err());
    }

    fn render() -> Render<'static> {
        Render {
            id: "chatcmpl-1",
            created: 7,
            model: "m",
            usage: Usage { prompt: 10, completion: 3, cost: Some(0.5) },
            openrouter: false,
            include_usage: true,
            chunk_bytes: 4,
        }
    }

    fn reply() -> Reply {
        Reply {
            text: Some("hello world".into()),
            refusal: None,
            calls: vec![
                Call { id: "call_0_0".into(), name: "a".into(), arguments: Arguments::Json(json!({"k": "value"})) },
                Call { id: "call_0_1".into(), name: "b".into(), arguments: Arguments::Raw("[1,2]".into()) },
            ],
            finish: Finish::ToolCalls,
            usage: true,
            notes: Vec::new(),
        }
    }

    #[test]
    fn completions_have_the_documented_shape() {
        let body = completion(&reply(), &render());
        assert_eq!(body["object"], "chat.completion");
        // OpenAI sends it (often null); OpenRouter's SDK refuses an answer without it.
        assert_eq!(body.get("system_fingerprint"), Some(&Value::Null));
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"k\":\"value\"}");
        assert_eq!(body["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"], "[1,2]");
        assert_eq!(
            body["usage"],
            json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13, "cost": 0.5})
        );
        assert!(body["choices"][0].get("native_finish_reason").is_none());
        let body = completion(&Reply { usage: false, ..reply() }, &Render { openrouter: true, ..render() });
        assert!(body.get("usage").is_none());
        assert_eq!(body["choices"][0]["native_finish_reason"], "tool_calls");
    }

    #[test]
    fn streams_reassemble_into_the_same_answer() {
        let events = stream(&reply(), &render());
        assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
        let chunks: Vec<Value> =
            events[..events.len() - 1].iter().map(|e| serde_json::from_str(&e.data).unwrap()).collect();
        let mut text = String::new();
        let mut args = [String::new(), String::new()];
        let mut ids = Vec::new();
        let mut finish = None;
        for chunk in &chunks[..chunks.len() - 1] {
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert_eq!(chunk.get("system_fingerprint"), Some(&Value::Null));
            let delta = &chunk["choices"][0]["delta"];
            text.push_str(delta["content"].as_str().unwrap_or_default());
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let i = usize::try_from(call["index"].as_u64().unwrap()).unwrap();
                if let Some(id) = call["id"].as_str() {
                    ids.push(id.to_owned());
                }
                args[i].push_str(call["function"]["arguments"].as_str().unwrap());
            }
            if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
                finish = Some(f.to_owned());
            }
        }
        assert_eq!(text, "hello world");
        assert_eq!(args, ["{\"k\":\"value\"}", "[1,2]"]);
        assert_eq!(ids, ["call_0_0", "call_0_1"]);
        assert_eq!(finish.as_deref(), Some("tool_calls"));
        let usage = chunks.last().unwrap();
        assert_eq!(
            (usage["choices"].as_array().map(Vec::len), usage["usage"]["total_tokens"].as_u64()),
            (Some(0), Some(13))
        );
        let without = stream(&reply(), &Render { include_usage: false, ..render() });
        assert_eq!(without.len(), events.len() - 1);
    }
}
