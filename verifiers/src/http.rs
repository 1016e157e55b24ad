//! The `http_request` action: one bounded HTTP request sent by the trusted runner.
//!
//! # Trust boundary
//!
//! These requests are made by the trusted runner itself, with its own HTTP
//! client, straight to the URL in the scenario. They never go through the
//! audited target or the model, so what they observe is independent of both.
//! The audited target never sees the header secrets used here.
//!
//! # Behaviour
//!
//! - Only `http` and `https` URLs are accepted.
//! - Redirects are not followed: a 3xx answer is recorded as it is. Any status,
//!   including 4xx and 5xx, is data, not an error.
//! - No proxy from the environment, no cookie store.
//! - One deadline ([`HttpLimits::timeout`], 10 s by default) covers connecting,
//!   sending, the response headers and the whole body.
//! - The body is read as a stream and capped at [`HttpLimits::max_body_bytes`]
//!   (100 000 by default). Reading stops at the cap, so at most the cap plus
//!   one network chunk is ever held, and the record says `truncated: true`.
//! - The (possibly capped) body is recorded as JSON if it parses, else as
//!   text (lossy UTF-8; a character split by the cap is dropped).
//! - A JSON body is sent with `content-type: application/json`, unless the
//!   scenario sets its own `content-type` header.
//! - Header values are [`SecretValue`]s: they are sent to the server but never
//!   appear in `Debug` output, error messages or log lines.
//!
//! Each request runs in a `debug` tracing span named `http_request` that
//! carries the method and URL only (no header names or values).

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

/// What a secret is replaced with wherever it would be shown.
pub const REDACTED: &str = "[REDACTED]";

/// The HTTP methods a scenario may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
}

impl Method {
    /// The method as sent on the wire (`"GET"`, `"POST"`, …).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    fn to_reqwest(self) -> reqwest::Method {
        match self {
            Self::Get => reqwest::Method::GET,
            Self::Post => reqwest::Method::POST,
            Self::Put => reqwest::Method::PUT,
            Self::Patch => reqwest::Method::PATCH,
            Self::Delete => reqwest::Method::DELETE,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret string, such as a header value read from the environment.
///
/// `Debug`, `Display` and `Serialize` all give `"[REDACTED]"`; only
/// [`SecretValue::expose`] reads the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a secret.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself. Never log or record what this returns.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for SecretValue {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for SecretValue {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for SecretValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

/// A fully resolved `http_request` action.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequestSpec {
    /// The request method.
    pub method: Method,
    /// The URL, already resolved by the caller. Must be `http` or `https`.
    pub url: String,
    /// Header names and their resolved (secret) values, sent in this order.
    pub headers: Vec<(String, SecretValue)>,
    /// A JSON body; `None` sends no body.
    pub json: Option<Value>,
}

impl HttpRequestSpec {
    /// The evidence form of this request, with its resolved URL; see
    /// [`redacted_input`].
    #[must_use]
    pub fn redacted_input(&self) -> Value {
        redacted_input(self.method, &self.url, self.headers.iter().map(|(name, _)| name), self.json.as_ref())
    }
}

/// Builds the evidence `input` record of an `http_request` action:
/// `{method, url, headers: {name: "[REDACTED]"}, json}`.
///
/// `url` is whatever the caller wants shown (the original tool shows the
/// unresolved URL). `json` is `null` when there is no body. Header values are
/// never taken, so they cannot leak through this record.
#[must_use]
pub fn redacted_input<I, S>(method: Method, url: &str, header_names: I, json: Option<&Value>) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let headers: serde_json::Map<String, Value> =
        header_names.into_iter().map(|name| (name.as_ref().to_owned(), Value::String(REDACTED.to_owned()))).collect();
    serde_json::json!({
        "method": method.as_str(),
        "url": url,
        "headers": headers,
        "json": json.cloned().unwrap_or(Value::Null),
    })
}

/// Whether `name` is a valid HTTP header name (useful when loading scenarios).
#[must_use]
pub fn is_valid_header_name(name: &str) -> bool {
    HeaderName::from_bytes(name.as_bytes()).is_ok()
}

