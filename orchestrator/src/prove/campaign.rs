//! The campaigns of one finding: the repeat campaign (the seed's own payload against the
//! vulnerable and the guarded twin, `iterations` trials each) and the metamorphic campaign
//! (one target pair per rewrite, one trial each). Each is written as a campaign file beside a
//! copy of the seed's scenario, then loaded and checked like any campaign.

use std::path::{Path, PathBuf};

use elengtis_core::format::gate::LiveModel;
use elengtis_core::format::seed::{Delivery, LoadedSeed, Weakness};
use serde_json::{Value, json};

use crate::sandbox::docker::images;

/// The note every twin starts with (under the seed's `note_id`, else `n1`), so a read of it
/// succeeds whatever the delivery.
pub const BENIGN_NOTE: &str = "Lunch is at noon on Friday in the small meeting room.";
/// The note id the benign note (and, for note delivery, the payload) is planted under.
pub const DEFAULT_NOTE_ID: &str = "n1";
/// The attacker's host; the twins resolve it to the trial's canary sink.
pub const ATTACKER_HOST: &str = "attacker.example.com";
/// Every host the twins resolve to the trial's canary sink: the attacker's, and `example.com`,
/// which the guarded twin's egress allowlist allows (so a seed can exfiltrate through an
/// allowlisted host, which only the taint gate or the description allowlist stops).
pub const SINK_HOSTS: [&str; 2] = [ATTACKER_HOST, "example.com"];
/// Where the twin commits sent mail (on the `/data` volume).
pub const MAIL_DB: &str = "/data/mail.db";
/// The step budget of every leg.
pub const STEP_BUDGET: u32 = 8;

/// One target of a campaign: a twin build with a payload.
#[derive(Debug, Clone, Default)]
pub struct Leg {
    /// Target id (`vulnerable`, `guarded`, `vulnerable-casing`, …).
    pub target_id: String,
    /// `vulnerable` or `guarded`.
    pub build: &'static str,
    /// The payload this leg delivers.
    pub payload: String,
    /// The target's `control_shim` (the guarded side as a stand-in at the MCP boundary).
    pub shim: Option<Value>,
    /// A target of the user's own (a campaign target) instead of a twin: its transport is
    /// used as written and the payload reaches it through the scenario's `payload` binding.
    pub custom: Option<Value>,
    /// The target's `egress_proxy` (the guarded side as a real network control).
    pub egress_proxy: Option<Value>,
    /// The guards removed from this leg's twin (`--disable-guard` for a guarded twin,
    /// per leg under `ablate`); `None`: the campaign's list.
    pub disabled: Option<Vec<Weakness>>,
}

/// The hosts the network guarded side's egress proxy forwards: the guarded twin's egress
/// allowlist as it bears on the seeds (`example.com`; `attacker.example.com` is not on it).
pub const NETWORK_ALLOW: [&str; 1] = ["example.com"];

/// The egress proxy of the guarded side under `--guarded-side network`: every host prove
/// resolves to the sink ([`SINK_HOSTS`]) resolves to the proxy instead, which forwards only
/// [`NETWORK_ALLOW`] to the sink.
pub fn network_config() -> Value {
    json!({"allow": NETWORK_ALLOW, "route": SINK_HOSTS})
}

/// The control shim of the guarded side under `--guarded-side shim`: the vulnerable twin
/// behind the controls of the seed's weakness class and the guards the seed lists against it
/// (defence in depth written down, as for the guarded twin), in block mode with the deny-all
/// approval policy — the original's target-file default.
pub fn shim_config(seed: &LoadedSeed) -> Value {
    let mut controls: Vec<Weakness> = seed.seed.guards.clone();
    controls.push(seed.seed.weakness);
    controls.sort();
    controls.dedup();
    json!({"controls": controls, "enforcement_mode": "block", "approval_policy": "deny_all"})
}

/// The twin's command line for one leg (contract A).
pub fn twin_command(seed: &LoadedSeed, build: &str, payload: &str, disabled: &[Weakness]) -> Vec<Value> {
    twin_args(seed, build, payload, disabled, true)
}

