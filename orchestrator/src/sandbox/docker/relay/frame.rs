//! The relay's frame format: every connection of a trial, carried over the one attach stream
//! of the relay container (its stdin from the runner, its stdout to the runner).
//!
//! A frame is a 9-byte header — kind (1 byte), connection id (u32, big-endian), payload
//! length (u32, big-endian) — and the payload:
//!
//! | kind | name | direction | id | payload |
//! |---|---|---|---|---|
//! | 1 | `open` | runner → relay | ≥ 1, above every earlier one | empty |
//! | 2 | `data` | both | ≥ 1 | 1 ..= [`MAX_DATA`] bytes |
//! | 3 | `close` | both | ≥ 1 | empty: the sender writes no more on this connection |
//! | 4 | `error` | both | ≥ 1: this connection is aborted; 0 (relay → runner): the relay failed | UTF-8 reason, ≤ [`MAX_REASON`] bytes |
//! | 5 | `ready` | relay → runner | 0 | empty: the target accepts connections |
//!
//! Decoding is strict: an unknown kind, a kind sent the wrong way, an id or payload its kind
//! does not allow, or a stream that ends inside a frame is an error that names the frame;
//! the stream cannot be resynchronised after one, so the side that reads it closes every
//! connection and reports the error.

use std::fmt;

/// Largest `data` payload.
pub const MAX_DATA: usize = 64 * 1024;
/// Largest `error` reason.
pub const MAX_REASON: usize = 1024;
/// Header bytes of every frame.
pub const HEADER: usize = 9;

/// Which way a stream of frames flows (what the reader accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the runner to the relay (the relay container's stdin).
    ToRelay,
    /// From the relay to the runner (the relay container's stdout).
    ToRunner,
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Open connection `id` to the relay's target (runner → relay).
    Open(u32),
    /// Bytes on connection `id`.
    Data(u32, Vec<u8>),
    /// The sender writes no more on connection `id`.
    Close(u32),
    /// Connection `id` is aborted (id 0, from the relay: the relay itself failed).
    Error(u32, String),
    /// The relay's target accepts connections (relay → runner).
    Ready,
}

const OPEN: u8 = 1;
const DATA: u8 = 2;
const CLOSE: u8 = 3;
const ERROR: u8 = 4;
const READY: u8 = 5;

/// Why a frame stream cannot be read further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The kind byte is none of the five.
    #[error("failed to decode a relay frame: unknown kind {kind} (connection {id})")]
    UnknownKind {
        /// The kind byte.
        kind: u8,
        /// The connection id of the header.
        id: u32,
    },
    /// A kind that may not flow this way.
    #[error("failed to decode a relay frame: `{kind}` may not be sent {direction}")]
    WrongDirection {
        /// The kind's name.
        kind: &'static str,
        /// Where it was going.
        direction: &'static str,
    },
    /// An id the kind does not allow.
    #[error("failed to decode a relay frame: `{kind}` with connection id {id} ({rule})")]
    BadId {
        /// The kind's name.
        kind: &'static str,
        /// The id.
        id: u32,
        /// What the kind requires.
        rule: &'static str,
    },
    /// A payload length the kind does not allow.
    #[error("failed to decode a relay frame: `{kind}` on connection {id} with a payload of {len} bytes ({rule})")]
    BadLength {
        /// The kind's name.
        kind: &'static str,
        /// The connection id.
        id: u32,
        /// The declared length.
        len: u64,
        /// What the kind allows.
        rule: &'static str,
    },
    /// An `error` reason that is not UTF-8.
    #[error("failed to decode a relay frame: the `error` reason on connection {id} is not UTF-8")]
    Reason {
        /// The connection id.
        id: u32,
    },
    /// The stream ended inside a frame.
    #[error("failed to decode a relay frame: the stream ended {have} bytes into a frame of {need}")]
    Truncated {
        /// Bytes of the frame received.
        have: usize,
        /// Bytes the frame needs (header only, when the header itself was cut).
        need: usize,
    },
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::ToRelay => "to the relay",
            Direction::ToRunner => "to the runner",
        }
    }
}

impl Frame {
    fn kind(&self) -> u8 {
        match self {
            Frame::Open(_) => OPEN,
            Frame::Data(..) => DATA,
            Frame::Close(_) => CLOSE,
            Frame::Error(..) => ERROR,
            Frame::Ready => READY,
        }
    }