/// Bounds on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Deadline for the whole request: connect, send, headers and body.
    pub timeout: Duration,
    /// The most body bytes kept; more sets `truncated`.
    pub max_body_bytes: usize,
}

impl HttpLimits {
    /// The original tool's timeout: 10 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The original tool's body cap: 100 000 bytes.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 100_000;
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self { timeout: Self::DEFAULT_TIMEOUT, max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES }
    }
}

/// What a completed request produced: the action's `response` record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResponseRecord {
    /// The status code, whatever it is (3xx answers are not followed).
    pub status: u16,
    /// The body as JSON if it parses, else as a string.
    pub body: Value,
    /// Whether the body was longer than the cap and was cut.
    pub truncated: bool,
}

/// A request that produced no response record.
///
/// The message names the method and URL but never a header value, e.g.
/// `failed to send GET http://127.0.0.1:9/: connection refused`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to {} {method} {url}: {kind}", .kind.verb())]
pub struct HttpError {
    /// The request method.
    pub method: Method,
    /// The URL as given in the request.
    pub url: String,
    /// What went wrong.
    pub kind: HttpErrorKind,
}

impl HttpError {
    /// A stable, short name of the failure for evidence records:
    /// `invalid_url`, `invalid_header`, `timeout`, `connect`, `body`, `client`.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpErrorKind {
    /// The URL does not parse or is not `http`/`https`.
    #[error("invalid url: {reason}")]
    InvalidUrl {
        /// Why it was rejected.
        reason: String,
    },
    /// A header name or value cannot be sent. The value is never shown.
    #[error("invalid header {name:?}: {reason}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The deadline passed before the whole answer (headers and body) arrived.
    #[error("no complete answer within {}", format_duration(.after))]
    Timeout {
        /// The deadline that passed.
        after: Duration,
    },
    /// No connection could be made (refused, DNS failure, TLS handshake, …).
    #[error("{detail}")]
    Connect {
        /// What the network layer said.
        detail: String,
    },
    /// The response body broke off or could not be read.
    #[error("{detail}")]
    Body {
        /// What the network layer said.
        detail: String,
    },
    /// Any other client or protocol failure (e.g. the connection closed before
    /// a response).
    #[error("{detail}")]
    Client {
        /// What the client said.
        detail: String,
    },
}

impl HttpErrorKind {
    /// See [`HttpError::kind_name`].
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "invalid_url",
            Self::InvalidHeader { .. } => "invalid_header",
            Self::Timeout { .. } => "timeout",
            Self::Connect { .. } => "connect",
            Self::Body { .. } => "body",
            Self::Client { .. } => "client",
        }
    }

    const fn verb(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } | Self::InvalidHeader { .. } => "prepare",
            Self::Timeout { .. } => "complete",
            Self::Connect { .. } | Self::Client { .. } => "send",
            Self::Body { .. } => "read the response to",
        }
    }
}

/// The HTTP client could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to build the http client: {reason}")]
pub struct HttpClientBuildError {
    /// Why.
    pub reason: String,
}

/// The runner's HTTP client for `http_request` actions. Build it once and
/// share it; it is cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    limits: HttpLimits,
}

