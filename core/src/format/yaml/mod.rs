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

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Tag};
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
        Node { kind, mark }
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
    let mut builder = Builder::default();
    let mut document_seen = false;
    for item in Parser::new_from_str(text) {
        let (event, span) = item?;
        let mark = Mark::from_marker(&span.start);
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                if document_seen {
                    return Err(YamlError::new(
                        mark,
                        "found a second document; expected exactly one YAML document per file",
                    ));
                }
                document_seen = true;
            }
            Event::Scalar(value, style, anchor, tag) => {
                builder.scalar(&value, style, anchor, tag.as_deref(), mark)?;
            }
            Event::SequenceStart(anchor, tag) => {
                builder.start(anchor, tag.as_deref(), mark, false)?;
            }
            Event::MappingStart(anchor, tag) => {
                builder.start(anchor, tag.as_deref(), mark, true)?;
            }
            Event::SequenceEnd | Event::MappingEnd => builder.end()?,
            Event::Alias(id) => builder.alias(id, mark)?,
        }
    }
    builder.finish()
}

const EMPTY_FILE: &str = "the file is empty; expected a YAML mapping";

/// A node of the unexpanded document; aliases point at their anchored node.
#[derive(Debug)]
struct RawNode {
    kind: RawKind,
    mark: Mark,
}

#[derive(Debug)]
enum RawKind {
    /// A scalar value (never `Seq` or `Map`).
    Scalar(NodeKind),
    Seq(Vec<usize>),
    Map(Vec<(usize, usize)>),
    Alias(usize),
}

/// What an anchor names, with the size of its expansion.
#[derive(Debug, Clone, Copy)]
struct Anchored {
    index: usize,
    nodes: usize,
    height: usize,
    text: usize,
}

#[derive(Debug)]
struct Frame {
    mark: Mark,
    anchor: usize,
    nodes_before: usize,
    text_before: usize,
    /// Largest height of a child (0 for scalars).
    child_height: usize,
    kind: FrameKind,
}

#[derive(Debug)]
enum FrameKind {
    Seq(Vec<usize>),
    Map { entries: Vec<(usize, usize)>, key: Option<usize>, seen: HashMap<String, Mark> },
}

#[derive(Debug, Default)]
struct Builder {
    nodes: Vec<RawNode>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    /// Nodes in the expanded tree so far.
    expanded_nodes: usize,
    /// Bytes of scalar text in the expanded tree so far.
    expanded_text: usize,
    /// Bytes of scalar text copied by aliases so far.
    alias_text: usize,
    root: Option<(usize, bool)>,
}

impl Builder {
    fn push(&mut self, kind: RawKind, mark: Mark) -> usize {
        self.nodes.push(RawNode { kind, mark });
        self.nodes.len() - 1
    }

    fn count_nodes(&mut self, n: usize, mark: Mark) -> Result<(), YamlError> {
        self.expanded_nodes = self.expanded_nodes.saturating_add(n);
        if self.expanded_nodes > MAX_NODES {
            return Err(YamlError::new(
                mark,
                format!(
                    "the document expands to more than {MAX_NODES} nodes (too large, or an alias bomb); expected a smaller document"
                ),
            ));
        }
        Ok(())
    }

    fn scalar(
        &mut self,
        value: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        mark: Mark,
    ) -> Result<(), YamlError> {
        let kind = resolve_scalar(value, style, tag, mark)?;
        // An empty plain scalar as the whole document is an empty file (e.g. only `---`).
        let implicit_empty =
            self.stack.is_empty() && tag.is_none() && anchor == 0 && style == ScalarStyle::Plain && value.is_empty();
        self.count_nodes(1, mark)?;
        let text = text_len(&kind);
        self.expanded_text = self.expanded_text.saturating_add(text);
        let index = self.push(RawKind::Scalar(kind), mark);
        if anchor != 0 {
            self.anchors.insert(anchor, Anchored { index, nodes: 1, height: 0, text });
        }
        self.attach(index, 0, implicit_empty)
    }

    fn start(&mut self, anchor: usize, tag: Option<&Tag>, mark: Mark, is_map: bool) -> Result<(), YamlError> {
        if let Some(tag) = tag {
            let wanted = if is_map { "map" } else { "seq" };
            if core_suffix(tag) != Some(wanted) {
                let what = if is_map { "mapping" } else { "sequence" };
                return Err(YamlError::new(
                    mark,
                    format!("unsupported tag `{}` on a {what}; expected no tag or `!!{wanted}`", tag_text(tag)),
                ));
            }
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(depth_error(mark));
        }
        let nodes_before = self.expanded_nodes;
        self.count_nodes(1, mark)?;
        let kind = if is_map {
            FrameKind::Map { entries: Vec::new(), key: None, seen: HashMap::new() }
        } else {
            FrameKind::Seq(Vec::new())
        };
        self.stack.push(Frame { mark, anchor, nodes_before, text_before: self.expanded_text, child_height: 0, kind });
        Ok(())
    }

