//! Plain HTTP targets (an axum router, no MCP): the ready line on stdout, and serving with
//! `TCP_NODELAY` until a stop, then a bounded grace period for requests in flight.

use std::{
    future::Future,
    io::{self, Write as _},
    net::SocketAddr,
    time::Duration,
};

use anyhow::Context as _;
use axum::{Router, serve::ListenerExt as _};
use tokio::net::TcpListener;

/// Binds `bind` and writes the ready line `{"listening":"ADDR"}` (the bound address, so a
/// port 0 is reported as the one picked) to stdout, flushed. Returns the listener and its
/// address.
///
/// # Errors
///
/// `failed to listen on ADDR` when the bind fails (e.g. the address is taken), or when the
/// bound address or the ready line cannot be read or written.
pub async fn listen(bind: SocketAddr) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(bind).await.with_context(|| format!("failed to listen on {bind}"))?;
    let local = listener.local_addr().context("failed to read the listening address")?;
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{}", ready_line(local))
        .and_then(|()| stdout.flush())
        .context("failed to write the ready line")?;
    Ok((listener, local))
}

/// `{"listening":"ADDR"}`. A socket address's text (digits, dots, colons, brackets, `%`)
/// needs no JSON escaping.
fn ready_line(local: SocketAddr) -> String {
    format!(r#"{{"listening":"{local}"}}"#)
}

/// Serves `router` on `listener` (each connection with `TCP_NODELAY`) until `stop`
/// resolves, then stops accepting and gives the requests in flight `grace` to finish; after
/// that it returns anyway (with a warning), dropping them.
///
/// # Errors
///
/// When the server or its task failed.
pub async fn serve_router(
    listener: TcpListener,
    router: Router,
    stop: impl Future<Output = ()>,
    grace: Duration,
) -> anyhow::Result<()> {
    // Without TCP_NODELAY, small responses wait on the client's delayed ACK (~40 ms a call).
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "failed to set TCP_NODELAY");
        }
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .into_future(),
    );
    stop.await;
    let _ = stop_tx.send(());
    match tokio::time::timeout(grace, server).await {
        Ok(Ok(result)) => result.context("the server failed"),
        Ok(Err(error)) => Err(anyhow::Error::new(error).context("the server task failed")),
        Err(_) => {
            tracing::warn!("requests still in flight after {grace:?}; exiting anyway");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{net::SocketAddr, time::Duration};

    use axum::{Router, routing::get};
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::{TcpListener, TcpStream},
    };

    use super::{ready_line, serve_router};

    #[test]
    fn the_ready_line_is_compact_json() {
        for addr in ["127.0.0.1:40123", "[::1]:8080", "[fe80::1%2]:9"] {
            let addr: SocketAddr = addr.parse().expect("address");
            let line = ready_line(addr);
            assert_eq!(line, serde_json::json!({"listening": addr.to_string()}).to_string());
        }
    }

    #[tokio::test]
    async fn serves_until_the_stop_then_waits_at_most_the_grace() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let router = Router::new()
            .route("/", get(|| async { "ok" }))
            .route("/slow", get(|| async { tokio::time::sleep(Duration::from_secs(30)).await }));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_router(
            listener,
            router,
            async {
                let _ = stop_rx.await;
            },
            Duration::from_millis(200),
        ));
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"), "{answer}");

        // A request that never finishes must not hold the stop up past the grace.
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("send");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = stop_tx.send(());
        let result = tokio::time::timeout(Duration::from_secs(5), server).await.expect("stops in time");
        assert!(result.expect("joins").is_ok());
    }
}
