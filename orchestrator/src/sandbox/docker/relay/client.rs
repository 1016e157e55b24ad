//! The runner's side of the relay: a listener on 127.0.0.1 whose every connection becomes a
//! connection id on the one attach stream of the relay container ([`super::frame`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::frame::{Frame, FrameReader, ReadError};
use super::mux::{Msg, QUEUE, pump, write_frames};

/// What one trial's relay stream carried, for the evidence (`target_execution.relay`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct StreamStats {
    /// Connections the runner opened through the relay.
    pub connections: u32,
    /// Connections the relay reported aborted (`error` frames), e.g. refused by the target.
    pub connection_errors: u32,
    /// Why the stream itself ended early (a malformed frame, the relay failing), if it did:
    /// every connection was then closed.
    pub error: Option<String>,
}

/// Wait for the relay's first frame: `ready`, or the reason it is not.
pub async fn wait_ready<R: AsyncRead + Unpin>(reader: &mut FrameReader<R>) -> Result<(), String> {
    match reader.next().await {
        Ok(Some(Frame::Ready)) => Ok(()),
        Ok(Some(Frame::Error(0, reason))) => Err(reason),
        Ok(Some(other)) => Err(format!("failed to follow the relay protocol: `{other}` before `ready`")),
        Ok(None) => Err("the relay container's stream ended before it reported the target ready".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Serve `listener`: each accepted connection is opened on the relay stream (`reader` from
/// the relay's stdout, `input` its stdin) and piped both ways until it ends. Runs until the
/// stream fails (recorded in `stats`, every connection closed) or the task is aborted.
pub async fn serve<R, W>(
    listener: tokio::net::TcpListener,
    mut reader: FrameReader<R>,
    input: W,
    stats: Arc<Mutex<StreamStats>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, frames) = mpsc::channel::<Frame>(QUEUE);
    let writer = tokio::spawn(write_frames(frames, input));
    let mut connections: HashMap<u32, mpsc::Sender<Msg>> = HashMap::new();
    let mut last = 0u32;
    let update = |f: &dyn Fn(&mut StreamStats)| f(&mut stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let failure = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else {
                    // Out of descriptors, say: try again shortly rather than spin.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                // Small writes must not wait for delayed ACKs (≈40 ms each).
                let _ = socket.set_nodelay(true);
                let Some(id) = last.checked_add(1) else {
                    break "failed to open a connection through the relay: connection ids are exhausted".to_owned();
                };
                last = id;
                if out.send(Frame::Open(id)).await.is_err() {
                    break "failed to write to the relay container".to_owned();
                }
                let (tx, rx) = mpsc::channel(QUEUE);
                connections.insert(id, tx);
                update(&|s| s.connections += 1);
                tokio::spawn(pump(id, socket, rx, out.clone()));
            }
            frame = reader.next() => {
                let frame = match frame {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break "the relay container's stream ended".to_owned(),
                    Err(ReadError::Io(e)) => break format!("failed to read the relay container's stream: {e}"),
                    Err(ReadError::Frame(e)) => break e.to_string(),
                };
                let id = frame.id();
                if id > last {
                    break format!("failed to follow the relay protocol: `{frame}` for a connection never opened");
                }
                match frame {
                    Frame::Data(id, bytes) => {
                        if let Some(tx) = connections.get(&id)
                            && tx.send(Msg::Data(bytes)).await.is_err()
                        {
                            // The client is gone: tell the relay to drop its side.
                            connections.remove(&id);
                            let _ = out.send(Frame::Error(id, "the runner's client closed the connection".into())).await;
                        }
                    }
                    // The relay's side ended: the client reads to the end of what was sent.
                    Frame::Close(id) => {
                        connections.remove(&id);
                    }
                    Frame::Error(0, reason) => break format!("the relay failed: {reason}"),
                    Frame::Error(id, _) => {
                        update(&|s| s.connection_errors += 1);
                        if let Some(tx) = connections.remove(&id) {
                            let _ = tx.send(Msg::Abort).await;
                        }
                    }
                    Frame::Ready => break "failed to follow the relay protocol: a second `ready`".to_owned(),
                    Frame::Open(_) => break "failed to follow the relay protocol: `open` from the relay".to_owned(),
                }
            }
        }
    };
    // The stream cannot be trusted past this point: close the listener and abort every
    // connection (a client then sees its connection reset, never a clean end of a response).
    drop(listener);
    for (_, tx) in connections.drain() {
        if tx.try_send(Msg::Abort).is_err() {
            // A full queue: dropping the sender ends the connection after what is queued.
        }
    }
    tracing::warn!("{failure}");
    update(&|s| s.error = Some(failure.clone()));
    drop(out);
    writer.abort();
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::sandbox::docker::relay::frame::Direction;
    use crate::sandbox::docker::relay::mux;

    use crate::sandbox::docker::relay::mux::tests::echo;

    /// The runner's listener wired to an in-process relay (`mux::serve`) over two pipes.
    async fn relayed(target: SocketAddr) -> (SocketAddr, Arc<Mutex<StreamStats>>) {
        let (to_relay, relay_in) = tokio::io::duplex(1 << 16);
        let (relay_out, from_relay) = tokio::io::duplex(1 << 16);
        tokio::spawn(mux::serve(relay_in, relay_out, target, Duration::from_secs(2)));
        let mut reader = FrameReader::new(from_relay, Direction::ToRunner);
        wait_ready(&mut reader).await.expect("ready");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let local = listener.local_addr().expect("addr");
        let stats = Arc::new(Mutex::new(StreamStats::default()));
        tokio::spawn(serve(listener, reader, to_relay, Arc::clone(&stats)));
        (local, stats)
    }

    #[tokio::test]
    async fn many_connections_at_once_each_get_their_own_bytes_back() {
        let (local, stats) = relayed(echo().await).await;
        let clients = (0..8).map(|i| async move {
            let mut s = tokio::net::TcpStream::connect(local).await.expect("connect");
            let sent = format!("connection {i} ").repeat(5000);
            s.write_all(sent.as_bytes()).await.expect("write");
            s.shutdown().await.expect("shutdown");
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.expect("read");
            assert_eq!(got, sent.to_ascii_uppercase().into_bytes(), "connection {i}");
        });
        futures_util::future::join_all(clients).await;
        let stats = stats.lock().expect("stats").clone();
        assert_eq!(stats, StreamStats { connections: 8, connection_errors: 0, error: None });
    }

    #[tokio::test]
    async fn a_malformed_frame_from_the_relay_closes_every_connection_and_is_recorded() {
        let (to_relay, _relay_in) = tokio::io::duplex(1 << 16);
        let (mut relay_out, from_relay) = tokio::io::duplex(1 << 16);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let local = listener.local_addr().expect("addr");
        let stats = Arc::new(Mutex::new(StreamStats::default()));
        let task = tokio::spawn(serve(
            listener,
            FrameReader::new(from_relay, Direction::ToRunner),
            to_relay,
            Arc::clone(&stats),
        ));
        let mut client = tokio::net::TcpStream::connect(local).await.expect("connect");
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut wire = Vec::new();
        Frame::Data(1, b"HTTP/1.1 200".to_vec()).encode(&mut wire);
        wire.extend_from_slice(&[7, 0, 0, 0, 1, 0, 0, 0, 0]); // kind 7 does not exist
        relay_out.write_all(&wire).await.expect("write");
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("the stream ends").expect("join");
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut got)).await.expect("closed");
        assert!(got.len() <= b"HTTP/1.1 200".len(), "{got:?}");
        let stats = stats.lock().expect("stats").clone();
        let error = stats.error.expect("the failure is recorded");
        assert!(error.contains("unknown kind 7"), "{error}");
        assert!(tokio::net::TcpStream::connect(local).await.is_err(), "the listener is closed");
    }

    #[tokio::test]
    async fn a_refused_connection_is_counted_and_reset() {
        // A target that accepts the probe, then nothing: the relay's connect fails.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr");
        let (to_relay, relay_in) = tokio::io::duplex(1 << 16);
        let (relay_out, from_relay) = tokio::io::duplex(1 << 16);
        tokio::spawn(mux::serve(relay_in, relay_out, target, Duration::from_secs(2)));
        let mut reader = FrameReader::new(from_relay, Direction::ToRunner);
        wait_ready(&mut reader).await.expect("ready");
        drop(listener);
        let local_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let local = local_listener.local_addr().expect("addr");
        let stats = Arc::new(Mutex::new(StreamStats::default()));
        tokio::spawn(serve(local_listener, reader, to_relay, Arc::clone(&stats)));
        let mut client = tokio::net::TcpStream::connect(local).await.expect("connect");
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut got)).await.expect("closed");
        assert!(got.is_empty());
        let stats = stats.lock().expect("stats").clone();
        assert_eq!((stats.connections, stats.connection_errors, stats.error), (1, 1, None));
    }
}
