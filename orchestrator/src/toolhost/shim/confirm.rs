//! W4: the confirm gate for tools classified consequential.
//!
//! A call carrying a `confirm_token` argument equal to the HMAC-SHA256 (secret per shim
//! instance; over the tool's name and its arguments without the token, as JSON with sorted
//! keys; first 16 hex digits) of a *pending* request passes, with the token removed. Any
//! other call is an approval request, and the enforcement mode decides: `observe` lets it
//! through and records it; `block` refuses; `approve` asks the approval policy (`deny_all`
//! refuses; `approve_when_trusted` approves while the session holds no untrusted content).
//! A refusal mints the pending token for an out-of-band confirmer; the model is never shown
//! it (nor is the evidence: only that one was minted).

use std::collections::BTreeSet;

use elengtis_core::format::campaign::{ApprovalPolicy, ControlShim, EnforcementMode};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// The argument an out-of-band confirmation comes back in.
pub const TOKEN_PARAM: &str = "confirm_token";

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Confirmed out of band (the token is stripped from the arguments).
    Confirmed,
    /// Approved by the policy.
    Approved(String),
    /// Refused (the text the model is shown).
    Refused(String),
}

/// The gate's state for one session.
pub struct ConfirmGate {
    secret: [u8; 32],
    pending: BTreeSet<String>,
}

impl std::fmt::Debug for ConfirmGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfirmGate").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

impl Default for ConfirmGate {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        secret[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        secret[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        ConfirmGate { secret, pending: BTreeSet::new() }
    }
}

fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let inner_key: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
    let outer_key: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new().chain_update(&inner_key).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(&outer_key).chain_update(&inner[..]).finalize();
    let mut out = [0u8; 32];
    out.copy_from_slice(&outer[..]);
    out
}

/// The refusal of an unapproved consequential call.
pub fn refusal(tool: &str) -> String {
    format!(
        "refused: '{tool}' is a consequential action and approval was not granted (it requires out-of-band \
         confirmation, not a retry)"
    )
}

impl ConfirmGate {
    /// The token of `tool(arguments)` (arguments without the token).
    pub fn token(&self, tool: &str, arguments: &Map<String, Value>) -> String {
        let mut args = arguments.clone();
        args.remove(TOKEN_PARAM);
        let message = format!(
            "{tool}\n{}",
            String::from_utf8_lossy(&elengtis_core::format::canonical_json(&Value::Object(args)))
        );
        hmac_sha256(&self.secret, message.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    /// Decide a consequential call; `untrusted` says whether the session has read untrusted
    /// content. In observe mode a call that would be refused is `Refused` too: the caller
    /// lets it through and records it.
    pub fn decide(
        &mut self,
        tool: &str,
        arguments: &mut Map<String, Value>,
        untrusted: bool,
        config: &ControlShim,
    ) -> Gate {
        if let Some(Value::String(given)) = arguments.get(TOKEN_PARAM) {
            let given = given.clone();
            if self.pending.contains(&given) && self.token(tool, arguments) == given {
                self.pending.remove(&given);
                arguments.remove(TOKEN_PARAM);
                return Gate::Confirmed;
            }
        }
        if config.enforcement_mode == EnforcementMode::Approve
            && config.approval_policy == ApprovalPolicy::ApproveWhenTrusted
            && !untrusted
        {
            return Gate::Approved("approve_when_trusted: the session holds no untrusted content".into());
        }
        if config.enforcement_mode != EnforcementMode::Observe {
            let token = self.token(tool, arguments);
            self.pending.insert(token);
        }
        Gate::Refused(refusal(tool))
    }

    /// How many confirmations are pending.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(mode: &str, policy: &str) -> ControlShim {
        serde_json::from_value(json!({"controls": ["W4"], "enforcement_mode": mode, "approval_policy": policy}))
            .expect("config")
    }

    fn args() -> Map<String, Value> {
        json!({"to": "ops@example.com", "subject": "s", "body": "b"}).as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn block_and_deny_all_refuse_without_revealing_the_token() {
        for c in [config("block", "deny_all"), config("approve", "deny_all"), config("approve", "approve_when_trusted")]
        {
            let mut gate = ConfirmGate::default();
            let mut a = args();
            let untrusted = c.approval_policy == ApprovalPolicy::ApproveWhenTrusted;
            let Gate::Refused(text) = gate.decide("send_email", &mut a, untrusted, &c) else { panic!("refused") };
            assert!(text.starts_with("refused: 'send_email' is a consequential action"), "{text}");
            let token = gate.token("send_email", &a);
            assert!(!text.contains(&token), "the token is never shown");
            assert_eq!(gate.pending(), 1);
        }
    }

    #[test]
    fn approve_when_trusted_approves_a_clean_session_only() {
        let c = config("approve", "approve_when_trusted");
        let mut gate = ConfirmGate::default();
        assert!(matches!(gate.decide("send_email", &mut args(), false, &c), Gate::Approved(_)));
        assert!(matches!(gate.decide("send_email", &mut args(), true, &c), Gate::Refused(_)));
    }

    #[test]
    fn only_the_pending_token_of_the_same_call_confirms_it_once() {
        let c = config("block", "deny_all");
        let mut gate = ConfirmGate::default();
        let mut first = args();
        assert!(matches!(gate.decide("send_email", &mut first, false, &c), Gate::Refused(_)));
        let token = gate.token("send_email", &first);
        // A guessed token, or the token on different arguments, does not confirm.
        let mut guessed = args();
        guessed.insert(TOKEN_PARAM.into(), json!("0000000000000000"));
        assert!(matches!(gate.decide("send_email", &mut guessed, false, &c), Gate::Refused(_)));
        let mut swapped = args();
        swapped.insert("to".into(), json!("attacker@example.com"));
        swapped.insert(TOKEN_PARAM.into(), json!(token.clone()));
        assert!(matches!(gate.decide("send_email", &mut swapped, false, &c), Gate::Refused(_)));
        // The out-of-band confirmation: the same call with the pending token, stripped.
        let mut confirmed = args();
        confirmed.insert(TOKEN_PARAM.into(), json!(token.clone()));
        assert_eq!(gate.decide("send_email", &mut confirmed, false, &c), Gate::Confirmed);
        assert!(!confirmed.contains_key(TOKEN_PARAM));
        let mut again = args();
        again.insert(TOKEN_PARAM.into(), json!(token));
        assert!(matches!(gate.decide("send_email", &mut again, false, &c), Gate::Refused(_)), "used once");
    }

    #[test]
    fn observe_mints_nothing() {
        let c = config("observe", "deny_all");
        let mut gate = ConfirmGate::default();
        assert!(matches!(gate.decide("send_email", &mut args(), false, &c), Gate::Refused(_)));
        assert_eq!(gate.pending(), 0);
    }
}
