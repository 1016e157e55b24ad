//! Models: what answers an agent loop's requests. The loop talks to a [`Model`] only; the
//! deterministic scripted model ([`scripted`]) is the implementation in this build. A live
//! provider (an OpenAI-compatible endpoint, Anthropic, OpenRouter) or a replay of recorded
//! exchanges is another implementation in this folder, selected by [`for_campaign`].

pub mod scripted;

use async_trait::async_trait;
pub use elengtis_core::agent::{Exchange, InvalidCall, ModelCall, ModelRequest, ModelTurn, TurnUsage};
use elengtis_core::format::campaign::Campaign;
use elengtis_core::format::script::Script;
use elengtis_core::refs::Values;

/// What kind of model failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelErrorKind {
    /// The scripted model's script could not be followed.
    Script,
    /// The provider could not be reached, or did not answer in time, after every retry.
    Unreachable,
    /// The provider answered with an error status after every retry.
    Status,
    /// The provider's answer could not be read.
    Malformed,
    /// The next request could exceed the spend cap: the run stops before sending it.
    Budget,
    /// A recorded fixture is missing, corrupt or of another version (replay never falls back
    /// to a live call).
    Fixture,
}

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
}

/// Why the campaign's model cannot run in this build, if it cannot.
pub fn unavailable_reason(campaign: &Campaign) -> Option<String> {
    // An empty model name means no model, as in the original (Python truthiness).
    campaign.model.as_ref().filter(|m| !m.is_empty()).map(|model| {
        format!(
            "the live model `{model}` needs a model provider, and this build of elengtis has none yet; remove `model` to use the deterministic scripted model"
        )
    })
}

/// The model a campaign's attempt uses, with the trial's values (for scripted references).
pub fn for_campaign(campaign: &Campaign, values: Values) -> Result<Box<dyn Model>, ModelError> {
    if let Some(reason) = unavailable_reason(campaign) {
        return Err(ModelError::new(reason));
    }
    let script = campaign.script.clone().unwrap_or_else(Script::default_policy);
    Ok(Box::new(scripted::ScriptedModel::new(&script, values)))
}
