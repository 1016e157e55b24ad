//! Models: what answers an agent loop's requests. The loop talks to a [`Model`] only. The
//! deterministic scripted model ([`scripted`]) serves campaigns without a `model`; a live
//! model is served by a provider ([`providers`]: OpenRouter, any OpenAI-compatible endpoint,
//! Anthropic) over [`http`], or answered offline from recorded [`fixtures`] (`replay`). The
//! run's shared state — HTTP connections, per-provider limits, the spend cap ([`budget`],
//! [`pricing`]) and the fixture mode — is one [`ModelContext`]; [`for_campaign`] picks the
//! model of an attempt.

pub mod budget;
pub mod fixtures;
pub mod http;
pub mod pricing;
pub mod providers;
pub mod scripted;

use std::sync::Arc;

use async_trait::async_trait;
pub use elengtis_core::agent::{Exchange, InvalidCall, ModelCall, ModelRequest, ModelTurn, TurnUsage};
use elengtis_core::format::campaign::Campaign;
use elengtis_core::format::script::Script;
use elengtis_core::refs::Values;

use self::fixtures::FixtureMode;
use self::pricing::PriceTable;
use self::providers::ProviderConfig;

pub use elengtis_core::agent::ModelErrorKind;

/// A model failure: the trial ends as `provider_error`, never as a resist or a fire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ModelError {
    /// What kind.
    pub kind: ModelErrorKind,
    /// What failed, reading "failed to …" or naming the script step.
    pub detail: String,
}

impl ModelError {
    /// A failure of the scripted model described by `detail`.
    pub fn new(detail: impl Into<String>) -> Self {
        ModelError { kind: ModelErrorKind::Script, detail: detail.into() }
    }
}

/// Answers requests, turn by turn. One instance serves one attempt.
#[async_trait]
pub trait Model: Send + std::fmt::Debug {
    /// The next turn. The request carries the whole conversation; a model reads earlier tool
    /// results from it, as a real one would.
    async fn respond(&mut self, request: &ModelRequest) -> Result<ModelTurn, ModelError>;

    /// The exchanges with the provider since the last call (every attempt of every request,
    /// failed ones included), for the evidence. The scripted model has none.
    fn take_exchanges(&mut self) -> Vec<Exchange> {
        Vec::new()
    }

    /// Why the spend cap stopped this model's last request, if it did (the attempt then ends
    /// as `budget_exhausted` and the run stops).
    fn budget_stop(&self) -> Option<String> {
        None
    }
}

/// Run settings of live models (command-line flags, not campaign fields).
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
    /// `--budget-usd`: the spend cap over the whole run (resumes included).
    pub budget_usd: Option<f64>,
    /// Prices: the built-in table, extended by `--prices FILE`.
    pub prices: PriceTable,
    /// `--record-fixtures DIR` / `--replay-fixtures DIR`.
    pub fixtures: FixtureMode,
}

/// What every attempt's model shares over a run.
#[derive(Debug)]
pub struct ModelContext {
    /// Connections to providers.
    pub http: http::HttpClient,
    /// Requests in flight per provider.
    pub limiters: http::Limiters,
    /// The spend cap, when one is set.
    pub budget: Option<budget::Budget>,
    /// Prices.
    pub prices: PriceTable,
    /// Record, replay, or neither.
    pub fixtures: FixtureMode,
}

impl ModelContext {
    /// The context of a run whose rows already committed `committed` dollars.
    pub fn new(options: &ModelOptions, committed: f64) -> Result<Arc<ModelContext>, String> {
        Ok(Arc::new(ModelContext {
            http: http::HttpClient::new()?,
            limiters: http::Limiters::default(),
            budget: options.budget_usd.map(|limit| budget::Budget::new(limit, committed)),
            prices: options.prices.clone(),
            fixtures: options.fixtures.clone(),
        }))
    }
}

