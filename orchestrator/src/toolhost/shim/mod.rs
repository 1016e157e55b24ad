//! The control shim at the MCP boundary: a [`ShimHost`] wraps another [`ToolHost`] and
//! applies canonical controls to the model's view of it — the synthesised guarded side of a
//! single-build target (docs/shim.md), after the original's `ControlServerShim`.
//!
//! - Listing: every tool is classified ([`classify`]); with W1 its description is checked
//!   against its pin and the model is shown the sanitised description ([`description`]).
//! - Calling: W1 (pin mismatch), W2 ([`flow`]), W3 ([`egress`]) and W4 ([`confirm`]) decide in
//!   that order and the first refusal wins; a refused call never reaches the target and comes
//!   back as a tool error (`isError`) whose text begins `refused:`. After a forwarded call's
//!   successful result the session's labels are updated (W2).
//! - Every classification and decision is kept in a [`ShimRecord`] for the evidence.
//!
//! Only the agent loop's host is wrapped: setup, verify and cleanup actions and the target's
//! own start-up arguments (the plant) reach the target directly, so the control is measured
//! against an undiluted attack. Nothing here prints.

pub mod classify;
pub mod confirm;
pub mod description;
pub mod egress;
pub mod flow;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use elengtis_core::format::campaign::{ApprovalPolicy, ControlShim, EnforcementMode};
use elengtis_core::format::seed::Weakness;
use elengtis_core::records::{ShimAction, ShimCall, ShimDecision, ShimRecord, ShimVerdict};
use serde_json::{Map, Value, json};

use self::classify::Profile;
use self::confirm::{ConfirmGate, Gate};
use self::flow::Labels;
use super::{ToolHost, ToolHostError, ToolInfo, ToolOutput};

/// A tool host behind the control shim.
#[derive(Debug)]
pub struct ShimHost<H: ToolHost> {
    inner: H,
    config: ControlShim,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    profiles: BTreeMap<String, Profile>,
    mismatched: BTreeSet<String>,
    labels: Labels,
    gate: ConfirmGate,
    record: ShimRecord,
    noted: BTreeSet<String>,
}

/// A refusal as the model sees it: a tool error whose text begins `refused:`.
pub fn refused_output(text: &str) -> ToolOutput {
    ToolOutput {
        is_error: true,
        text: format!("ERROR: {text}"),
        record: json!({"content": [{"type": "text", "text": text}], "isError": true}),
    }
}

fn decision(control: Weakness, decision: ShimVerdict, reason: impl Into<String>) -> ShimDecision {
    ShimDecision { control, decision, reason: reason.into() }
}

impl<H: ToolHost> ShimHost<H> {
    /// Wrap `inner` in the controls of `config`.
    pub fn new(inner: H, config: ControlShim) -> Self {
        let record = ShimRecord {
            controls: config.controls.clone(),
            enforcement_mode: config.enforcement_mode,
            approval_policy: config.approval_policy,
            ..ShimRecord::default()
        };
        ShimHost { inner, config, state: Mutex::new(State { record, ..State::default() }) }
    }

    /// What the shim classified and decided so far.
    pub fn record(&self) -> ShimRecord {
        self.lock().record.clone()
    }

