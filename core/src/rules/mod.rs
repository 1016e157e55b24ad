//! Pure evaluation of scenario rule predicates: RFC 6901 JSON Pointers, the
//! three predicate operators (`equals`, `contains`, `matches`) and the
//! per-predicate evidence record.
//!
//! Nothing here performs I/O, and nothing depends on the rest of the crate:
//! every function is a deterministic function of its arguments, so proposal,
//! safety and verification rules can be evaluated (and their positive and
//! negative examples checked at load time) without a target, a model or a
//! clock.
//!
//! # Why the semantics follow Python
//!
//! Scenario files were written for the original Python implementation, whose
//! evaluator is, in full:
//!
//! ```python
//! def compare(actual, op, expected):
//!     if op == 'equals':   return actual == expected
//!     if op == 'contains': return expected in actual
//!     if op == 'matches':  return isinstance(actual, str) and re.search(expected, actual) is not None
//! # ... and around it:
//! try:
//!     actual = pointer(document, path); matched = compare(actual, op, expected)
//! except (KeyError, IndexError, TypeError, ValueError):
//!     actual, matched = None, False
//! ```
//!
//! A rule must classify the same tool calls the same way under both
//! implementations, so each operator reproduces the Python operator on
//! JSON-decoded values: [`python_equals`] is `==` (so `1 == 1.0` and
//! `True == 1`), [`python_contains`] is `in` (substring, list membership or
//! dict key, with Python's `TypeError`s), and [`python_search`] is `re.search`
//! over a pattern written in Python's `re` dialect, which [`compile_pattern`]
//! translates to `fancy-regex` syntax. [`evaluate`] mirrors the `try`/`except`:
//! any failure yields `actual: null, matched: false`.
//!
//! # Deviations from Python
//!
//! * **Pointers are RFC-strict.** Python used `int(segment)` for list
//!   indexes, which also accepts `-1` (the last element), `01`, `+1`, ` 1` and
//!   `1_0`; here an array index must be `0` or a decimal integer without a
//!   leading zero, anything else is "not found". A `~` not followed by `0` or
//!   `1` is a syntax error here, where Python looked the segment up literally.
//! * **Numbers** are compared exactly across integers and floats, as Python
//!   does, but `serde_json` (without `arbitrary_precision`) decodes integers
//!   outside the `i64`/`u64` range as floats, where Python keeps them exact.
//! * **Records on a `TypeError`** follow the Python code above: `actual` is
//!   `null` (the caught exception replaces it), not the resolved value. The
//!   message is kept in [`PredicateRecord::error`], which is not serialized.
//! * **Regular expressions**: see [`compile_pattern`] for the dialect
//!   translation and the few constructs that are rejected or differ. An
//!   invalid pattern, which Python only discovered (uncaught) when a rule
//!   first ran against a string, is a [`PatternError`] at compile time; a
//!   search that exceeds the backtracking budget (where Python would hang)
//!   fails with [`SearchError::Runtime`] and evaluates as not matched.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

// ---------------------------------------------------------------------------
// Operators and errors
// ---------------------------------------------------------------------------

/// A predicate operator, spelled `equals`, `contains` or `matches` in scenario
/// files and evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Python `actual == expected`.
    Equals,
    /// Python `expected in actual`.
    Contains,
    /// Python `isinstance(actual, str) and re.search(expected, actual)`.
    Matches,
}

impl Op {
    /// The operator's name as written in scenario files.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "equals",
            Self::Contains => "contains",
            Self::Matches => "matches",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A JSON Pointer that is malformed, or that does not resolve in a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The pointer is not valid RFC 6901 syntax.
    #[error("invalid json pointer {pointer:?}: {reason}")]
    Syntax {
        /// The pointer as written.
        pointer: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The pointer is well formed but names nothing in the document.
    #[error("json pointer {pointer:?} not found: {reason}")]
    NotFound {
        /// The pointer as written.
        pointer: String,
        /// Where resolution stopped, and why.
        reason: String,
    },
}

impl PointerError {
    /// Whether the pointer itself is malformed.
    #[must_use]
    pub const fn is_syntax(&self) -> bool {
        matches!(self, Self::Syntax { .. })
    }

    /// Whether the pointer is well formed but does not resolve.
    #[must_use]
    pub const fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// A regular expression that cannot be compiled, with Python's wording where
/// Python would also reject it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regular expression {pattern:?}: {message}")]
pub struct PatternError {
    pattern: String,
    message: String,
}

impl PatternError {
    /// The pattern as written.
    #[must_use]
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Why it was rejected.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The equivalent of a Python `TypeError` raised by an operator, for example
/// `'in <string>' requires string as left operand, not int`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TypeError {
    message: String,
}

impl TypeError {
    fn new(message: String) -> Self {
        Self { message }
    }

    /// The message, worded as Python words it.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Why [`python_search`] could not produce an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The subject is not a string (Python raises `TypeError`).
    #[error(transparent)]
    Type(#[from] TypeError),
    /// The regex engine gave up, for instance on exceeding its backtracking
    /// budget (where Python would run for an unbounded time).
    #[error("regular expression search failed: {0}")]
    Runtime(String),
}

/// The Python type name of a JSON-decoded value, as used in Python messages.
fn python_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

// ---------------------------------------------------------------------------
// JSON Pointer (RFC 6901)
// ---------------------------------------------------------------------------

fn pointer_syntax_error(pointer: &str, reason: &str) -> PointerError {
    PointerError::Syntax { pointer: pointer.to_owned(), reason: reason.to_owned() }
}

/// Splits a pointer into its unescaped reference tokens.
fn pointer_tokens(pointer: &str) -> Result<Vec<String>, PointerError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(pointer_syntax_error(pointer, "a non-empty pointer must start with '/'"));
    };
    rest.split('/')
        .map(|raw| {
            let mut token = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => token.push('~'),
                        Some('1') => token.push('/'),
                        _ => {
                            return Err(pointer_syntax_error(pointer, "'~' must be followed by '0' or '1'"));
                        }
                    }
                } else {
                    token.push(c);
                }
            }
            Ok(token)
        })
        .collect()
}

/// Checks that `pointer` is RFC 6901 syntax: empty (the whole document), or
/// `/`-separated reference tokens in which every `~` is followed by `0` or
/// `1`. Whether it resolves depends on the document; see [`pointer_get`].
///
/// # Errors
///
/// [`PointerError::Syntax`] when the pointer is malformed.
pub fn validate_pointer(pointer: &str) -> Result<(), PointerError> {
    pointer_tokens(pointer).map(drop)
}

/// An RFC 6901 array index: `0`, or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    // Digits that overflow `usize` index past the end of any array.
    Some(token.parse().unwrap_or(usize::MAX))
}

/// Resolves an RFC 6901 JSON Pointer in `doc`.
///
/// `""` is the whole document; otherwise each `/`-separated token is
/// unescaped (`~1` to `/`, then `~0` to `~`) and looked up: as a key in an
/// object, as an index in an array.
///
/// Array indexes follow the RFC strictly: `0` or a decimal integer without a
/// leading zero. This deviates from the original Python, which used
/// `int(token)` and so also accepted `-1` (counting from the end), `01`, `+1`
/// or ` 1`; such tokens, and `-`, are "not found" here. Descending into a
/// string, number, boolean or null is "not found", as Python's `TypeError` was.
///
/// # Errors
///
/// [`PointerError::Syntax`] for a malformed pointer, [`PointerError::NotFound`]
/// when a key is missing, an index is invalid or out of range, or the pointer
/// descends into a scalar.
pub fn pointer_get<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value, PointerError> {
    let not_found = |reason: String| PointerError::NotFound { pointer: pointer.to_owned(), reason };
    let mut current = doc;
    for token in pointer_tokens(pointer)? {
        current = match current {
            Value::Object(map) => map.get(&token).ok_or_else(|| not_found(format!("no key {token:?} in object")))?,
            Value::Array(items) => {
                let index = array_index(&token).ok_or_else(|| not_found(format!("{token:?} is not an array index")))?;
                items.get(index).ok_or_else(|| {
                    not_found(format!("index {token} is out of range for an array of length {}", items.len()))
                })?
            }
            scalar => {
                return Err(not_found(format!("cannot look up {token:?} in a {} value", python_type_name(scalar))));
            }
        };
    }
    Ok(current)
}

// ---------------------------------------------------------------------------
// Python `==` and `in`
// ---------------------------------------------------------------------------

/// A number as Python sees it: booleans are the integers 0 and 1.
#[derive(Clone, Copy)]
enum PyNumber {
    Int(i128),
    Float(f64),
}

fn python_number(value: &Value) -> Option<PyNumber> {
    match value {
        Value::Bool(b) => Some(PyNumber::Int(i128::from(*b))),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(PyNumber::Int(i128::from(i)))
            } else if let Some(u) = n.as_u64() {
                Some(PyNumber::Int(i128::from(u)))
            } else {
                n.as_f64().map(PyNumber::Float)
            }
        }
        _ => None,
    }
}

/// Exact integer/float comparison, as Python does it (no rounding of the int).
fn int_equals_float(int: i128, float: f64) -> bool {
    // Every integer here fits in 65 bits, so a float of magnitude 2^64 or
    // more cannot equal it; below that an integral float converts exactly.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    float.is_finite() && float.fract() == 0.0 && float.abs() < TWO_POW_64 && (float as i128) == int
}

fn numbers_equal(a: PyNumber, b: PyNumber) -> bool {
    match (a, b) {
        (PyNumber::Int(x), PyNumber::Int(y)) => x == y,
        (PyNumber::Float(x), PyNumber::Float(y)) => x == y,
        (PyNumber::Int(i), PyNumber::Float(f)) | (PyNumber::Float(f), PyNumber::Int(i)) => int_equals_float(i, f),
    }
}

/// Python `a == b` on JSON-decoded values.
///
/// Numbers compare by value across integers and floats (`1 == 1.0`), booleans
/// are the numbers 0 and 1 (`True == 1`, `False == 0.0`), `null` equals only
/// `null`, strings compare by value, lists element-wise, and objects as dicts:
/// the same keys with equal values, in any order.
#[must_use]
pub fn python_equals(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (python_number(a), python_number(b)) {
        return numbers_equal(x, y);
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| python_equals(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, p)| y.get(key).is_some_and(|q| python_equals(p, q)))
        }
        _ => false,
    }
}

