//! The one strict reader of results documents: `manifest.json`, `seal.json`, every line of
//! `runs.jsonl` and every evidence file are read through [`parse`] (or checked with [`check`]
//! after a typed parse of the same bytes) by every command that reads results.
//!
//! JSON leaves two things to the reader that a hash or signature over the *parsed* document
//! cannot pin down:
//!
//! - **a key twice in one object** (`"trials": 8, "trials": 3`): `serde_json` keeps the last,
//!   other readers keep the first or refuse, so a signed document could show a reader values
//!   nobody signed. Refused, wherever it is (keys compared as decoded text: `"a"` and
//!   `"\u0061"` are the same key).
//! - **a number written in another form than the one this tool writes**: `serde_json` reads
//!   `3.0000000000000001` as `3.0`, `1E2` as `100.0` and `18446744073709551616` as a float,
//!   while a reader with exact decimals reads other values. A number is accepted only in the
//!   form `serde_json` writes the value it reads (`3.0`, `100.0`, `0.1`, `1e-7`, `42`): what the
//!   runner writes, so every reader reads the one value the signature covers.
//!
//! Strings need no such rule: an escape decodes to one text for every reader, and invalid
//! UTF-8 or a lone surrogate is already not JSON.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::Value;

/// Why a document is not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictError {
    /// Not JSON (or truncated).
    #[error("it is not valid JSON ({detail})")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// `serde_json`'s message, without its position.
        detail: String,
        /// The text ends before the document does.
        truncated: bool,
    },
    /// An object has a key twice.
    #[error(
        "key `{key}` appears twice in {at}: a reader that takes the first would see a value that was never written or signed"
    )]
    DuplicateKey {
        /// The key.
        key: String,
        /// The object, as a path (`` `campaign` ``, `the top-level object`).
        at: String,
        /// 1-based line of the second occurrence.
        line: usize,
    },
    /// A number is not in the form this tool writes.
    #[error(
        "the number `{token}` is not in the form elengtis writes (`{canonical}`): readers could read it as different values"
    )]
    NumberForm {
        /// The number as written.
        token: String,
        /// How `serde_json` writes the value it reads it as.
        canonical: String,
        /// 1-based line.
        line: usize,
    },
}

impl StrictError {
    /// The 1-based line of the problem.
    pub fn line(&self) -> usize {
        match self {
            StrictError::Syntax { line, .. }
            | StrictError::DuplicateKey { line, .. }
            | StrictError::NumberForm { line, .. } => *line,
        }
    }

    /// From a `serde_json` error on the same bytes.
    pub fn syntax(error: &serde_json::Error) -> StrictError {
        let message = error.to_string();
        let suffix = format!(" at line {} column {}", error.line(), error.column());
        let detail =
            message.strip_suffix(&suffix).map_or(message.clone(), |m| format!("{m} at column {}", error.column()));
        StrictError::Syntax { line: error.line(), detail, truncated: error.is_eof() }
    }
}

/// Parses a results document strictly: JSON, each key once per object, each number in the
/// form this tool writes.
///
/// # Errors
///
/// [`StrictError`] naming the line (and the key or number) at fault.
pub fn parse(bytes: &[u8]) -> Result<Value, StrictError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| StrictError::syntax(&e))?;
    check(bytes)?;
    Ok(value)
}

/// Checks bytes that `serde_json` has already read as one JSON document (typed or not): each
/// key once per object, each number in the form this tool writes. On bytes that are not JSON
/// the result means nothing (parse them first).
///
/// # Errors
///
/// [`StrictError::DuplicateKey`] or [`StrictError::NumberForm`].
pub fn check(bytes: &[u8]) -> Result<(), StrictError> {
    Scanner { bytes, pos: 0, line: 1, frames: Vec::new(), keys: Vec::new() }.run()
}

/// Keys kept in the shared list before an object gets a set of its own.
const LIST_KEYS: usize = 16;

enum Frame<'a> {
    /// An object: its keys so far are `keys[from..]` of the scanner's shared list (and, once
    /// it has more than [`LIST_KEYS`], `set` too); `expect_key` until its next `:`.
    Object {
        from: usize,
        set: Option<HashSet<Cow<'a, [u8]>>>,
        expect_key: bool,
    },
    Array {
        index: usize,
    },
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
    frames: Vec<Frame<'a>>,
    /// The keys of every open object, innermost last (one list, reused: no allocation per
    /// object).
    keys: Vec<Cow<'a, [u8]>>,
}

