//! The transports: stdio and Streamable HTTP, plus clean shutdown.
//!
//! stdio ends when stdin closes (or on SIGTERM / ctrl-c); HTTP ends on
//! SIGTERM / ctrl-c. Neither resolves host names: HTTP binds a numeric
//! address so the binary also works in an empty (`FROM scratch`) image.
//!
//! A server is any [`ServerHandler`] (which rmcp already requires to be `Send + Sync +
//! 'static`); HTTP also needs `Clone`, as every session gets its own copy.

use std::{
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use anyhow::Context as _;
use rmcp::{
    ServerHandler, ServiceExt as _,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};

/// Serves `server` over stdin/stdout until stdin closes or a shutdown signal
/// arrives (also before the client has initialised).
pub async fn run_stdio<S: ServerHandler>(server: S) -> anyhow::Result<()> {
    let serve = async {
        let service = match server.serve(rmcp::transport::stdio_pipes()).await {
            Ok(service) => service,
            // stdin closed before the client initialized: the client went away; not an error.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(during)) => {
                tracing::info!(%during, "stdin closed before initialization");
                return anyhow::Ok(());
            }
            Err(e) => return Err(e).context("failed to start the stdio server"),
        };
        let reason = service.waiting().await.context("failed to run the stdio server")?;
        tracing::info!(?reason, "stdio server stopped");
        anyhow::Ok(())
    };
    tokio::select! {
        result = serve => result,
        () = shutdown_signal() => {
            // Dropping the running service cancels it.
            tracing::info!("shutdown signal received");
            Ok(())
        }
    }
}

/// Where and how the HTTP transport listens.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Numeric address to bind.
    pub bind: IpAddr,
    /// TCP port; 0 picks a free one.
    pub port: u16,
    /// Path the MCP endpoint is mounted at, e.g. `/mcp`.
    pub path: String,
}

/// Serves `server` over Streamable HTTP until SIGTERM or ctrl-c.
pub async fn run_http<S: ServerHandler + Clone>(server: S, options: &HttpOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(options.bind, options.port))
        .await
        .with_context(|| format!("failed to bind {}:{}", options.bind, options.port))?;
    serve_http(server, listener, options, shutdown_signal()).await
}

/// Serves `server` on an already bound `listener` until `shutdown` resolves.
///
/// The DNS-rebinding `Host` check stays on (loopback names only) when bound to
/// a loopback address; bound anywhere else (e.g. `0.0.0.0` in a container) the
/// server is reached under arbitrary names, so the check is disabled.
pub async fn serve_http<S: ServerHandler + Clone>(
    server: S,
    listener: tokio::net::TcpListener,
    options: &HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut config = StreamableHttpServerConfig::default();
    if !options.bind.is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let sessions_token = config.cancellation_token.clone();
    let service: StreamableHttpService<S, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
    let path = normalise_path(&options.path)?;
    let router = if path == "/" {
        // axum refuses to nest at the root.
        axum::Router::new().fallback_service(service)
    } else {
        axum::Router::new().nest_service(&path, service)
    };
    let local = listener.local_addr().context("failed to read the bound address")?;
    tracing::info!(address = %local, path = %path, "listening for streamable HTTP");
    // Answers go out as several small writes (SSE headers, event, end); without TCP_NODELAY
    // Nagle's algorithm holds each later write until the client's delayed ACK (≈40 ms a call).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "failed to set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutdown signal received");
            // Ends open sessions (and their SSE streams) so the graceful
            // shutdown does not wait for clients to hang up.
            sessions_token.cancel();
        })
        .await
        .context("failed to serve streamable HTTP")?;
    tracing::info!("streamable HTTP server stopped");
    Ok(())
}

/// `/mcp` for `mcp`, `/mcp/`, or `/mcp`; `/` stays `/`. Only plain path
/// characters are accepted (axum would read `{…}` or `*` as captures).
fn normalise_path(path: &str) -> anyhow::Result<String> {
    let trimmed = path.trim_matches('/');
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/');
    if !trimmed.chars().all(plain) || trimmed.contains("//") {
        anyhow::bail!(
            "failed to use path {path:?}: only letters, digits, '-', '.', '_', '~' and single '/' are allowed"
        );
    }
    Ok(format!("/{trimmed}"))
}

/// Resolves on ctrl-c or (on Unix) SIGTERM. If a handler cannot be
/// installed the failure is logged and that signal is ignored.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "failed to listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "failed to listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use rmcp::{
        ServerHandler, ServiceExt as _,
        model::{Implementation, ServerCapabilities, ServerConfig},
        transport::StreamableHttpClientTransport,
    };

    use super::normalise_path;
    use crate::testing::{RunningHttp, connect};

    /// A server without tools: enough for the transports.
    #[derive(Debug, Clone)]
    struct Bare;

    impl ServerHandler for Bare {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().build()).with_server_info(Implementation::new("bare", "1"))
        }
    }

    fn server_name(client: &crate::testing::Client) -> Option<String> {
        client.peer_info().and_then(|info| info.server_info.as_ref().map(|i| i.name.clone()))
    }

    #[tokio::test]
    async fn duplex_client_initializes() {
        let client = connect(Bare).await;
        assert_eq!(server_name(&client).as_deref(), Some("bare"));
        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn http_round_trip_stops_with_an_open_session() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = RunningHttp::loopback(Bare).await;
        let client = ().serve(StreamableHttpClientTransport::from_uri(http.url())).await.expect("client connects");
        assert_eq!(server_name(&client).as_deref(), Some("bare"));
        // Stopping the server while the session is still open must not hang.
        http.stop().await;
        drop(client);
    }

    #[tokio::test]
    async fn loopback_bind_keeps_the_host_check() {
        let http = RunningHttp::loopback(Bare).await;
        assert_eq!(http.initialize_status("127.0.0.1").await, 200);
        assert_eq!(http.initialize_status("mcp-server:8000").await, 403);
        http.stop().await;
    }

    #[tokio::test]
    async fn non_loopback_bind_accepts_any_host() {
        let http = RunningHttp::start(Bare, IpAddr::V4(Ipv4Addr::UNSPECIFIED)).await;
        assert_eq!(http.initialize_status("mcp-server:8000").await, 200);
        assert_eq!(http.initialize_status("172.18.0.2:8000").await, 200);
        http.stop().await;
    }

    #[test]
    fn paths_are_normalised() {
        for (input, expected) in [("/mcp", "/mcp"), ("mcp/", "/mcp"), ("/", "/"), ("", "/"), ("/a/b", "/a/b")] {
            assert_eq!(normalise_path(input).ok().as_deref(), Some(expected), "{input}");
        }
        for bad in ["/{x}", "/*rest", "/a//b", "/a b"] {
            assert!(normalise_path(bad).is_err(), "{bad}");
        }
    }
}
