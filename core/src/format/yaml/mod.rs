//! YAML text → a tree of [`Node`]s that remember where they came from.
//!
//! Campaign and scenario files are untrusted YAML written for the original Python tool,
//! which read them with PyYAML's `yaml.safe_load`. This module turns such a file into a
//! [`Node`] tree in which every node carries the [`Mark`] (1-based line and column) where it
//! starts, so that later stages ([`super::de`] and the validators) can point at the exact
//! place of a problem.
//!
//! # What is accepted
//!
//! * Exactly one document. An empty file (or one with only comments, or only `---`) is an
//!   error, and so is a second document.
//! * Plain (unquoted) scalars are resolved like PyYAML's YAML 1.1 resolver, so a file means
//!   the same thing here as it did to the Python tool:
//!   * null: empty, `~`, `null`, `Null`, `NULL`;
//!   * booleans: `yes`/`no`, `true`/`false`, `on`/`off` in lower, Capitalised or UPPER case
//!     (but not `y`/`n`);
//!   * integers: decimal with optional sign and `_` separators, `0x…` hex, `0b…` binary,
//!     a leading `0` means octal (`010` is 8, `08` is the string `"08"`), and `0o17` is a
//!     *string*; base-60 numbers are resolved as PyYAML does (`1:30` is 90, `1:30.5` is
//!     90.5; `0:30` and `1:60` are strings);
//!   * floats: only PyYAML's float forms, which need a `.` (`1.5`, `1.`, `.5`, `1.0e+3`);
//!     an exponent needs a sign (`1.0e3` and `1e3` are strings); `.inf`, `-.inf`, `+.inf`,
//!     `.nan` (in `.Inf`/`.INF`/`.NaN`/`.NAN` spellings too);
//!   * everything else is a string. Deviations from PyYAML: timestamps such as
//!     `2024-01-01` stay strings (PyYAML makes `date` objects), and a plain `=` is the
//!     string `"="` (PyYAML fails on it).
//! * Quoted and block (`|`, `>`) scalars are always strings.
//! * Explicit tags `!!str`, `!!int`, `!!float`, `!!bool`, `!!null` (and `!!seq`/`!!map` on
//!   the matching collection) are honoured with PyYAML's conversions (`!!int "0x10"` is 16,
//!   `!!float 1e3` is 1000.0, `!!bool yEs` is true). Deviations: `!!null` accepts only the
//!   null spellings (PyYAML ignores the text), and `!!int` rejects spellings that only
//!   Python's `int()` tolerates (`--5`, `0o17`). Any other tag, including the non-specific
//!   `!`, is an error naming it.
//! * Integers that do not fit in an `i64` are an error, never a silent float.
//! * Mapping keys must resolve to strings (`1:` or `yes:` is an error; quote the key), and
//!   duplicate keys are an error at the second occurrence.
//! * Anchors and aliases are expanded by copying. An expanded alias keeps the [`Mark`] of
//!   the alias at its top and the marks of the anchored text below it. Expansion is
//!   limited to [`MAX_NODES`] nodes, [`MAX_DEPTH`] levels of nesting and
//!   [`MAX_ALIAS_TEXT`] bytes of copied text, so alias bombs are rejected. An alias to an
//!   anchor whose node is not finished yet (a recursive alias) is an error.
//! * Merge keys (`<<`) are not supported (a plain `<<` anywhere is an error).
//!
//! # Layout
//!
//! This module holds the public API: [`parse`], the tree ([`Node`], [`NodeKind`], [`Mark`])
//! and its conversions to and from JSON, [`YamlError`] and the expansion limits. Below it,
//! the `parse` module turns the parser's event stream into the tree (documents,
//! collections, keys, anchors and aliases, the limits), and the `scalar` module resolves
//! scalars and explicit tags with PyYAML's YAML 1.1 rules.

mod parse;
mod scalar;

use std::fmt;

use saphyr_parser::{Marker, ScanError};
use serde_json::{Map, Number, Value};

use super::path::{Path, Seg};

/// Largest number of nodes the expanded tree may have.
pub const MAX_NODES: usize = 1_000_000;
/// Deepest nesting of sequences and mappings the expanded tree may have.
pub const MAX_DEPTH: usize = 256;
/// Most bytes of scalar text that alias expansion may copy.
pub const MAX_ALIAS_TEXT: usize = 64 * 1024 * 1024;

