//! Log lines never carry header secrets.
//!
//! This is its own test binary with a single test: tracing caches callsite
//! interest process-wide, so a thread-local subscriber only sees every event
//! reliably when no other test thread is emitting at the same time.

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::http::HeaderMap;
    use axum::routing::any;
    use elengtis_verifiers::{HttpClient, HttpLimits, HttpRequestSpec, Method, SecretValue};
    use serde_json::json;

    const SECRET: &str = "s3cr3t-LOGS-91c2";

    /// Collects everything a `fmt` subscriber writes.
    #[derive(Clone, Default)]
    struct LogBuffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for LogBuffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
        type Writer = Self;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[tokio::test]
    async fn trace_logs_name_the_request_but_never_the_secret() {
        let logs = LogBuffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let router = Router::new().route(
            "/echo",
            any(|headers: HeaderMap| async move {
                let key = headers.get("x-api-key").and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
                axum::Json(json!({ "api_key": key }))
            }),
        );
        tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });

        let client = HttpClient::new(HttpLimits::default()).expect("client");
        let spec = HttpRequestSpec {
            method: Method::Post,
            url: format!("http://{addr}/echo"),
            headers: vec![("X-Api-Key".to_owned(), SecretValue::new(SECRET))],
            json: Some(json!({"q": 1})),
        };
        let record = client.execute(&spec).await.expect("request");
        assert_eq!(record.body["api_key"], SECRET, "the server gets the secret");

        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let closed_addr = closed.local_addr().expect("addr");
        drop(closed);
        let refused = HttpRequestSpec { url: format!("http://{closed_addr}/echo"), ..spec.clone() };
        client.execute(&refused).await.expect_err("refused");

        let logged = String::from_utf8_lossy(&logs.0.lock().expect("log lock")).into_owned();
        assert!(logged.contains("http_request{method=POST url="), "{logged}");
        assert!(logged.contains(&spec.url), "{logged}");
        assert!(logged.contains("http request answered"), "{logged}");
        assert!(logged.contains("http request failed"), "{logged}");
        assert!(!logged.contains(SECRET), "{logged}");
    }
}
