//! Live model providers behind the [`Model`] interface: a request (the conversation and the
//! offered tools) goes out in the provider's wire format ([`openai`]: OpenAI-compatible
//! endpoints and OpenRouter; [`anthropic`]: the Messages API) and comes back as a turn (text,
//! tool calls, finish reasons, usage), or as a [`ModelError`] that ends the trial as
//! `provider_error` — never as a resist or a fire.
//!
//! Every request has a deadline per attempt (`generation.timeout`, milliseconds, default
//! 120 s). Connection failures, timeouts, cut bodies, 5xx and 429 are retried with
//! exponential backoff and jitter (`Retry-After` honoured), at most `generation.max_retries`
//! times (default 2); a 429 does not use up a retry while the request's rate-limit waits stay
//! under five minutes, and it holds every request to that provider back for its wait, so a
//! 429 storm slows the run down instead of failing it. Other statuses and malformed bodies
//! (empty, invalid JSON, not a completion, an error object) are not retried. Every attempt is
//! an [`Exchange`] in the evidence (request and response bodies, status, latency, usage, why
//! it failed). Keys are read from the environment for each request and never stored: a
//! response or error that echoes one has it replaced by `<redacted>`.

pub mod anthropic;
pub mod openai;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use elengtis_core::agent::{Exchange, InvalidCall, ModelCall, ModelRequest, ModelTurn};
use elengtis_core::format::campaign::{Campaign, ProviderKind};
use elengtis_core::format::generation::Generation;
use elengtis_core::refs::Values;
use serde_json::{Map, Value, json};

use super::fixtures::{self, FixtureMode, KeyInputs, Normaliser, RecordedFailure};
use super::http::{self, TransportError};
use super::pricing::Price;
use super::{Model, ModelContext, ModelError, ModelErrorKind, budget};

/// How long one request may wait in total for 429s before they count as retries.
pub const RATE_LIMIT_PATIENCE: Duration = Duration::from_secs(300);

/// Default requests in flight to one provider.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 4;

/// Default first backoff.
pub const DEFAULT_BACKOFF_MS: u64 = 500;

/// OpenRouter's API.
pub const OPENROUTER_BASE: &str = "https://openrouter.ai/api/v1";

/// OpenAI's API.
pub const OPENAI_BASE: &str = "https://api.openai.com/v1";

/// Anthropic's API.
pub const ANTHROPIC_BASE: &str = "https://api.anthropic.com";

/// A campaign's live model, resolved: where, how, with which settings.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The wire and service.
    pub kind: ProviderKind,
    /// The model as sent.
    pub model: String,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// The key's variable, if a key is sent.
    pub api_key_env: Option<String>,
    /// Extra headers: name and variable.
    pub headers: Vec<(String, String)>,
    /// Typed generation settings.
    pub generation: Generation,
    /// The campaign's generation settings as written (with `route` from `provider_route`),
    /// for fixture keys.
    pub generation_map: Map<String, Value>,
    /// Requests in flight to this provider over the run.
    pub max_in_flight: usize,
    /// First retry delay.
    pub backoff: Duration,
}

