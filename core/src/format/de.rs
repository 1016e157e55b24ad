//! A serde [`Deserializer`] over a [`Node`] tree that reports where things went wrong.
//!
//! The typed campaign and scenario structs use plain `#[derive(Deserialize)]`. Deserializing
//! them from the spanned tree built by [`super::yaml`] with [`from_node`] turns every serde
//! error (wrong type, unknown or missing field, unknown variant, out-of-range number,
//! custom errors from `Deserialize` impls) into a [`DeError`] carrying the field [`Path`]
//! (like `targets[0].transport.uid`) and the [`Mark`] of the offending node.
//!
//! Conventions:
//!
//! * Scalars convert as pydantic's lax mode converted them for the original tool: an
//!   integer field takes an integer, a whole float (`2.0`), a boolean (`true` is 1) or a
//!   string holding a decimal integer (`"3"`, `" 3 "`, `"1_0"`, `"+5"`, `"2.0"`); a boolean
//!   field takes a boolean, `0`/`1` (also `0.0`/`1.0`) or one of the strings `0 1 f t n y
//!   no on off yes true false` in any case. A string field takes only a string (pydantic
//!   does not turn numbers into text either). Integers are offered as `i64` (serde converts
//!   and range-checks them), floats as `f64`; an integer is accepted where a float is
//!   expected.
//! * `null` is `None` for options and `()` for units.
//! * An unknown field is reported at the key (path ending in the key, mark of the key); a
//!   missing field at the mapping that lacks it.
//! * Enums are read from a string (a unit variant, e.g. `op: equals`) or from a mapping
//!   with a `type` key naming the variant, whose content is the same mapping without the
//!   `type` key: `{type: stdio, command: x}` is the newtype variant `stdio` holding
//!   `{command: x}`. Newtype, struct and unit variants are supported; tuple variants are
//!   not.

use std::collections::HashSet;
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, Expected, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};

pub use super::path::{Path, Seg};
use super::quote;
use super::yaml::{Mark, Node, NodeKind};

/// A document that does not match the type it is deserialized into.
///
/// Displays as `{path}: {message}`; callers add the file name and [`Mark`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DeError {
    /// The field path of the offending node.
    pub path: Path,
    /// Where the offending node starts.
    pub mark: Mark,
    /// What is wrong, including what was expected.
    pub message: String,
}

/// Deserializes a `T` from `node`.
///
/// # Errors
///
/// The first mismatch between the document and `T`, with its path and mark.
pub fn from_node<T: DeserializeOwned>(node: &Node) -> Result<T, DeError> {
    let root = PathRef::Root;
    let skipped = Skipped::default();
    T::deserialize(NodeDe::new(node, &root, &skipped)).map_err(|e| e.locate(&root, node).finish())
}

/// Most problems [`from_node_all`] reports.
pub const MAX_PROBLEMS: usize = 100;
/// Most passes [`from_node_all`] makes over the tree.
const MAX_PASSES: usize = 1000;

/// Deserializes a `T` from `node`, reporting every mismatch, not only the first.
///
/// Serde stops at the first error, so the tree is read again with each offending node left
/// out: a value of the wrong type, an unknown key, a mapping that lacks a field. Leaving a
/// node out can cause errors of its own (the mapping that held it now lacks that field, a
/// tuple is short); those are not reported, and their node is left out in turn, until the
/// document reads or only its root is left. At most [`MAX_PROBLEMS`] are reported.
///
/// # Errors
///
/// Every mismatch found, in the order found, each with its path and mark.
pub fn from_node_all<T: DeserializeOwned>(node: &Node) -> Result<T, Vec<DeError>> {
    from_node_lenient(node).map_err(|(_, problems)| problems)
}

/// As [`from_node_all`]; when every mismatch is an unknown field, the error also carries the
/// value read without those fields (what the document means once its typos are left out),
/// so that the rest of it can still be checked.
///
/// # Errors
///
/// Every mismatch found, and the value without the unknown fields when only those are wrong.
pub fn from_node_lenient<T: DeserializeOwned>(node: &Node) -> Result<T, (Option<T>, Vec<DeError>)> {
    let mut skipped = Skipped::default();
    let mut problems: Vec<DeError> = Vec::new();
    let mut only_unknown_fields = true;
    for _ in 0..MAX_PASSES {
        let root = PathRef::Root;
        let error = match T::deserialize(NodeDe::new(node, &root, &skipped)) {
            Ok(value) if problems.is_empty() => return Ok(value),
            Ok(value) => return Err((only_unknown_fields.then_some(value), problems)),
            Err(e) => e.locate(&root, node),
        };
        let at = error.location.as_ref().map_or(std::ptr::from_ref(node), |(_, _, at)| *at);
        let caused = find(node, at).is_some_and(|n| skipped.caused(n, &error.message));
        only_unknown_fields &= error.unknown_field;
        if !caused || problems.is_empty() {
            problems.push(error.finish());
        }
        if problems.len() >= MAX_PROBLEMS || std::ptr::eq(at, node) || !skipped.nodes.insert(at) {
            break;
        }
    }
    Err((None, problems))
}

/// The node at address `at` in the tree under `node`.
fn find(node: &Node, at: *const Node) -> Option<&Node> {
    if std::ptr::eq(node, at) {
        return Some(node);
    }
    match &node.kind {
        NodeKind::Seq(items) => items.iter().find_map(|n| find(n, at)),
        NodeKind::Map(entries) => entries.iter().find_map(|(k, v)| find(k, at).or_else(|| find(v, at))),
        _ => None,
    }
}

/// The nodes [`from_node_all`] leaves out (by address; the tree does not change meanwhile).
#[derive(Debug, Default)]
struct Skipped {
    nodes: HashSet<*const Node>,
}

impl Skipped {
    fn has(&self, node: &Node) -> bool {
        !self.nodes.is_empty() && self.nodes.contains(&std::ptr::from_ref(node))
    }

    fn entry(&self, (key, value): &(Node, Node)) -> bool {
        self.has(key) || self.has(value)
    }

    /// Whether an error at `node` may be caused by what was left out below it: a missing
    /// field whose entry was left out, or any other error of a collection with an element
    /// or entry left out.
    fn caused(&self, node: &Node, message: &str) -> bool {
        match &node.kind {
            NodeKind::Seq(items) => items.iter().any(|n| self.has(n)),
            NodeKind::Map(entries) => {
                let missing = message.strip_prefix("missing field `").and_then(|rest| rest.strip_suffix('`'));
                match missing {
                    Some(field) => entries.iter().any(|e| self.entry(e) && key_text(&e.0) == field),
                    None => entries.iter().any(|e| self.entry(e)),
                }
            }
            _ => false,
        }
    }
}