/// A position in a YAML file; line and column are 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mark {
    /// Line, starting at 1 (0 when unknown).
    pub line: usize,
    /// Column in characters, starting at 1 (0 when unknown).
    pub column: usize,
}

impl Mark {
    /// The mark of a node that does not come from a file.
    pub const UNKNOWN: Mark = Mark { line: 0, column: 0 };

    /// A mark at the given 1-based line and column.
    pub fn new(line: usize, column: usize) -> Self {
        Mark { line, column }
    }

    /// Whether the mark points into a file.
    pub fn is_known(self) -> bool {
        self != Mark::UNKNOWN
    }

    fn from_marker(marker: &Marker) -> Self {
        Mark { line: marker.line(), column: marker.col().saturating_add(1) }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            write!(f, "line {} column {}", self.line, self.column)
        } else {
            f.write_str("unknown position")
        }
    }
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// `null`, `~` or nothing.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number (may be infinite or NaN).
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order. Keys parsed from a file are always strings and unique.
    Map(Vec<(Node, Node)>),
}

/// A YAML value with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub kind: NodeKind,
    /// Where the value starts ([`Mark::UNKNOWN`] when not from a file).
    pub mark: Mark,
    /// The text as written, for a plain (unquoted, untagged) scalar that resolved to
    /// a boolean or a number (`14:30` that became 870, `yes` that became true);
    /// `None` for everything else. Lets a check say what an unquoted value was before YAML
    /// 1.1 resolved it (see [`crate::toolargs`]).
    pub plain: Option<Box<str>>,
}

/// A YAML file that could not be read into a [`Node`] tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{mark}: {message}")]
pub struct YamlError {
    /// Where the problem is.
    pub mark: Mark,
    /// What is wrong and what was expected.
    pub message: String,
}

impl YamlError {
    fn new(mark: Mark, message: impl Into<String>) -> Self {
        YamlError { mark, message: message.into() }
    }
}

impl From<ScanError> for YamlError {
    fn from(error: ScanError) -> Self {
        YamlError::new(Mark::from_marker(error.marker()), error.info())
    }
}

impl Node {
    /// A node with the given value and mark.
    pub fn new(kind: NodeKind, mark: Mark) -> Self {
        Node { kind, mark, plain: None }
    }

    /// The string value, if this node is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A short description of the value's type, for messages (`"string"`, `"mapping"`, …).
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "boolean",
            NodeKind::Int(_) => "integer",
            NodeKind::Float(_) => "float",
            NodeKind::Str(_) => "string",
            NodeKind::Seq(_) => "sequence",
            NodeKind::Map(_) => "mapping",
        }
    }

    /// The value of `key` if this node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The node at `path` below this one, if there is one.
    pub fn find(&self, path: &Path) -> Option<&Node> {
        let mut node = self;
        for seg in &path.0 {
            node = match (seg, &node.kind) {
                (Seg::Key(key), NodeKind::Map(_)) => node.get(key)?,
                (Seg::Index(index), NodeKind::Seq(items)) => items.get(*index)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// The value as JSON, keeping mapping order.
    ///
    /// Infinite and NaN floats become `null` (JSON has no such numbers), like
    /// `serde_json::Value` does when deserialized from such a float. Non-string keys (only
    /// possible in hand-built trees) are written as their JSON text.
    pub fn to_json(&self) -> Value {
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => Value::Number(Number::from(*i)),
            NodeKind::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            NodeKind::Str(s) => Value::String(s.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(entries) => {
                let mut map = Map::with_capacity(entries.len());
                for (key, value) in entries {
                    let key = match &key.kind {
                        NodeKind::Str(s) => s.clone(),
                        _ => key.to_json().to_string(),
                    };
                    map.insert(key, value.to_json());
                }
                Value::Object(map)
            }
        }
    }

    /// A tree with the value of `value`; every mark is [`Mark::UNKNOWN`].
    ///
    /// Integers that fit in an `i64` become [`NodeKind::Int`]; other numbers become
    /// [`NodeKind::Float`].
    pub fn from_json(value: &Value) -> Node {
        let kind = match value {
            Value::Null => NodeKind::Null,
            Value::Bool(b) => NodeKind::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => NodeKind::Int(i),
                None => n.as_f64().map_or(NodeKind::Null, NodeKind::Float),
            },
            Value::String(s) => NodeKind::Str(s.clone()),
            Value::Array(items) => NodeKind::Seq(items.iter().map(Node::from_json).collect()),
            Value::Object(map) => NodeKind::Map(
                map.iter()
                    .map(|(k, v)| (Node::new(NodeKind::Str(k.clone()), Mark::UNKNOWN), Node::from_json(v)))
                    .collect(),
            ),
        };
        Node::new(kind, Mark::UNKNOWN)
    }
}

/// Reads one YAML document.
///
/// # Errors
///
/// A [`YamlError`] naming the line and column of the first problem: bad syntax, an empty
/// file, a second document, an unsupported tag or merge key, an out-of-range integer, a
/// non-string or duplicate key, or an alias expansion beyond the limits.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    parse::document(text)
}

