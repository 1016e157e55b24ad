//! Verifier sightings during the exercise (a campaign's `sightings`, which `prove` sets): the
//! scenario's verify checks run before the agent loop and after a tool call's answer came
//! back from the target, before the model sees it (every call's, or only those whose answer
//! carries one of the plan's literals: where a planted payload reaches the model). Each
//! sighting is
//! recorded with its time on the runner's clock ([`crate::clock`]) in the evidence's
//! `timeline`, so an effect the final verification sees can be ordered against the call that
//! delivered a payload (`elengtis_core::prove::leg`).
//!
//! A sighting is an observation only: its checks run exactly as the verification phase's
//! (the same actions, read-only by design), their captures are not kept, and a check that
//! fails to run leaves the sighting `null` with why, never an error of the attempt.

use std::path::PathBuf;

use async_trait::async_trait;
use elengtis_core::format::campaign::Sightings as Plan;
use elengtis_core::format::scenario::Scenario;
use elengtis_core::judge::Patterns;
use elengtis_core::records::Sighting;
use elengtis_core::refs::Values;
use serde_json::{Map, Value};

use crate::actions::ActionContext;
use crate::toolhost::{ToolHost, ToolHostError, ToolInfo, ToolOutput};

/// The sightings of one attempt.
#[derive(Debug)]
pub struct Sightings<'a> {
    plan: &'a Plan,
    scenario: &'a Scenario,
    values: Values,
    actx: ActionContext<'a>,
    /// Where each sighting's snapshot files go (`sighting-<n>/` beside the evidence's).
    snapshots: Option<PathBuf>,
    taken: tokio::sync::Mutex<Vec<Sighting>>,
}

impl<'a> Sightings<'a> {
    /// Sightings of `scenario`'s checks, at the moments `plan` names, with the trial's
    /// `values` (as they are when the exercise begins) through `actx` (whose host is the target
    /// itself, never a shim).
    pub fn new(plan: &'a Plan, scenario: &'a Scenario, values: &Values, actx: ActionContext<'a>) -> Self {
        let snapshots = actx.snapshots.map(std::path::Path::to_path_buf);
        Sightings { plan, scenario, values: values.clone(), actx, snapshots, taken: tokio::sync::Mutex::default() }
    }

    /// The sighting before the agent loop, when the plan takes one.
    pub async fn before_exercise(&self) {
        if self.plan.before_exercise {
            self.sight().await;
        }
    }

    /// Take one sighting now. Sightings never overlap (calls a loop dispatches at once are
    /// sighted one after the other).
    pub async fn sight(&self) {
        let mut taken = self.taken.lock().await;
        let at_us = crate::clock::now_us();
        let dir = self.snapshots.as_ref().map(|base| base.join(format!("sighting-{}", taken.len())));
        let actx = ActionContext { snapshots: dir.as_deref(), ..self.actx };
        let mut values = self.values.clone();
        let (verification, errors) =
            super::phases::check_all(self.scenario, &mut values, actx, &mut Patterns::default()).await;
        let why = verification
            .completed
            .is_none()
            .then(|| errors.first().map_or_else(|| "the checks could not decide".to_owned(), |e| e.detail.clone()));
        taken.push(Sighting { at_us, after: None, completed: verification.completed, why });
    }

    /// Every sighting taken, in order.
    pub async fn into_taken(self) -> Vec<Sighting> {
        self.taken.into_inner()
    }

    /// The tool host the agent loop uses: `inner`, with a sighting after every call.
    pub fn host<'h>(&'h self, inner: &'h dyn ToolHost) -> SightedHost<'h, 'a> {
        SightedHost { inner, sightings: self }
    }
}

/// A tool host that takes a sighting after every call's answer comes back.
#[derive(Debug)]
pub struct SightedHost<'h, 'a> {
    inner: &'h dyn ToolHost,
    sightings: &'h Sightings<'a>,
}

#[async_trait]
impl ToolHost for SightedHost<'_, '_> {
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolHostError> {
        self.inner.list_tools().await
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolHostError> {
        let output = self.inner.call_tool(name, arguments).await;
        let answer = match &output {
            Ok(output) => &output.record,
            Err(_) => &Value::Null,
        };
        if self.sightings.plan.after(answer) {
            self.sightings.sight().await;
        }
        output
    }
}