impl ProviderConfig {
    /// Resolve a campaign's live model (None: the campaign has none). Base URLs honour
    /// `OPENROUTER_API_BASE` (as the original's client did), `OPENAI_BASE_URL` and
    /// `ANTHROPIC_BASE_URL` when the campaign names none.
    pub fn from_campaign(campaign: &Campaign) -> Result<Option<ProviderConfig>, String> {
        // An empty model name means no model, as in the original (Python truthiness).
        let Some(model) = campaign.model.as_ref().filter(|m| !m.is_empty()) else { return Ok(None) };
        let kind = campaign.provider_kind();
        let spec = campaign.provider.as_ref();
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base_url = spec.and_then(|p| p.base_url.clone()).or_else(|| match kind {
            ProviderKind::Openrouter => env("OPENROUTER_API_BASE"),
            ProviderKind::OpenaiCompatible => env("OPENAI_BASE_URL"),
            ProviderKind::Anthropic => env("ANTHROPIC_BASE_URL"),
        });
        let base_url = base_url.unwrap_or_else(|| {
            match kind {
                ProviderKind::Openrouter => OPENROUTER_BASE,
                ProviderKind::OpenaiCompatible => OPENAI_BASE,
                ProviderKind::Anthropic => ANTHROPIC_BASE,
            }
            .to_owned()
        });
        let mut base_url = base_url.trim_end_matches('/').to_owned();
        if kind == ProviderKind::Anthropic && base_url.ends_with("/v1") {
            base_url.truncate(base_url.len() - 3);
        }
        let api_key_env = match spec.and_then(|p| p.api_key.as_ref()) {
            Some(r) => Some(r.env.clone()),
            None => match kind {
                ProviderKind::Openrouter => Some("OPENROUTER_API_KEY".to_owned()),
                ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY".to_owned()),
                ProviderKind::OpenaiCompatible => None,
            },
        };
        let generation =
            Generation::parse(&campaign.generation, campaign.provider_route.as_deref()).map_err(|problems| {
                let list: Vec<String> = problems.into_iter().map(|(k, m)| format!("generation.{k}: {m}")).collect();
                format!("failed to read the generation settings: {}", list.join("; "))
            })?;
        let mut generation_map = campaign.generation.clone();
        if let (Some(route), false) = (&campaign.provider_route, generation_map.contains_key("route")) {
            generation_map.insert("route".into(), json!(route));
        }
        Ok(Some(ProviderConfig {
            kind,
            model: model.clone(),
            base_url,
            api_key_env,
            headers: spec
                .map(|p| p.headers.iter().map(|(k, v)| (k.clone(), v.env.clone())).collect())
                .unwrap_or_default(),
            generation,
            generation_map,
            max_in_flight: usize::try_from(spec.and_then(|p| p.max_in_flight).unwrap_or(DEFAULT_MAX_IN_FLIGHT))
                .unwrap_or(1),
            backoff: Duration::from_millis(spec.and_then(|p| p.backoff_ms).unwrap_or(DEFAULT_BACKOFF_MS)),
        }))
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> String {
        match self.kind {
            ProviderKind::Anthropic => format!("{}/v1/messages", self.base_url),
            _ => format!("{}/chat/completions", self.base_url),
        }
    }

    /// The request body of `request` in this provider's wire format.
    pub fn body(&self, request: &ModelRequest) -> Value {
        match self.kind {
            ProviderKind::Anthropic => anthropic::body(self, request),
            ProviderKind::Openrouter => openai::body(self, request, true),
            ProviderKind::OpenaiCompatible => openai::body(self, request, false),
        }
    }

    /// Read a successful answer.
    fn parse(&self, body: &str) -> Result<ModelTurn, Malformed> {
        match (self.kind, self.generation.streaming) {
            (ProviderKind::Anthropic, false) => anthropic::parse(body),
            (ProviderKind::Anthropic, true) => anthropic::parse_stream(body),
            (_, false) => openai::parse(body),
            (_, true) => openai::parse_stream(body),
        }
    }

    /// The message of an error answer.
    fn error_message(&self, body: &str) -> String {
        let parsed = serde_json::from_str::<Value>(body).ok();
        let message = parsed.as_ref().and_then(|v| match self.kind {
            ProviderKind::Anthropic => anthropic::error_message(v),
            _ => openai::error_message(v),
        });
        message.unwrap_or_else(|| {
            let text: String = body.chars().take(300).collect();
            if text.trim().is_empty() { "(no body)".to_owned() } else { text }
        })
    }

    /// Which limiter this provider's requests share.
    fn limiter_name(&self) -> String {
        format!("{} {}", self.kind, self.base_url)
    }

    /// The request headers, secrets read from the environment now; the secret values too
    /// (to scrub from anything recorded).
    fn headers(&self) -> Result<Headers, String> {
        let read = |name: &str, what: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("failed to read {what}: environment variable {name} is not set"))
        };
        let mut headers = Vec::new();
        let mut secrets = Vec::new();
        if let Some(name) = &self.api_key_env {
            let key = read(name, &format!("the {} API key", self.kind))?;
            match self.kind {
                ProviderKind::Anthropic => headers.push(("x-api-key".to_owned(), key.clone())),
                _ => headers.push(("authorization".to_owned(), format!("Bearer {key}"))),
            }
            secrets.push(key);
        }
        match self.kind {
            ProviderKind::Anthropic => {
                headers.push(("anthropic-version".to_owned(), anthropic::API_VERSION.to_owned()))
            }
            ProviderKind::Openrouter => {
                let title = std::env::var("OPENROUTER_APP_TITLE").unwrap_or_else(|_| "elengtis".to_owned());
                headers.push(("x-title".to_owned(), title));
                if let Ok(url) = std::env::var("OPENROUTER_APP_URL") {
                    headers.push(("http-referer".to_owned(), url));
                }
            }
            ProviderKind::OpenaiCompatible => {}
        }
        for (header, variable) in &self.headers {
            let value = read(variable, &format!("the provider header {header}"))?;
            headers.push((header.clone(), value.clone()));
            secrets.push(value);
        }
        Ok(Headers { headers, secrets })
    }

    /// A configuration for unit tests of the wire modules.
    #[cfg(test)]
    pub fn for_tests(kind: ProviderKind, generation: Generation) -> Self {
        ProviderConfig {
            kind,
            model: "m".into(),
            base_url: "http://127.0.0.1:9".into(),
            api_key_env: None,
            headers: Vec::new(),
            generation,
            generation_map: Map::new(),
            max_in_flight: 1,
            backoff: Duration::from_millis(1),
        }
    }
}

