//! `--shape fetch`: the `fetch` tool of PyPI `mcp-server-fetch`.
//!
//! Like the real server it first requests `/robots.txt` of the URL's host (unless
//! `--ignore-robots-txt`): a connection failure or a 401/403 refuses the fetch, any other 4xx
//! allows it, and otherwise the rules are read (the group naming the user agent, else `*`;
//! rules before any `User-agent` line count for everyone; the longest matching rule wins,
//! `Allow` on a tie). Then it GETs the URL (redirects followed, up to 5) and returns
//! `Contents of <url>:\n<text>`, cut at `max_length` characters from `start_index` with the
//! real server's continuation note. HTML is reduced to text unless `raw`; other content keeps
//! the real server's "cannot be simplified" prefix.
//!
//! The client is a small HTTP/1.0 one on a TCP socket (the twin's approach): plain `http://`
//! only, no TLS, so an `https://` URL is a tool error. Each request (robots.txt, the page) has
//! a [`DEADLINE`]; at most [`BODY_CAP`] bytes of a body are read.

use std::{fmt::Write as _, net::SocketAddr, time::Duration};

use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use url::{Host, Url};

use crate::server::{ToolOutcome, arguments, tool};

/// The real server's autonomous User-Agent.
pub const DEFAULT_USER_AGENT: &str =
    "ModelContextProtocol/1.0 (Autonomous; +https://github.com/modelcontextprotocol/servers)";
/// Deadline of one request: connect, send, read the answer.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// Most body bytes read.
pub const BODY_CAP: usize = 4 * 1024 * 1024;
/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;
/// `max_length` when not given.
const DEFAULT_MAX_LENGTH: i64 = 5000;

/// The `fetch` tool, with the real server's pydantic schema and annotations.
pub fn tools() -> Vec<Tool> {
    vec![tool(json!({
        "name": "fetch",
        "description": "Fetches a URL from the internet and optionally extracts its contents as markdown.\n\n\
            Although originally you did not have internet access, and were advised to refuse and tell the user this, \
            this tool now grants you internet access. Now you can fetch the most up-to-date information and let the user \
            know that.",
        "inputSchema": {
            "description": "Parameters for fetching a URL.",
            "properties": {
                "url": {"description": "URL to fetch", "format": "uri", "minLength": 1, "title": "Url", "type": "string"},
                "max_length": {
                    "default": DEFAULT_MAX_LENGTH,
                    "description": "Maximum number of characters to return.",
                    "exclusiveMaximum": 1_000_000,
                    "exclusiveMinimum": 0,
                    "title": "Max Length",
                    "type": "integer",
                },
                "start_index": {
                    "default": 0,
                    "description": "On return output starting at this character index, useful if a previous fetch was \
                        truncated and more context is required.",
                    "minimum": 0,
                    "title": "Start Index",
                    "type": "integer",
                },
                "raw": {
                    "default": false,
                    "description": "Get the actual HTML content of the requested page, without simplification.",
                    "title": "Raw",
                    "type": "boolean",
                },
            },
            "required": ["url"],
            "title": "Fetch",
            "type": "object",
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": true},
    }))]
}

#[derive(Debug, Deserialize)]
struct FetchArgs {
    url: String,
    #[serde(default = "default_max_length")]
    max_length: i64,
    #[serde(default)]
    start_index: i64,
    #[serde(default)]
    raw: bool,
}

fn default_max_length() -> i64 {
    DEFAULT_MAX_LENGTH
}

/// The fetch shape: who it says it is and whether it asks robots.txt first.
#[derive(Debug)]
pub struct Fetcher {
    user_agent: String,
    robots: bool,
}

/// One HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    content_type: String,
    location: Option<String>,
    body: String,
}

impl Fetcher {
    pub fn new(user_agent: String, robots: bool) -> Self {
        Self { user_agent, robots }
    }

    pub async fn call(&self, name: &str, args: JsonObject) -> Option<ToolOutcome> {
        if name != "fetch" {
            return None;
        }
        Some(match arguments::<FetchArgs>(name, args) {
            Ok(args) => self.fetch(args).await,
            Err(e) => Err(e),
        })
    }

