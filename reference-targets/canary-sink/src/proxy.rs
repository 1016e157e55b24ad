//! Egress-proxy mode (`--proxy-upstream IP:PORT --allow HOST…`): the trial network's only
//! way to the canary sink, forwarding a request only when its destination host is on the
//! allowlist.
//!
//! The runner places this process on two internal networks: the target's (where the hosts it
//! intercepts resolve to it) and a second one shared only with the sink. The target has no
//! route to the sink but through here. Every request is decided and recorded:
//!
//! - **The destination** is the host of an absolute-form request target (a forward-proxy
//!   request, `GET http://host/path`) or, for an origin-form request (`GET /path`, a client
//!   that resolved the host to this gateway), the `Host` header. When both are present they
//!   must name the same host; several `Host` headers, user info (`user@host`), a malformed
//!   authority or no destination at all are refused. `CONNECT` is refused: a tunnel would
//!   hide the request this proxy must see.
//! - **Matching is exact**: the host is compared as written, lowercased and without one
//!   trailing dot and the port, against each allowlist entry treated the same way. No
//!   suffix or wildcard matching (`example.com.attacker.example.com` is not `example.com`),
//!   no name resolution, no numeric normalisation (`2130706433` is not `127.0.0.1`): a
//!   different spelling is a different, unlisted host — the fail-closed direction.
//! - **Allowed** requests go to the one upstream (the sink) whatever the host names — this
//!   proxy never connects anywhere else — with method, path and query, headers (minus
//!   hop-by-hop ones) and body preserved, `Host` as received, `X-Forwarded-Host` set to the
//!   decided host and `Via` added; the upstream's status and body come back. A body larger
//!   than `--max-body` is refused (413) rather than forwarded cut.
//! - **Refused** requests are answered `403` with a `refused by the egress proxy: …` text and
//!   never forwarded.
//!
//! Each request is one stdout record (as the sink's, see [`crate::record::RequestRecord`])
//! with an `egress` object: the decision, the host, the form, the reason and the upstream's
//! status.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    sync::mpsc,
};

use crate::{
    http::{Remote, headers, read_capped},
    record::{self, EgressRecord, Recorder, RequestRecord},
};

/// Deadline of one forwarded exchange with the upstream: connect, send, read the answer.
pub const FORWARD_DEADLINE: Duration = Duration::from_secs(5);
/// Most bytes of the upstream's answer read (head and body).
const ANSWER_CAP: usize = 80 * 1024;
/// Headers never forwarded (hop-by-hop, or set by the proxy).
const DROPPED_HEADERS: [&str; 12] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "x-forwarded-host",
];

/// Where allowed requests go and which hosts are allowed.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The sink's address on the network shared only with the proxy.
    pub addr: SocketAddr,
    /// Allowed hosts, normalised ([`normalise_host`]).
    pub allow: Arc<Vec<String>>,
}

/// The router: every method on every path goes to [`receive`].
pub fn app(recorder: Arc<Recorder>, max_body: usize, alive: mpsc::Sender<()>, upstream: Upstream) -> Router {
    Router::new().fallback(receive).with_state(Proxy { recorder, max_body, upstream, _alive: alive })
}

#[derive(Debug, Clone)]
struct Proxy {
    recorder: Arc<Recorder>,
    max_body: usize,
    upstream: Upstream,
    _alive: mpsc::Sender<()>,
}

/// What the proxy does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward it: the destination is on the allowlist.
    Allow {
        /// The normalised host.
        host: String,
        /// The port named, if any.
        port: Option<u16>,
        /// `absolute` or `host_header`.
        form: &'static str,
    },
    /// Refuse it (403).
    Refuse {
        /// The normalised host, when one could be parsed.
        host: Option<String>,
        /// The port named, if any.
        port: Option<u16>,
        /// `absolute` or `host_header`, when known.
        form: Option<&'static str>,
        /// Why.
        reason: String,
    },
}

/// A host as compared: ASCII-lowercased, one trailing dot removed.
pub fn normalise_host(host: &str) -> String {
    let lower = host.to_ascii_lowercase();
    lower.strip_suffix('.').map(str::to_owned).unwrap_or(lower)
}

