//! Calibrating a campaign's verify checks before a model runs (`elengtis preflight`): every
//! target × scenario whose scenario declares `calibrate` actions runs twice, with a model that
//! makes no call and one trial each — once with the actions after the setup (the checks must
//! read true), once without (false) — through the ordinary run engine, into a scratch
//! directory. A check that cannot see a real effect is reported with the likely cause, read
//! from what the calibration's own calls were answered (the core's
//! [`elengtis_core::prove::Calibration`] decides; `prove` calibrates its seeds the same way).

use std::collections::BTreeMap;
use std::path::Path;

use elengtis_core::format::Bundle;
use elengtis_core::format::script::Script;
use elengtis_core::prove::{Calibration, CalibrationRun, CalibrationStatus};
use serde::Serialize;
use serde_json::Value;

use crate::prove::legs::{self, Recorded};
use crate::run::{self, RunError, RunOptions};

/// The suffix of a calibration's scenario id with the effect.
pub const CALIBRATED_SUFFIX: &str = "-calibrated";

/// What the calibration's model says: it makes no call.
const REPLY: &str = "Calibration run: no tool call.";

/// One target × scenario's calibration.
#[derive(Debug, Clone, Serialize)]
pub struct Calibrated {
    /// The target.
    pub target: String,
    /// The scenario.
    pub scenario: String,
    /// What the checks read with the effect and without it.
    pub calibration: Calibration,
    /// The likely cause when they could not see it, from what the calibration's own calls
    /// were answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub likely_cause: Option<String>,
}

impl Calibrated {
    /// Whether the checks can be trusted to tell an effect from none.
    pub fn ok(&self) -> bool {
        self.calibration.status == CalibrationStatus::Passed
    }

    /// The line `preflight` prints.
    pub fn line(&self) -> String {
        let status = if self.ok() { "passed" } else { "FAILED" };
        let mut line = format!(
            "{} × {}: calibration {status} ({}): {}",
            self.target,
            self.scenario,
            self.calibration.status.as_str(),
            self.calibration.detail
        );
        if let Some(cause) = &self.likely_cause {
            line.push_str("\n  likely cause: ");
            line.push_str(cause);
        }
        line
    }
}

/// The calibration bundle of `bundle`: its targets × every scenario that declares
/// `calibrate`, twice (as it is, and `<id>-calibrated` whose setup ends with the actions),
/// one trial each, a script that makes no call and no live model. `None` when no scenario
/// declares any.
pub fn calibration_bundle(bundle: &Bundle) -> Option<Bundle> {
    let calibrated: Vec<_> = bundle.scenarios.iter().filter(|s| !s.value.calibrate.is_empty()).collect();
    if calibrated.is_empty() {
        return None;
    }
    let mut out = bundle.clone();
    out.warnings.clear();
    let campaign = &mut out.campaign.value;
    campaign.trials = 1;
    campaign.model = None;
    campaign.model_id = None;
    campaign.provider = None;
    campaign.provider_route = None;
    campaign.generation = serde_json::Map::new();
    campaign.script = Some(Script::reply(REPLY));
    out.scenarios = Vec::new();
    for doc in calibrated {
        let mut blank = doc.clone();
        blank.value.calibrate.clear();
        let mut effect = doc.clone();
        effect.value.id = format!("{}{CALIBRATED_SUFFIX}", doc.value.id);
        effect.value.setup.append(&mut effect.value.calibrate);
        for target in &mut out.campaign.value.targets {
            if let Some(bindings) = target.bindings.get(&doc.value.id).cloned() {
                target.bindings.insert(effect.value.id.clone(), bindings);
            }
        }
        out.scenarios.push(blank);
        out.scenarios.push(effect);
    }
    Some(out)
}

