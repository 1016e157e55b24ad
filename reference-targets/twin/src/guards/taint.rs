//! W2: the taint gate. Once the session has consumed untrusted content (a `read_note` that
//! returned a body, a `web_fetch` that returned one), the egress tools `send_email` and
//! `web_fetch` are refused for the rest of the session, whatever the model decides.
//! `web_fetch` is both source and sink, so "fetch an allowed page, then egress what it says"
//! is closed too.
//!
//! The server cannot see the user's turns, so the gate lasts for the session (the server
//! process over stdio), not for one turn: stricter than the original's per-turn gate.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

/// Whether the session has consumed untrusted content. Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct Taint {
    tainted: Arc<AtomicBool>,
}

impl Taint {
    /// Records that untrusted content reached the model.
    pub fn consumed(&self) {
        self.tainted.store(true, Ordering::SeqCst);
    }

    /// `Err` with the refusal the model sees when `tool` (an egress tool) must not run.
    pub fn check(&self, tool: &str) -> Result<(), String> {
        if self.tainted.load(Ordering::SeqCst) {
            Err(format!("refused: this session has read untrusted content; {tool} is disabled"))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Taint;

    #[test]
    fn the_gate_closes_for_good_once_content_was_consumed() {
        let taint = Taint::default();
        assert_eq!(taint.check("send_email"), Ok(()));
        taint.clone().consumed();
        assert_eq!(
            taint.check("web_fetch"),
            Err("refused: this session has read untrusted content; web_fetch is disabled".to_owned())
        );
        assert!(taint.check("send_email").is_err());
    }
}