/// Python `item in container` on JSON-decoded values.
///
/// * string container: `item` must be a string, tested as a substring (the
///   empty string is in every string);
/// * list container: any element [`python_equals`] `item`;
/// * object container: `item` is a key; a number, boolean or null is never a
///   key of a JSON object (`False`), a list or object is unhashable.
///
/// # Errors
///
/// A [`TypeError`] where Python raises one: a non-string item in a string,
/// an unhashable (list or object) item in an object, or a container that is a
/// number, boolean or null.
pub fn python_contains(container: &Value, item: &Value) -> Result<bool, TypeError> {
    match container {
        Value::String(haystack) => match item {
            Value::String(needle) => Ok(haystack.contains(needle.as_str())),
            other => Err(TypeError::new(format!(
                "'in <string>' requires string as left operand, not {}",
                python_type_name(other)
            ))),
        },
        Value::Array(items) => Ok(items.iter().any(|element| python_equals(element, item))),
        Value::Object(map) => match item {
            Value::String(key) => Ok(map.contains_key(key)),
            Value::Array(_) | Value::Object(_) => {
                Err(TypeError::new(format!("unhashable type: '{}'", python_type_name(item))))
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => Ok(false),
        },
        scalar => Err(TypeError::new(format!("argument of type '{}' is not iterable", python_type_name(scalar)))),
    }
}

// ---------------------------------------------------------------------------
// Python `re` patterns
// ---------------------------------------------------------------------------

/// Backtracking steps allowed per search before it fails instead of hanging.
const BACKTRACK_LIMIT: usize = 1_000_000;
/// Upper bound on the size of the backtracking program, against patterns
/// such as `((?=a)a{1000}){1000}` that expand enormously.
const MAX_PROGRAM_SIZE: usize = 200_000;

/// A Python `re` pattern, translated to `fancy-regex` syntax and compiled.
///
/// Compile once (at load time) with [`compile_pattern`], then search with
/// [`CompiledPattern::search`] or [`python_search`].
#[derive(Clone)]
pub struct CompiledPattern {
    source: String,
    translated: String,
    regex: fancy_regex::Regex,
}

impl CompiledPattern {
    /// The pattern as written (Python syntax).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The equivalent `fancy-regex` pattern that is actually run.
    #[must_use]
    pub fn translated(&self) -> &str {
        &self.translated
    }

    /// Python `re.search(pattern, haystack) is not None`.
    ///
    /// # Errors
    ///
    /// [`SearchError::Runtime`] when the engine gives up, such as on
    /// catastrophic backtracking.
    pub fn search(&self, haystack: &str) -> Result<bool, SearchError> {
        self.regex.is_match(haystack).map_err(|error| SearchError::Runtime(lowercase_first(&error.to_string())))
    }
}

impl fmt::Debug for CompiledPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledPattern")
            .field("source", &self.source)
            .field("translated", &self.translated)
            .finish_non_exhaustive()
    }
}

impl PartialEq for CompiledPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for CompiledPattern {}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_lowercase().chain(chars).collect())
}

/// Compiles a pattern written in Python's `re` dialect (Python 3.12, `str`
/// patterns, no flags argument), for use with `re.search` semantics.
///
/// The pattern is parsed following CPython's `re._parser`, so the same
/// patterns are rejected, with CPython's messages (`nothing to repeat at
/// position 0`, `bad escape \e`, `unknown group name 'x'`, ...). It is then
/// re-emitted for `fancy-regex`, which provides the backtracking features
/// (lookaround, backreferences, conditionals, atomic groups, possessive
/// quantifiers) that the plain `regex` crate lacks. Constructs whose meaning
/// differs are translated:
///
/// * `$` without `(?m)` is Python's "end, or before a final newline", emitted
///   as `(?=\n?\z)`; with `(?m)`, `(?m:$)`. `^` is `\A` or `(?m:^)`.
/// * `\Z` is the absolute end, `\z` (in `fancy-regex`, `\Z` also skips
///   trailing newlines).
/// * `\w`, `\W`, `\s`, `\S` and `\b`, `\B` use Python's definitions: `\w` is
///   letters, numbers and `_` (`[\p{L}\p{N}_]`, not the `regex` crate's wider
///   set with combining marks), `\s` includes `\x1c`-`\x1f`, and `\B` does not
///   match in an empty string (as in Python before 3.14). Under `(?a)` they
///   are ASCII-only.
/// * Case-insensitive matching: CPython's one difference from Unicode simple
///   case folding, the class `i I İ ı`, is spelled out, and under `(?a)` only
///   ASCII letters fold.
/// * `(?P<name>...)`, `(?P=name)` and `(?(name)...)` become numbered groups,
///   `\k<n>` and `(?(n)...)`, with Python's numbering. A conditional whose
///   branches are both empty (`(?(1))`) always matches, as in Python.
/// * A possessive repeat `X*+` becomes `(?>X)*+`: CPython matches each
///   iteration atomically, so `(?:a|^){2}+` fails on `"a"`.
/// * A quantifier on a lookaround or an empty group (valid in Python,
///   rejected by `fancy-regex`) is rewritten to an equivalent alternation.
/// * `{,n}`, octal escapes, `\x`/`\u`/`\U`, a `{` that does not start a valid
///   repeat (a literal in Python), `]`/`}` literals, character-class syntax
///   (`[]a]`, `[a-]`, and `[`, `&&`, `--`, `~~` as literals), comments and
///   the `x` (verbose), `s` and `m` flags are handled during translation.
///
/// The translation was checked against CPython on tens of thousands of
/// generated patterns and subjects. Rejected although Python accepts them:
/// `\N{...}` named characters and the deprecated `t` (template) flag; group
/// names must be alphanumeric-or-`_` identifiers (Python's
/// `str.isidentifier()` is slightly wider). Known differences that remain:
/// look-behinds need not be fixed-width (Python rejects variable-width ones)
/// and Python's look-behind group-reference checks are not replicated; a
/// case-insensitive backreference only matches text of the same UTF-8 length
/// (so not `k` against the Kelvin sign), and under `(?a)` it is
/// case-sensitive; a repeat whose iterations match the empty string can
/// differ when backreferences or conditionals inside it change between
/// iterations; Unicode tables are those of the `regex` crate (a newer Unicode
/// version than Python 3.12's); `fancy-regex` limits nesting depth (64) and
/// program size.
///
/// A search gives up after one million backtracking steps and reports a
/// [`SearchError::Runtime`] instead of hanging: on patterns that are
/// catastrophic for a backtracking engine, where Python would run for an
/// unbounded time (though `fancy-regex` answers many of those, such as
/// `(a+)+$`, instantly), and on some nested empty-matching repeats.
///
/// # Errors
///
/// A [`PatternError`] when Python would reject the pattern, when it uses an
/// unsupported construct, or when `fancy-regex` cannot compile the
/// translation.
pub fn compile_pattern(pattern: &str) -> Result<CompiledPattern, PatternError> {
    let error = |message: String| PatternError { pattern: pattern.to_owned(), message };
    let translated = Translator::new(pattern).run().map_err(error)?;
    let regex = fancy_regex::RegexBuilder::new(&translated)
        .backtrack_limit(BACKTRACK_LIMIT)
        .max_prog_size(MAX_PROGRAM_SIZE)
        .build()
        .map_err(|e| {
            error(format!(
                "the regex engine rejected its translation {translated:?}: {}",
                lowercase_first(&e.to_string())
            ))
        })?;
    Ok(CompiledPattern { source: pattern.to_owned(), translated, regex })
}

/// Python `re.search(pattern, actual) is not None`.
///
/// # Errors
///
/// [`SearchError::Type`] when `actual` is not a string (Python: `expected
/// string or bytes-like object, got 'int'`), [`SearchError::Runtime`] when the
/// engine gives up (backtracking budget exhausted).
pub fn python_search(actual: &Value, pattern: &CompiledPattern) -> Result<bool, SearchError> {
    match actual {
        Value::String(haystack) => pattern.search(haystack),
        other => Err(SearchError::Type(TypeError::new(format!(
            "expected string or bytes-like object, got '{}'",
            python_type_name(other)
        )))),
    }
}

/// Python's inline flags, as they apply at a point of the pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flags {
    ignore_case: bool,
    multiline: bool,
    dotall: bool,
    verbose: bool,
    ascii: bool,
    unicode: bool,
}

impl Flags {
    fn set(&mut self, flag: char, on: bool) {
        match flag {
            'i' => self.ignore_case = on,
            'm' => self.multiline = on,
            's' => self.dotall = on,
            'x' => self.verbose = on,
            'a' => self.ascii = on,
            'u' => self.unicode = on,
            _ => {}
        }
    }

    /// Whether `fancy-regex`'s own case folding applies. Under `(?a)` Python
    /// folds ASCII letters only, which the translation spells out instead.
    const fn fancy_ignore_case(self) -> bool {
        self.ignore_case && !self.ascii
    }

    fn any_common(self, other: Self) -> bool {
        (self.ignore_case && other.ignore_case)
            || (self.multiline && other.multiline)
            || (self.dotall && other.dotall)
            || (self.verbose && other.verbose)
    }
}

/// What kind of element was last emitted in a branch: this decides what a
/// following quantifier does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// Repeatable as is.
    Atom,
    /// Zero-width and not repeatable by `fancy-regex` (a lookaround, or a
    /// plain group around one): a quantifier is rewritten.
    ZeroWidth,
    /// A plain group with nothing in it, which `fancy-regex` drops from its
    /// syntax tree: a quantifier is rewritten, and it does not count when
    /// deciding whether an enclosing group is zero-width.
    Empty,
    /// Python's `AT` codes (`^ $ \A \Z \b \B`): "nothing to repeat".
    Anchor,
    /// Already quantified: "multiple repeat".
    Repeat,
    /// A quantified `ZeroWidth` item that is still a bare lookaround in the
    /// output: "multiple repeat", and zero-width for an enclosing group.
    ZeroWidthRepeat,
    /// A quantified `Empty` item that is still empty: "multiple repeat", and
    /// empty for an enclosing group.
    EmptyRepeat,
}

