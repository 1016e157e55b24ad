//! Placeholder arguments derived from a tool's `inputSchema`: the required properties, each
//! with a value of the type the schema asks for, so that the skeleton's first call passes
//! the argument check of `elengtis preflight` / `validate --tools`
//! ([`elengtis_core::toolargs`]).

use serde_json::{Map, Value, json};

/// How deep nested objects and arrays are filled.
const MAX_DEPTH: usize = 6;

/// The plain placeholder text.
const TEXT: &str = "example";

/// A value the schema accepts, as far as a placeholder can tell: `const`, `default`, the first
/// of `examples` or `enum`, the first branch of `anyOf`/`oneOf` that is not `null`, else a
/// value of the (first non-null) `type` within its bounds (`minimum`, `minLength`,
/// `minItems`, a `format` such as `date-time`, `email` or `uri`). A `pattern` is not solved.
pub fn placeholder(schema: &Value) -> Value {
    fill(schema, 0)
}

fn fill(schema: &Value, depth: usize) -> Value {
    let Some(s) = schema.as_object() else { return json!(TEXT) };
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(d) = s.get("default") {
        return d.clone();
    }
    for key in ["examples", "enum"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return first.clone();
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            let chosen = branches.iter().find(|b| b.get("type").is_none_or(|t| t != "null")).or(branches.first());
            if let Some(branch) = chosen {
                return fill(branch, depth + 1);
            }
        }
    }
    let kind = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "string",
    };
    match kind {
        "string" => json!(text(s)),
        "integer" => json!(integer(s)),
        "number" => json!(integer(s)),
        "boolean" => json!(false),
        "null" => Value::Null,
        "array" => {
            let n = s.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(8);
            if n == 0 || depth >= MAX_DEPTH {
                return json!([]);
            }
            let item = s.get("items").map(|i| fill(i, depth + 1)).unwrap_or(json!(TEXT));
            Value::Array(vec![item; usize::try_from(n).unwrap_or(1)])
        }
        "object" => {
            if depth >= MAX_DEPTH {
                return json!({});
            }
            Value::Object(required(s).into_iter().map(|(k, v)| (k.to_owned(), fill(v, depth + 1))).collect())
        }
        _ => json!(TEXT),
    }
}

/// The required properties of an object schema with their schemas, in `required` order
/// (a required name without a property schema gets an empty schema).
pub fn required(schema: &Map<String, Value>) -> Vec<(&str, &Value)> {
    static ANY: Value = Value::Bool(true);
    let props = schema.get("properties").and_then(Value::as_object);
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(|name| (name, props.and_then(|p| p.get(name)).unwrap_or(&ANY)))
                .collect()
        })
        .unwrap_or_default()
}

fn text(s: &Map<String, Value>) -> String {
    let by_format = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => Some("2026-01-01T12:00:00Z"),
        Some("date") => Some("2026-01-01"),
        Some("time") => Some("12:00:00"),
        Some("email" | "idn-email") => Some("someone@example.com"),
        Some("uri" | "uri-reference" | "iri" | "url") => Some("http://192.0.2.1/"),
        Some("uuid") => Some("00000000-0000-4000-8000-000000000000"),
        Some("ipv4") => Some("192.0.2.1"),
        Some("hostname") => Some("example.com"),
        _ => None,
    };
    if let Some(value) = by_format {
        return value.to_owned();
    }
    let min = s.get("minLength").and_then(Value::as_u64).map_or(0, |n| usize::try_from(n.min(256)).unwrap_or(0));
    let max =
        s.get("maxLength").and_then(Value::as_u64).map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut value = TEXT.to_owned();
    while value.chars().count() < min {
        value.push('x');
    }
    value.chars().take(max.max(min)).collect()
}

