//! The scripted model server as the "live model" of `elengtis gate`'s bundled fixtures: a
//! seed's deterministic script (`script:` of a `*.seed.yaml`, as JSON) turned into an
//! `elengtis-model-server` script that behaves the same over the real wire — it acts on an
//! injection only once the request shows it (`when: {seen, instruction}`), and reads earlier tool results
//! back from the conversation (`{output: ID}` becomes a `$from: tool_result` directive).

use serde_json::{Map, Value, json};

/// A fixed `created` time, so recorded answers are stable byte for byte.
pub const CREATED: u64 = 1_764_547_200;

/// The model-server script equivalent to the seed script `script`.
///
/// # Panics
///
/// When `script` is not a seed script (a test input).
pub fn model_script(seed_id: &str, script: &Value) -> Value {
    let steps = script["steps"].as_array().expect("a seed script has steps");
    // Where each named call was made: (step, call index).
    let mut named: Map<String, Value> = Map::new();
    let mut out = Vec::new();
    for (s, step) in steps.iter().enumerate() {
        let mut answer = Map::new();
        if let Some(seen) = step["when"]["seen"].as_str() {
            let mut when = json!({"seen": seen});
            if let Some(instruction) = step["when"]["instruction"].as_str() {
                when["instruction"] = json!(instruction);
            }
            answer.insert("when".into(), when);
        }
        if let Some(content) = step["content"].as_str() {
            answer.insert("content".into(), json!(content));
        }
        let mut calls = Vec::new();
        for (c, call) in step["calls"].as_array().into_iter().flatten().enumerate() {
            if let Some(id) = call["id"].as_str() {
                named.insert(id.to_owned(), json!([s, c]));
            }
            let arguments = match &call["arguments"] {
                Value::Null => json!({}),
                given => translate(given, s, &named),
            };
            calls.push(json!({"name": call["tool"], "arguments": arguments}));
        }
        if !calls.is_empty() {
            answer.insert("tool_calls".into(), Value::Array(calls));
        }
        out.push(Value::Object(answer));
    }
    json!({
        "description": format!("The seed {seed_id}'s script over the real wire (tests/src/gate.rs)."),
        "created": CREATED,
        "steps": out,
        "end_text": "Done.",
    })
}

fn translate(value: &Value, step: usize, named: &Map<String, Value>) -> Value {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("output") => {
            let id = map["output"].as_str().unwrap_or_default();
            let at = named.get(id).unwrap_or_else(|| panic!("`{{output: {id}}}` names no earlier call"));
            let back = step as i64 - at[0].as_i64().unwrap_or_default();
            json!({"$from": "tool_result", "step": -back, "call": at[1]})
        }
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), translate(v, step, named))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(|v| translate(v, step, named)).collect()),
        other => other.clone(),
    }
}

/// `scenarios/gate` and `scenarios/seeds` copied into `dir/scenarios`, so a test can break or
/// trim them; returns the copied gate file.
///
/// # Panics
///
/// On I/O errors (test setup).
pub fn copy_gate(dir: &std::path::Path) -> std::path::PathBuf {
    for sub in ["gate", "seeds"] {
        crate::copy_tree(&crate::workspace().join("scenarios").join(sub), &dir.join("scenarios").join(sub));
    }
    dir.join("scenarios/gate/gate.yaml")
}

/// A checkout in `dir` whose committed gate is trimmed to its first finding: one shows that a
/// CI recipe works; the whole gate runs in tests/docker/gate.rs.
///
/// # Panics
///
/// On I/O errors (test setup).
pub fn one_finding_checkout(dir: &std::path::Path) {
    let file = copy_gate(dir);
    let text = std::fs::read_to_string(&file).expect("gate file");
    let (head, findings) = text.split_once("findings:\n").expect("findings");
    let first: Vec<&str> = findings.lines().take(2).collect();
    std::fs::write(&file, format!("{head}findings:\n{}\n", first.join("\n"))).expect("one finding");
}
