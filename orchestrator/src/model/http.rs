//! HTTP for model providers: one attempt with a deadline, retry timing (exponential backoff
//! with jitter, `Retry-After`), and a per-provider limit on requests in flight with a shared
//! cool-down after a 429, so a rate-limit storm slows every trial down instead of failing it.
//!
//! What is retried, and how often, is the provider's decision
//! ([`super::providers`]); this module only performs attempts and measures time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Longest single backoff or `Retry-After` wait honoured.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Connection deadline (the attempt's own deadline also bounds it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest answer read (a completion is far smaller; a larger one is refused, not retried).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The run's HTTP client for providers (connections are reused across trials).
#[derive(Debug, Clone)]
pub struct HttpClient(reqwest::Client);

impl HttpClient {
    /// A client that follows no redirects (a key is never sent elsewhere).
    pub fn new() -> Result<Self, String> {
        elengtis_verifiers::build_client(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("elengtis/", env!("CARGO_PKG_VERSION")))
        })
        .map(HttpClient)
        .map_err(|e| format!("failed to build the HTTP client for model providers: {e}"))
    }

    /// A client for an endpoint the runner started itself (a `rest` target's container, on an
    /// address of this host or of a trial network): no proxy from the environment, no
    /// redirects, and no connection kept once a request is done (the next trial's container
    /// may get the same address).
    pub fn local() -> Result<Self, String> {
        elengtis_verifiers::build_client(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .pool_max_idle_per_host(0)
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("elengtis/", env!("CARGO_PKG_VERSION")))
        })
        .map(HttpClient)
        .map_err(|e| format!("failed to build the HTTP client for a container endpoint: {e}"))
    }
}

/// An answer: status, the wait the server asked for, and the whole body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `retry-after-ms` or `Retry-After` (seconds or an HTTP date), when given.
    pub retry_after: Option<Duration>,
    /// The body (lossy UTF-8).
    pub body: String,
}

/// Why an attempt got no whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// No connection (refused, reset, DNS, TLS).
    Connect(String),
    /// The deadline passed before the whole answer arrived.
    Timeout(Duration),
    /// The connection broke while the body was read (a truncated answer).
    Body {
        /// The status that had arrived.
        status: u16,
        /// What broke.
        detail: String,
    },
    /// The body is larger than [`MAX_BODY_BYTES`] (reading stopped there).
    TooLarge {
        /// The status that had arrived.
        status: u16,
    },
}

impl TransportError {
    /// Short class name recorded with the attempt.
    pub fn class(&self) -> &'static str {
        match self {
            TransportError::Connect(_) => "connect",
            TransportError::Timeout(_) => "timeout",
            TransportError::Body { .. } => "truncated_body",
            TransportError::TooLarge { .. } => "body_too_large",
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Connect(detail) => write!(f, "failed to connect: {detail}"),
            TransportError::Timeout(deadline) => {
                write!(f, "failed to get a whole answer within the deadline of {} ms", deadline.as_millis())
            }
            TransportError::Body { status, detail } => {
                write!(f, "failed to read the answer (status {status}): the body was cut: {detail}")
            }
            TransportError::TooLarge { status } => {
                write!(f, "failed to read the answer (status {status}): the body exceeds {MAX_BODY_BYTES} bytes")
            }
        }
    }
}

/// One attempt: POST `body` to `url` with `headers`, the whole answer within `deadline`.
pub async fn post(
    client: &HttpClient,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    deadline: Duration,
) -> Result<Answer, TransportError> {
    let attempt = async {
        let mut request = client.0.post(url).header("content-type", "application/json").body(body);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.map_err(|e| TransportError::Connect(crate::capture::chain(&e)))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(|e| TransportError::Body { status, detail: crate::capture::chain(&e) })?
        {
            if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(TransportError::TooLarge { status });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Answer { status, retry_after, body: String::from_utf8_lossy(&bytes).into_owned() })
    };
    match tokio::time::timeout(deadline, attempt).await {
        Ok(result) => result,
        Err(_) => Err(TransportError::Timeout(deadline)),
    }
}

/// The wait a response asks for: `retry-after-ms` (OpenAI, OpenRouter), else `Retry-After`
/// in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return duration_secs(ms / 1000.0);
    }
    parse_retry_after(text("retry-after")?, time::OffsetDateTime::now_utc())
}

