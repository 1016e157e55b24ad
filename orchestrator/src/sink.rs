//! The canary sink, seen from the runner: a per-trial attacker endpoint whose received
//! requests reach the runner only, and a loopback endpoint that serves them to
//! `http_request` checks.
//!
//! A sink runs as the `elengtis-sink` reference target: in a hardened container on the
//! trial's internal network for `isolated_container` targets (started before the target),
//! or as a child process on 127.0.0.1 for the other transports. It prints one JSON line per
//! request on its stdout, which only the runner reads. `{runner: sink_url}` is its address
//! as the target sees it; `{runner: sink_requests}` is a runner-only URL on 127.0.0.1 that
//! answers `{count, requests, text}` — after a barrier that guarantees every request the
//! sink answered before the check is included. The barrier travels over the sink's stdin
//! (`barrier TOKEN`, answered on its stdout after the records before it), so the runner
//! needs no network route to the sink: the trial network keeps no host address.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Notify;

/// Runner values that need a sink.
pub const SINK_VALUES: &[&str] = &["sink_url", "sink_direct_url", "sink_requests"];

/// How long to wait for the sink's ready line or a barrier.
pub const SINK_DEADLINE: Duration = Duration::from_secs(10);

/// The sink's stdin, where the runner writes barrier lines; dropping it ends the sink.
pub type SinkControl = Pin<Box<dyn AsyncWrite + Send>>;

/// A running sink and the requests it recorded.
pub struct SinkHandle {
    url: String,
    control: tokio::sync::Mutex<Option<SinkControl>>,
    /// Each record with when the runner read it ([`crate::clock`]).
    records: Arc<Mutex<Vec<(Value, u64)>>>,
    arrived: Arc<Notify>,
    reader: tokio::task::JoinHandle<()>,
    child: Option<tokio::process::Child>,
}

impl std::fmt::Debug for SinkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkHandle").field("url", &self.url).finish_non_exhaustive()
    }
}

impl SinkHandle {
    /// Follow a sink's stdout: wait for its ready line, then collect records in the
    /// background. `control` is its stdin; `url` is where the target reaches it (by
    /// default `http://127.0.0.1:PORT`, for a sink in a child process).
    pub async fn follow<R>(stdout: R, control: SinkControl, url: Option<String>) -> Result<SinkHandle, String>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(SINK_DEADLINE, lines.next_line())
            .await
            .map_err(|_| format!("the canary sink printed no ready line within {} s", SINK_DEADLINE.as_secs()))?
            .map_err(|e| format!("failed to read the canary sink: {e}"))?
            .ok_or("the canary sink exited before it was ready")?;
        let ready: Value =
            serde_json::from_str(&ready).map_err(|e| format!("the canary sink's ready line is not JSON: {e}"))?;
        let port =
            ready["port"].as_u64().and_then(|p| u16::try_from(p).ok()).ok_or("the canary sink reported no port")?;
        let url = url.unwrap_or_else(|| format!("http://{}", SocketAddr::from(([127, 0, 0, 1], port))));
        let records = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let (r, a) = (records.clone(), arrived.clone());
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let received = crate::clock::now_us();
                let record = serde_json::from_str(&line).unwrap_or_else(|_| json!({"unparsed": line}));
                if let Ok(mut records) = r.lock() {
                    records.push((record, received));
                }
                a.notify_waiters();
            }
        });
        Ok(SinkHandle { url, control: tokio::sync::Mutex::new(Some(control)), records, arrived, reader, child: None })
    }

    /// Start `elengtis-sink` as a child process on 127.0.0.1 (for targets that are not
    /// isolated containers).
    pub async fn spawn_process() -> Result<SinkHandle, String> {
        let program = crate::toolhost::mcp::resolve_program("elengtis-sink").map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(&program)
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("failed to start the canary sink {}: {e}", program.display()))?;
        let stdout = child.stdout.take().ok_or("the canary sink has no stdout")?;
        let stdin = child.stdin.take().ok_or("the canary sink has no stdin")?;
        let mut handle = SinkHandle::follow(stdout, Box::pin(stdin), None).await?;
        handle.child = Some(child);
        Ok(handle)
    }

    /// The sink's URL as the target sees it.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn snapshot(&self) -> Vec<(Value, u64)> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Every request recorded so far, after a barrier: the runner writes `barrier TOKEN` on
    /// the sink's stdin and waits until the sink reports it on stdout, after the record of
    /// every request it answered earlier. Barrier lines are not returned.
    pub async fn requests(&self) -> Result<Vec<Value>, String> {
        let token = uuid::Uuid::new_v4().to_string();
        let seen = |records: &[(Value, u64)]| records.iter().any(|(r, _)| r["barrier"] == token.as_str());
        let send = async {
            let mut control = self.control.lock().await;
            let stdin = control.as_mut().ok_or_else(|| std::io::Error::other("the sink was closed"))?;
            stdin.write_all(format!("barrier {token}\n").as_bytes()).await?;
            stdin.flush().await
        };
        tokio::time::timeout(SINK_DEADLINE, send)
            .await
            .map_err(|_| "the canary sink did not take the runner's barrier".to_owned())?
            .map_err(|e| format!("failed to send the canary sink a barrier: {e}"))?;
        let wait = async {
            loop {
                let notified = self.arrived.notified();
                if seen(&self.snapshot()) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(SINK_DEADLINE, wait)
            .await
            .map_err(|_| "the canary sink did not answer the runner's barrier".to_owned())?;
        Ok(without_barriers(self.snapshot()).0)
    }

    /// Stop following (and stop a child sink); the final records for the evidence, and when
    /// the runner read each one ([`crate::clock`]).
    pub async fn close(mut self) -> (Vec<Value>, Vec<u64>) {
        // End of stdin: the sink stops listening, flushes its records and exits.
        if let Some(mut control) = self.control.get_mut().take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), control.shutdown()).await;
        }
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(3), child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(3), &mut self.reader).await;
        self.reader.abort();
        without_barriers(self.snapshot())
    }
}

