//! `elengtis-sink`: the canary sink, the attacker's endpoint of an elengtis trial.
//!
//! Scenarios that test exfiltration point the agent at `http://sink:<port>/...`: the
//! runner starts this small static HTTP service on the trial's internal, no-egress
//! network under the alias `sink`. It accepts any method on any path, answers
//! `200 ok` so the caller sees a plausible success, and records every request it
//! receives (method, path, raw query, headers, the first `--max-body` bytes of the
//! body, peer address).
//!
//! # Why a separate sink
//!
//! Whether a model *said* it sent something, or a target's own tool *claimed* to
//! forward it, is evidence from the parties under test. The sink turns "did data
//! leave the target?" into an independent, observable fact: if the per-trial canary
//! shows up in a record, a request carrying it actually crossed the network, whatever
//! the transcript says. It runs in its own container, shares no files with the
//! target, and knows nothing about the scenario.
//!
//! # Why the records go to stdout only
//!
//! The records are written as JSON lines to stdout, which only the runner can read
//! (it attaches to the container's stdio). Nothing on the network can read them back:
//! every path answers the same `ok`, there is no listing or query endpoint, and the
//! sink writes no files (it runs `FROM scratch`, read-only, as uid 65534). So a
//! compromised target or agent cannot check what was captured, erase it, or learn the
//! canary from the sink; it can only add requests, and those are recorded too.
//!
//! # Protocol with the runner
//!
//! - The first stdout line is `{"ready":true,"port":P}`, once the socket is listening.
//! - Then one line per request (see [`record::RequestRecord`]); after `--max-requests`
//!   records a single `{"seq":N,"dropped":true}` and nothing more, so the output stays
//!   bounded while requests keep being answered.
//! - A stdin line `barrier TOKEN` (TOKEN: 1–64 of `A-Za-z0-9-`) is answered with the
//!   stdout line `{"barrier":"TOKEN"}`, written after the record of every request the sink
//!   answered before it read the line (a request is recorded before it is answered). The
//!   runner uses it to know it has every record before a check reads them, without a
//!   network route to the sink. Other stdin lines are ignored; lines are capped at 256
//!   bytes.
//! - End of stdin means the trial is over: the sink stops listening, gives in-flight
//!   requests a short grace period (then cuts them, recording what had arrived),
//!   flushes, and exits 0. SIGTERM (and SIGINT) do the same.
//! - Logs go to stderr, never stdout.
//!
//! # Egress-proxy mode
//!
//! With `--proxy-upstream IP:PORT` the same binary is the trial network's allowlisting egress
//! proxy instead (see [`proxy`]): a request whose destination host is on `--allow` is
//! forwarded to the upstream (the sink, on a network only the proxy shares) and its answer
//! returned; any other is answered `403` and never forwarded. The stdout protocol is the
//! sink's, each record carrying an `egress` object with the decision.
//!
//! Everything is bounded: bodies are read with a cap (at most `--max-body` bytes plus one
//! chunk held), header count and size keep hyper's limits, each connection has a read
//! deadline that only a delivered response extends (a slowloris client is cut off), and
//! the number of open connections is capped.

mod http;
mod proxy;
mod record;

use std::{io::Read as _, net::IpAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use tokio::{
    net::TcpListener,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, oneshot},
};

use crate::{
    http::{Cut, Remote, SinkListener},
    record::Recorder,
};

/// How long in-flight requests may still finish (and be recorded) after the stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long cut connections may take to record what they had.
const CUT_GRACE: Duration = Duration::from_millis(500);
/// How long the last records may take to reach stdout after the server stopped.
const FLUSH_GRACE: Duration = Duration::from_secs(2);

/// Canary sink: answers any HTTP request with `200 ok` and records it as a JSON line
/// on stdout. Exits when stdin closes or on SIGTERM.
#[derive(Debug, Parser)]
#[command(name = "elengtis-sink", version, about)]
struct Args {
    /// Numeric address to listen on (no DNS).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
    bind: IpAddr,

    /// TCP port (0 picks a free one; the ready line reports it).
    #[arg(long, value_name = "N", default_value_t = 8080)]
    port: u16,

    /// Body bytes kept per request; the rest is read, counted and discarded.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    max_body: usize,

    /// Requests recorded before a single `dropped` line ends the output.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_requests: u64,

    /// Seconds a connection may take to deliver a complete request, counted from
    /// accept or from the previous response; then it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    read_timeout: u64,

    /// Egress-proxy mode: forward requests whose destination host is on `--allow` to this
    /// numeric upstream address (the canary sink) and refuse every other with 403.
    #[arg(long, value_name = "IP:PORT")]
    proxy_upstream: Option<std::net::SocketAddr>,

    /// A destination host the egress proxy forwards (exact, case-insensitive; repeatable).
    #[arg(long = "allow", value_name = "HOST", requires = "proxy_upstream")]
    allow: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    elengtis_target_kit::init_logging("warn,elengtis_sink=info");

    // One thread is plenty: handlers only copy bytes, and stdout is written by its own
    // thread. Nothing here uses the blocking pool, so dropping the runtime never waits.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(run(args))
}

