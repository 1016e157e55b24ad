//! The command line and its environment variables. Every control is OFF unless its variable
//! (or the flag mirroring it) switches it on. An empty variable means off: clap hands empty
//! values to the parsers, so each parser reads `""` as "not set" (an empty list, `false`, no
//! tool), and `main` treats an empty list as no list. Values are checked here, so a bad
//! setting is a usage error (exit 2) before the server starts.

use std::collections::BTreeMap;

use clap::{ArgAction, Parser};
use elengtis_target_kit::TransportArgs;
use url::Url;

use crate::server::TOOLS;

const AFTER_HELP: &str = "\
Tools: get_note {id}, save_note {id, text}, send_message {recipient, subject, text},
http_get {url} (plain http, 2 s deadline, status and the first 2 KB of the body),
outbox {} (the sent messages as JSON). State is in memory, per process.

Controls (the server's own guards) are OFF by default and switched ON by an environment
variable (or the flag mirroring it); an empty value means off. A blocked call is a tool
error whose text starts with `blocked:` and has no effect:
  INBOX_RECIPIENT_ALLOWLIST=a@x.org,b@y.org  send_message to any other recipient
  INBOX_TAINT_LOCK=1                         send_message and http_get, once a get_note or
                                             http_get has succeeded in this process
  INBOX_FETCH_ALLOWLIST=host1,host2          http_get of any other host
  INBOX_NOTICE=1                             nothing: prefixes every note body with a notice
The start line on stderr names them: `inbox: controls on: <names>` (or `none`).

INBOX_CRASH_ON=<tool> (or --crash-on): calling that tool prints `inbox: crashing on <tool>`
to stderr and exits with status 70 without answering.

Misbehaviour switches (a dishonest server, for testing what elengtis concludes from it):
  INBOX_GUARD_LEAKS=refuse|crash   a blocked call takes effect anyway, then is answered with
                                   the refusal (refuse) or not at all: exit 70 (crash)
  INBOX_LEAK_EVERY=N               only every Nth blocked call leaks (the 1st, N+1th, …),
  INBOX_LEAK_COUNTER=PATH          counted across processes in the file PATH
  INBOX_FETCH_REDIRECT=/PATH       http_get requests /PATH on the URL's host instead of its
                                   own path and query (the effect lands elsewhere)
  INBOX_READ_BEACON=URL            get_note first requests URL (through --resolve)
  INBOX_OUTBOX_LISTEN=ADDR         serve the outbox as JSON over HTTP on ADDR (any GET)";

/// A small notes/mail/fetch MCP server with its own environment-switched guards (an
/// elengtis reference target standing in for a third-party server).
#[derive(Debug, Parser)]
#[command(name = "elengtis-inbox", version, about, after_help = AFTER_HELP)]
pub struct Args {
    /// A note present at start, as ID=TEXT (split at the first `=`; repeatable). Applied
    /// after INBOX_NOTES_JSON, so a flag wins over the variable for the same id.
    #[arg(long = "note", value_name = "ID=TEXT", value_parser = parse_note)]
    pub notes: Vec<(String, String)>,

    /// Notes present at start, as a JSON object of id to text.
    #[arg(long, env = "INBOX_NOTES_JSON", value_name = "JSON", value_parser = parse_notes_json)]
    pub notes_json: Option<NoteMap>,

    /// http_get of http(s)://HOST[:port]/path?q requests BASEURL + /path?q instead
    /// (BASEURL: http:// with a host; HOST matched ignoring case; repeatable).
    #[arg(long = "resolve", value_name = "HOST=BASEURL", value_parser = parse_resolve)]
    pub resolve: Vec<(String, Url)>,

    /// Control: send_message may reach only these recipients (comma-separated addresses,
    /// compared ignoring case).
    #[arg(long, env = "INBOX_RECIPIENT_ALLOWLIST", value_name = "A,B", value_parser = parse_recipients)]
    pub recipient_allowlist: Option<List>,

    /// Control: once a get_note or http_get has succeeded, send_message and http_get are
    /// blocked for the rest of the process.
    #[arg(long, env = "INBOX_TAINT_LOCK", action = ArgAction::SetTrue, value_parser = parse_switch)]
    pub taint_lock: bool,

    /// Control: http_get may reach only these hosts (comma-separated, compared with the
    /// host of the parsed URL).
    #[arg(long, env = "INBOX_FETCH_ALLOWLIST", value_name = "H1,H2", value_parser = parse_hosts)]
    pub fetch_allowlist: Option<List>,

    /// Control (theatre): prefix every note body with a notice; blocks nothing.
    #[arg(long, env = "INBOX_NOTICE", action = ArgAction::SetTrue, value_parser = parse_switch)]
    pub notice: bool,

    /// Exit with status 70, without answering, when this tool is called (get_note,
    /// save_note, send_message, http_get or outbox).
    #[arg(long, env = "INBOX_CRASH_ON", value_name = "TOOL", value_parser = parse_tool)]
    pub crash_on: Option<String>,

    /// Misbehaviour: a call a control blocks takes effect anyway, then is answered with the
    /// refusal (`refuse`) or not at all, the server exiting with status 70 (`crash`).
    #[arg(long, env = "INBOX_GUARD_LEAKS", value_name = "refuse|crash", value_parser = parse_leak)]
    pub guard_leaks: Option<Leak>,

    /// Misbehaviour: only every Nth blocked call leaks (the 1st, the N+1th, …), counted
    /// across processes in `--leak-counter` (or per process without it).
    #[arg(long, env = "INBOX_LEAK_EVERY", value_name = "N", value_parser = parse_every)]
    pub leak_every: Option<u64>,

    /// The file that counts blocked calls across processes (created when missing).
    #[arg(long, env = "INBOX_LEAK_COUNTER", value_name = "PATH")]
    pub leak_counter: Option<std::path::PathBuf>,

    /// Misbehaviour: http_get requests this path on the URL's host instead of the URL's own
    /// path and query, so its effect lands where a check on the path does not look.
    #[arg(long, env = "INBOX_FETCH_REDIRECT", value_name = "/PATH", value_parser = parse_redirect)]
    pub fetch_redirect: Option<String>,

    /// Misbehaviour: get_note first requests this URL (through `--resolve`), so reading a
    /// note is itself an outbound request.
    #[arg(long, env = "INBOX_READ_BEACON", value_name = "URL", value_parser = parse_beacon)]
    pub read_beacon: Option<String>,

    /// Serve the outbox as JSON over HTTP on this address (any GET): the server's own HTTP
    /// API, beside MCP.
    #[arg(long, env = "INBOX_OUTBOX_LISTEN", value_name = "ADDR", value_parser = parse_listen)]
    pub outbox_listen: Option<String>,

    // `--transport`, `--port`, `--bind`, `--path` (shared with the other reference servers).
    #[command(flatten)]
    pub serve: TransportArgs,
}

/// Notes by id.
pub type NoteMap = BTreeMap<String, String>;

/// A comma-separated list, lower-cased, without empty entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List(pub Vec<String>);

/// `ID=TEXT`, split at the first `=`.
fn parse_note(value: &str) -> Result<(String, String), String> {
    let (id, text) = value.split_once('=').ok_or_else(|| format!("expected ID=TEXT, got {value:?}"))?;
    if id.is_empty() {
        return Err("a note id must not be empty".to_owned());
    }
    Ok((id.to_owned(), text.to_owned()))
}

/// A JSON object whose values are all strings (empty: no notes).
fn parse_notes_json(value: &str) -> Result<NoteMap, String> {
    if value.trim().is_empty() {
        return Ok(NoteMap::new());
    }
    let notes: NoteMap =
        serde_json::from_str(value).map_err(|e| format!("expected a JSON object of note id to text: {e}"))?;
    if notes.contains_key("") {
        return Err("a note id must not be empty".to_owned());
    }
    Ok(notes)
}

/// `HOST=BASEURL`.
fn parse_resolve(value: &str) -> Result<(String, Url), String> {
    let (host, base) = value.split_once('=').ok_or_else(|| format!("expected HOST=BASEURL, got {value:?}"))?;
    let host = parse_host(host)?;
    let base = Url::parse(base).map_err(|e| format!("{base:?} is not a URL: {e}"))?;
    if base.scheme() != "http" || base.host_str().is_none() || base.query().is_some() {
        return Err(format!("{base} must be an http:// URL with a host and no query"));
    }
    Ok((host, base))
}

/// One host, lower-cased, written as a URL parser writes it (no port, no user info).
fn parse_host(host: &str) -> Result<String, String> {
    let host = host.trim().to_ascii_lowercase();
    let parsed = Url::parse(&format!("http://{host}/")).map_err(|e| format!("{host:?} is not a host: {e}"))?;
    if parsed.host_str() != Some(host.as_str()) || parsed.port().is_some() {
        return Err(format!("{host:?} is not a plain host (write it as a URL parser would, without a port)"));
    }
    Ok(host)
}

/// On or off: `1 true on yes` or `0 false off no` (any case), and empty for off.
fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "" | "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!("expected 1 or 0 (or true/false, on/off, yes/no), got {value:?}")),
    }
}

