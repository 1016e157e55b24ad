//! Bounded capture of what a target writes on its stderr (the first bytes kept for the
//! evidence, the total counted, however much it writes), and an error's chain captured as one
//! line.

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::task::JoinHandle;

/// Bounded capture of a stream.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Captured {
    /// The first bytes (lossy UTF-8).
    pub text: String,
    /// Total bytes written.
    pub bytes: u64,
    /// More was written than kept.
    pub truncated: bool,
}

/// Keeps the first `limit` bytes of what is pushed and counts the rest.
#[derive(Debug)]
pub struct Bounded {
    kept: Vec<u8>,
    total: u64,
    limit: usize,
}

impl Bounded {
    /// Keep at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Bounded { kept: Vec::new(), total: 0, limit }
    }

    /// Count `bytes`, keeping what fits.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.limit.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// What was captured.
    pub fn finish(self) -> Captured {
        Captured {
            text: String::from_utf8_lossy(&self.kept).into_owned(),
            bytes: self.total,
            truncated: self.total > self.kept.len() as u64,
        }
    }
}

/// Read `stream` to its end in the background, keeping at most `limit` bytes.
pub fn capture<R: AsyncRead + Send + Unpin + 'static>(mut stream: R, limit: usize) -> JoinHandle<Captured> {
    tokio::spawn(async move {
        let mut captured = Bounded::new(limit);
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => captured.push(&buf[..n]),
            }
        }
        captured.finish()
    })
}

/// An error and its causes on one line, each cause after `: ` unless the text so far already
/// contains it (many messages embed their source; it is not repeated).
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}
