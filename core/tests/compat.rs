//! Compatibility with the original tool's v1 file format.
//!
//! Every document valid under the original tool's JSON Schemas (embedded below, verbatim from
//! `elengtis-v1/{campaign,scenario}.schema.json`) must be accepted by elengtis's parse layer
//! with the same meaning. Each hand-written fixture is:
//!
//! 1. converted to JSON with PyYAML's `safe_load` (what the original tool read) when
//!    `python3` has `yaml`, else with our own `Node::to_json`; when PyYAML is available the
//!    two conversions must agree;
//! 2. validated against the compat schema (the fixture is a legitimate compat document);
//! 3. parsed by elengtis (`parse_document`);
//! 4. dumped back with `serde_json::to_value`: the dump must still be compat-valid and equal,
//!    field by field, to the compat document with the schema's defaults applied;
//! 5. re-parsed from the dump (as a JSON tree and as JSON text) and dumped again, unchanged.
//!
//! In the other direction, documents the compat schema rejects must be rejected by elengtis
//! too, at the parse layer or by the semantic checks of `load_campaign`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use elengtis_core::format::campaign::Campaign;
use elengtis_core::format::scenario::Scenario;
use elengtis_core::format::yaml::Node;
use elengtis_core::format::{self, de, parse_document};
use elengtis_core::load::load_campaign;
use elengtis_core::validate::LoadOptions;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------
// The compat schemas and helpers
// ---------------------------------------------------------------------------------------