    fn end(&mut self) -> Result<(), YamlError> {
        let Some(frame) = self.stack.pop() else {
            return Err(YamlError::new(Mark::UNKNOWN, "internal error: collection end without a start"));
        };
        let kind = match frame.kind {
            FrameKind::Seq(items) => RawKind::Seq(items),
            FrameKind::Map { entries, key, .. } => {
                if key.is_some() {
                    return Err(YamlError::new(frame.mark, "internal error: mapping key without a value"));
                }
                RawKind::Map(entries)
            }
        };
        let height = frame.child_height.saturating_add(1);
        let index = self.push(kind, frame.mark);
        if frame.anchor != 0 {
            self.anchors.insert(
                frame.anchor,
                Anchored {
                    index,
                    nodes: self.expanded_nodes.saturating_sub(frame.nodes_before),
                    height,
                    text: self.expanded_text.saturating_sub(frame.text_before),
                },
            );
        }
        self.attach(index, height, false)
    }

    fn alias(&mut self, id: usize, mark: Mark) -> Result<(), YamlError> {
        let Some(anchored) = self.anchors.get(&id).copied() else {
            return Err(YamlError::new(
                mark,
                "alias to an anchor whose node is not complete (recursive aliases are not supported); expected an alias to an earlier, finished node",
            ));
        };
        self.count_nodes(anchored.nodes, mark)?;
        if self.stack.len().saturating_add(anchored.height) > MAX_DEPTH {
            return Err(depth_error(mark));
        }
        self.alias_text = self.alias_text.saturating_add(anchored.text);
        if self.alias_text > MAX_ALIAS_TEXT {
            return Err(YamlError::new(
                mark,
                format!(
                    "aliases copy more than {MAX_ALIAS_TEXT} bytes of text (an alias bomb?); expected fewer or smaller aliased values"
                ),
            ));
        }
        self.expanded_text = self.expanded_text.saturating_add(anchored.text);
        let index = self.push(RawKind::Alias(anchored.index), mark);
        self.attach(index, anchored.height, false)
    }

    /// Adds a finished node to the open collection (or makes it the root).
    fn attach(&mut self, index: usize, height: usize, implicit_empty: bool) -> Result<(), YamlError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some((index, implicit_empty));
            return Ok(());
        };
        frame.child_height = frame.child_height.max(height);
        match &mut frame.kind {
            FrameKind::Seq(items) => items.push(index),
            FrameKind::Map { entries, key, seen } => match key.take() {
                Some(k) => entries.push((k, index)),
                None => {
                    let mark = self.nodes.get(index).map_or(Mark::UNKNOWN, |n| n.mark);
                    let name = key_string(&self.nodes, index, mark)?;
                    if let Some(first) = seen.get(&name) {
                        return Err(YamlError::new(
                            mark,
                            format!(
                                "duplicate key `{name}` (first defined at {first}); expected each key once per mapping"
                            ),
                        ));
                    }
                    seen.insert(name, mark);
                    *key = Some(index);
                }
            },
        }
        Ok(())
    }

    fn finish(self) -> Result<Node, YamlError> {
        match self.root {
            None | Some((_, true)) => Err(YamlError::new(Mark::new(1, 1), EMPTY_FILE)),
            Some((index, false)) => {
                if let Some(frame) = self.stack.last() {
                    return Err(YamlError::new(frame.mark, "internal error: unclosed collection"));
                }
                expand(&self.nodes, index, None)
            }
        }
    }
}

fn depth_error(mark: Mark) -> YamlError {
    YamlError::new(mark, format!("nesting deeper than {MAX_DEPTH} levels; expected a shallower document"))
}

fn text_len(kind: &NodeKind) -> usize {
    match kind {
        NodeKind::Str(s) => s.len(),
        _ => 0,
    }
}

/// The text of a mapping key, which must be a string.
fn key_string(nodes: &[RawNode], index: usize, mark: Mark) -> Result<String, YamlError> {
    let mut node = nodes.get(index);
    if let Some(RawNode { kind: RawKind::Alias(target), .. }) = node {
        node = nodes.get(*target);
    }
    let found = match node.map(|n| &n.kind) {
        Some(RawKind::Scalar(NodeKind::Str(s))) => return Ok(s.clone()),
        Some(RawKind::Scalar(NodeKind::Null)) => "null".to_owned(),
        Some(RawKind::Scalar(NodeKind::Bool(b))) => format!("boolean `{b}`"),
        Some(RawKind::Scalar(NodeKind::Int(i))) => format!("integer `{i}`"),
        Some(RawKind::Scalar(NodeKind::Float(f))) => format!("float `{f}`"),
        Some(RawKind::Seq(_) | RawKind::Scalar(NodeKind::Seq(_))) => "a sequence".to_owned(),
        Some(RawKind::Map(_) | RawKind::Scalar(NodeKind::Map(_))) => "a mapping".to_owned(),
        Some(RawKind::Alias(_)) | None => "an unresolvable alias".to_owned(),
    };
    Err(YamlError::new(mark, format!("mapping keys must be strings, found {found}; quote the key to use it as text")))
}