/// A request's headers, and the secret values among them.
#[derive(Debug)]
struct Headers {
    headers: Vec<(String, String)>,
    secrets: Vec<String>,
}

/// What is wrong with a successful status's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedClass {
    /// No body.
    Empty,
    /// Not JSON (or a stream event that is not).
    InvalidJson,
    /// JSON, but not a completion.
    WrongShape,
    /// The body is the provider's error object.
    ProviderError,
    /// A stream that ended before its end marker (retried, as a cut connection).
    Cut,
}

impl MalformedClass {
    /// The name recorded with the attempt.
    pub fn as_str(self) -> &'static str {
        match self {
            MalformedClass::Empty => "empty_body",
            MalformedClass::InvalidJson => "invalid_json",
            MalformedClass::WrongShape => "wrong_shape",
            MalformedClass::ProviderError => "provider_error",
            MalformedClass::Cut => "truncated_stream",
        }
    }
}

/// A body that could not be read as a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// What kind.
    pub class: MalformedClass,
    /// Details.
    pub detail: String,
}

impl Malformed {
    fn new(class: MalformedClass, detail: impl Into<String>) -> Self {
        Malformed { class, detail: detail.into() }
    }
    /// Not JSON.
    pub fn json(detail: impl Into<String>) -> Self {
        Malformed::new(MalformedClass::InvalidJson, detail)
    }
    /// Not a completion.
    pub fn shape(detail: impl Into<String>) -> Self {
        Malformed::new(MalformedClass::WrongShape, detail)
    }
    /// The provider's error object.
    pub fn provider(detail: impl Into<String>) -> Self {
        Malformed::new(MalformedClass::ProviderError, detail)
    }
    /// A cut stream.
    pub fn cut(detail: impl Into<String>) -> Self {
        Malformed::new(MalformedClass::Cut, detail)
    }
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class.as_str(), self.detail)
    }
}

