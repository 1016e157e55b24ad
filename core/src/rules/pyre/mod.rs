//! Python `re` patterns, for the `matches` operator: [`compile_pattern`]
//! translates a pattern written in Python's dialect to `fancy-regex` syntax and
//! compiles it; [`CompiledPattern::search`] and [`python_search`] are
//! `re.search(pattern, subject) is not None`.
//!
//! The dialect is that of Python 3.12 `str` patterns without a flags argument.
//! The pattern is parsed following CPython's `re._parser`, so the patterns
//! CPython rejects are rejected, with CPython's messages (`nothing to repeat at
//! position 0`, `bad escape \e at position 0`, `unknown group name 'x'`, ...),
//! and re-emitted for `fancy-regex`, which has the backtracking features
//! (lookaround, backreferences, conditionals, atomic groups, possessive
//! repeats) that the plain `regex` crate lacks.
//!
//! # Supported
//!
//! Everything in Python's `re` syntax for `str` patterns except what is listed
//! under [Rejected](#rejected), with Python's meaning:
//!
//! * literal characters, `.`, and alternation `|`;
//! * character classes `[...]` and `[^...]`: ranges, escapes, the categories
//!   `\d \D \s \S \w \W`, and Python's literal readings of `]` first, `-`
//!   first or last, `[`, `&&`, `--`, `~~` and `||`;
//! * repeats `*`, `+`, `?`, `{m}`, `{m,}`, `{,n}`, `{m,n}` and `{,}`, each
//!   greedy, lazy (`*?`) or possessive (`*+`); a `{` that does not start a
//!   valid repeat is a literal, as are `]` and `}`;
//! * groups `(...)`, `(?:...)` and `(?P<name>...)`; backreferences `\1` to
//!   `\99` and `(?P=name)`; lookaround `(?=...)`, `(?!...)`, `(?<=...)`,
//!   `(?<!...)`; atomic groups `(?>...)`; conditionals `(?(1)yes|no)` and
//!   `(?(name)yes|no)`; comments `(?#...)`;
//! * inline flags `a i m s u x`: global (`(?im)`, only at the start) and
//!   scoped (`(?i:...)`, `(?-i:...)`, `(?s-i:...)`);
//! * anchors `^ $ \A \Z \b \B`;
//! * escapes `\a \f \n \r \t \v` (and `\b`, backspace, in a class), `\xhh`,
//!   `\uhhhh`, `\Uhhhhhhhh`, octal `\0`, `\0o`, `\ooo`, and a backslash before
//!   any character that is not an ASCII letter or digit.
//!
//! # Translated
//!
//! Constructs whose `fancy-regex` spelling or meaning differs are rewritten:
//!
//! * `$` without `(?m)` is Python's "end, or before a final newline", emitted
//!   as `(?=\n?\z)`; with `(?m)`, `(?m:$)`. `^` is `\A` or `(?m:^)`.
//! * `\Z` is the absolute end, `\z` (in `fancy-regex`, `\Z` also skips
//!   trailing newlines).
//! * `\w`, `\W`, `\s`, `\S` and `\b`, `\B` use Python's definitions: `\w` is
//!   letters, numbers and `_` (`[\p{L}\p{N}_]`, not the `regex` crate's wider
//!   set with combining marks), `\s` includes `\x1c`-`\x1f`, and `\B` does not
//!   match in an empty string (as in Python before 3.14). Under `(?a)` they
//!   are ASCII-only, and so is `\d`.
//! * Case-insensitive matching: CPython's one difference from Unicode simple
//!   case folding, the class `i I İ ı`, is spelled out, and under `(?a)` only
//!   ASCII letters fold. Categories and word boundaries are never folded.
//! * `(?P<name>...)`, `(?P=name)` and `(?(name)...)` become numbered groups,
//!   `\k<n>` and `(?(n)...)`, with Python's numbering. A conditional whose
//!   branches are both empty (`(?(1))`) always matches, as in Python.
//! * A possessive repeat `X*+` becomes `(?>X)*+`: CPython matches each
//!   iteration atomically, so `(?:a|^){2}+` fails on `"a"`.
//! * A quantifier on a lookaround or an empty group (valid in Python,
//!   rejected by `fancy-regex`) is rewritten to an equivalent alternation.
//! * Literals are emitted as `\x{...}` unless alphanumeric or `_`; octal,
//!   `\x`, `\u` and `\U` escapes become such literals; `{,n}` becomes `{0,n}`;
//!   comments, verbose-mode (`x`) whitespace and `#` comments are dropped; the
//!   `s` and `m` flags are applied to each `.`, `^` and `$`.
//! * A conditional on a group that is in a branch of an alternation, such as
//!   `(?:x|(x))(?(1)a|b)`, adds a backreference that never runs,
//!   `(?:\k<1>){0}`, at the end: without one, `fancy-regex` hands
//!   `(?:x|(x))` to the `regex` crate, which commits to the first way it
//!   matches, and never tries the alternative that sets the group.
//! * A surrogate code point (`\ud800`, or a range endpoint such as
//!   `[\ud000-\ue000]`) can never match a Rust string: alone it becomes a
//!   class that matches nothing, in a range it is left out.
//!
//! # Rejected
//!
//! Every pattern CPython rejects, with CPython's message. In addition, these
//! constructs that Python accepts are rejected, with a message that says so:
//!
//! * `\N{...}` named characters (write `\u` or `\U` instead);
//! * the deprecated `t` (template) flag;
//! * group names that are not made of letters, digits and `_` (starting
//!   with a letter or `_`): an approximation of Python's `str.isidentifier()`,
//!   which also allows, for instance, combining marks after the first
//!   character;
//! * patterns whose translation `fancy-regex` cannot compile: groups nested
//!   more than 64 deep, or a compiled program over 200,000 instructions.
//!
//! # Differences that remain
//!
//! * Look-behinds need not be fixed-width (Python rejects variable-width
//!   ones), and Python's checks on group references inside a look-behind are
//!   not replicated.
//! * A case-insensitive backreference only matches text of the same UTF-8
//!   length (so not `k` against the Kelvin sign), and under `(?a)` it is
//!   case-sensitive.
//! * A repeat whose iterations match the empty string can differ when
//!   backreferences or conditionals inside it change between iterations.
//! * CPython checks the first character of a possible match against a set
//!   computed with the pattern's global flags, even where a scoped flag
//!   changes the meaning of that first element: `(?a:\W)` never matches
//!   `"é"` in CPython (3.11 to 3.13), although `x(?a:\W)` matches `"xé"`.
//!   Here a scoped `(?a:...)` has the same meaning everywhere.
//! * Unicode tables are those of the `regex` crate, a newer Unicode version
//!   than Python 3.12's.
//! * A search gives up after one million backtracking steps and reports a
//!   [`SearchError::Runtime`] instead of hanging: on patterns that are
//!   catastrophic for a backtracking engine, where Python would run for an
//!   unbounded time (though `fancy-regex` answers many of those, such as
//!   `(a+)+$`, instantly), and on some nested empty-matching repeats.
//!
//! The translation is checked against CPython itself: the unit tests' expected
//! values were produced by CPython, and a differential property test runs
//! generated patterns of the supported constructs, with generated subjects,
//! through `python3` and through this module (it avoids the two differences
//! above that generated patterns would hit: case-insensitive backreferences
//! and a scoped `(?a:...)` at the start).