/// Builds the expanded tree below `index`. Depth is bounded by [`MAX_DEPTH`] (checked while
/// building), so the recursion is too.
fn expand(nodes: &[RawNode], index: usize, mark: Option<Mark>) -> Result<Node, YamlError> {
    let Some(raw) = nodes.get(index) else {
        return Err(YamlError::new(mark.unwrap_or(Mark::UNKNOWN), "internal error: dangling node reference"));
    };
    let mark = mark.unwrap_or(raw.mark);
    let kind = match &raw.kind {
        RawKind::Scalar(kind) => kind.clone(),
        RawKind::Alias(target) => {
            if matches!(nodes.get(*target).map(|n| &n.kind), Some(RawKind::Alias(_))) {
                return Err(YamlError::new(mark, "internal error: alias of an alias"));
            }
            return expand(nodes, *target, Some(mark));
        }
        RawKind::Seq(items) => NodeKind::Seq(items.iter().map(|&i| expand(nodes, i, None)).collect::<Result<_, _>>()?),
        RawKind::Map(entries) => NodeKind::Map(
            entries
                .iter()
                .map(|&(k, v)| Ok((expand(nodes, k, None)?, expand(nodes, v, None)?)))
                .collect::<Result<_, YamlError>>()?,
        ),
    };
    Ok(Node::new(kind, mark))
}

const CORE_PREFIX: &str = "tag:yaml.org,2002:";

/// The suffix of a YAML core-schema tag (`str` for `!!str`), if `tag` is one.
fn core_suffix(tag: &Tag) -> Option<&str> {
    if tag.handle == CORE_PREFIX {
        Some(&tag.suffix)
    } else if tag.handle.is_empty() {
        tag.suffix.strip_prefix(CORE_PREFIX)
    } else {
        None
    }
}

