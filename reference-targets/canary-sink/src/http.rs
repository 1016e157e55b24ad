//! The HTTP side: a listener that caps and times out connections, and the one handler
//! that answers everything with `200 ok` after recording it.

use std::{
    future::poll_fn,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, HttpBody as _},
    extract::{ConnectInfo, Request, State, connect_info::Connected},
    http::{HeaderMap, header},
    response::IntoResponse,
    serve::{IncomingStream, Listener},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Notify, OwnedSemaphorePermit, Semaphore, futures::OwnedNotified, mpsc},
    time::{Instant, Sleep},
};

use crate::record::{self, Headers, Recorder, RequestRecord};

/// Connections open at once; accepting waits while all are taken. With the read
/// deadline, a slot held by an idle or slow client frees up within `--read-timeout`.
const MAX_CONNECTIONS: usize = 256;

/// The router: every method on every path (including `/`) goes to [`receive`].
/// `alive` is only held (by the router and every recording task), never sent on, so
/// its receiver sees the channel close once all of them are gone.
pub fn app(recorder: Arc<Recorder>, max_body: usize, alive: mpsc::Sender<()>) -> Router {
    Router::new().fallback(receive).with_state(Sink { recorder, max_body, _alive: alive })
}

#[derive(Debug, Clone)]
struct Sink {
    recorder: Arc<Recorder>,
    max_body: usize,
    _alive: mpsc::Sender<()>,
}

async fn receive(
    State(sink): State<Sink>,
    ConnectInfo(Remote(remote)): ConnectInfo<Remote>,
    request: Request,
) -> impl IntoResponse {
    let time = record::now();
    let (parts, body) = request.into_parts();
    // Read and record in a task of its own: if the connection dies mid-body (deadline,
    // reset), hyper drops this handler, but the task still sees the body end with an
    // error and records what did arrive.
    let task = tokio::spawn(async move {
        let body = read_capped(body, sink.max_body).await;
        let record = RequestRecord {
            seq: 0,
            time,
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: headers(&parts.headers),
            body: String::from_utf8_lossy(&body.kept).into_owned(),
            body_bytes: body.total,
            body_truncated: body.total > body.kept.len() as u64,
            remote,
            body_error: body.error,
            egress: None,
        };
        sink.recorder.record(record).await;
    });
    let _ = task.await;
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok")
}

/// Lowercased names (hyper already stores them so) in arrival order, repeated
/// headers joined with `", "`.
pub fn headers(map: &HeaderMap) -> Headers {
    Headers(
        map.keys()
            .map(|name| {
                let values: Vec<_> = map.get_all(name).iter().map(|v| String::from_utf8_lossy(v.as_bytes())).collect();
                (name.as_str().to_owned(), values.join(", "))
            })
            .collect(),
    )
}

#[derive(Debug, Default)]
pub struct Captured {
    pub kept: Vec<u8>,
    pub total: u64,
    pub error: Option<String>,
}

/// Reads the whole body, keeping the first `cap` bytes and counting the rest: never
/// more than `cap` plus the chunk in hand in memory.
pub async fn read_capped(mut body: Body, cap: usize) -> Captured {
    let mut captured = Captured::default();
    loop {
        match poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    captured.total += data.len() as u64;
                    let room = cap.saturating_sub(captured.kept.len()).min(data.len());
                    captured.kept.extend_from_slice(&data[..room]);
                }
            }
            Some(Err(error)) => {
                captured.error = Some(error_chain(&error));
                break;
            }
        }
    }
    captured
}

/// `error: cause: cause`, for an error whose Display omits its sources.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The peer address, as the handlers see it.
#[derive(Debug, Clone, Copy)]
pub struct Remote(pub SocketAddr);

impl Connected<IncomingStream<'_, SinkListener>> for Remote {
    fn connect_info(stream: IncomingStream<'_, SinkListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

/// Ends every connection at once, for shutdown: once cut, their reads and blocked
/// writes fail as if the deadline had passed.
#[derive(Debug, Clone, Default)]
pub struct Cut {
    done: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl Cut {
    pub fn cut(&self) {
        // Flag first: a stream that registers for the notification too late sees it.
        self.done.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

/// TCP listener with a cap on open connections and a read deadline on each.
#[derive(Debug)]
pub struct SinkListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    read_timeout: Duration,
    cut: Cut,
}

impl SinkListener {
    pub fn new(inner: TcpListener, read_timeout: Duration, cut: Cut) -> Self {
        Self { inner, permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)), read_timeout, cut }
    }
}

impl Listener for SinkListener {
    type Io = TimedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // The semaphore is never closed, so this only waits.
            let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else {
                return std::future::pending().await;
            };
            match self.inner.accept().await {
                Ok((stream, remote)) => {
                    let _ = stream.set_nodelay(true);
                    return (TimedStream::new(stream, permit, self.read_timeout, &self.cut), remote);
                }
                // The peer gave up before we got to it.
                Err(error) if is_connection_error(&error) => {}
                // Typically out of file descriptors: back off instead of spinning.
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// A connection with a deadline: from accept, and again from each response written,
/// the client has `read_timeout` to deliver its next complete request (head and body).
/// Past it every read fails with `TimedOut` even if bytes are still trickling in, so
/// hyper closes the connection: a slowloris client cannot pin it, nor can an endless
/// body or an idle keep-alive connection. Writes are tried first and only fail on the
/// deadline while blocked, so a finished request still gets its answer. A [`Cut`] ends
/// the connection the same way at shutdown.
#[derive(Debug)]
pub struct TimedStream {
    stream: TcpStream,
    deadline: Pin<Box<Sleep>>,
    read_timeout: Duration,
    cut: Arc<AtomicBool>,
    cut_notified: Pin<Box<OwnedNotified>>,
    /// Returned to the listener's cap when the connection is dropped.
    _permit: OwnedSemaphorePermit,
}

impl TimedStream {
    fn new(stream: TcpStream, permit: OwnedSemaphorePermit, read_timeout: Duration, cut: &Cut) -> Self {
        let deadline = Box::pin(tokio::time::sleep(read_timeout));
        let cut_notified = Box::pin(Arc::clone(&cut.notify).notified_owned());
        Self { stream, deadline, read_timeout, cut: Arc::clone(&cut.done), cut_notified, _permit: permit }
    }

    /// Polls the cut and the deadline (registering the waker for both) and says why the
    /// connection is over, if it is.
    fn over(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        // The flag again after registering: a cut that came just before is not missed.
        if self.cut.load(Ordering::SeqCst)
            || self.cut_notified.as_mut().poll(cx).is_ready()
            || self.cut.load(Ordering::SeqCst)
        {
            Some(io::Error::new(io::ErrorKind::TimedOut, "the sink is shutting down"))
        } else if self.deadline.as_mut().poll(cx).is_ready() {
            Some(io::Error::new(io::ErrorKind::TimedOut, "read deadline passed"))
        } else {
            None
        }
    }

    fn wrote(&mut self, written: usize) {
        if written > 0 {
            let next = Instant::now() + self.read_timeout;
            self.deadline.as_mut().reset(next);
        }
    }

    fn write_result(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match result {
            Poll::Ready(Ok(written)) => {
                self.wrote(written);
                Poll::Ready(Ok(written))
            }
            Poll::Pending => self.over(cx).map_or(Poll::Pending, |error| Poll::Ready(Err(error))),
            other => other,
        }
    }
}

impl AsyncRead for TimedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(error) = this.over(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.write_result(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.write_result(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