/// The campaign and provider config of a one-off live model (the scan's planner, a seed's LLM
/// judge): a campaign with only its model fields. `whose` (`planner's`, `judge's`) names it in
/// the errors.
///
/// # Errors
///
/// Unusable model fields, or fields that name no model.
pub fn live_config(
    model: &elengtis_core::format::gate::LiveModel,
    whose: &str,
) -> Result<(Campaign, ProviderConfig), String> {
    let mut fields = model.campaign_fields();
    fields.insert("schema_version".into(), serde_json::json!(1));
    fields.insert("targets".into(), serde_json::json!([]));
    fields.insert("scenarios".into(), serde_json::json!([]));
    let campaign: Campaign = serde_json::from_value(serde_json::Value::Object(fields))
        .map_err(|e| format!("failed to read the {whose} model fields: {e}"))?;
    let config =
        ProviderConfig::from_campaign(&campaign)?.ok_or_else(|| format!("the {whose} model config names no model"))?;
    Ok((campaign, config))
}

/// Why a one-off live model ([`live_config`]) cannot be asked with `options` (checked before
/// anything starts): unusable model fields, a key variable that is not set, a replay directory
/// that does not exist.
pub fn live_unavailable(
    model: &elengtis_core::format::gate::LiveModel,
    whose: &str,
    options: &ModelOptions,
) -> Option<String> {
    match live_config(model, whose) {
        Ok((campaign, _)) => unavailable_reason_with(&campaign, options),
        Err(e) => Some(e),
    }
}

/// One exchange as a one-off call's decision file keeps it (the planner's, the judge's).
pub fn exchange_summary(e: &Exchange) -> serde_json::Value {
    serde_json::json!({
        "provider": e.provider, "model": e.model, "attempt": e.attempt, "status": e.status,
        "latency_ms": e.latency_ms, "error": e.error, "fixture": e.fixture, "usage": e.usage,
    })
}

/// Why the campaign's model cannot run live here (its key variable is not set, a generation
/// setting is unusable), if it cannot; the scripted model always can.
pub fn unavailable_reason(campaign: &Campaign) -> Option<String> {
    unavailable_reason_with(campaign, &ModelOptions::default())
}

/// Why the campaign's model cannot run with these options, checked before a run starts
/// (nothing is contacted): an unusable generation setting, a key variable that is not set
/// for live requests, no price for a capped model, a replay directory that does not exist.
pub fn unavailable_reason_with(campaign: &Campaign, options: &ModelOptions) -> Option<String> {
    let config = match ProviderConfig::from_campaign(campaign) {
        Ok(Some(config)) => config,
        Ok(None) => return None,
        Err(e) => return Some(e),
    };
    match &options.fixtures {
        FixtureMode::Replay(dir) => {
            return (!dir.is_dir()).then(|| format!("the fixture directory {} does not exist", dir.display()));
        }
        FixtureMode::Record(_) | FixtureMode::Off => {}
    }
    if let Some(name) = &config.api_key_env
        && std::env::var_os(name).is_none_or(|v| v.is_empty())
    {
        return Some(format!(
            "the live model `{}` is served by {}, whose key variable {name} is not set (set it, or replay recorded fixtures with --replay-fixtures DIR)",
            config.model, config.kind
        ));
    }
    if options.budget_usd.is_some() && options.prices.get(&config.model).is_none() {
        return Some(format!(
            "--budget-usd needs the price of model `{}`, which the built-in table does not have; add it with --prices FILE",
            config.model
        ));
    }
    None
}

/// The model of an attempt: the scripted model without a campaign `model`, else the
/// campaign's provider (or its replay), for the trial with `values` and index `sample`.
pub fn for_campaign(
    campaign: &Campaign,
    values: Values,
    sample: u32,
    ctx: &Arc<ModelContext>,
) -> Result<Box<dyn Model>, ModelError> {
    match ProviderConfig::from_campaign(campaign) {
        Ok(Some(config)) => Ok(Box::new(providers::Provider::new(config, &values, sample, ctx.clone()))),
        Ok(None) => {
            let script = campaign.script.clone().unwrap_or_else(Script::default_policy);
            Ok(Box::new(scripted::ScriptedModel::new(&script, values)))
        }
        Err(detail) => Err(ModelError { kind: ModelErrorKind::Configuration, detail }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_round_trip_through_their_names() {
        for kind in [ModelErrorKind::Status, ModelErrorKind::Configuration, ModelErrorKind::Fixture] {
            assert_eq!(kind.as_str().parse::<ModelErrorKind>(), Ok(kind));
        }
        assert!("nonsense".parse::<ModelErrorKind>().is_err());
    }
}
