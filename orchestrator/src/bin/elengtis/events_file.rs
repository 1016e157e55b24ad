//! `--events FILE`: every event of a command appended to a file as one JSON object per line
//! (`{"ts": RFC 3339, "event": …, …}`, see docs/events.md), each line written whole with a
//! single write as it happens, so `tail -f FILE` follows a run and a reader never sees half
//! a line while the runner lives.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use elengtis::error::CommandError as Error;
use elengtis_core::events::{Event, EventLine, EventSink};

/// An open events file.
#[derive(Debug)]
pub struct EventsFile {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// The first write that failed (reported when the command ends).
    failed: Mutex<Option<String>>,
}

impl EventsFile {
    /// Open `path` for appending (created if missing; an existing file keeps its lines).
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(Error::io("open the events file", path))?;
        Ok(EventsFile { path: path.to_owned(), file: Mutex::new(file), failed: Mutex::new(None) })
    }

    /// Why writing failed, if it did: a sentence naming the file.
    pub fn failure(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn fail(&self, detail: String) {
        let mut failed = self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if failed.is_none() {
            *failed = Some(format!(
                "failed to write the events file {}: {detail}; the events after that are missing from it",
                self.path.display()
            ));
        }
    }
}

/// One event as its line of an events file (with the newline).
pub fn line(event: &Event, ts: String) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(&EventLine { ts, event })?;
    line.push(b'\n');
    Ok(line)
}

impl EventSink for EventsFile {
    fn emit(&self, event: &Event) {
        let line = match line(event, elengtis::results::now_rfc3339()) {
            Ok(line) => line,
            Err(e) => return self.fail(format!("failed to serialise an event: {e}")),
        };
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // One write of the whole line (O_APPEND): concurrent appenders never interleave
        // within a line, and a reader following the file sees whole lines.
        if let Err(e) = file.write_all(&line).and_then(|()| file.flush()) {
            drop(file);
            self.fail(e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_appended_as_one_json_line_after_what_the_file_held() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "{\"earlier\":true}\n").expect("an earlier line");
        let file = EventsFile::open(&path).expect("open");
        file.emit(&Event::Warning { message: "careful".into() });
        file.emit(&Event::RunStopping { run_id: "r".into(), reason: "why".into() });
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], serde_json::json!({"earlier": true}));
        assert_eq!(lines[1]["event"], "warning");
        assert_eq!(lines[1]["message"], "careful");
        assert_eq!(lines[2]["event"], "run_stopping");
        assert_eq!(lines[2]["run_id"], "r");
        let ts = lines[2]["ts"].as_str().expect("a ts");
        time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).expect("RFC 3339");
        assert!(file.failure().is_none());
    }
}