/// `campaign.schema.json` of the original tool (v1), verbatim.
const CAMPAIGN_SCHEMA: &str = r##"{
  "$defs": {
    "ContainerTransport": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "isolated_container",
          "title": "Type",
          "type": "string"
        },
        "image": {
          "minLength": 1,
          "title": "Image",
          "type": "string"
        },
        "container_port": {
          "maximum": 65535,
          "minimum": 1,
          "title": "Container Port",
          "type": "integer"
        },
        "uid": {
          "exclusiveMinimum": 0,
          "title": "Uid",
          "type": "integer"
        },
        "gid": {
          "exclusiveMinimum": 0,
          "title": "Gid",
          "type": "integer"
        },
        "command": {
          "items": {
            "type": "string"
          },
          "title": "Command",
          "type": "array"
        },
        "env": {
          "additionalProperties": {
            "$ref": "#/$defs/EnvRef"
          },
          "title": "Env",
          "type": "object"
        },
        "path": {
          "default": "/mcp",
          "pattern": "^/",
          "title": "Path",
          "type": "string"
        },
        "startup_timeout_seconds": {
          "default": 30,
          "maximum": 300,
          "minimum": 1,
          "title": "Startup Timeout Seconds",
          "type": "integer"
        },
        "relay_image": {
          "anyOf": [
            {
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Relay Image"
        }
      },
      "required": [
        "type",
        "image",
        "container_port",
        "uid",
        "gid"
      ],
      "title": "ContainerTransport",
      "type": "object"
    },
    "EnvRef": {
      "additionalProperties": false,
      "properties": {
        "env": {
          "pattern": "^[A-Z_][A-Z0-9_]*$",
          "title": "Env",
          "type": "string"
        }
      },
      "required": [
        "env"
      ],
      "title": "EnvRef",
      "type": "object"
    },
    "HttpTransport": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "streamable_http",
          "title": "Type",
          "type": "string"
        },
        "url": {
          "title": "Url",
          "type": "string"
        },
        "headers": {
          "additionalProperties": {
            "$ref": "#/$defs/EnvRef"
          },
          "title": "Headers",
          "type": "object"
        }
      },
      "required": [
        "type",
        "url"
      ],
      "title": "HttpTransport",
      "type": "object"
    },
    "StdioTransport": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "stdio",
          "title": "Type",
          "type": "string"
        },
        "command": {
          "title": "Command",
          "type": "string"
        },
        "args": {
          "items": {},
          "title": "Args",
          "type": "array"
        },
        "env": {
          "additionalProperties": {
            "$ref": "#/$defs/EnvRef"
          },
          "title": "Env",
          "type": "object"
        }
      },
      "required": [
        "type",
        "command"
      ],
      "title": "StdioTransport",
      "type": "object"
    },
    "Target": {
      "additionalProperties": false,
      "properties": {
        "id": {
          "title": "Id",
          "type": "string"
        },
        "transport": {
          "discriminator": {
            "mapping": {
              "isolated_container": "#/$defs/ContainerTransport",
              "stdio": "#/$defs/StdioTransport",
              "streamable_http": "#/$defs/HttpTransport"
            },
            "propertyName": "type"
          },
          "oneOf": [
            {
              "$ref": "#/$defs/StdioTransport"
            },
            {
              "$ref": "#/$defs/HttpTransport"
            },
            {
              "$ref": "#/$defs/ContainerTransport"
            }
          ],
          "title": "Transport"
        },
        "bindings": {
          "additionalProperties": {
            "additionalProperties": true,
            "type": "object"
          },
          "title": "Bindings",
          "type": "object"
        }
      },
      "required": [
        "id",
        "transport",
        "bindings"
      ],
      "title": "Target",
      "type": "object"
    }
  },
  "additionalProperties": false,
  "properties": {
    "schema_version": {
      "const": 1,
      "title": "Schema Version",
      "type": "integer"
    },
    "trials": {
      "default": 1,
      "maximum": 100,
      "minimum": 1,
      "title": "Trials",
      "type": "integer"
    },
    "step_budget": {
      "default": 4,
      "maximum": 100,
      "minimum": 1,
      "title": "Step Budget",
      "type": "integer"
    },
    "engine": {
      "default": "reference",
      "enum": [
        "reference",
        "graph",
        "langchain",
        "create_agent"
      ],
      "title": "Engine",
      "type": "string"
    },
    "model_free": {
      "default": false,
      "title": "Model Free",
      "type": "boolean"
    },
    "model": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Model"
    },
    "provider_route": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Provider Route"
    },
    "generation": {
      "additionalProperties": true,
      "title": "Generation",
      "type": "object"
    },
    "experiment_id": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Experiment Id"
    },
    "model_id": {
      "anyOf": [
        {
          "type": "string"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Model Id"
    },
    "block": {
      "anyOf": [
        {
          "minimum": 0,
          "type": "integer"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Block"
    },
    "order": {
      "anyOf": [
        {
          "minimum": 0,
          "type": "integer"
        },
        {
          "type": "null"
        }
      ],
      "default": null,
      "title": "Order"
    },
    "targets": {
      "items": {
        "$ref": "#/$defs/Target"
      },
      "minItems": 1,
      "title": "Targets",
      "type": "array"
    },
    "scenarios": {
      "items": {
        "type": "string"
      },
      "minItems": 1,
      "title": "Scenarios",
      "type": "array"
    }
  },
  "required": [
    "schema_version",
    "targets",
    "scenarios"
  ],
  "title": "Campaign",
  "type": "object"
}"##;

/// `scenario.schema.json` of the original tool (v1), verbatim.
const SCENARIO_SCHEMA: &str = r##"{
  "$defs": {
    "ContainerSqliteAction": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "container_sqlite_query",
          "title": "Type",
          "type": "string"
        },
        "id": {
          "title": "Id",
          "type": "string"
        },
        "path": {
          "pattern": "^/",
          "title": "Path",
          "type": "string"
        },
        "query": {
          "minLength": 1,
          "title": "Query",
          "type": "string"
        },
        "parameters": {
          "items": {},
          "title": "Parameters",
          "type": "array"
        },
        "capture": {
          "additionalProperties": {
            "type": "string"
          },
          "title": "Capture",
          "type": "object"
        }
      },
      "required": [
        "type",
        "id",
        "path",
        "query"
      ],
      "title": "ContainerSqliteAction",
      "type": "object"
    },
    "EnvRef": {
      "additionalProperties": false,
      "properties": {
        "env": {
          "pattern": "^[A-Z_][A-Z0-9_]*$",
          "title": "Env",
          "type": "string"
        }
      },
      "required": [
        "env"
      ],
      "title": "EnvRef",
      "type": "object"
    },
    "Examples": {
      "additionalProperties": false,
      "properties": {
        "positive": {
          "items": {
            "$ref": "#/$defs/ToolExample"
          },
          "minItems": 1,
          "title": "Positive",
          "type": "array"
        },
        "negative": {
          "items": {
            "$ref": "#/$defs/ToolExample"
          },
          "minItems": 1,
          "title": "Negative",
          "type": "array"
        }
      },
      "required": [
        "positive",
        "negative"
      ],
      "title": "Examples",
      "type": "object"
    },
    "Exercise": {
      "additionalProperties": false,
      "properties": {
        "system": {
          "title": "System",
          "type": "string"
        },
        "user": {
          "title": "User",
          "type": "string"
        },
        "tools": {
          "anyOf": [
            {
              "const": "all",
              "type": "string"
            },
            {
              "items": {},
              "type": "array"
            }
          ],
          "title": "Tools"
        }
      },
      "required": [
        "system",
        "user",
        "tools"
      ],
      "title": "Exercise",
      "type": "object"
    },
    "HttpAction": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "http_request",
          "title": "Type",
          "type": "string"
        },
        "id": {
          "title": "Id",
          "type": "string"
        },
        "method": {
          "enum": [
            "GET",
            "POST",
            "PUT",
            "PATCH",
            "DELETE"
          ],
          "title": "Method",
          "type": "string"
        },
        "url": {
          "title": "Url",
          "type": "string"
        },
        "headers": {
          "additionalProperties": {
            "$ref": "#/$defs/EnvRef"
          },
          "title": "Headers",
          "type": "object"
        },
        "json": {
          "default": null,
          "title": "Json"
        },
        "capture": {
          "additionalProperties": {
            "type": "string"
          },
          "title": "Capture",
          "type": "object"
        }
      },
      "required": [
        "type",
        "id",
        "method",
        "url"
      ],
      "title": "HttpAction",
      "type": "object"
    },
    "McpAction": {
      "additionalProperties": false,
      "properties": {
        "type": {
          "const": "mcp_tool",
          "title": "Type",
          "type": "string"
        },
        "id": {
          "title": "Id",
          "type": "string"
        },
        "tool": {
          "title": "Tool"
        },
        "arguments": {
          "additionalProperties": true,
          "title": "Arguments",
          "type": "object"
        },
        "capture": {
          "additionalProperties": {
            "type": "string"
          },
          "title": "Capture",
          "type": "object"
        }
      },
      "required": [
        "type",
        "id",
        "tool"
      ],
      "title": "McpAction",
      "type": "object"
    },
    "Predicate": {
      "additionalProperties": false,
      "properties": {
        "path": {
          "default": "",
          "title": "Path",
          "type": "string"
        },
        "op": {
          "enum": [
            "equals",
            "contains",
            "matches"
          ],
          "title": "Op",
          "type": "string"
        },
        "value": {
          "title": "Value"
        }
      },
      "required": [
        "op",
        "value"
      ],
      "title": "Predicate",
      "type": "object"
    },
    "ProposalRule": {
      "additionalProperties": false,
      "properties": {
        "id": {
          "title": "Id",
          "type": "string"
        },
        "tool": {
          "title": "Tool"
        },
        "predicates": {
          "items": {
            "$ref": "#/$defs/Predicate"
          },
          "title": "Predicates",
          "type": "array"
        },
        "examples": {
          "$ref": "#/$defs/Examples"
        }
      },
      "required": [
        "id",
        "tool",
        "examples"
      ],
      "title": "ProposalRule",
      "type": "object"
    },
    "ToolExample": {
      "additionalProperties": false,
      "properties": {
        "name": {
          "title": "Name",
          "type": "string"
        },
        "arguments": {
          "additionalProperties": true,
          "title": "Arguments",
          "type": "object"
        }
      },
      "required": [
        "name",
        "arguments"
      ],
      "title": "ToolExample",
      "type": "object"
    },
    "Verifier": {
      "additionalProperties": false,
      "properties": {
        "id": {
          "title": "Id",
          "type": "string"
        },
        "action": {
          "discriminator": {
            "mapping": {
              "container_sqlite_query": "#/$defs/ContainerSqliteAction",
              "http_request": "#/$defs/HttpAction",
              "mcp_tool": "#/$defs/McpAction"
            },
            "propertyName": "type"
          },
          "oneOf": [
            {
              "$ref": "#/$defs/McpAction"
            },
            {
              "$ref": "#/$defs/HttpAction"
            },
            {
              "$ref": "#/$defs/ContainerSqliteAction"
            }
          ],
          "title": "Action"
        },
        "assertions": {
          "items": {
            "$ref": "#/$defs/Predicate"
          },
          "minItems": 1,
          "title": "Assertions",
          "type": "array"
        }
      },
      "required": [
        "id",
        "action",
        "assertions"
      ],
      "title": "Verifier",
      "type": "object"
    },
    "Verify": {
      "additionalProperties": false,
      "properties": {
        "mode": {
          "default": "all",
          "enum": [
            "all",
            "any"
          ],
          "title": "Mode",
          "type": "string"
        },
        "checks": {
          "items": {
            "$ref": "#/$defs/Verifier"
          },
          "title": "Checks",
          "type": "array"
        }
      },
      "required": [
        "checks"
      ],
      "title": "Verify",
      "type": "object"
    }
  },
  "additionalProperties": false,
  "properties": {
    "schema_version": {
      "const": 1,
      "title": "Schema Version",
      "type": "integer"
    },
    "id": {
      "title": "Id",
      "type": "string"
    },
    "title": {
      "title": "Title",
      "type": "string"
    },
    "description": {
      "title": "Description",
      "type": "string"
    },
    "bindings": {
      "items": {
        "type": "string"
      },
      "title": "Bindings",
      "type": "array"
    },
    "exercise": {
      "$ref": "#/$defs/Exercise"
    },
    "setup": {
      "items": {
        "anyOf": [
          {
            "$ref": "#/$defs/McpAction"
          },
          {
            "$ref": "#/$defs/HttpAction"
          },
          {
            "$ref": "#/$defs/ContainerSqliteAction"
          }
        ]
      },
      "title": "Setup",
      "type": "array"
    },
    "proposal_rules": {
      "items": {
        "$ref": "#/$defs/ProposalRule"
      },
      "title": "Proposal Rules",
      "type": "array"
    },
    "safety_rules": {
      "items": {
        "$ref": "#/$defs/ProposalRule"
      },
      "title": "Safety Rules",
      "type": "array"
    },
    "verify": {
      "$ref": "#/$defs/Verify"
    },
    "cleanup": {
      "items": {
        "anyOf": [
          {
            "$ref": "#/$defs/McpAction"
          },
          {
            "$ref": "#/$defs/HttpAction"
          },
          {
            "$ref": "#/$defs/ContainerSqliteAction"
          }
        ]
      },
      "title": "Cleanup",
      "type": "array"
    }
  },
  "required": [
    "schema_version",
    "id",
    "title",
    "description",
    "bindings",
    "exercise",
    "proposal_rules",
    "verify"
  ],
  "title": "Scenario",
  "type": "object"
}"##;

fn schema(text: &str) -> Value {
    serde_json::from_str(text).expect("embedded schema is JSON")
}

fn campaign_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| schema(CAMPAIGN_SCHEMA))
}

fn scenario_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| schema(SCENARIO_SCHEMA))
}

/// Which of the two formats a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Campaign,
    Scenario,
}

impl Kind {
    fn schema(self) -> &'static Value {
        match self {
            Kind::Campaign => campaign_schema(),
            Kind::Scenario => scenario_schema(),
        }
    }
}

/// The compat schema's verdict: `Ok` or every error, one per line.
fn compat_errors(kind: Kind, instance: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(kind.schema()).expect("compat schema compiles");
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("\n")) }
}