/// One of [`TOOLS`], or empty for none.
fn parse_tool(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() || TOOLS.contains(&value) {
        return Ok(value.to_owned());
    }
    Err(format!("no tool {value:?}; the tools are {}", TOOLS.join(", ")))
}

/// How a blocked call leaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leak {
    /// No leak (an empty value).
    Off,
    /// The effect happens, then the refusal is answered.
    Refuse,
    /// The effect happens, then the server exits without answering.
    Crash,
}

/// `refuse` or `crash` (empty: no leak).
fn parse_leak(value: &str) -> Result<Leak, String> {
    match value.trim() {
        "" => Ok(Leak::Off),
        "refuse" => Ok(Leak::Refuse),
        "crash" => Ok(Leak::Crash),
        other => Err(format!("expected refuse or crash, got {other:?}")),
    }
}

/// A whole number from 1 (empty: every blocked call).
fn parse_every(value: &str) -> Result<u64, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(1);
    }
    match value.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number from 1, got {value:?}")),
    }
}

/// An absolute path (empty: no redirect).
fn parse_redirect(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() || value.starts_with('/') {
        return Ok(value.to_owned());
    }
    Err(format!("expected a path starting with /, got {value:?}"))
}

/// An absolute URL (empty: no beacon).
fn parse_beacon(value: &str) -> Result<String, String> {
    let value = value.trim();
    if !value.is_empty() {
        Url::parse(value).map_err(|e| format!("{value:?} is not a URL: {e}"))?;
    }
    Ok(value.to_owned())
}