fn duration_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(MAX_WAIT.as_secs_f64())))
}

/// `Retry-After`: delay seconds, or an HTTP date (IMF-fixdate) relative to `now`.
pub fn parse_retry_after(value: &str, now: time::OffsetDateTime) -> Option<Duration> {
    if let Ok(secs) = value.parse::<f64>() {
        return duration_secs(secs);
    }
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    let when = time::PrimitiveDateTime::parse(value, &format).ok()?.assume_utc();
    duration_secs((when - now).as_seconds_f64().max(0.0))
}

/// Delay before retry `retry` (0-based): `base × 2^retry`, capped at [`MAX_WAIT`], of which
/// the upper half is random ("equal jitter"), so clients that failed together do not retry
/// together.
pub fn backoff(base: Duration, retry: u32) -> Duration {
    let full = base.saturating_mul(2u32.saturating_pow(retry.min(16))).min(MAX_WAIT);
    let half = full / 2;
    half + half.mul_f64(unit_random())
}

/// A uniform number in [0, 1) from the system's randomness.
fn unit_random() -> f64 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    #[expect(clippy::cast_precision_loss, reason = "53 random bits")]
    let x = (u64::from_le_bytes(word) >> 11) as f64;
    x / (1u64 << 53) as f64
}

/// Requests in flight to one provider, over the whole run, and the cool-down a 429 imposes
/// on all of them.
#[derive(Debug)]
pub struct Limiter {
    slots: Semaphore,
    cool_until: Mutex<Option<Instant>>,
}

impl Limiter {
    /// At most `in_flight` requests at once.
    pub fn new(in_flight: usize) -> Self {
        Limiter { slots: Semaphore::new(in_flight.max(1)), cool_until: Mutex::new(None) }
    }

    /// Wait out a cool-down, then for a free slot.
    pub async fn acquire(&self) -> Option<SemaphorePermit<'_>> {
        loop {
            let until = *self.cool_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until.into()).await,
                _ => break,
            }
        }
        self.slots.acquire().await.ok()
    }

    /// Hold every request to this provider back for `wait` (a 429 said so).
    pub fn cool_down(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut current = self.cool_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.is_none_or(|c| c < until) {
            *current = Some(until);
        }
    }
}

/// The run's limiters, one per provider (kind and base URL).
#[derive(Debug, Default)]
pub struct Limiters(Mutex<HashMap<String, Arc<Limiter>>>);

impl Limiters {
    /// The limiter of `provider`, created with `in_flight` slots on first use.
    pub fn get(&self, provider: &str, in_flight: usize) -> Arc<Limiter> {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(provider.to_owned()).or_insert_with(|| Arc::new(Limiter::new(in_flight))).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_in_the_upper_half_and_is_capped() {
        let base = Duration::from_millis(100);
        for retry in 0..5 {
            let full = Duration::from_millis(100 * 2u64.pow(retry));
            for _ in 0..20 {
                let d = backoff(base, retry);
                assert!(d >= full / 2 && d <= full, "retry {retry}: {d:?}");
            }
        }
        assert!(backoff(base, 30) <= MAX_WAIT);
        let samples: std::collections::BTreeSet<Duration> = (0..10).map(|_| backoff(base, 3)).collect();
        assert!(samples.len() > 1, "jittered");
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = time::macros::datetime!(2026-01-31 12:00:00 UTC);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.25", now), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after("Sat, 31 Jan 2026 12:00:05 GMT", now), Some(Duration::from_secs(5)));
        assert_eq!(parse_retry_after("Sat, 31 Jan 2026 11:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("9999", now), Some(MAX_WAIT));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[tokio::test]
    async fn the_limiter_bounds_requests_in_flight_and_cools_down() {
        let limiter = Limiter::new(1);
        let first = limiter.acquire().await;
        assert!(first.is_some());
        assert!(limiter.slots.try_acquire().is_err(), "one in flight");
        drop(first);
        limiter.cool_down(Duration::from_millis(50));
        let started = Instant::now();
        let _second = limiter.acquire().await;
        assert!(started.elapsed() >= Duration::from_millis(45));
        let limiters = Limiters::default();
        assert!(Arc::ptr_eq(&limiters.get("a", 2), &limiters.get("a", 9)));
    }
}