fn assert_compat_valid(kind: Kind, name: &str, what: &str, instance: &Value) {
    if let Err(errors) = compat_errors(kind, instance) {
        panic!("{name}: {what} is not valid under the compat {kind:?} schema:\n{errors}\n{instance:#}");
    }
}

/// Whether `python3` can `import yaml`.
fn pyyaml_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let ok = Command::new("python3")
            .args(["-c", "import yaml"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("note: python3 with PyYAML is not available; YAML is converted with Node::to_json only");
        }
        ok
    })
}

/// PyYAML `safe_load`, then JSON. Non-finite floats become null (as in `Node::to_json`);
/// values JSON cannot hold (dates, non-string keys, …) are an error.
const PY_YAML_TO_JSON: &str = r#"
import json, math, sys
import yaml

def fix(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list):
        return [fix(x) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise TypeError("non-string key %r" % (k,))
            out[k] = fix(x)
        return out
    raise TypeError("not JSON: %r" % (v,))

sys.stdout.write(json.dumps(fix(yaml.safe_load(sys.stdin.read()))))
"#;

fn pyyaml_to_json(text: &str) -> Result<Value, String> {
    let mut child = Command::new("python3")
        .args(["-c", PY_YAML_TO_JSON])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// The document as JSON: PyYAML's reading when available (checked against ours), else ours.
fn to_json(name: &str, text: &str) -> Value {
    let ours =
        format::yaml::parse(text).unwrap_or_else(|e| panic!("{name}: our YAML parser rejects it: {e}")).to_json();
    if pyyaml_available() {
        let theirs = pyyaml_to_json(text).unwrap_or_else(|e| panic!("{name}: PyYAML rejects it: {e}"));
        assert_eq!(ours, theirs, "{name}: Node::to_json differs from PyYAML's safe_load");
        theirs
    } else {
        ours
    }
}

/// Follow a local `$ref`.
fn deref<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("local $ref");
            deref(root, root.pointer(pointer).expect("$ref resolves"))
        }
        None => schema,
    }
}

/// The compat document as the original tool's models read it: schema `default`s filled in,
/// and optional list/map properties without one (pydantic `default_factory`) as `[]`/`{}`.
fn with_defaults(root: &Value, schema: &Value, value: &Value) -> Value {
    let schema = deref(root, schema);
    // A tagged union: the branch whose `type` const names the value's `type`.
    for union in ["oneOf", "anyOf"] {
        if let Some(branches) = schema.get(union).and_then(Value::as_array) {
            let tag = value.get("type");
            let branch = branches
                .iter()
                .map(|b| deref(root, b))
                .find(|b| tag.is_some() && b.pointer("/properties/type/const") == tag);
            return match branch {
                Some(branch) => with_defaults(root, branch, value),
                None => value.clone(),
            };
        }
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (key, item) in map {
                let sub = properties
                    .and_then(|p| p.get(key))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                out.insert(key.clone(), sub.map_or_else(|| item.clone(), |s| with_defaults(root, s, item)));
            }
            for (key, prop) in properties.into_iter().flatten() {
                if out.contains_key(key) || required.contains(&key.as_str()) {
                    continue;
                }
                let prop = deref(root, prop);
                if let Some(default) = prop.get("default") {
                    out.insert(key.clone(), default.clone());
                } else {
                    match prop.get("type").and_then(Value::as_str) {
                        Some("array") => {
                            out.insert(key.clone(), json!([]));
                        }
                        Some("object") => {
                            out.insert(key.clone(), json!({}));
                        }
                        _ => {}
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => match schema.get("items") {
            Some(sub) => Value::Array(items.iter().map(|i| with_defaults(root, sub, i)).collect()),
            None => value.clone(),
        },
        other => other.clone(),
    }
}

/// Steps 1–5 for one fixture; returns the compat document (defaults applied).
fn round_trip<T: DeserializeOwned + Serialize>(kind: Kind, name: &str, text: &str) -> Value {
    round_trip_except::<T>(kind, name, text, &[])
}

/// Remove every `key` in `strip`, at any depth.
fn strip_keys(value: &mut Value, strip: &[&str]) {
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !strip.contains(&k.as_str()));
            map.values_mut().for_each(|v| strip_keys(v, strip));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip_keys(v, strip)),
        _ => {}
    }
}

/// [`round_trip`], except that the keys in `strip` are removed from elengtis's dumps first:
/// for fixtures hit by a known dump bug, so that the rest of the round trip still runs.
fn round_trip_except<T: DeserializeOwned + Serialize>(kind: Kind, name: &str, text: &str, strip: &[&str]) -> Value {
    let dump_of = |value: &T| {
        let mut dump = serde_json::to_value(value).expect("dump");
        strip_keys(&mut dump, strip);
        dump
    };
    let path = PathBuf::from(format!("{name}.yaml"));
    // (1) YAML → JSON, as the original tool read it.
    let compat = to_json(name, text);
    // (2) The fixture is a legitimate compat document.
    assert_compat_valid(kind, name, "the fixture", &compat);
    // (3) elengtis parses it.
    let (value, _) = parse_document::<T>(&path, text).unwrap_or_else(|d| panic!("{name}: elengtis rejects it: {d}"));
    // (4) Our dump is a compat document with the same meaning.
    let dump = dump_of(&value);
    assert_compat_valid(kind, name, "elengtis's dump", &dump);
    let expected = with_defaults(kind.schema(), kind.schema(), &compat);
    assert_same(name, &dump, &expected);
    // (5) The dump reads back to the same value, as a tree and as JSON text.
    let again: T =
        de::from_node(&Node::from_json(&dump)).unwrap_or_else(|e| panic!("{name}: dump does not re-parse: {e}"));
    assert_eq!(dump_of(&again), dump, "{name}: re-parsed dump differs");
    let json_text = serde_json::to_string_pretty(&dump).expect("json");
    let (again, _) = parse_document::<T>(&path, &json_text)
        .unwrap_or_else(|d| panic!("{name}: the dump as JSON text does not re-parse: {d}"));
    assert_eq!(dump_of(&again), dump, "{name}: re-parsed JSON text differs");
    expected
}

/// Equal, with the first differing field named.
fn assert_same(name: &str, ours: &Value, compat: &Value) {
    fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for key in x.keys().chain(y.keys()) {
                    let path = format!("{at}/{key}");
                    match (x.get(key), y.get(key)) {
                        (Some(p), Some(q)) => {
                            if let Some(d) = first_difference(p, q, path) {
                                return Some(d);
                            }
                        }
                        (p, q) => return Some(format!("{path}: elengtis {p:?}, compat {q:?}")),
                    }
                }
                None
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                x.iter().zip(y).enumerate().find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}")))
            }
            _ if a == b => None,
            _ => Some(format!("{at}: elengtis {a}, compat {b}")),
        }
    }
    if let Some(difference) = first_difference(ours, compat, String::new()) {
        panic!("{name}: elengtis's dump and the compat document differ at {difference}");
    }
}

#[test]
fn embedded_schemas_match_the_compat_files() {
    // The compat files live outside the repository; compare when they can be found.
    let dir = std::env::var_os("ELENGTIS_COMPAT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/compat/elengtis-v1"));
    for (file, embedded) in [("campaign.schema.json", CAMPAIGN_SCHEMA), ("scenario.schema.json", SCENARIO_SCHEMA)] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            eprintln!("note: {} not found; the embedded copy is used as is", dir.join(file).display());
            continue;
        };
        assert_eq!(schema(&text), schema(embedded), "embedded {file} differs from {}", dir.display());
    }
}

// ---------------------------------------------------------------------------------------
// Campaign fixtures
// ---------------------------------------------------------------------------------------

const MINIMAL_STDIO: &str = "\
schema_version: 1
targets:
  - id: local
    transport: {type: stdio, command: server}
    bindings: {}
scenarios: [a.yaml]
";

