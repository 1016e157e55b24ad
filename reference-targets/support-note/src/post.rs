//! A minimal HTTP/1.1 POST for the fixture's outbound tools (`send_report`, and forwarding
//! collector records with `--forward-to`). Numeric hosts only: the fixture runs FROM scratch
//! as a static binary, where name lookup is unavailable; the runner hands it addresses.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Deadline for one request.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// `http://IP:PORT/path` → (address, host header, path).
fn parse(url: &str) -> Result<(SocketAddr, String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("only http:// URLs are supported, not {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let with_port = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr: SocketAddr = with_port
        .parse()
        .map_err(|_| format!("the fixture resolves no host names; use a numeric address in {url:?}"))?;
    Ok((addr, authority.to_owned(), path.to_owned()))
}

/// POST `body` to `url`; the response status.
pub async fn post(url: &str, content_type: &str, body: &str) -> Result<u16, String> {
    let (addr, host, path) = parse(url)?;
    let request = async {
        let mut stream =
            tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("failed to connect to {addr}: {e}"))?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.map_err(|e| format!("failed to send to {addr}: {e}"))?;
        stream.write_all(body.as_bytes()).await.map_err(|e| format!("failed to send to {addr}: {e}"))?;
        let mut reply = vec![0u8; 256];
        let n = stream.read(&mut reply).await.map_err(|e| format!("failed to read the answer of {addr}: {e}"))?;
        let line = String::from_utf8_lossy(&reply[..n]);
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("{addr} did not answer HTTP"))
    };
    tokio::time::timeout(TIMEOUT, request)
        .await
        .map_err(|_| format!("{url} did not answer within {} s", TIMEOUT.as_secs()))?
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_numeric_urls_only() {
        let (addr, host, path) = parse("http://10.0.0.2:8080/in?x=1").unwrap();
        assert_eq!(addr.to_string(), "10.0.0.2:8080");
        assert_eq!(host, "10.0.0.2:8080");
        assert_eq!(path, "/in?x=1");
        assert_eq!(parse("http://127.0.0.1").unwrap().0.port(), 80);
        assert!(parse("http://sink:8080/").is_err());
        assert!(parse("https://10.0.0.2/").is_err());
    }
}
