//! The sandbox layer: the only code that talks to Docker, always through the Engine API
//! (`bollard`), never the `docker` CLI.
//!
//! Every `isolated_container` trial gets a fresh hardened container on its own internal
//! (no-egress) network ([`container`]); what the engine reports about that container is
//! checked fact by fact against what we asked for ([`hardening`]) and recorded as lifecycle
//! evidence. Everything the tool creates carries labels ([`LABEL_MANAGED`], [`LABEL_RUN`],
//! [`LABEL_TRIAL`]) so leftovers of a crashed run can be found and removed ([`gc`]) without
//! ever touching anything else. Images are built locally without a registry ([`images`]).

pub mod container;
pub mod docker;
pub mod engine_gate;
pub mod gc;
pub mod hardening;
pub mod images;
pub mod snapshot;

/// Label on everything elengtis creates.
pub const LABEL_MANAGED: &str = "org.elengtis.managed";
/// Label naming the run.
pub const LABEL_RUN: &str = "org.elengtis.run";
/// Label naming the trial.
pub const LABEL_TRIAL: &str = "org.elengtis.trial";
/// Label naming the attempt.
pub const LABEL_ATTEMPT: &str = "org.elengtis.attempt";

/// Why a sandbox operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// No engine could be reached.
    #[error(
        "failed to connect to the Docker engine ({endpoint}): {detail}; is the daemon running and is the socket mounted and readable?"
    )]
    Connect {
        /// Where we looked.
        endpoint: String,
        /// The cause.
        detail: String,
    },
    /// A call did not answer in time.
    #[error("failed to {what}: the Docker engine did not answer within {} s", .limit.as_secs_f32())]
    Timeout {
        /// The call.
        what: String,
        /// The deadline.
        limit: std::time::Duration,
    },
    /// A call failed.
    #[error("failed to {what}: {detail}")]
    Docker {
        /// The call.
        what: String,
        /// The engine's answer.
        detail: String,
    },
    /// An image is not present (elengtis never pulls).
    #[error(
        "failed to find image `{image}` in the local Docker engine; elengtis never pulls images. Build it (`elengtis images build` for the bundled images) or load it (`docker load`) first"
    )]
    ImageMissing {
        /// The reference.
        image: String,
    },
    /// The container is not what was asked for.
    #[error("failed to assert the container's hardening: {}", .0.join("; "))]
    Hardening(Vec<String>),
    /// The server did not become ready.
    #[error("failed to reach the target: {0}")]
    NotReady(String),
    /// The engine or runtime has known container-escape or egress bugs (see [`engine_gate`]).
    #[error("failed to pass the engine gate: {0}")]
    VulnerableEngine(String),
}

impl SandboxError {
    /// A short classification for evidence.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::Connect { .. } => "engine_unreachable",
            SandboxError::Timeout { .. } => "timeout",
            SandboxError::Docker { .. } => "engine",
            SandboxError::ImageMissing { .. } => "image_missing",
            SandboxError::Hardening(_) => "hardening_mismatch",
            SandboxError::NotReady(_) => "not_ready",
            SandboxError::VulnerableEngine(_) => "vulnerable_engine",
        }
    }
}

/// How the runner reaches a streamable-HTTP server in a trial container (`ELENGTIS_RELAY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayMode {
    /// Through a relay container (the default): the trial bridge keeps no host address, so
    /// the target cannot reach the host.
    Always,
    /// Directly: the trial bridge gets a host address, and the target can reach every
    /// address of the host (saves the relay container; see docs/security.md).
    Never,
    /// Directly when the runner can route to the trial networks, else through a relay.
    Auto,
}

/// The relay mode from `ELENGTIS_RELAY` (`always`, the default; `never`; `auto`).
pub fn relay_mode() -> Result<RelayMode, String> {
    match std::env::var("ELENGTIS_RELAY") {
        Err(std::env::VarError::NotPresent) => Ok(RelayMode::Always),
        Ok(v) if v.is_empty() || v == "always" => Ok(RelayMode::Always),
        Ok(v) if v == "never" => Ok(RelayMode::Never),
        Ok(v) if v == "auto" => Ok(RelayMode::Auto),
        Ok(v) => Err(format!("ELENGTIS_RELAY must be `always`, `never` or `auto`, not `{v}`")),
        Err(std::env::VarError::NotUnicode(_)) => Err("ELENGTIS_RELAY is not valid UTF-8".to_owned()),
    }
}

/// The relay image a container target needs, or `None` when the runner connects directly.
///
/// A streamable-HTTP target is reached through a relay unless `ELENGTIS_RELAY=never`, or
/// `ELENGTIS_RELAY=auto` and the runner can route to the trial networks itself. The runner
/// can route when it does not run in a container (`/.dockerenv`), or runs in one that shares
/// the engine's network namespace (the engine's default bridge `docker0` is among its
/// interfaces). A direct route needs a host address on the trial bridge, and the host
/// answers the target on every address it has; the relay needs none. An unreadable
/// `ELENGTIS_RELAY` counts as the default (runs check it first, see [`relay_mode`]). The
/// relay image must contain `/elengtis` (the bundled tool image does, and is the default).
pub fn relay_image_for(streamable_http: bool, relay_image: Option<&str>) -> Option<String> {
    if !streamable_http {
        return None;
    }
    let wanted = match relay_mode().unwrap_or(RelayMode::Always) {
        RelayMode::Always => true,
        RelayMode::Never => false,
        RelayMode::Auto => !runner_shares_engine_network(),
    };
    wanted.then(|| relay_image.map_or_else(images::tool_ref, str::to_owned))
}

/// Whether the runner sees the engine's bridges (so it can reach a trial network's
/// addresses directly): true outside a container, and inside one only when the engine's
/// default bridge is one of its interfaces.
fn runner_shares_engine_network() -> bool {
    !std::path::Path::new("/.dockerenv").exists() || std::path::Path::new("/sys/class/net/docker0").exists()
}

/// What isolated trials of one run share: the engine connection and the images, resolved
/// once to immutable ids before any trial starts.
#[derive(Debug, Clone)]
pub struct SandboxContext {
    /// The engine.
    pub engine: docker::Engine,
    /// Image reference → resolved image.
    pub images: std::collections::BTreeMap<String, docker::ResolvedImage>,
    /// The canary sink image, when a trial needs one.
    pub sink_image: Option<docker::ResolvedImage>,
    /// What the engine gate found (recorded in the manifest and every trial's evidence).
    pub engine_gate: engine_gate::GateReport,
}

impl SandboxContext {
    /// Connect, pass the engine gate (refusing a vulnerable engine unless
    /// `allow_vulnerable_engine`) and resolve every image (never pulling); a vulnerable engine
    /// or a missing image fails here, before any trial starts.
    pub async fn prepare<'a>(
        images: impl IntoIterator<Item = &'a str>,
        with_sink: bool,
        allow_vulnerable_engine: bool,
    ) -> Result<SandboxContext, SandboxError> {
        let engine = docker::connect().await?;
        let engine_gate = engine_gate::check(&engine, allow_vulnerable_engine).await?;
        let mut resolved = std::collections::BTreeMap::new();
        for reference in images {
            if !resolved.contains_key(reference) {
                let image = docker::resolve_image(&engine.docker, reference).await?;
                resolved.insert(reference.to_owned(), image);
            }
        }
        let sink_image =
            if with_sink { Some(docker::resolve_image(&engine.docker, &images::sink_ref()).await?) } else { None };
        Ok(SandboxContext { engine, images: resolved, sink_image, engine_gate })
    }
}