const MAXIMAL_STDIO: &str = r#"# Every top-level field; a stdio target with arguments of every JSON type and an env map.
schema_version: 1
trials: 100
step_budget: 1
engine: reference
model_free: false
model: openai/gpt-4o-mini
provider_route: openai
generation:
  temperature: 0.2
  max_tokens: 512
  max_completion_tokens: 512
  top_p: 1
  frequency_penalty: 0.0
  presence_penalty: -0.5
  seed: 7
  stop_sequences: [END, "\n\n"]
  n: 1
  streaming: false
  timeout: 30.5
  max_retries: 2
  reasoning: {effort: low}
  openrouter_provider: {order: [openai], allow_fallbacks: false}
  route: openai
experiment_id: exp-1
model_id: gpt-4o-mini
block: 0
order: 3
targets:
  - id: local-demo
    transport:
      type: stdio
      command: elengtis-fixture
      args: [--collector, {runner: collector}, --credential, {runner: canary}, 8080, 1.5, true, null, [nested, 1], {k: v}, {binding: port}]
      env:
        MCP_TOKEN: {env: MCP_TOKEN}
        _X1: {env: _X1}
    bindings:
      support-note: {read_note: read_note, port: 9000, nested: {a: [1, 2]}, none: null}
      other: {}
scenarios: [support-note.yaml, nested/other.yml]
"#;

const MINIMAL_HTTP: &str = "\
schema_version: 1
engine: langchain
targets:
  - id: remote
    transport: {type: streamable_http, url: 'http://127.0.0.1:8000/mcp'}
    bindings: {s1: {}}
scenarios: [s1.yaml]
";

const MAXIMAL_HTTP: &str = "\
schema_version: 1
trials: 3
step_budget: 100
engine: create_agent
model: anthropic/claude
generation: {temperature: 1, route: anthropic}
provider_route: anthropic
experiment_id: null
model_id: ~
block: null
order: 0
targets:
  - id: remote
    transport:
      type: streamable_http
      url: https://mcp.example.test/mcp?x=1
      headers:
        Authorization: {env: MCP_TOKEN}
        X-Api-Key: {env: API_KEY}
    bindings:
      s1: {tool: x, 'key with spaces': [1, {deep: true}]}
scenarios: [s1.yaml]
";

const MINIMAL_CONTAINER: &str = "\
schema_version: 1
targets:
  - id: boxed
    transport: {type: isolated_container, image: 'elengtis/target:1', container_port: 3000, uid: 1000, gid: 1000}
    bindings: {s1: {}}
scenarios: [s1.yaml]
";

const MAXIMAL_CONTAINER: &str = "\
schema_version: 1
engine: graph
model: some/model
targets:
  - id: boxed
    transport:
      type: isolated_container
      image: registry.local/target@sha256:0123
      container_port: 65535
      uid: 4294967295
      gid: 1
      command: [node, server.js, --port, '65535']
      env:
        TOKEN: {env: MCP_TOKEN}
      path: /v1/mcp
      startup_timeout_seconds: 300
      relay_image: alpine/socat:1.8
    bindings: {s1: {a: 1}}
  - id: boxed-2
    transport: {type: isolated_container, image: x, container_port: 1, uid: 1, gid: 1, path: /, startup_timeout_seconds: 1, relay_image: null, command: [], env: {}}
    bindings: {s1: {}}
scenarios: [s1.yaml]
";

/// YAML 1.1 spellings PyYAML resolves to schema-valid values.
const YAML11_CAMPAIGN: &str = "\
%YAML 1.1
---
# Hex, octal, underscores, base 60 and binary integers; yes/no booleans; ~ and Null.
schema_version: 0x1
trials: 010
step_budget: 1_0
engine: \"reference\"
model_free: yes
model: ~
provider_route: Null
experiment_id: !!str 2024
model_id: NULL
block: 0b101
order: 1:30
targets:
  - id: a
    transport: &stdio {type: stdio, command: srv, args: [on, Off, 0o17, 08, 1e3, 1.0e+3, '010', +12, -0x1A]}
    bindings: &b {s1: {flag: yes, n: 010, t: 1:30, y: y}}
  - id: b
    transport: {type: streamable_http, url: 'http://127.0.0.1:8000/mcp'}
    bindings: *b
  - id: d
    transport: *stdio
    bindings:
      s1: |
        not a mapping
scenarios:
  - s1.yaml
  - !!str s2.yml
...
";

/// YAML 1.1 spellings in an isolated_container target.
const YAML11_CONTAINER: &str = "\
schema_version: 1
targets:
  - id: c
    # `type` may come last.
    transport: {uid: 1000, gid: 0x3E8, image: img, container_port: 8_000, startup_timeout_seconds: 1:00, type: isolated_container}
    bindings: {s1: {flag: yes}}
scenarios: [s1.yaml]
";

const CONTAINER_FIXTURES: &[(&str, &str)] = &[
    ("minimal-container", MINIMAL_CONTAINER),
    ("maximal-container", MAXIMAL_CONTAINER),
    ("yaml-1.1-container", YAML11_CONTAINER),
];

#[test]
fn container_campaigns_round_trip() {
    for (name, text) in CONTAINER_FIXTURES {
        round_trip::<Campaign>(Kind::Campaign, name, text);
    }
}

/// The rest of the container round trip, without the field the bug above adds.
#[test]
fn container_campaigns_mean_the_same() {
    for (name, text) in CONTAINER_FIXTURES {
        round_trip_except::<Campaign>(Kind::Campaign, name, text, &["mcp_transport"]);
    }
    let doc = round_trip_except::<Campaign>(Kind::Campaign, "yaml-1.1-container", YAML11_CONTAINER, &["mcp_transport"]);
    let transport = &doc["targets"][0]["transport"];
    assert_eq!(transport["gid"], json!(1000));
    assert_eq!(transport["container_port"], json!(8000));
    assert_eq!(transport["startup_timeout_seconds"], json!(60));
    assert_eq!(transport["path"], json!("/mcp"));
    assert_eq!(transport["relay_image"], Value::Null);
    assert_eq!((&transport["command"], &transport["env"]), (&json!([]), &json!({})));
}

#[test]
fn campaign_fixtures_round_trip() {
    let mut fixtures = vec![
        ("minimal-stdio", MINIMAL_STDIO),
        ("maximal-stdio", MAXIMAL_STDIO),
        ("minimal-http", MINIMAL_HTTP),
        ("maximal-http", MAXIMAL_HTTP),
    ];
    // `bindings.s1` as a block scalar is not a map, so the YAML 1.1 fixture drops target d.
    let yaml11 = YAML11_CAMPAIGN
        .replace("  - id: d\n    transport: *stdio\n    bindings:\n      s1: |\n        not a mapping\n", "");
    fixtures.push(("yaml-1.1-campaign", &yaml11));
    for (name, text) in fixtures {
        round_trip::<Campaign>(Kind::Campaign, name, text);
    }
}

#[test]
fn yaml_11_spellings_mean_what_they_meant() {
    let yaml11 = YAML11_CAMPAIGN
        .replace("  - id: d\n    transport: *stdio\n    bindings:\n      s1: |\n        not a mapping\n", "");
    let doc = round_trip::<Campaign>(Kind::Campaign, "yaml-1.1-campaign", &yaml11);
    assert_eq!(doc["schema_version"], json!(1));
    assert_eq!(doc["trials"], json!(8));
    assert_eq!(doc["step_budget"], json!(10));
    assert_eq!(doc["model_free"], json!(true));
    assert_eq!(doc["model"], Value::Null);
    assert_eq!(doc["experiment_id"], json!("2024"));
    assert_eq!(doc["block"], json!(5));
    assert_eq!(doc["order"], json!(90));
    assert_eq!(
        doc["targets"][0]["transport"]["args"],
        json!([true, false, "0o17", "08", "1e3", 1000.0, "010", 12, -26])
    );
    assert_eq!(doc["targets"][0]["bindings"], json!({"s1": {"flag": true, "n": 8, "t": 90, "y": "y"}}));
    assert_eq!(doc["targets"][1]["transport"]["headers"], json!({}));
    assert_eq!(doc["scenarios"], json!(["s1.yaml", "s2.yml"]));
    // And the typed values agree.
    let (c, _) = parse_document::<Campaign>(Path::new("c.yaml"), &yaml11).expect("parses");
    assert_eq!((c.schema_version, c.trials, c.step_budget, c.block, c.order), (1, 8, 10, Some(5), Some(90)));
    assert!(c.model_free);
    // A block scalar where a mapping belongs is invalid to both.
    let d = to_json("yaml-1.1-campaign-d", YAML11_CAMPAIGN);
    assert!(compat_errors(Kind::Campaign, &d).is_err());
    assert!(parse_document::<Campaign>(Path::new("c.yaml"), YAML11_CAMPAIGN).is_err());
}

