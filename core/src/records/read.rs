//! Reading a record from parsed JSON into its type, with an error that names the field.
//!
//! serde's errors say what went wrong (`invalid type: string "yes", expected a boolean`) but
//! not where, and a missing nested field names only its last key. [`from_value`]
//! deserializes through `serde_path_to_error`, then locates the problem in the type's
//! generated JSON Schema — the same schema `elengtis schema` writes — as a missing field, an
//! unknown field or a value of the wrong kind, with what the field must be described from
//! that schema (`a boolean or null`, `a non-negative integer`, `"complete" or
//! "incomplete"`). Messages therefore follow the record's one definition.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Why a JSON value is not a record of the type asked for. Fields are dotted paths
/// (`usage.cost_usd`, `errors[2].phase`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The value is not a JSON object.
    #[error("failed to read the record: it is not a JSON object")]
    NotObject,
    /// A required field is absent.
    #[error("failed to read the record: it has no `{field}`")]
    Missing {
        /// The field.
        field: String,
    },
    /// A field the type does not have.
    #[error("failed to read the record: it has unknown field `{field}`")]
    Unknown {
        /// The field.
        field: String,
    },
    /// A field holds a value the type does not accept.
    #[error("failed to read the record: field `{field}` must be {expected}")]
    Invalid {
        /// The field.
        field: String,
        /// What it must be, from the schema.
        expected: String,
    },
}

/// Deserializes `value` as a `T`; on failure, names the field at fault.
///
/// # Errors
///
/// A [`FieldError`] naming the missing, unknown or invalid field.
pub fn from_value<T: DeserializeOwned + JsonSchema>(value: &Value) -> Result<T, FieldError> {
    if !value.is_object() {
        return Err(FieldError::NotObject);
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path: Vec<Step> = error
            .path()
            .iter()
            .map_while(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                _ => None,
            })
            .collect();
        let schema = crate::jsonschema::schema_for::<T>();
        Locator { root: schema.as_value() }.locate(value, &path)
    })
}

/// One step of a path into a JSON value.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Index(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// Walks a value and its root schema side by side.
struct Locator<'a> {
    root: &'a Value,
}