impl<'a> Scanner<'a> {
    fn run(mut self) -> Result<(), StrictError> {
        let bytes = self.bytes;
        while let Some(&byte) = bytes.get(self.pos) {
            match byte {
                b'\n' => self.line += 1,
                b'{' => self.frames.push(Frame::Object { from: self.keys.len(), set: None, expect_key: true }),
                b'[' => self.frames.push(Frame::Array { index: 0 }),
                b'}' | b']' => {
                    if let Some(Frame::Object { from, .. }) = self.frames.pop() {
                        self.keys.truncate(from);
                    }
                }
                b':' => {
                    if let Some(Frame::Object { expect_key, .. }) = self.frames.last_mut() {
                        *expect_key = false;
                    }
                }
                b',' => match self.frames.last_mut() {
                    Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                    Some(Frame::Array { index }) => *index += 1,
                    None => {}
                },
                b'"' => {
                    let end = self.string_end();
                    self.string(self.pos, end)?;
                    self.pos = end;
                }
                b'-' | b'0'..=b'9' => {
                    let start = self.pos;
                    while matches!(bytes.get(self.pos + 1), Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')) {
                        self.pos += 1;
                    }
                    self.number(&bytes[start..=self.pos])?;
                }
                _ => {}
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// The index of the quote that closes the string opening at `self.pos`: the next quote
    /// not escaped (preceded by an even number of backslashes).
    fn string_end(&self) -> usize {
        let mut from = self.pos + 1;
        while let Some(offset) = self.bytes.get(from..).and_then(|rest| rest.iter().position(|&b| b == b'"')) {
            let at = from + offset;
            let escapes = self.bytes[..at].iter().rev().take_while(|&&b| b == b'\\').count();
            if escapes % 2 == 0 {
                return at;
            }
            from = at + 1;
        }
        self.bytes.len()
    }

    /// A string from `start` (its opening quote) to `end` (its closing one): a key is checked
    /// against the object's other keys.
    fn string(&mut self, start: usize, end: usize) -> Result<(), StrictError> {
        let Some(Frame::Object { from, set, expect_key: true }) = self.frames.last_mut() else { return Ok(()) };
        let raw = self.bytes.get(start + 1..end).unwrap_or_default();
        let key: Cow<'a, [u8]> = if raw.contains(&b'\\') {
            let quoted = self.bytes.get(start..=end).unwrap_or_default();
            Cow::Owned(
                serde_json::from_slice::<String>(quoted).map(String::into_bytes).unwrap_or_else(|_| raw.to_vec()),
            )
        } else {
            Cow::Borrowed(raw)
        };
        let seen = match set {
            Some(set) => !set.insert(key.clone()),
            None => {
                let seen = self.keys[*from..].contains(&key);
                if !seen && self.keys.len() - *from == LIST_KEYS {
                    let mut all: HashSet<Cow<'a, [u8]>> = self.keys[*from..].iter().cloned().collect();
                    all.insert(key.clone());
                    *set = Some(all);
                }
                seen
            }
        };
        if !seen {
            self.keys.push(key);
            return Ok(());
        }
        let depth = self.frames.len() - 1;
        Err(StrictError::DuplicateKey {
            key: String::from_utf8_lossy(&key).into_owned(),
            at: self.path(depth),
            line: self.line,
        })
    }

    /// The object or array at `depth` as a path from the document's root.
    fn path(&self, depth: usize) -> String {
        let mut path = String::new();
        for (level, frame) in self.frames[..depth].iter().enumerate() {
            match frame {
                Frame::Object { .. } => {
                    // The key this object is in the middle of: its last one, just before where
                    // the next open object's keys begin.
                    let next = self.frames.get(level + 1..).into_iter().flatten().find_map(|f| match f {
                        Frame::Object { from, .. } => Some(*from),
                        Frame::Array { .. } => None,
                    });
                    let last = next.unwrap_or(self.keys.len()).checked_sub(1).and_then(|i| self.keys.get(i));
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&String::from_utf8_lossy(last.map_or(&b""[..], AsRef::as_ref)));
                }
                Frame::Array { index } => {
                    let _ = write!(path, "[{index}]");
                }
            }
        }
        if path.is_empty() { "the top-level object".to_owned() } else { format!("`{path}`") }
    }

    fn number(&self, token: &'a [u8]) -> Result<(), StrictError> {
        let digits = token.strip_prefix(b"-").unwrap_or(token);
        // Integers in the common range are written one way only: no leading zero, no `-0`.
        let plain = digits.len() <= 18
            && digits.iter().all(u8::is_ascii_digit)
            && (digits.first() != Some(&b'0') || (digits == b"0" && token == b"0"));
        if plain {
            return Ok(());
        }
        let canonical = serde_json::from_slice::<Value>(token).map(|value| value.to_string()).unwrap_or_default();
        if canonical.as_bytes() == token {
            return Ok(());
        }
        Err(StrictError::NumberForm { token: String::from_utf8_lossy(token).into_owned(), canonical, line: self.line })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> StrictError {
        parse(text.as_bytes()).expect_err(text)
    }

    #[test]
    fn what_the_runner_writes_reads() {
        let value = serde_json::json!({
            "a": [1, -2, 0, 3.5, 0.1, 1e-7, 1.0e20, 12345678901234567890u64, -9223372036854775808i64, f64::MAX, f64::MIN_POSITIVE],
            "b": {"nested": {"x": null, "y": true, "z": "quoted \" and \\ and \u{2028} and {\"a\":1}"}},
            "c": [{"k": 1}, {"k": 2}],
            "\u{e9}": "",
        });
        for text in [serde_json::to_vec(&value).expect("json"), serde_json::to_vec_pretty(&value).expect("json")] {
            assert_eq!(parse(&text).expect("reads"), value);
        }
        // Many floats, as serde_json writes them.
        let mut x = 1.0_f64;
        for _ in 0..2000 {
            x = x * 1.37 + 0.013;
            for y in [x, -x, 1.0 / x] {
                let text = serde_json::to_vec(&serde_json::json!({"v": y})).expect("json");
                assert!(parse(&text).is_ok(), "{}", String::from_utf8_lossy(&text));
            }
        }
    }

    #[test]
    fn a_key_twice_is_refused_wherever_it_is() {
        let cases = [
            ("{\"trials\": 8, \"trials\": 3}", "trials", "the top-level object"),
            ("{\"campaign\": {\"x\": 1,\n \"trials\": 8, \"trials\": 3}}", "trials", "`campaign`"),
            ("{\"s\": [{}, {\"d\": {\"a\": 1, \"\\u0061\": 2}}]}", "a", "`s[1].d`"),
        ];
        for (text, key, at) in cases {
            match error(text) {
                StrictError::DuplicateKey { key: k, at: a, .. } => {
                    assert_eq!((k.as_str(), a.as_str()), (key, at), "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert_eq!(error("{\"a\": {\"x\": 1,\n\n \"x\": 2}}").line(), 3);
        // The same key in sibling objects, or as a value, is not a duplicate.
        assert!(parse(b"{\"a\": {\"k\": 1}, \"b\": {\"k\": 1}, \"c\": \"k\", \"d\": [\"a\", \"a\"]}").is_ok());
        assert!(parse(b"{\"a\": \"\\\"a\\\": 1\", \"b\": 1}").is_ok());
        assert!(parse(br#"{"a": {"x": 1, "y": {"x": 2}}, "x": 3, "y": 4}"#).is_ok());
        // Escaped backslashes before a closing quote end the string; an escaped quote does not.
        assert!(parse(br#"{"k": "x\\", "k2": "y\"z", "k3": "\\\""}"#).is_ok());
        assert!(matches!(error(r#"{"k": "x\\", "k": 1}"#), StrictError::DuplicateKey { .. }));
        // Many keys (the set, past the list).
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        assert!(parse(format!("{{{}}}", many.join(",")).as_bytes()).is_ok());
        let twice = format!("{{{}, \"k33\": 0}}", many.join(","));
        assert!(matches!(error(&twice), StrictError::DuplicateKey { .. }));
    }

    #[test]
    fn a_number_in_another_form_is_refused() {
        for (token, canonical) in [
            ("3.0000000000000001", "3.0"),
            ("1E2", "100.0"),
            ("1e2", "100.0"),
            ("1.50", "1.5"),
            ("-0", "-0.0"),
            ("18446744073709551616", "1.8446744073709552e+19"),
            ("0.10", "0.1"),
        ] {
            match error(&format!("{{\"n\": {token}}}")) {
                StrictError::NumberForm { token: t, canonical: c, .. } => {
                    assert_eq!((t.as_str(), c.as_str()), (token, canonical));
                }
                other => panic!("{token}: {other:?}"),
            }
        }
        for token in ["0", "-1", "123456789012345678", "18446744073709551615", "-0.0", "1e-7", "0.5"] {
            assert!(parse(format!("[{token}]").as_bytes()).is_ok(), "{token}");
        }
    }

    #[test]
    fn not_json_says_where() {
        match error("{\"a\": 1,\n \"b\": }") {
            StrictError::Syntax { line: 2, truncated: false, .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(error("{\"a\": "), StrictError::Syntax { truncated: true, .. }));
    }
}