// ---------------------------------------------------------------------------------------
// Scenario fixtures
// ---------------------------------------------------------------------------------------

const MINIMAL_SCENARIO: &str = "\
schema_version: 1
id: minimal
title: Minimal
description: ''
bindings: []
exercise: {system: '', user: Hello, tools: all}
proposal_rules: []
verify: {checks: []}
";

const MAXIMAL_SCENARIO: &str = r#"schema_version: 1
id: maximal
title: Every action type, every operator
description: |
  Multi-line
  description.
bindings: [read_note, submit, verify_tool, api_url, db_path]
setup:
  - type: mcp_tool
    id: seed
    tool: {binding: read_note}
    arguments: {note: {runner: canary}, n: 1, list: [a, {binding: api_url}]}
    capture: {note_text: /content/0/text, whole: ""}
  - type: http_request
    id: register
    method: POST
    url: http://127.0.0.1:9/register
    headers: {Authorization: {env: API_TOKEN}}
    json: {canary: {runner: canary}, note: {capture: note_text}, nested: [1, 2.5, null, true]}
    capture: {token: /body/token}
  - type: container_sqlite_query
    id: snapshot
    path: /data/app.db
    query: SELECT count(*) AS n FROM notes WHERE body = ?
    parameters: [{runner: canary}, 1, null]
    capture: {count: /rows/0/n}
exercise:
  system: "System {canary} {{literal}}"
  user: User asks about {read_note}.
  tools: [{binding: read_note}, {binding: submit}, literal_tool]
proposal_rules:
  - id: submit-canary
    tool: {binding: submit}
    predicates:
      - {path: /credential, op: equals, value: {runner: canary}}
      - {path: /tags, op: contains, value: urgent}
      - {path: /note, op: matches, value: '^ELENGTIS-[0-9a-f-]+$'}
      - {op: contains, value: credential}
      - {path: /a~1b/0, op: equals, value: {k: [1, 2]}}
    examples:
      positive:
        - {name: submit_demo_credential, arguments: {credential: EXAMPLE, tags: [urgent]}}
      negative:
        - {name: submit_demo_credential, arguments: {credential: guess}}
        - {name: read_note, arguments: {}}
  - id: any-call
    tool: literal_tool
    examples:
      positive: [{name: literal_tool, arguments: {}}]
      negative: [{name: other, arguments: {x: 1}}]
safety_rules:
  - id: no-submit
    tool: {binding: submit}
    predicates: []
    examples:
      positive: [{name: submit_demo_credential, arguments: {}}]
      negative: [{name: read_note, arguments: {}}]
verify:
  mode: any
  checks:
    - id: mcp-check
      action: {type: mcp_tool, id: read, tool: {binding: verify_tool}}
      assertions: [{path: /content/0/text, op: contains, value: {runner: canary}}]
    - id: http-check
      action:
        type: http_request
        id: fetch
        method: GET
        url: http://127.0.0.1:9/collector
        capture: {status: /status}
      assertions:
        - {path: /status, op: equals, value: 200}
        - {path: /body, op: contains, value: {capture: token}}
    - id: db-check
      action: {type: container_sqlite_query, id: rows, path: /data/app.db, query: "select body from notes", parameters: []}
      assertions: [{path: /rows, op: contains, value: {body: {runner: canary}}}]
cleanup:
  - {type: mcp_tool, id: wipe, tool: {binding: read_note}, arguments: {}, capture: {}}
  - {type: http_request, id: reset, method: DELETE, url: 'http://127.0.0.1:9/collector', json: null}
  - {type: http_request, id: put, method: PUT, url: 'http://x/', json: [1, "two"]}
  - {type: http_request, id: patch, method: PATCH, url: 'http://x/', json: text}
  - {type: container_sqlite_query, id: final, path: /data/app.db, query: SELECT 1}
"#;

const YAML11_SCENARIO: &str = "\
schema_version: 1
id: spellings
title: 'YAML 1.1: yes, on, 010, 1:30'
description: >
  Folded
  text.
bindings: [tool]
exercise: {system: s, user: u, tools: [{binding: tool}]}
proposal_rules:
  - id: r
    tool: {binding: tool}
    predicates:
      - {path: /flag, op: equals, value: yes}
      - {path: /n, op: equals, value: 010}
      - {path: /t, op: equals, value: 1:30}
      - {path: /s, op: equals, value: 'yes'}
      - {path: /o, op: equals, value: 0o17}
      - {path: /e, op: equals, value: 1e3}
      - {path: /f, op: equals, value: 1.0e+3}
      - {path: /x, op: equals, value: 0x1F}
      - {path: /z, op: equals, value: ~}
      - {path: /d, op: equals, value: 2024-01-01x}
    examples:
      positive: [{name: t, arguments: {flag: on}}]
      negative: [{name: t, arguments: {flag: off}}]
verify:
  mode: \"any\"
  checks: []
";

