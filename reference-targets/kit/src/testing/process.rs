//! Built binaries under plain `std::process` (no async runtime), and a plain HTTP/1.1 client.

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::TcpStream,
    path::Path,
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    sync::mpsc::{self, Receiver},
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;

/// How long a binary gets to print a line or exit, and a response to arrive.
const WAIT: Duration = Duration::from_secs(10);

/// A built binary run by a test: stdin piped, stdout read line by line onto a channel (by a
/// thread, so the child never blocks on a full pipe), stderr discarded. Killed and reaped
/// when dropped.
#[derive(Debug)]
pub struct RunningBinary {
    /// The process.
    pub child: Child,
    /// Its stdin, until a test drops it (the end of stdin).
    pub stdin: Option<ChildStdin>,
    /// Its stdout lines, in order; disconnected once stdout closes.
    pub stdout: Receiver<String>,
}

impl RunningBinary {
    /// Spawns `command` (the binary with its flags set) with that stdio.
    pub fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the binary");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { stdin: child.stdin.take(), child, stdout: lines }
    }

    /// Waits (a bounded time) for the process to exit and returns its status.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the process did not exit");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `command` (a binary that binds `127.0.0.1:0` by default) as a [`RunningBinary`]
/// and reads its ready line, which must be exactly `{"listening":"ADDR"}` with a loopback
/// `ADDR` and a port other than 0. Returns the running binary and `ADDR`.
pub fn spawn_listening(command: &mut Command) -> (RunningBinary, String) {
    let running = RunningBinary::spawn(command);
    let ready = running.stdout.recv_timeout(WAIT).expect("the ready line");
    let value: Value = serde_json::from_str(&ready).expect("the ready line is JSON");
    let addr = value["listening"].as_str().expect("a listening address").to_owned();
    assert_eq!(ready, format!(r#"{{"listening":"{addr}"}}"#), "exactly the ready line");
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
    (running, addr)
}

/// The lines of a JSON-lines file (e.g. a request log), each parsed; none when the file
/// does not exist (yet).
pub fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

/// A response as it came off the socket.
#[derive(Debug)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The header lines as (lowercase name, trimmed value), in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
    /// The body arrived whole: its `Content-Length`, or the chunked terminator.
    pub complete: bool,
    /// When the head arrived, from the request's start.
    pub head_after: Duration,
    /// When the connection ended, from the request's start.
    pub done_after: Duration,
}

impl HttpResponse {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request to `addr` on a fresh connection (`Connection: close`, and a JSON
/// `Content-Type` with a `Content-Length` when `body` is not empty), read to the end. A
/// connection reset after the head (e.g. a scripted cut) ends the body; a missing head
/// panics.
pub fn http_request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    if !body.is_empty() {
        write!(head, "content-type: application/json\r\ncontent-length: {}\r\n", body.len()).expect("format");
    }
    for (name, value) in headers {
        write!(head, "{name}: {value}\r\n").expect("format");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    stream.write_all(body).expect("send the body");

    let mut raw = Vec::new();
    let mut head_after = None;
    let mut read_error = None;
    let mut buf = [0_u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                // A reset, e.g. from a scripted cut.
                read_error = Some(error);
                break;
            }
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if head_after.is_none() && raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    head_after = Some(started.elapsed());
                }
            }
        }
    }
    let done_after = started.elapsed();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
        panic!("no response head for {method} {path}: {:?} after {read_error:?}", String::from_utf8_lossy(&raw))
    });
    let head = String::from_utf8(raw[..split].to_vec()).expect("a UTF-8 head");
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status code in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap_or_else(|| panic!("not a header line: {l:?}"));
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let find = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let (body, complete) = if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(rest)
    } else if let Some(length) = find("content-length") {
        let length: usize = length.parse().expect("a numeric Content-Length");
        (rest.to_vec(), rest.len() == length)
    } else {
        (rest.to_vec(), true)
    };
    HttpResponse { status, headers, body, complete, head_after: head_after.unwrap_or(done_after), done_after }
}

/// Decodes a chunked body; `true` when the terminating chunk arrived.
fn dechunk(mut raw: &[u8]) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else { return (body, false) };
        let size_text = std::str::from_utf8(&raw[..end]).expect("a UTF-8 chunk size");
        let size = usize::from_str_radix(size_text.trim(), 16).expect("a hex chunk size");
        raw = &raw[end + 2..];
        if size == 0 {
            return (body, raw.starts_with(b"\r\n"));
        }
        if raw.len() < size + 2 {
            body.extend_from_slice(&raw[..raw.len().min(size)]);
            return (body, false);
        }
        body.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::dechunk;

    #[test]
    fn chunked_bodies_are_decoded_and_their_end_seen() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), (b"abcde".to_vec(), true));
        assert_eq!(dechunk(b"3\r\nabc\r\n"), (b"abc".to_vec(), false));
        assert_eq!(dechunk(b"5\r\nab"), (b"ab".to_vec(), false));
    }
}
