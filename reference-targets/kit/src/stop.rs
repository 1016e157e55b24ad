//! Stopping a plain HTTP target: SIGTERM, SIGINT, or (when asked) the end of stdin.

use std::{future::Future, io::Read as _};

use tokio::signal::unix::{SignalKind, signal};

/// Resolves (with the reason: `"SIGTERM"`, `"SIGINT"` or `"stdin closed"`) on SIGTERM,
/// SIGINT, or the end of stdin when `on_stdin_eof` asks for it.
///
/// The signal handlers are installed before it returns, so a signal that arrives after the
/// call is never missed; it fails when either cannot be installed, or when the stdin watcher
/// cannot be started. Call it inside a Tokio runtime with its signal driver enabled.
///
/// # Errors
///
/// When a signal handler cannot be installed or the stdin thread cannot be spawned.
pub fn stop_signal(on_stdin_eof: bool) -> anyhow::Result<impl Future<Output = &'static str> + Send + 'static> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    if on_stdin_eof {
        // A plain thread: tokio's stdin read cannot be cancelled and would hold up the
        // runtime's shutdown; a detached thread dies with the process.
        std::thread::Builder::new().name("stdin".to_owned()).spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0_u8; 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = eof_tx.send(());
        })?;
    }
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            // Without the watcher the sender is gone at once: the pattern fails and the
            // branch is disabled.
            Ok(()) = eof_rx => "stdin closed",
        }
    })
}