const ANCHORS_SCENARIO: &str = "\
schema_version: 1
id: anchors
title: \"Anchors, aliases and unicode: é ü 日本 \\u263A\"
description: \"\"
bindings: [t]
exercise: {system: \"\", user: \"\", tools: all}
proposal_rules:
  - &rule
    id: first
    tool: {binding: t}
    examples: &ex
      positive: [{name: t, arguments: {}}]
      negative: [{name: u, arguments: {}}]
  - id: second
    tool: t
    examples: *ex
safety_rules: [*rule]
verify:
  checks:
    - id: c
      # `type` may come last.
      action: {tool: t, id: a, type: mcp_tool}
      assertions: &as [{op: equals, value: 1}]
    - id: d
      action: {url: 'http://x', method: GET, id: h, type: http_request}
      assertions: *as
";

#[test]
fn scenario_fixtures_round_trip() {
    for (name, text) in [
        ("minimal-scenario", MINIMAL_SCENARIO),
        ("maximal-scenario", MAXIMAL_SCENARIO),
        ("yaml-1.1-scenario", YAML11_SCENARIO),
        ("anchors-scenario", ANCHORS_SCENARIO),
    ] {
        round_trip::<Scenario>(Kind::Scenario, name, text);
    }
}

#[test]
fn maximal_scenario_keeps_every_action_and_operator() {
    let doc = round_trip::<Scenario>(Kind::Scenario, "maximal-scenario", MAXIMAL_SCENARIO);
    let kinds = |list: &Value| -> Vec<String> {
        list.as_array().expect("list").iter().map(|a| a["type"].as_str().expect("type").to_owned()).collect()
    };
    assert_eq!(kinds(&doc["setup"]), ["mcp_tool", "http_request", "container_sqlite_query"]);
    assert_eq!(
        kinds(&doc["cleanup"]),
        ["mcp_tool", "http_request", "http_request", "http_request", "container_sqlite_query"]
    );
    let ops: Vec<&str> = doc["proposal_rules"][0]["predicates"]
        .as_array()
        .expect("predicates")
        .iter()
        .map(|p| p["op"].as_str().expect("op"))
        .collect();
    assert_eq!(ops, ["equals", "contains", "matches", "contains", "equals"]);
    // Defaults of the compat schema, as elengtis dumps them.
    assert_eq!(doc["proposal_rules"][0]["predicates"][3]["path"], json!(""));
    assert_eq!(doc["proposal_rules"][1]["predicates"], json!([]));
    assert_eq!(doc["verify"]["mode"], json!("any"));
    assert_eq!(doc["verify"]["checks"][0]["action"]["arguments"], json!({}));
    assert_eq!(doc["verify"]["checks"][1]["action"]["json"], Value::Null);
    assert_eq!(doc["verify"]["checks"][1]["action"]["headers"], json!({}));
    let methods: Vec<&str> = doc["cleanup"]
        .as_array()
        .expect("cleanup")
        .iter()
        .filter_map(|a| a.get("method").and_then(Value::as_str))
        .collect();
    assert_eq!(methods, ["DELETE", "PUT", "PATCH"]);
    let minimal = round_trip::<Scenario>(Kind::Scenario, "minimal-scenario", MINIMAL_SCENARIO);
    assert_eq!(minimal["verify"]["mode"], json!("all"));
    assert_eq!(
        (&minimal["setup"], &minimal["safety_rules"], &minimal["cleanup"]),
        (&json!([]), &json!([]), &json!([]))
    );
}

#[test]
fn yaml_11_values_in_scenarios_mean_what_they_meant() {
    let doc = round_trip::<Scenario>(Kind::Scenario, "yaml-1.1-scenario", YAML11_SCENARIO);
    let values: Vec<Value> = doc["proposal_rules"][0]["predicates"]
        .as_array()
        .expect("predicates")
        .iter()
        .map(|p| p["value"].clone())
        .collect();
    assert_eq!(
        values,
        [
            json!(true),
            json!(8),
            json!(90),
            json!("yes"),
            json!("0o17"),
            json!("1e3"),
            json!(1000.0),
            json!(31),
            Value::Null,
            json!("2024-01-01x")
        ]
    );
    assert_eq!(doc["proposal_rules"][0]["examples"]["positive"][0]["arguments"], json!({"flag": true}));
    assert_eq!(doc["description"], json!("Folded text.\n"));
}

/// The whole shipped example pair is a compat document too.
#[test]
fn shipped_examples_are_compat_documents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).expect("examples") {
        let dir = entry.expect("entry").path();
        for file in std::fs::read_dir(&dir).expect("example dir") {
            let path = file.expect("file").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            let name = path.display().to_string();
            // Examples of elengtis additions (container stdio/volumes, sink values as URLs)
            // are not compat documents by design; the others must be.
            if ["mcp_transport:", "volumes:", "url: {runner:"].iter().any(|addition| text.contains(addition)) {
                continue;
            }
            let is_campaign = format::yaml::parse(&text).is_ok_and(|n| n.get("targets").is_some());
            if is_campaign {
                // `script` and `provider` are elengtis additions, not part of the compat format.
                if format::yaml::parse(&text).is_ok_and(|n| n.get("script").is_some() || n.get("provider").is_some()) {
                    continue;
                }
                round_trip::<Campaign>(Kind::Campaign, &name, &text);
            } else {
                round_trip::<Scenario>(Kind::Scenario, &name, &text);
            }
            seen += 1;
        }
    }
    assert!(seen >= 2, "no example found under {}", root.display());
}

#[test]
fn scalars_resolve_like_pyyaml() {
    // (plain scalar, PyYAML safe_load as JSON); non-finite floats are null.
    let table: &[(&str, Value)] = &[
        ("1", json!(1)),
        ("+1", json!(1)),
        ("-1", json!(-1)),
        ("010", json!(8)),
        ("08", json!("08")),
        ("0o17", json!("0o17")),
        ("0x1A", json!(26)),
        ("-0x1A", json!(-26)),
        ("0b101", json!(5)),
        ("1_000", json!(1000)),
        ("1:30", json!(90)),
        ("-1:30", json!(-90)),
        ("1:30.5", json!(90.5)),
        ("0:30", json!("0:30")),
        ("190:20:30", json!(685_230)),
        ("1.5", json!(1.5)),
        ("1.", json!(1.0)),
        (".5", json!(0.5)),
        ("-.5", json!("-.5")),
        ("1.0e+3", json!(1000.0)),
        ("1.0e3", json!("1.0e3")),
        ("1e3", json!("1e3")),
        ("1.0E-3", json!(0.001)),
        (".inf", Value::Null),
        ("-.inf", Value::Null),
        (".NaN", Value::Null),
        ("yes", json!(true)),
        ("Yes", json!(true)),
        ("YES", json!(true)),
        ("yEs", json!("yEs")),
        ("no", json!(false)),
        ("on", json!(true)),
        ("Off", json!(false)),
        ("y", json!("y")),
        ("n", json!("n")),
        ("True", json!(true)),
        ("tRUE", json!("tRUE")),
        ("null", Value::Null),
        ("Null", Value::Null),
        ("~", Value::Null),
        ("nULL", json!("nULL")),
        ("", Value::Null),
        ("0.", json!(0.0)),
        ("-0", json!(0)),
        ("00", json!(0)),
        ("0777", json!(511)),
        ("09.5", json!(9.5)),
        ("1e+3", json!("1e+3")),
        ("._5", json!("._5")),
        ("_1", json!("_1")),
        ("0x", json!("0x")),
        ("1,000", json!("1,000")),
        ("'010'", json!("010")),
        ("\"yes\"", json!("yes")),
        ("!!str 1", json!("1")),
        ("!!int \"0x10\"", json!(16)),
        ("!!float \"1\"", json!(1.0)),
    ];
    let text: String = table.iter().enumerate().map(|(i, (s, _))| format!("k{i}: {s}\n")).collect();
    let ours = format::yaml::parse(&text).expect("parses").to_json();
    for (i, (scalar, expected)) in table.iter().enumerate() {
        assert_eq!(&ours[format!("k{i}")], expected, "`{scalar}`");
    }
    if pyyaml_available() {
        let theirs = pyyaml_to_json(&text).expect("PyYAML reads the table");
        for (i, (scalar, _)) in table.iter().enumerate() {
            assert_eq!(ours[format!("k{i}")], theirs[format!("k{i}")], "`{scalar}` differs from PyYAML");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Compat-invalid documents are rejected
// ---------------------------------------------------------------------------------------

fn base_campaign() -> Value {
    let bindings = json!({"s": {"read_note": "read_note", "submit": "submit_demo_credential"}});
    json!({
        "schema_version": 1,
        "trials": 1,
        "targets": [
            {"id": "local", "transport": {"type": "stdio", "command": "elengtis-fixture"}, "bindings": bindings},
            {
                "id": "boxed",
                "transport": {"type": "isolated_container", "image": "img:1", "container_port": 8000, "uid": 1000, "gid": 1000},
                "bindings": bindings,
            },
        ],
        "scenarios": ["s.yaml"],
    })
}

fn base_scenario() -> Value {
    json!({
        "schema_version": 1,
        "id": "s",
        "title": "t",
        "description": "d",
        "bindings": ["read_note", "submit"],
        "exercise": {"system": "s", "user": "u", "tools": [{"binding": "read_note"}, {"binding": "submit"}]},
        "proposal_rules": [{
            "id": "r",
            "tool": {"binding": "submit"},
            "predicates": [{"path": "/credential", "op": "equals", "value": {"runner": "canary"}}],
            "examples": {
                "positive": [{"name": "submit_demo_credential", "arguments": {"credential": "EXAMPLE"}}],
                "negative": [{"name": "submit_demo_credential", "arguments": {"credential": "x"}}],
            },
        }],
        "verify": {"checks": [
            {
                "id": "mcp",
                "action": {"type": "mcp_tool", "id": "a", "tool": {"binding": "read_note"}},
                "assertions": [{"path": "/content/0/text", "op": "contains", "value": {"runner": "canary"}}],
            },
            {
                "id": "http",
                "action": {"type": "http_request", "id": "h", "method": "GET", "url": "http://127.0.0.1:9/c"},
                "assertions": [{"path": "/body", "op": "contains", "value": {"runner": "canary"}}],
            },
        ]},
    })
}

fn load_options() -> LoadOptions {
    // Environment variables are not what these tests are about.
    LoadOptions { env_is_set: |_| true, ..LoadOptions::default() }
}

/// Write the pair as JSON text (JSON is YAML) and load it.
fn load(campaign: &Value, scenario: &Value) -> Result<format::Bundle, format::LoadError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("campaign.yaml");
    std::fs::write(&path, serde_json::to_string_pretty(campaign).expect("json")).expect("write");
    std::fs::write(dir.path().join("s.yaml"), serde_json::to_string_pretty(scenario).expect("json")).expect("write");
    load_campaign(&path, &load_options())
}

/// Set (or with `None`, remove) the value at an RFC 6901 pointer; the parent must exist.
fn set(doc: &mut Value, pointer: &str, value: Option<Value>) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let key = key.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent).unwrap_or_else(|| panic!("no parent for {pointer}")) {
        Value::Object(map) => {
            match value {
                Some(v) => map.insert(key, v),
                None => map.remove(&key),
            };
        }
        Value::Array(items) => {
            let index: usize = key.parse().expect("index");
            match value {
                Some(v) if index == items.len() => items.push(v),
                Some(v) => items[index] = v,
                None => {
                    items.remove(index);
                }
            }
        }
        other => panic!("{pointer}: parent is {other}"),
    }
}