fn integer(s: &Map<String, Value>) -> i64 {
    let minimum = s
        .get("minimum")
        .and_then(Value::as_f64)
        .or_else(|| s.get("exclusiveMinimum").and_then(Value::as_f64).map(|m| m.floor() + 1.0));
    let maximum = s
        .get("maximum")
        .and_then(Value::as_f64)
        .or_else(|| s.get("exclusiveMaximum").and_then(Value::as_f64).map(|m| m.ceil() - 1.0));
    let mut value = 1.0_f64;
    if let Some(min) = minimum {
        value = min.ceil();
    }
    if let Some(max) = maximum
        && value > max
    {
        value = max.floor();
    }
    // Bounded to i32 so the cast cannot saturate surprisingly.
    value.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64
}

/// Whether a property is free text the canary can stand in for: a string without `enum`,
/// `const`, `pattern` or `format`, and without a `maxLength` shorter than a canary.
pub fn is_free_text(schema: &Value) -> bool {
    let Some(s) = schema.as_object() else { return false };
    let is_string = match s.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
        _ => false,
    };
    is_string
        && !["enum", "const", "pattern", "format"].iter().any(|k| s.contains_key(*k))
        && s.get("maxLength").and_then(Value::as_u64).is_none_or(|n| n >= 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn placeholders_follow_type_bounds_and_formats() {
        assert_eq!(placeholder(&json!({"type": "string"})), json!("example"));
        assert_eq!(placeholder(&json!({"type": "string", "minLength": 10})), json!("examplexxx"));
        assert_eq!(placeholder(&json!({"type": "string", "maxLength": 3})), json!("exa"));
        assert_eq!(placeholder(&json!({"type": "string", "format": "date-time"})), json!("2026-01-01T12:00:00Z"));
        assert_eq!(placeholder(&json!({"type": "integer", "minimum": 5})), json!(5));
        assert_eq!(placeholder(&json!({"type": "integer", "maximum": 0})), json!(0));
        assert_eq!(placeholder(&json!({"type": "number", "exclusiveMinimum": 2.5})), json!(3));
        assert_eq!(placeholder(&json!({"type": ["null", "boolean"]})), json!(false));
        assert_eq!(placeholder(&json!({"enum": ["b", "a"]})), json!("b"));
        assert_eq!(placeholder(&json!({"type": "string", "default": "UTC"})), json!("UTC"));
        assert_eq!(placeholder(&json!({"anyOf": [{"type": "null"}, {"type": "integer"}]})), json!(1));
        assert_eq!(placeholder(&json!({"type": "array", "minItems": 2, "items": {"type": "integer"}})), json!([1, 1]));
        assert_eq!(
            placeholder(
                &json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]})
            ),
            json!({"b": 1})
        );
    }

    #[test]
    fn placeholders_pass_the_schema_they_came_from() {
        // What the first scripted call relies on: the argument check accepts the values.
        let schemas = [
            json!({"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}),
            json!({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}, "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}}, "required": ["id", "tags"]}),
            json!({"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}, "when": {"type": "string", "format": "date"}, "n": {"type": "number", "maximum": -3}}, "required": ["mode", "when", "n"]}),
            json!({"type": "object", "properties": {"inner": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}}, "required": ["inner"]}),
        ];
        for schema in schemas {
            let value = placeholder(&schema);
            let validator = jsonschema::validator_for(&schema).unwrap();
            assert!(validator.is_valid(&value), "{value} against {schema}");
        }
    }

    #[test]
    fn free_text_excludes_constrained_strings() {
        assert!(is_free_text(&json!({"type": "string"})));
        assert!(is_free_text(&json!({"type": ["string", "null"], "description": "body"})));
        assert!(!is_free_text(&json!({"type": "string", "enum": ["a"]})));
        assert!(!is_free_text(&json!({"type": "string", "format": "date"})));
        assert!(!is_free_text(&json!({"type": "string", "maxLength": 10})));
        assert!(!is_free_text(&json!({"type": "integer"})));
        let schema = object(json!({"properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}));
        let names: Vec<&str> = required(&schema).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "ghost"]);
    }
}
