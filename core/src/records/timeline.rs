//! When things happened in an attempt, on one clock: every tool call's start and end, the
//! verifier's sightings during the exercise, and the final verification. The canary sink's and
//! the egress proxy's records carry their arrival times on the same clock beside them
//! (`target_execution.sink.received_us`, `target_execution.egress_proxy.received_us`).
//!
//! The clock is the runner process's monotonic clock in microseconds
//! ([`RUNNER_MONOTONIC_US`]): only differences within one attempt mean anything. It is what
//! orders an effect against the delivery of a payload (`elengtis prove`,
//! `core::prove::leg`): a sighting taken after the call that delivered the payload returned,
//! and before the model saw its result, says whether the effect was already there.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the timeline's clock.
pub const RUNNER_MONOTONIC_US: &str = "runner_monotonic_us";

/// One attempt's timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeline {
    /// The clock: `runner_monotonic_us`, microseconds on the runner process's monotonic
    /// clock (only differences within one attempt mean anything).
    pub clock: String,
    /// When the attempt began.
    pub began_us: u64,
    /// When the agent loop began (after the sighting before the exercise); null when the
    /// exercise did not run.
    #[serde(default)]
    pub exercise_us: Option<u64>,
    /// Every tool call the model made, in the trajectory's order: when the runner handed it
    /// to the target and when the answer (or its failure) came back. A call refused without
    /// contacting the target (a tool that was not offered) starts and ends at once.
    #[serde(default)]
    pub calls: Vec<CallTime>,
    /// The verifier's sightings during the exercise (campaigns with `sightings`, as `prove`
    /// writes them): before the agent loop began, or after a call's answer came back from the
    /// target and before the model saw it, at the moments the campaign names.
    #[serde(default)]
    pub sightings: Vec<Sighting>,
    /// When the verification phase's checks began (null when it did not run).
    #[serde(default)]
    pub verified_us: Option<u64>,
}

pub use crate::agent::CallTime;

/// What the verifier saw at one moment of the exercise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sighting {
    /// When its checks began.
    pub at_us: u64,
    /// The call whose answer it followed (null: before the agent loop began).
    #[serde(default)]
    pub after: Option<String>,
    /// What the checks read, as `verification.completed` would (null: they could not run or
    /// decide).
    pub completed: Option<bool>,
    /// Why it is null, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Timeline {
    /// The call whose interval holds `at_us` (a sighting taken inside a call), the latest one
    /// when several do (calls dispatched at once).
    pub fn call_at(&self, at_us: u64) -> Option<&CallTime> {
        self.calls.iter().filter(|c| c.started_us <= at_us && at_us <= c.ended_us).max_by_key(|c| c.started_us)
    }
}