    /// The connection id (0 for `ready` and a relay-wide `error`).
    pub fn id(&self) -> u32 {
        match self {
            Frame::Open(id) | Frame::Data(id, _) | Frame::Close(id) | Frame::Error(id, _) => *id,
            Frame::Ready => 0,
        }
    }

    /// Append the frame's bytes to `out`. A reason longer than [`MAX_REASON`] is cut (at a
    /// character boundary); a `data` payload must be 1 ..= [`MAX_DATA`] bytes (split larger
    /// writes with [`Frame::data`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let payload: &[u8] = match self {
            Frame::Data(_, bytes) => bytes,
            Frame::Error(_, reason) => cut(reason, MAX_REASON).as_bytes(),
            Frame::Open(_) | Frame::Close(_) | Frame::Ready => &[],
        };
        out.push(self.kind());
        out.extend_from_slice(&self.id().to_be_bytes());
        out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(payload);
    }

    /// `bytes` as `data` frames of at most [`MAX_DATA`] bytes each (none for no bytes).
    pub fn data(id: u32, bytes: &[u8]) -> impl Iterator<Item = Frame> + '_ {
        bytes.chunks(MAX_DATA).map(move |chunk| Frame::Data(id, chunk.to_vec()))
    }

    /// Decode the frame at the start of `bytes`, flowing `direction`: the frame and its
    /// length, `None` when `bytes` holds only part of it, or the error that ends the stream.
    pub fn decode(bytes: &[u8], direction: Direction) -> Result<Option<(Frame, usize)>, FrameError> {
        let Some(header) = bytes.get(..HEADER) else { return Ok(None) };
        let kind = header[0];
        let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
        let (name, max, min, id_rule, allowed) = match kind {
            OPEN => ("open", 0, 0, IdRule::Connection, direction == Direction::ToRelay),
            DATA => ("data", MAX_DATA, 1, IdRule::Connection, true),
            CLOSE => ("close", 0, 0, IdRule::Connection, true),
            ERROR => (
                "error",
                MAX_REASON,
                0,
                if direction == Direction::ToRunner { IdRule::Any } else { IdRule::Connection },
                true,
            ),
            READY => ("ready", 0, 0, IdRule::Zero, direction == Direction::ToRunner),
            kind => return Err(FrameError::UnknownKind { kind, id }),
        };
        if !allowed {
            return Err(FrameError::WrongDirection { kind: name, direction: direction.name() });
        }
        match id_rule {
            IdRule::Connection if id == 0 => {
                return Err(FrameError::BadId { kind: name, id, rule: "a connection id is at least 1" });
            }
            IdRule::Zero if id != 0 => return Err(FrameError::BadId { kind: name, id, rule: "it is always 0" }),
            _ => {}
        }
        let len_usize = usize::try_from(len).unwrap_or(usize::MAX);
        if len_usize > max || len_usize < min {
            let rule = match kind {
                DATA => "1 to 65536 bytes",
                ERROR => "at most 1024 bytes",
                _ => "it carries none",
            };
            return Err(FrameError::BadLength { kind: name, id, len: u64::from(len), rule });
        }
        let Some(payload) = bytes.get(HEADER..HEADER + len_usize) else { return Ok(None) };
        let frame = match kind {
            OPEN => Frame::Open(id),
            DATA => Frame::Data(id, payload.to_vec()),
            CLOSE => Frame::Close(id),
            ERROR => Frame::Error(id, String::from_utf8(payload.to_vec()).map_err(|_| FrameError::Reason { id })?),
            _ => Frame::Ready,
        };
        Ok(Some((frame, HEADER + len_usize)))
    }
}

enum IdRule {
    Connection,
    Zero,
    Any,
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Frame::Open(id) => write!(f, "open {id}"),
            Frame::Data(id, bytes) => write!(f, "data {id} ({} bytes)", bytes.len()),
            Frame::Close(id) => write!(f, "close {id}"),
            Frame::Error(id, reason) => write!(f, "error {id}: {reason}"),
            Frame::Ready => f.write_str("ready"),
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Reads frames from a byte stream (the relay's stdin, or its stdout on the runner's side).
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    direction: Direction,
    buf: Vec<u8>,
}

impl<R: tokio::io::AsyncRead + Unpin> FrameReader<R> {
    /// Frames flowing `direction` from `inner`.
    pub fn new(inner: R, direction: Direction) -> FrameReader<R> {
        FrameReader { inner, direction, buf: Vec::with_capacity(HEADER + MAX_DATA) }
    }

