//! The campaign's `generation` settings, typed, and which provider can honour which.
//!
//! The v1 format keeps `generation` an open map of the original's keys (its client,
//! LangChain's `ChatOpenRouter`, took them as constructor arguments). Here each key gets its
//! type and range, and [`unsupported`] says which keys a provider cannot honour, so a campaign
//! is rejected at validation instead of a setting being dropped silently. The wire modules of
//! the engine map the typed settings onto each wire format; the table is in
//! `docs/formats.md` ("Providers").

use serde_json::{Map, Value};

use super::campaign::ProviderKind;

/// Default deadline of one request attempt, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: f64 = 120_000.0;

/// Default retries of a failed request (the original client's default).
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// `max_tokens` sent to Anthropic when the campaign sets none (the API requires one).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u64 = 4096;

/// The generation settings of a live model, typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Generation {
    /// Sampling temperature (0–2).
    pub temperature: Option<f64>,
    /// Most output tokens (`max_tokens`).
    pub max_tokens: Option<u64>,
    /// Most completion tokens (`max_completion_tokens`, OpenAI's newer name).
    pub max_completion_tokens: Option<u64>,
    /// Nucleus sampling (0–1).
    pub top_p: Option<f64>,
    /// Frequency penalty (−2–2).
    pub frequency_penalty: Option<f64>,
    /// Presence penalty (−2–2).
    pub presence_penalty: Option<f64>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// Stop sequences (a string is one sequence).
    pub stop_sequences: Option<Vec<String>>,
    /// Completions per request (the first is used, as the original did).
    pub n: Option<u32>,
    /// Stream the answer (SSE), assembled before the turn is returned.
    pub streaming: bool,
    /// Deadline of one attempt in milliseconds (the original client's unit).
    pub timeout_ms: Option<f64>,
    /// Retries after a failed attempt.
    pub max_retries: Option<u32>,
    /// Reasoning settings (OpenRouter's object; OpenAI's `reasoning_effort` from `effort`).
    pub reasoning: Option<Map<String, Value>>,
    /// OpenRouter provider preferences (sent as `provider`).
    pub openrouter_provider: Option<Map<String, Value>>,
    /// OpenRouter route (also from the campaign's `provider_route`).
    pub route: Option<String>,
}

/// A problem with one generation setting: the key, and what is wrong.
pub type Problem = (String, String);

fn number(key: &str, value: &Value, min: f64, max: f64, problems: &mut Vec<Problem>) -> Option<f64> {
    match value {
        Value::Null => None,
        Value::Number(n) => match n.as_f64() {
            Some(x) if (min..=max).contains(&x) => Some(x),
            _ => {
                problems.push((key.to_owned(), format!("must be a number between {min} and {max}, found {n}")));
                None
            }
        },
        other => {
            problems.push((key.to_owned(), format!("must be a number between {min} and {max}, found {other}")));
            None
        }
    }
}

fn integer(key: &str, value: &Value, min: i64, max: i64, problems: &mut Vec<Problem>) -> Option<i64> {
    let whole = match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| {
                #[expect(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
                let i = f as i64;
                i
            })
        }),
        _ => None,
    };
    match whole {
        Some(i) if (min..=max).contains(&i) => Some(i),
        _ => {
            problems.push((key.to_owned(), format!("must be an integer between {min} and {max}, found {value}")));
            None
        }
    }
}

fn object(key: &str, value: &Value, problems: &mut Vec<Problem>) -> Option<Map<String, Value>> {
    match value {
        Value::Null => None,
        Value::Object(map) => Some(map.clone()),
        other => {
            problems.push((key.to_owned(), format!("must be a mapping, found {other}")));
            None
        }
    }
}

impl Generation {
    /// Read the settings: every known key with its type and range; `provider_route` is the
    /// route when `generation.route` is absent (as the original copied it). Unknown keys are
    /// the format's concern (reported by validation), not this function's.
    pub fn parse(map: &Map<String, Value>, provider_route: Option<&str>) -> Result<Generation, Vec<Problem>> {
        let (g, problems) = Generation::read(map, provider_route);
        if problems.is_empty() { Ok(g) } else { Err(problems) }
    }

