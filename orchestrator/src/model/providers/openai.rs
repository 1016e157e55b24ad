//! The OpenAI Chat Completions wire (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, LiteLLM),
//! and OpenRouter's dialect of it (`native_finish_reason`, `usage.cost`, `provider`,
//! `route`, `reasoning`, SSE comments).
//!
//! Our conversation is already OpenAI-shaped; on the wire, tool-call arguments become JSON
//! *strings* and an empty `tool_calls` list is left out (the API rejects it). Answers — a
//! JSON document, or a `text/event-stream` assembled chunk by chunk — become a [`ModelTurn`].

use elengtis_core::agent::{ModelRequest, ModelTurn, TurnUsage};
use serde_json::{Map, Value, json};

use super::{Malformed, ProviderConfig, Sse, push_call};

/// The request body for `request`.
pub fn body(config: &ProviderConfig, request: &ModelRequest, openrouter: bool) -> Value {
    let g = &config.generation;
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("messages".into(), Value::Array(request.messages.iter().map(wire_message).collect()));
    if !request.tools.is_empty() {
        body.insert("tools".into(), Value::Array(request.tools.clone()));
    }
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.to_owned(), value);
        }
    };
    set("temperature", g.temperature.map(|v| json!(v)));
    set("max_tokens", g.max_tokens.map(|v| json!(v)));
    set("max_completion_tokens", g.max_completion_tokens.map(|v| json!(v)));
    set("top_p", g.top_p.map(|v| json!(v)));
    set("frequency_penalty", g.frequency_penalty.map(|v| json!(v)));
    set("presence_penalty", g.presence_penalty.map(|v| json!(v)));
    set("seed", g.seed.map(|v| json!(v)));
    set("stop", g.stop_sequences.clone().map(|v| json!(v)));
    // As the original's client: `n` is sent only when more than one completion is asked for.
    set("n", g.n.filter(|n| *n > 1).map(|v| json!(v)));
    if g.streaming {
        set("stream", Some(json!(true)));
        set("stream_options", Some(json!({"include_usage": true})));
    }
    if openrouter {
        set("reasoning", g.reasoning.clone().map(Value::Object));
        set("provider", g.openrouter_provider.clone().map(Value::Object));
        set("route", g.route.clone().map(Value::String));
    } else {
        set("reasoning_effort", g.reasoning.as_ref().and_then(|r| r.get("effort")).cloned());
    }
    Value::Object(body)
}

/// One message of our conversation on the wire.
fn wire_message(message: &Value) -> Value {
    let mut message = message.clone();
    if message["role"] != "assistant" {
        return message;
    }
    let Some(map) = message.as_object_mut() else { return message };
    let calls = map.remove("tool_calls");
    let calls: Vec<Value> = match calls {
        Some(Value::Array(calls)) => calls,
        _ => Vec::new(),
    };
    if calls.is_empty() {
        return message;
    }
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|mut call| {
            if let Some(arguments) = call.pointer_mut("/function/arguments")
                && !arguments.is_string()
            {
                *arguments = Value::String(arguments.to_string());
            }
            call
        })
        .collect();
    if map.get("content").is_some_and(|c| c.as_str() == Some("")) {
        map.insert("content".into(), Value::Null);
    }
    map.insert("tool_calls".into(), Value::Array(calls));
    message
}

/// The message of an error answer, when the body has one (`{error: {message}}`).
pub fn error_message(body: &Value) -> Option<String> {
    let error = body.get("error")?;
    Some(error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned))
}

