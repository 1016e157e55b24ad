//! `http_get`'s client: one HTTP/1.0 GET over a plain TCP socket within [`DEADLINE`], so a
//! fetch is an effect a listener outside the server can see.
//!
//! `--resolve HOST=BASEURL` sends a fetch whose host is HOST to BASEURL instead, with the
//! fetched path and query appended (an `https://` URL of a resolved host is fetched over
//! plain http there). Any other URL must be `http://`; its host name goes through the
//! system resolver.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};
use url::Url;

/// Deadline of one fetch, from connecting to the last byte read.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Body bytes returned (and read).
pub const BODY_BYTES: usize = 2048;
/// Most bytes of status line and headers read.
const HEAD_BYTES: usize = 16 * 1024;

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("only http:// URLs are supported (got {0}://)")]
    Scheme(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("could not connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("connection to {0} failed: {1}")]
    Io(String, std::io::Error),
    #[error("{0} sent no HTTP answer")]
    NotHttp(String),
    #[error("{0} did not answer within {1} s")]
    Timeout(String, u64),
}

/// A fetched answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub status: u16,
    /// The first [`BODY_BYTES`] of the body, lossy UTF-8.
    pub body: String,
}

/// The client with its `--resolve` table.
#[derive(Debug, Default)]
pub struct Client {
    resolve: Vec<(String, Url)>,
}

impl Client {
    pub fn new(resolve: Vec<(String, Url)>) -> Self {
        Self { resolve }
    }

    /// The URL actually requested for `url`.
    pub fn route(&self, url: &Url) -> Result<Url, FetchError> {
        let host = url.host_str().ok_or(FetchError::NoHost)?;
        if let Some((_, base)) = self.resolve.iter().find(|(name, _)| name.eq_ignore_ascii_case(host)) {
            let mut routed = base.clone();
            routed.set_path(&format!("{}{}", base.path().trim_end_matches('/'), url.path()));
            routed.set_query(url.query());
            return Ok(routed);
        }
        if url.scheme() != "http" {
            return Err(FetchError::Scheme(url.scheme().to_owned()));
        }
        let mut plain = url.clone();
        plain.set_fragment(None);
        Ok(plain)
    }

    /// GETs `url` (after `--resolve`).
    pub async fn get(&self, url: &Url) -> Result<Page, FetchError> {
        let target = self.route(url)?;
        let host = target.host_str().ok_or(FetchError::NoHost)?.to_owned();
        let port = target.port().unwrap_or(80);
        let authority = format!("{host}:{port}");
        tokio::time::timeout(DEADLINE, exchange(&target, &authority))
            .await
            .unwrap_or_else(|_| Err(FetchError::Timeout(authority.clone(), DEADLINE.as_secs())))
    }
}

/// Sends the request to `authority` and reads the answer.
async fn exchange(target: &Url, authority: &str) -> Result<Page, FetchError> {
    // `host:port`: the socket address parser takes `[v6]:port`, names are looked up.
    let mut stream = TcpStream::connect(authority).await.map_err(|e| FetchError::Connect(authority.to_owned(), e))?;
    let mut path = target.path().to_owned();
    if let Some(query) = target.query() {
        path = format!("{path}?{query}");
    }
    let request = format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\nUser-Agent: elengtis-inbox\r\n\r\n");
    let io = |e| FetchError::Io(authority.to_owned(), e);
    stream.write_all(request.as_bytes()).await.map_err(io)?;

    let mut data = Vec::new();
    let mut buf = [0_u8; 4096];
    let mut body_at = None;
    while body_at.is_none_or(|at| data.len() < at + BODY_BYTES) {
        let n = stream.read(&mut buf).await.map_err(io)?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        if body_at.is_none() {
            body_at = data.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
            if body_at.is_none() && data.len() > HEAD_BYTES {
                return Err(FetchError::NotHttp(authority.to_owned()));
            }
        }
    }
    let at = body_at.ok_or_else(|| FetchError::NotHttp(authority.to_owned()))?;
    let head = String::from_utf8_lossy(&data[..at]);
    let mut words = head.split_whitespace();
    let status = match (words.next(), words.next().and_then(|code| code.parse::<u16>().ok())) {
        (Some(version), Some(status)) if version.starts_with("HTTP/") => status,
        _ => return Err(FetchError::NotHttp(authority.to_owned())),
    };
    let end = data.len().min(at + BODY_BYTES);
    Ok(Page { status, body: String::from_utf8_lossy(&data[at..end]).into_owned() })
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::{Client, FetchError};

    fn url(text: &str) -> Url {
        Url::parse(text).expect("valid URL")
    }

    #[test]
    fn resolved_hosts_go_to_their_base() {
        let client = Client::new(vec![("attacker.example.com".to_owned(), url("http://127.0.0.1:9/sink/"))]);
        for (asked, routed) in [
            ("http://attacker.example.com/x?d=1#frag", "http://127.0.0.1:9/sink/x?d=1"),
            ("https://ATTACKER.example.com:8443/", "http://127.0.0.1:9/sink/"),
            ("http://127.0.0.2:8080/a#b", "http://127.0.0.2:8080/a"),
        ] {
            assert_eq!(client.route(&url(asked)).map(String::from).ok().as_deref(), Some(routed), "{asked}");
        }
        assert!(matches!(client.route(&url("https://example.com/")), Err(FetchError::Scheme(s)) if s == "https"));
        assert!(matches!(client.route(&url("file:///etc/passwd")), Err(FetchError::NoHost)));
    }
}