impl HttpClient {
    /// Builds the client: redirects not followed, no proxy from the
    /// environment, no cookies, connect timeout = `limits.timeout`.
    ///
    /// If no rustls crypto provider is installed in the process yet, this
    /// installs `ring` as the default (reqwest would panic otherwise).
    ///
    /// # Errors
    ///
    /// A zero timeout, or reqwest failing to build its client.
    pub fn new(limits: HttpLimits) -> Result<Self, HttpClientBuildError> {
        if limits.timeout.is_zero() {
            return Err(HttpClientBuildError { reason: "the timeout must be longer than zero".to_owned() });
        }
        let client = build_client(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(limits.timeout)
                .user_agent(concat!("elengtis-verifiers/", env!("CARGO_PKG_VERSION")))
        })
        .map_err(|reason| HttpClientBuildError { reason })?;
        Ok(Self { client, limits })
    }

    /// The limits this client applies.
    #[must_use]
    pub const fn limits(&self) -> HttpLimits {
        self.limits
    }

    /// Sends one request and reads its answer within the limits.
    ///
    /// # Errors
    ///
    /// An invalid URL or header, a connection failure, a broken body, or the
    /// deadline passing. Any HTTP status is a success.
    pub async fn execute(&self, spec: &HttpRequestSpec) -> Result<HttpResponseRecord, HttpError> {
        let span = tracing::debug_span!("http_request", method = %spec.method, url = %spec.url);
        async {
            let result = self.execute_unlogged(spec).await;
            match &result {
                Ok(record) => {
                    tracing::debug!(status = record.status, truncated = record.truncated, "http request answered")
                }
                Err(error) => tracing::debug!(
                    kind = error.kind_name(),
                    error = %error,
                    "http request failed"
                ),
            }
            result
        }
        .instrument(span)
        .await
    }

    async fn execute_unlogged(&self, spec: &HttpRequestSpec) -> Result<HttpResponseRecord, HttpError> {
        let fail = |kind| HttpError { method: spec.method, url: spec.url.clone(), kind };
        let url = parse_url(&spec.url).map_err(fail)?;
        let headers = build_headers(&spec.headers).map_err(fail)?;
        let mut request = self.client.request(spec.method.to_reqwest(), url).headers(headers);
        if let Some(json) = &spec.json {
            // Sets `content-type: application/json` unless a header already did.
            request = request.json(json);
        }
        let deadline = self.limits.timeout;
        match tokio::time::timeout(deadline, send_and_read(request, self.limits)).await {
            Ok(Ok(record)) => Ok(record),
            Ok(Err(kind)) => Err(fail(kind)),
            Err(_elapsed) => Err(fail(HttpErrorKind::Timeout { after: deadline })),
        }
    }
}

/// Build a reqwest client from `make`, the one way every HTTP client of the workspace is built.
///
/// Installs `ring` as the process's rustls provider when none is installed yet (reqwest would
/// panic otherwise). On a host without CA certificates (the FROM-scratch tool image without a
/// mounted bundle) the platform verifier cannot be built; the client is then built with no
/// trusted roots, so plain `http://` still works and an `https://` request fails with a
/// certificate error naming its host instead of the whole run failing to start. Point
/// `SSL_CERT_FILE` at a CA bundle (or mount one at `/etc/ssl/certs/ca-certificates.crt`) to
/// reach `https://` there.
///
/// # Errors
///
/// reqwest failing to build the client either way, both reasons given.
pub fn build_client(make: impl Fn() -> reqwest::ClientBuilder) -> Result<reqwest::Client, String> {
    ensure_crypto_provider();
    match make().build() {
        Ok(client) => Ok(client),
        Err(platform) => make()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|error| format!("{}; without system certificates: {}", describe(&platform), describe(&error))),
    }
}

/// reqwest panics when building a client with no rustls provider installed.
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn parse_url(raw: &str) -> Result<reqwest::Url, HttpErrorKind> {
    let url = reqwest::Url::parse(raw).map_err(|error| HttpErrorKind::InvalidUrl { reason: error.to_string() })?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(HttpErrorKind::InvalidUrl { reason: format!("scheme {other:?} is not http or https") }),
    }
}

fn build_headers(headers: &[(String, SecretValue)]) -> Result<HeaderMap, HttpErrorKind> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| HttpErrorKind::InvalidHeader { name: name.clone(), reason: "not a valid HTTP header name" })?;
        // The parse error is dropped on purpose: it must not carry the secret anywhere.
        let mut header_value =
            HeaderValue::from_bytes(value.expose().as_bytes()).map_err(|_| HttpErrorKind::InvalidHeader {
                name: name.clone(),
                reason: "the value contains characters not allowed in a header",
            })?;
        header_value.set_sensitive(true);
        map.append(header_name, header_value);
    }
    Ok(map)
}

async fn send_and_read(
    request: reqwest::RequestBuilder,
    limits: HttpLimits,
) -> Result<HttpResponseRecord, HttpErrorKind> {
    let mut response = request.send().await.map_err(|error| error_kind(&error, limits.timeout, false))?;
    let status = response.status().as_u16();
    let (bytes, truncated) = read_capped(&mut response, limits).await?;
    Ok(HttpResponseRecord { status, body: decode_body(&bytes, truncated), truncated })
}

