//! The Anthropic Messages wire, native: the system prompt apart, assistant turns as `text` and
//! `tool_use` blocks, tool results as `tool_result` blocks in user messages (consecutive ones
//! merged into one message), `max_tokens` always sent, and `stop_reason` normalised to the
//! OpenAI vocabulary (`end_turn`/`stop_sequence` → `stop`, `tool_use` → `tool_calls`,
//! `max_tokens` → `length`, `refusal` → `content_filter`) with the native one kept.

use elengtis_core::agent::{ModelRequest, ModelTurn, TurnUsage};
use serde_json::{Map, Value, json};

use super::{Malformed, ProviderConfig, Sse, push_call};

/// The API version sent in `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The request body for `request`.
pub fn body(config: &ProviderConfig, request: &ModelRequest) -> Value {
    let g = &config.generation;
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        let content = message["content"].as_str().unwrap_or_default();
        let (role, blocks): (&str, Vec<Value>) = match message["role"].as_str() {
            Some("system") => {
                system.push(content.to_owned());
                continue;
            }
            Some("assistant") => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let input = match &call["function"]["arguments"] {
                        Value::Object(map) => Value::Object(map.clone()),
                        Value::String(s) => serde_json::from_str::<Map<String, Value>>(s)
                            .map(Value::Object)
                            .unwrap_or_else(|_| json!({})),
                        _ => json!({}),
                    };
                    blocks.push(
                        json!({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input}),
                    );
                }
                if blocks.is_empty() {
                    // An empty assistant turn has nothing to send (the API rejects empty content).
                    continue;
                }
                ("assistant", blocks)
            }
            Some("tool") => (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": content})],
            ),
            _ => ("user", vec![json!({"type": "text", "text": content})]),
        };
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["content"].as_array_mut() {
                    existing.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("max_tokens".into(), json!(g.output_cap(config.kind)));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let f = &t["function"];
                let schema =
                    if f["parameters"].is_object() { f["parameters"].clone() } else { json!({"type": "object"}) };
                json!({"name": f["name"], "description": f["description"], "input_schema": schema})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = g.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = g.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(stop) = &g.stop_sequences {
        body.insert("stop_sequences".into(), json!(stop));
    }
    if g.streaming {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The message of an error answer (`{type: "error", error: {type, message}}`).
pub fn error_message(body: &Value) -> Option<String> {
    let error = body.get("error")?;
    let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
    Some(match error.get("type").and_then(Value::as_str) {
        Some(kind) => format!("{kind}: {message}"),
        None => message,
    })
}

/// `stop_reason` in the OpenAI vocabulary.
pub fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" | "pause_turn" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        other => other,
    }
    .to_owned()
}

fn input_tokens(usage: &Value) -> u64 {
    ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .map(|k| usage[*k].as_u64().unwrap_or(0))
        .sum()
}

fn turn_from(
    content: String,
    calls: Vec<(Option<String>, Option<String>, Value)>,
    stop: Option<&str>,
    usage: TurnUsage,
) -> ModelTurn {
    let mut turn = ModelTurn {
        content,
        calls: Vec::new(),
        finish_reason: stop.map(finish_reason),
        native_finish_reason: stop.map(str::to_owned),
        usage,
        invalid_calls: Vec::new(),
    };
    for (id, name, input) in calls {
        push_call(&mut turn, id.as_deref(), name.as_deref(), &input);
    }
    turn
}

/// Read a whole (non-streamed) answer.
pub fn parse(body: &str) -> Result<ModelTurn, Malformed> {
    let value = super::json_body(body)?;
    if value["type"] == "error" || value.get("error").is_some() {
        return Err(Malformed::provider(error_message(&value).unwrap_or_else(|| value.to_string())));
    }
    let Some(blocks) = value["content"].as_array() else {
        return Err(Malformed::shape("the answer has no `content` list"));
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => calls.push((
                block["id"].as_str().map(str::to_owned),
                block["name"].as_str().map(str::to_owned),
                block["input"].clone(),
            )),
            _ => {}
        }
    }
    let usage = TurnUsage {
        input_tokens: input_tokens(&value["usage"]),
        output_tokens: value["usage"]["output_tokens"].as_u64().unwrap_or(0),
        cost_usd: None,
    };
    Ok(turn_from(text, calls, value["stop_reason"].as_str(), usage))
}

/// A content block assembled from stream events.
#[derive(Debug)]
enum Block {
    Text(String),
    Tool { id: Option<String>, name: Option<String>, json: String, input: Value },
    Other,
}