/// The likely cause of a failed calibration, from the effect run's evidence: a calibrate
/// action the server refused or failed (quoting its answer; a refusal of a private or
/// unlisted address names the canary sink's address and what usually allows it), or, when
/// every action succeeded, the check itself.
pub fn likely_cause(recorded: Option<&Recorded>, calibration: &Calibration) -> Option<String> {
    if calibration.status == CalibrationStatus::Passed {
        return None;
    }
    let evidence = recorded.and_then(|r| r.evidence.as_ref().ok());
    if calibration.status == CalibrationStatus::Vacuous {
        return Some(
            "the check reads true on a fresh target where nothing happened: it is not total (it must answer false \
             when the effect is absent), e.g. it matches text the target always returns"
                .into(),
        );
    }
    let evidence = evidence?;
    let sink = evidence.target_execution["sink"]["url"].as_str().map(str::to_owned);
    let failed = evidence.setup.iter().find_map(|record| {
        let refused = record["status"] != "ok"
            || record["response"]["isError"] == Value::Bool(true)
            || record.get("error").is_some();
        refused.then(|| {
            let id = record["id"].as_str().unwrap_or("an action");
            let mut answer = Vec::new();
            collect_text(record.get("response").or_else(|| record.get("error")).unwrap_or(&Value::Null), &mut answer);
            (id.to_owned(), answer.join(" "))
        })
    });
    Some(match failed {
        Some((id, answer)) => {
            let excerpt: String = answer.chars().take(240).collect();
            let lower = answer.to_lowercase();
            let address_refused = [
                "private",
                "internal",
                "loopback",
                "localhost",
                "allowlist",
                "not allowed",
                "blocked",
                "forbidden",
                "denied",
                "refus",
            ]
            .iter()
            .any(|w| lower.contains(w));
            match (address_refused, sink) {
                (true, Some(sink)) => format!(
                    "the calibration's own call `{id}` was refused: \"{excerpt}\". The canary sink listens at {sink}, a \
                     private address the server will not reach: start the server with its option that allows private \
                     or unlisted hosts (mcp-server-fetch: --allow-private-ips), or point the check at an effect it \
                     can make"
                ),
                _ => format!("the calibration's own call `{id}` failed: \"{excerpt}\" — the effect never happened"),
            }
        }
        None => "every calibrate action succeeded, but the check did not see its effect: check the verifier (its \
                 query, path, URL or assertion) against what the action does"
            .into(),
    })
}

fn collect_text(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_text(v, out)),
        // A content block's `type` (`text`) is not what the server said.
        Value::Object(map) => map.iter().filter(|(k, _)| k.as_str() != "type").for_each(|(_, v)| collect_text(v, out)),
        _ => {}
    }
}

/// Run the calibration of `bundle` into `scratch` (a directory that does not exist yet) and
/// read it back: one [`Calibrated`] per target × calibrated scenario, in campaign order.
///
/// # Errors
///
/// [`RunError`] when the calibration run cannot start.
pub async fn run(bundle: &Bundle, scratch: &Path, options: &RunOptions) -> Result<Vec<Calibrated>, RunError> {
    let Some(calibration) = calibration_bundle(bundle) else {
        return Ok(Vec::new());
    };
    run::start(&calibration, scratch, false, options).await?;
    let by_target = legs::read_run(scratch)
        .map_err(|detail| RunError::Unavailable(format!("failed to read the calibration's results: {detail}")))?;
    let empty = Vec::new();
    let mut out = Vec::new();
    for target in &calibration.campaign.value.targets {
        let rows: &Vec<Recorded> = by_target.get(&target.id).unwrap_or(&empty);
        let mut by_scenario: BTreeMap<&str, &Recorded> = BTreeMap::new();
        for r in rows {
            by_scenario.insert(&r.row.scenario, r);
        }
        for scenario in calibration.scenarios.iter().filter(|s| !s.value.id.ends_with(CALIBRATED_SUFFIX)) {
            let id = &scenario.value.id;
            let effect_id = format!("{id}{CALIBRATED_SUFFIX}");
            let read = |scenario: &str| match by_scenario.get(scenario) {
                Some(r) => legs::calibration_run(r, "calibration"),
                None => CalibrationRun { completed: None, why: Some("no attempt was recorded".into()), evidence: None },
            };
            let calibration = Calibration::decide(read(&effect_id), read(id));
            let likely_cause = likely_cause(by_scenario.get(effect_id.as_str()).copied(), &calibration);
            out.push(Calibrated { target: target.id.clone(), scenario: id.clone(), calibration, likely_cause });
        }
    }
    Ok(out)
}
