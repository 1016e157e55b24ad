//! The relay container's side: `elengtis relay-mux ADDR`, the container's main process. It
//! waits until `ADDR` accepts connections and says so (`ready`), then serves every
//! connection the runner opens over its stdin/stdout ([`super::frame`]) by connecting to
//! `ADDR`. It listens on nothing; its stdio is reachable only through the engine's attach
//! API, i.e. by the runner.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::frame::{Direction, Frame, FrameReader, ReadError};

/// Frames queued per connection before the sender waits (bounds memory per connection).
pub(super) const QUEUE: usize = 64;
/// How long the relay's connection to its target may take.
const CONNECT: Duration = Duration::from_secs(10);

/// What a connection's writer is told.
#[derive(Debug)]
pub(super) enum Msg {
    /// Bytes to write.
    Data(Vec<u8>),
    /// Drop the connection at once.
    Abort,
}

/// Serve the runner on this process's stdin/stdout: probe `addr` for up to `probe_limit`,
/// then relay connections until stdin ends. A malformed stream from the runner ends the
/// relay with that error (after an `error` frame naming it).
pub async fn run(addr: SocketAddr, probe_limit: Duration) -> Result<(), String> {
    serve(tokio::io::stdin(), tokio::io::stdout(), addr, probe_limit).await
}

/// [`run`] over any pair of streams.
pub(super) async fn serve<R, W>(input: R, output: W, addr: SocketAddr, probe_limit: Duration) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, frames) = mpsc::channel::<Frame>(QUEUE);
    let writer = tokio::spawn(write_frames(frames, output));
    let result = relay(input, &out, addr, probe_limit).await;
    if let Err(e) = &result {
        let _ = out.send(Frame::Error(0, e.clone())).await;
    }
    drop(out);
    // Connections still open keep the writer alive; the runner is gone or done by now.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    result
}

async fn relay<R: AsyncRead + Unpin>(
    input: R,
    out: &mpsc::Sender<Frame>,
    addr: SocketAddr,
    probe_limit: Duration,
) -> Result<(), String> {
    if !probe(addr, probe_limit).await {
        return Err(format!(
            "port {} did not accept connections within {} s (checked by the relay in the target's network namespace)",
            addr.port(),
            probe_limit.as_secs()
        ));
    }
    out.send(Frame::Ready).await.map_err(|_| "failed to write to the runner".to_owned())?;
    let mut reader = FrameReader::new(input, Direction::ToRelay);
    let mut connections: HashMap<u32, mpsc::Sender<Msg>> = HashMap::new();
    let mut last_opened = 0u32;
    loop {
        let frame = match reader.next().await {
            Ok(Some(frame)) => frame,
            // The runner closed the stream: the trial is over.
            Ok(None) => return Ok(()),
            Err(ReadError::Io(e)) => return Err(format!("failed to read from the runner: {e}")),
            Err(ReadError::Frame(e)) => return Err(e.to_string()),
        };
        let id = frame.id();
        match frame {
            Frame::Open(id) => {
                if id <= last_opened {
                    return Err(format!(
                        "failed to follow the relay protocol: `open` {id} after {last_opened} (ids must increase)"
                    ));
                }
                last_opened = id;
                let (tx, rx) = mpsc::channel(QUEUE);
                connections.insert(id, tx);
                tokio::spawn(connection(id, addr, rx, out.clone()));
            }
            Frame::Data(..) | Frame::Close(_) | Frame::Error(..) if id > last_opened => {
                return Err(format!("failed to follow the relay protocol: `{frame}` for a connection never opened"));
            }
            Frame::Data(id, bytes) => {
                // A connection that already ended drops what still arrives for it.
                if let Some(tx) = connections.get(&id)
                    && tx.send(Msg::Data(bytes)).await.is_err()
                {
                    connections.remove(&id);
                }
            }
            Frame::Close(id) => {
                // Dropping the sender ends the connection's upstream (a half-close).
                connections.remove(&id);
            }
            Frame::Error(id, _) => {
                if let Some(tx) = connections.remove(&id) {
                    let _ = tx.send(Msg::Abort).await;
                }
            }
            Frame::Ready => return Err("failed to follow the relay protocol: `ready` from the runner".into()),
        }
    }
}