    /// As [`Generation::parse`], but the settings that could be read are kept beside the
    /// problems (validation reports what a provider cannot honour among them too).
    pub fn read(map: &Map<String, Value>, provider_route: Option<&str>) -> (Generation, Vec<Problem>) {
        let mut g = Generation::default();
        let mut problems = Vec::new();
        let p = &mut problems;
        for (key, value) in map {
            let k = key.as_str();
            match k {
                "temperature" => g.temperature = number(k, value, 0.0, 2.0, p),
                "top_p" => g.top_p = number(k, value, 0.0, 1.0, p),
                "frequency_penalty" => g.frequency_penalty = number(k, value, -2.0, 2.0, p),
                "presence_penalty" => g.presence_penalty = number(k, value, -2.0, 2.0, p),
                "timeout" => g.timeout_ms = number(k, value, 1.0, 3_600_000.0, p),
                "max_tokens" | "max_completion_tokens" if !value.is_null() => {
                    let n = integer(k, value, 1, 10_000_000, p).and_then(|i| u64::try_from(i).ok());
                    if k == "max_tokens" {
                        g.max_tokens = n;
                    } else {
                        g.max_completion_tokens = n;
                    }
                }
                "seed" if !value.is_null() => g.seed = integer(k, value, i64::MIN, i64::MAX, p),
                "n" => g.n = integer(k, value, 1, 128, p).and_then(|i| u32::try_from(i).ok()),
                "max_retries" => g.max_retries = integer(k, value, 0, 100, p).and_then(|i| u32::try_from(i).ok()),
                "streaming" => match value {
                    Value::Bool(b) => g.streaming = *b,
                    other => p.push((k.to_owned(), format!("must be true or false, found {other}"))),
                },
                "stop_sequences" => match value {
                    Value::Null => {}
                    Value::String(s) => g.stop_sequences = Some(vec![s.clone()]),
                    Value::Array(items) if items.iter().all(|i| i.as_str().is_some_and(|s| !s.is_empty())) => {
                        g.stop_sequences = Some(items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect());
                    }
                    other => p.push((
                        k.to_owned(),
                        format!("must be a string or a list of non-empty strings, found {other}"),
                    )),
                },
                "reasoning" => g.reasoning = object(k, value, p),
                "openrouter_provider" => g.openrouter_provider = object(k, value, p),
                "route" => match value {
                    Value::Null => {}
                    Value::String(s) => g.route = Some(s.clone()),
                    other => p.push((k.to_owned(), format!("must be a string, found {other}"))),
                },
                _ => {}
            }
        }
        if g.route.is_none() {
            g.route = provider_route.map(str::to_owned);
        }
        if g.streaming && g.n.is_some_and(|n| n > 1) {
            problems.push(("n".to_owned(), "must be 1 when streaming (as the original's client required)".to_owned()));
        }
        (g, problems)
    }

