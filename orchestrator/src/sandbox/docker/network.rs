//! Whether a trial gets a network of its own (`ELENGTIS_TRIAL_NETWORK`).
//!
//! A stdio-mode trial with no canary sink, no egress proxy and no `{runner: network_gateway}`
//! has nothing to reach: it runs in the engine's `none` network mode (loopback only), which is
//! stricter than an internal bridge and saves creating and removing one per trial. A stdio-mode
//! trial whose only need is its canary sink runs in the sink's network namespace: the sink
//! starts first in the `none` mode, the target joins its namespace and reaches it on
//! `127.0.0.1` — loopback only, no bridge, no gateway, and no network to create or remove (the
//! [`Layout::SinkNamespace`]; issue 31). Every other trial gets its own internal bridge.
//! `always` gives every trial a bridge (to compare, or as an escape hatch); the layout used is
//! recorded and asserted per trial.

pub use crate::sandbox::NetworkNeeds;

/// The trial network policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrialNetwork {
    /// A network only for a trial that needs one (the default).
    #[default]
    Auto,
    /// An internal bridge for every trial.
    Always,
}

impl TrialNetwork {
    /// The variable that sets the policy.
    pub const ENV: &'static str = "ELENGTIS_TRIAL_NETWORK";

    /// The policy from `ELENGTIS_TRIAL_NETWORK` (`auto`, the default; `always`); read at the
    /// command-line edge, never deep in a run.
    pub fn from_env() -> Result<TrialNetwork, String> {
        match std::env::var(Self::ENV) {
            Err(std::env::VarError::NotPresent) => Ok(TrialNetwork::Auto),
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{} is not valid UTF-8", Self::ENV)),
        }
    }

    fn parse(value: &str) -> Result<TrialNetwork, String> {
        match value {
            "" | "auto" => Ok(TrialNetwork::Auto),
            "always" => Ok(TrialNetwork::Always),
            other => Err(format!("{} must be `auto` or `always`, not `{other}`", Self::ENV)),
        }
    }

    /// The layout of a trial with these needs under this policy.
    pub fn layout(self, needs: NetworkNeeds) -> Layout {
        match self {
            TrialNetwork::Always => Layout::Bridge,
            TrialNetwork::Auto if needs.other => Layout::Bridge,
            TrialNetwork::Auto if needs.sink => Layout::SinkNamespace,
            TrialNetwork::Auto => Layout::None,
        }
    }
}

/// How a trial's containers are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The engine's `none` mode: loopback only, nothing created.
    None,
    /// The sink in the `none` mode, the target in the sink's namespace (`container:<sink>`):
    /// loopback only, shared by the two; nothing created but the containers.
    SinkNamespace,
    /// An internal bridge of the trial's own.
    Bridge,
}

impl Layout {
    /// The name recorded as the evidence's `target_execution.network.mode`.
    pub fn mode(self) -> &'static str {
        match self {
            Layout::None => "none",
            Layout::SinkNamespace => "sink_namespace",
            Layout::Bridge => "internal_bridge",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TrialNetwork;

    #[test]
    fn only_auto_and_always_are_accepted() {
        assert_eq!(TrialNetwork::parse(""), Ok(TrialNetwork::Auto));
        assert_eq!(TrialNetwork::parse("auto"), Ok(TrialNetwork::Auto));
        assert_eq!(TrialNetwork::parse("always"), Ok(TrialNetwork::Always));
        let refused = TrialNetwork::parse("never").unwrap_err();
        assert!(refused.contains("ELENGTIS_TRIAL_NETWORK") && refused.contains("`never`"), "{refused}");
    }

    #[test]
    fn only_a_trial_whose_one_need_is_its_sink_shares_the_sinks_namespace() {
        use super::{Layout, NetworkNeeds};

        let sink = NetworkNeeds { sink: true, other: false };
        let gateway = NetworkNeeds { sink: false, other: true };
        let both = NetworkNeeds { sink: true, other: true };
        assert_eq!(TrialNetwork::Auto.layout(NetworkNeeds::default()), Layout::None);
        assert_eq!(TrialNetwork::Auto.layout(sink), Layout::SinkNamespace);
        assert_eq!(TrialNetwork::Auto.layout(gateway), Layout::Bridge);
        assert_eq!(TrialNetwork::Auto.layout(both), Layout::Bridge);
        for needs in [NetworkNeeds::default(), sink, gateway, both] {
            assert_eq!(TrialNetwork::Always.layout(needs), Layout::Bridge, "{needs:?}");
        }
    }
}