/// Wait until `addr` accepts a TCP connection, or give up after `limit`.
async fn probe(addr: SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(500), tokio::net::TcpStream::connect(addr)).await
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Encode queued frames onto `output`, flushing whenever the queue is empty.
pub(super) async fn write_frames<W: AsyncWrite + Unpin>(mut frames: mpsc::Receiver<Frame>, mut output: W) {
    let mut buf = Vec::new();
    while let Some(frame) = frames.recv().await {
        buf.clear();
        frame.encode(&mut buf);
        while let Ok(more) = frames.try_recv() {
            more.encode(&mut buf);
        }
        if output.write_all(&buf).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
    let _ = output.shutdown().await;
}

/// One connection of the runner: connect to `addr`, then copy both ways until both end.
async fn connection(id: u32, addr: SocketAddr, rx: mpsc::Receiver<Msg>, out: mpsc::Sender<Frame>) {
    let stream = match tokio::time::timeout(CONNECT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            let _ = out.send(Frame::Error(id, format!("failed to connect to {addr}: {e}"))).await;
            return;
        }
        Err(_) => {
            let _ =
                out.send(Frame::Error(id, format!("failed to connect to {addr} within {} s", CONNECT.as_secs()))).await;
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    pump(id, stream, rx, out).await;
}

/// Copy `rx` → `socket` and `socket` → `out` as frames of connection `id`, until both
/// directions end or either side aborts. Used by both sides of the relay.
pub(super) async fn pump<S>(id: u32, socket: S, mut rx: mpsc::Receiver<Msg>, out: mpsc::Sender<Frame>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut read_half, mut write_half) = tokio::io::split(socket);
    // Bytes for this connection, written to the socket; `Abort` ends everything.
    let upstream = async {
        while let Some(msg) = rx.recv().await {
            match msg {
                Msg::Data(bytes) => {
                    if let Err(e) = write_half.write_all(&bytes).await {
                        let _ = out.send(Frame::Error(id, format!("failed to write: {e}"))).await;
                        return false;
                    }
                }
                Msg::Abort => return false,
            }
        }
        let _ = write_half.shutdown().await;
        true
    };
    // The socket's bytes, as frames; its end as `close`, a failure as `error`.
    let downstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match read_half.read(&mut buf).await {
                Ok(0) => {
                    let _ = out.send(Frame::Close(id)).await;
                    return true;
                }
                Ok(n) => {
                    if out.send(Frame::Data(id, buf[..n].to_vec())).await.is_err() {
                        return false;
                    }
                }
                Err(e) => {
                    let _ = out.send(Frame::Error(id, format!("failed to read: {e}"))).await;
                    return false;
                }
            }
        }
    };
    tokio::pin!(upstream, downstream);
    // Both directions run until both finish; an abort or failure in either ends both.
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            ok = &mut upstream, if !up_done => { if !ok { return; } up_done = true; }
            ok = &mut downstream, if !down_done => { if !ok { return; } down_done = true; }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An echo server on 127.0.0.1 that answers each connection's bytes, uppercased (also
    /// the listener tests' target, `client.rs`).
    pub(crate) async fn echo() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n].to_ascii_uppercase()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn frames_of(input: Vec<Frame>, addr: SocketAddr) -> (Result<(), String>, Vec<Frame>) {
        let mut wire = Vec::new();
        for f in &input {
            f.encode(&mut wire);
        }
        let (mut to_relay, relay_side) = tokio::io::duplex(1 << 20);
        let (relay_out, mut from_relay) = tokio::io::duplex(1 << 20);
        to_relay.write_all(&wire).await.expect("write");
        let served = tokio::spawn(serve(relay_side, relay_out, addr, Duration::from_secs(2)));
        // Let the connections answer, then end the stream.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(to_relay);
        let result = served.await.expect("join");
        let mut bytes = Vec::new();
        from_relay.read_to_end(&mut bytes).await.expect("read");
        let mut reader = FrameReader::new(&bytes[..], Direction::ToRunner);
        let mut frames = Vec::new();
        while let Ok(Some(f)) = reader.next().await {
            frames.push(f);
        }
        (result, frames)
    }

    #[tokio::test]
    async fn two_connections_share_the_stream_after_ready() {
        let addr = echo().await;
        let input =
            vec![Frame::Open(1), Frame::Open(2), Frame::Data(2, b"second".to_vec()), Frame::Data(1, b"first".to_vec())];
        let (result, frames) = frames_of(input, addr).await;
        assert_eq!(result, Ok(()));
        assert_eq!(frames.first(), Some(&Frame::Ready));
        let of = |id: u32| -> Vec<u8> {
            frames
                .iter()
                .filter_map(|f| {
                    if let Frame::Data(i, b) = f
                        && *i == id
                    {
                        Some(b.clone())
                    } else {
                        None
                    }
                })
                .flatten()
                .collect()
        };
        assert_eq!(of(1), b"FIRST");
        assert_eq!(of(2), b"SECOND");
    }

    #[tokio::test]
    async fn a_malformed_frame_ends_the_relay_with_an_error_frame_naming_it() {
        let addr = echo().await;
        let mut wire = Vec::new();
        Frame::Open(1).encode(&mut wire);
        wire.extend_from_slice(&[2, 0, 0, 0, 1, 0, 1, 0, 1]); // `data` of 65537 bytes
        let (mut to_relay, relay_side) = tokio::io::duplex(1 << 20);
        let (relay_out, mut from_relay) = tokio::io::duplex(1 << 20);
        to_relay.write_all(&wire).await.expect("write");
        let result = serve(relay_side, relay_out, addr, Duration::from_secs(2)).await;
        let error = result.expect_err("a malformed frame must end the relay");
        assert!(error.contains("payload of 65537 bytes"), "{error}");
        let mut bytes = Vec::new();
        from_relay.read_to_end(&mut bytes).await.expect("read");
        let mut reader = FrameReader::new(&bytes[..], Direction::ToRunner);
        assert_eq!(reader.next().await.ok(), Some(Some(Frame::Ready)));
        assert_eq!(reader.next().await.ok(), Some(Some(Frame::Error(0, error))));
    }

    #[tokio::test]
    async fn ids_must_increase_and_data_needs_an_open_connection() {
        let addr = echo().await;
        let (result, _) = frames_of(vec![Frame::Open(2), Frame::Open(2)], addr).await;
        assert!(result.expect_err("a reused id").contains("`open` 2 after 2"));
        let (result, _) = frames_of(vec![Frame::Data(1, b"x".to_vec())], addr).await;
        assert!(result.expect_err("data first").contains("never opened"));
    }

    #[tokio::test]
    async fn a_target_that_never_listens_is_reported_as_a_relay_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let (_to_relay, relay_side) = tokio::io::duplex(1024);
        let (relay_out, mut from_relay) = tokio::io::duplex(1 << 16);
        let error = serve(relay_side, relay_out, addr, Duration::from_millis(300)).await.expect_err("no listener");
        let mut bytes = Vec::new();
        from_relay.read_to_end(&mut bytes).await.expect("read");
        let mut reader = FrameReader::new(&bytes[..], Direction::ToRunner);
        assert_eq!(reader.next().await.ok(), Some(Some(Frame::Error(0, error.clone()))));
        assert!(error.contains(&format!("port {} did not accept connections", addr.port())), "{error}");
    }
}
