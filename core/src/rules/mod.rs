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
//! The parts:
//!
//! * [`pointer`](mod@pointer): RFC 6901 JSON Pointers ([`pointer_get`], [`validate_pointer`]);
//! * [`python`]: Python's `==` and `in` on JSON-decoded values ([`python_equals`],
//!   [`python_contains`]);
//! * [`pyre`]: Python `re` patterns, translated to `fancy-regex` ([`compile_pattern`],
//!   [`python_search`]);
//! * this module: the operators ([`Op`]), the errors the operators share, and
//!   [`evaluate`], which resolves a pointer, applies an operator and keeps the evidence
//!   in a [`PredicateRecord`].
//!
//! Every public item of the parts is re-exported here, so `rules::pointer_get` and
//! `rules::compile_pattern` are the paths the rest of the workspace uses.
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
//! * **Regular expressions**: see [`pyre`] for the dialect translation and
//!   the few constructs that are rejected or differ. An
//!   invalid pattern, which Python only discovered (uncaught) when a rule
//!   first ran against a string, is a [`PatternError`] at compile time; at
//!   run time its predicate is [`PredicateRecord::undecided`] whatever the
//!   document holds. A search that exceeds the backtracking budget (where
//!   Python would hang) fails with [`SearchError::Runtime`]: the record is
//!   marked [`PredicateRecord::undecided`] too, and the judge records the
//!   call as unresolved (the outcome `null`, never a miss).

pub mod pointer;
pub mod pyre;
pub mod python;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::pointer::{PointerError, pointer_get, validate_pointer};
pub use self::pyre::{CompiledPattern, PatternError, compile_pattern, python_search};
pub use self::python::{python_contains, python_equals};

// ---------------------------------------------------------------------------
// Operators and the errors they share
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

// ---------------------------------------------------------------------------
// Predicate evaluation
// ---------------------------------------------------------------------------

/// The evidence for one predicate or assertion: Python's
/// `{path, op, expected, actual, matched}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The operator could not decide: a regex search that exhausted its backtracking budget
    /// (where Python would run for an unbounded time). `matched` is then false but means
    /// nothing; the judge records the predicate as unresolved, never as a miss. Not
    /// serialized.
    #[serde(skip)]
    pub undecided: bool,
}

/// Why an operator produced no answer: Python's exception (a miss, as Python's `except`
/// makes it), or a search the engine gave up on (undecided).
enum Failure {
    Python(String),
    Undecided(String),
}

fn search_failure(error: &SearchError) -> Failure {
    match error {
        SearchError::Type(e) => Failure::Python(e.to_string()),
        SearchError::Runtime(_) => Failure::Undecided(error.to_string()),
    }
}

fn search_string(haystack: &str, expected: &Value, pattern: Option<&CompiledPattern>) -> Result<bool, Failure> {
    if let Some(pattern) = pattern {
        return pattern.search(haystack).map_err(|e| search_failure(&e));
    }
    let Value::String(source) = expected else {
        return Err(Failure::Python("first argument must be string or compiled pattern".to_owned()));
    };
    compile_pattern(source)
        .map_err(|e| Failure::Python(e.to_string()))?
        .search(haystack)
        .map_err(|e| search_failure(&e))
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
        undecided: false,
    };
    // A pattern that does not compile decides nothing, whatever the document holds: the
    // predicate is undecided, never a miss (the original raised `re.error` when it ran).
    let compiled;
    let pattern = match (op, pattern, expected) {
        (Op::Matches, None, Value::String(source)) => match compile_pattern(source) {
            Ok(p) => {
                compiled = p;
                Some(&compiled)
            }
            Err(e) => {
                let why = format!("the pattern does not compile: {e}");
                return PredicateRecord { undecided: true, ..record(Value::Null, false, Some(why)) };
            }
        },
        _ => pattern,
    };
    let actual = match pointer_get(doc, path) {
        Ok(actual) => actual,
        Err(error) => return record(Value::Null, false, Some(error.to_string())),
    };
    let outcome = match op {
        Op::Equals => Ok(python_equals(actual, expected)),
        Op::Contains => python_contains(actual, expected).map_err(|e| Failure::Python(e.to_string())),
        Op::Matches => match actual {
            Value::String(haystack) => search_string(haystack, expected, pattern),
            _ => Ok(false),
        },
    };
    match outcome {
        Ok(matched) => record(actual.clone(), matched, None),
        Err(Failure::Python(error)) => record(Value::Null, false, Some(error)),
        Err(Failure::Undecided(error)) => {
            PredicateRecord { undecided: true, ..record(Value::Null, false, Some(error)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn a_pattern_that_does_not_compile_is_undecided_never_a_miss() {
        let doc = json!({"text": "x", "count": 1});
        for path in ["/text", "/count", "/missing"] {
            let record = evaluate(&doc, path, Op::Matches, &json!("("), None);
            assert!(!record.matched && record.undecided, "{path}: {record:?}");
            assert!(record.error.as_deref().is_some_and(|e| e.contains("does not compile")), "{path}: {record:?}");
        }
        // Which refusals Python shares: validation keeps refusing the others.
        assert!(compile_pattern("(").err().is_some_and(|e| !e.python_accepts()));
        assert!(compile_pattern(r"\N{LATIN SMALL LETTER A}").err().is_some_and(|e| e.python_accepts()));
        assert!(compile_pattern("(?t)a").err().is_some_and(|e| e.python_accepts()));
    }

    #[test]
    fn evaluate_reports_runtime_regex_errors_as_undecided() {
        let doc = json!({"s": "x".repeat(40)});
        let pattern = compile_pattern("(x+x+)+y(?<=y)").unwrap();
        let record = evaluate(&doc, "/s", Op::Matches, &json!("(x+x+)+y(?<=y)"), Some(&pattern));
        assert!(!record.matched && record.undecided);
        assert_eq!(record.actual, Value::Null);
        assert!(record.error.unwrap().contains("backtracking"));
        // Python's exceptions are misses, as its `except` makes them.
        let record = evaluate(&doc, "/s", Op::Contains, &json!(1), None);
        assert!(!record.matched && !record.undecided && record.error.is_some());
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
        assert_eq!(back, PredicateRecord { error: None, undecided: false, ..record });
    }
}