/// The body as a JSON object.
pub(crate) fn json_body(body: &str) -> Result<Value, Malformed> {
    if body.trim().is_empty() {
        return Err(Malformed::new(MalformedClass::Empty, "the answer has no body"));
    }
    let value: Value = serde_json::from_str(body).map_err(|e| Malformed::json(format!("the body is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Malformed::shape(format!("the body is not a JSON object: {}", truncate(&value.to_string(), 200))));
    }
    Ok(value)
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars { text.to_owned() } else { text.chars().take(chars).collect::<String>() + "…" }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sse {
    /// `event:`, if any.
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
}

impl Sse {
    /// The events of a streamed answer. A JSON document where a stream was asked for is the
    /// provider's error (read by `error_message`), else an answer of the wrong shape.
    pub fn events(body: &str, error_message: fn(&Value) -> Option<String>) -> Result<Vec<Sse>, Malformed> {
        let events = Sse::parse(body);
        if !events.is_empty() {
            return Ok(events);
        }
        let value = json_body(body)?;
        match error_message(&value) {
            Some(message) => Err(Malformed::provider(message)),
            None => Err(Malformed::shape("expected an event stream, found a JSON document")),
        }
    }

    /// The events of an event-stream body that carry data (comments and other fields skipped).
    pub fn parse(body: &str) -> Vec<Sse> {
        let mut events = Vec::new();
        let mut event: Option<String> = None;
        let mut data: Option<String> = None;
        for line in body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
            if line.is_empty() {
                if let Some(data) = data.take() {
                    events.push(Sse { event: event.take(), data });
                }
                event = None;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => event = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        if let Some(data) = data {
            events.push(Sse { event, data });
        }
        events
    }
}

/// Add one tool call to `turn` as the original's client read it: empty or `null` arguments
/// are `{}`; arguments that are not JSON, or JSON that is not an object, and calls without a
/// tool name are invalid calls (counted, never executed).
pub fn push_call(turn: &mut ModelTurn, id: Option<&str>, name: Option<&str>, arguments: &Value) {
    let invalid = |error: String| InvalidCall {
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        arguments: arguments.clone(),
        error,
    };
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        turn.invalid_calls.push(invalid("the call names no tool".to_owned()));
        return;
    };
    let parsed = match arguments {
        Value::String(text) if text.trim().is_empty() => Value::Null,
        Value::String(text) => match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                turn.invalid_calls.push(invalid(format!("the arguments of `{name}` are not valid JSON: {e}")));
                return;
            }
        },
        other => other.clone(),
    };
    match parsed {
        Value::Object(map) => turn.calls.push(ModelCall { name: name.to_owned(), arguments: Value::Object(map) }),
        Value::Null => turn.calls.push(ModelCall { name: name.to_owned(), arguments: json!({}) }),
        other => turn.invalid_calls.push(invalid(format!(
            "the arguments of `{name}` are not a JSON object: {}",
            truncate(&other.to_string(), 100)
        ))),
    }
}

/// The outcome of one attempt, as the retry loop sees it.
enum Verdict {
    Turn(ModelTurn),
    Fatal(ModelErrorKind, String),
    Retry { kind: ModelErrorKind, detail: String, wait: Option<Duration>, rate_limited: bool },
}

/// The final outcome of a live request.
struct Live {
    result: Result<ModelTurn, ModelError>,
    status: Option<u16>,
    body: Option<String>,
}

/// A live provider (or its replay) serving one attempt.
#[derive(Debug)]
pub struct Provider {
    config: ProviderConfig,
    ctx: Arc<ModelContext>,
    normaliser: Normaliser,
    sample: u32,
    exchanges: Vec<Exchange>,
    budget_stop: Option<String>,
}

impl Provider {
    /// The provider of `config` for the trial with `values`, trial index `sample`.
    pub fn new(config: ProviderConfig, values: &Values, sample: u32, ctx: Arc<ModelContext>) -> Self {
        Provider { config, ctx, normaliser: Normaliser::new(values), sample, exchanges: Vec::new(), budget_stop: None }
    }

    fn price(&self) -> Option<Price> {
        self.ctx.prices.get(&self.config.model)
    }

    /// The turn's cost: reported, else its tokens at the model's price.
    fn with_cost(&self, mut turn: ModelTurn) -> ModelTurn {
        if turn.usage.cost_usd.is_none()
            && let Some(price) = self.price()
        {
            turn.usage.cost_usd = Some(price.cost(turn.usage.input_tokens, turn.usage.output_tokens));
        }
        turn
    }

    fn exchange(&self, step: u32, attempt: u32, request: &Value) -> Exchange {
        Exchange {
            provider: self.config.kind.as_str().to_owned(),
            model: self.config.model.clone(),
            step,
            attempt,
            request: request.clone(),
            status: None,
            response: Value::Null,
            latency_ms: 0.0,
            error: None,
            usage: Default::default(),
            fixture: None,
            budget_charge_usd: None,
        }
    }

    async fn live(&mut self, step: u32, body: &Value) -> Live {
        let failed = |kind, detail: String| Live { result: Err(ModelError { kind, detail }), status: None, body: None };
        let Headers { headers, secrets } = match self.config.headers() {
            Ok(h) => h,
            Err(detail) => return failed(ModelErrorKind::Configuration, detail),
        };
        let scrub = |text: &str| {
            secrets.iter().filter(|s| s.len() >= 4).fold(text.to_owned(), |t, s| t.replace(s.as_str(), "<redacted>"))
        };
        let bytes = match serde_json::to_vec(body) {
            Ok(b) => b,
            Err(e) => return failed(ModelErrorKind::Configuration, format!("failed to serialise the request: {e}")),
        };
        let url = self.config.url();
        let limiter = self.ctx.limiters.get(&self.config.limiter_name(), self.config.max_in_flight);
        let deadline = Duration::from_secs_f64(self.config.generation.timeout_ms() / 1000.0);
        let max_retries = self.config.generation.max_retries();
        let (mut attempt, mut retries, mut rate_waited) = (0u32, 0u32, Duration::ZERO);
        loop {
            let permit = limiter.acquire().await;
            let started = Instant::now();
            let answer = http::post(&self.ctx.http, &url, &headers, bytes.clone(), deadline).await;
            drop(permit);
            let mut exchange = self.exchange(step, attempt, body);
            exchange.latency_ms = (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0;
            let (verdict, text) = match answer {
                Err(e) => {
                    let detail = format!("{}: {e}", e.class());
                    let verdict = match e {
                        TransportError::TooLarge { status } => {
                            exchange.status = Some(status);
                            Verdict::Fatal(ModelErrorKind::Malformed, detail)
                        }
                        TransportError::Body { status, .. } => {
                            exchange.status = Some(status);
                            Verdict::Retry { kind: ModelErrorKind::Malformed, detail, wait: None, rate_limited: false }
                        }
                        TransportError::Connect(_) | TransportError::Timeout(_) => Verdict::Retry {
                            kind: ModelErrorKind::Unreachable,
                            detail,
                            wait: None,
                            rate_limited: false,
                        },
                    };
                    (verdict, None)
                }
                Ok(answer) => {
                    exchange.status = Some(answer.status);
                    let body = scrub(&answer.body);
                    exchange.response = serde_json::from_str(&body).unwrap_or_else(|_| Value::String(body.clone()));
                    let verdict = match answer.status {
                        200..=299 => match self.config.parse(&body) {
                            Ok(turn) => Verdict::Turn(self.with_cost(turn)),
                            Err(m) if m.class == MalformedClass::Cut => Verdict::Retry {
                                kind: ModelErrorKind::Malformed,
                                detail: m.to_string(),
                                wait: None,
                                rate_limited: false,
                            },
                            Err(m) if m.class == MalformedClass::ProviderError => {
                                Verdict::Fatal(ModelErrorKind::Status, m.to_string())
                            }
                            Err(m) => Verdict::Fatal(ModelErrorKind::Malformed, m.to_string()),
                        },
                        status => {
                            let detail = format!("status {status}: {}", self.config.error_message(&body));
                            if status == 429 || status >= 500 {
                                Verdict::Retry {
                                    kind: ModelErrorKind::Status,
                                    detail,
                                    wait: answer.retry_after,
                                    rate_limited: status == 429,
                                }
                            } else {
                                Verdict::Fatal(ModelErrorKind::Status, detail)
                            }
                        }
                    };
                    (verdict, Some(body))
                }
            };
            let status = exchange.status;
            match verdict {
                Verdict::Turn(turn) => {
                    exchange.usage = turn.usage;
                    self.exchanges.push(exchange);
                    return Live { result: Ok(turn), status, body: text };
                }
                Verdict::Fatal(kind, detail) => {
                    exchange.error = Some(detail.clone());
                    self.exchanges.push(exchange);
                    let detail = format!("failed to get an answer from {} at {url}: {detail}", self.config.kind);
                    return Live { result: Err(ModelError { kind, detail: scrub(&detail) }), status, body: text };
                }
                Verdict::Retry { kind, detail, wait, rate_limited } => {
                    exchange.error = Some(scrub(&detail));
                    self.exchanges.push(exchange);
                    attempt += 1;
                    if rate_limited {
                        let wait = wait.unwrap_or_else(|| http::backoff(self.config.backoff, retries));
                        if rate_waited + wait <= RATE_LIMIT_PATIENCE {
                            rate_waited += wait;
                            limiter.cool_down(wait);
                            continue;
                        }
                    }
                    if retries < max_retries {
                        let wait = http::backoff(self.config.backoff, retries).max(wait.unwrap_or_default());
                        retries += 1;
                        if rate_limited {
                            limiter.cool_down(wait);
                        } else {
                            tokio::time::sleep(wait).await;
                        }
                        continue;
                    }
                    let detail = format!(
                        "failed to get an answer from {} at {url} after {}: {detail}",
                        self.config.kind,
                        elengtis_core::format::quote::count(attempt, "attempt")
                    );
                    return Live { result: Err(ModelError { kind, detail: scrub(&detail) }), status, body: text };
                }
            }
        }
    }

    /// Answer from the fixture of `key`; never a live call.
    fn replay(&mut self, dir: &std::path::Path, key: &str, step: u32, body: &Value) -> Result<ModelTurn, ModelError> {
        let started = Instant::now();
        let mut exchange = self.exchange(step, 0, body);
        exchange.provider = "replay".to_owned();
        exchange.fixture = Some(key.to_owned());
        let fixture = match fixtures::read(dir, key) {
            Ok(f) => f,
            Err(problem) => {
                let detail = format!("{problem} (step {step} of trial {})", self.sample);
                exchange.error = Some(detail.clone());
                self.exchanges.push(exchange);
                return Err(ModelError { kind: ModelErrorKind::Fixture, detail });
            }
        };
        let text = match &fixture.response {
            Value::String(s) => self.normaliser.restore_str(s),
            Value::Null => String::new(),
            other => self.normaliser.restore(other).to_string(),
        };
        exchange.status = fixture.status;
        exchange.response = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
        let result = match &fixture.error {
            Some(failure) => Err(ModelError {
                kind: failure.kind.parse().unwrap_or(ModelErrorKind::Fixture),
                detail: self.normaliser.restore_str(&failure.detail),
            }),
            None => self.config.parse(&text).map(|turn| self.with_cost(turn)).map_err(|m| ModelError {
                kind: ModelErrorKind::Fixture,
                detail: format!("failed to replay: fixture {key} holds an answer that cannot be read: {m}"),
            }),
        };
        match &result {
            Ok(turn) => exchange.usage = turn.usage,
            Err(e) => exchange.error = Some(e.detail.clone()),
        }
        exchange.latency_ms = (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0;
        self.exchanges.push(exchange);
        result
    }

    /// The normalised key material of `request` (computed only when recording or replaying).
    fn material(&self, request: &ModelRequest) -> Value {
        fixtures::material(
            KeyInputs {
                provider: self.config.kind.as_str(),
                model: &self.config.model,
                generation: &self.config.generation_map,
                messages: &request.messages,
                tools: &request.tools,
                sample: self.sample,
            },
            &self.normaliser,
        )
    }

    fn record(
        &self,
        dir: &std::path::Path,
        key: &str,
        material: Value,
        body: &Value,
        live: &Live,
    ) -> Result<(), String> {
        let response = match &live.body {
            None => Value::Null,
            Some(text) => {
                let text = self.normaliser.normalise_str(text);
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            }
        };
        let fixture = fixtures::Fixture {
            format: fixtures::FORMAT.to_owned(),
            version: fixtures::VERSION,
            key: key.to_owned(),
            material,
            provider: self.config.kind.as_str().to_owned(),
            model: self.config.model.clone(),
            request: self.normaliser.normalise(body),
            status: live.status,
            response,
            error: live.result.as_ref().err().map(|e| RecordedFailure {
                kind: e.kind.as_str().to_owned(),
                detail: self.normaliser.normalise_str(&e.detail),
            }),
            recorded_at: time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        };
        fixtures::write(dir, &fixture)
    }
}

#[async_trait]
impl Model for Provider {
    async fn respond(&mut self, request: &ModelRequest) -> Result<ModelTurn, ModelError> {
        let body = self.config.body(request);
        if let FixtureMode::Replay(dir) = &self.ctx.fixtures {
            let dir = dir.clone();
            let key = fixtures::key(&self.material(request));
            return self.replay(&dir, &key, request.step, &body);
        }
        let reservation = match &self.ctx.budget {
            None => None,
            Some(budget) => {
                let Some(price) = self.price() else {
                    return Err(ModelError {
                        kind: ModelErrorKind::Configuration,
                        detail: format!(
                            "failed to estimate the request's cost: no price for model `{}`; add one with --prices FILE",
                            self.config.model
                        ),
                    });
                };
                let cap = self.config.generation.output_cap(self.config.kind);
                match budget.reserve(budget::estimate(&request.messages, &request.tools, cap, price)) {
                    Ok(r) => Some(r),
                    Err(reason) => {
                        self.budget_stop = Some(reason.clone());
                        return Err(ModelError { kind: ModelErrorKind::Budget, detail: reason });
                    }
                }
            }
        };
        let live = self.live(request.step, &body).await;
        if let (Some(budget), Some(reservation)) = (&self.ctx.budget, reservation) {
            let cost = live.result.as_ref().ok().and_then(|t| t.usage.cost_usd);
            let charge = budget.settle(reservation, cost);
            if let Some(last) = self.exchanges.last_mut() {
                last.budget_charge_usd = Some(charge);
            }
        }
        let configuration_error = matches!(&live.result, Err(e) if e.kind == ModelErrorKind::Configuration);
        if let (FixtureMode::Record(dir), false) = (&self.ctx.fixtures, configuration_error) {
            let material = self.material(request);
            let key = fixtures::key(&material);
            if let Err(detail) = self.record(dir, &key, material, &body, &live) {
                return Err(ModelError { kind: ModelErrorKind::Fixture, detail });
            }
        }
        live.result
    }

    fn take_exchanges(&mut self) -> Vec<Exchange> {
        std::mem::take(&mut self.exchanges)
    }

    fn budget_stop(&self) -> Option<String> {
        self.budget_stop.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_read_as_the_original_read_them() {
        let read = |name: Option<&str>, args: Value| {
            let mut turn = ModelTurn {
                content: String::new(),
                calls: Vec::new(),
                finish_reason: None,
                native_finish_reason: None,
                usage: Default::default(),
                invalid_calls: Vec::new(),
            };
            push_call(&mut turn, Some("i"), name, &args);
            match (turn.calls.pop(), turn.invalid_calls.pop()) {
                (Some(call), None) => Ok(call.arguments),
                (None, Some(invalid)) => Err(invalid.error),
                other => panic!("{other:?}"),
            }
        };
        let ok = |args: Value| read(Some("t"), args);
        assert_eq!(ok(json!("{\"a\":1}")), Ok(json!({"a": 1})));
        assert_eq!(ok(json!("")), Ok(json!({})));
        assert_eq!(ok(json!("null")), Ok(json!({})));
        assert_eq!(ok(json!({"b": 2})), Ok(json!({"b": 2})));
        assert!(ok(json!("[1,2]")).unwrap_err().contains("not a JSON object"));
        assert!(ok(json!("{\"a\":")).unwrap_err().contains("not valid JSON"));
        assert!(ok(json!([1])).is_err());
        assert!(read(None, json!("{}")).unwrap_err().contains("names no tool"));
        assert!(read(Some(""), json!("{}")).is_err());
    }

    #[test]
    fn server_sent_events_are_split_with_comments_skipped() {
        let events =
            Sse::parse(": comment\r\n\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: x\n\nid: 5\n\ndata: tail");
        assert_eq!(
            events,
            vec![
                Sse { event: Some("a".into()), data: "1\n2".into() },
                Sse { event: None, data: "x".into() },
                Sse { event: None, data: "tail".into() },
            ]
        );
    }

    #[test]
    fn the_configuration_honours_the_original_base_variable_and_defaults() {
        let campaign = |extra: Value| -> Campaign {
            let mut doc = json!({"schema_version": 1, "targets": [], "scenarios": [], "model": "openai/gpt-5-mini"});
            if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
                doc.extend(extra.clone());
            }
            serde_json::from_value(doc).unwrap()
        };
        let c = ProviderConfig::from_campaign(&campaign(json!({"provider_route": "fallback"}))).unwrap().unwrap();
        assert_eq!(c.kind, ProviderKind::Openrouter);
        assert_eq!(c.api_key_env.as_deref(), Some("OPENROUTER_API_KEY"));
        assert_eq!(c.generation_map["route"], "fallback");
        let c = ProviderConfig::from_campaign(&campaign(
            json!({"provider": {"type": "anthropic", "base_url": "http://127.0.0.1:5/v1/"}}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.url(), "http://127.0.0.1:5/v1/messages");
        let c = ProviderConfig::from_campaign(&campaign(
            json!({"provider": {"type": "openai_compatible", "base_url": "http://h:1/v1"}}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!((c.url().as_str(), c.api_key_env.as_deref()), ("http://h:1/v1/chat/completions", None));
    }
}
