//! The Docker backend: the only code that talks to Docker, always through the Engine API
//! (`bollard`), never the `docker` CLI.
//!
//! Every trial gets a fresh hardened container ([`container`]) on a fresh internal
//! (no-egress) network of its own, or on none at all when it needs none ([`network`]); what the engine reports about that container is checked fact by fact
//! against what was asked for ([`hardening`]) and recorded as lifecycle evidence. Before any
//! trial, the engine and its runtime pass a gate of known container-escape and egress bugs
//! ([`engine_gate`]) and every image is resolved to an immutable id (never pulled). A
//! streamable-HTTP target is reached through a relay container in its network namespace,
//! over one attach stream ([`relay`]), unless the configuration says otherwise. Everything the tool creates carries labels
//! ([`LABEL_MANAGED`], [`LABEL_RUN`], [`LABEL_TRIAL`]) so leftovers of a crashed run can be
//! found and removed ([`gc`]) without ever touching anything else. Images are built locally
//! without a registry ([`images`]); SQLite files are copied out of a paused container
//! ([`snapshot`]), and single files or listings for `container_file` through the same
//! archive API ([`archive`]).

pub mod api;
pub mod archive;
mod attach;
pub mod container;
pub mod engine_gate;
pub mod gc;
pub mod hardening;
pub mod images;
pub mod network;
pub mod relay;
pub mod runtime;
pub mod snapshot;

use std::collections::BTreeMap;

use async_trait::async_trait;
use elengtis_core::events::{Event, EventSink};
use serde_json::{Value, json};

pub use self::api::{DockerEngine, ResolvedImage};
use self::container::{ContainerSpec, TrialContainer};
pub use self::network::{Layout, TrialNetwork};
pub use self::relay::RelayMode;
use super::{McpMode, NetworkNeeds, RunNeeds, SandboxBackend, SandboxError, SandboxSpec, SweepReport, TrialSandbox};

/// Label on everything elengtis creates.
pub const LABEL_MANAGED: &str = "org.elengtis.managed";
/// Label naming the run.
pub const LABEL_RUN: &str = "org.elengtis.run";
/// Label naming the trial.
pub const LABEL_TRIAL: &str = "org.elengtis.trial";
/// Label naming the attempt.
pub const LABEL_ATTEMPT: &str = "org.elengtis.attempt";

/// How runs use the Docker engine (chosen at the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerOptions {
    /// Run isolated trials even on an engine the engine gate finds vulnerable (recorded).
    pub allow_vulnerable_engine: bool,
    /// How streamable-HTTP targets are reached (`ELENGTIS_RELAY`); an unusable setting is
    /// kept as its error and refused by runs that would need it.
    pub relay: Result<RelayMode, String>,
    /// Which trials get a network (`ELENGTIS_TRIAL_NETWORK`); an unusable setting is kept
    /// as its error and refused by runs with container targets.
    pub network: Result<TrialNetwork, String>,
    /// The OCI runtime of every container target (`--runtime`, `ELENGTIS_RUNTIME`),
    /// overriding the campaign's `runtime:`; `None` keeps each target's own.
    pub runtime: Option<String>,
}

impl Default for DockerOptions {
    fn default() -> Self {
        DockerOptions {
            allow_vulnerable_engine: false,
            relay: Ok(RelayMode::Always),
            network: Ok(TrialNetwork::Auto),
            runtime: None,
        }
    }
}

/// One warning per runtime the run uses under which the hardening contract holds differently.
fn runtime_warnings(runtimes: &BTreeMap<String, runtime::RuntimeFacts>) -> Vec<String> {
    runtimes
        .values()
        .filter(|r| !r.differences.is_empty())
        .map(|r| {
            format!(
                "trials run under {}, where the hardening contract holds differently (recorded in every trial's evidence, target_execution.runtime.differences): {}",
                r.name,
                r.differences.join("; ")
            )
        })
        .collect()
}