fn usage(value: &Value) -> TurnUsage {
    TurnUsage {
        input_tokens: value["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: value["completion_tokens"].as_u64().unwrap_or(0),
        cost_usd: value["cost"].as_f64(),
    }
}

fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

/// Read a whole (non-streamed) answer.
pub fn parse(body: &str) -> Result<ModelTurn, Malformed> {
    let value = super::json_body(body)?;
    if let Some(message) = error_message(&value) {
        return Err(Malformed::provider(message));
    }
    let Some(choice) = value["choices"].as_array().and_then(|c| c.first()) else {
        return Err(Malformed::shape("the answer has no `choices`"));
    };
    let Some(message) = choice.get("message").filter(|m| m.is_object()) else {
        return Err(Malformed::shape("the first choice has no `message`"));
    };
    let mut turn = ModelTurn {
        content: text(&message["content"]),
        calls: Vec::new(),
        finish_reason: choice["finish_reason"].as_str().map(str::to_owned),
        native_finish_reason: choice["native_finish_reason"].as_str().map(str::to_owned),
        usage: value.get("usage").map(usage).unwrap_or_default(),
        invalid_calls: Vec::new(),
    };
    if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty())
        && turn.content.is_empty()
    {
        turn.content = refusal.to_owned();
    }
    match &message["tool_calls"] {
        Value::Null => {}
        Value::Array(calls) => {
            for call in calls {
                let function = &call["function"];
                push_call(&mut turn, call["id"].as_str(), function["name"].as_str(), &function["arguments"]);
            }
        }
        other => return Err(Malformed::shape(format!("`tool_calls` is not a list: {other}"))),
    }
    Ok(turn)
}

/// A tool call assembled from stream deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Read a streamed answer (`data:` events ending with `data: [DONE]`).
pub fn parse_stream(body: &str) -> Result<ModelTurn, Malformed> {
    let events = Sse::events(body, error_message)?;
    let mut content = String::new();
    let mut refusal = String::new();
    let mut calls: Vec<PartialCall> = Vec::new();
    let mut finish = None;
    let mut native = None;
    let mut turn_usage = TurnUsage::default();
    let mut done = false;
    for (i, event) in events.iter().enumerate() {
        if event.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|e| Malformed::json(format!("stream event {} is not JSON: {e}", i + 1)))?;
        if let Some(message) = error_message(&chunk) {
            return Err(Malformed::provider(message));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            turn_usage = usage(u);
        }
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else { continue };
        let delta = &choice["delta"];
        if let Some(piece) = delta["content"].as_str() {
            content.push_str(piece);
        }
        if let Some(piece) = delta["refusal"].as_str() {
            refusal.push_str(piece);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or(calls.len());
            if index > 1024 {
                return Err(Malformed::shape(format!("tool call index {index} in stream event {}", i + 1)));
            }
            if calls.len() <= index {
                calls.resize_with(index + 1, PartialCall::default);
            }
            let partial = &mut calls[index];
            if let Some(id) = call["id"].as_str() {
                partial.id = Some(id.to_owned());
            }
            if let Some(name) = call["function"]["name"].as_str() {
                partial.name.get_or_insert_with(String::new).push_str(name);
            }
            if let Some(arguments) = call["function"]["arguments"].as_str() {
                partial.arguments.push_str(arguments);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_owned());
        }
        if let Some(reason) = choice["native_finish_reason"].as_str() {
            native = Some(reason.to_owned());
        }
    }
    if !done {
        return Err(Malformed::cut("the event stream ended before `data: [DONE]`"));
    }
    let mut turn = ModelTurn {
        content: if content.is_empty() { refusal } else { content },
        calls: Vec::new(),
        finish_reason: finish,
        native_finish_reason: native,
        usage: turn_usage,
        invalid_calls: Vec::new(),
    };
    for call in calls {
        push_call(&mut turn, call.id.as_deref(), call.name.as_deref(), &Value::String(call.arguments));
    }
    Ok(turn)
}

#[cfg(test)]
mod tests {
    use elengtis_core::format::generation::Generation;

    use super::super::MalformedClass;
    use super::*;

    fn config(generation: Value) -> ProviderConfig {
        ProviderConfig::for_tests(
            elengtis_core::format::campaign::ProviderKind::OpenaiCompatible,
            Generation::parse(generation.as_object().unwrap(), None).unwrap(),
        )
    }

