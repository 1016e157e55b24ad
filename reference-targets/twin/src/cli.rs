//! The command line: which build, the plant, the W1 payload, where mail goes, where hosts
//! resolve to, and the guards' settings. Values are checked here, so a bad flag is a usage
//! error (exit 2) before anything starts.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use elengtis_target_kit::TransportArgs;
use url::Url;

use crate::guards::GuardId;

/// Which twin runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Build {
    /// No guard: the four weaknesses W1-W4 are open.
    Vulnerable,
    /// W1-W4 guarded in server code (see `--disable-guard` for test builds).
    Guarded,
}

/// The allowlist W3 uses when `--fetch-allowlist` is not given.
pub const DEFAULT_ALLOWLIST: &str = "localhost,127.0.0.1,example.com";

/// Reference twin MCP server for `elengtis prove` (vulnerable or guarded build).
#[derive(Debug, Parser)]
#[command(name = "elengtis-twin", version, about)]
pub struct Args {
    /// The build: `vulnerable` (W1-W4 open) or `guarded` (W1-W4 closed in server code).
    #[arg(long, value_enum)]
    pub build: Build,

    /// A note present at start, as ID=BODY (split at the first `=`; repeatable). This is the
    /// plant: it bypasses the MCP session.
    #[arg(long = "note", value_name = "ID=BODY", value_parser = parse_note)]
    pub notes: Vec<(String, String)>,

    /// Text appended (after one space) to read_note's description. The guarded build
    /// advertises it only when the whole description passes the W1 allowlist.
    #[arg(long, value_name = "TEXT")]
    pub w1_payload: Option<String>,

    /// SQLite file sent mail is committed to (created if missing), table `sent_emails`.
    #[arg(long, value_name = "PATH", default_value = "/data/mail.db")]
    pub mail_db: PathBuf,

    /// web_fetch of http(s)://HOST[:port]/path?q requests URL + /path?q instead, as
    /// HOST=URL (URL: http:// with a numeric or resolvable host; repeatable).
    #[arg(long = "resolve", value_name = "HOST=URL", value_parser = parse_resolve)]
    pub resolve: Vec<(String, Url)>,

    /// Hosts web_fetch may reach in the guarded build (W3), comma-separated, matched exactly
    /// and case-insensitively against the URL's host.
    #[arg(long, value_name = "H1,H2", default_value = DEFAULT_ALLOWLIST, value_parser = parse_allowlist)]
    pub fetch_allowlist: HostList,

    /// The code confirm_send needs in the guarded build (W4); random per start when not
    /// given. It is printed to stderr only, never shown to the model.
    #[arg(long, value_name = "CODE", value_parser = parse_code)]
    pub confirm_code: Option<String>,

    /// Remove one guard from the guarded build (a test build; repeatable).
    #[arg(long = "disable-guard", value_enum, value_name = "W1|W2|W3|W4", ignore_case = true)]
    pub disabled: Vec<GuardId>,

    // `--transport`, `--port`, `--bind`, `--path` (shared with the other reference servers).
    #[command(flatten)]
    pub serve: TransportArgs,
}

/// The hosts of `--fetch-allowlist`, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostList(pub Vec<String>);

/// `ID=BODY`, split at the first `=`.
fn parse_note(value: &str) -> Result<(String, String), String> {
    let (id, body) = value.split_once('=').ok_or_else(|| format!("expected ID=BODY, got {value:?}"))?;
    if id.is_empty() {
        return Err("the note id must not be empty".to_owned());
    }
    Ok((id.to_owned(), body.to_owned()))
}

/// A host name or address exactly as a URL parser writes it (lower case, no port), e.g.
/// `example.com`, `127.0.0.1`, `[::1]`.
fn plain_host(host: &str) -> Result<String, String> {
    let lowered = host.trim().to_ascii_lowercase();
    let parsed = Url::parse(&format!("http://{lowered}/")).map_err(|e| format!("{host:?} is not a host: {e}"))?;
    match parsed.host_str() {
        Some(canonical) if canonical == lowered && parsed.port().is_none() && parsed.username().is_empty() => {
            Ok(lowered)
        }
        _ => Err(format!("{host:?} is not a plain host name or address (write it as a URL parser would)")),
    }
}