/// Read a streamed answer (`message_start` … `message_stop`).
pub fn parse_stream(body: &str) -> Result<ModelTurn, Malformed> {
    let events = Sse::events(body, error_message)?;
    let mut blocks: Vec<Block> = Vec::new();
    let mut stop: Option<String> = None;
    let mut usage = TurnUsage::default();
    let mut done = false;
    for (i, event) in events.iter().enumerate() {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| Malformed::json(format!("stream event {} is not JSON: {e}", i + 1)))?;
        let kind = event.event.as_deref().or_else(|| data["type"].as_str()).unwrap_or_default();
        match kind {
            "message_start" => {
                usage.input_tokens = input_tokens(&data["message"]["usage"]);
                usage.output_tokens = data["message"]["usage"]["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                let new = match block["type"].as_str() {
                    Some("text") => Block::Text(block["text"].as_str().unwrap_or_default().to_owned()),
                    Some("tool_use") => Block::Tool {
                        id: block["id"].as_str().map(str::to_owned),
                        name: block["name"].as_str().map(str::to_owned),
                        json: String::new(),
                        input: block["input"].clone(),
                    },
                    _ => Block::Other,
                };
                blocks.push(new);
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().and_then(|i| usize::try_from(i).ok());
                let Some(block) = index.and_then(|i| blocks.get_mut(i)) else {
                    return Err(Malformed::shape(format!(
                        "stream event {} adds to a block that was not started",
                        i + 1
                    )));
                };
                match block {
                    Block::Text(text) => text.push_str(data["delta"]["text"].as_str().unwrap_or_default()),
                    Block::Tool { json, .. } => {
                        json.push_str(data["delta"]["partial_json"].as_str().unwrap_or_default())
                    }
                    Block::Other => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    stop = Some(reason.to_owned());
                }
                if let Some(n) = data["usage"]["output_tokens"].as_u64() {
                    usage.output_tokens = n;
                }
            }
            "message_stop" => {
                done = true;
                break;
            }
            "error" => {
                return Err(Malformed::provider(error_message(&data).unwrap_or_else(|| data.to_string())));
            }
            _ => {}
        }
    }
    if !done {
        return Err(Malformed::cut("the event stream ended before `message_stop`"));
    }
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block {
            Block::Text(t) => text.push_str(&t),
            Block::Tool { id, name, json, input } => {
                let input = if json.is_empty() { input } else { Value::String(json) };
                calls.push((id, name, input));
            }
            Block::Other => {}
        }
    }
    Ok(turn_from(text, calls, stop.as_deref(), usage))
}

#[cfg(test)]
mod tests {
    use elengtis_core::format::campaign::ProviderKind;
    use elengtis_core::format::generation::Generation;

    use super::super::MalformedClass;
    use super::*;

    fn config(generation: Value) -> ProviderConfig {
        ProviderConfig::for_tests(
            ProviderKind::Anthropic,
            Generation::parse(generation.as_object().unwrap(), None).unwrap(),
        )
    }

    #[test]
    fn the_conversation_goes_out_in_blocks_with_tool_results_merged() {
        let request = ModelRequest {
            step: 1,
            messages: vec![
                json!({"role": "system", "content": "sys"}),
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "content": "reading", "tool_calls": [
                    {"id": "call_0_0", "type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
                    {"id": "call_0_1", "type": "function", "function": {"name": "b", "arguments": {}}}]}),
                json!({"role": "tool", "tool_call_id": "call_0_0", "content": "A"}),
                json!({"role": "tool", "tool_call_id": "call_0_1", "content": "B"}),
            ],
            tools: vec![
                json!({"type": "function", "function": {"name": "a", "description": "d", "parameters": {"type": "object"}}}),
            ],
        };
        let b = body(&config(json!({"temperature": 0.5, "stop_sequences": "END", "streaming": true})), &request);
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], 4096);
        assert_eq!(b["messages"].as_array().unwrap().len(), 3);
        assert_eq!(
            b["messages"][1]["content"][2],
            json!({"type": "tool_use", "id": "call_0_1", "name": "b", "input": {}})
        );
        assert_eq!(b["messages"][2]["role"], "user");
        assert_eq!(b["messages"][2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(b["messages"][2]["content"][1]["tool_use_id"], "call_0_1");
        assert_eq!(b["tools"][0], json!({"name": "a", "description": "d", "input_schema": {"type": "object"}}));
        assert_eq!(
            (b["temperature"].clone(), b["stop_sequences"].clone(), b["stream"].clone()),
            (json!(0.5), json!(["END"]), json!(true))
        );
    }

    #[test]
    fn an_answer_becomes_a_turn() {
        let body = json!({"type": "message", "content": [
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t1", "name": "submit", "input": {"credential": "X"}},
            {"type": "tool_use", "id": "t2", "name": "bad", "input": [1, 2]}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 7, "output_tokens": 2, "cache_read_input_tokens": 3}});
        let turn = parse(&body.to_string()).unwrap();
        assert_eq!(turn.content, "ok");
        assert_eq!(turn.calls.len(), 1);
        assert_eq!(turn.invalid_calls.len(), 1);
        assert_eq!(
            (turn.finish_reason.as_deref(), turn.native_finish_reason.as_deref()),
            (Some("tool_calls"), Some("tool_use"))
        );
        assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (10, 2));
        let refusal = json!({"content": [{"type": "text", "text": "No."}], "stop_reason": "refusal", "usage": {}});
        let turn = parse(&refusal.to_string()).unwrap();
        assert_eq!((turn.content.as_str(), turn.finish_reason.as_deref()), ("No.", Some("content_filter")));
        let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        let e = parse(&error.to_string()).unwrap_err();
        assert_eq!((e.class, e.detail.as_str()), (MalformedClass::ProviderError, "overloaded_error: busy"));
    }

    #[test]
    fn a_stream_is_assembled() {
        let events = [
            (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            ),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "2}"}}),
            ),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}}),
            ),
        ];
        let text: String = events.iter().map(|(e, d)| format!("event: {e}\ndata: {d}\n\n")).collect();
        assert_eq!(parse_stream(&text).unwrap_err().class, MalformedClass::Cut);
        let whole = format!("{text}event: message_stop\ndata: {{\"type\": \"message_stop\"}}\n\n");
        let turn = parse_stream(&whole).unwrap();
        assert_eq!(turn.content, "Hi");
        assert_eq!(turn.calls[0].arguments, json!({"a": 2}));
        assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (9, 4));
        assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
    }
}