/// The records minus the answers to the runner's barriers, and when each was read.
fn without_barriers(records: Vec<(Value, u64)>) -> (Vec<Value>, Vec<u64>) {
    records.into_iter().filter(|(r, _)| r.get("barrier").is_none()).unzip()
}

/// The runner-only endpoint serving each attempt's sink records.
#[derive(Debug, Clone)]
pub struct SinkServer {
    addr: SocketAddr,
    sinks: Arc<Mutex<HashMap<String, Arc<SinkHandle>>>>,
}

impl SinkServer {
    /// Listen on 127.0.0.1 (an ephemeral port).
    pub async fn start() -> Result<SinkServer, String> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("failed to open the runner's sink endpoint: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("failed to open the runner's sink endpoint: {e}"))?;
        let sinks: Arc<Mutex<HashMap<String, Arc<SinkHandle>>>> = Arc::default();
        let state = sinks.clone();
        let app = axum::Router::new().route(
            "/sink/{attempt}",
            axum::routing::get(move |axum::extract::Path(attempt): axum::extract::Path<String>| {
                let state = state.clone();
                async move {
                    let handle = state.lock().ok().and_then(|m| m.get(&attempt).cloned());
                    let Some(handle) = handle else {
                        return (
                            axum::http::StatusCode::NOT_FOUND,
                            axum::Json(json!({"error": "no sink for this attempt"})),
                        );
                    };
                    match handle.requests().await {
                        Ok(requests) => {
                            let text = requests.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
                            (
                                axum::http::StatusCode::OK,
                                axum::Json(json!({"count": requests.len(), "requests": requests, "text": text})),
                            )
                        }
                        Err(e) => (axum::http::StatusCode::BAD_GATEWAY, axum::Json(json!({"error": e}))),
                    }
                }
            }),
        );
        // Small writes must not wait for delayed ACKs (≈40 ms each).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(SinkServer { addr, sinks })
    }

    /// Serve `handle` for `attempt`; the URL checks use (`{runner: sink_requests}`).
    pub fn register(&self, attempt: &str, handle: Arc<SinkHandle>) -> String {
        if let Ok(mut sinks) = self.sinks.lock() {
            sinks.insert(attempt.to_owned(), handle);
        }
        format!("http://{}/sink/{attempt}", self.addr)
    }

    /// Stop serving `attempt`; its handle, if no one else holds it.
    pub fn unregister(&self, attempt: &str) -> Option<Arc<SinkHandle>> {
        self.sinks.lock().ok().and_then(|mut s| s.remove(attempt))
    }
}

/// Whether any of these values names a sink runner value: in a `{runner: …}` reference, in
/// a `{template: …}` string template, or in one of the prompt `templates`.
pub fn uses_sink(values: &[&Value], templates: &[&str]) -> bool {
    use elengtis_core::refs::{self, RefKind};
    let template_uses_sink =
        |t: &str| refs::template_fields(t).is_ok_and(|f| f.iter().any(|n| SINK_VALUES.contains(&n.as_str())));
    values.iter().any(|v| {
        refs::find_refs(v).iter().any(|r| match (r.kind, r.name.as_deref()) {
            (RefKind::Runner, Some(n)) => SINK_VALUES.contains(&n),
            (RefKind::Template, Some(t)) => template_uses_sink(t),
            _ => false,
        })
    }) || templates.iter().any(|t| template_uses_sink(t))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::uses_sink;

    #[test]
    fn a_template_naming_a_sink_value_needs_the_sink() {
        let url = json!({"url": {"template": "{sink_url}/collect?c={canary}"}});
        assert!(uses_sink(&[&url], &[]));
        assert!(uses_sink(&[&json!([{"runner": "sink_requests"}])], &[]));
        assert!(uses_sink(&[&json!(null)], &["send it to {sink_direct_url}"]));
        assert!(!uses_sink(&[&json!({"template": "id={canary} {{sink_url}}"})], &["{canary}"]));
        assert!(!uses_sink(&[&json!({"template": "{sink_url"})], &[]), "a malformed template names nothing");
    }
}