mod translate;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;

use serde_json::Value;

use super::python::python_type_name;
use super::{SearchError, TypeError};

/// A regular expression that cannot be compiled, with Python's wording where
/// Python would also reject it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regular expression {pattern:?}: {message}")]
pub struct PatternError {
    pattern: String,
    message: String,
    /// Python accepts the pattern; this translation or the engine cannot run it.
    python_accepts: bool,
}

impl PatternError {
    /// Whether Python accepts the pattern (a construct not supported here, or a translation
    /// the engine cannot compile), rather than rejecting it as well.
    #[must_use]
    pub fn python_accepts(&self) -> bool {
        self.python_accepts
    }

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
/// The pattern is parsed as CPython's `re._parser` parses it, so the same
/// patterns are rejected, with CPython's messages, and re-emitted for
/// `fancy-regex`. The [module documentation](self) lists which constructs are
/// supported, which are translated, which are rejected and what differs.
///
/// # Errors
///
/// A [`PatternError`] when Python would reject the pattern, when it uses an
/// unsupported construct, or when `fancy-regex` cannot compile the
/// translation.
pub fn compile_pattern(pattern: &str) -> Result<CompiledPattern, PatternError> {
    let error =
        |message: String, python_accepts: bool| PatternError { pattern: pattern.to_owned(), message, python_accepts };
    let translated = translate::translate(pattern).map_err(|m| {
        let accepted = translate::python_accepts(&m);
        error(m, accepted)
    })?;
    let regex = fancy_regex::RegexBuilder::new(&translated)
        .backtrack_limit(BACKTRACK_LIMIT)
        .max_prog_size(MAX_PROGRAM_SIZE)
        .build()
        .map_err(|e| {
            error(
                format!(
                    "the regex engine rejected its translation {translated:?}: {}",
                    lowercase_first(&e.to_string())
                ),
                true,
            )
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
