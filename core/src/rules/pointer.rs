//! RFC 6901 JSON Pointers: where in a recorded tool call, or in a response, a
//! predicate looks.
//!
//! [`validate_pointer`] checks a pointer's syntax when a scenario is loaded;
//! [`pointer_get`] resolves it in a document when a rule runs. Array indexes
//! follow the RFC strictly, one of the deviations from the original Python
//! listed in [`super`]; descending into a scalar is "not found", as Python's
//! `TypeError` was.

use serde_json::Value;

use super::python::python_type_name;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