/// A path under construction: a linked list from the current node back to the root, so
/// descending costs nothing until an error needs the [`Path`].
#[derive(Debug, Clone, Copy)]
enum PathRef<'p> {
    Root,
    Key(&'p PathRef<'p>, &'p Node),
    Index(&'p PathRef<'p>, usize),
}

impl PathRef<'_> {
    fn to_path(self) -> Path {
        let mut segs = Vec::new();
        let mut current = self;
        loop {
            match current {
                PathRef::Root => break,
                PathRef::Key(parent, key) => {
                    // A field path quotes a key as any value: an excerpt of a long one.
                    segs.push(Seg::Key(quote::excerpt(&key_text(key))));
                    current = *parent;
                }
                PathRef::Index(parent, index) => {
                    segs.push(Seg::Index(index));
                    current = *parent;
                }
            }
        }
        segs.reverse();
        Path(segs)
    }
}

/// A mapping key as path text (keys from files are always strings).
fn key_text(key: &Node) -> String {
    match &key.kind {
        NodeKind::Str(s) => s.clone(),
        _ => key.to_json().to_string(),
    }
}

/// The error type of the deserializer: a message, located by the innermost node that sees
/// it.
#[derive(Debug)]
struct LocatedError {
    message: String,
    /// An unknown field: leaving its key out changes nothing else in the document.
    unknown_field: bool,
    /// The path and mark of the innermost node that saw it, and that node's address.
    location: Option<(Path, Mark, *const Node)>,
}

impl LocatedError {
    fn locate(mut self, path: &PathRef<'_>, node: &Node) -> Self {
        if self.location.is_none() {
            self.location = Some((path.to_path(), node.mark, std::ptr::from_ref(node)));
        }
        self
    }

    fn finish(self) -> DeError {
        let (path, mark) = self.location.map_or((Path::root(), Mark::UNKNOWN), |(path, mark, _)| (path, mark));
        DeError { path, mark, message: self.message }
    }
}

impl fmt::Display for LocatedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some((path, _, _)) => write!(f, "{path}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for LocatedError {}

/// Messages in words a person reads, quoting at most an excerpt of any value
/// ([`super::quote`]): `expected a whole number from 0 to 4294967295, found `-1``, not serde's
/// `invalid value: integer `-1`, expected u32`; unknown names with the nearest known one.
impl de::Error for LocatedError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        LocatedError { message: quote::bounded(msg.to_string()), unknown_field: false, location: None }
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::custom(format_args!("expected {}, found {}", human_expected(exp), found(&unexp)))
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::custom(format_args!("expected {}, found {}", human_expected(exp), found(&unexp)))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format_args!(
            "unknown variant `{}`, {}{}",
            quote::excerpt(variant),
            one_of(expected, "variants"),
            quote::did_you_mean(variant, expected.iter().copied())
        ))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let mut error = Self::custom(format_args!(
            "unknown field `{}`, {}{}",
            quote::excerpt(field),
            one_of(expected, "fields"),
            quote::did_you_mean(field, expected.iter().copied())
        ));
        error.unknown_field = true;
        error
    }
}

fn unexpected(node: &Node) -> Unexpected<'_> {
    match &node.kind {
        NodeKind::Null => Unexpected::Other("null"),
        NodeKind::Bool(b) => Unexpected::Bool(*b),
        NodeKind::Int(i) => Unexpected::Signed(*i),
        NodeKind::Float(f) => Unexpected::Float(*f),
        NodeKind::Str(s) => Unexpected::Str(s),
        NodeKind::Seq(_) => Unexpected::Seq,
        NodeKind::Map(_) => Unexpected::Map,
    }
}

/// `expected `a``, `expected `a` or `b``, `expected one of `a`, `b`, `c`` (serde's wording).
fn one_of(names: &[&str], what: &str) -> String {
    match names {
        [] => format!("there are no {what}"),
        [one] => format!("expected `{one}`"),
        [a, b] => format!("expected `{a}` or `{b}`"),
        _ => format!("expected one of {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")),
    }
}

/// What was expected, in words: serde names Rust types (`u32`, `f64`, `struct Target`).
fn human_expected(exp: &dyn Expected) -> String {
    let text = exp.to_string();
    let range = |low: &str, high: &str| format!("a whole number from {low} to {high}");
    match text.as_str() {
        "u8" => range("0", "255"),
        "u16" => range("0", "65535"),
        "u32" => range("0", "4294967295"),
        "u64" | "usize" | "u128" => range("0", "18446744073709551615"),
        "i8" => range("-128", "127"),
        "i16" => range("-32768", "32767"),
        "i32" => range("-2147483648", "2147483647"),
        "i64" | "isize" | "i128" => range("-9223372036854775808", "9223372036854775807"),
        "f32" | "f64" => "a number".to_owned(),
        "a boolean" => "a boolean (true or false)".to_owned(),
        "a borrowed string" | "a string" => "a string".to_owned(),
        "a map" => "a mapping".to_owned(),
        "unit" => "null".to_owned(),
        "variant identifier" | "field identifier" => "a name".to_owned(),
        _ if text.starts_with("struct ") => "a mapping".to_owned(),
        _ if text.starts_with("enum ") => "a name or a mapping with a `type` field".to_owned(),
        _ => text,
    }
}

/// What was found, in words, quoting at most an excerpt of a string.
fn found(unexp: &Unexpected<'_>) -> String {
    match unexp {
        Unexpected::Bool(b) => format!("`{b}`"),
        Unexpected::Unsigned(n) => format!("`{n}`"),
        Unexpected::Signed(n) => format!("`{n}`"),
        Unexpected::Float(f) => format!("`{f}`"),
        Unexpected::Char(c) => format!("`{}`", c.escape_debug()),
        Unexpected::Str(s) => format!("the string \"{}\"", quote::excerpt(s)),
        Unexpected::Bytes(_) => "bytes".to_owned(),
        Unexpected::Unit => "null".to_owned(),
        Unexpected::Option => "an optional value".to_owned(),
        Unexpected::NewtypeStruct | Unexpected::NewtypeVariant => "a wrapped value".to_owned(),
        Unexpected::Seq => "a sequence".to_owned(),
        Unexpected::Map => "a mapping".to_owned(),
        Unexpected::Enum => "an enum".to_owned(),
        Unexpected::UnitVariant | Unexpected::TupleVariant | Unexpected::StructVariant => "a variant".to_owned(),
        Unexpected::Other(other) => (*other).to_owned(),
    }
}

