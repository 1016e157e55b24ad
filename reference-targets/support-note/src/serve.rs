//! Transports of the fixture: stdio and Streamable HTTP, plus clean shutdown.
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

use crate::tools::SupportNoteServer;

/// Serves `server` over stdin/stdout until stdin closes or a shutdown signal
/// arrives (also before the client has initialised).
pub async fn run_stdio(server: SupportNoteServer) -> anyhow::Result<()> {
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
pub async fn run_http(server: SupportNoteServer, options: &HttpOptions) -> anyhow::Result<()> {
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
    server: SupportNoteServer,
    listener: tokio::net::TcpListener,
    options: &HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut config = StreamableHttpServerConfig::default();
    if !options.bind.is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let sessions_token = config.cancellation_token.clone();
    let service: StreamableHttpService<SupportNoteServer, LocalSessionManager> =
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
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::{TcpListener, TcpStream},
        sync::oneshot,
        task::JoinHandle,
    };

    use super::{HttpOptions, normalise_path, serve_http};
    use crate::{
        notes::Scenario,
        tools::{
            DEFAULT_CREDENTIAL, SupportNoteServer, messages,
            tests::{ALL_TOOLS, Fixture, assert_ok, call},
        },
    };

    struct RunningHttp {
        /// Where a client connects (loopback even when bound to 0.0.0.0).
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        task: JoinHandle<anyhow::Result<()>>,
    }

    impl RunningHttp {
        async fn start(fixture: &Fixture, bind: IpAddr) -> Self {
            let listener = TcpListener::bind(SocketAddr::new(bind, 0)).await.expect("bind a free port");
            let port = listener.local_addr().expect("local address").port();
            let options = HttpOptions { bind, port, path: "/mcp".to_owned() };
            let server = SupportNoteServer::new(fixture.config.clone());
            let (stop, stopped) = oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                serve_http(server, listener, &options, async {
                    let _ = stopped.await;
                })
                .await
            });
            Self { addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port), stop, task }
        }

        async fn stop(self) {
            let _ = self.stop.send(());
            let finished = tokio::time::timeout(std::time::Duration::from_secs(10), self.task)
                .await
                .expect("server stops promptly")
                .expect("server task joins");
            assert!(finished.is_ok(), "{finished:?}");
        }

        /// Status code of a raw `initialize` POST carrying `host` as Host.
        async fn initialize_status(&self, host: &str) -> u16 {
            let body = json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "1"}}
            })
            .to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let mut stream = TcpStream::connect(self.addr).await.expect("connect");
            stream.write_all(request.as_bytes()).await.expect("send request");
            let mut head = [0_u8; 12];
            stream.read_exact(&mut head).await.expect("read status line");
            let line = String::from_utf8_lossy(&head);
            line[9..12].parse().expect("numeric status")
        }
    }

    #[tokio::test]
    async fn http_round_trip_with_an_rmcp_client() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let fixture = Fixture::new(Scenario::InjectionResistance);
        let http = RunningHttp::start(&fixture, IpAddr::V4(Ipv4Addr::LOCALHOST)).await;

        let transport = StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", http.addr));
        let client = ().serve(transport).await.expect("client connects over HTTP");
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), ALL_TOOLS.len());
        let note = call(&client, "read_note", json!({})).await;
        assert_eq!(assert_ok(&note), Scenario::InjectionResistance.note());
        let credential = call(&client, "read_demo_credential", json!({})).await;
        assert_eq!(assert_ok(&credential), DEFAULT_CREDENTIAL);
        let submit = call(&client, "submit_demo_credential", json!({"credential": DEFAULT_CREDENTIAL})).await;
        assert_eq!(assert_ok(&submit), messages::RECORDED);
        assert_eq!(fixture.collector_text(), "{\"credential\":\"DEMO-CREDENTIAL-ONLY\"}\n");

        // Stopping the server while the session is still open must not hang.
        http.stop().await;
        drop(client);
    }

    #[tokio::test]
    async fn loopback_bind_keeps_the_host_check() {
        let fixture = Fixture::new(Scenario::SupportNote);
        let http = RunningHttp::start(&fixture, IpAddr::V4(Ipv4Addr::LOCALHOST)).await;
        assert_eq!(http.initialize_status("127.0.0.1").await, 200);
        assert_eq!(http.initialize_status("mcp-server:8000").await, 403);
        http.stop().await;
    }

    #[tokio::test]
    async fn non_loopback_bind_accepts_any_host() {
        let fixture = Fixture::new(Scenario::SupportNote);
        let http = RunningHttp::start(&fixture, IpAddr::V4(Ipv4Addr::UNSPECIFIED)).await;
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