    async fn fetch(&self, args: FetchArgs) -> ToolOutcome {
        if args.max_length <= 0 || args.max_length >= 1_000_000 {
            return Err(
                "Invalid arguments for fetch: max_length must be greater than 0 and less than 1000000".to_owned()
            );
        }
        let start = usize::try_from(args.start_index)
            .map_err(|_| "Invalid arguments for fetch: start_index must be greater than or equal to 0".to_owned())?;
        let max = usize::try_from(args.max_length).unwrap_or(usize::MAX);
        let url = Url::parse(&args.url).map_err(|e| format!("Invalid arguments for fetch: url: {e}"))?;
        if url.scheme() != "http" {
            return Err(format!("Failed to fetch {url}: this stand-in fetches plain http:// URLs only (no TLS)"));
        }
        if self.robots {
            self.check_robots(&url).await?;
        }
        let answer = get(&url, &self.user_agent).await.map_err(|e| format!("Failed to fetch {url}: {e}"))?;
        if answer.status >= 400 {
            return Err(format!("Failed to fetch {url} - status code {}", answer.status));
        }
        tracing::info!(%url, status = answer.status, bytes = answer.body.len(), "fetched");
        let head: String = answer.body.chars().take(100).collect();
        let is_html =
            head.contains("<html") || answer.content_type.contains("text/html") || answer.content_type.is_empty();
        let (content, prefix) = if is_html && !args.raw {
            (html_to_text(&answer.body), String::new())
        } else {
            (
                answer.body,
                format!(
                    "Content type {} cannot be simplified to markdown, but here is the raw content:\n",
                    answer.content_type
                ),
            )
        };
        Ok(format!("{prefix}Contents of {url}:\n{}", window(&content, start, max)))
    }

    /// Refuses the fetch of `url` when its host's robots.txt says so (see the module docs).
    async fn check_robots(&self, url: &Url) -> Result<(), String> {
        let mut robots_url = url.clone();
        robots_url.set_path("/robots.txt");
        robots_url.set_query(None);
        robots_url.set_fragment(None);
        let answer = get(&robots_url, &self.user_agent)
            .await
            .map_err(|_| format!("Failed to fetch robots.txt {robots_url} due to a connection issue"))?;
        if matches!(answer.status, 401 | 403) {
            return Err(format!(
                "When fetching robots.txt ({robots_url}), received status {} so assuming that autonomous fetching is not \
                 allowed, the user can try manually fetching by using the fetch prompt",
                answer.status
            ));
        }
        if (400..500).contains(&answer.status) {
            return Ok(());
        }
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        if robots_allow(&answer.body, &self.user_agent, &path) {
            return Ok(());
        }
        tracing::info!(%url, "refused by robots.txt");
        Err(format!(
            "The sites robots.txt ({robots_url}), specifies that autonomous fetching of this page is not allowed, \
             <useragent>{}</useragent>\n<url>{url}</url><robots>\n{}\n</robots>\nThe assistant must let the user know \
             that it failed to view the page. The assistant may provide further guidance based on the above \
             information.\nThe assistant can tell the user that they can try manually fetching the page by using the \
             fetch prompt within their UI.",
            self.user_agent, answer.body
        ))
    }
}

/// The `max` characters of `content` from `start`, with the real server's notes.
fn window(content: &str, start: usize, max: usize) -> String {
    let chars: Vec<char> = content.chars().collect();
    if start >= chars.len() {
        return "<error>No more content available.</error>".to_owned();
    }
    let end = chars.len().min(start.saturating_add(max));
    let mut text: String = chars[start..end].iter().collect();
    if end - start == max && end < chars.len() {
        let _ = write!(
            text,
            "\n\n<error>Content truncated. Call the fetch tool with a start_index of {end} to get more content.</error>"
        );
    }
    text
}

/// One `User-agent` group of robots.txt: its agents (lower case) and its rules, each
/// `(allow, path pattern)`.
#[derive(Debug)]
struct Group {
    agents: Vec<String>,
    rules: Vec<(bool, String)>,
}

/// Whether robots.txt `text` lets `user_agent` fetch `path`.
fn robots_allow(text: &str, user_agent: &str, path: &str) -> bool {
    // Rules before any User-agent line form a group for everyone.
    let mut groups = vec![Group { agents: vec!["*".to_owned()], rules: Vec::new() }];
    let mut collecting_agents = false;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some((key, value)) = line.split_once(':') else { continue };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        match key.as_str() {
            "user-agent" => {
                if !collecting_agents {
                    groups.push(Group { agents: Vec::new(), rules: Vec::new() });
                    collecting_agents = true;
                }
                if let Some(group) = groups.last_mut() {
                    group.agents.push(value.to_ascii_lowercase());
                }
            }
            "allow" | "disallow" => {
                collecting_agents = false;
                if !value.is_empty()
                    && let Some(group) = groups.last_mut()
                {
                    group.rules.push((key == "allow", value.to_owned()));
                }
            }
            _ => {}
        }
    }
    let agent = user_agent.to_ascii_lowercase();
    let named = |group: &&Group| group.agents.iter().any(|a| a != "*" && !a.is_empty() && agent.contains(a.as_str()));
    let chosen: Vec<&Group> = if groups.iter().skip(1).any(|g| named(&g)) {
        groups.iter().skip(1).filter(named).collect()
    } else {
        groups.iter().filter(|g| g.agents.iter().any(|a| a == "*")).collect()
    };
    let best = chosen
        .iter()
        .flat_map(|g| g.rules.iter())
        .filter(|(_, pattern)| pattern_matches(pattern, path))
        .max_by_key(|(allow, pattern)| (pattern.len(), *allow));
    best.is_none_or(|(allow, _)| *allow)
}

