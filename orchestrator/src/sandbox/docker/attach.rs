//! A container's attach stream (stdin, and multiplexed stdout/stderr frames) turned into
//! plain byte streams: the MCP session reads the container's stdout and writes its stdin,
//! and its stderr is captured, bounded, for the evidence.

use std::pin::Pin;

use bollard::container::LogOutput;
use futures_util::Stream;
use tokio::io::AsyncWrite;

use crate::capture::{Bounded, Captured};

/// The attach streams of a stdio container.
pub(super) struct AttachedStdio {
    /// Demultiplexed output frames.
    pub output: Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>,
    /// The container's stdin.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for AttachedStdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AttachedStdio")
    }
}

/// Split a container's attach stream into an MCP byte stream (its stdout), its stdin, and a
/// bounded capture of its stderr.
pub(super) fn split_attached(
    attached: AttachedStdio,
    stderr_limit: usize,
) -> (tokio::io::DuplexStream, Pin<Box<dyn AsyncWrite + Send>>, tokio::task::JoinHandle<Captured>) {
    use futures_util::StreamExt as _;
    use tokio::io::AsyncWriteExt as _;
    let (mut to_client, from_container) = tokio::io::duplex(256 * 1024);
    let mut output = attached.output;
    let stderr = tokio::spawn(async move {
        let mut captured = Bounded::new(stderr_limit);
        let mut stdout_open = true;
        while let Some(frame) = output.next().await {
            match frame {
                Ok(LogOutput::StdOut { message }) if stdout_open => {
                    if to_client.write_all(&message).await.is_err() {
                        stdout_open = false;
                    }
                }
                Ok(LogOutput::StdErr { message }) => captured.push(&message),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        drop(to_client);
        captured.finish()
    });
    // rmcp drops its writer when the session closes; a pump turns that into a half-close
    // of the attach connection, which (with `stdin_once`) ends the container's stdin.
    let (to_container, mut pump) = tokio::io::duplex(64 * 1024);
    let mut input = attached.input;
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut pump, &mut input).await;
        let _ = input.shutdown().await;
    });
    (from_container, Box::pin(to_container), stderr)
}
