//! The JSON lines the sink writes to stdout, and the single writer that keeps them
//! whole, ordered and bounded.

use std::{
    io::{self, Write as _},
    net::SocketAddr,
    sync::Arc,
};

use serde::{Serialize, Serializer};
use time::{OffsetDateTime, format_description::BorrowedFormatItem, macros::format_description};
use tokio::sync::{Mutex, mpsc, oneshot};

/// Lines queued for the writer thread. When the runner stops reading stdout, handlers
/// wait here instead of piling records up in memory.
const QUEUE: usize = 32;

/// `2025-01-31T12:34:56.789Z`: RFC 3339, UTC, milliseconds.
const TIME_FORMAT: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// The current time as [`TIME_FORMAT`].
pub fn now() -> String {
    OffsetDateTime::now_utc().format(TIME_FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

/// First line on stdout: the socket is listening on `port`.
#[derive(Debug, Serialize)]
struct Ready {
    ready: bool,
    port: u16,
}

/// The answer to a runner's `barrier TOKEN` line on stdin: every request answered before
/// the line was read has its record written before this one.
#[derive(Debug, Serialize)]
struct Barrier<'a> {
    barrier: &'a str,
}

/// Written once, in place of the first request over `--max-requests`; no request record
/// follows (barrier answers still do).
#[derive(Debug, Serialize)]
struct Dropped {
    seq: u64,
    dropped: bool,
}

/// One received request, as one JSON line (fields in this order):
///
/// ```json
/// {"seq":1,"time":"2025-01-31T12:34:56.789Z","method":"POST","path":"/collect",
///  "query":"k=v","headers":{"host":"sink:8080","content-type":"application/json"},
///  "body":"{\"token\":\"ELENGTIS-…\"}","body_bytes":27,"body_truncated":false,
///  "remote":"172.18.0.3:41234"}
/// ```
///
/// - `seq` counts records from 1 in the order they are written (a request is recorded
///   once its body is complete), `time` is when its head was received.
/// - `path` and `query` are raw (still percent-encoded); `query` is `null` without `?`.
/// - `headers` has lowercased names in arrival order; repeated headers are joined with
///   `", "`; values are UTF-8-lossy.
/// - `body` is the first `--max-body` bytes, UTF-8-lossy; `body_bytes` is the whole
///   (de-chunked) length received; `body_truncated` says `body_bytes > --max-body`.
/// - `body_error` appears only when the body ended abnormally (the client disconnected
///   or hit the read deadline mid-body); the fields then describe what did arrive.
#[derive(Debug, Serialize)]
pub struct RequestRecord {
    /// Set by [`Recorder::record`].
    pub seq: u64,
    pub time: String,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Headers,
    pub body: String,
    pub body_bytes: u64,
    pub body_truncated: bool,
    #[serde(serialize_with = "display")]
    pub remote: SocketAddr,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_error: Option<String>,
    /// Egress-proxy mode only: what the proxy decided about this request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressRecord>,
}

/// The egress proxy's decision about one request (`--proxy-upstream` mode):
/// `{"decision":"allowed"|"refused","host":…,"form":…,"reason":…,"upstream_status":…}`.
#[derive(Debug, Serialize)]
pub struct EgressRecord {
    /// `allowed` (forwarded to the upstream) or `refused` (answered 403, never forwarded).
    pub decision: &'static str,
    /// The destination host the decision was about (lowercased, without port or trailing
    /// dot); `null` when the request named none that could be parsed.
    pub host: Option<String>,
    /// The port the request named, if any.
    pub port: Option<u16>,
    /// Where the destination came from: `absolute` (an absolute-form request target, a
    /// forward-proxy request) or `host_header` (an origin-form request to the gateway).
    pub form: Option<&'static str>,
    /// Why.
    pub reason: String,
    /// The upstream's status code, for a forwarded request that was answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_status: Option<u16>,
    /// Why forwarding failed, for an allowed request that got no answer upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_error: Option<String>,
}

fn display<S: Serializer>(value: &SocketAddr, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// Header names and values, serialized as a JSON object in this order.
#[derive(Debug, Default)]
pub struct Headers(pub Vec<(String, String)>);

impl Serialize for Headers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
    }
}

/// Numbers the records, applies `--max-requests`, and hands the lines to the writer
/// thread in order.
#[derive(Debug)]
pub struct Recorder {
    max_requests: u64,
    /// `None` once closed. Held across the queue send so that `seq` order is line order.
    state: Mutex<Option<State>>,
}