/// `HOST=URL`: an exact host and the http:// base URL it stands for.
fn parse_resolve(value: &str) -> Result<(String, Url), String> {
    let (host, target) = value.split_once('=').ok_or_else(|| format!("expected HOST=URL, got {value:?}"))?;
    // One trailing dot names the same host (as in DNS); the fetch side strips it too.
    let host = plain_host(host.strip_suffix('.').unwrap_or(host))?;
    let url = Url::parse(target).map_err(|e| format!("{target:?} is not a URL: {e}"))?;
    if url.scheme() != "http" || url.host_str().is_none() {
        return Err(format!("{target:?} must be an http:// URL with a host (the twin speaks no TLS)"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{target:?} must not carry a query or fragment: the fetched path and query are appended"));
    }
    Ok((host, url))
}

/// `H1,H2,…`: non-empty, each a plain host.
fn parse_allowlist(value: &str) -> Result<HostList, String> {
    let hosts = value.split(',').map(plain_host).collect::<Result<Vec<_>, _>>()?;
    Ok(HostList(hosts))
}

/// A confirmation code: 1-64 printable ASCII characters, no spaces.
fn parse_code(value: &str) -> Result<String, String> {
    if value.is_empty() || value.len() > 64 || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the confirmation code must be 1-64 printable ASCII characters without spaces".to_owned());
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Args, Build, HostList};
    use crate::guards::GuardId;

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(["elengtis-twin"].iter().chain(extra))
    }

    #[test]
    fn the_build_is_required_and_defaults_are_the_contracts() {
        assert!(parse(&[]).is_err());
        let args = parse(&["--build", "guarded"]).expect("valid");
        assert_eq!(args.build, Build::Guarded);
        assert_eq!(args.mail_db.to_str(), Some("/data/mail.db"));
        assert_eq!(args.fetch_allowlist, HostList(vec!["localhost".into(), "127.0.0.1".into(), "example.com".into()]));
        assert!(args.confirm_code.is_none() && args.disabled.is_empty() && args.notes.is_empty());
    }

    #[test]
    fn notes_split_at_the_first_equals_sign() {
        let args = parse(&["--build", "vulnerable", "--note", "n1=a=b", "--note", "empty="]).expect("valid");
        assert_eq!(args.notes, [("n1".to_owned(), "a=b".to_owned()), ("empty".to_owned(), String::new())]);
        assert!(parse(&["--build", "vulnerable", "--note", "no-equals"]).is_err());
        assert!(parse(&["--build", "vulnerable", "--note", "=body"]).is_err());
    }

    #[test]
    fn resolve_and_allowlist_take_plain_hosts_only() {
        let args = parse(&["--build", "guarded", "--resolve", "Attacker.Example.com=http://10.0.0.2:8080/base"])
            .expect("valid");
        assert_eq!(args.resolve[0].0, "attacker.example.com");
        assert_eq!(args.resolve[0].1.as_str(), "http://10.0.0.2:8080/base");
        let args = parse(&["--build", "guarded", "--resolve", "example.com.=http://10.0.0.2/"]).expect("valid");
        assert_eq!(args.resolve[0].0, "example.com");
        for bad in ["x=https://10.0.0.2/", "x=ftp://h/", "x=http://h/?q=1", "a/b=http://h/", "h:80=http://h/", "h"] {
            assert!(parse(&["--build", "guarded", "--resolve", bad]).is_err(), "{bad}");
        }
        let args = parse(&["--build", "guarded", "--fetch-allowlist", "EXAMPLE.com,[::1]"]).expect("valid");
        assert_eq!(args.fetch_allowlist, HostList(vec!["example.com".into(), "[::1]".into()]));
        for bad in ["", "a,,b", "example.com:80", "u@example.com", "2130706433", "exa mple.com"] {
            assert!(parse(&["--build", "guarded", "--fetch-allowlist", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn guards_and_codes_parse() {
        let args =
            parse(&["--build", "guarded", "--disable-guard", "W2", "--disable-guard", "w4", "--confirm-code", "c0de"])
                .expect("valid");
        assert_eq!(args.disabled, [GuardId::W2, GuardId::W4]);
        assert_eq!(args.confirm_code.as_deref(), Some("c0de"));
        assert!(parse(&["--build", "guarded", "--disable-guard", "W5"]).is_err());
        assert!(parse(&["--build", "guarded", "--confirm-code", "has space"]).is_err());
        assert!(parse(&["--build", "guarded", "--confirm-code", ""]).is_err());
    }
}