impl<'a> Locator<'a> {
    /// The problem serde met at (or inside) `path`.
    fn locate(&self, value: &Value, path: &[Step]) -> FieldError {
        let mut value = value;
        let mut schema = self.root;
        let mut at: Vec<Step> = Vec::new();
        for step in path {
            let next = match step {
                Step::Key(key) => value.get(key).map(|child| {
                    let child_schema = self.property(schema, value, key);
                    (child, child_schema)
                }),
                Step::Index(index) => value.get(index).map(|child| (child, self.items(schema))),
            };
            let Some((child, child_schema)) = next else { break };
            let Some(child_schema) = child_schema else {
                at.push(step.clone());
                return FieldError::Unknown { field: dotted(&at) };
            };
            at.push(step.clone());
            value = child;
            schema = child_schema;
        }
        if let (Value::Object(object), Some(shape)) = (value, self.object_shape(schema, value)) {
            for name in shape.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(name) = name.as_str().filter(|name| !object.contains_key(*name)) {
                    at.push(Step::Key(name.to_owned()));
                    return FieldError::Missing { field: dotted(&at) };
                }
            }
            if shape.get("additionalProperties") == Some(&Value::Bool(false)) {
                let known = shape.get("properties").and_then(Value::as_object);
                if let Some(name) = object.keys().find(|key| !known.is_some_and(|known| known.contains_key(*key))) {
                    at.push(Step::Key(name.clone()));
                    return FieldError::Unknown { field: dotted(&at) };
                }
            }
        }
        if at.is_empty() {
            return FieldError::Invalid { field: "(the record)".to_owned(), expected: self.describe(schema) };
        }
        FieldError::Invalid { field: dotted(&at), expected: self.describe(schema) }
    }

    /// `schema` with `$ref`s followed.
    fn resolve(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..32 {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else { break };
            let Some(target) = reference.strip_prefix('#').and_then(|pointer| self.root.pointer(pointer)) else {
                break;
            };
            schema = target;
        }
        schema
    }

    /// The branches of `schema`: itself, or its `anyOf`/`oneOf` alternatives, resolved.
    fn branches(&self, schema: &'a Value) -> Vec<&'a Value> {
        let schema = self.resolve(schema);
        for keyword in ["anyOf", "oneOf"] {
            if let Some(alternatives) = schema.get(keyword).and_then(Value::as_array) {
                return alternatives.iter().flat_map(|branch| self.branches(branch)).collect();
            }
        }
        vec![schema]
    }

    /// The object schema among `schema`'s branches that applies to `value` (an object).
    fn object_shape(&self, schema: &'a Value, value: &Value) -> Option<&'a Map<String, Value>> {
        if !value.is_object() {
            return None;
        }
        self.branches(schema).into_iter().filter_map(Value::as_object).find(|branch| {
            branch.contains_key("properties") || branch.get("type") == Some(&Value::String("object".into()))
        })
    }

    /// The schema of property `key` of `value` under `schema`; `None` when the type has no
    /// such field (unknown properties refused).
    fn property(&self, schema: &'a Value, value: &Value, key: &str) -> Option<&'a Value> {
        const ANYTHING: &Value = &Value::Bool(true);
        let Some(shape) = self.object_shape(schema, value) else { return Some(ANYTHING) };
        if let Some(property) = shape.get("properties").and_then(|p| p.get(key)) {
            return Some(property);
        }
        match shape.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(additional @ Value::Object(_)) => Some(additional),
            _ => Some(ANYTHING),
        }
    }

    /// The schema of the items of an array under `schema`.
    fn items(&self, schema: &'a Value) -> Option<&'a Value> {
        const ANYTHING: &Value = &Value::Bool(true);
        let items = self.branches(schema).into_iter().find_map(|branch| branch.get("items"));
        Some(items.unwrap_or(ANYTHING))
    }

    /// What a value under `schema` must be, in words.
    fn describe(&self, schema: &'a Value) -> String {
        let mut phrases: Vec<String> = Vec::new();
        for branch in self.branches(schema) {
            for phrase in branch_phrases(branch) {
                if !phrases.contains(&phrase) {
                    phrases.push(phrase);
                }
            }
        }
        match phrases.as_slice() {
            [] => "a valid value".to_owned(),
            [only] => only.clone(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        }
    }
}

/// The phrases for one (resolved, non-alternative) schema.
fn branch_phrases(schema: &Value) -> Vec<String> {
    if let Some(constant) = schema.get("const") {
        return vec![constant.to_string()];
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().map(Value::to_string).collect();
    }
    let non_negative = schema.get("minimum").and_then(Value::as_f64).is_some_and(|minimum| minimum >= 0.0);
    let phrase = |kind: &str| match kind {
        "integer" if non_negative => "a non-negative integer".to_owned(),
        "integer" => "an integer".to_owned(),
        "number" => "a number".to_owned(),
        "string" => "a string".to_owned(),
        "boolean" => "a boolean".to_owned(),
        "object" => "an object".to_owned(),
        "array" => "an array".to_owned(),
        "null" => "null".to_owned(),
        other => other.to_owned(),
    };
    match schema.get("type") {
        Some(Value::String(kind)) => vec![phrase(kind)],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).map(phrase).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only deserialized")]
    struct Outer {
        name: String,
        flag: Option<bool>,
        count: u32,
        inner: Inner,
        list: Vec<Inner>,
        state: State,
        maybe: Option<State>,
        #[serde(default)]
        labels: std::collections::BTreeMap<String, u64>,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "only deserialized")]
    struct Inner {
        value: i64,
    }

    /// A state.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum State {
        /// On.
        On,
        /// Off.
        Off,
        /// Unknown.
        Unknown,
    }

    fn good() -> Value {
        json!({"name": "n", "flag": null, "count": 1, "inner": {"value": -1}, "list": [{"value": 2}],
               "state": "on", "maybe": null, "labels": {"a": 1}})
    }

    /// A change to a good record.
    type Edit = fn(&mut Value);

    fn error(edit: impl FnOnce(&mut Value)) -> String {
        let mut value = good();
        edit(&mut value);
        from_value::<Outer>(&value).expect_err("must fail").to_string()
    }

    #[test]
    fn a_valid_record_reads() {
        from_value::<Outer>(&good()).expect("valid");
    }

    #[test]
    fn errors_name_the_field_and_what_it_must_be() {
        assert_eq!(from_value::<Outer>(&json!([1])).expect_err("not an object"), FieldError::NotObject);
        let cases: [(Edit, &str); 10] = [
            (|v| v["flag"] = json!("yes"), "field `flag` must be a boolean or null"),
            (|v| v["count"] = json!(-1), "field `count` must be a non-negative integer"),
            (|v| v["inner"] = json!(3), "field `inner` must be an object"),
            (|v| v["inner"]["value"] = json!(1.5), "field `inner.value` must be an integer"),
            (|v| v["list"][0]["value"] = json!("x"), "field `list[0].value` must be an integer"),
            (|v| v["state"] = json!("dim"), r#"field `state` must be "on", "off" or "unknown""#),
            (|v| v["maybe"] = json!(1), r#"field `maybe` must be "on", "off", "unknown" or null"#),
            (|v| v["labels"]["a"] = json!(true), "field `labels.a` must be a non-negative integer"),
            (
                |v| {
                    v["inner"].as_object_mut().expect("object").remove("value");
                },
                "it has no `inner.value`",
            ),
            (|v| v["list"][0]["extra"] = json!(1), "it has unknown field `list[0].extra`"),
        ];
        for (edit, expected) in cases {
            assert_eq!(error(edit), format!("failed to read the record: {expected}"));
        }
        assert_eq!(
            error(|v| {
                v.as_object_mut().expect("object").remove("name");
            }),
            "failed to read the record: it has no `name`"
        );
        assert_eq!(error(|v| v["surplus"] = json!(0)), "failed to read the record: it has unknown field `surplus`");
    }
}