/// Splits an authority (`host`, `host:port`, `[v6]`, `[v6]:port`) into a normalised host and
/// its port. User info, empty hosts, paths and characters outside host syntax are errors.
pub fn parse_authority(authority: &str) -> Result<(String, Option<u16>), String> {
    let bad = |why: &str| Err(format!("malformed destination `{}`: {why}", authority.escape_debug()));
    if authority.is_empty() {
        return bad("empty");
    }
    if authority.contains('@') {
        return bad("user info is not accepted");
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else { return bad("unclosed `[`") };
        if inner.is_empty() || !inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return bad("not an IPv6 address");
        }
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(p) => Some(p),
                None => return bad("text after `]`"),
            },
        };
        (format!("[{}]", inner.to_ascii_lowercase()), port)
    } else {
        let mut parts = authority.splitn(3, ':');
        let host = parts.next().unwrap_or_default();
        let port = parts.next();
        if parts.next().is_some() {
            return bad("more than one `:`");
        }
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_') {
            return bad("not a host name or address");
        }
        (normalise_host(host), port)
    };
    if host.is_empty() || host.starts_with('.') || host.contains("..") {
        return bad("empty label");
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if !p.starts_with('+') => Some(n),
            _ => return bad("not a port number"),
        },
    };
    Ok((host, port))
}

/// Decides a request from its method, the authority of its request target (absolute form;
/// `None` for origin form), its `Host` header values and the normalised allowlist.
pub fn decide(method: &str, target_authority: Option<&str>, host_headers: &[&str], allow: &[String]) -> Decision {
    let refuse = |host: Option<String>, port, form, reason: String| Decision::Refuse { host, port, form, reason };
    if method.eq_ignore_ascii_case("CONNECT") {
        return refuse(None, None, None, "CONNECT tunnels are not forwarded: the proxy must see each request".into());
    }
    if host_headers.len() > 1 {
        return refuse(None, None, None, format!("{} Host headers", host_headers.len()));
    }
    let header = match host_headers.first().map(|h| parse_authority(h)).transpose() {
        Ok(header) => header,
        Err(e) => return refuse(None, None, None, format!("Host header: {e}")),
    };
    let (host, port, form) = match target_authority {
        Some(authority) => match parse_authority(authority) {
            Ok((host, port)) => {
                if let Some((header_host, _)) = &header
                    && *header_host != host
                {
                    return refuse(
                        Some(host.clone()),
                        port,
                        Some("absolute"),
                        format!("the request target names `{host}` but the Host header names `{header_host}`"),
                    );
                }
                (host, port, "absolute")
            }
            Err(e) => return refuse(None, None, Some("absolute"), format!("request target: {e}")),
        },
        None => match header {
            Some((host, port)) => (host, port, "host_header"),
            None => {
                return refuse(None, None, None, "no destination: neither an absolute target nor a Host header".into());
            }
        },
    };
    if allow.contains(&host) {
        Decision::Allow { host, port, form }
    } else {
        let reason = format!("`{host}` is not on the egress allowlist");
        refuse(Some(host), port, Some(form), reason)
    }
}

async fn receive(
    State(proxy): State<Proxy>,
    ConnectInfo(Remote(remote)): ConnectInfo<Remote>,
    request: Request,
) -> Response {
    let time = record::now();
    let (parts, body) = request.into_parts();
    // As in the sink: a task of its own, so a request cut mid-body is still recorded.
    let task = tokio::spawn(async move {
        let body = read_capped(body, proxy.max_body).await;
        let hosts: Vec<&str> =
            parts.headers.get_all(header::HOST).iter().map(|v| v.to_str().unwrap_or("\u{fffd}")).collect();
        let authority = parts.uri.authority().map(|a| a.as_str());
        let decision = decide(parts.method.as_str(), authority, &hosts, &proxy.upstream.allow);
        let (response, egress) = match decision {
            Decision::Refuse { host, port, form, reason } => {
                let text = format!("refused by the egress proxy: {reason}\n");
                let egress = EgressRecord {
                    decision: "refused",
                    host,
                    port,
                    form,
                    reason,
                    upstream_status: None,
                    upstream_error: None,
                };
                (plain(StatusCode::FORBIDDEN, text), egress)
            }
            Decision::Allow { host, port, form } => {
                let mut egress = EgressRecord {
                    decision: "allowed",
                    host: Some(host.clone()),
                    port,
                    form: Some(form),
                    reason: format!("`{host}` is on the egress allowlist"),
                    upstream_status: None,
                    upstream_error: None,
                };
                if body.error.is_some() || body.total > body.kept.len() as u64 {
                    egress.decision = "refused";
                    egress.reason = format!(
                        "the body ({} bytes{}) is incomplete or larger than the proxy forwards ({} bytes)",
                        body.total,
                        if body.error.is_some() { ", cut" } else { "" },
                        proxy.max_body
                    );
                    let text = format!("refused by the egress proxy: {}\n", egress.reason);
                    (plain(StatusCode::PAYLOAD_TOO_LARGE, text), egress)
                } else {
                    let request_host = hosts.first().map(|h| (*h).to_owned()).or_else(|| authority.map(str::to_owned));
                    let outgoing = Outgoing {
                        method: &parts.method,
                        path_and_query: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
                        host_line: request_host.unwrap_or_else(|| host.clone()),
                        decided_host: &host,
                        headers: &parts.headers,
                        remote,
                        body: &body.kept,
                    };
                    match tokio::time::timeout(FORWARD_DEADLINE, forward(proxy.upstream.addr, &outgoing)).await {
                        Ok(Ok(answer)) => {
                            egress.upstream_status = Some(answer.status);
                            (answer.into_response(), egress)
                        }
                        Ok(Err(e)) => {
                            egress.upstream_error = Some(e.clone());
                            (
                                plain(StatusCode::BAD_GATEWAY, format!("the egress proxy failed to forward: {e}\n")),
                                egress,
                            )
                        }
                        Err(_) => {
                            let e = format!("no answer from the upstream within {} s", FORWARD_DEADLINE.as_secs());
                            egress.upstream_error = Some(e.clone());
                            (
                                plain(
                                    StatusCode::GATEWAY_TIMEOUT,
                                    format!("the egress proxy failed to forward: {e}\n"),
                                ),
                                egress,
                            )
                        }
                    }
                }
            }
        };
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
            egress: Some(egress),
        };
        proxy.recorder.record(record).await;
        response
    });
    task.await.unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "the egress proxy failed\n".into()))
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// A request as it is forwarded.
#[derive(Debug)]
struct Outgoing<'a> {
    method: &'a Method,
    path_and_query: &'a str,
    host_line: String,
    decided_host: &'a str,
    headers: &'a HeaderMap,
    remote: SocketAddr,
    body: &'a [u8],
}

