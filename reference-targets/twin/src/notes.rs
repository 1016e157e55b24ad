//! The notes: in memory, planted at start with `--note` and written by `write_note`. Any
//! caller may write any note (no provenance), as in the original.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

/// Most notes held.
pub const MAX_NOTES: usize = 256;
/// Longest note body, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The note store. Clones share the notes.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    notes: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Notes {
    /// A store holding `planted`.
    pub fn new(planted: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { notes: Arc::new(Mutex::new(planted.into_iter().collect())) }
    }

    /// The body of note `id`.
    pub fn read(&self, id: &str) -> Option<String> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner).get(id).cloned()
    }

    /// Stores `body` under `id`, replacing any note of that id.
    pub fn write(&self, id: &str, body: &str) -> Result<(), String> {
        if id.is_empty() {
            return Err("the note id must not be empty".to_owned());
        }
        if body.len() > MAX_BODY_BYTES || id.len() > MAX_BODY_BYTES {
            return Err(format!("a note is limited to {MAX_BODY_BYTES} bytes"));
        }
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        if notes.len() >= MAX_NOTES && !notes.contains_key(id) {
            return Err(format!("the notebook is full ({MAX_NOTES} notes)"));
        }
        notes.insert(id.to_owned(), body.to_owned());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_NOTES, Notes};

    #[test]
    fn notes_round_trip_and_are_bounded() {
        let notes = Notes::new([("n1".to_owned(), "planted".to_owned())]);
        assert_eq!(notes.read("n1").as_deref(), Some("planted"));
        assert_eq!(notes.read("n2"), None);
        notes.write("n1", "replaced").expect("write");
        assert_eq!(notes.read("n1").as_deref(), Some("replaced"));
        assert!(notes.write("", "x").is_err());
        for i in 1..MAX_NOTES {
            notes.write(&format!("k{i}"), "x").expect("write");
        }
        assert!(notes.write("one-too-many", "x").is_err());
        notes.write("n1", "still replaceable").expect("replace when full");
    }
}