/// Check that the runtime `requested` names (`None`: the engine's default) is listed by the
/// engine and registered so that it can run the trial layout ([`runtime::check_registered`],
/// [`runtime::check_layout`]); its name. Only the engine's `/info` answer is read: a refusal
/// comes before anything is looked up or created.
pub fn check_runtime(engine: &DockerEngine, requested: Option<&str>) -> Result<String, SandboxError> {
    if let Some(name) = requested {
        runtime::check_registered(name, &engine.facts.runtimes)?;
    }
    let name = runtime::expected_name(requested, &engine.facts);
    runtime::check_layout(&name, &engine.facts.runtimes)?;
    Ok(name)
}

/// The Docker engine prepared for one run: connected, past the engine gate, every image the
/// run needs resolved to an immutable id.
#[derive(Debug, Clone)]
pub struct DockerBackend {
    /// The engine.
    pub engine: DockerEngine,
    /// Image reference → resolved image.
    pub images: BTreeMap<String, ResolvedImage>,
    /// The canary sink image, when a trial needs one.
    pub sink_image: Option<ResolvedImage>,
    /// What the engine gate found (recorded in the manifest and every trial's evidence).
    pub engine_gate: engine_gate::GateReport,
    /// How HTTP targets are reached.
    pub relay: RelayMode,
    /// Which trials get a network.
    pub network: TrialNetwork,
    /// The run's runtime override ([`DockerOptions::runtime`]).
    pub runtime_override: Option<String>,
    /// What the run knows of each runtime its containers use, by name (recorded in every
    /// trial's evidence as `target_execution.runtime`).
    pub runtimes: BTreeMap<String, runtime::RuntimeFacts>,
}

impl DockerBackend {
    /// Connect, pass the engine gate (refusing a vulnerable engine unless allowed; an engine
    /// accepted despite findings is reported to `events` at once) and resolve every image
    /// `needs` names (never pulling): a vulnerable engine, an unusable relay setting or a
    /// missing image fails here, before any trial starts.
    pub async fn prepare(
        options: &DockerOptions,
        needs: &RunNeeds,
        events: &dyn EventSink,
    ) -> Result<DockerBackend, SandboxError> {
        let relay = match &options.relay {
            Ok(mode) => *mode,
            Err(e) if needs.images.iter().any(|n| n.http) => return Err(SandboxError::Unusable(e.clone())),
            Err(_) => RelayMode::Always,
        };
        let network = options.network.clone().map_err(SandboxError::Unusable)?;
        let engine = api::connect().await?;
        // Every runtime the run's containers use must be listed by the engine; what is known
        // of each (path, arguments, version) goes to the gate and the evidence.
        let mut used = std::collections::BTreeSet::new();
        for need in &needs.images {
            let requested = runtime::effective(options.runtime.as_deref(), need.runtime.as_deref());
            let name = check_runtime(&engine, requested.as_deref())?;
            if let Some(why) = runtime::refusal(&name, need.egress_proxy) {
                return Err(SandboxError::Unusable(why));
            }
            used.insert(requested);
        }
        let mut runtimes = BTreeMap::new();
        for name in &used {
            let facts = runtime::facts(name.as_deref(), &engine.facts.runtimes, &engine.facts).await;
            runtimes.insert(facts.name.clone(), facts);
        }
        let gate_runtimes: Vec<runtime::RuntimeFacts> = runtimes.values().cloned().collect();
        let engine_gate = engine_gate::check(&engine, options.allow_vulnerable_engine, &gate_runtimes).await?;
        if let Some(message) = engine_gate.warning() {
            events.emit(&Event::Warning { message });
        }
        for message in runtime_warnings(&runtimes) {
            events.emit(&Event::Warning { message });
        }
        let wanted: Vec<String> = needs
            .images
            .iter()
            .flat_map(|n| {
                std::iter::once(n.image.clone()).chain(relay::relay_image(relay, n.http, n.relay_image.as_deref()))
            })
            .collect();
        // The bundled images a run uses are made from the executables beside this elengtis:
        // missing or made from others, they are (re)imported now, and the run says so.
        let used: Vec<String> = wanted.iter().cloned().chain(needs.sink.then(images::sink_ref)).collect();
        let ensured =
            images::ensure_current(&engine, &used).await.map_err(|e| SandboxError::Unusable(e.to_string()))?;
        if let Some(message) = ensured.imported {
            events.emit(&Event::Warning { message });
        }
        let mut images = BTreeMap::new();
        for reference in wanted {
            if let std::collections::btree_map::Entry::Vacant(slot) = images.entry(reference) {
                let image = api::resolve_image(&engine.docker, slot.key()).await?;
                slot.insert(image);
            }
        }
        let sink_image =
            if needs.sink { Some(api::resolve_image(&engine.docker, &images::sink_ref()).await?) } else { None };
        Ok(DockerBackend {
            engine,
            images,
            sink_image,
            engine_gate,
            relay,
            network,
            runtime_override: options.runtime.clone(),
            runtimes,
        })
    }

