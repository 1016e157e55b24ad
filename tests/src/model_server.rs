//! The scripted model server (`elengtis-model-server`) for tests of live-model paths: started
//! on 127.0.0.1 with a script, its address read from its ready line, its request log read
//! back, stopped (stdin closed, then killed) when dropped.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::{ChildGuard, bin, write};

/// A running model server and its request log.
#[derive(Debug)]
pub struct ModelServer {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The request log (one JSON line per request).
    pub log: PathBuf,
    _guard: ChildGuard,
}

impl ModelServer {
    /// Start the server on `script` in `dir` (extra arguments after it).
    pub fn start(dir: &Path, script: &Value, extra: &[&str]) -> ModelServer {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let script_path = write(dir, &format!("model-script-{n}.json"), &script.to_string());
        let log = dir.join(format!("model-log-{n}.jsonl"));
        let mut child = Command::new(bin("elengtis-model-server"))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .arg("--exit-on-stdin-eof")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("failed to start the model server");
        let stdout = child.stdout.take().expect("the server's stdout");
        let guard = ChildGuard::new(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).expect("the model server's ready line");
        let ready: Value = serde_json::from_str(line.trim()).expect("a JSON ready line");
        let addr = ready["listening"].as_str().expect("an address").to_owned();
        ModelServer { addr, log, _guard: guard }
    }

    /// The OpenRouter-style base URL (`http://ADDR/api/v1`).
    pub fn openrouter_base(&self) -> String {
        format!("http://{}/api/v1", self.addr)
    }

    /// The request log.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON log line"))
            .collect()
    }
}