/// "N elements in sequence" / "N entries in map", for length errors.
struct ExpectedLen {
    len: usize,
    one: &'static str,
    many: &'static str,
    within: &'static str,
}

impl Expected for ExpectedLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.len == 1 { self.one } else { self.many };
        write!(f, "{} {noun} in {}", self.len, self.within)
    }
}

/// Deserializes one node. With `skip`, the node is a mapping read without its entry at
/// that index (the `type` key of an enum). Elements and entries in `skipped` are left out.
#[derive(Debug, Clone, Copy)]
struct NodeDe<'de, 'p> {
    node: &'de Node,
    path: &'p PathRef<'p>,
    skip: Option<usize>,
    skipped: &'p Skipped,
}

impl<'de, 'p> NodeDe<'de, 'p> {
    fn new(node: &'de Node, path: &'p PathRef<'p>, skipped: &'p Skipped) -> Self {
        NodeDe { node, path, skip: None, skipped }
    }

    fn locate(&self, error: LocatedError) -> LocatedError {
        error.locate(self.path, self.node)
    }

    fn located<T>(&self, result: Result<T, LocatedError>) -> Result<T, LocatedError> {
        result.map_err(|e| self.locate(e))
    }

    fn invalid_type(&self, expected: &dyn Expected) -> LocatedError {
        self.locate(de::Error::invalid_type(unexpected(self.node), expected))
    }

    fn visit_seq<V: Visitor<'de>>(&self, items: &'de [Node], visitor: V) -> Result<V::Value, LocatedError> {
        let mut access = SeqDe { items, next: 0, taken: 0, parent: self.path, skipped: self.skipped };
        let value = self.located(visitor.visit_seq(&mut access))?;
        let left = access.remaining();
        if left > 0 {
            return Err(self.locate(de::Error::invalid_length(
                access.taken + left,
                &ExpectedLen { len: access.taken, one: "element", many: "elements", within: "sequence" },
            )));
        }
        Ok(value)
    }

    fn visit_map<V: Visitor<'de>>(&self, entries: &'de [(Node, Node)], visitor: V) -> Result<V::Value, LocatedError> {
        let mut access = MapDe {
            entries,
            next: 0,
            taken: 0,
            skip: self.skip,
            pending: None,
            parent: self.path,
            skipped: self.skipped,
        };
        let value = self.located(visitor.visit_map(&mut access))?;
        let left = access.remaining();
        if left > 0 {
            let total = access.taken + left;
            return Err(self.locate(de::Error::invalid_length(
                total,
                &ExpectedLen { len: access.taken, one: "entry", many: "entries", within: "map" },
            )));
        }
        Ok(value)
    }

    fn integer<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Int(i) => self.located(visitor.visit_i64(*i)),
            // A whole-number float in an integer field (`trials: 2.0`) is that integer, as
            // in the original tool (pydantic's lax mode); `2.5` stays an error.
            #[expect(clippy::cast_possible_truncation, reason = "the value is whole and within i64 range")]
            NodeKind::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => self.located(visitor.visit_i64(*f as i64)),
            NodeKind::Bool(b) => self.located(visitor.visit_i64(i64::from(*b))),
            NodeKind::Str(s) => match lax_int(s) {
                Some(i) => self.located(visitor.visit_i64(i)),
                None => Err(self.invalid_type(&visitor)),
            },
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn float<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match self.node.kind {
            NodeKind::Float(f) => self.located(visitor.visit_f64(f)),
            NodeKind::Int(i) => self.located(visitor.visit_i64(i)),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Str(s) => self.located(visitor.visit_borrowed_str(s)),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Map(entries) => self.visit_map(entries, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Seq(items) => self.visit_seq(items, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
}

/// A string pydantic's lax mode reads as an integer: surrounding whitespace, an optional
/// sign, decimal digits with single `_` between them, and optionally a fraction of zeros
/// (`"2.0"`). Anything else (`"0x10"`, `"1e3"`, `"2."`) is not an integer.
fn lax_int(text: &str) -> Option<i64> {
    let t = text.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'));
    let (negative, t) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (whole, fraction) = t.split_once('.').unwrap_or((t, "0"));
    if fraction.is_empty() || !fraction.bytes().all(|b| b == b'0') {
        return None;
    }
    let bytes = whole.as_bytes();
    let digits_ok = !bytes.is_empty()
        && bytes.first().is_some_and(u8::is_ascii_digit)
        && bytes.last().is_some_and(u8::is_ascii_digit)
        && bytes.iter().all(|b| b.is_ascii_digit() || *b == b'_')
        && !whole.contains("__");
    if !digits_ok {
        return None;
    }
    let value: i64 = whole.replace('_', "").parse().ok()?;
    Some(if negative { -value } else { value })
}

/// A string pydantic's lax mode reads as a boolean.
fn lax_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
        "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
        _ => None,
    }
}