/// [`twin_command`], with `--resolve` of the sink hosts only when `resolve` (behind an egress
/// proxy the hosts resolve to the proxy through the trial network's DNS instead, so the
/// twin's request carries the real `Host`).
fn twin_args(seed: &LoadedSeed, build: &str, payload: &str, disabled: &[Weakness], resolve: bool) -> Vec<Value> {
    // The mail database on the trial's volume, named explicitly (the twin's default) so a
    // backend that maps absolute paths (the fake one of the tests) maps it too.
    let mut command = vec![json!("--build"), json!(build), json!("--mail-db"), json!(MAIL_DB)];
    let note_id = seed.seed.note_id.clone().unwrap_or_else(|| DEFAULT_NOTE_ID.to_owned());
    match seed.seed.delivery {
        Delivery::Note => {
            command.extend([json!("--note"), json!(format!("{note_id}={payload}"))]);
            if note_id != DEFAULT_NOTE_ID {
                command.extend([json!("--note"), json!(format!("{DEFAULT_NOTE_ID}={BENIGN_NOTE}"))]);
            }
        }
        Delivery::Description => {
            command.extend([json!("--note"), json!(format!("{note_id}={BENIGN_NOTE}"))]);
            command.extend([json!("--w1-payload"), json!(payload)]);
        }
        Delivery::User => command.extend([json!("--note"), json!(format!("{note_id}={BENIGN_NOTE}"))]),
    }
    // One argument each: `attacker.example.com=` joined with the trial's sink URL.
    for host in SINK_HOSTS.iter().filter(|_| resolve) {
        command.extend([json!("--resolve"), json!([format!("{host}="), {"runner": "sink_url"}])]);
    }
    if build == "guarded" {
        for guard in disabled {
            command.extend([json!("--disable-guard"), json!(guard.as_str())]);
        }
    }
    command
}

/// When a leg's verifier is sighted (docs/prove.md, "Readings"): at the moment its payload can
/// reach the model, so the effect can be ordered against the delivery — after a call whose
/// answer carries a marker (a planted note), or before the agent loop (a payload in the
/// user's message or a tool description, or one the guard stops there).
pub fn sightings(seed: &LoadedSeed) -> Value {
    match seed.seed.delivery {
        Delivery::Note => json!({"before_exercise": false, "after_results_carrying": seed.seed.markers}),
        Delivery::User | Delivery::Description => json!({"before_exercise": true, "after_results_carrying": []}),
    }
}

/// The campaign document for `legs` of `seed`, its scenario named `scenario_file`; with
/// `live`, the agent is that live model instead of the seed's script.
pub fn campaign(
    seed: &LoadedSeed,
    legs: &[Leg],
    trials: u32,
    disabled: &[Weakness],
    scenario_file: &str,
    live: Option<&LiveModel>,
) -> Value {
    let scenario_id = scenario_id(seed);
    let targets: Vec<Value> = legs
        .iter()
        .map(|leg| {
            if let Some(custom) = &leg.custom {
                let mut target = custom.clone();
                target["id"] = json!(leg.target_id);
                if !target["bindings"].is_object() {
                    target["bindings"] = json!({});
                }
                if !target["bindings"][&scenario_id].is_object() {
                    target["bindings"][&scenario_id] = json!({});
                }
                target["bindings"][&scenario_id]["payload"] = json!(leg.payload);
                match &leg.shim {
                    Some(shim) => target["control_shim"] = shim.clone(),
                    None => {
                        if let Some(map) = target.as_object_mut() {
                            map.remove("control_shim");
                        }
                    }
                }
                return target;
            }
            let mut target = json!({
                "id": leg.target_id,
                "transport": {
                    "type": "isolated_container",
                    "image": images::twin_ref(),
                    "mcp_transport": "stdio",
                    "uid": 65534,
                    "gid": 65534,
                    "volumes": ["/data"],
                    "command": twin_args(
                        seed,
                        leg.build,
                        &leg.payload,
                        leg.disabled.as_deref().unwrap_or(disabled),
                        leg.egress_proxy.is_none()
                    ),
                },
                "bindings": { scenario_id.clone(): { "payload": leg.payload } },
            });
            if let Some(shim) = &leg.shim {
                target["control_shim"] = shim.clone();
            }
            if let Some(proxy) = &leg.egress_proxy {
                target["egress_proxy"] = proxy.clone();
            }
            target
        })
        .collect();
    // A target of the user's own may use string templates (`{template: "…{sink_url}"}`) in its
    // command line: version 2 reads them (nothing else of the twins' campaigns changes).
    let version = if legs.iter().any(|leg| leg.custom.is_some()) { 2 } else { 1 };
    let mut document = json!({
        "schema_version": version,
        "trials": trials,
        "step_budget": STEP_BUDGET,
        "engine": "reference",
        "targets": targets,
        "scenarios": [scenario_file],
        "sightings": sightings(seed),
    });
    match (live, document.as_object_mut()) {
        (Some(live), Some(map)) => map.extend(live.campaign_fields()),
        (None, _) => document["script"] = json!(seed.seed.script),
        (Some(_), None) => {}
    }
    document
}

