//! Transports of the notes server: stdio and Streamable HTTP, plus clean shutdown.
//!
//! Adapted from the support-note fixture (`reference-targets/support-note/src/serve.rs`).
//!
//! stdio ends when stdin closes (or on SIGTERM / ctrl-c); HTTP ends on
//! SIGTERM / ctrl-c. Neither resolves host names: HTTP binds a numeric
//! address so the binary also works in an empty (`FROM scratch`) image.

use std::{
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use anyhow::Context as _;
use rmcp::{
    ServiceExt as _,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};

use crate::tools::NotesServer;

/// Serves `server` over stdin/stdout until stdin closes or a shutdown signal
/// arrives (also before the client has initialised).
pub async fn run_stdio(server: NotesServer) -> anyhow::Result<()> {
    let serve = async {
        let service = server.serve(rmcp::transport::stdio_pipes()).await.context("failed to start the stdio server")?;
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
pub async fn run_http(server: NotesServer, options: &HttpOptions) -> anyhow::Result<()> {
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
pub async fn serve_http(
    server: NotesServer,
    listener: tokio::net::TcpListener,
    options: &HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut config = StreamableHttpServerConfig::default();
    if !options.bind.is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let sessions_token = config.cancellation_token.clone();
    let service: StreamableHttpService<NotesServer, LocalSessionManager> =
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
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use rmcp::{ServiceExt as _, transport::StreamableHttpClientTransport};
    use serde_json::json;
    use tokio::{net::TcpListener, sync::oneshot};

    use super::{HttpOptions, normalise_path, serve_http};
    use crate::tools::{
        NotesServer,
        tests::{ALL_TOOLS, Fixture, assert_ok, call},
    };

    #[tokio::test]
    async fn http_round_trip_writes_the_database() {
        // reqwest may be built with `rustls-no-provider` (workspace feature unification).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let fixture = Fixture::new();
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).await.expect("bind");
        let port = listener.local_addr().expect("local address").port();
        let options = HttpOptions { bind: IpAddr::V4(Ipv4Addr::LOCALHOST), port, path: "/mcp".to_owned() };
        let server = NotesServer::new(fixture.store.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve_http(server, listener, &options, async {
                let _ = stopped.await;
            })
            .await
        });

        let transport = StreamableHttpClientTransport::from_uri(format!("http://127.0.0.1:{port}/mcp"));
        let client = ().serve(transport).await.expect("client connects over HTTP");
        assert_eq!(client.list_all_tools().await.expect("tools/list").len(), ALL_TOOLS.len());
        let added = call(&client, "add_note", json!({"title": "over http", "body": "b"})).await;
        assert_eq!(assert_ok(&added), "Added note 1.");
        assert_eq!(fixture.titles_on_disk(), ["over http"]);

        // Stopping while the session is open must not hang.
        let _ = stop.send(());
        let finished = tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("server stops promptly")
            .expect("server task joins");
        assert!(finished.is_ok(), "{finished:?}");
        drop(client);
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