/// The largest buffer reserved up front from an announced `content-length`.
const MAX_PREALLOCATION: usize = 1 << 20;

/// Reads the body chunk by chunk, keeping at most `max_body_bytes`. Returns the
/// kept bytes and whether anything was left unread.
async fn read_capped(response: &mut reqwest::Response, limits: HttpLimits) -> Result<(Vec<u8>, bool), HttpErrorKind> {
    let cap = limits.max_body_bytes;
    let announced = response.content_length().and_then(|length| usize::try_from(length).ok()).unwrap_or(0);
    let mut kept = Vec::with_capacity(announced.min(cap).min(MAX_PREALLOCATION));
    while let Some(chunk) = response.chunk().await.map_err(|error| error_kind(&error, limits.timeout, true))? {
        let room = cap - kept.len();
        if chunk.len() > room {
            kept.extend_from_slice(&chunk[..room]);
            return Ok((kept, true));
        }
        kept.extend_from_slice(&chunk);
    }
    Ok((kept, false))
}

fn decode_body(bytes: &[u8], truncated: bool) -> Value {
    if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
        return value;
    }
    let text = if truncated { without_split_char(bytes) } else { bytes };
    Value::String(String::from_utf8_lossy(text).into_owned())
}

/// Drops a multi-byte UTF-8 character cut in half at the end of `bytes`.
fn without_split_char(bytes: &[u8]) -> &[u8] {
    let tail = bytes.len().saturating_sub(3);
    for start in (tail..bytes.len()).rev() {
        let is_continuation = bytes[start] & 0xC0 == 0x80;
        if !is_continuation {
            return match std::str::from_utf8(&bytes[start..]) {
                Err(error) if error.error_len().is_none() => &bytes[..start],
                _ => bytes,
            };
        }
    }
    bytes
}

fn error_kind(error: &reqwest::Error, deadline: Duration, reading_body: bool) -> HttpErrorKind {
    let detail = describe(error);
    if error.is_timeout() {
        HttpErrorKind::Timeout { after: deadline }
    } else if reading_body || error.is_body() || error.is_decode() {
        HttpErrorKind::Body { detail }
    } else if error.is_connect() {
        HttpErrorKind::Connect { detail }
    } else {
        HttpErrorKind::Client { detail }
    }
}

/// A short lowercase description of a reqwest error, taken from its innermost
/// cause. reqwest's own message is skipped because it repeats the URL.
fn describe(error: &reqwest::Error) -> String {
    let mut innermost: Option<&(dyn std::error::Error + 'static)> = None;
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        innermost = Some(cause);
        next = cause.source();
    }
    let Some(cause) = innermost else {
        return if error.is_builder() {
            "the request could not be built".to_owned()
        } else if error.is_redirect() {
            "redirect error".to_owned()
        } else {
            "request error".to_owned()
        };
    };
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        use std::io::ErrorKind as K;
        let phrase = match io.kind() {
            K::ConnectionRefused => Some("connection refused"),
            K::ConnectionReset => Some("connection reset"),
            K::ConnectionAborted => Some("connection aborted"),
            K::NotConnected => Some("not connected"),
            K::AddrNotAvailable => Some("address not available"),
            K::HostUnreachable => Some("host unreachable"),
            K::NetworkUnreachable => Some("network unreachable"),
            K::NetworkDown => Some("network down"),
            K::UnexpectedEof => Some("connection closed unexpectedly"),
            K::TimedOut => Some("timed out"),
            _ => None,
        };
        if let Some(phrase) = phrase {
            return phrase.to_owned();
        }
    }
    tidy(&cause.to_string())
}

/// Lowercases the first letter and drops an ` (os error N)` suffix and a trailing period.
fn tidy(message: &str) -> String {
    let message = match message.rfind(" (os error ") {
        Some(at) if message.ends_with(')') => &message[..at],
        _ => message,
    };
    let message = message.trim().trim_end_matches('.');
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "unknown error".to_owned(),
    }
}

fn format_duration(duration: &Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else if duration.as_nanos().is_multiple_of(1_000_000) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{duration:?}")
    }
}

#[cfg(test)]
mod tests;