    /// What the run knows of the runtime `requested` names (`None`: the engine's default),
    /// checked before the run.
    pub fn runtime_facts(&self, requested: Option<&str>) -> Result<runtime::RuntimeFacts, SandboxError> {
        let name = runtime::expected_name(requested, &self.engine.facts);
        self.runtimes
            .get(&name)
            .cloned()
            .ok_or_else(|| SandboxError::Unusable(format!("the runtime `{name}` was not checked before the run")))
    }

    fn resolved(&self, reference: &str) -> Result<ResolvedImage, SandboxError> {
        self.images
            .get(reference)
            .cloned()
            .ok_or_else(|| SandboxError::NotReady(format!("image `{reference}` was not resolved before the run")))
    }
}

#[async_trait]
impl SandboxBackend for DockerBackend {
    fn run_facts(&self) -> Value {
        json!(self.engine_gate)
    }

    fn warnings(&self) -> Vec<String> {
        self.engine_gate.warning().into_iter().chain(runtime_warnings(&self.runtimes)).collect()
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn TrialSandbox>, (SandboxError, Value)> {
        let base = || json!({"isolation": "isolated_container", "image": {"reference": spec.image}});
        let image = self.resolved(&spec.image).map_err(|e| (e, base()))?;
        let relay = match relay::relay_image(
            self.relay,
            matches!(spec.mode, McpMode::Http { .. }),
            spec.relay_image.as_deref(),
        ) {
            Some(reference) => Some(self.resolved(&reference).map_err(|e| (e, base()))?),
            None => None,
        };
        // The runner routes to the trial network itself only for a streamable-HTTP target
        // without a relay; only then does the bridge get a host address. Through the relay
        // (in the target's network namespace) an HTTP target needs no network of its own.
        let host_route = matches!(spec.mode, McpMode::Http { .. }) && relay.is_none();
        let requested = runtime::effective(self.runtime_override.as_deref(), spec.runtime.as_deref());
        let runtime_facts = self.runtime_facts(requested.as_deref()).map_err(|e| (e, base()))?;
        let container_spec = ContainerSpec {
            image,
            uid: spec.uid,
            gid: spec.gid,
            command: Vec::new(),
            env: spec.env.clone(),
            mode: spec.mode.clone(),
            volumes: spec.volumes.clone(),
            startup_timeout: spec.startup_timeout,
            run_id: spec.labels.run_id.clone(),
            trial_id: spec.labels.trial_id.clone(),
            attempt_id: spec.labels.attempt_id.clone(),
            host_route,
            network: self
                .network
                .layout(NetworkNeeds { sink: spec.network_needs.sink, other: spec.network_needs.other || host_route }),
            stderr_bytes: spec.stderr_bytes,
            runtime: requested,
            runtime_facts,
        };
        let mut container = TrialContainer::new_network(&self.engine, &container_spec).await?;
        container.prepare(container_spec, relay, self.sink_image.clone(), spec.egress_proxy.clone());
        Ok(Box::new(container))
    }

    async fn sweep(&self, run_id: &str) -> Result<SweepReport, SandboxError> {
        gc::sweep(&self.engine, Some(run_id)).await
    }
}