impl Outgoing<'_> {
    /// The HTTP/1.0 request (so the answer is neither chunked nor kept alive).
    fn encode(&self) -> Vec<u8> {
        let mut head =
            format!("{} {} HTTP/1.0\r\nHost: {}\r\n", self.method, self.path_and_query, self.host_line).into_bytes();
        for (name, value) in self.headers {
            if DROPPED_HEADERS.contains(&name.as_str()) {
                continue;
            }
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(
            format!(
                "X-Forwarded-Host: {}\r\nX-Forwarded-For: {}\r\nVia: 1.1 elengtis-egress-proxy\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                self.decided_host,
                self.remote.ip(),
                self.body.len()
            )
            .as_bytes(),
        );
        head.extend_from_slice(self.body);
        head
    }
}

/// The upstream's answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    body: Vec<u8>,
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = status;
        if let Some(value) = self.content_type.and_then(|c| header::HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    }
}

/// Sends `request` to `upstream` and reads its answer (at most [`ANSWER_CAP`] bytes).
async fn forward(upstream: SocketAddr, request: &Outgoing<'_>) -> Result<Answer, String> {
    let mut stream = tokio::net::TcpStream::connect(upstream)
        .await
        .map_err(|e| format!("failed to connect to the upstream {upstream}: {e}"))?;
    stream.write_all(&request.encode()).await.map_err(|e| format!("failed to send to the upstream: {e}"))?;
    let mut received = Vec::new();
    let mut chunk = [0_u8; 8192];
    while received.len() < ANSWER_CAP {
        let n = stream.read(&mut chunk).await.map_err(|e| format!("failed to read the upstream's answer: {e}"))?;
        if n == 0 {
            break;
        }
        received.extend_from_slice(&chunk[..n]);
    }
    parse_answer(&received)
}