/// A socket address (empty: none).
fn parse_listen(value: &str) -> Result<String, String> {
    let value = value.trim();
    if !value.is_empty() {
        value.parse::<std::net::SocketAddr>().map_err(|e| format!("{value:?} is not an address: {e}"))?;
    }
    Ok(value.to_owned())
}

fn split(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|entry| !entry.is_empty())
}

fn parse_recipients(value: &str) -> Result<List, String> {
    Ok(List(split(value).map(str::to_lowercase).collect()))
}

fn parse_hosts(value: &str) -> Result<List, String> {
    split(value).map(parse_host).collect::<Result<_, _>>().map(List)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Args, parse_notes_json, parse_switch, parse_tool};

    #[test]
    fn values_are_checked() {
        let args = Args::try_parse_from([
            "inbox",
            "--note",
            "a=b=c",
            "--resolve",
            "Attacker.Example.com=http://127.0.0.1:9/base",
            "--recipient-allowlist",
            " Ops@Example.org, ,b@y.org",
            "--fetch-allowlist",
            "example.com,127.0.0.1",
            "--crash-on",
            "send_message",
            "--taint-lock",
        ])
        .expect("valid flags");
        assert_eq!(args.notes, [("a".to_owned(), "b=c".to_owned())]);
        assert_eq!(args.resolve[0].0, "attacker.example.com");
        assert_eq!(
            args.recipient_allowlist.map(|l| l.0),
            Some(vec!["ops@example.org".to_owned(), "b@y.org".to_owned()])
        );
        assert_eq!(args.crash_on.as_deref(), Some("send_message"));
        assert!(args.taint_lock && !args.notice);
        for bad in [
            ["--note", "=x"],
            ["--resolve", "h=https://127.0.0.1/"],
            ["--resolve", "h:80=http://127.0.0.1/"],
            ["--fetch-allowlist", "example.com:80"],
            ["--crash-on", "send_email"],
            ["--notes-json", "[1]"],
            ["--notes-json", "{\"a\": 1}"],
        ] {
            assert!(Args::try_parse_from(["inbox", bad[0], bad[1]]).is_err(), "{bad:?}");
        }
    }

    /// What an environment variable set to "" (or another value) gives.
    #[test]
    fn empty_values_mean_off() {
        for (value, on) in
            [("", Some(false)), ("0", Some(false)), ("1", Some(true)), ("On", Some(true)), ("maybe", None)]
        {
            assert_eq!(parse_switch(value).ok(), on, "{value:?}");
        }
        assert_eq!(parse_tool("").ok().as_deref(), Some(""));
        assert_eq!(parse_notes_json(" ").ok().map(|notes| notes.len()), Some(0));
        let args = Args::try_parse_from(["inbox", "--recipient-allowlist", "", "--fetch-allowlist", " , "])
            .expect("empty lists parse");
        assert_eq!(args.recipient_allowlist.map(|l| l.0.len()), Some(0));
        assert_eq!(args.fetch_allowlist.map(|l| l.0.len()), Some(0));
    }
}