/// Helpers for the tests of this module and the modules below it.
#[cfg(test)]
mod testing {
    use super::{Node, YamlError, parse};

    /// The tree of `text`, which must parse.
    pub(super) fn ok(text: &str) -> Node {
        match parse(text) {
            Ok(node) => node,
            Err(e) => panic!("{text:?} failed: {e}"),
        }
    }

    /// The error for `text`, which must not parse.
    pub(super) fn err(text: &str) -> YamlError {
        match parse(text) {
            Ok(node) => panic!("{text:?} parsed as {:?}", node.to_json()),
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::ok;
    use super::*;
    use serde_json::json;

    #[test]
    fn to_json_round_trip() {
        let text = "\
schema_version: 1
name: 'demo'
ratio: 0.5
enabled: yes
nothing: ~
targets:
  - id: a
    tags: [x, y]
    nested: {deep: {deeper: [1, {k: v}]}}
  - id: b
zeta: last
alpha: first
";
        let node = ok(text);
        let expected = json!({
            "schema_version": 1,
            "name": "demo",
            "ratio": 0.5,
            "enabled": true,
            "nothing": null,
            "targets": [
                {"id": "a", "tags": ["x", "y"], "nested": {"deep": {"deeper": [1, {"k": "v"}]}}},
                {"id": "b"}
            ],
            "zeta": "last",
            "alpha": "first",
        });
        let value = node.to_json();
        assert_eq!(value, expected);
        // Key order is the document's.
        let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["schema_version", "name", "ratio", "enabled", "nothing", "targets", "zeta", "alpha"]);
        // JSON → Node → JSON is the identity, and the marks are unknown.
        let back = Node::from_json(&value);
        assert_eq!(back.mark, Mark::UNKNOWN);
        assert_eq!(back.get("targets").map(|n| n.mark), Some(Mark::UNKNOWN));
        assert_eq!(back.to_json(), value);
        assert!(matches!(Node::from_json(&json!(u64::MAX)).kind, NodeKind::Float(_)));
        // Non-finite floats become null.
        assert_eq!(ok("a: .inf").to_json(), json!({"a": null}));
    }

    #[test]
    fn get_and_find() {
        let node = ok("targets:\n  - id: x\n    transport:\n      uid: 5\n");
        let path =
            Path(vec![Seg::Key("targets".into()), Seg::Index(0), Seg::Key("transport".into()), Seg::Key("uid".into())]);
        let found = node.find(&path).expect("found");
        assert_eq!(found.kind, NodeKind::Int(5));
        assert_eq!(found.mark, Mark::new(4, 12));
        assert_eq!(node.find(&Path(vec![])), Some(&node));
        assert!(node.find(&Path(vec![Seg::Key("targets".into()), Seg::Index(1)])).is_none());
        assert!(node.find(&Path(vec![Seg::Index(0)])).is_none());
        assert!(node.get("nope").is_none());
        assert!(found.get("x").is_none());
    }

    #[test]
    fn display() {
        assert_eq!(Mark::new(3, 7).to_string(), "line 3 column 7");
        assert_eq!(Mark::UNKNOWN.to_string(), "unknown position");
        let e = YamlError::new(Mark::new(2, 5), "oops");
        assert_eq!(e.to_string(), "line 2 column 5: oops");
    }
}