#[derive(Debug)]
struct State {
    lines: mpsc::Sender<Vec<u8>>,
    recorded: u64,
    dropped: bool,
}

impl Recorder {
    /// Starts the stdout writer thread. The receiver reports once it has ended: `Ok`
    /// after [`Recorder::close`] and a full drain, or the first write error.
    pub fn start(max_requests: u64) -> io::Result<(Arc<Self>, oneshot::Receiver<io::Result<()>>)> {
        let (lines, mut queue) = mpsc::channel::<Vec<u8>>(QUEUE);
        let (done_tx, done_rx) = oneshot::channel();
        // A thread of its own: a blocked stdout (the runner reading slowly) must not stall
        // the runtime, and a thread never holds up shutdown.
        std::thread::Builder::new().name("stdout".to_owned()).spawn(move || {
            let mut stdout = io::stdout().lock();
            let mut result = Ok(());
            while let Some(line) = queue.blocking_recv() {
                if let Err(error) = stdout.write_all(&line).and_then(|()| stdout.flush()) {
                    result = Err(error);
                    break;
                }
            }
            let _ = done_tx.send(result);
        })?;
        let state = State { lines, recorded: 0, dropped: false };
        Ok((Arc::new(Self { max_requests, state: Mutex::new(Some(state)) }), done_rx))
    }

    /// Writes the ready line; call it before serving so it comes first.
    pub async fn ready(&self, port: u16) {
        self.send(&Ready { ready: true, port }).await;
    }

    /// Answers a barrier: queued behind every record already queued (each request is
    /// recorded before it is answered), so the runner knows it has seen them all.
    pub async fn barrier(&self, token: &str) {
        self.send(&Barrier { barrier: token }).await;
    }

    /// Numbers and writes one request, or the `dropped` marker once past the limit.
    pub async fn record(&self, mut record: RequestRecord) {
        let mut guard = self.state.lock().await;
        let Some(state) = guard.as_mut() else { return };
        let line = if state.recorded < self.max_requests {
            state.recorded += 1;
            record.seq = state.recorded;
            to_line(&record)
        } else if !state.dropped {
            state.dropped = true;
            to_line(&Dropped { seq: state.recorded + 1, dropped: true })
        } else {
            return;
        };
        if let Some(line) = line {
            // Fails only when the writer has stopped; main learns that from the writer.
            let _ = state.lines.send(line).await;
        }
    }

    /// Stops recording; the writer thread drains the queue and reports.
    pub async fn close(&self) {
        self.state.lock().await.take();
    }

    async fn send<T: Serialize>(&self, value: &T) {
        let guard = self.state.lock().await;
        if let (Some(state), Some(line)) = (guard.as_ref(), to_line(value)) {
            let _ = state.lines.send(line).await;
        }
    }
}

/// Compact JSON plus the newline.
fn to_line<T: Serialize>(value: &T) -> Option<Vec<u8>> {
    match serde_json::to_vec(value) {
        Ok(mut line) => {
            line.push(b'\n');
            Some(line)
        }
        Err(error) => {
            tracing::error!(%error, "failed to serialize a record");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_is_rfc3339_utc_with_milliseconds() {
        let time = now();
        assert_eq!(time.len(), 24, "{time}");
        assert!(time.ends_with('Z'), "{time}");
        assert_eq!(&time[10..11], "T");
        assert_eq!(&time[19..20], ".");
        assert!(OffsetDateTime::parse(&time, &time::format_description::well_known::Rfc3339).is_ok(), "{time}");
    }

    #[test]
    fn record_fields_keep_their_order_and_skip_a_missing_error() {
        let record = RequestRecord {
            seq: 7,
            time: "2025-01-31T12:34:56.789Z".to_owned(),
            method: "POST".to_owned(),
            path: "/a".to_owned(),
            query: None,
            headers: Headers(vec![("x-b".to_owned(), "1".to_owned()), ("x-a".to_owned(), "2, 3".to_owned())]),
            body: "hi".to_owned(),
            body_bytes: 2,
            body_truncated: false,
            remote: "[::1]:4000".parse().expect("address"),
            body_error: None,
            egress: None,
        };
        let line = String::from_utf8(to_line(&record).expect("line")).expect("utf-8");
        assert_eq!(
            line,
            concat!(
                r#"{"seq":7,"time":"2025-01-31T12:34:56.789Z","method":"POST","path":"/a","query":null,"#,
                r#""headers":{"x-b":"1","x-a":"2, 3"},"body":"hi","body_bytes":2,"body_truncated":false,"#,
                r#""remote":"[::1]:4000"}"#,
                "\n"
            )
        );
    }
}