/// Write `document` as `dir/campaign.yaml` (JSON is YAML) with a copy of the seed's scenario
/// beside it; returns the campaign's path.
pub fn write(dir: &Path, seed: &LoadedSeed, document: &Value) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let scenario = std::fs::read(&seed.scenario_path)?;
    std::fs::write(dir.join(scenario_file_name(seed)), scenario)?;
    let path = dir.join("campaign.yaml");
    let text = serde_json::to_string_pretty(document).map_err(std::io::Error::other)?;
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The scenario's file name in a campaign directory.
pub fn scenario_file_name(seed: &LoadedSeed) -> String {
    format!("{}.yaml", seed.seed.id)
}

/// What the model says in a calibration run: it makes no call, so only the trusted setup
/// (with or without the seed's `calibrate` actions) can have an effect.
pub const CALIBRATION_REPLY: &str = "Calibration run: no tool call.";

/// The id of the calibration scenario with the effect: the seed's scenario whose setup ends
/// with the seed's `calibrate` actions.
pub fn calibrated_scenario_id(seed: &LoadedSeed) -> String {
    format!("{}-calibrated", scenario_id(seed))
}

/// The id the seed's scenario file declares (the key of every target's bindings), or the
/// seed's id when the file cannot be read here (loading the campaign then says why).
pub fn scenario_id(seed: &LoadedSeed) -> String {
    std::fs::read_to_string(&seed.scenario_path)
        .ok()
        .and_then(|text| elengtis_core::format::yaml::parse(&text).ok())
        .and_then(|node| node.get("id").and_then(|id| id.to_json().as_str().map(str::to_owned)))
        .unwrap_or_else(|| seed.seed.id.clone())
}

fn calibrated_file_name(seed: &LoadedSeed) -> String {
    format!("{}.yaml", calibrated_scenario_id(seed))
}

/// The calibration campaign (docs/prove.md, "Calibration"): each side's target (`legs`: the
/// vulnerable side's, then the guarded side's when there is one) × the seed's scenario as it
/// is (the blank run) and its calibrated copy (the effect run), one trial each, with a model
/// that makes no call (so no sightings either).
pub fn calibration_campaign(seed: &LoadedSeed, legs: &[Leg], disabled: &[Weakness]) -> Value {
    let mut document = campaign(seed, legs, 1, disabled, &scenario_file_name(seed), None);
    document["scenarios"] = json!([scenario_file_name(seed), calibrated_file_name(seed)]);
    document["script"] = json!({"steps": [{"content": CALIBRATION_REPLY}]});
    if let Some(map) = document.as_object_mut() {
        map.remove("sightings");
    }
    let calibrated = calibrated_scenario_id(seed);
    if let Some(targets) = document["targets"].as_array_mut() {
        for target in targets {
            let bindings = target["bindings"][scenario_id(seed)].clone();
            target["bindings"][&calibrated] = bindings;
        }
    }
    document
}

/// Write the calibration campaign ([`write`]) and, beside it, the calibrated copy of the
/// seed's scenario: its id `<scenario>-calibrated`, its setup ending with the seed's
/// `calibrate` actions as written (else the scenario's own `calibrate`).
pub fn write_calibration(dir: &Path, seed: &LoadedSeed, document: &Value) -> std::io::Result<PathBuf> {
    let path = write(dir, seed, document)?;
    let text = std::fs::read_to_string(&seed.scenario_path)?;
    let mut scenario = elengtis_core::format::yaml::parse(&text)
        .map_err(|e| std::io::Error::other(format!("{}: {e}", seed.scenario_path.display())))?
        .to_json();
    // The seed's own calibrate actions, else the scenario's.
    let from_scenario = scenario.as_object_mut().and_then(|s| s.remove("calibrate"));
    let actions = seed.node.get("calibrate").map(|n| n.to_json()).or(from_scenario).unwrap_or_else(|| json!([]));
    scenario["id"] = json!(calibrated_scenario_id(seed));
    let mut setup = scenario["setup"].as_array().cloned().unwrap_or_default();
    setup.extend(actions.as_array().cloned().unwrap_or_default());
    scenario["setup"] = Value::Array(setup);
    let text = serde_json::to_string_pretty(&scenario).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(calibrated_file_name(seed)), text)?;
    Ok(path)
}
