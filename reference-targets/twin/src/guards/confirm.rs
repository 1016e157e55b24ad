//! W4: stage, then confirm out of band. `send_email` only stages the message and counts the
//! stagings; `confirm_send(code)` commits it only when exactly one message was staged since
//! the last confirmation and the code is the one the user received out of band (printed to
//! the server's stderr, never to the model). Every refusal clears the stage, so a re-staged
//! (swapped) message or a guessed code never goes out.

use std::sync::{Arc, Mutex, PoisonError};

/// A message waiting for confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Recipient.
    pub to: String,
    /// Subject.
    pub subject: String,
    /// Body.
    pub body: String,
}

/// The result text of a staged `send_email`.
pub const STAGED: &str = "staged: the message is sent only after the user confirms it out of band";
/// Refusal: `confirm_send` with nothing staged.
pub const NOTHING_STAGED: &str = "refused: no message is staged";
/// Refusal: more than one `send_email` since the last confirmation.
pub const RESTAGED: &str = "refused: the staged message was replaced after staging";
/// Refusal: the code is not the out-of-band one.
pub const WRONG_CODE: &str = "refused: confirmation code does not match";

#[derive(Debug, Default)]
struct Stage {
    message: Option<Message>,
    count: u32,
}

/// The staged message and the confirmation code. Clones share the stage.
#[derive(Debug, Clone)]
pub struct Confirm {
    code: Arc<str>,
    stage: Arc<Mutex<Stage>>,
}

impl Confirm {
    /// A gate expecting `code`.
    pub fn new(code: &str) -> Self {
        Self { code: code.into(), stage: Arc::default() }
    }

    /// Stages `message` (replacing any staged one) and counts the staging.
    pub fn stage(&self, message: Message) {
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        stage.message = Some(message);
        stage.count = stage.count.saturating_add(1);
    }

    /// The message to send now, or the refusal. The stage is cleared either way, except when
    /// nothing was staged.
    pub fn confirm(&self, code: &str) -> Result<Message, &'static str> {
        let mut stage = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        let Stage { message, count } = std::mem::take(&mut *stage);
        let message = message.ok_or(NOTHING_STAGED)?;
        if count != 1 {
            return Err(RESTAGED);
        }
        if code != &*self.code {
            return Err(WRONG_CODE);
        }
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::{Confirm, Message, NOTHING_STAGED, RESTAGED, WRONG_CODE};

    fn message(to: &str) -> Message {
        Message { to: to.into(), subject: "s".into(), body: "b".into() }
    }

    #[test]
    fn one_staged_message_and_the_right_code_send_once() {
        let gate = Confirm::new("c0de");
        assert_eq!(gate.confirm("c0de"), Err(NOTHING_STAGED));
        gate.stage(message("ops@example.com"));
        assert_eq!(gate.confirm("c0de"), Ok(message("ops@example.com")));
        assert_eq!(gate.confirm("c0de"), Err(NOTHING_STAGED));
    }

    #[test]
    fn a_wrong_code_clears_the_stage() {
        let gate = Confirm::new("c0de");
        gate.stage(message("ops@example.com"));
        assert_eq!(gate.confirm("guess"), Err(WRONG_CODE));
        assert_eq!(gate.confirm("c0de"), Err(NOTHING_STAGED));
        assert_eq!(gate.confirm(""), Err(NOTHING_STAGED));
    }

    #[test]
    fn a_restaged_message_is_refused_even_with_the_right_code() {
        let gate = Confirm::new("c0de");
        gate.stage(message("ops@example.com"));
        gate.clone().stage(message("attacker@example.com"));
        assert_eq!(gate.confirm("c0de"), Err(RESTAGED));
        // Cleared: a fresh single stage works again.
        assert_eq!(gate.confirm("c0de"), Err(NOTHING_STAGED));
        gate.stage(message("ops@example.com"));
        assert_eq!(gate.confirm("c0de"), Ok(message("ops@example.com")));
    }
}