    /// Deadline of one attempt, in milliseconds.
    pub fn timeout_ms(&self) -> f64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// Retries after a failed attempt.
    pub fn max_retries(&self) -> u32 {
        self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    /// The output-token cap a spend estimate charges (the original's: `max_tokens`, else
    /// `max_completion_tokens`, else 0; Anthropic always sends one).
    pub fn output_cap(&self, kind: ProviderKind) -> u64 {
        match (self.max_tokens.or(self.max_completion_tokens), kind) {
            (Some(n), _) => n,
            (None, ProviderKind::Anthropic) => ANTHROPIC_DEFAULT_MAX_TOKENS,
            (None, _) => 0,
        }
    }
}

/// The settings `kind` cannot honour, each with why (an empty list: all can be honoured).
/// Client-side settings (`streaming`, `timeout`, `max_retries`) are honoured everywhere.
pub fn unsupported(kind: ProviderKind, g: &Generation) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut reject = |key: &str, why: &str| out.push((key.to_owned(), format!("{why} ({kind} provider)")));
    match kind {
        ProviderKind::Openrouter => {}
        ProviderKind::OpenaiCompatible => {
            if g.openrouter_provider.is_some() {
                reject("openrouter_provider", "OpenRouter provider preferences need the openrouter provider");
            }
            if g.route.is_some() {
                reject("route", "an OpenRouter route needs the openrouter provider");
            }
            if let Some(reasoning) = &g.reasoning {
                let only_effort =
                    reasoning.keys().all(|k| k == "effort") && reasoning.get("effort").is_some_and(Value::is_string);
                if !only_effort {
                    reject(
                        "reasoning",
                        "the OpenAI wire takes only `reasoning: {effort: low|medium|high}` (sent as `reasoning_effort`)",
                    );
                }
            }
        }
        ProviderKind::Anthropic => {
            for (key, set) in [
                ("frequency_penalty", g.frequency_penalty.is_some()),
                ("presence_penalty", g.presence_penalty.is_some()),
                ("seed", g.seed.is_some()),
            ] {
                if set {
                    reject(key, "the Anthropic Messages API has no such setting");
                }
            }
            if g.n.is_some_and(|n| n != 1) {
                reject("n", "the Anthropic Messages API answers one completion per request");
            }
            if g.reasoning.is_some() {
                reject(
                    "reasoning",
                    "extended thinking needs its signed thinking blocks sent back each turn, which this runner does not keep",
                );
            }
            if g.openrouter_provider.is_some() {
                reject("openrouter_provider", "OpenRouter provider preferences need the openrouter provider");
            }
            if g.route.is_some() {
                reject("route", "an OpenRouter route needs the openrouter provider");
            }
            if g.temperature.is_some_and(|t| t > 1.0) {
                reject("temperature", "Anthropic accepts a temperature between 0 and 1");
            }
            if let (Some(a), Some(b)) = (g.max_tokens, g.max_completion_tokens)
                && a != b
            {
                reject(
                    "max_completion_tokens",
                    "Anthropic has one `max_tokens`; give one of max_tokens and max_completion_tokens",
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn every_key_is_typed() {
        let g = Generation::parse(
            &map(json!({"temperature": 0, "max_tokens": 64, "top_p": 0.5, "seed": 7, "stop_sequences": "END",
                        "n": 1, "streaming": true, "timeout": 5000, "max_retries": 0, "reasoning": {"effort": "low"},
                        "openrouter_provider": {"order": ["A"]}, "route": "fallback"})),
            None,
        )
        .unwrap();
        assert_eq!(g.temperature, Some(0.0));
        assert_eq!(g.stop_sequences, Some(vec!["END".to_owned()]));
        assert_eq!(g.timeout_ms(), 5000.0);
        assert_eq!(g.max_retries(), 0);
        assert!(g.streaming);
        let errors =
            Generation::parse(&map(json!({"temperature": "hot", "n": 0, "streaming": 1, "max_tokens": -1})), None)
                .unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["temperature", "n", "streaming", "max_tokens"]);
    }

    #[test]
    fn streaming_needs_one_completion() {
        let errors = Generation::parse(&map(json!({"n": 2, "streaming": true})), None).unwrap_err();
        assert_eq!(errors[0].0, "n");
    }

    #[test]
    fn the_provider_route_fills_an_absent_route() {
        let g = Generation::parse(&Map::new(), Some("fallback")).unwrap();
        assert_eq!(g.route.as_deref(), Some("fallback"));
    }

    #[test]
    fn each_provider_rejects_what_it_cannot_honour() {
        let all = Generation::parse(
            &map(json!({"frequency_penalty": 0.1, "presence_penalty": 0.1, "seed": 1, "n": 2,
                        "reasoning": {"max_tokens": 10}, "openrouter_provider": {}, "route": "fallback",
                        "temperature": 1.5})),
            None,
        )
        .unwrap();
        assert!(unsupported(ProviderKind::Openrouter, &all).is_empty());
        let openai: Vec<String> = unsupported(ProviderKind::OpenaiCompatible, &all).into_iter().map(|p| p.0).collect();
        assert_eq!(openai, ["openrouter_provider", "route", "reasoning"]);
        let anthropic: Vec<String> = unsupported(ProviderKind::Anthropic, &all).into_iter().map(|p| p.0).collect();
        assert_eq!(
            anthropic,
            [
                "frequency_penalty",
                "presence_penalty",
                "seed",
                "n",
                "reasoning",
                "openrouter_provider",
                "route",
                "temperature"
            ]
        );
        let effort = Generation::parse(&map(json!({"reasoning": {"effort": "low"}})), None).unwrap();
        assert!(unsupported(ProviderKind::OpenaiCompatible, &effort).is_empty());
    }

    #[test]
    fn the_estimate_charges_the_output_cap() {
        let g = Generation::parse(&map(json!({"max_completion_tokens": 99})), None).unwrap();
        assert_eq!(g.output_cap(ProviderKind::Openrouter), 99);
        assert_eq!(Generation::default().output_cap(ProviderKind::OpenaiCompatible), 0);
        assert_eq!(Generation::default().output_cap(ProviderKind::Anthropic), ANTHROPIC_DEFAULT_MAX_TOKENS);
    }
}