    /// The next frame; `Ok(None)` when the stream ends between frames. A read error is
    /// returned as `Err(Ok(io))`, a malformed stream as `Err(Err(frame))`.
    pub async fn next(&mut self) -> Result<Option<Frame>, ReadError> {
        use tokio::io::AsyncReadExt as _;
        loop {
            if let Some((frame, used)) = Frame::decode(&self.buf, self.direction).map_err(ReadError::Frame)? {
                self.buf.drain(..used);
                return Ok(Some(frame));
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.inner.read(&mut chunk).await.map_err(ReadError::Io)?;
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let need = if self.buf.len() < HEADER {
                    HEADER
                } else {
                    HEADER + u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) as usize
                };
                return Err(ReadError::Frame(FrameError::Truncated { have: self.buf.len(), need }));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Why [`FrameReader::next`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The stream could not be read.
    #[error("failed to read the relay stream: {0}")]
    Io(std::io::Error),
    /// The stream is malformed.
    #[error(transparent)]
    Frame(FrameError),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bytes(frame: &Frame) -> Vec<u8> {
        let mut out = Vec::new();
        frame.encode(&mut out);
        out
    }

    fn header(kind: u8, id: u32, len: u32) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out
    }

    #[test]
    fn every_kind_round_trips_in_its_direction() {
        let to_relay = [
            Frame::Open(1),
            Frame::Data(7, b"GET / HTTP/1.1\r\n".to_vec()),
            Frame::Close(7),
            Frame::Error(3, "reset".into()),
        ];
        for frame in to_relay {
            assert_eq!(
                Frame::decode(&bytes(&frame), Direction::ToRelay),
                Ok(Some((frame.clone(), bytes(&frame).len())))
            );
        }
        let to_runner = [Frame::Ready, Frame::Error(0, "port 8000 did not accept connections".into()), Frame::Close(2)];
        for frame in to_runner {
            assert_eq!(
                Frame::decode(&bytes(&frame), Direction::ToRunner),
                Ok(Some((frame.clone(), bytes(&frame).len())))
            );
        }
    }

    #[test]
    fn each_malformed_frame_is_refused_with_what_is_wrong() {
        let cases: Vec<(Vec<u8>, Direction, &str)> = vec![
            (header(9, 1, 0), Direction::ToRelay, "unknown kind 9"),
            (header(0, 0, 0), Direction::ToRunner, "unknown kind 0"),
            (header(OPEN, 1, 0), Direction::ToRunner, "`open` may not be sent to the runner"),
            (header(READY, 0, 0), Direction::ToRelay, "`ready` may not be sent to the relay"),
            (header(OPEN, 0, 0), Direction::ToRelay, "`open` with connection id 0"),
            (header(DATA, 0, 1), Direction::ToRunner, "`data` with connection id 0"),
            (header(CLOSE, 0, 0), Direction::ToRelay, "`close` with connection id 0"),
            (header(ERROR, 0, 0), Direction::ToRelay, "`error` with connection id 0"),
            (header(READY, 4, 0), Direction::ToRunner, "`ready` with connection id 4"),
            (header(DATA, 1, 0), Direction::ToRelay, "payload of 0 bytes (1 to 65536 bytes)"),
            (header(DATA, 1, 65537), Direction::ToRelay, "payload of 65537 bytes"),
            (header(DATA, 1, u32::MAX), Direction::ToRunner, "payload of 4294967295 bytes"),
            (
                header(OPEN, 1, 1),
                Direction::ToRelay,
                "`open` on connection 1 with a payload of 1 bytes (it carries none)",
            ),
            (header(CLOSE, 2, 5), Direction::ToRunner, "`close` on connection 2"),
            (header(ERROR, 2, 1025), Direction::ToRunner, "at most 1024 bytes"),
            ([header(ERROR, 2, 2), vec![0xff, 0xfe]].concat(), Direction::ToRunner, "not UTF-8"),
        ];
        for (input, direction, wanted) in cases {
            let error = Frame::decode(&input, direction).expect_err(wanted).to_string();
            assert!(
                error.starts_with("failed to decode a relay frame: ") && error.contains(wanted),
                "{wanted}: {error}"
            );
        }
    }

    #[test]
    fn a_cut_reason_stays_utf8_and_large_writes_are_split() {
        let reason = "é".repeat(MAX_REASON);
        let encoded = bytes(&Frame::Error(1, reason));
        let Ok(Some((Frame::Error(1, decoded), _))) = Frame::decode(&encoded, Direction::ToRunner) else {
            panic!("a cut reason must decode")
        };
        assert!(decoded.len() <= MAX_REASON && decoded.chars().all(|c| c == 'é'));
        let big = vec![7u8; 2 * MAX_DATA + 1];
        let sizes: Vec<usize> = Frame::data(5, &big)
            .map(|f| match f {
                Frame::Data(5, b) => b.len(),
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(sizes, [MAX_DATA, MAX_DATA, 1]);
    }

    #[tokio::test]
    async fn a_stream_cut_inside_a_frame_is_an_error_and_one_cut_between_frames_is_the_end() {
        let mut whole = bytes(&Frame::Open(1));
        whole.extend(bytes(&Frame::Data(1, b"hello".to_vec())));
        let mut reader = FrameReader::new(&whole[..], Direction::ToRelay);
        assert_eq!(reader.next().await.ok(), Some(Some(Frame::Open(1))));
        assert_eq!(reader.next().await.ok(), Some(Some(Frame::Data(1, b"hello".to_vec()))));
        assert_eq!(reader.next().await.ok(), Some(None));
        // Cut anywhere but at a frame boundary: the frames before it, then `Truncated`.
        for cut in 1..whole.len() {
            let mut reader = FrameReader::new(&whole[..cut], Direction::ToRelay);
            let mut last = reader.next().await;
            while let Ok(Some(_)) = last {
                last = reader.next().await;
            }
            if cut == HEADER {
                assert!(matches!(last, Ok(None)), "cut at {cut}: {last:?}");
            } else {
                assert!(matches!(last, Err(ReadError::Frame(FrameError::Truncated { .. }))), "cut at {cut}: {last:?}");
            }
        }
    }

    fn frame_to_relay() -> impl Strategy<Value = Frame> {
        prop_oneof![
            (1..=u32::MAX).prop_map(Frame::Open),
            ((1..=u32::MAX), proptest::collection::vec(any::<u8>(), 1..300)).prop_map(|(id, b)| Frame::Data(id, b)),
            (1..=u32::MAX).prop_map(Frame::Close),
            ((1..=u32::MAX), ".{0,40}").prop_map(|(id, r)| Frame::Error(id, r)),
        ]
    }

    proptest! {
        /// Any sequence of valid frames, encoded back to back and fed in chunks of any
        /// size, decodes to the same sequence.
        #[test]
        fn encoded_frames_decode_to_themselves_in_any_chunking(
            frames in proptest::collection::vec(frame_to_relay(), 0..20),
            chunk in 1usize..64,
        ) {
            let mut wire = Vec::new();
            for f in &frames {
                f.encode(&mut wire);
            }
            let mut buf = Vec::new();
            let mut decoded = Vec::new();
            for piece in wire.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some((frame, used)) = Frame::decode(&buf, Direction::ToRelay).expect("valid frames") {
                    buf.drain(..used);
                    decoded.push(frame);
                }
            }
            prop_assert!(buf.is_empty());
            prop_assert_eq!(decoded, frames);
        }

        /// Arbitrary bytes never panic the decoder, and whatever it accepts re-encodes to
        /// exactly the bytes it consumed (no frame has two encodings).
        #[test]
        fn arbitrary_bytes_decode_strictly(input in proptest::collection::vec(any::<u8>(), 0..64), to_relay in any::<bool>()) {
            let direction = if to_relay { Direction::ToRelay } else { Direction::ToRunner };
            if let Ok(Some((frame, used))) = Frame::decode(&input, direction) {
                prop_assert_eq!(bytes(&frame), input[..used].to_vec());
            }
        }

        /// A valid frame with one byte changed either decodes to a frame that re-encodes to
        /// the changed bytes, or is refused; never anything else.
        #[test]
        fn a_mutated_frame_is_refused_or_decodes_exactly(frame in frame_to_relay(), at in any::<prop::sample::Index>(), to in any::<u8>()) {
            let mut wire = bytes(&frame);
            let i = at.index(wire.len());
            wire[i] = to;
            // Refused is fine; accepted must be exact.
            if let Ok(Some((decoded, used))) = Frame::decode(&wire, Direction::ToRelay) {
                prop_assert_eq!(bytes(&decoded), wire[..used].to_vec());
            }
        }
    }
}