/// Why the sink stopped.
#[derive(Debug)]
enum Stop {
    StdinClosed,
    Signal(&'static str),
    StdoutFailed(String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::StdinClosed => f.write_str("stdin closed"),
            Self::Signal(name) => write!(f, "{name} received"),
            Self::StdoutFailed(error) => write!(f, "stdout failed: {error}"),
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let (recorder, mut written) = Recorder::start(args.max_requests).context("failed to start the stdout writer")?;
    let listener = TcpListener::bind((args.bind, args.port))
        .await
        .with_context(|| format!("failed to listen on {}:{}", args.bind, args.port))?;
    let local = listener.local_addr().context("failed to read the listening address")?;
    let mut terminate = signal(SignalKind::terminate()).context("failed to watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to watch SIGINT")?;
    let mut stdin = watch_stdin().context("failed to watch stdin")?;

    recorder.ready(local.port()).await;
    tracing::info!(%local, max_body = args.max_body, max_requests = args.max_requests, "canary sink listening");

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    // Nothing is ever sent on `alive`: it closes once every clone of its sender is gone,
    // that is once the server, every connection and every recording task has ended.
    let (alive_tx, mut alive) = mpsc::channel::<()>(1);
    let cut = Cut::default();
    let app = match args.proxy_upstream {
        Some(addr) => {
            let allow = Arc::new(args.allow.iter().map(|h| proxy::normalise_host(h)).collect());
            tracing::info!(%addr, allow = ?args.allow, "egress proxy mode");
            proxy::app(Arc::clone(&recorder), args.max_body, alive_tx, proxy::Upstream { addr, allow })
        }
        None => http::app(Arc::clone(&recorder), args.max_body, alive_tx),
    };
    let listener = SinkListener::new(listener, Duration::from_secs(args.read_timeout), cut.clone());
    tokio::spawn(
        axum::serve(listener, app.into_make_service_with_connect_info::<Remote>())
            .with_graceful_shutdown(async move {
                // Either a send or a dropped sender means stop.
                let _ = stop_rx.await;
            })
            .into_future(),
    );

    let stop = loop {
        tokio::select! {
            event = stdin.recv() => match event {
                Some(Stdin::Barrier(token)) => recorder.barrier(&token).await,
                Some(Stdin::Closed) | None => break Stop::StdinClosed,
            },
            _ = terminate.recv() => break Stop::Signal("SIGTERM"),
            _ = interrupt.recv() => break Stop::Signal("SIGINT"),
            result = &mut written => break Stop::StdoutFailed(match result {
                Ok(Err(error)) => error.to_string(),
                Ok(Ok(())) | Err(_) => "the writer stopped".to_owned(),
            }),
        }
    };
    tracing::info!(%stop, "stopping");

    // Stop accepting (axum drops the listener; idle connections close), let in-flight
    // requests finish for a moment, then cut the connections still open: their reads
    // fail, so a half-sent body is still recorded, with `body_error`.
    let _ = stop_tx.send(());
    if tokio::time::timeout(SHUTDOWN_GRACE, alive.recv()).await.is_err() {
        tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; cutting their connections");
        cut.cut();
        if tokio::time::timeout(CUT_GRACE, alive.recv()).await.is_err() {
            tracing::warn!("requests still in flight after the cut; not recording them");
        }
    }

    if let Stop::StdoutFailed(error) = stop {
        anyhow::bail!("stdout failed, records were lost: {error}");
    }
    // No more records: the writer drains what is queued and reports.
    let flushed = tokio::time::timeout(FLUSH_GRACE, async {
        recorder.close().await;
        written.await
    })
    .await;
    match flushed {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(error))) => Err(anyhow::Error::new(error).context("stdout failed, records were lost")),
        Ok(Err(_)) => anyhow::bail!("the stdout writer vanished"),
        Err(_) => anyhow::bail!("stdout did not drain within {FLUSH_GRACE:?}"),
    }
}

/// What the runner said on stdin.
#[derive(Debug)]
enum Stdin {
    /// `barrier TOKEN`.
    Barrier(String),
    /// End of file (or stdin cannot be read): the runner's attach ended, the trial is over.
    Closed,
}

/// The longest stdin line looked at; longer ones are skipped whole.
const MAX_STDIN_LINE: usize = 256;

/// Reads stdin line by line: barrier requests and, last, the end of file.
///
/// A plain thread, not tokio's stdin: its blocking read cannot be cancelled and would
/// hold up the runtime's shutdown on SIGTERM; a detached thread just dies with the
/// process.
fn watch_stdin() -> std::io::Result<mpsc::Receiver<Stdin>> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::Builder::new().name("stdin".to_owned()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0_u8; 1024];
        let mut line: Vec<u8> = Vec::new();
        let mut skipping = false;
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::warn!(%error, "stdin unreadable; treating it as closed");
                    break;
                }
            };
            for &byte in &buf[..n] {
                if byte == b'\n' {
                    if !skipping
                        && let Some(token) = barrier_token(&line)
                        && tx.blocking_send(Stdin::Barrier(token)).is_err()
                    {
                        return;
                    }
                    line.clear();
                    skipping = false;
                } else if line.len() < MAX_STDIN_LINE {
                    line.push(byte);
                } else {
                    skipping = true;
                }
            }
        }
        let _ = tx.blocking_send(Stdin::Closed);
    })?;
    Ok(rx)
}

/// The token of a well-formed `barrier TOKEN` line.
fn barrier_token(line: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let token = line.strip_prefix("barrier ")?;
    let valid = (1..=64).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    valid.then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::barrier_token;

    #[test]
    fn only_well_formed_barrier_lines_are_taken() {
        assert_eq!(barrier_token(b"barrier abc-123"), Some("abc-123".to_owned()));
        assert_eq!(barrier_token(b"barrier abc\r"), Some("abc".to_owned()));
        for bad in [&b"barrier "[..], b"barrier a b", b"barrier {\"x\":1}", b"BARRIER abc", b"hello", b"barrier \xff"] {
            assert_eq!(barrier_token(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(barrier_token(format!("barrier {}", "a".repeat(65)).as_bytes()), None);
    }
}