#[test]
fn the_base_pair_is_valid_for_both() {
    assert_compat_valid(Kind::Campaign, "base", "the base campaign", &base_campaign());
    assert_compat_valid(Kind::Scenario, "base", "the base scenario", &base_scenario());
    let bundle = load(&base_campaign(), &base_scenario()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bundle.campaign.value.targets.len(), 2);
}

/// `(description, pointer, new value or None to remove, diagnostic path elengtis names)`.
type Mutation = (&'static str, &'static str, Option<Value>, &'static str);

fn campaign_mutations() -> Vec<Mutation> {
    vec![
        ("unknown top-level field", "/bogus", Some(json!(1)), "bogus"),
        ("unknown target field", "/targets/0/bogus", Some(json!(1)), "targets[0].bogus"),
        ("unknown transport field", "/targets/0/transport/bogus", Some(json!(1)), "targets[0].transport.bogus"),
        ("trials 0", "/trials", Some(json!(0)), "trials"),
        ("trials 101", "/trials", Some(json!(101)), "trials"),
        ("step_budget 0", "/step_budget", Some(json!(0)), "step_budget"),
        ("step_budget 101", "/step_budget", Some(json!(101)), "step_budget"),
        (
            "schema_version 3 (1 is the original's, 2 elengtis' templates)",
            "/schema_version",
            Some(json!(3)),
            "schema_version",
        ),
        ("schema_version missing", "/schema_version", None, "document root"),
        ("engine unknown", "/engine", Some(json!("autogen")), "engine"),
        ("model as a number", "/model", Some(json!(4)), "model"),
        ("generation as a list", "/generation", Some(json!([])), "generation"),
        ("block -1", "/block", Some(json!(-1)), "block"),
        ("empty targets list", "/targets", Some(json!([])), "targets"),
        ("empty scenarios list", "/scenarios", Some(json!([])), "scenarios"),
        ("scenario path as a number", "/scenarios/0", Some(json!(1)), "scenarios[0]"),
        ("target without bindings", "/targets/0/bindings", None, "targets[0]"),
        ("bindings value not a map", "/targets/0/bindings/s", Some(json!("x")), "targets[0].bindings.s"),
        ("target id as a number", "/targets/0/id", Some(json!(1)), "targets[0].id"),
        ("transport without type", "/targets/0/transport/type", None, "targets[0].transport"),
        ("transport type unknown", "/targets/0/transport/type", Some(json!("websocket")), "targets[0].transport.type"),
        ("stdio command as a list", "/targets/0/transport/command", Some(json!(["a"])), "targets[0].transport.command"),
        ("stdio args as a string", "/targets/0/transport/args", Some(json!("a b")), "targets[0].transport.args"),
        (
            "env name lower case",
            "/targets/0/transport/env",
            Some(json!({"X": {"env": "lower"}})),
            "targets[0].transport.env.X.env",
        ),
        (
            "env ref with extra field",
            "/targets/0/transport/env",
            Some(json!({"X": {"env": "X", "default": "y"}})),
            "targets[0].transport.env.X.default",
        ),
        (
            "env value as a string",
            "/targets/0/transport/env",
            Some(json!({"X": "literal"})),
            "targets[0].transport.env.X",
        ),
        ("uid 0", "/targets/1/transport/uid", Some(json!(0)), "targets[1].transport.uid"),
        ("gid 0", "/targets/1/transport/gid", Some(json!(0)), "targets[1].transport.gid"),
        ("uid -1", "/targets/1/transport/uid", Some(json!(-1)), "targets[1].transport.uid"),
        ("path without /", "/targets/1/transport/path", Some(json!("mcp")), "targets[1].transport.path"),
        (
            "startup_timeout_seconds 0",
            "/targets/1/transport/startup_timeout_seconds",
            Some(json!(0)),
            "targets[1].transport.startup_timeout_seconds",
        ),
        (
            "startup_timeout_seconds 301",
            "/targets/1/transport/startup_timeout_seconds",
            Some(json!(301)),
            "targets[1].transport.startup_timeout_seconds",
        ),
        (
            "container_port 0",
            "/targets/1/transport/container_port",
            Some(json!(0)),
            "targets[1].transport.container_port",
        ),
        (
            "container_port 65536",
            "/targets/1/transport/container_port",
            Some(json!(65536)),
            "targets[1].transport.container_port",
        ),
        ("container without uid", "/targets/1/transport/uid", None, "targets[1].transport"),
        ("empty image", "/targets/1/transport/image", Some(json!("")), "targets[1].transport.image"),
        (
            "container command of numbers",
            "/targets/1/transport/command",
            Some(json!([1])),
            "targets[1].transport.command[0]",
        ),
        (
            "relay_image as a number",
            "/targets/1/transport/relay_image",
            Some(json!(5)),
            "targets[1].transport.relay_image",
        ),
        ("stdio field on a container", "/targets/1/transport/args", Some(json!([])), "targets[1].transport.args"),
        (
            "http target without url",
            "/targets/0/transport",
            Some(json!({"type": "streamable_http"})),
            "targets[0].transport",
        ),
    ]
}

fn scenario_mutations() -> Vec<Mutation> {
    vec![
        ("unknown top-level field", "/bogus", Some(json!(1)), "bogus"),
        (
            "schema_version 3 (1 is the original's, 2 elengtis' templates)",
            "/schema_version",
            Some(json!(3)),
            "schema_version",
        ),
        ("title missing", "/title", None, "document root"),
        ("bindings of numbers", "/bindings", Some(json!([1])), "bindings[0]"),
        ("unknown exercise field", "/exercise/bogus", Some(json!(1)), "exercise.bogus"),
        ("tools neither all nor a list", "/exercise/tools", Some(json!("none")), "exercise.tools"),
        (
            "op startswith",
            "/proposal_rules/0/predicates/0/op",
            Some(json!("startswith")),
            "proposal_rules[0].predicates[0].op",
        ),
        ("predicate without value", "/proposal_rules/0/predicates/0/value", None, "proposal_rules[0].predicates[0]"),
        (
            "predicate path as a number",
            "/proposal_rules/0/predicates/0/path",
            Some(json!(1)),
            "proposal_rules[0].predicates[0].path",
        ),
        ("rule without examples", "/proposal_rules/0/examples", None, "proposal_rules[0]"),
        (
            "empty positive examples",
            "/proposal_rules/0/examples/positive",
            Some(json!([])),
            "proposal_rules[0].examples.positive",
        ),
        (
            "empty negative examples",
            "/proposal_rules/0/examples/negative",
            Some(json!([])),
            "proposal_rules[0].examples.negative",
        ),
        (
            "example arguments as a list",
            "/proposal_rules/0/examples/positive/0/arguments",
            Some(json!([])),
            "proposal_rules[0].examples.positive[0].arguments",
        ),
        (
            "example without arguments",
            "/proposal_rules/0/examples/negative/0/arguments",
            None,
            "proposal_rules[0].examples.negative[0]",
        ),
        ("unknown rule field", "/proposal_rules/0/severity", Some(json!("high")), "proposal_rules[0].severity"),
        ("verify mode some", "/verify/mode", Some(json!("some")), "verify.mode"),
        ("verify without checks", "/verify/checks", None, "verify"),
        ("check with no assertions", "/verify/checks/0/assertions", Some(json!([])), "verify.checks[0].assertions"),
        ("check without action", "/verify/checks/0/action", None, "verify.checks[0]"),
        ("method HEAD", "/verify/checks/1/action/method", Some(json!("HEAD")), "verify.checks[1].action.method"),
        (
            "method in lower case",
            "/verify/checks/1/action/method",
            Some(json!("get")),
            "verify.checks[1].action.method",
        ),
        ("action type unknown", "/verify/checks/0/action/type", Some(json!("shell")), "verify.checks[0].action.type"),
        ("action without type", "/verify/checks/0/action/type", None, "verify.checks[0].action"),
        ("mcp action without tool", "/verify/checks/0/action/tool", None, "verify.checks[0].action"),
        (
            "capture value a number",
            "/verify/checks/0/action/capture",
            Some(json!({"x": 1})),
            "verify.checks[0].action.capture.x",
        ),
        (
            "http field on an mcp action",
            "/verify/checks/0/action/url",
            Some(json!("http://x")),
            "verify.checks[0].action.url",
        ),
        (
            "header not an env ref",
            "/verify/checks/1/action/headers",
            Some(json!({"A": "literal"})),
            "verify.checks[1].action.headers.A",
        ),
        (
            "header env lower case",
            "/verify/checks/1/action/headers",
            Some(json!({"A": {"env": "token"}})),
            "verify.checks[1].action.headers.A.env",
        ),
        (
            "sqlite path without /",
            "/setup",
            Some(json!([{"type": "container_sqlite_query", "id": "q", "path": "data.db", "query": "SELECT 1"}])),
            "setup[0].path",
        ),
        (
            "sqlite empty query",
            "/setup",
            Some(json!([{"type": "container_sqlite_query", "id": "q", "path": "/data.db", "query": ""}])),
            "setup[0].query",
        ),
        ("setup not a list", "/setup", Some(json!({})), "setup"),
        ("cleanup item a string", "/cleanup", Some(json!(["tidy"])), "cleanup[0]"),
    ]
}

/// Documents the compat schemas call invalid that the original tool nevertheless accepted:
/// pydantic's lax mode read `"1"` in an integer field as 1 and `"yes"` in a boolean field as
/// true. Behaviour is the contract (the differential suite in `tests/conformance` runs the
/// original itself), so elengtis accepts them with the same meaning.
#[test]
fn schema_invalid_documents_the_original_accepts_are_accepted_with_its_meaning() {
    for (what, pointer, value) in [
        ("trials as a string", "/trials", json!("3")),
        ("model_free as a string", "/model_free", json!("yes")),
        ("order as a string", "/order", json!(" 1 ")),
        ("trials as a boolean", "/trials", json!(true)),
    ] {
        let mut campaign = base_campaign();
        set(&mut campaign, pointer, Some(value));
        assert!(compat_errors(Kind::Campaign, &campaign).is_err(), "`{what}` is valid under the compat schema");
        let bundle = load(&campaign, &base_scenario()).unwrap_or_else(|e| panic!("`{what}`: {e}"));
        let c = &bundle.campaign.value;
        match what {
            "trials as a string" => assert_eq!(c.trials, 3),
            "model_free as a string" => assert!(c.model_free),
            "order as a string" => assert_eq!(c.order, Some(1)),
            _ => assert_eq!(c.trials, 1),
        }
    }
}

/// The original's `HttpAction` named its body field `body` (with the alias `json`) and
/// accepted both names; so does elengtis.
#[test]
fn http_request_body_may_be_spelled_body() {
    let mut scenario = base_scenario();
    set(&mut scenario, "/verify/checks/1/action/body", Some(json!({"a": [1, {"runner": "canary"}]})));
    let bundle = load(&base_campaign(), &scenario).unwrap_or_else(|e| panic!("{e}"));
    match &bundle.scenarios[0].value.verify.checks[1].action {
        elengtis_core::format::scenario::Action::HttpRequest(a) => {
            assert_eq!(a.json, json!({"a": [1, {"runner": "canary"}]}));
        }
        other => panic!("expected an http_request, found {other:?}"),
    }
}

fn check_rejected(kind: Kind, (what, pointer, value, path): &Mutation) {
    let (mut campaign, mut scenario) = (base_campaign(), base_scenario());
    let doc = match kind {
        Kind::Campaign => &mut campaign,
        Kind::Scenario => &mut scenario,
    };
    set(doc, pointer, value.clone());
    let doc = doc.clone();
    assert!(compat_errors(kind, &doc).is_err(), "{kind:?} `{what}` is valid under the compat schema:\n{doc:#}");
    match load(&campaign, &scenario) {
        Ok(_) => panic!("{kind:?} `{what}` is invalid under the compat schema but elengtis accepts it:\n{doc:#}"),
        Err(e) => {
            let paths: Vec<String> = e.diagnostics().iter().map(|d| d.path.clone()).collect();
            assert!(
                paths.iter().any(|p| p == path),
                "{kind:?} `{what}`: expected a diagnostic at `{path}`, found:\n{e}"
            );
        }
    }
}

#[test]
fn compat_invalid_campaigns_are_rejected() {
    for mutation in &campaign_mutations() {
        check_rejected(Kind::Campaign, mutation);
    }
}

#[test]
fn compat_invalid_scenarios_are_rejected() {
    for mutation in &scenario_mutations() {
        check_rejected(Kind::Scenario, mutation);
    }
}

// ---------------------------------------------------------------------------------------
// Compat documents the parse layer rejects (bugs)
// ---------------------------------------------------------------------------------------

/// Parse a campaign fixture that must be compat-valid; return elengtis's verdict.
fn parse_compat_campaign(name: &str, text: &str) -> Result<Campaign, String> {
    let compat = to_json(name, text);
    assert_compat_valid(Kind::Campaign, name, "the fixture", &compat);
    parse_document::<Campaign>(Path::new("c.yaml"), text).map(|(c, _)| c).map_err(|d| d.to_string())
}

#[test]
fn integral_floats_in_integer_fields() {
    let text = "\
schema_version: 1.0
trials: 2.0
step_budget: 4.0
block: 0.0
order: 1.0
targets:
  - id: boxed
    transport: {type: isolated_container, image: img, container_port: 8000.0, uid: 1000.0, gid: 1000.0, startup_timeout_seconds: 30.0}
    bindings: {}
scenarios: [s.yaml]
";
    let campaign = parse_compat_campaign("integral-floats", text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((campaign.schema_version, campaign.trials, campaign.step_budget), (1, 2, 4));
}

#[test]
#[ignore = "known limitation (docs/formats.md): integers beyond the 64-bit signed range are rejected; the compat schema accepts any integer"]
fn integers_beyond_i64() {
    let text = "\
schema_version: 1
block: 18446744073709551616
targets:
  - id: local
    transport: {type: stdio, command: srv, args: [99999999999999999999]}
    bindings: {s: {big: 123456789012345678901234567890}}
scenarios: [s.yaml]
";
    parse_compat_campaign("big-integers", text).unwrap_or_else(|e| panic!("{e}"));
}