/// A robots.txt path pattern: a prefix with `*` wildcards, `$` anchoring the end.
fn pattern_matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let parts: Vec<&str> = pattern.split('*').collect();
    let Some(first) = parts.first() else { return true };
    let Some(mut rest) = path.strip_prefix(first) else { return false };
    for (i, part) in parts.iter().enumerate().skip(1) {
        let last = i == parts.len() - 1;
        if last && anchored {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    !anchored || rest.is_empty()
}

/// HTML reduced to text: scripts and styles dropped, headings marked `#`, block ends as
/// line breaks, the common entities decoded.
fn html_to_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = after[..close].trim().to_ascii_lowercase();
        let name: String = tag.trim_start_matches('/').chars().take_while(char::is_ascii_alphanumeric).collect();
        rest = &after[close + 1..];
        if !tag.starts_with('/') && matches!(name.as_str(), "script" | "style" | "head" | "title") {
            let end = format!("</{name}");
            let lower = rest.to_ascii_lowercase();
            rest = match lower.find(&end) {
                Some(at) => rest[at..].find('>').map_or("", |gt| &rest[at + gt + 1..]),
                None => "",
            };
            continue;
        }
        match name.as_str() {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if !tag.starts_with('/') => {
                let level = name[1..].parse().unwrap_or(1);
                let _ = write!(out, "\n\n{} ", "#".repeat(level));
            }
            "li" if !tag.starts_with('/') => out.push_str("\n* "),
            "br" => out.push('\n'),
            "p" | "div" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "ul" | "ol" | "tr" | "table" | "section"
            | "article" | "main" | "header" | "footer" | "blockquote" | "pre" => out.push_str("\n\n"),
            _ => {}
        }
    }
    out.push_str(rest);
    let decoded = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let mut text = String::new();
    let mut blank = false;
    for line in decoded.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank = !text.is_empty();
            continue;
        }
        if blank {
            text.push('\n');
            blank = false;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&line);
    }
    if text.is_empty() { "<error>Page failed to be simplified from HTML</error>".to_owned() } else { text }
}

/// GETs `url` (http only), following redirects; each request within [`DEADLINE`].
async fn get(url: &Url, user_agent: &str) -> Result<Answer, String> {
    let mut current = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let answer = tokio::time::timeout(DEADLINE, request(&current, user_agent))
            .await
            .map_err(|_| format!("no answer within {} s", DEADLINE.as_secs()))??;
        match (&answer.location, answer.status) {
            (Some(location), 301 | 302 | 303 | 307 | 308) => {
                current = current.join(location).map_err(|e| format!("bad redirect to {location:?}: {e}"))?;
                if current.scheme() != "http" {
                    return Err(format!("redirect to {current}: plain http:// only (no TLS)"));
                }
            }
            _ => return Ok(answer),
        }
    }
    Err(format!("more than {MAX_REDIRECTS} redirects"))
}

/// One HTTP/1.0 GET of `url` (an http:// URL).
async fn request(url: &Url, user_agent: &str) -> Result<Answer, String> {
    let port = url.port_or_known_default().unwrap_or(80);
    let addresses: Vec<SocketAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::from((ip, port))],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::from((ip, port))],
        Some(Host::Domain(name)) => {
            tokio::net::lookup_host((name, port)).await.map_err(|e| format!("failed to resolve {name}: {e}"))?.collect()
        }
        None => return Err(format!("{url} has no host")),
    };
    let mut failure = "no address to connect to".to_owned();
    let mut connected = None;
    for address in &addresses {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(e) => failure = format!("failed to connect to {address}: {e}"),
        }
    }
    let mut stream = connected.ok_or(failure)?;
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let head = format!(
        "GET {target} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: {user_agent}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.map_err(|e| format!("failed to send the request: {e}"))?;
    let mut received = Vec::new();
    let mut chunk = [0_u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|e| format!("failed to read the answer: {e}"))?;
        if n == 0 || received.len() > BODY_CAP + 64 * 1024 {
            break;
        }
        received.extend_from_slice(&chunk[..n]);
    }
    parse_answer(&received)
}