    fn request() -> ModelRequest {
        ModelRequest {
            step: 1,
            messages: vec![
                json!({"role": "system", "content": "sys"}),
                json!({"role": "user", "content": "hi"}),
                json!({"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_0_0", "type": "function", "function": {"name": "read_note", "arguments": {"a": 1}}}]}),
                json!({"role": "tool", "tool_call_id": "call_0_0", "content": "note"}),
                json!({"role": "assistant", "content": "done", "tool_calls": []}),
            ],
            tools: vec![json!({"type": "function", "function": {"name": "read_note", "parameters": {}}})],
        }
    }

    #[test]
    fn the_conversation_goes_out_with_string_arguments_and_every_setting() {
        let c = config(json!({"temperature": 0.2, "max_tokens": 50, "stop_sequences": ["X"], "seed": 3,
                              "streaming": true, "n": 1, "reasoning": {"effort": "low"}}));
        let b = body(&c, &request(), false);
        assert_eq!(b["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert!(b["messages"][4].get("tool_calls").is_none(), "an empty list is left out");
        assert_eq!(b["messages"][4]["content"], "done");
        assert_eq!((b["temperature"].as_f64(), b["max_tokens"].as_u64()), (Some(0.2), Some(50)));
        assert_eq!((b["stop"].clone(), b["seed"].clone()), (json!(["X"]), json!(3)));
        assert_eq!((b["stream"].clone(), b["stream_options"]["include_usage"].clone()), (json!(true), json!(true)));
        assert!(b.get("n").is_none());
        assert_eq!(b["reasoning_effort"], "low");
        let or = body(&c, &request(), true);
        assert_eq!(or["reasoning"], json!({"effort": "low"}));
        assert!(or.get("reasoning_effort").is_none());
    }

    #[test]
    fn an_answer_becomes_a_turn_with_invalid_calls_set_aside() {
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "native_finish_reason": "tool_use",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "ok", "arguments": "{\"x\":1}"}},
                {"id": "b", "type": "function", "function": {"name": "empty", "arguments": ""}},
                {"id": "c", "type": "function", "function": {"name": "list", "arguments": "[1,2]"}},
                {"id": "d", "type": "function", "function": {"name": "broken", "arguments": "{\"x\":"}},
                {"id": "e", "type": "function", "function": {"arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "cost": 0.5}});
        let turn = parse(&body.to_string()).unwrap();
        assert_eq!(turn.calls.len(), 2);
        assert_eq!(turn.calls[1].arguments, json!({}));
        let errors: Vec<&str> = turn.invalid_calls.iter().map(|c| c.error.as_str()).collect();
        assert_eq!(turn.invalid_calls.len(), 3, "{errors:?}");
        assert_eq!(turn.invalid_calls[1].arguments, json!("{\"x\":"));
        assert_eq!(turn.native_finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(turn.usage, TurnUsage { input_tokens: 10, output_tokens: 3, cost_usd: Some(0.5) });
    }

    #[test]
    fn a_refusal_is_a_turn_that_says_so() {
        let body = json!({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": null, "refusal": "No."}}]});
        let turn = parse(&body.to_string()).unwrap();
        assert_eq!((turn.content.as_str(), turn.finish_reason.as_deref()), ("No.", Some("stop")));
    }

    #[test]
    fn malformed_answers_are_classified() {
        let class = |body: &str| parse(body).unwrap_err().class;
        assert_eq!(class(""), MalformedClass::Empty);
        assert_eq!(class("{\"choices\": ["), MalformedClass::InvalidJson);
        assert_eq!(class("{\"hello\": 1}"), MalformedClass::WrongShape);
        assert_eq!(class("{\"error\": {\"message\": \"overloaded\"}}"), MalformedClass::ProviderError);
    }

    #[test]
    fn a_stream_is_assembled_and_a_cut_stream_is_refused() {
        let stream = [
            ": OPENROUTER PROCESSING",
            "",
            r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            "",
            r#"data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            "",
            r#"data: {"choices":[{"index":0,"delta":{"content":"lo","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"submit","arguments":""}}]}}]}"#,
            "",
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"credential\":"}}]}}]}"#,
            "",
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"X\"}"}}]}}]}"#,
            "",
            r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls","native_finish_reason":"tool_calls"}]}"#,
            "",
            r#"data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            "",
            "",
        ]
        .join("\n");
        let whole = format!("{stream}data: [DONE]\n\n");
        let turn = parse_stream(&whole).unwrap();
        assert_eq!(turn.content, "Hello");
        assert_eq!(turn.calls[0].arguments, json!({"credential": "X"}));
        assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(turn.usage.input_tokens, 5);
        assert_eq!(parse_stream(&stream).unwrap_err().class, MalformedClass::Cut);
        let broken = format!("{}data: {{\"choices\": [\n\ndata: [DONE]\n\n", &stream);
        assert_eq!(parse_stream(&broken).unwrap_err().class, MalformedClass::InvalidJson);
    }
}