fn parse_answer(received: &[u8]) -> Result<Answer, String> {
    let start =
        received.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4).ok_or("the upstream did not answer HTTP")?;
    let head = String::from_utf8_lossy(&received[..start]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("the upstream's status line is malformed")?;
    let content_type = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim().eq_ignore_ascii_case("content-type").then(|| value.trim().to_owned())
    });
    Ok(Answer { status, content_type, body: received[start..].to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(hosts: &[&str]) -> Vec<String> {
        hosts.iter().map(|h| normalise_host(h)).collect()
    }

    fn allowed(d: &Decision) -> bool {
        matches!(d, Decision::Allow { .. })
    }

    #[test]
    fn only_the_exact_host_is_allowed() {
        let list = allow(&["example.com"]);
        assert!(allowed(&decide("GET", None, &["example.com"], &list)));
        for host in [
            "attacker.example.com",
            "example.com.attacker.example.com",
            "www.example.com",
            "example.co",
            "example.com-evil.net",
            "xexample.com",
            "2130706433",
            "127.0.0.1",
            "example.com..",
        ] {
            let d = decide("GET", None, &[host], &list);
            assert!(!allowed(&d), "{host}: {d:?}");
        }
    }

    #[test]
    fn case_a_trailing_dot_and_the_port_do_not_change_the_host() {
        let list = allow(&["Example.COM."]);
        for host in ["EXAMPLE.com", "example.com.", "example.com:8080", "Example.Com.:80"] {
            assert!(allowed(&decide("GET", None, &[host], &list)), "{host}");
        }
        assert_eq!(
            decide("GET", None, &["example.com:8080"], &list),
            Decision::Allow { host: "example.com".into(), port: Some(8080), form: "host_header" }
        );
        for bad in ["example.com:", "example.com:http", "example.com:99999", "example.com:+80", "example.com:80:80"] {
            assert!(!allowed(&decide("GET", None, &[bad], &list)), "{bad}");
        }
    }

    #[test]
    fn absolute_form_and_the_host_header_must_agree() {
        let list = allow(&["example.com"]);
        assert_eq!(
            decide("GET", Some("example.com"), &[], &list),
            Decision::Allow { host: "example.com".into(), port: None, form: "absolute" }
        );
        assert!(allowed(&decide("GET", Some("example.com:80"), &["EXAMPLE.com"], &list)));
        // The allowlisted name in the Host header does not carry an unlisted target.
        let d = decide("GET", Some("attacker.example.com"), &["example.com"], &list);
        assert!(matches!(&d, Decision::Refuse { reason, .. } if reason.contains("Host header names")), "{d:?}");
        // Nor the other way round.
        assert!(!allowed(&decide("GET", Some("example.com"), &["attacker.example.com"], &list)));
        // An unlisted absolute target is refused on its own host.
        let d = decide("GET", Some("attacker.example.com"), &[], &list);
        assert!(matches!(&d, Decision::Refuse { host: Some(h), .. } if h == "attacker.example.com"), "{d:?}");
    }

    #[test]
    fn smuggling_forms_are_refused() {
        let list = allow(&["example.com"]);
        for (target, hosts) in [
            (None, vec!["example.com", "example.com"]),
            (None, vec!["user@example.com"]),
            (None, vec!["attacker.example.com@example.com"]),
            (Some("user:pw@example.com"), vec![]),
            (None, vec!["example.com/path"]),
            (None, vec!["example.com%2e"]),
            (None, vec!["exa mple.com"]),
            (None, vec![""]),
            (None, vec![]),
            (None, vec![".example.com"]),
            (None, vec!["[::1"]),
        ] {
            let d = decide("GET", target, &hosts, &list);
            assert!(!allowed(&d), "{target:?} {hosts:?}: {d:?}");
        }
        assert!(!allowed(&decide("CONNECT", Some("example.com:443"), &["example.com:443"], &list)));
    }

    #[test]
    fn ipv6_and_address_hosts_match_as_written() {
        let list = allow(&["[::1]", "127.0.0.1"]);
        assert!(allowed(&decide("GET", None, &["[::1]:8080"], &list)));
        assert!(allowed(&decide("GET", None, &["127.0.0.1"], &list)));
        assert!(!allowed(&decide("GET", None, &["[0:0::1]"], &list)));
        assert!(!allowed(&decide("GET", None, &["127.1"], &list)));
    }

    #[test]
    fn the_forwarded_request_keeps_path_query_and_host() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "example.com".parse().expect("value"));
        headers.insert("x-forwarded-host", "spoofed.example".parse().expect("value"));
        headers.insert(header::CONNECTION, "keep-alive".parse().expect("value"));
        headers.insert("x-data", "secret".parse().expect("value"));
        let request = Outgoing {
            method: &Method::POST,
            path_and_query: "/collect?k=v",
            host_line: "example.com".into(),
            decided_host: "example.com",
            headers: &headers,
            remote: "10.0.0.3:5000".parse().expect("address"),
            body: b"hi",
        };
        let text = String::from_utf8(request.encode()).expect("utf-8");
        assert!(text.starts_with("POST /collect?k=v HTTP/1.0\r\nHost: example.com\r\n"), "{text}");
        assert!(text.contains("x-data: secret\r\n") && text.contains("X-Forwarded-Host: example.com\r\n"), "{text}");
        assert!(!text.contains("spoofed") && !text.contains("keep-alive"), "{text}");
        assert!(text.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\nhi"), "{text}");
    }

    #[test]
    fn the_answer_is_parsed() {
        let answer = parse_answer(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nok").expect("answer");
        assert_eq!(
            (answer.status, answer.content_type.as_deref(), &answer.body[..]),
            (200, Some("text/plain"), &b"ok"[..])
        );
        assert!(parse_answer(b"garbage").is_err());
    }
}