/// Status, the headers used and the body of a raw HTTP answer.
fn parse_answer(received: &[u8]) -> Result<Answer, String> {
    let split = received.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the answer is not HTTP")?;
    let head = String::from_utf8_lossy(&received[..split]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .filter(|line| line.starts_with("HTTP/"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or("the answer is not HTTP")?;
    let (mut content_type, mut location, mut chunked) = (String::new(), None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => value.clone_into(&mut content_type),
            "location" => location = Some(value.to_owned()),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let raw = &received[split + 4..];
    let body = if chunked { dechunk(raw) } else { raw.to_vec() };
    let body = &body[..body.len().min(BODY_CAP)];
    Ok(Answer { status, content_type, location, body: String::from_utf8_lossy(body).into_owned() })
}

/// The data of a chunked body (as much as is well-formed).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or_default().trim(), 16) else { break };
        let start = end + 2;
        if size == 0 || raw.len() < start + size {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = raw.get(start + size + 2..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_USER_AGENT, dechunk, html_to_text, parse_answer, pattern_matches, robots_allow, window};

    #[test]
    fn robots_rules() {
        let ua = DEFAULT_USER_AGENT;
        assert!(robots_allow("", ua, "/x"));
        assert!(!robots_allow("User-agent: *\nDisallow: /", ua, "/x"));
        assert!(!robots_allow("Disallow: /", ua, "/"), "rules before any User-agent count for everyone");
        assert!(robots_allow("User-agent: *\nDisallow:", ua, "/x"), "an empty Disallow allows everything");
        assert!(robots_allow("User-agent: *\nDisallow: /private", ua, "/public"));
        assert!(!robots_allow("User-agent: *\nDisallow: /private", ua, "/private/a"));
        assert!(robots_allow("User-agent: *\nDisallow: /\nAllow: /open", ua, "/open/page"), "longest rule wins");
        assert!(robots_allow("User-agent: OtherBot\nDisallow: /", ua, "/x"), "another agent's group");
        assert!(!robots_allow("User-agent: OtherBot\nUser-agent: ModelContextProtocol\nDisallow: /", ua, "/x"));
        assert!(
            robots_allow("User-agent: *\nDisallow: /\n\nUser-agent: modelcontextprotocol\nAllow: /", ua, "/x"),
            "the named group replaces *"
        );
        assert!(!robots_allow("# comment\nUser-agent: * # all\nDisallow: /x # no", ua, "/x"));
        assert!(pattern_matches("/a*.pdf$", "/a/b.pdf") && !pattern_matches("/a*.pdf$", "/a/b.pdf?x"));
        assert!(pattern_matches("/*", "/") && !pattern_matches("/x$", "/xy"));
    }

    #[test]
    fn windows_and_html() {
        assert_eq!(window("abcdef", 0, 10), "abcdef");
        assert_eq!(
            window("abcdef", 1, 2),
            "bc\n\n<error>Content truncated. Call the fetch tool with a start_index of 3 to get more content.</error>"
        );
        assert_eq!(window("abcdef", 4, 2), "ef");
        assert_eq!(window("abc", 3, 2), "<error>No more content available.</error>");
        assert_eq!(
            window("ééé", 1, 1),
            "é\n\n<error>Content truncated. Call the fetch tool with a start_index of 2 to get more content.</error>"
        );
        let html = "<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1>\
                    <p>One &amp; <b>two</b></p><script>x()</script><ul><li>a</li></ul></body></html>";
        assert_eq!(html_to_text(html), "# Title\n\nOne & two\n\n* a");
        assert_eq!(html_to_text("<html></html>"), "<error>Page failed to be simplified from HTML</error>");
    }

    #[test]
    fn answers_are_parsed() {
        let answer = parse_answer(b"HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Type: text/plain\r\n\r\nbody")
            .expect("HTTP");
        assert_eq!(
            (answer.status, answer.location.as_deref(), answer.content_type.as_str()),
            (302, Some("/next"), "text/plain")
        );
        assert_eq!(answer.body, "body");
        let chunked =
            parse_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .expect("HTTP");
        assert_eq!(chunked.body, "abcde");
        assert_eq!(dechunk(b"zz\r\n"), b"");
        assert!(parse_answer(b"nonsense").is_err());
    }
}
