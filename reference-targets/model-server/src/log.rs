//! The request log (`--log PATH`): one JSON line per request received, for tests to read
//! what a client sent and what it was answered. Key headers are logged as hashes only.

use std::{
    fs::{File, OpenOptions},
    io::{self, Write as _},
    path::Path,
    sync::{Mutex, PoisonError},
};

use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use time::{OffsetDateTime, format_description::BorrowedFormatItem, macros::format_description};

/// `2025-01-31T12:34:56.789Z`: RFC 3339, UTC, milliseconds.
const TIME_FORMAT: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// The current time as [`TIME_FORMAT`].
pub fn now() -> String {
    OffsetDateTime::now_utc().format(TIME_FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0_u8; 32];
    out.copy_from_slice(&Sha256::digest(bytes));
    out
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&sha256(bytes))
}

/// The key headers of a request, as hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Keys {
    /// SHA-256 of the `Authorization` credentials (after the scheme word, e.g. `Bearer `).
    pub authorization_sha256: Option<String>,
    /// The scheme word of `Authorization` (`Bearer`), if it has one.
    pub authorization_scheme: Option<String>,
    /// SHA-256 of the `x-api-key` value.
    pub x_api_key_sha256: Option<String>,
}

impl Keys {
    pub fn of(headers: &HeaderMap) -> Self {
        let mut keys = Self::default();
        if let Some(value) = headers.get("authorization") {
            let value = value.as_bytes();
            let (scheme, credentials) = match value.iter().position(|&b| b == b' ') {
                Some(at) => (Some(String::from_utf8_lossy(&value[..at]).into_owned()), value[at + 1..].trim_ascii()),
                None => (None, value),
            };
            keys.authorization_scheme = scheme;
            keys.authorization_sha256 = Some(sha256_hex(credentials));
        }
        if let Some(value) = headers.get("x-api-key") {
            keys.x_api_key_sha256 = Some(sha256_hex(value.as_bytes()));
        }
        keys
    }
}

/// Header names whose values never reach the log.
fn secret_header(name: &str) -> bool {
    ["auth", "key", "token", "secret", "cookie", "password"].iter().any(|word| name.contains(word))
}

/// Headers for the log: lowercased names, repeated ones joined with `, `, secrets
/// replaced by `<redacted>`.
pub fn loggable_headers(headers: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for name in headers.keys() {
        let value = if secret_header(name.as_str()) {
            "<redacted>".to_owned()
        } else {
            headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.insert(name.as_str().to_owned(), Value::String(value));
    }
    out
}

/// One log line (fields in this order).
#[derive(Debug, Serialize)]
pub struct Entry {
    pub seq: u64,
    pub time: String,
    pub method: String,
    pub path: String,
    /// `openai`, `anthropic`, or `null` for an unknown path.
    pub wire: Option<&'static str>,
    pub model: Option<String>,
    pub stream: Option<bool>,
    /// The assistant turn answered (the step index); `null` when no answer was chosen.
    pub step: Option<usize>,
    /// 0 the first time this exact request body was seen.
    pub attempt: Option<u32>,
    /// The fault's `kind`, or `null`.
    pub fault: Option<&'static str>,
    pub delay_ms: u64,
    pub status: u16,
    #[serde(flatten)]
    pub keys: Keys,
    pub headers: Map<String, Value>,
    pub request_bytes: usize,
    /// The request body: its JSON, or its text when it is not JSON.
    pub request: Value,
    /// The response body as sent (up to a cut): its JSON, or its text (streams, broken
    /// bodies).
    pub response: Value,
    pub notes: Vec<String>,
}

/// A body for the log: JSON when it parses, else its (lossy) text.
pub fn body_value(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The open log file.
#[derive(Debug)]
pub struct RequestLog {
    file: Mutex<File>,
}

impl RequestLog {
    /// Opens `path` for appending (creating it).
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { file: Mutex::new(file) })
    }

    /// Appends `entry` as one line.
    pub fn write(&self, entry: &Entry) {
        let mut line = match serde_json::to_vec(entry) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "could not serialize a log entry");
                return;
            }
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
            tracing::warn!(%error, "could not write the request log");
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn keys_are_hashed_without_their_scheme_and_secrets_redacted() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer sk-test"));
        headers.insert("x-api-key", HeaderValue::from_static("sk-test"));
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        headers.insert("x-goog-api-key", HeaderValue::from_static("other"));
        let keys = Keys::of(&headers);
        let hash = sha256_hex(b"sk-test");
        assert_eq!(keys.authorization_sha256.as_deref(), Some(hash.as_str()));
        assert_eq!(keys.x_api_key_sha256.as_deref(), Some(hash.as_str()));
        assert_eq!(keys.authorization_scheme.as_deref(), Some("Bearer"));
        let logged = Value::Object(loggable_headers(&headers)).to_string();
        assert!(!logged.contains("sk-test") && !logged.contains("other"), "{logged}");
        assert!(logged.contains("2023-06-01"));
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
