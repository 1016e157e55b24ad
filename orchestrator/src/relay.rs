//! The process side of the loopback relay: what runs inside a relay container on a trial's
//! internal network when the runner cannot route there itself (for example when the runner
//! runs in a container). The runner starts `elengtis relay-idle` in a hardened container on
//! the trial network and, for each connection its HTTP client opens on 127.0.0.1, runs
//! `elengtis relay-pipe ADDR` in it through the engine's exec API: bytes flow over the
//! exec's stdin/stdout, so nothing is published and nothing else can reach the relay.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt as _;

/// Keep the relay container alive until it is stopped.
pub async fn idle() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    match term.as_mut() {
        Some(term) => {
            term.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Wait until `addr` accepts a TCP connection (exit status 0), or fail after `limit`.
pub async fn probe(addr: SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(addr)).await
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Connect to `addr` and copy stdin → socket and socket → stdout until both directions end.
pub async fn pipe(addr: SocketAddr) -> std::io::Result<()> {
    let stream = tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let (mut from_socket, mut to_socket) = stream.into_split();
    let upstream = async {
        let mut stdin = tokio::io::stdin();
        let copied = tokio::io::copy(&mut stdin, &mut to_socket).await;
        let _ = to_socket.shutdown().await;
        copied
    };
    let downstream = async {
        let mut stdout = tokio::io::stdout();
        let copied = tokio::io::copy(&mut from_socket, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    let (_, down) = tokio::join!(upstream, downstream);
    down.map(|_| ())
}
