//! The loopback relay, both sides. A streamable-HTTP server in a trial container is reached
//! through a relay container that shares the target's network namespace, so the runner needs
//! no route to the target and the trial needs no host address — and, unless a canary sink or
//! the gateway needs one, no network at all: the relay connects to the target on
//! `127.0.0.1:PORT` inside that namespace. The relay container's main process is `elengtis
//! relay-mux ADDR` ([`mux`]); the runner attaches to its stdin/stdout through the engine API
//! and carries every connection its HTTP client opens on a 127.0.0.1 listener ([`client`])
//! over that one stream, as frames ([`frame`]). Nothing is published, the relay listens on
//! nothing, and nothing but the runner can reach it.

pub mod client;
pub mod frame;
pub mod mux;

use super::images;

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

impl RelayMode {
    /// The variable that sets the relay mode.
    pub const ENV: &'static str = "ELENGTIS_RELAY";

    /// The relay mode from `ELENGTIS_RELAY` (`always`, the default; `never`; `auto`); read at
    /// the command-line edge, never deep in a run.
    pub fn from_env() -> Result<RelayMode, String> {
        match std::env::var(Self::ENV) {
            Err(std::env::VarError::NotPresent) => Ok(RelayMode::Always),
            Ok(v) if v.is_empty() || v == "always" => Ok(RelayMode::Always),
            Ok(v) if v == "never" => Ok(RelayMode::Never),
            Ok(v) if v == "auto" => Ok(RelayMode::Auto),
            Ok(v) => Err(format!("ELENGTIS_RELAY must be `always`, `never` or `auto`, not `{v}`")),
            Err(std::env::VarError::NotUnicode(_)) => Err("ELENGTIS_RELAY is not valid UTF-8".to_owned()),
        }
    }
}

/// The relay image a target needs under `mode`, or `None` when the runner connects directly.
///
/// A streamable-HTTP target is reached through a relay unless the mode is `never`, or `auto`
/// and the runner can route to the trial networks itself. The runner can route when it does
/// not run in a container (`/.dockerenv`), or runs in one that shares the engine's network
/// namespace (the engine's default bridge `docker0` is among its interfaces). A direct route
/// needs a host address on the trial bridge, and the host answers the target on every
/// address it has; the relay needs none. The relay image must contain `/elengtis` (the
/// bundled tool image does, and is the default).
pub fn relay_image(mode: RelayMode, streamable_http: bool, relay_image: Option<&str>) -> Option<String> {
    if !streamable_http {
        return None;
    }
    let wanted = match mode {
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