impl Item {
    /// Whether `fancy-regex` drops the item (so it does not count).
    const fn is_empty(self) -> bool {
        matches!(self, Self::Empty | Self::EmptyRepeat)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    Top,
    Capture(usize),
    /// `(?:...)` or `(?flags:...)`.
    Plain,
    Lookaround,
    Atomic,
    Conditional,
}

#[derive(Debug)]
struct Frame {
    kind: GroupKind,
    /// Flags to restore when the group closes.
    saved: Flags,
    /// Character position of the opening `(`, for messages.
    at: usize,
    /// Byte offset in the output where the group starts.
    out_start: usize,
    branches: usize,
    /// Items in the current branch (Python's count, for global flags).
    items: usize,
    /// Items in the current branch that are not `Item::is_empty`, and the
    /// kind of the last of them.
    solid_items: usize,
    last_solid: Option<Item>,
    /// The last item of the current branch and its output offset.
    last: Option<(Item, usize)>,
    /// Output offset where the current branch's text starts.
    branch_start: usize,
}

/// One element of a character class.
#[derive(Debug, Clone, Copy)]
enum ClassAtom {
    /// A code point (possibly a surrogate, which no Rust string contains).
    Literal(u32),
    /// `\d \D \s \S \w \W`.
    Category(char),
}

/// An escape outside a character class.
enum Escape {
    Literal(u32),
    Category(char),
    Anchor(char),
    Backref(usize),
}

/// A class that matches nothing: what a surrogate code point becomes.
const NEVER: &str = r"[^\x{0}-\x{10FFFF}]";
const PY_WORD: &str = r"[\p{L}\p{N}_]";
const ASCII_WORD: &str = "[0-9A-Za-z_]";
/// The letters CPython's `(?i)` treats as one case class.
const TURKISH_I: &str = r"iI\x{130}\x{131}";

fn is_flag_char(c: char) -> bool {
    "aiLmsuxt".contains(c)
}

fn is_verbose_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// An approximation of Python's `str.isidentifier()`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

fn is_surrogate(cp: u32) -> bool {
    (0xD800..=0xDFFF).contains(&cp)
}

/// A code point as a `fancy-regex` literal that is unambiguous anywhere
/// (inside or outside a class, after any construct). `None` for surrogates.
fn literal_text(cp: u32) -> Option<String> {
    let c = char::from_u32(cp)?;
    Some(if c.is_alphanumeric() || c == '_' { c.to_string() } else { format!("\\x{{{cp:X}}}") })
}

fn quantifier_text(lo: u64, hi: Option<u64>) -> String {
    match (lo, hi) {
        (0, None) => "*".to_owned(),
        (1, None) => "+".to_owned(),
        (0, Some(1)) => "?".to_owned(),
        (lo, None) => format!("{{{lo},}}"),
        (lo, Some(hi)) if lo == hi => format!("{{{lo}}}"),
        (lo, Some(hi)) => format!("{{{lo},{hi}}}"),
    }
}

/// CPython's deprecated TEMPLATE flag forbids every repeat; it is not worth
/// supporting.
const TEMPLATE_UNSUPPORTED: &str = "the deprecated template flag 't' is not supported";

/// Python's `MAXREPEAT`: repeat counts must stay below it.
const MAX_REPEAT: u64 = 4_294_967_295;

/// Translates Python `re` syntax to `fancy-regex` syntax, following the
/// structure of CPython's `re._parser` so that the same patterns are
/// accepted and rejected.
struct Translator {
    src: Vec<char>,
    pos: usize,
    out: String,
    flags: Flags,
    frames: Vec<Frame>,
    /// Capture groups opened so far.
    groups: usize,
    /// `closed[g]` once group `g` has been closed (index 0 unused).
    closed: Vec<bool>,
    names: HashMap<String, usize>,
    /// Numeric conditional references, checked against the final group
    /// count: `(group, position)`.
    conditional_refs: Vec<(usize, usize)>,
}

type Translation<T> = Result<T, String>;

impl Translator {
    fn new(pattern: &str) -> Self {
        Self {
            src: pattern.chars().collect(),
            pos: 0,
            out: String::with_capacity(pattern.len() * 2),
            flags: Flags::default(),
            frames: vec![Frame {
                kind: GroupKind::Top,
                saved: Flags::default(),
                at: 0,
                out_start: 0,
                branches: 1,
                items: 0,
                solid_items: 0,
                last_solid: None,
                last: None,
                branch_start: 0,
            }],
            groups: 0,
            closed: vec![true],
            names: HashMap::new(),
            conditional_refs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.src.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Like `bump`, but a backslash and the character after it are one
    /// token, as in CPython's tokenizer: a backslash is returned and its
    /// partner skipped, so an escaped `)` or newline does not end a comment.
    fn bump_token(&mut self) -> Option<char> {
        let c = self.bump()?;
        if c == '\\' {
            self.pos += 1;
        }
        Some(c)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn frame(&mut self) -> &mut Frame {
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn run(mut self) -> Translation<String> {
        // CPython's tokenizer pairs every backslash with the next character
        // before parsing, so a final unpaired backslash is an error anywhere,
        // even inside a comment.
        let mut chars = self.src.iter();
        while let Some(c) = chars.next() {
            if *c == '\\' && chars.next().is_none() {
                return Err("bad escape (end of pattern)".to_owned());
            }
        }
        while let Some(c) = self.peek() {
            let at = self.pos;
            self.pos += 1;
            match c {
                '|' => self.alternation(at)?,
                ')' => self.close_group(at)?,
                _ if self.flags.verbose && is_verbose_whitespace(c) => {}
                '#' if self.flags.verbose => while self.bump_token().is_some_and(|c| c != '\n') {},
                '\\' => self.escape()?,
                '[' => self.class(at)?,
                '*' => self.quantify(at, 0, None)?,
                '+' => self.quantify(at, 1, None)?,
                '?' => self.quantify(at, 0, Some(1))?,
                '{' => self.brace(at)?,
                '.' => {
                    let text = if self.flags.dotall { "(?s:.)" } else { "." };
                    self.push_item(Item::Atom, text);
                }
                '(' => self.open_group(at)?,
                '^' => {
                    let text = if self.flags.multiline { "(?m:^)" } else { r"\A" };
                    self.push_item(Item::Anchor, text);
                }
                '$' => {
                    let text = if self.flags.multiline { "(?m:$)" } else { r"(?=\n?\z)" };
                    self.push_item(Item::Anchor, text);
                }
                _ => self.push_literal(u32::from(c)),
            }
        }
        if self.frames.len() > 1 {
            let at = self.frame().at;
            return Err(format!("missing ), unterminated subpattern at position {at}"));
        }
        if let Some((group, at)) = self.conditional_refs.iter().find(|(group, _)| *group > self.groups) {
            return Err(format!("invalid group reference {group} at position {at}"));
        }
        if self.flags.ascii && self.flags.unicode {
            return Err("ASCII and UNICODE flags are incompatible".to_owned());
        }
        if self.flags.fancy_ignore_case() {
            self.out.insert_str(0, "(?i)");
        }
        Ok(self.out)
    }

    fn push_item(&mut self, item: Item, text: &str) {
        let start = self.out.len();
        self.out.push_str(text);
        self.register_item(item, start);
    }

    /// Records a new item, emitted from output offset `start`, in the
    /// current branch.
    fn register_item(&mut self, item: Item, start: usize) {
        let frame = self.frame();
        frame.items += 1;
        frame.last = Some((item, start));
        if !item.is_empty() {
            frame.solid_items += 1;
            frame.last_solid = Some(item);
        }
    }

    fn push_literal(&mut self, cp: u32) {
        let text = self.case_insensitive_literal(cp).or_else(|| literal_text(cp)).unwrap_or_else(|| NEVER.to_owned());
        self.push_item(Item::Atom, &text);
    }

    /// A literal that `fancy-regex`'s case folding would get wrong under
    /// `(?i)`, spelled out as a class: ASCII letters under `(?a)`, and the
    /// Turkish i letters `i I İ ı`, which CPython treats as one case class
    /// (the only difference between its case folding and Unicode simple
    /// case folding).
    fn case_insensitive_literal(&self, cp: u32) -> Option<String> {
        if !self.flags.ignore_case {
            return None;
        }
        let c = char::from_u32(cp)?;
        if self.flags.ascii {
            c.is_ascii_alphabetic().then(|| format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase()))
        } else {
            matches!(c, 'i' | 'I' | '\u{130}' | '\u{131}').then(|| format!("[{TURKISH_I}]"))
        }
    }

    /// Members to add to a class under `(?i)` so that it matches what CPython
    /// matches; `spans` are the class's literal characters and ranges.
    fn case_insensitive_class_extras(&self, spans: &[(u32, u32)]) -> String {
        let mut extras = String::new();
        if !self.flags.ignore_case {
            return extras;
        }
        if self.flags.ascii {
            for &(lo, hi) in spans {
                for (start, end, shifted) in [(0x41, 0x5A, 0x61), (0x61, 0x7A, 0x41)] {
                    let (from, to) = (lo.max(start), hi.min(end));
                    if from <= to {
                        push_class_range(&mut extras, from - start + shifted, to - start + shifted);
                    }
                }
            }
        } else {
            let covers = |cp: u32| spans.iter().any(|&(lo, hi)| lo <= cp && cp <= hi);
            if [0x49, 0x69, 0x130, 0x131].into_iter().any(covers) {
                extras.push_str(TURKISH_I);
            }
        }
        extras
    }

    /// Wraps a synthesized construct so that an active `(?i)` does not case
    /// fold it (Python does not fold categories or boundaries).
    fn case_sensitive(&self, text: &str) -> String {
        if self.flags.fancy_ignore_case() { format!("(?-i:{text})") } else { text.to_owned() }
    }

    fn alternation(&mut self, at: usize) -> Translation<()> {
        let frame = self.frame();
        if frame.kind == GroupKind::Conditional {
            if frame.branches >= 2 {
                return Err(format!("conditional backref with more than two branches at position {at}"));
            }
            self.guard_conditional_yes_branch();
        }
        let branch_start = self.out.len() + 1;
        let frame = self.frame();
        frame.branches += 1;
        frame.items = 0;
        frame.solid_items = 0;
        frame.last_solid = None;
        frame.last = None;
        frame.branch_start = branch_start;
        self.out.push('|');
        Ok(())
    }

    /// `fancy-regex` reads a conditional whose branches are both empty, such
    /// as `(?(1))` or `(?(1)|)`, as "fail unless group 1 matched", whereas in
    /// Python it always matches the empty string. Starting an empty-looking
    /// yes branch with `(?=)`, which matches the empty string, keeps the
    /// Python meaning. Called when the yes branch ends.
    fn guard_conditional_yes_branch(&mut self) {
        let start = self.frame().branch_start;
        let looks_empty = self.out[start..].chars().all(|c| matches!(c, '(' | ')' | '?' | ':' | '|' | 'i' | '-'));
        if looks_empty {
            self.out.insert_str(start, "(?=)");
        }
    }

    fn quantify(&mut self, at: usize, lo: u64, hi: Option<u64>) -> Translation<()> {
        let (item, start) = match self.frame().last {
            None | Some((Item::Anchor, _)) => {
                return Err(format!("nothing to repeat at position {at}"));
            }
            Some((Item::Repeat | Item::ZeroWidthRepeat | Item::EmptyRepeat, _)) => {
                return Err(format!("multiple repeat at position {at}"));
            }
            Some(last) => last,
        };
        let mode = if self.eat('?') {
            "?"
        } else if self.eat('+') {
            "+"
        } else {
            ""
        };
        let mut repeated = Item::Repeat;
        if matches!(item, Item::ZeroWidth | Item::Empty) {
            // `fancy-regex` refuses to repeat a lookaround or an empty group.
            // Repeating something zero-width is the same as doing it at most
            // once, so rewrite to an equivalent that keeps any groups inside.
            if lo > 0 && hi != Some(0) {
                repeated = if item == Item::Empty { Item::EmptyRepeat } else { Item::ZeroWidthRepeat };
            }
            let inner = self.out.split_off(start);
            let rewritten = if hi == Some(0) {
                format!("(?:(?!){inner}|)")
            } else if lo > 0 {
                inner
            } else {
                match mode {
                    "?" => format!("(?:|{inner})"),
                    "+" => format!("(?>{inner}|)"),
                    _ => format!("(?:{inner}|)"),
                }
            };
            self.out.push_str(&rewritten);
        } else {
            if mode == "+" && self.out[start..].starts_with('(') {
                // CPython matches each iteration of a possessive repeat
                // atomically too: `(?:a|^){2}+` fails on "a" although
                // `(?>(?:a|^){2})` matches.
                self.out.insert_str(start, "(?>");
                self.out.push(')');
            }
            self.out.push_str(&quantifier_text(lo, hi));
            self.out.push_str(mode);
        }
        let frame = self.frame();
        frame.last = Some((repeated, start));
        match (item.is_empty(), repeated.is_empty()) {
            (true, true) => {}
            (true, false) => {
                frame.solid_items += 1;
                frame.last_solid = Some(repeated);
            }
            (false, _) => frame.last_solid = Some(repeated),
        }
        Ok(())
    }

    fn take_digits(&mut self) -> String {
        let mut digits = String::new();
        while let Some(c) = self.peek().filter(char::is_ascii_digit) {
            digits.push(c);
            self.pos += 1;
        }
        digits
    }

    fn brace(&mut self, at: usize) -> Translation<()> {
        if self.peek() == Some('}') {
            self.push_literal(u32::from('{'));
            return Ok(());
        }
        let resume = self.pos;
        let lo_digits = self.take_digits();
        let hi_digits = if self.eat(',') { Some(self.take_digits()) } else { None };
        if !self.eat('}') {
            // Not a repeat: Python reads the `{` as a literal.
            self.pos = resume;
            self.push_literal(u32::from('{'));
            return Ok(());
        }
        let count = |digits: &str| -> Translation<u64> {
            digits
                .parse::<u64>()
                .ok()
                .filter(|n| *n < MAX_REPEAT)
                .ok_or_else(|| "the repetition number is too large".to_owned())
        };
        let lo = if lo_digits.is_empty() { 0 } else { count(&lo_digits)? };
        let hi = match hi_digits {
            None => Some(lo),
            Some(digits) if digits.is_empty() => None,
            Some(digits) => Some(count(&digits)?),
        };
        if hi.is_some_and(|hi| hi < lo) {
            return Err(format!("min repeat greater than max repeat at position {}", at + 1));
        }
        self.quantify(at, lo, hi)
    }

    fn hex_escape(&mut self, letter: char, width: usize) -> Translation<u32> {
        let mut digits = String::new();
        while digits.len() < width {
            match self.peek().filter(char::is_ascii_hexdigit) {
                Some(c) => {
                    digits.push(c);
                    self.pos += 1;
                }
                None => break,
            }
        }
        if digits.len() != width {
            return Err(format!("incomplete escape \\{letter}{digits}"));
        }
        match u32::from_str_radix(&digits, 16) {
            Ok(cp) if cp <= 0x10_FFFF => Ok(cp),
            _ => Err(format!("bad escape \\{letter}{digits}")),
        }
    }

    /// Reads up to `more` further octal digits after `first`.
    fn octal_escape(&mut self, first: char, more: usize) -> Translation<u32> {
        let mut digits = String::from(first);
        for _ in 0..more {
            match self.peek().filter(|c| ('0'..='7').contains(c)) {
                Some(c) => {
                    digits.push(c);
                    self.pos += 1;
                }
                None => break,
            }
        }
        match u32::from_str_radix(&digits, 8) {
            Ok(cp) if cp <= 0o377 => Ok(cp),
            _ => Err(format!("octal escape value \\{digits} outside of range 0-0o377")),
        }
    }

    /// An escape outside a class; the backslash is consumed.
    fn read_escape(&mut self) -> Translation<Escape> {
        let at = self.pos - 1;
        let Some(c) = self.bump() else {
            return Err("bad escape (end of pattern)".to_owned());
        };
        Ok(match c {
            'A' | 'Z' | 'b' | 'B' => Escape::Anchor(c),
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => Escape::Category(c),
            'a' => Escape::Literal(0x07),
            'f' => Escape::Literal(0x0C),
            'n' => Escape::Literal(0x0A),
            'r' => Escape::Literal(0x0D),
            't' => Escape::Literal(0x09),
            'v' => Escape::Literal(0x0B),
            'x' => Escape::Literal(self.hex_escape('x', 2)?),
            'u' => Escape::Literal(self.hex_escape('u', 4)?),
            'U' => Escape::Literal(self.hex_escape('U', 8)?),
            'N' => {
                return Err("named unicode escapes (\\N{...}) are not supported; use \\u or \\U".to_owned());
            }
            '0' => Escape::Literal(self.octal_escape('0', 2)?),
            '1'..='9' => {
                let mut digits = String::from(c);
                if let Some(second) = self.peek().filter(char::is_ascii_digit) {
                    self.pos += 1;
                    digits.push(second);
                    let is_octal = |d: char| ('0'..='7').contains(&d);
                    if is_octal(c) && is_octal(second) && self.peek().is_some_and(is_octal) {
                        self.pos += 1;
                        let cp = u32::from_str_radix(&self.src[at + 1..self.pos].iter().collect::<String>(), 8)
                            .map_err(|e| e.to_string())?;
                        if cp > 0o377 {
                            let text: String = self.src[at..self.pos].iter().collect();
                            return Err(format!("octal escape value {text} outside of range 0-0o377"));
                        }
                        return Ok(Escape::Literal(cp));
                    }
                }
                let group: usize = digits.parse().map_err(|_| "bad escape".to_owned())?;
                if group > self.groups {
                    return Err(format!("invalid group reference {group} at position {}", at + 1));
                }
                if !self.closed[group] {
                    return Err(format!("cannot refer to an open group at position {at}"));
                }
                Escape::Backref(group)
            }
            c if c.is_ascii_alphabetic() => return Err(format!("bad escape \\{c} at position {at}")),
            c => Escape::Literal(u32::from(c)),
        })
    }

    fn category_outside_class(&self, c: char) -> String {
        let text = match (c, self.flags.ascii) {
            ('d', false) => r"\d",
            ('D', false) => r"\D",
            ('s', false) => r"[\s\x{1C}-\x{1F}]",
            ('S', false) => r"[^\s\x{1C}-\x{1F}]",
            ('w', false) => PY_WORD,
            ('W', false) => r"[^\p{L}\p{N}_]",
            ('d', true) => "[0-9]",
            ('D', true) => "[^0-9]",
            ('s', true) => r"[\x{9}-\x{D}\x{20}]",
            ('S', true) => r"[^\x{9}-\x{D}\x{20}]",
            ('w', true) => ASCII_WORD,
            _ => "[^0-9A-Za-z_]",
        };
        self.case_sensitive(text)
    }

    fn word_boundary(&self, negated: bool) -> String {
        let w = if self.flags.ascii { ASCII_WORD } else { PY_WORD };
        let text = if negated {
            // Python (before 3.14) never matches `\B` in an empty string.
            format!("(?:(?<={w})(?={w})|(?<!{w})(?!{w})(?s:(?<=.)|(?=.)))")
        } else {
            format!("(?:(?<={w})(?!{w})|(?<!{w})(?={w}))")
        };
        self.case_sensitive(&text)
    }

    fn escape(&mut self) -> Translation<()> {
        match self.read_escape()? {
            Escape::Literal(cp) => self.push_literal(cp),
            Escape::Category(c) => {
                let text = self.category_outside_class(c);
                self.push_item(Item::Atom, &text);
            }
            Escape::Anchor(c) => {
                let text = match c {
                    'A' => r"\A".to_owned(),
                    'Z' => r"\z".to_owned(),
                    'b' => self.word_boundary(false),
                    _ => self.word_boundary(true),
                };
                self.push_item(Item::Anchor, &text);
            }
            Escape::Backref(group) => self.push_item(Item::Atom, &format!(r"\k<{group}>")),
        }
        Ok(())
    }

    /// An escape inside a class; the backslash is consumed.
    fn class_escape(&mut self) -> Translation<ClassAtom> {
        let Some(c) = self.bump() else {
            return Err("bad escape (end of pattern)".to_owned());
        };
        Ok(match c {
            'a' => ClassAtom::Literal(0x07),
            'b' => ClassAtom::Literal(0x08),
            'f' => ClassAtom::Literal(0x0C),
            'n' => ClassAtom::Literal(0x0A),
            'r' => ClassAtom::Literal(0x0D),
            't' => ClassAtom::Literal(0x09),
            'v' => ClassAtom::Literal(0x0B),
            'd' | 'D' | 's' | 'S' | 'w' | 'W' => ClassAtom::Category(c),
            'x' => ClassAtom::Literal(self.hex_escape('x', 2)?),
            'u' => ClassAtom::Literal(self.hex_escape('u', 4)?),
            'U' => ClassAtom::Literal(self.hex_escape('U', 8)?),
            'N' => {
                return Err("named unicode escapes (\\N{...}) are not supported; use \\u or \\U".to_owned());
            }
            '0'..='7' => ClassAtom::Literal(self.octal_escape(c, 2)?),
            c if c.is_ascii_alphanumeric() => return Err(format!("bad escape \\{c}")),
            c => ClassAtom::Literal(u32::from(c)),
        })
    }

    fn class_category(&self, c: char) -> &'static str {
        match (c, self.flags.ascii) {
            ('d', false) => r"\d",
            ('D', false) => r"\D",
            ('s', false) => r"\s\x{1C}-\x{1F}",
            ('S', false) => r"[^\s\x{1C}-\x{1F}]",
            ('w', false) => r"\p{L}\p{N}_",
            ('W', false) => r"[^\p{L}\p{N}_]",
            ('d', true) => "0-9",
            ('D', true) => "[^0-9]",
            ('s', true) => r"\x{9}-\x{D}\x{20}",
            ('S', true) => r"[^\x{9}-\x{D}\x{20}]",
            ('w', true) => "0-9A-Za-z_",
            _ => "[^0-9A-Za-z_]",
        }
    }

    fn class(&mut self, at: usize) -> Translation<()> {
        let negate = self.eat('^');
        let mut body = String::new();
        let mut spans = Vec::new();
        let mut seen_item = false;
        let unterminated = || format!("unterminated character set at position {at}");
        loop {
            let item_at = self.pos;
            let Some(c) = self.bump() else {
                return Err(unterminated());
            };
            if c == ']' && seen_item {
                break;
            }
            let first = if c == '\\' { self.class_escape()? } else { ClassAtom::Literal(u32::from(c)) };
            let first_end = self.pos;
            if self.eat('-') {
                let Some(d) = self.bump() else {
                    return Err(unterminated());
                };
                if d == ']' {
                    self.push_class_atom(&mut body, &mut spans, first);
                    self.push_class_atom(&mut body, &mut spans, ClassAtom::Literal(u32::from('-')));
                    break;
                }
                let second_at = self.pos - 1;
                let second = if d == '\\' { self.class_escape()? } else { ClassAtom::Literal(u32::from(d)) };
                let bad_range = || {
                    let this: String = self.src[item_at..first_end].iter().collect();
                    let that: String = self.src[second_at..self.pos].iter().collect();
                    format!("bad character range {this}-{that} at position {item_at}")
                };
                match (first, second) {
                    (ClassAtom::Literal(lo), ClassAtom::Literal(hi)) if lo <= hi => {
                        push_class_range(&mut body, lo, hi);
                        spans.push((lo, hi));
                    }
                    _ => return Err(bad_range()),
                }
            } else {
                self.push_class_atom(&mut body, &mut spans, first);
            }
            seen_item = true;
        }
        body.push_str(&self.case_insensitive_class_extras(&spans));
        let text = match (body.is_empty(), negate) {
            // Only surrogates, which no string contains.
            (true, false) => NEVER.to_owned(),
            (true, true) => r"(?s:.)".to_owned(),
            (false, false) => format!("[{body}]"),
            (false, true) => format!("[^{body}]"),
        };
        self.push_item(Item::Atom, &text);
        Ok(())
    }

    fn push_class_atom(&self, body: &mut String, spans: &mut Vec<(u32, u32)>, atom: ClassAtom) {
        match atom {
            ClassAtom::Literal(cp) => {
                spans.push((cp, cp));
                if let Some(text) = literal_text(cp) {
                    body.push_str(&text);
                }
            }
            ClassAtom::Category(c) => body.push_str(self.class_category(c)),
        }
    }

    fn group_name(&mut self, terminator: char) -> Translation<String> {
        let mut name = String::new();
        loop {
            match self.bump_token() {
                None if name.is_empty() => return Err("missing group name".to_owned()),
                None => return Err(format!("missing {terminator}, unterminated name")),
                Some(c) if c == terminator => break,
                Some(c) => name.push(c),
            }
        }
        if name.is_empty() {
            return Err("missing group name".to_owned());
        }
        Ok(name)
    }

    fn checked_group_name(&mut self, terminator: char) -> Translation<String> {
        let name = self.group_name(terminator)?;
        if is_identifier(&name) { Ok(name) } else { Err(format!("bad character in group name '{name}'")) }
    }

    fn open_frame(&mut self, kind: GroupKind, at: usize, text: &str) {
        let out_start = self.out.len();
        self.out.push_str(text);
        self.frames.push(Frame {
            kind,
            saved: self.flags,
            at,
            out_start,
            branches: 1,
            items: 0,
            solid_items: 0,
            last_solid: None,
            last: None,
            branch_start: self.out.len(),
        });
    }

    fn open_capture(&mut self, at: usize, name: Option<String>) -> Translation<()> {
        self.groups += 1;
        let group = self.groups;
        self.closed.push(false);
        if let Some(name) = name {
            if let Some(previous) = self.names.get(&name) {
                return Err(format!("redefinition of group name '{name}' as group {group}; was group {previous}"));
            }
            self.names.insert(name, group);
        }
        // Names are resolved here, so the output only has numbered groups.
        self.open_frame(GroupKind::Capture(group), at, "(");
        Ok(())
    }

    fn open_group(&mut self, at: usize) -> Translation<()> {
        if !self.eat('?') {
            return self.open_capture(at, None);
        }
        let unexpected_end = || "unexpected end of pattern".to_owned();
        let c = self.bump().ok_or_else(unexpected_end)?;
        match c {
            'P' => {
                if self.eat('<') {
                    let name = self.checked_group_name('>')?;
                    self.open_capture(at, Some(name))
                } else if self.eat('=') {
                    let name = self.checked_group_name(')')?;
                    let group = *self.names.get(&name).ok_or_else(|| format!("unknown group name '{name}'"))?;
                    if !self.closed[group] {
                        return Err(format!("cannot refer to an open group at position {at}"));
                    }
                    self.push_item(Item::Atom, &format!(r"\k<{group}>"));
                    Ok(())
                } else {
                    let c = self.bump().ok_or_else(unexpected_end)?;
                    Err(format!("unknown extension ?P{c} at position {}", at + 1))
                }
            }
            ':' => {
                self.open_frame(GroupKind::Plain, at, "(?:");
                Ok(())
            }
            '#' => loop {
                match self.bump_token() {
                    None => return Err("missing ), unterminated comment".to_owned()),
                    Some(')') => return Ok(()),
                    Some(_) => {}
                }
            },
            '=' => {
                self.open_frame(GroupKind::Lookaround, at, "(?=");
                Ok(())
            }
            '!' => {
                self.open_frame(GroupKind::Lookaround, at, "(?!");
                Ok(())
            }
            '<' => match self.bump() {
                Some('=') => {
                    self.open_frame(GroupKind::Lookaround, at, "(?<=");
                    Ok(())
                }
                Some('!') => {
                    self.open_frame(GroupKind::Lookaround, at, "(?<!");
                    Ok(())
                }
                Some(c) => Err(format!("unknown extension ?<{c} at position {}", at + 1)),
                None => Err(unexpected_end()),
            },
            '(' => self.open_conditional(at),
            '>' => {
                self.open_frame(GroupKind::Atomic, at, "(?>");
                Ok(())
            }
            c if is_flag_char(c) || c == '-' => self.inline_flags(at, c),
            c => Err(format!("unknown extension ?{c} at position {}", at + 1)),
        }
    }

    fn open_conditional(&mut self, at: usize) -> Translation<()> {
        let name = self.group_name(')')?;
        let group = if is_identifier(&name) {
            *self.names.get(&name).ok_or_else(|| format!("unknown group name '{name}'"))?
        } else if name.bytes().all(|b| b.is_ascii_digit()) {
            let group = name.parse::<usize>().map_err(|_| format!("invalid group reference {name}"))?;
            if group == 0 {
                return Err("bad group number".to_owned());
            }
            self.conditional_refs.push((group, at + 3));
            group
        } else {
            return Err(format!("bad character in group name '{name}'"));
        };
        self.open_frame(GroupKind::Conditional, at, &format!("(?({group})"));
        Ok(())
    }

    /// `(?flags)` or `(?flags-flags:...)`; `first` is the first flag or `-`.
    fn inline_flags(&mut self, at: usize, first: char) -> Translation<()> {
        let mut add = Flags::default();
        let mut remove = Flags::default();
        let mut c = first;
        if c != '-' {
            loop {
                match c {
                    'L' => {
                        return Err("bad inline flags: cannot use 'L' flag with a str pattern".to_owned());
                    }
                    't' => return Err(TEMPLATE_UNSUPPORTED.to_owned()),
                    _ => add.set(c, true),
                }
                if add.ascii && add.unicode {
                    return Err("bad inline flags: flags 'a', 'u' and 'L' are incompatible".to_owned());
                }
                c = self.bump().ok_or_else(|| "missing -, : or )".to_owned())?;
                if ")-:".contains(c) {
                    break;
                }
                if !is_flag_char(c) {
                    return Err(if c.is_alphabetic() {
                        "unknown flag".to_owned()
                    } else {
                        "missing -, : or )".to_owned()
                    });
                }
            }
        }
        if c == ')' {
            let frame = &self.frames[self.frames.len() - 1];
            if self.frames.len() > 1 || frame.branches > 1 || frame.items > 0 {
                return Err(format!("global flags not at the start of the expression at position {at}"));
            }
            // Global flags apply to the whole pattern; `(?i)` is emitted once
            // they are all known, at the end.
            for (flag, on) in [
                ('i', add.ignore_case),
                ('m', add.multiline),
                ('s', add.dotall),
                ('x', add.verbose),
                ('a', add.ascii),
                ('u', add.unicode),
            ] {
                if on {
                    self.flags.set(flag, true);
                }
            }
            return Ok(());
        }
        if c == '-' {
            c = self.bump().ok_or_else(|| "missing flag".to_owned())?;
            if !is_flag_char(c) {
                return Err(if c.is_alphabetic() { "unknown flag".to_owned() } else { "missing flag".to_owned() });
            }
            loop {
                match c {
                    'a' | 'u' | 'L' => {
                        return Err("bad inline flags: cannot turn off flags 'a', 'u' and 'L'".to_owned());
                    }
                    't' => return Err(TEMPLATE_UNSUPPORTED.to_owned()),
                    _ => remove.set(c, true),
                }
                c = self.bump().ok_or_else(|| "missing :".to_owned())?;
                if c == ':' {
                    break;
                }
                if !is_flag_char(c) {
                    return Err(if c.is_alphabetic() { "unknown flag".to_owned() } else { "missing :".to_owned() });
                }
            }
        }
        if add.any_common(remove) {
            return Err("bad inline flags: flag turned on and off".to_owned());
        }
        let mut scoped = self.flags;
        for (flag, on, off) in [
            ('i', add.ignore_case, remove.ignore_case),
            ('m', add.multiline, remove.multiline),
            ('s', add.dotall, remove.dotall),
            ('x', add.verbose, remove.verbose),
            ('a', add.ascii, false),
            ('u', add.unicode, false),
        ] {
            if on {
                scoped.set(flag, true);
            } else if off {
                scoped.set(flag, false);
            }
        }
        if add.ascii {
            scoped.unicode = false;
        }
        if add.unicode {
            scoped.ascii = false;
        }
        let text = match (self.flags.fancy_ignore_case(), scoped.fancy_ignore_case()) {
            (false, true) => "(?i:",
            (true, false) => "(?-i:",
            _ => "(?:",
        };
        self.open_frame(GroupKind::Plain, at, text);
        self.flags = scoped;
        Ok(())
    }

    fn close_group(&mut self, at: usize) -> Translation<()> {
        if self.frames.len() == 1 {
            return Err(format!("unbalanced parenthesis at position {at}"));
        }
        if self.frame().kind == GroupKind::Conditional && self.frame().branches == 1 {
            self.guard_conditional_yes_branch();
        }
        let Some(frame) = self.frames.pop() else {
            return Err(format!("unbalanced parenthesis at position {at}"));
        };
        self.out.push(')');
        self.flags = frame.saved;
        let item = match frame.kind {
            GroupKind::Capture(group) => {
                self.closed[group] = true;
                Item::Atom
            }
            GroupKind::Lookaround => Item::ZeroWidth,
            GroupKind::Plain if frame.branches == 1 && frame.solid_items == 0 => Item::Empty,
            GroupKind::Plain
                if frame.branches == 1
                    && frame.solid_items == 1
                    && matches!(frame.last_solid, Some(Item::ZeroWidth | Item::ZeroWidthRepeat | Item::Anchor)) =>
            {
                Item::ZeroWidth
            }
            GroupKind::Top | GroupKind::Plain | GroupKind::Atomic | GroupKind::Conditional => Item::Atom,
        };
        self.register_item(item, frame.out_start);
        Ok(())
    }
}

/// Adds `lo-hi` to a class body, leaving out surrogate endpoints.
fn push_class_range(body: &mut String, lo: u32, hi: u32) {
    let lo = if is_surrogate(lo) { 0xE000 } else { lo };
    let hi = if is_surrogate(hi) { 0xD7FF } else { hi };
    if lo > hi {
        return;
    }
    if let (Some(lo), Some(hi)) = (literal_text(lo), literal_text(hi)) {
        body.push_str(&lo);
        body.push('-');
        body.push_str(&hi);
    }
}

// ---------------------------------------------------------------------------
// Predicate evaluation
// ---------------------------------------------------------------------------

/// The evidence for one predicate or assertion: Python's
/// `{path, op, expected, actual, matched}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredicateRecord {
    /// The JSON Pointer, as written.
    pub path: String,
    /// The operator.
    pub op: Op,
    /// The expected value (already resolved by the caller).
    pub expected: Value,
    /// The value at `path`, or `null` when evaluation failed.
    pub actual: Value,
    /// Whether the predicate holds.
    pub matched: bool,
    /// Why evaluation failed (the Python exception's message), if it did.
    /// Not serialized: Python's records have no such field.
    #[serde(skip)]
    pub error: Option<String>,
}

fn search_string(haystack: &str, expected: &Value, pattern: Option<&CompiledPattern>) -> Result<bool, String> {
    if let Some(pattern) = pattern {
        return pattern.search(haystack).map_err(|e| e.to_string());
    }
    let Value::String(source) = expected else {
        return Err("first argument must be string or compiled pattern".to_owned());
    };
    compile_pattern(source).map_err(|e| e.to_string())?.search(haystack).map_err(|e| e.to_string())
}

/// Evaluates one predicate against `doc`, as the Python tool did.
///
/// The pointer is resolved first: a malformed or unresolvable pointer gives
/// `actual: null, matched: false`. Then the operator is applied to the
/// resolved value and `expected`; an operator that fails (Python's
/// `TypeError`, or a regex search that gives up) also gives
/// `actual: null, matched: false`, as Python's `except` clause replaced
/// `actual` with `None`. [`PredicateRecord::error`] says why.
///
/// For [`Op::Matches`] a non-string `actual` is simply not matched (Python's
/// `isinstance` check) and keeps its value. `pattern` should be
/// `compile_pattern(expected)`, compiled once when the rule is loaded; when it
/// is `None` the expected value is compiled on the fly (a non-string
/// `expected` or an invalid pattern then counts as a failure).
#[must_use]
pub fn evaluate(
    doc: &Value,
    path: &str,
    op: Op,
    expected: &Value,
    pattern: Option<&CompiledPattern>,
) -> PredicateRecord {
    let record = |actual: Value, matched: bool, error: Option<String>| PredicateRecord {
        path: path.to_owned(),
        op,
        expected: expected.clone(),
        actual,
        matched,
        error,
    };
    let actual = match pointer_get(doc, path) {
        Ok(actual) => actual,
        Err(error) => return record(Value::Null, false, Some(error.to_string())),
    };
    let outcome = match op {
        Op::Equals => Ok(python_equals(actual, expected)),
        Op::Contains => python_contains(actual, expected).map_err(|e| e.to_string()),
        Op::Matches => match actual {
            Value::String(haystack) => search_string(haystack, expected, pattern),
            _ => Ok(false),
        },
    };
    match outcome {
        Ok(matched) => record(actual.clone(), matched, None),
        Err(error) => record(Value::Null, false, Some(error)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    // ---------------------------------------------------------------- pointers

    #[test]
    fn pointer_resolution_table() {
        let doc = json!({
            "a": {"b": [10, {"c": "deep"}]},
            "": "empty key",
            "a/b": "slash",
            "a~b": "tilde",
            "~1": "literal tilde one",
            "list": [0, 1, 2],
            "n": 5,
            "s": "text",
            "z": null,
            " ": "space",
        });
        let ok: &[(&str, Value)] = &[
            ("", doc.clone()),
            ("/", json!("empty key")),
            ("/a/b/0", json!(10)),
            ("/a/b/1/c", json!("deep")),
            ("/a~1b", json!("slash")),
            ("/a~0b", json!("tilde")),
            ("/~01", json!("literal tilde one")),
            ("/list/0", json!(0)),
            ("/list/2", json!(2)),
            ("/z", Value::Null),
            ("/ ", json!("space")),
        ];
        for (pointer, expected) in ok {
            assert_eq!(pointer_get(&doc, pointer).unwrap(), expected, "pointer {pointer:?}");
        }

        let not_found = [
            "/missing",
            "/a/missing",
            "/list/3",
            "/list/01",
            "/list/-",
            "/list/-1",
            "/list/+1",
            "/list/ 1",
            "/list/1.0",
            "/list/",
            "/list/99999999999999999999999",
            "/n/0",
            "/s/0",
            "/z/x",
            "/a/b/0/x",
            "/A",
        ];
        for pointer in not_found {
            let error = pointer_get(&doc, pointer).unwrap_err();
            assert!(error.is_not_found(), "{pointer:?}: {error}");
            assert!(validate_pointer(pointer).is_ok(), "{pointer:?} is valid syntax");
        }

        let syntax = ["a", "a/b", "#/a", "/a~", "/a~2", "/~a", "/ok/~", "/a~~0"];
        for pointer in syntax {
            let error = pointer_get(&doc, pointer).unwrap_err();
            assert!(error.is_syntax(), "{pointer:?}: {error}");
            assert!(validate_pointer(pointer).is_err(), "{pointer:?}");
        }
    }

    #[test]
    fn pointer_messages_are_lowercase_without_period() {
        let doc = json!({"a": [1]});
        for pointer in ["a", "/a~2", "/b", "/a/5", "/a/x", "/a/0/x"] {
            let text = pointer_get(&doc, pointer).unwrap_err().to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
        assert_eq!(
            pointer_get(&doc, "/b").unwrap_err().to_string(),
            r#"json pointer "/b" not found: no key "b" in object"#
        );
    }

    #[test]
    fn pointer_into_whole_document_scalars() {
        assert_eq!(pointer_get(&json!(3), "").unwrap(), &json!(3));
        assert!(pointer_get(&json!(3), "/").unwrap_err().is_not_found());
        assert!(pointer_get(&json!([7]), "/").unwrap_err().is_not_found());
        assert_eq!(pointer_get(&json!({"": 1}), "/").unwrap(), &json!(1));
    }

    // ------------------------------------------------------------------ equals

    #[test]
    fn equals_table() {
        let cases: &[(Value, Value, bool)] = &[
            (json!(1), json!(1.0), true),
            (json!(1.5), json!(1.5), true),
            (json!(-0.0), json!(0), true),
            (json!(true), json!(1), true),
            (json!(true), json!(1.0), true),
            (json!(false), json!(0), true),
            (json!(false), json!(0.0), true),
            (json!(true), json!(2), false),
            (json!(true), json!(true), true),
            (json!(true), json!(false), false),
            (json!("1"), json!(1), false),
            (json!("true"), json!(true), false),
            (Value::Null, json!(false), false),
            (Value::Null, json!(0), false),
            (Value::Null, json!(""), false),
            (Value::Null, Value::Null, true),
            (json!(""), json!(""), true),
            (json!("a"), json!("A"), false),
            (json!([]), json!({}), false),
            (json!([1, [2, true]]), json!([1.0, [2.0, 1]]), true),
            (json!([1, 2]), json!([2, 1]), false),
            (json!([1]), json!([1, 1]), false),
            (json!({"a": 1, "b": [false]}), json!({"b": [0], "a": 1.0}), true),
            (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
            (json!({"a": 1}), json!({"b": 1}), false),
            (json!({"a": null}), json!({}), false),
            (json!(u64::MAX), json!(u64::MAX), true),
            (json!(i64::MIN), json!(i64::MIN), true),
            (json!(i64::MIN), json!(-9_223_372_036_854_775_808.0_f64), true),
            // 2^53 + 1 is not representable: Python compares exactly.
            (json!(9_007_199_254_740_993_u64), json!(9_007_199_254_740_992.0_f64), false),
            (json!(9_007_199_254_740_992_u64), json!(9_007_199_254_740_992.0_f64), true),
            // u64::MAX rounds to 2^64 as a float, which is not equal.
            (json!(u64::MAX), json!(18_446_744_073_709_551_616.0_f64), false),
            (json!(1e300), json!(1e300), true),
            (json!(1e300), json!(u64::MAX), false),
        ];
        for (a, b, expected) in cases {
            assert_eq!(python_equals(a, b), *expected, "{a} == {b}");
            assert_eq!(python_equals(b, a), *expected, "{b} == {a}");
        }
    }

    #[test]
    fn equals_with_parsed_json_numbers() {
        let a: Value = serde_json::from_str("[1, 1.0, 1e0, 10e-1, true]").unwrap();
        let items = a.as_array().unwrap();
        for x in items {
            for y in items {
                assert!(python_equals(x, y), "{x} == {y}");
            }
        }
    }

    // ---------------------------------------------------------------- contains

    #[test]
    fn contains_table() {
        let cases: &[(Value, Value, Result<bool, &str>)] = &[
            (json!("hello world"), json!("lo w"), Ok(true)),
            (json!("hello"), json!("Hello"), Ok(false)),
            (json!("hello"), json!(""), Ok(true)),
            (json!(""), json!(""), Ok(true)),
            (json!(""), json!("a"), Ok(false)),
            (json!("abc"), json!(1), Err("'in <string>' requires string as left operand, not int")),
            (json!("abc"), json!(1.5), Err("'in <string>' requires string as left operand, not float")),
            (json!("abc"), Value::Null, Err("'in <string>' requires string as left operand, not NoneType")),
            (json!("abc"), json!(["a"]), Err("'in <string>' requires string as left operand, not list")),
            (json!([1, 2, 3]), json!(2), Ok(true)),
            (json!([1, 2, 3]), json!(2.0), Ok(true)),
            (json!([1.0]), json!(1), Ok(true)),
            (json!([true]), json!(1), Ok(true)),
            (json!([0]), json!(false), Ok(true)),
            (json!(["1"]), json!(1), Ok(false)),
            (json!([[1, 2]]), json!([1.0, 2]), Ok(true)),
            (json!([{"a": 1}]), json!({"a": true}), Ok(true)),
            (json!([null]), Value::Null, Ok(true)),
            (json!([]), Value::Null, Ok(false)),
            (json!(["ab"]), json!("a"), Ok(false)),
            (json!({"key": 1}), json!("key"), Ok(true)),
            (json!({"key": 1}), json!("missing"), Ok(false)),
            (json!({"1": 1}), json!(1), Ok(false)),
            (json!({"true": 1}), json!(true), Ok(false)),
            (json!({"null": 1}), Value::Null, Ok(false)),
            (json!({"a": 1}), json!(["a"]), Err("unhashable type: 'list'")),
            (json!({"a": 1}), json!({"a": 1}), Err("unhashable type: 'dict'")),
            (json!(5), json!(5), Err("argument of type 'int' is not iterable")),
            (json!(5.5), json!("5"), Err("argument of type 'float' is not iterable")),
            (json!(true), json!(true), Err("argument of type 'bool' is not iterable")),
            (Value::Null, json!("a"), Err("argument of type 'NoneType' is not iterable")),
        ];
        for (container, item, expected) in cases {
            let got = python_contains(container, item).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "{item} in {container}");
        }
    }

    // ----------------------------------------------------------------- matches

    fn search(pattern: &str, subject: &str) -> bool {
        let compiled = compile_pattern(pattern).unwrap_or_else(|e| panic!("{pattern:?} should compile: {e}"));
        compiled.search(subject).unwrap_or_else(|e| panic!("{pattern:?} on {subject:?}: {e}"))
    }

    /// `(pattern, subject, re.search(pattern, subject) is not None)`, with the
    /// expected values produced by CPython.
    const SEARCH_CASES: &[(&str, &str, bool)] = &[
        // unanchored search
        ("b", "abc", true),
        ("d", "abc", false),
        ("", "", true),
        ("ELENGTIS-[0-9a-f-]+", "token ELENGTIS-1234-abcd here", true),
        // anchors
        ("^abc", "abc", true),
        ("^b", "abc", false),
        ("c$", "abc", true),
        ("c$", "abc\n", true),
        ("c$", "abc\n\n", false),
        ("c$", "abc\nx", false),
        ("^$", "", true),
        ("^$", "\n", true),
        ("a$\n", "a\n", true),
        (r"c\Z", "abc", true),
        (r"c\Z", "abc\n", false),
        (r"\Aab", "ab", true),
        (r"\Ab", "ab", false),
        ("(?m)^b$", "a\nb\nc", true),
        ("^b$", "a\nb\nc", false),
        ("(?m)a$", "a\nb", true),
        ("(?m)^$", "a\n", true),
        ("(?m:^b)", "a\nb", true),
        ("x(?m:^b)", "a\nb", false),
        // dot and dotall
        ("a.c", "a\nc", false),
        ("(?s)a.c", "a\nc", true),
        ("(?s:a.c)", "a\nc", true),
        ("a.c", "a\u{e9}c", true),
        // case
        ("(?i)HELLO", "say hello", true),
        ("(?i:h)ELLO", "hELLO", true),
        ("(?i:h)ELLO", "hello", false),
        ("(?i)(?-i:a)b", "aB", true),
        ("(?i)(?-i:a)b", "AB", false),
        ("(?i)[a-c]+$", "ABC", true),
        ("(?i)\u{e9}", "\u{c9}", true),
        // groups, backreferences, conditionals
        (r"(a)\1", "aa", true),
        (r"(a)\1", "ab", false),
        (r"(?P<n>ab)(?P=n)", "abab", true),
        (r"(?P<n>ab)(?P=n)", "abba", false),
        (r"(?P<word>\w+) (?P=word)", "hello hello", true),
        (r"(?i)(a)\1", "aA", true),
        (r"(a)?b\1", "b", false),
        (r"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)\11", "abcdefghijkk", true),
        (r"(a)\100", "a@", true),
        (r"(a)?(?(1)b|c)$", "ab", true),
        (r"^(a)?(?(1)b|c)$", "c", true),
        (r"^(a)?(?(1)b|c)$", "ac", false),
        (r"^(?P<q>')?x(?(q)')$", "'x'", true),
        (r"^(?P<q>')?x(?(q)')$", "'x", false),
        (r"^(?:(?(1)b|a)(x)?)+$", "axb", true),
        // lookaround
        ("foo(?=bar)", "foobar", true),
        ("foo(?=bar)", "foobaz", false),
        ("foo(?!bar)", "foobar", false),
        ("(?<=a)b", "ab", true),
        ("(?<!a)b", "ab", false),
        ("(?=a)*b", "b", true),
        ("(?:(?=a))+a", "a", true),
        ("(?=x)?y", "y", true),
        ("(?:)*a", "a", true),
        ("(?:$)?a", "a", true),
        // atomic and possessive
        ("(?>a*)a", "aaa", false),
        ("a*+a", "aaa", false),
        ("a++b", "aab", true),
        ("a{1,3}+a", "aaa", false),
        ("a?+a", "a", false),
        // quantifiers and literal braces
        ("a{2}", "aa", true),
        ("a{3}", "aa", false),
        ("^a{,2}$", "aa", true),
        ("^a{,2}$", "aaa", false),
        ("^a{2,}$", "aaa", true),
        ("^a{,}$", "aaaa", true),
        ("a{", "a{", true),
        ("a{}", "a{}", true),
        ("a{1", "a{1", true),
        ("a{x}", "a{x}", true),
        ("a{1,2", "a{1,2", true),
        ("x}", "x}", true),
        ("x]", "x]", true),
        ("^a*?$", "aaa", true),
        ("^a??b", "b", true),
        // classes
        ("[]a]+$", "]a", true),
        ("[^]a]", "]a", false),
        ("[a-]$", "-", true),
        ("[-a]", "-", true),
        ("[[]", "[", true),
        ("[a&&b]", "&", true),
        ("[+--]", ",", true),
        ("[a-a-]", "-", true),
        ("[a~~b]", "~", true),
        ("[a||b]", "|", true),
        (r"[\]]", "]", true),
        (r"[\d]", "5", true),
        (r"[\D]", "5", false),
        (r"[^\W]", "_", true),
        (r"[\w-]+$", "a-b_c", true),
        (r"[a\-z]", "-", true),
        (r"[\b]", "\u{8}", true),
        (r"[\x41-\x43]+$", "ABC", true),
        (r"[\u00e9]", "\u{e9}", true),
        (r"[\101]", "A", true),
        (r"[.]", "a", false),
        (r"[$^]", "^", true),
        // escapes
        (r"\d+", "abc 123", true),
        (r"\d", "\u{663}", true),
        (r"(?a)\d", "\u{663}", false),
        (r"\w", "\u{e9}", true),
        (r"\w", "\u{b2}", true),
        (r"\w", "\u{301}", false),
        (r"(?a)\w", "\u{e9}", false),
        (r"\s", "\u{1c}", true),
        (r"\s", "\u{a0}", true),
        (r"(?a)\s", "\u{a0}", false),
        (r"\S", " ", false),
        (r"\bfoo\b", "a foo b", true),
        (r"\bfoo\b", "afoob", false),
        (r"\B", "", false),
        (r"\Boo\B", "foob", true),
        (r"\b", "", false),
        (r"\x41", "A", true),
        (r"\u0041", "A", true),
        (r"\U0001F600", "\u{1F600}", true),
        (r"\0", "\0", true),
        (r"\012", "\n", true),
        (r"\101", "A", true),
        (r"\t\n\r\f\v\a", "\t\n\r\u{c}\u{b}\u{7}", true),
        (r"\.", ".", true),
        (r"\.", "a", false),
        (r"\-", "-", true),
        (r"\#", "#", true),
        ("\\\u{e9}", "\u{e9}", true),
        (r"\\", "\\", true),
        // verbose mode
        ("(?x) a b # comment\n c", "abc", true),
        ("(?x) a \\  b", "a b", true),
        ("(?x) a [ ] b", "a b", true),
        ("(?x)a *", "aaa", true),
        ("(?x:a b)c d", "abc d", true),
        ("(?x)a{1, 2}", "a{1,2}", true),
        // comments
        ("a(?#comment)b", "ab", true),
        ("a(?#c)*", "aaa", true),
        // case folding: CPython's Turkish i class, and ASCII-only under (?a)
        ("(?i)i", "\u{130}", true),
        ("(?i)I", "\u{131}", true),
        ("(?i)\u{131}", "i", true),
        ("(?i)[a-z]", "\u{130}", true),
        ("(?i)[^a-z]", "\u{131}", false),
        ("(?i)[\u{100}-\u{140}]", "I", true),
        ("i", "\u{130}", false),
        ("(?i)k", "\u{212a}", true),
        ("(?ai)k", "\u{212a}", false),
        ("(?ai)K", "k", true),
        ("(?ai)[X-c]", "x", true),
        ("(?ai)[^a-z]", "Q", false),
        ("(?ai)\u{e9}", "\u{c9}", false),
        ("(?a)(?i:s)", "\u{17f}", false),
        ("(?i)(?a:K)k", "kK", true),
        (r"(?i)\w", "\u{212a}", true),
        (r"(?i)\W", "\u{212a}", false),
        // possessive repeats are atomic per iteration in CPython
        ("(?:\u{e9}|^){2,}+a", "\u{e9}a", false),
        ("(?:\u{e9}|^){2,}a", "\u{e9}a", true),
        ("(?>(?:\u{e9}|^){2,})a", "\u{e9}a", true),
        ("(?:a|ab)++c", "abc", false),
        ("(?:ab|a)++c", "abc", true),
        // conditionals with empty branches always match the empty string
        (r"(a)|(?(1)|)_", "_", true),
        (r"(a)?(?(1))_", "_", true),
        (r"((?(1)|))b", "b", true),
        (r"(a)?(?(1)|x)_", "_", false),
        // quantified empty and zero-width groups
        ("(?:(?:)(?<!b)){0}x", "x", true),
        ("(?:(?<!b){2,}){0,1}?x", "x", true),
        ("(?:(?:){2}(?!a)){,2}b", "b", true),
        ("(?:(?=)(?i:)){1,2}a", "a", true),
        // comments: an escaped ')' or newline does not end them
        (r"a(?#x\)b)c", "ac", true),
        ("(?x)a#x\\\nb\nc", "ac", true),
        // surrogate escapes never match any Rust string
        (r"\ud800", "x", false),
        (r"x|\ud800", "x", true),
        (r"[\ud800]", "x", false),
        (r"[^\ud800]", "x", true),
        (r"[\ud800x]", "x", true),
        (r"[\ud000-\ue000]", "\u{d7ff}", true),
    ];

    #[test]
    fn search_table() {
        for (pattern, subject, expected) in SEARCH_CASES {
            assert_eq!(
                search(pattern, subject),
                *expected,
                "re.search({pattern:?}, {subject:?}) translated as {:?}",
                compile_pattern(pattern).unwrap().translated()
            );
        }
    }

    /// Patterns that CPython rejects, with (part of) CPython's message.
    const INVALID_PATTERNS: &[(&str, &str)] = &[
        ("*", "nothing to repeat at position 0"),
        ("a|*", "nothing to repeat"),
        ("(*)", "nothing to repeat"),
        ("^*", "nothing to repeat"),
        (r"\b+", "nothing to repeat"),
        ("(?i)*", "nothing to repeat"),
        ("a**", "multiple repeat"),
        ("a{2}{3}", "multiple repeat"),
        ("a*?*", "multiple repeat"),
        ("a{3,2}", "min repeat greater than max repeat"),
        ("a{4294967295}", "the repetition number is too large"),
        ("(", "missing ), unterminated subpattern"),
        ("(a(b)", "missing ), unterminated subpattern"),
        (")", "unbalanced parenthesis"),
        ("a)b", "unbalanced parenthesis"),
        ("[a", "unterminated character set"),
        ("[]", "unterminated character set"),
        ("[z-a]", "bad character range z-a"),
        (r"[\d-z]", r"bad character range \d-z"),
        (r"\e", r"bad escape \e"),
        (r"\z", r"bad escape \z"),
        (r"\p{L}", r"bad escape \p"),
        (r"[\A]", r"bad escape \A"),
        (r"[\8]", r"bad escape \8"),
        ("\\", "bad escape (end of pattern)"),
        (r"\x4", r"incomplete escape \x4"),
        (r"\u12", r"incomplete escape \u12"),
        (r"\U00110000", r"bad escape \U00110000"),
        (r"\N{EM DASH}", "named unicode escapes"),
        (r"\1", "invalid group reference 1"),
        (r"(a)\2", "invalid group reference 2"),
        (r"(a\1)", "cannot refer to an open group"),
        (r"\477", "octal escape value"),
        ("(?P<1>a)", "bad character in group name '1'"),
        ("(?P<>a)", "missing group name"),
        ("(?P<a", "missing >, unterminated name"),
        ("(?P<n>a)(?P<n>b)", "redefinition of group name 'n'"),
        ("(?P=n)", "unknown group name 'n'"),
        ("(?P<n>(?P=n))", "cannot refer to an open group"),
        ("(?Px)", "unknown extension ?Px"),
        ("(?<n>a)", "unknown extension ?<n"),
        ("(?z)", "unknown extension ?z"),
        ("(?", "unexpected end of pattern"),
        ("(?#abc", "missing ), unterminated comment"),
        ("a(?i)", "global flags not at the start"),
        ("(a(?i))", "global flags not at the start"),
        ("a|(?i)b", "global flags not at the start"),
        ("(?L)a", "cannot use 'L' flag with a str pattern"),
        ("(?au)a", "incompatible"),
        ("(?-a:a)", "cannot turn off flags"),
        ("(?i-i:a)", "flag turned on and off"),
        ("(?-i)a", "missing :"),
        ("(?i", "missing -, : or )"),
        ("(?iq)", "unknown flag"),
        ("(?(1)a|b|c)(x)", "conditional backref with more than two branches"),
        ("(?(2)a)(x)", "invalid group reference 2"),
        ("(?(0)a)", "bad group number"),
        ("(?(n)a)", "unknown group name 'n'"),
        ("(?(1a)a)", "bad character in group name '1a'"),
        ("(?#a\\)", "missing ), unterminated comment"),
        ("(?x)a#\\", "bad escape (end of pattern)"),
        ("[a\\", "bad escape (end of pattern)"),
        ("(?t)a", "template flag"),
    ];

    #[test]
    fn invalid_patterns_are_rejected_with_python_messages() {
        for (pattern, message) in INVALID_PATTERNS {
            let error = compile_pattern(pattern).err().unwrap_or_else(|| panic!("{pattern:?} should be rejected"));
            assert!(error.message().contains(message), "{pattern:?}: got {:?}, expected {message:?}", error.message());
            assert_eq!(error.pattern(), *pattern);
            let text = error.to_string();
            assert!(text.starts_with("invalid regular expression"), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }

    #[test]
    fn global_flags_may_stack_at_the_start() {
        assert!(search("(?i)(?s)A.B", "a\nb"));
        assert!(search("(?#c)(?i)A", "a"));
        assert!(search("(?x) (?i) A", "a"));
    }

    #[test]
    fn translation_maps_python_only_syntax() {
        let translated = |p: &str| compile_pattern(p).unwrap().translated().to_owned();
        assert_eq!(translated(r"a\Z"), r"a\z");
        assert_eq!(translated("a$"), r"a(?=\n?\z)");
        assert_eq!(translated("(?m)a$"), "a(?m:$)");
        assert_eq!(translated("^a"), r"\Aa");
        assert_eq!(translated("(?P<n>a)(?P=n)"), r"(a)\k<1>");
        assert_eq!(translated("(?P<n>a)(?(n)b)"), "(a)(?(1)b)");
        assert_eq!(translated("a{,3}"), "a{0,3}");
        assert_eq!(translated("a.b"), "a.b");
        assert_eq!(translated("(?s)a.b"), "a(?s:.)b");
        assert_eq!(translated("[]a-]"), r"[\x{5D}a\x{2D}]");
        assert_eq!(translated("(?i)a"), "(?i)a");
    }

    #[test]
    fn catastrophic_patterns_do_not_hang() {
        let subject = format!("{}b", "a".repeat(40));
        let start = std::time::Instant::now();
        // The classic exponential case: CPython takes minutes here.
        assert!(!search("(a+)+$", &subject));
        assert!(!search("(a|aa)+$", &subject));
        assert!(!search("^(a|a)*c", &subject));
        // One that defeats fancy-regex's optimizations: the backtracking
        // budget is exhausted and reported instead of running on.
        let pattern = compile_pattern("(x+x+)+y(?<=y)").unwrap();
        let error = pattern.search(&"x".repeat(40)).unwrap_err();
        assert!(matches!(error, SearchError::Runtime(_)), "{error}");
        assert!(error.to_string().contains("backtracking"), "{error}");
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn python_search_requires_a_string() {
        let pattern = compile_pattern("1").unwrap();
        assert_eq!(python_search(&json!("a1"), &pattern), Ok(true));
        assert_eq!(python_search(&json!("a2"), &pattern), Ok(false));
        for (value, name) in [
            (json!(1), "int"),
            (json!(1.0), "float"),
            (json!(true), "bool"),
            (Value::Null, "NoneType"),
            (json!(["1"]), "list"),
            (json!({"1": 1}), "dict"),
        ] {
            let error = python_search(&value, &pattern).unwrap_err();
            assert_eq!(error.to_string(), format!("expected string or bytes-like object, got '{name}'"));
            assert!(matches!(error, SearchError::Type(_)));
        }
    }

    #[test]
    fn compiled_patterns_compare_by_source() {
        let a = compile_pattern("a+").unwrap();
        assert_eq!(a, compile_pattern("a+").unwrap());
        assert_ne!(a, compile_pattern("a*").unwrap());
        assert_eq!(a.as_str(), "a+");
        assert!(format!("{a:?}").contains("a+"));
    }

    // -------------------------------------------------------------------- ops

    #[test]
    fn op_serde_uses_lowercase_names() {
        for (op, name) in [(Op::Equals, "equals"), (Op::Contains, "contains"), (Op::Matches, "matches")] {
            assert_eq!(serde_json::to_value(op).unwrap(), json!(name));
            assert_eq!(serde_json::from_value::<Op>(json!(name)).unwrap(), op);
            assert_eq!(op.to_string(), name);
        }
        assert!(serde_json::from_value::<Op>(json!("Equals")).is_err());
        assert!(serde_json::from_value::<Op>(json!("regex")).is_err());
    }

    // --------------------------------------------------------------- evaluate

    #[test]
    fn evaluate_records_table() {
        let doc = json!({
            "credential": "ELENGTIS-abc",
            "count": 1,
            "flag": true,
            "tags": ["x", "y"],
            "meta": {"k": "v"},
        });
        // (path, op, expected, actual, matched, has_error)
        let cases: &[(&str, Op, Value, Value, bool, bool)] = &[
            ("/count", Op::Equals, json!(1.0), json!(1), true, false),
            ("/flag", Op::Equals, json!(1), json!(true), true, false),
            ("/count", Op::Equals, json!("1"), json!(1), false, false),
            ("/credential", Op::Contains, json!("ELENGTIS"), json!("ELENGTIS-abc"), true, false),
            ("/credential", Op::Contains, json!(""), json!("ELENGTIS-abc"), true, false),
            ("/tags", Op::Contains, json!("y"), json!(["x", "y"]), true, false),
            ("/meta", Op::Contains, json!("k"), json!({"k": "v"}), true, false),
            ("/meta", Op::Contains, json!(1), json!({"k": "v"}), false, false),
            ("/credential", Op::Matches, json!("^ELENGTIS-[a-c]+$"), json!("ELENGTIS-abc"), true, false),
            ("/credential", Op::Matches, json!("^abc"), json!("ELENGTIS-abc"), false, false),
            // Python's isinstance short-circuit: no error, actual kept.
            ("/count", Op::Matches, json!("1"), json!(1), false, false),
            ("/tags", Op::Matches, json!("x"), json!(["x", "y"]), false, false),
            // Pointer failures: actual null.
            ("/missing", Op::Equals, Value::Null, Value::Null, false, true),
            ("/tags/2", Op::Contains, json!("x"), Value::Null, false, true),
            ("/tags/-1", Op::Equals, json!("y"), Value::Null, false, true),
            ("missing-slash", Op::Equals, json!(1), Value::Null, false, true),
            ("/credential/0", Op::Equals, json!("E"), Value::Null, false, true),
            // TypeErrors: Python's except clause sets actual to None.
            ("/credential", Op::Contains, json!(1), Value::Null, false, true),
            ("/count", Op::Contains, json!(1), Value::Null, false, true),
            ("/meta", Op::Contains, json!(["k"]), Value::Null, false, true),
            ("/credential", Op::Matches, json!(5), Value::Null, false, true),
            // Invalid pattern compiled on the fly.
            ("/credential", Op::Matches, json!("("), Value::Null, false, true),
        ];
        for (path, op, expected, actual, matched, has_error) in cases {
            let record = evaluate(&doc, path, *op, expected, None);
            let label = format!("{path} {op} {expected}");
            assert_eq!(&record.path, path, "{label}");
            assert_eq!(record.op, *op, "{label}");
            assert_eq!(&record.expected, expected, "{label}");
            assert_eq!(&record.actual, actual, "{label}");
            assert_eq!(record.matched, *matched, "{label}");
            assert_eq!(record.error.is_some(), *has_error, "{label}: {:?}", record.error);
        }
    }

    #[test]
    fn evaluate_uses_the_precompiled_pattern() {
        let doc = json!({"s": "abc"});
        let pattern = compile_pattern("b").unwrap();
        let record = evaluate(&doc, "/s", Op::Matches, &json!("b"), Some(&pattern));
        assert!(record.matched);
        assert_eq!(record.actual, json!("abc"));
        assert_eq!(record.error, None);
    }

    #[test]
    fn evaluate_whole_document_pointer() {
        let doc = json!({"a": 1});
        let record = evaluate(&doc, "", Op::Contains, &json!("a"), None);
        assert!(record.matched);
        assert_eq!(record.actual, doc);
    }

    #[test]
    fn evaluate_reports_runtime_regex_errors_as_unmatched() {
        let doc = json!({"s": "x".repeat(40)});
        let pattern = compile_pattern("(x+x+)+y(?<=y)").unwrap();
        let record = evaluate(&doc, "/s", Op::Matches, &json!("(x+x+)+y(?<=y)"), Some(&pattern));
        assert!(!record.matched);
        assert_eq!(record.actual, Value::Null);
        assert!(record.error.unwrap().contains("backtracking"));
    }

    #[test]
    fn evaluate_error_messages() {
        let doc = json!({"s": "abc", "n": 1});
        let error = |path: &str, op: Op, expected: Value| evaluate(&doc, path, op, &expected, None).error.unwrap();
        assert_eq!(error("/s", Op::Contains, json!(1)), "'in <string>' requires string as left operand, not int");
        assert_eq!(error("/n", Op::Contains, json!(1)), "argument of type 'int' is not iterable");
        assert_eq!(error("/s", Op::Matches, json!(["a"])), "first argument must be string or compiled pattern");
        assert!(error("/s", Op::Matches, json!("*")).contains("nothing to repeat"));
        assert!(error("/x", Op::Equals, json!(1)).contains("not found"));
    }

    #[test]
    fn record_serializes_like_python() {
        let record = evaluate(&json!({"a": 1}), "/b", Op::Equals, &json!(1), None);
        assert!(record.error.is_some());
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            r#"{"path":"/b","op":"equals","expected":1,"actual":null,"matched":false}"#
        );
        let back: PredicateRecord = serde_json::from_value(serde_json::to_value(&record).unwrap()).unwrap();
        assert_eq!(back, PredicateRecord { error: None, ..record });
    }
}