/// A tag as it would be written in the file.
fn tag_text(tag: &Tag) -> String {
    if let Some(suffix) = core_suffix(tag) {
        format!("!!{suffix}")
    } else if tag.handle == "!" {
        format!("!{}", tag.suffix)
    } else if tag.handle.is_empty() {
        if tag.suffix == "!" { "!".to_owned() } else { format!("!<{}>", tag.suffix) }
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

fn merge_error(mark: Mark) -> YamlError {
    YamlError::new(mark, "merge keys are not supported; expected the merged keys written out instead of `<<`")
}

/// Resolves a scalar like PyYAML's `SafeLoader`.
fn resolve_scalar(value: &str, style: ScalarStyle, tag: Option<&Tag>, mark: Mark) -> Result<NodeKind, YamlError> {
    if let Some(tag) = tag {
        return resolve_tagged(value, tag, mark);
    }
    if style != ScalarStyle::Plain {
        return Ok(NodeKind::Str(value.to_owned()));
    }
    if value == "<<" {
        return Err(merge_error(mark));
    }
    if is_null(value) {
        return Ok(NodeKind::Null);
    }
    if let Some(b) = plain_bool(value) {
        return Ok(NodeKind::Bool(b));
    }
    if is_float(value) {
        return match construct_float(value) {
            Some(f) => Ok(NodeKind::Float(f)),
            None => Err(YamlError::new(mark, format!("invalid number `{value}`; expected a float"))),
        };
    }
    if is_int(value) {
        return construct_int(value).map(NodeKind::Int).map_err(|e| e.into_yaml(value, mark));
    }
    Ok(NodeKind::Str(value.to_owned()))
}

fn resolve_tagged(value: &str, tag: &Tag, mark: Mark) -> Result<NodeKind, YamlError> {
    match core_suffix(tag) {
        Some("str") => Ok(NodeKind::Str(value.to_owned())),
        Some("int") => construct_int(value).map(NodeKind::Int).map_err(|e| e.into_yaml(value, mark)),
        Some("float") => construct_float(value)
            .map(NodeKind::Float)
            .ok_or_else(|| YamlError::new(mark, format!("invalid `!!float` value `{value}`; expected a number"))),
        Some("bool") => match value.to_lowercase().as_str() {
            "yes" | "true" | "on" => Ok(NodeKind::Bool(true)),
            "no" | "false" | "off" => Ok(NodeKind::Bool(false)),
            _ => Err(YamlError::new(
                mark,
                format!("invalid `!!bool` value `{value}`; expected true, false, yes, no, on or off"),
            )),
        },
        Some("null") => {
            if is_null(value) {
                Ok(NodeKind::Null)
            } else {
                Err(YamlError::new(mark, format!("invalid `!!null` value `{value}`; expected null, ~ or nothing")))
            }
        }
        Some("merge") => Err(merge_error(mark)),
        _ => Err(YamlError::new(
            mark,
            format!(
                "unsupported tag `{}`; expected no tag or one of !!str, !!int, !!float, !!bool, !!null",
                tag_text(tag)
            ),
        )),
    }
}

fn is_null(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

fn plain_bool(value: &str) -> Option<bool> {
    match value {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn strip_sign(s: &str) -> (bool, &str) {
    match s.strip_prefix(['-', '+']) {
        Some(rest) => (true, rest),
        None => (false, s),
    }
}

/// `[0-5]?[0-9]`, one base-60 digit after a `:`.
fn is_base60_digit(part: &str) -> bool {
    match part.as_bytes() {
        [d] => d.is_ascii_digit(),
        [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
        _ => false,
    }
}

/// PyYAML's implicit int pattern.
fn is_int(value: &str) -> bool {
    let (_, s) = strip_sign(value);
    if let Some(rest) = s.strip_prefix("0b") {
        return !rest.is_empty() && rest.chars().all(|c| matches!(c, '0' | '1' | '_'));
    }
    if let Some(rest) = s.strip_prefix("0x") {
        return !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '_');
    }
    if s == "0" {
        return true;
    }
    if let Some(rest) = s.strip_prefix('0') {
        return !rest.is_empty() && rest.chars().all(|c| matches!(c, '0'..='7' | '_'));
    }
    let mut parts = s.split(':');
    let first = parts.next().unwrap_or_default();
    let mut chars = first.chars();
    if !matches!(chars.next(), Some('1'..='9')) || !chars.all(|c| c.is_ascii_digit() || c == '_') {
        return false;
    }
    parts.all(is_base60_digit)
}

/// Consumes `[0-9_]*` from the front of `s`.
fn skip_digits_underscores(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_')
}

/// Whether `s` is empty or an exponent `[eE][-+][0-9]+`.
fn is_opt_exponent(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let Some(rest) = s.strip_prefix(['e', 'E']) else {
        return false;
    };
    let Some(digits) = rest.strip_prefix(['-', '+']) else {
        return false;
    };
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// PyYAML's implicit float pattern.
fn is_float(value: &str) -> bool {
    if matches!(value, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let (signed, s) = strip_sign(value);
    if matches!(s, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if let Some(rest) = s.strip_prefix('.') {
        // `\.[0-9][0-9_]*([eE][-+][0-9]+)?`, unsigned only
        return !signed
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && is_opt_exponent(skip_digits_underscores(rest));
    }
    if !s.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let rest = skip_digits_underscores(s);
    if let Some(fraction) = rest.strip_prefix('.') {
        // `[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?`
        return is_opt_exponent(skip_digits_underscores(fraction));
    }
    if rest.starts_with(':') {
        // `[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`
        let Some((base60, fraction)) = rest.split_once('.') else {
            return false;
        };
        let mut parts = base60.split(':');
        let _empty_before_first_colon = parts.next();
        return parts.all(is_base60_digit) && fraction.chars().all(|c| c.is_ascii_digit() || c == '_');
    }
    false
}

/// Why an integer could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntError {
    Invalid,
    Overflow,
}

impl IntError {
    fn into_yaml(self, value: &str, mark: Mark) -> YamlError {
        match self {
            IntError::Invalid => YamlError::new(
                mark,
                format!("invalid integer `{value}`; expected digits such as 42, 0x2a, 0b101010 or 052"),
            ),
            IntError::Overflow => YamlError::new(
                mark,
                format!(
                    "integer `{value}` is out of range; expected a value from {} to {} (quote it to use it as text)",
                    i64::MIN,
                    i64::MAX
                ),
            ),
        }
    }
}

fn parse_radix(digits: &str, radix: u32) -> Result<i128, IntError> {
    if digits.is_empty() {
        return Err(IntError::Invalid);
    }
    let mut value: i128 = 0;
    for c in digits.chars() {
        let digit = c.to_digit(radix).ok_or(IntError::Invalid)?;
        value = value
            .checked_mul(i128::from(radix))
            .and_then(|v| v.checked_add(i128::from(digit)))
            .ok_or(IntError::Overflow)?;
    }
    Ok(value)
}

/// PyYAML's `construct_yaml_int`, limited to `i64`.
fn construct_int(value: &str) -> Result<i64, IntError> {
    let cleaned = value.replace('_', "");
    let negative = cleaned.starts_with('-');
    let (_, s) = strip_sign(&cleaned);
    let magnitude = if s == "0" {
        0
    } else if let Some(bin) = s.strip_prefix("0b") {
        parse_radix(bin, 2)?
    } else if let Some(hex) = s.strip_prefix("0x") {
        parse_radix(hex, 16)?
    } else if s.starts_with('0') {
        parse_radix(s, 8)?
    } else if s.contains(':') {
        let mut total: i128 = 0;
        for part in s.split(':') {
            let part = parse_radix(part, 10)?;
            total = total.checked_mul(60).and_then(|t| t.checked_add(part)).ok_or(IntError::Overflow)?;
        }
        total
    } else {
        parse_radix(s, 10)?
    };
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| IntError::Overflow)
}

/// PyYAML's `construct_yaml_float`.
fn construct_float(value: &str) -> Option<f64> {
    let cleaned = value.replace('_', "").to_lowercase();
    let sign = if cleaned.starts_with('-') { -1.0 } else { 1.0 };
    let (_, s) = strip_sign(&cleaned);
    if s == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if s == ".nan" {
        return Some(f64::NAN);
    }
    if s.contains(':') {
        let mut total = 0.0;
        for part in s.split(':') {
            total = total * 60.0 + part.parse::<f64>().ok()?;
        }
        return Some(sign * total);
    }
    s.parse::<f64>().ok().map(|f| sign * f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> Node {
        match parse(text) {
            Ok(node) => node,
            Err(e) => panic!("{text:?} failed: {e}"),
        }
    }

    fn err(text: &str) -> YamlError {
        match parse(text) {
            Ok(node) => panic!("{text:?} parsed as {:?}", node.to_json()),
            Err(e) => e,
        }
    }

    /// The value of key `a` in `a: <scalar>`.
    fn scalar(text: &str) -> NodeKind {
        let node = ok(&format!("a: {text}"));
        match node.get("a") {
            Some(n) => n.kind.clone(),
            None => panic!("no key a in {text:?}"),
        }
    }

    #[test]
    fn pyyaml_scalar_table() {
        use NodeKind::{Bool, Float, Int, Null, Str};
        let s = |v: &str| Str(v.to_owned());
        // Expectations generated with PyYAML 6.0.3 `yaml.safe_load("a: " + text)["a"]`.
        let table: Vec<(&str, NodeKind)> = vec![
            ("", Null),
            ("~", Null),
            ("null", Null),
            ("Null", Null),
            ("NULL", Null),
            ("nULL", s("nULL")),
            ("yes", Bool(true)),
            ("Yes", Bool(true)),
            ("YES", Bool(true)),
            ("no", Bool(false)),
            ("No", Bool(false)),
            ("NO", Bool(false)),
            ("true", Bool(true)),
            ("True", Bool(true)),
            ("TRUE", Bool(true)),
            ("false", Bool(false)),
            ("False", Bool(false)),
            ("FALSE", Bool(false)),
            ("on", Bool(true)),
            ("On", Bool(true)),
            ("ON", Bool(true)),
            ("off", Bool(false)),
            ("Off", Bool(false)),
            ("OFF", Bool(false)),
            ("y", s("y")),
            ("n", s("n")),
            ("yEs", s("yEs")),
            ("0", Int(0)),
            ("-0", Int(0)),
            ("+12", Int(12)),
            ("-12", Int(-12)),
            ("1_000", Int(1000)),
            ("1__000", Int(1000)),
            ("010", Int(8)),
            ("-010", Int(-8)),
            ("00", Int(0)),
            ("0_", Int(0)),
            ("08", s("08")),
            ("0o17", s("0o17")),
            ("0x1F", Int(31)),
            ("0x_1_f", Int(31)),
            ("-0x10", Int(-16)),
            ("0b101", Int(5)),
            ("+0b11", Int(3)),
            ("0B101", s("0B101")),
            ("0X1F", s("0X1F")),
            ("1:30", Int(90)),
            ("1:5", Int(65)),
            ("190:20:30", Int(685_230)),
            ("-1:30", Int(-90)),
            ("0:30", s("0:30")),
            ("1:60", s("1:60")),
            ("_1", s("_1")),
            ("1_", Int(1)),
            ("9223372036854775807", Int(i64::MAX)),
            ("-9223372036854775808", Int(i64::MIN)),
            ("1.5", Float(1.5)),
            ("-1.5", Float(-1.5)),
            ("1.", Float(1.0)),
            (".5", Float(0.5)),
            ("1_1.", Float(11.0)),
            ("0.0_1", Float(0.01)),
            ("1.0e+3", Float(1000.0)),
            ("1.e+3", Float(1000.0)),
            ("1.5E-2", Float(0.015)),
            ("1.0e3", s("1.0e3")),
            ("1e3", s("1e3")),
            ("1e+3", s("1e+3")),
            ("._5", s("._5")),
            ("-.5", s("-.5")),
            (".", s(".")),
            ("1:30.5", Float(90.5)),
            ("0:30.5", Float(30.5)),
            (".inf", Float(f64::INFINITY)),
            (".Inf", Float(f64::INFINITY)),
            ("+.INF", Float(f64::INFINITY)),
            ("-.inf", Float(f64::NEG_INFINITY)),
            ("inf", s("inf")),
            ("-.nan", s("-.nan")),
            ("nan", s("nan")),
            ("2024-01-01", s("2024-01-01")), // PyYAML: datetime.date (documented deviation)
            ("=", s("=")),                   // PyYAML: constructor error (documented deviation)
            ("hello world", s("hello world")),
            ("'yes'", s("yes")),
            ("\"010\"", s("010")),
            ("'1e3'", s("1e3")),
            ("'~'", s("~")),
            ("''", s("")),
            ("!!str 010", s("010")),
            ("!!str yes", s("yes")),
            ("!!int '0x10'", Int(16)),
            ("!!int \"12\"", Int(12)),
            ("!!float 1", Float(1.0)),
            ("!!float 1e3", Float(1000.0)),
            ("!!float 010", Float(10.0)),
            ("!!bool yEs", Bool(true)),
            ("!!bool 'off'", Bool(false)),
            ("!!null ''", Null),
            ("!!null", Null),
            ("!<tag:yaml.org,2002:int> 3", Int(3)),
        ];
        for (text, expected) in table {
            assert_eq!(scalar(text), expected, "for {text:?}");
        }
    }

    #[test]
    fn nan_resolves() {
        for text in [".nan", ".NaN", ".NAN"] {
            assert!(matches!(scalar(text), NodeKind::Float(f) if f.is_nan()), "{text}");
        }
    }

    #[test]
    fn block_scalars_are_strings() {
        let node = ok("a: |\n  yes\nb: >\n  123\n  456\n");
        assert_eq!(node.get("a").map(|n| n.kind.clone()), Some(NodeKind::Str("yes\n".into())));
        assert_eq!(node.get("b").and_then(Node::as_str), Some("123 456\n"));
    }

    #[test]
    fn integer_overflow_is_an_error() {
        let e = err("a: 9223372036854775808");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("out of range"), "{e}");
        assert!(err("a: -9223372036854775809").message.contains("out of range"));
        assert!(err("a: 0x8000000000000000").message.contains("out of range"));
        assert!(err("a: 99999999999999999999999999999999999999999999").message.contains("out of range"));
        // Quoted, it is just text.
        assert_eq!(scalar("'9223372036854775808'"), NodeKind::Str("9223372036854775808".into()));
    }

    #[test]
    fn bad_explicit_values() {
        assert!(err("a: !!int abc").message.contains("invalid integer `abc`"));
        assert!(err("a: !!float abc").message.contains("expected a number"));
        assert!(err("a: !!bool maybe").message.contains("expected true, false"));
        assert!(err("a: !!null foo").message.contains("expected null"));
        // `0b_` and `0x_` match PyYAML's pattern, but PyYAML cannot build them either.
        assert!(err("a: 0b_").message.contains("invalid integer"));
        assert!(err("a: 0x_").message.contains("invalid integer"));
    }

    #[test]
    fn unsupported_tags_are_named() {
        let e = err("a: !foo x");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("`!foo`"), "{e}");
        assert!(err("a: !!binary aGVsbG8=").message.contains("`!!binary`"));
        assert!(err("a: !!set {x: null}").message.contains("`!!set`"));
        assert!(err("a: ! x").message.contains("`!`"));
        assert!(err("a: !!map [1]").message.contains("`!!map`"));
        assert!(ok("a: !!map {b: 1}").get("a").is_some());
        assert!(ok("a: !!seq [1]").get("a").is_some());
        let e = err("a: !!str [1]");
        assert!(e.message.contains("unsupported tag `!!str` on a sequence"), "{e}");
    }

    #[test]
    fn marks_are_one_based() {
        let node = ok("targets:\n  - id: x\n    transport:\n      type: stdio\n");
        assert_eq!(node.mark, Mark::new(1, 1));
        let targets = node.get("targets").expect("targets");
        assert_eq!(targets.mark, Mark::new(2, 3));
        let NodeKind::Seq(items) = &targets.kind else { panic!("not a seq") };
        assert_eq!(items[0].mark, Mark::new(2, 5));
        let transport = items[0].get("transport").expect("transport");
        assert_eq!(transport.mark, Mark::new(4, 7));
        assert_eq!(transport.get("type").map(|n| n.mark), Some(Mark::new(4, 13)));
        let NodeKind::Map(entries) = &transport.kind else { panic!("not a map") };
        assert_eq!(entries[0].0.mark, Mark::new(4, 7));
    }

    #[test]
    fn columns_count_characters() {
        let node = ok("é: {ü: x}");
        let inner = node.get("é").expect("é");
        assert_eq!(inner.mark, Mark::new(1, 4));
        assert_eq!(inner.get("ü").map(|n| n.mark), Some(Mark::new(1, 8)));
    }

    #[test]
    fn empty_files() {
        for text in ["", "   ", "\n\n", "# only a comment\n", "---\n", "---\n...\n", "# c\n---\n# d\n"] {
            let e = err(text);
            assert_eq!(e.message, "the file is empty; expected a YAML mapping", "{text:?}");
            assert_eq!(e.mark, Mark::new(1, 1));
        }
        // An explicit null is not an empty file.
        assert_eq!(ok("~").kind, NodeKind::Null);
        assert_eq!(ok("--- null").kind, NodeKind::Null);
    }

    #[test]
    fn two_documents() {
        let e = err("a: 1\n---\nb: 2\n");
        assert_eq!(e.mark, Mark::new(2, 1));
        assert!(e.message.contains("second document"), "{e}");
        assert_eq!(e.to_string(), format!("line 2 column 1: {}", e.message));
        let e = err("--- a\n--- b\n");
        assert_eq!(e.mark, Mark::new(2, 1));
        // A trailing `---` starts an (empty) second document, as in PyYAML.
        assert_eq!(err("a: 1\n---\n").mark, Mark::new(2, 1));
        // `...` just ends the one document.
        assert_eq!(ok("a: 1\n...\n").to_json(), json!({"a": 1}));
    }

    #[test]
    fn syntax_errors_have_marks() {
        let e = err("a: \"unterminated");
        assert_eq!(e.mark, Mark::new(1, 4));
        assert!(e.message.contains("quoted scalar"), "{e}");
        let e = err("a:\n\tb: 1\n");
        assert_eq!(e.mark.line, 2);
        assert!(e.message.contains("tab"), "{e}");
        let e = err("a: [1, 2\nb: 3\n");
        assert!(e.mark.is_known());
    }

    #[test]
    fn non_string_keys() {
        for (text, found) in [
            ("1: a", "integer `1`"),
            ("true: a", "boolean `true`"),
            ("yes: a", "boolean `true`"),
            ("~: a", "null"),
            (": a", "null"),
            ("1.5: a", "float `1.5`"),
            ("? [a]\n: b", "a sequence"),
            ("? {a: 1}\n: b", "a mapping"),
        ] {
            let e = err(text);
            let column = if text.starts_with('?') { 3 } else { 1 };
            assert_eq!(e.mark, Mark::new(1, column), "{text:?}");
            assert!(e.message.starts_with(&format!("mapping keys must be strings, found {found}")), "{text:?}: {e}");
        }
        let e = err("a:\n  b: 1\n  2: c\n");
        assert_eq!(e.mark, Mark::new(3, 3));
        // Quoted keys are fine.
        assert_eq!(ok("'1': a\n\"true\": b").to_json(), json!({"1": "a", "true": "b"}));
    }

    #[test]
    fn duplicate_keys() {
        let e = err("a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\n");
        assert_eq!(e.mark, Mark::new(5, 3));
        assert_eq!(
            e.message,
            "duplicate key `c` (first defined at line 3 column 3); expected each key once per mapping"
        );
        // Quoting does not make a key different.
        let e = err("{a: 1, 'a': 2}");
        assert_eq!(e.mark, Mark::new(1, 8));
        // The same key in different mappings is fine.
        assert!(parse("a: {x: 1}\nb: {x: 1}").is_ok());
    }

    #[test]
    fn merge_keys_are_rejected() {
        let e = err("base: &b {x: 1}\nderived:\n  <<: *b\n");
        assert_eq!(e.mark, Mark::new(3, 3));
        assert!(e.message.starts_with("merge keys are not supported"), "{e}");
        // Quoted, `<<` is an ordinary key.
        assert_eq!(ok("'<<': 1").to_json(), json!({"<<": 1}));
    }

    #[test]
    fn aliases_expand() {
        let node = ok("base: &b\n  x: 1\n  y: [a, b]\ncopy: *b\nlist: [*b, &s str, *s]\n");
        assert_eq!(
            node.to_json(),
            json!({
                "base": {"x": 1, "y": ["a", "b"]},
                "copy": {"x": 1, "y": ["a", "b"]},
                "list": [{"x": 1, "y": ["a", "b"]}, "str", "str"],
            })
        );
        // The copy's top carries the alias's mark; the inside keeps the anchored text's marks.
        let copy = node.get("copy").expect("copy");
        assert_eq!(copy.mark, Mark::new(4, 7));
        assert_eq!(copy.get("x").map(|n| n.mark), Some(Mark::new(2, 6)));
        // Aliased keys work and still count for duplicates.
        assert_eq!(ok("- &k name\n- {*k : 1}").to_json(), json!(["name", {"name": 1}]));
        let e = err("- &k name\n- {name: 1, *k : 2}");
        assert!(e.message.starts_with("duplicate key `name`"), "{e}");
        let e = err("- &k 1\n- {*k : 2}");
        assert!(e.message.starts_with("mapping keys must be strings"), "{e}");
    }

    #[test]
    fn recursive_alias_is_rejected() {
        let e = err("&a [*a]");
        assert_eq!(e.mark, Mark::new(1, 5));
        assert!(e.message.contains("recursive aliases are not supported"), "{e}");
        assert!(parse("a: *nothing").is_err());
    }

    #[test]
    fn alias_bomb_is_rejected() {
        // Each line has ten copies of the previous one: 11, 111, 1111, … nodes.
        let mut lines = vec!["a0: &a0 [x, x, x, x, x, x, x, x, x, x]".to_owned()];
        for i in 1..10 {
            let prev = vec![format!("*a{}", i - 1); 10].join(", ");
            lines.push(format!("a{i}: &a{i} [{prev}]"));
        }
        let text = lines.join("\n");
        let e = err(&text);
        assert!(e.message.contains("more than 1000000 nodes"), "{e}");
        assert_eq!(e.mark.line, 6);
        // A moderate amount of sharing is fine.
        let small = text.lines().take(4).collect::<Vec<_>>().join("\n");
        assert!(parse(&small).is_ok());
    }

    #[test]
    fn alias_text_bomb_is_rejected() {
        let big = "x".repeat(1 << 20);
        let mut text = format!("a: &a {big}\nb: [");
        for _ in 0..100 {
            text.push_str("*a, ");
        }
        text.push_str("]\n");
        let e = err(&text);
        assert!(e.message.contains("bytes of text"), "{e}");
        assert_eq!(e.mark.line, 2);
    }

    #[test]
    fn depth_limit() {
        let ok_depth = format!("{}{}", "[".repeat(MAX_DEPTH.min(250)), "]".repeat(MAX_DEPTH.min(250)));
        assert!(parse(&ok_depth).is_ok());
        // Block nesting is not limited by the scanner, so it hits our limit.
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&" ".repeat(i));
            text.push_str("- \n");
        }
        let e = err(&text);
        assert!(e.message.contains("nesting deeper than 256"), "{e}");
        assert_eq!(e.mark.line, 257);
        // Aliases cannot be used to get deeper: `a` is 200 levels deep, and the alias
        // sits at depth 41 or 61 (the root mapping counts as 1).
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let nest = |n: usize| format!("{}*deep{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&format!("a: &deep {deep}\nb: {}\n", nest(40))).is_ok());
        let e = err(&format!("a: &deep {deep}\nb: {}\n", nest(60)));
        assert!(e.message.contains("nesting deeper"), "{e}");
        assert_eq!(e.mark, Mark::new(2, 64));
    }

    #[test]
    fn nasty_inputs_do_not_panic() {
        let deep_flow = "[".repeat(100_000);
        let deep_map = "{a: ".repeat(10_000);
        let deep_block: String = (0..2000).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
        let many_anchors: String = (0..1000).map(|i| format!("- &a{i} [*a{}]\n", i.max(1) - 1)).collect();
        let inputs: Vec<String> = vec![
            "\t".into(),
            "a:\t1".into(),
            "\ta: 1".into(),
            "a: 'unterminated".into(),
            "a: \"unterminated\\".into(),
            "[".into(),
            "]".into(),
            "{".into(),
            "}".into(),
            "{a: ".into(),
            "{a: 1,,}".into(),
            "[1,,2]".into(),
            "a: b: c".into(),
            "- a\nb: c".into(),
            "a:\n- b\n  - c".into(),
            "\0".into(),
            "a: \0".into(),
            "a: \u{feff}b".into(),
            "\u{feff}a: 1".into(),
            "&".into(),
            "*".into(),
            "&a".into(),
            "*a".into(),
            "!".into(),
            "!!".into(),
            "!<>".into(),
            "%YAML 1.2\n---\na".into(),
            "%YAML 9.9\n---\na".into(),
            "%TAG ! tag:x,2000:\n--- !y z".into(),
            "%FOO bar\n---\na".into(),
            "%".into(),
            "--- |\n  a\n b".into(),
            "a: |9\n  x".into(),
            "a: >-+\n  x".into(),
            "? ".into(),
            "? a\n? a".into(),
            ": : :".into(),
            "- - - - -".into(),
            "'\\".into(),
            "\"\\x\"".into(),
            "\"\\uD800\"".into(),
            "\"\\U0011FFFF\"".into(),
            "a: 1\n---\n[".into(),
            "...".into(),
            "--- ... ---".into(),
            "a: &x 1\nb: &x 2\nc: *x".into(),
            "a: !!int".into(),
            "a: !!float".into(),
            "a: !!bool".into(),
            "a: -".into(),
            "a: 0x".into(),
            "a: 0b".into(),
            "a: 1:".into(),
            "a: :1".into(),
            "a: 1::2".into(),
            "a: 1:2:".into(),
            "a: -:1.".into(),
            "\r\n\r".into(),
            "a:\r b".into(),
            "\u{85}\u{2028}\u{2029}".into(),
            deep_flow,
            deep_map,
            deep_block,
            many_anchors,
        ];
        for input in &inputs {
            let _ = parse(input);
        }
        // Every prefix of a realistic document.
        let doc = "schema_version: 1\ntargets:\n  - id: \"x\"\n    transport: {type: stdio, command: 'a'}\n    list: [1, &a 2, *a, |\n      text\n    ]\n";
        for end in 0..=doc.len() {
            if doc.is_char_boundary(end) {
                let _ = parse(&doc[..end]);
            }
        }
    }

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