macro_rules! integers {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
                self.integer(visitor)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for NodeDe<'de, '_> {
    type Error = LocatedError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Null => self.located(visitor.visit_unit()),
            NodeKind::Bool(b) => self.located(visitor.visit_bool(*b)),
            NodeKind::Int(i) => self.located(visitor.visit_i64(*i)),
            NodeKind::Float(f) => self.located(visitor.visit_f64(*f)),
            NodeKind::Str(s) => self.located(visitor.visit_borrowed_str(s)),
            NodeKind::Seq(items) => self.visit_seq(items, visitor),
            NodeKind::Map(entries) => self.visit_map(entries, visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        let lax = match &self.node.kind {
            NodeKind::Bool(b) => Some(*b),
            NodeKind::Int(0) => Some(false),
            NodeKind::Int(1) => Some(true),
            NodeKind::Float(f) if *f == 0.0 => Some(false),
            NodeKind::Float(f) if *f == 1.0 => Some(true),
            NodeKind::Str(s) => lax_bool(s),
            _ => None,
        };
        match lax {
            Some(b) => self.located(visitor.visit_bool(b)),
            None => Err(self.invalid_type(&visitor)),
        }
    }

    integers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.float(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.float(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Str(s) => {
                let mut chars = s.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => self.located(visitor.visit_char(c)),
                    _ => self.located(visitor.visit_borrowed_str(s)),
                }
            }
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.string(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match self.node.kind {
            NodeKind::Null => self.located(visitor.visit_none()),
            _ => self.located(visitor.visit_some(self)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        match self.node.kind {
            NodeKind::Null => self.located(visitor.visit_unit()),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        self.located(visitor.visit_newtype_struct(self))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.seq(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, LocatedError> {
        self.seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        self.seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.map(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        self.map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        match &self.node.kind {
            NodeKind::Str(_) => self.located(visitor.visit_enum(EnumDe { de: self, tag: None })),
            NodeKind::Map(entries) => {
                let tag = entries.iter().enumerate().find(|(i, entry)| {
                    Some(*i) != self.skip && !self.skipped.entry(entry) && entry.0.as_str() == Some("type")
                });
                match tag {
                    Some((index, entry)) => {
                        self.located(visitor.visit_enum(EnumDe { de: self, tag: Some((index, entry)) }))
                    }
                    None => Err(self.locate(de::Error::missing_field("type"))),
                }
            }
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.string(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, LocatedError> {
        self.located(visitor.visit_unit())
    }
}

/// The elements of a sequence, without those left out; paths keep the document's indices.
struct SeqDe<'de, 'p> {
    items: &'de [Node],
    next: usize,
    taken: usize,
    parent: &'p PathRef<'p>,
    skipped: &'p Skipped,
}

impl SeqDe<'_, '_> {
    fn remaining(&self) -> usize {
        self.items.get(self.next..).unwrap_or_default().iter().filter(|n| !self.skipped.has(n)).count()
    }
}

impl<'de> SeqAccess<'de> for SeqDe<'de, '_> {
    type Error = LocatedError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, LocatedError> {
        while self.items.get(self.next).is_some_and(|n| self.skipped.has(n)) {
            self.next += 1;
        }
        let index = self.next;
        let Some(item) = self.items.get(index) else {
            return Ok(None);
        };
        self.next += 1;
        self.taken += 1;
        let path = PathRef::Index(self.parent, index);
        let de = NodeDe::new(item, &path, self.skipped);
        seed.deserialize(de).map(Some).map_err(|e| de.locate(e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining())
    }
}

/// The entries of a mapping, in document order, without the entry at `skip` and those left
/// out.
struct MapDe<'de, 'p> {
    entries: &'de [(Node, Node)],
    next: usize,
    taken: usize,
    skip: Option<usize>,
    pending: Option<&'de (Node, Node)>,
    parent: &'p PathRef<'p>,
    skipped: &'p Skipped,
}

impl MapDe<'_, '_> {
    fn left_out(&self, index: usize) -> bool {
        self.skip == Some(index) || self.entries.get(index).is_some_and(|e| self.skipped.entry(e))
    }

    fn remaining(&self) -> usize {
        (self.next..self.entries.len()).filter(|i| !self.left_out(*i)).count()
    }
}

impl<'de> MapAccess<'de> for MapDe<'de, '_> {
    type Error = LocatedError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, LocatedError> {
        while self.next < self.entries.len() && self.left_out(self.next) {
            self.next += 1;
        }
        let Some(entry) = self.entries.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        self.taken += 1;
        self.pending = Some(entry);
        let path = PathRef::Key(self.parent, &entry.0);
        let de = NodeDe::new(&entry.0, &path, self.skipped);
        seed.deserialize(de).map(Some).map_err(|e| de.locate(e))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, LocatedError> {
        let Some(entry) = self.pending.take() else {
            return Err(de::Error::custom("a map value was requested before its key"));
        };
        let path = PathRef::Key(self.parent, &entry.0);
        let de = NodeDe::new(&entry.1, &path, self.skipped);
        seed.deserialize(de).map_err(|e| de.locate(e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining())
    }
}

/// An enum read from a string (`tag` is `None`) or from a mapping with a `type` entry.
struct EnumDe<'de, 'p> {
    de: NodeDe<'de, 'p>,
    tag: Option<(usize, &'de (Node, Node))>,
}

impl<'de, 'p> EnumAccess<'de> for EnumDe<'de, 'p> {
    type Error = LocatedError;
    type Variant = VariantDe<'de, 'p>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), LocatedError> {
        let variant = match self.tag {
            None => seed.deserialize(self.de).map_err(|e| self.de.locate(e))?,
            Some((_, (key, value))) => {
                let path = PathRef::Key(self.de.path, key);
                let de = NodeDe::new(value, &path, self.de.skipped);
                seed.deserialize(de).map_err(|e| de.locate(e))?
            }
        };
        Ok((variant, VariantDe { de: self.de, tag: self.tag.map(|(index, _)| index) }))
    }
}

/// The content of an enum variant: nothing (string form) or the mapping minus `type`.
struct VariantDe<'de, 'p> {
    de: NodeDe<'de, 'p>,
    tag: Option<usize>,
}

impl<'de> VariantDe<'de, '_> {
    /// The mapping without its `type` entry.
    fn content(&self, tag: usize) -> NodeDe<'de, '_> {
        NodeDe { node: self.de.node, path: self.de.path, skip: Some(tag), skipped: self.de.skipped }
    }

    fn needs_fields(&self) -> LocatedError {
        let name = quote::excerpt(self.de.node.as_str().unwrap_or_default());
        self.de.locate(de::Error::custom(format_args!(
            "variant `{name}` has fields; expected a mapping with `type: {name}` and the variant's fields"
        )))
    }
}

impl<'de> VariantAccess<'de> for VariantDe<'de, '_> {
    type Error = LocatedError;

    fn unit_variant(self) -> Result<(), LocatedError> {
        let Some(tag) = self.tag else {
            return Ok(());
        };
        let NodeKind::Map(entries) = &self.de.node.kind else {
            return Ok(());
        };
        match entries.iter().enumerate().find(|(i, entry)| *i != tag && !self.de.skipped.entry(entry)) {
            None => Ok(()),
            Some((_, (key, _))) => {
                let path = PathRef::Key(self.de.path, key);
                Err(de::Error::unknown_field(&key_text(key), &[])).map_err(|e: LocatedError| e.locate(&path, key))
            }
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, LocatedError> {
        match self.tag {
            None => Err(self.needs_fields()),
            Some(tag) => {
                let content = self.content(tag);
                seed.deserialize(content).map_err(|e| content.locate(e))
            }
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, LocatedError> {
        Err(self.de.locate(de::Error::custom(
            "tuple enum variants cannot be written in YAML files; expected a variant with named fields",
        )))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, LocatedError> {
        match self.tag {
            None => Err(self.needs_fields()),
            Some(tag) => self.content(tag).map(visitor),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::super::yaml::parse;
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Campaign {
        schema_version: u32,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        model_free: bool,
        #[serde(default)]
        ratio: Option<f64>,
        targets: Vec<Target>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Target {
        id: String,
        transport: Transport,
        #[serde(default)]
        bindings: BTreeMap<String, BTreeMap<String, Value>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    enum Transport {
        #[serde(rename = "stdio")]
        Stdio(StdioTransport),
        #[serde(rename = "isolated_container")]
        IsolatedContainer(ContainerTransport),
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct StdioTransport {
        command: String,
        #[serde(default)]
        args: Vec<Value>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct ContainerTransport {
        image: String,
        uid: u32,
        #[serde(default)]
        gid: Option<u64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Op {
        Equals,
        Matches,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Predicate {
        op: Op,
        value: Value,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    enum Shape {
        #[serde(rename = "point")]
        Point,
        #[serde(rename = "circle")]
        Circle { radius: f64 },
        #[serde(rename = "pair")]
        Pair(u8, u8),
    }

    const GOOD: &str = "\
schema_version: 1
targets:
  - id: notes
    transport:
      type: stdio
      command: elengtis-support-note
      args: [--fast, {runner: canary}]
    bindings:
      basic:
        submit: send_note
        limit: 3
  - id: boxed
    transport: {type: isolated_container, image: 'img:1', uid: 1000}
";

    fn node(text: &str) -> Node {
        match parse(text) {
            Ok(node) => node,
            Err(e) => panic!("yaml error {e} in {text:?}"),
        }
    }

    fn load<T: DeserializeOwned + fmt::Debug>(text: &str) -> Result<T, DeError> {
        from_node(&node(text))
    }

    fn fail<T: DeserializeOwned + fmt::Debug>(text: &str) -> DeError {
        match load::<T>(text) {
            Ok(value) => panic!("{text:?} deserialized to {value:?}"),
            Err(e) => e,
        }
    }

    #[track_caller]
    fn check(e: &DeError, path: &str, line: usize, column: usize, message: &str) {
        assert_eq!(e.path.to_string(), path, "path of {e}");
        assert_eq!(e.mark, Mark::new(line, column), "mark of {e}");
        assert!(e.message.contains(message), "message of {e} lacks {message:?}");
    }

    /// `GOOD` with `from` replaced by `to`.
    fn edit(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from:?}");
        GOOD.replacen(from, to, 1)
    }

    #[test]
    fn good_campaign() {
        let campaign: Campaign = load(GOOD).expect("good campaign");
        assert_eq!(campaign.schema_version, 1);
        assert_eq!(campaign.model, None);
        assert_eq!(campaign.targets.len(), 2);
        assert_eq!(
            campaign.targets[0].transport,
            Transport::Stdio(StdioTransport {
                command: "elengtis-support-note".into(),
                args: vec![json!("--fast"), json!({"runner": "canary"})],
            })
        );
        assert_eq!(
            campaign.targets[1].transport,
            Transport::IsolatedContainer(ContainerTransport { image: "img:1".into(), uid: 1000, gid: None })
        );
        let basic = &campaign.targets[0].bindings["basic"];
        assert_eq!(basic["submit"], json!("send_note"));
        assert_eq!(basic["limit"], json!(3));
    }

    #[test]
    fn misspelled_field_at_depth() {
        let e = fail::<Campaign>(&edit("uid: 1000", "uidd: 1000"));
        check(&e, "targets[1].transport.uidd", 13, 59, "unknown field `uidd`, expected one of `image`, `uid`, `gid`");
        assert_eq!(
            e.to_string(),
            "targets[1].transport.uidd: unknown field `uidd`, expected one of `image`, `uid`, `gid`; did you mean `uid`?"
        );
        let e = fail::<Campaign>(&edit("      command:", "      comand:"));
        check(&e, "targets[0].transport.comand", 6, 7, "unknown field `comand`, expected `command` or `args`");
        let e = fail::<Campaign>(&edit("  - id: notes", "  - idd: notes"));
        check(&e, "targets[0].idd", 3, 5, "unknown field `idd`, expected one of `id`, `transport`, `bindings`");
        let e = fail::<Campaign>(&format!("{GOOD}extra: 1\n"));
        check(&e, "extra", 14, 1, "unknown field `extra`");
    }

    #[test]
    fn wrong_types() {
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: 'root'"));
        check(
            &e,
            "targets[1].transport.uid",
            13,
            64,
            "expected a whole number from 0 to 4294967295, found the string \"root\"",
        );
        let e = fail::<Campaign>(&edit("id: notes", "id: 123"));
        assert_eq!(e.message, "expected a string, found `123`");
        check(&e, "targets[0].id", 3, 9, "");
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: -1"));
        check(&e, "targets[1].transport.uid", 13, 64, "expected a whole number from 0 to 4294967295, found `-1`");
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: 4294967296"));
        check(
            &e,
            "targets[1].transport.uid",
            13,
            64,
            "expected a whole number from 0 to 4294967295, found `4294967296`",
        );
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: 1.5"));
        check(&e, "targets[1].transport.uid", 13, 64, "expected a whole number from 0 to 4294967295, found `1.5`");
        let e = fail::<Campaign>(&edit("schema_version: 1", "schema_version: '0x10'"));
        check(&e, "schema_version", 1, 17, "expected a whole number from 0 to 4294967295, found the string \"0x10\"");
        let e = fail::<Campaign>(&edit("schema_version: 1", "schema_version:"));
        // An empty value is placed at the colon.
        check(&e, "schema_version", 1, 15, "expected a whole number from 0 to 4294967295, found null");
        let e = fail::<Campaign>("schema_version: 1\ntargets: {a: 1}\n");
        check(&e, "targets", 2, 10, "expected a sequence, found a mapping");
        let e = fail::<Campaign>("schema_version: 1\ntargets: [1]\n");
        check(&e, "targets[0]", 2, 11, "expected a mapping, found `1`");
        let e = fail::<Campaign>("- 1\n");
        check(&e, "document root", 1, 1, "expected a mapping, found a sequence");
        let e = fail::<Campaign>("just text\n");
        check(&e, "document root", 1, 1, "expected a mapping, found the string \"just text\"");
        let e = fail::<Campaign>("schema_version: 1\nmodel_free: 'maybe'\ntargets: []\n");
        check(&e, "model_free", 2, 13, "expected a boolean (true or false), found the string \"maybe\"");
        let e = fail::<Campaign>("schema_version: 1\nmodel: 5\ntargets: []\n");
        check(&e, "model", 2, 8, "expected a string, found `5`");
        let e = fail::<Campaign>("schema_version: 1\nratio: '0.5'\ntargets: []\n");
        check(&e, "ratio", 2, 8, "expected a number");
    }

    #[test]
    fn scalar_conversions() {
        let c: Campaign = load("schema_version: 010\nmodel_free: yes\nmodel: ~\nratio: 2\ntargets: []\n").expect("ok");
        assert_eq!(c.schema_version, 8);
        assert!(c.model_free);
        assert_eq!(c.model, None);
        assert_eq!(c.ratio, Some(2.0));
        let c: Campaign =
            load("schema_version: 0x10\nmodel_free: Off\nmodel: 'yes'\nratio: .inf\ntargets: []\n").expect("ok");
        assert_eq!(c.schema_version, 16);
        assert!(!c.model_free);
        assert_eq!(c.model.as_deref(), Some("yes"));
        assert_eq!(c.ratio, Some(f64::INFINITY));
        // `1e3` is a string in PyYAML, so it is not a number.
        let e = fail::<Campaign>("schema_version: 1e3\ntargets: []\n");
        check(&e, "schema_version", 1, 17, "expected a whole number from 0 to 4294967295, found the string \"1e3\"");
        let c: Campaign = load("schema_version: 1\nmodel: 1e3\ntargets: []\n").expect("ok");
        assert_eq!(c.model.as_deref(), Some("1e3"));
        // Quoted "yes" stays a string.
        let v: BTreeMap<String, Value> = load("a: 'yes'\nb: yes\nc: \"010\"\nd: 010\ne: 1.0e+3\n").expect("ok");
        assert_eq!(v["a"], json!("yes"));
        assert_eq!(v["b"], json!(true));
        assert_eq!(v["c"], json!("010"));
        assert_eq!(v["d"], json!(8));
        assert_eq!(v["e"], json!(1000.0));
        let t: (char, i8, u64, f32) = load("[x, -128, 9223372036854775807, 1]").expect("ok");
        assert_eq!(t, ('x', -128, 9_223_372_036_854_775_807, 1.0));
    }

    #[test]
    fn lax_scalars_as_pydantic_reads_them() {
        for (text, want) in [
            ("3", 3),
            ("'3'", 3),
            ("' 3 '", 3),
            ("'1_0'", 10),
            ("'+5'", 5),
            ("'-0'", 0),
            ("'2.0'", 2),
            ("'08'", 8),
            ("true", 1),
            ("2.0", 2),
        ] {
            let v: i64 = load(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(v, want, "{text}");
        }
        for text in ["'0x10'", "'1e3'", "'2.'", "'.0'", "'1__0'", "'_1'", "'1_'", "'+ 3'", "'3.5'", "2.5", "''"] {
            assert!(load::<i64>(text).is_err(), "{text} is not an integer");
        }
        for (text, want) in [
            ("'yes'", true),
            ("'Y'", true),
            ("'t'", true),
            ("'1'", true),
            ("1", true),
            ("1.0", true),
            ("'OFF'", false),
            ("0", false),
            ("'n'", false),
        ] {
            let v: bool = load(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(v, want, "{text}");
        }
        for text in ["2", "0.5", "' true'", "''", "'null'", "~"] {
            assert!(load::<bool>(text).is_err(), "{text} is not a boolean");
        }
        // Strings stay strict: pydantic does not turn numbers into text either.
        assert!(load::<String>("1").is_err());
        assert!(load::<String>("true").is_err());
    }

    #[test]
    fn missing_field() {
        let e = fail::<Campaign>(&edit("      command: elengtis-support-note\n", ""));
        check(&e, "targets[0].transport", 5, 7, "missing field `command`");
        let e = fail::<Campaign>(&edit("  - id: boxed\n", "  - \n"));
        check(&e, "targets[1]", 13, 5, "missing field `id`");
        let e = fail::<Campaign>("targets: []\n");
        check(&e, "document root", 1, 1, "missing field `schema_version`");
    }

    #[test]
    fn enum_type_errors() {
        let e = fail::<Campaign>(&edit("type: stdio", "type: stdoi"));
        check(
            &e,
            "targets[0].transport.type",
            5,
            13,
            "unknown variant `stdoi`, expected `stdio` or `isolated_container`",
        );
        let e = fail::<Campaign>(&edit("      type: stdio\n", ""));
        check(&e, "targets[0].transport", 5, 7, "missing field `type`");
        assert_eq!(e.message, "missing field `type`");
        let e = fail::<Campaign>(&edit("type: stdio", "type: 0"));
        check(&e, "targets[0].transport.type", 5, 13, "expected a name, found `0`");
        let e = fail::<Campaign>(&edit("transport: {type: isolated_container, ", "transport: {"));
        check(&e, "targets[1].transport", 13, 16, "missing field `type`");
        let e = fail::<Campaign>(&edit("      type: stdio\n", "      type: stdio\n      foo: 1\n"));
        check(&e, "targets[0].transport.foo", 6, 7, "unknown field `foo`, expected `command` or `args`");
        // The `type` key may come anywhere in the mapping.
        let moved = edit(
            "{type: isolated_container, image: 'img:1', uid: 1000}",
            "{image: 'img:1', uid: 1000, type: isolated_container}",
        );
        let c: Campaign = load(&moved).expect("type last");
        assert!(matches!(c.targets[1].transport, Transport::IsolatedContainer(_)));
        // Content errors in a variant point into the mapping.
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: x"));
        check(
            &e,
            "targets[1].transport.uid",
            13,
            64,
            "expected a whole number from 0 to 4294967295, found the string \"x\"",
        );
        let e = fail::<Campaign>(&edit(", uid: 1000}", "}"));
        check(&e, "targets[1].transport", 13, 16, "missing field `uid`");
        // A newtype variant cannot be written as a bare string.
        let e = fail::<Campaign>(&edit(
            "transport: {type: isolated_container, image: 'img:1', uid: 1000}",
            "transport: stdio",
        ));
        check(&e, "targets[1].transport", 13, 16, "variant `stdio` has fields; expected a mapping with `type: stdio`");
        let e = fail::<Campaign>(&edit(
            "transport: {type: isolated_container, image: 'img:1', uid: 1000}",
            "transport: [stdio]",
        ));
        check(&e, "targets[1].transport", 13, 16, "expected a name or a mapping with a `type` field, found a sequence");
    }

    #[test]
    fn unit_struct_and_tuple_variants() {
        let p: Predicate = load("op: equals\nvalue: [1]\n").expect("ok");
        assert_eq!(p, Predicate { op: Op::Equals, value: json!([1]) });
        let p: Predicate = load("op: {type: matches}\nvalue: x\n").expect("ok");
        assert_eq!(p.op, Op::Matches);
        let e = fail::<Predicate>("op: equal\nvalue: 1\n");
        check(&e, "op", 1, 5, "unknown variant `equal`, expected `equals` or `matches`");
        let e = fail::<Predicate>("op: {type: equals, x: 1}\nvalue: 1\n");
        check(&e, "op.x", 1, 20, "unknown field `x`, there are no fields");
        let e = fail::<Predicate>("op: 1\nvalue: 1\n");
        check(&e, "op", 1, 5, "expected a name or a mapping with a `type` field, found `1`");
        let e = fail::<Predicate>("op: equals\n");
        check(&e, "document root", 1, 1, "missing field `value`");

        let shapes: Vec<Shape> = load("- point\n- {type: point}\n- {type: circle, radius: 2}\n").expect("ok");
        assert_eq!(shapes, vec![Shape::Point, Shape::Point, Shape::Circle { radius: 2.0 }]);
        let e = fail::<Vec<Shape>>("- {type: circle, radius: 2, x: 1}\n");
        check(&e, "[0].x", 1, 29, "unknown field `x`, expected `radius`");
        let e = fail::<Vec<Shape>>("- {type: circle}\n");
        check(&e, "[0]", 1, 3, "missing field `radius`");
        let e = fail::<Vec<Shape>>("- point\n- circle\n");
        check(&e, "[1]", 2, 3, "variant `circle` has fields");
        let e = fail::<Vec<Shape>>("- {type: pair}\n");
        check(&e, "[0]", 1, 3, "tuple enum variants");
        let e = fail::<Vec<Shape>>("- {type: square}\n");
        check(&e, "[0].type", 1, 10, "unknown variant `square`, expected one of `point`, `circle`, `pair`");
    }

    #[test]
    fn bindings_keep_order_and_values() {
        let text = "z: {b: 1, a: [x, {k: ~}], c: .5}\n\"my key\": {n: null}\n";
        let v: BTreeMap<String, serde_json::Map<String, Value>> = load(text).expect("ok");
        let keys: Vec<&String> = v["z"].keys().collect();
        assert_eq!(keys, ["b", "a", "c"]);
        assert_eq!(Value::Object(v["z"].clone()), json!({"b": 1, "a": ["x", {"k": null}], "c": 0.5}));
        let whole: Value = load(text).expect("ok");
        assert_eq!(whole, node(text).to_json());
        let e = fail::<BTreeMap<String, BTreeMap<String, u8>>>("\"my key\": {\"a.b\": 300}\n");
        check(&e, "[\"my key\"][\"a.b\"]", 1, 19, "expected a whole number from 0 to 255, found `300`");
    }

    #[test]
    fn first_problem_is_reported() {
        let e = fail::<Campaign>("schema_version: x\ntargets: 5\nbogus: 1\n");
        check(&e, "schema_version", 1, 17, "expected a whole number from 0 to 4294967295");
        let e = fail::<Campaign>("bogus: 1\nschema_version: x\n");
        check(&e, "bogus", 1, 1, "unknown field `bogus`");
    }

    fn fail_all<T: DeserializeOwned + fmt::Debug>(text: &str) -> Vec<DeError> {
        match from_node_all::<T>(&node(text)) {
            Ok(value) => panic!("{text:?} deserialized to {value:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn every_problem_is_reported() {
        // Three problems at the top level, in document order.
        let e = fail_all::<Campaign>("schema_version: x\ntargets: 5\nbogus: 1\n");
        assert_eq!(e.len(), 3, "{e:?}");
        check(&e[0], "schema_version", 1, 17, "expected a whole number from 0 to 4294967295");
        check(&e[1], "targets", 2, 10, "expected a sequence, found `5`");
        check(&e[2], "bogus", 3, 1, "unknown field `bogus`");
        // Problems in two targets and in a variant's content; what leaving them out causes
        // (the targets now lack `transport` and `id`) is not reported.
        let text =
            edit("type: stdio", "type: stdoi").replace("uid: 1000", "uid: x").replace("  - id: boxed\n", "  - id: 7\n");
        let e = fail_all::<Campaign>(&text);
        let found: Vec<String> = e.iter().map(ToString::to_string).collect();
        assert_eq!(e.len(), 3, "{found:?}");
        check(&e[0], "targets[0].transport.type", 5, 13, "unknown variant `stdoi`");
        check(&e[1], "targets[1].id", 12, 9, "expected a string, found `7`");
        check(&e[2], "targets[1].transport.uid", 13, 64, "expected a whole number from 0 to 4294967295");
        // A genuinely missing field next to a left-out one is still reported.
        let e = fail_all::<Campaign>("schema_version: 1\ntargets:\n  - transport: {type: stdio, command: 5}\n");
        assert_eq!(e.len(), 2, "{e:?}");
        check(&e[0], "targets[0].transport.command", 3, 39, "expected a string");
        check(&e[1], "targets[0]", 3, 5, "missing field `id`");
        // A good document reads; one problem is one problem.
        let c: Campaign = from_node_all(&node(GOOD)).expect("good");
        assert_eq!(c.targets.len(), 2);
        let e = fail_all::<Campaign>(&edit("uid: 1000", "uid: -1"));
        assert_eq!(e.len(), 1, "{e:?}");
        // Sequences keep the document's indices after an element is left out.
        let e = fail_all::<Vec<u8>>("[1, x, 2, y, 300]");
        let paths: Vec<String> = e.iter().map(|e| e.path.to_string()).collect();
        assert_eq!(paths, ["[1]", "[3]", "[4]"]);
        // The number reported is bounded.
        let many: String = (0..150).map(|i| format!("k{i}: x\n")).collect();
        assert_eq!(fail_all::<BTreeMap<String, u8>>(&many).len(), MAX_PROBLEMS);
    }

    #[test]
    fn aliases_deserialize() {
        let text = "\
schema_version: 1
targets:
  - id: a
    transport: &t {type: stdio, command: run}
  - id: b
    transport: *t
";
        let c: Campaign = load(text).expect("ok");
        assert_eq!(c.targets[0].transport, c.targets[1].transport);
        // Errors inside an alias point at the alias, then at the anchored text.
        let text = text.replace("command: run", "command: run, bad: 1");
        let e = fail::<Campaign>(&text);
        check(&e, "targets[0].transport.bad", 4, 47, "unknown field `bad`");
        let text = "schema_version: &v x\ntargets: []\nmodel: *v\n";
        let e = fail::<Campaign>(text);
        check(&e, "schema_version", 1, 17, "expected a whole number from 0 to 4294967295");
        let e = fail::<BTreeMap<String, u8>>("a: &v x\nb: *v\n");
        check(&e, "a", 1, 4, "expected a whole number from 0 to 255");
        let e = fail::<BTreeMap<String, String>>("a: &v [1]\nb: *v\n");
        check(&e, "a", 1, 4, "expected a string");
        let e = fail::<BTreeMap<String, Vec<String>>>("a: [x]\nb: &v [1]\n");
        check(&e, "b[0]", 2, 8, "expected a string, found `1`");
    }

    #[test]
    fn custom_errors_are_located() {
        #[derive(Debug, Deserialize)]
        #[serde(try_from = "String")]
        struct Id(#[allow(dead_code)] String);
        impl TryFrom<String> for Id {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                if s.chars().all(|c| c.is_ascii_lowercase()) {
                    Ok(Id(s))
                } else {
                    Err(format!("invalid id `{s}`, expected lowercase letters"))
                }
            }
        }
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Holder {
            #[allow(dead_code)]
            ids: Vec<Id>,
        }
        let e = fail::<Holder>("ids:\n  - ok\n  - Not OK\n");
        check(&e, "ids[1]", 3, 5, "invalid id `Not OK`, expected lowercase letters");
    }

    #[test]
    fn lengths_and_options() {
        let e = fail::<(u8, u8)>("[1, 2, 3]");
        check(&e, "document root", 1, 1, "invalid length 3, expected 2 elements in sequence");
        let e = fail::<(u8, u8)>("[1]");
        check(&e, "document root", 1, 1, "invalid length 1, expected a tuple of size 2");
        let v: Option<Vec<u8>> = load("~").expect("ok");
        assert_eq!(v, None);
        let v: Vec<Option<u8>> = load("[1, null, ]").expect("ok");
        assert_eq!(v, vec![Some(1), None]);
        let u: () = load("null").expect("ok");
        assert_eq!(u, ());
        let e = fail::<()>("1");
        check(&e, "document root", 1, 1, "expected null, found `1`");
        let c: char = load("'é'").expect("ok");
        assert_eq!(c, 'é');
        let e = fail::<char>("ab");
        check(&e, "document root", 1, 1, "expected a character");
        let e = fail::<u128>("x");
        check(&e, "document root", 1, 1, "expected a whole number from 0 to 18446744073709551615");
        let n: i128 = load("-5").expect("ok");
        assert_eq!(n, -5);
    }

    #[test]
    fn from_json_nodes_have_paths_but_no_marks() {
        let tree =
            Node::from_json(&json!({"schema_version": 1, "targets": [{"id": "a", "transport": {"type": "stdio"}}]}));
        let e = from_node::<Campaign>(&tree).expect_err("missing command");
        assert_eq!(e.path.to_string(), "targets[0].transport");
        assert_eq!(e.mark, Mark::UNKNOWN);
        assert_eq!(e.message, "missing field `command`");
    }

    #[test]
    fn deepest_document_fits_on_a_small_stack() {
        // 256 levels (the parser's limit) of block sequences, as `Value` and as `Vec`s.
        let text: String = (0..256).map(|i| format!("{}- \n", " ".repeat(i))).collect();
        let tree = node(&text);
        let worker = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                let value: Value = from_node(&tree).expect("value");
                let e = from_node::<Vec<Vec<u8>>>(&tree).expect_err("too shallow");
                (value, e)
            })
            .expect("spawn");
        let (mut value, e) = worker.join().expect("no stack overflow");
        assert_eq!(e.path.to_string(), "[0][0]");
        let mut depth = 0;
        while let Value::Array(mut items) = value {
            depth += 1;
            value = items.pop().unwrap_or(Value::Null);
        }
        assert_eq!(depth, 256);
    }

    #[test]
    fn path_display() {
        let p = Path::root();
        assert_eq!(p.to_string(), "document root");
        assert!(p.is_root());
        let p = p.key("targets").index(0).key("transport").key("uid");
        assert_eq!(p.to_string(), "targets[0].transport.uid");
        let p = Path::root().key("bindings").key("my key").key("x-y_1").index(3);
        assert_eq!(p.to_string(), "bindings[\"my key\"].x-y_1[3]");
        assert_eq!(Path::root().key("").to_string(), "[\"\"]");
        assert_eq!(Path::root().index(2).key("a").to_string(), "[2].a");
        assert_eq!(Path::root().key("a\"b").to_string(), "[\"a\\\"b\"]");
        assert_eq!(Path::root().key("a.b").key("c").to_string(), "[\"a.b\"].c");
        let e = DeError { path: Path::root().key("a"), mark: Mark::new(1, 1), message: "boom".into() };
        assert_eq!(e.to_string(), "a: boom");
    }

    #[test]
    fn found_path_points_at_node() {
        let text = edit("uid: 1000", "uidd: 1000");
        let tree = node(&text);
        let e = from_node::<Campaign>(&tree).expect_err("unknown field");
        // The path of an unknown field names the key; `find` reaches its value.
        let value = tree.find(&e.path).expect("found");
        assert_eq!(value.kind, NodeKind::Int(1000));
        let e = fail::<Campaign>(&edit("uid: 1000", "uid: x"));
        assert_eq!(tree.find(&e.path).map(|n| n.mark), None);
        assert_eq!(node(GOOD).find(&e.path).map(|n| n.mark), Some(e.mark));
    }
}
