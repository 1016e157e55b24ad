//! The four guards of the guarded build, one module each. Every guard is plain server code
//! that does not ask the model to cooperate:
//!
//! - [`description`] (W1): a positive allowlist for `read_note`'s advertised description;
//! - [`taint`] (W2): after untrusted content was consumed, the egress tools are refused;
//! - [`egress`] (W3): `web_fetch` reaches only exact allowlisted hosts;
//! - [`confirm`] (W4): `send_email` only stages; `confirm_send` needs the out-of-band code.

pub mod confirm;
pub mod description;
pub mod egress;
pub mod taint;

use clap::ValueEnum;

use crate::cli::Build;

/// One weakness class and the guard that closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GuardId {
    /// Tool-description smuggling.
    #[value(name = "W1")]
    W1,
    /// Untrusted content driving egress.
    #[value(name = "W2")]
    W2,
    /// Unrestricted fetch.
    #[value(name = "W3")]
    W3,
    /// Unconfirmed send.
    #[value(name = "W4")]
    W4,
}

/// Which guards are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guards {
    /// W1: the description allowlist.
    pub w1: bool,
    /// W2: the taint gate.
    pub w2: bool,
    /// W3: the fetch allowlist.
    pub w3: bool,
    /// W4: stage and confirm.
    pub w4: bool,
}

impl Guards {
    /// None for the vulnerable build; all but `disabled` for the guarded one.
    pub fn new(build: Build, disabled: &[GuardId]) -> Result<Self, String> {
        match build {
            Build::Vulnerable if !disabled.is_empty() => {
                Err("--disable-guard applies to the guarded build only".to_owned())
            }
            Build::Vulnerable => Ok(Self { w1: false, w2: false, w3: false, w4: false }),
            Build::Guarded => Ok(Self {
                w1: !disabled.contains(&GuardId::W1),
                w2: !disabled.contains(&GuardId::W2),
                w3: !disabled.contains(&GuardId::W3),
                w4: !disabled.contains(&GuardId::W4),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{GuardId, Guards};
    use crate::cli::Build;

    #[test]
    fn disabling_removes_exactly_that_guard() {
        let all = Guards::new(Build::Guarded, &[]).expect("guarded");
        assert_eq!(all, Guards { w1: true, w2: true, w3: true, w4: true });
        let no_w3 = Guards::new(Build::Guarded, &[GuardId::W3]).expect("guarded");
        assert_eq!(no_w3, Guards { w1: true, w2: true, w3: false, w4: true });
        let none = Guards::new(Build::Vulnerable, &[]).expect("vulnerable");
        assert_eq!(none, Guards { w1: false, w2: false, w3: false, w4: false });
        assert!(Guards::new(Build::Vulnerable, &[GuardId::W1]).is_err());
    }
}
