//! Whether a trial gets a network of its own (`ELENGTIS_TRIAL_NETWORK`).
//!
//! A stdio-mode trial with no canary sink, no egress proxy and no `{runner: network_gateway}`
//! has nothing to reach: it runs in the engine's `none` network mode (loopback only), which is
//! stricter than an internal bridge and saves creating and removing one per trial. Every other
//! trial gets its own internal bridge. `always` gives every trial a bridge (to compare the two,
//! or as an escape hatch); the mode used is recorded and asserted per trial.

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

    /// Whether a trial that `needs` a network (or not) gets one under this policy.
    pub fn gives_network(self, needs: bool) -> bool {
        needs || self == TrialNetwork::Always
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
    fn a_trial_needing_a_network_always_gets_one() {
        assert!(TrialNetwork::Auto.gives_network(true));
        assert!(!TrialNetwork::Auto.gives_network(false));
        assert!(TrialNetwork::Always.gives_network(false));
    }
}