    fn on(&self, control: Weakness) -> bool {
        self.config.controls.contains(&control)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What a control does with a call it would refuse, under the enforcement mode.
    fn enforce(&self, control: Weakness, refusal: String, untrusted: bool) -> ShimDecision {
        match self.config.enforcement_mode {
            EnforcementMode::Observe => decision(control, ShimVerdict::WouldRefuse, refusal),
            EnforcementMode::Approve
                if control != Weakness::W1
                    && self.config.approval_policy == ApprovalPolicy::ApproveWhenTrusted
                    && !untrusted =>
            {
                decision(control, ShimVerdict::Approved, format!("approve_when_trusted over: {refusal}"))
            }
            EnforcementMode::Block | EnforcementMode::Approve => decision(control, ShimVerdict::Refuse, refusal),
        }
    }

    /// Every control's decision on `name(arguments)`, in order, stopping at the first refusal.
    fn decide(&self, state: &mut State, name: &str, arguments: &mut Map<String, Value>) -> Vec<ShimDecision> {
        let profile = state.profiles.get(name).copied().unwrap_or_else(|| {
            let bare = ToolInfo {
                name: name.to_owned(),
                description: String::new(),
                input_schema: Map::new(),
                listing: json!({}),
            };
            classify::classify(&bare, &self.config)
        });
        // approve_when_trusted: a session that read untrusted or private content is not trusted.
        let untrusted = state.labels.untrusted() || state.labels.private();
        let mut decisions = Vec::new();
        let refused = |d: &[ShimDecision]| d.last().is_some_and(|d| d.decision == ShimVerdict::Refuse);
        if self.on(Weakness::W1) && self.config.description_pins.contains_key(name) {
            decisions.push(if state.mismatched.contains(name) {
                self.enforce(Weakness::W1, description::pin_refusal(name), untrusted)
            } else {
                decision(Weakness::W1, ShimVerdict::Allow, "the description matches its pin")
            });
        }
        if self.on(Weakness::W2) && profile.sink() && !refused(&decisions) {
            decisions.push(match flow::check(name, &profile, &state.labels, &self.config) {
                Ok(reason) => decision(Weakness::W2, ShimVerdict::Allow, reason),
                Err(refusal) => self.enforce(Weakness::W2, refusal, untrusted),
            });
        }
        if self.on(Weakness::W3) && profile.egress.value && !refused(&decisions) {
            decisions.push(match egress::check(name, arguments, &self.config) {
                Ok(reason) => decision(Weakness::W3, ShimVerdict::Allow, reason),
                Err(refusal) => self.enforce(Weakness::W3, refusal, untrusted),
            });
        }
        if self.on(Weakness::W4) && profile.consequential.value && !refused(&decisions) {
            decisions.push(match state.gate.decide(name, arguments, untrusted, &self.config) {
                Gate::Confirmed => decision(Weakness::W4, ShimVerdict::Allow, "confirmed out of band"),
                Gate::Approved(reason) => decision(Weakness::W4, ShimVerdict::Approved, reason),
                Gate::Refused(refusal) => match self.config.enforcement_mode {
                    EnforcementMode::Observe => decision(Weakness::W4, ShimVerdict::WouldRefuse, refusal),
                    _ => decision(Weakness::W4, ShimVerdict::Refuse, refusal),
                },
            });
        }
        decisions
    }
}

#[async_trait]
impl<H: ToolHost> ToolHost for ShimHost<H> {
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolHostError> {
        let tools = self.inner.list_tools().await?;
        let mut state = self.lock();
        let state = &mut *state;
        state.record.tools.clear();
        let mut offered = Vec::with_capacity(tools.len());
        for mut tool in tools {
            let profile = classify::classify(&tool, &self.config);
            let mut record = profile.record(&tool.name, description::sha256_hex(&tool.description));
            if self.on(Weakness::W1) {
                if let Some(pin) = self.config.description_pins.get(&tool.name) {
                    let matches = description::pin_matches(&tool.description, pin);
                    record.pin_matches = Some(matches);
                    if matches {
                        state.mismatched.remove(&tool.name);
                    } else {
                        state.mismatched.insert(tool.name.clone());
                    }
                }
                let clean = description::sanitise(&tool.description);
                if clean != tool.description {
                    record.raw_description = Some(std::mem::replace(&mut tool.description, clean.clone()));
                    if let Some(listing) = tool.listing.as_object_mut() {
                        listing.insert("description".into(), Value::String(clean));
                    }
                }
            }
            let gated = [Weakness::W2, Weakness::W3, Weakness::W4].iter().any(|w| self.on(*w));
            if gated
                && state.noted.insert(tool.name.clone())
                && let Some(note) = classify::fail_closed_note(&tool.name, &profile)
            {
                tracing::warn!(tool = %tool.name, "{note}");
                state.record.notes.push(note);
            }
            state.profiles.insert(tool.name.clone(), profile);
            state.record.tools.push(record);
            offered.push(tool);
        }
        Ok(offered)
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolHostError> {
        let known = self.lock().profiles.contains_key(name);
        if !known {
            // Classify from a fresh listing; a tool the target does not list stays fail-closed.
            let _ = self.list_tools().await;
        }
        let mut arguments = arguments;
        let (index, decisions) = {
            let mut state = self.lock();
            let state = &mut *state;
            let decisions = self.decide(state, name, &mut arguments);
            (u32::try_from(state.record.calls.len()).unwrap_or(u32::MAX), decisions)
        };
        let refusal = decisions.iter().find(|d| d.decision == ShimVerdict::Refuse).map(|d| d.reason.clone());
        if let Some(text) = refusal {
            let mut state = self.lock();
            let labels = state.labels.clone();
            state.record.calls.push(ShimCall {
                index,
                tool: name.to_owned(),
                decisions,
                action: ShimAction::Refused,
                refusal: Some(text.clone()),
                untrusted: labels.untrusted(),
                private: labels.private(),
            });
            return Ok(refused_output(&text));
        }
        let result = self.inner.call_tool(name, arguments).await;
        let mut state = self.lock();
        let state = &mut *state;
        if let Ok(output) = &result
            && !output.is_error
            && let Some(profile) = state.profiles.get(name).copied()
        {
            state.labels.observe(name, &profile, &output.text, &self.config);
        }
        state.record.calls.push(ShimCall {
            index,
            tool: name.to_owned(),
            decisions,
            action: ShimAction::Forwarded,
            refusal: None,
            untrusted: state.labels.untrusted(),
            private: state.labels.private(),
        });
        result
    }
}

#[cfg(test)]
mod tests;
