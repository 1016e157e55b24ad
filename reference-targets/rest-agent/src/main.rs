//! `elengtis-rest-agent`: a small black-box AI agent behind HTTP, for the REST transport's
//! tests.
//!
//! Teams that ship an agent (not an MCP server) expose it as an HTTP endpoint: a message in,
//! a reply out, no tool call visible. elengtis drives such endpoints (`transport: rest`) and
//! an LLM judge decides from the reply whether an injection landed. This is the reference
//! agent for those tests: a deterministic "summarise this document for me" assistant (no
//! model), built `vulnerable` (it repeats claims the document's instructions ask it to pass
//! on) or `guarded` (it treats the document as data and says it held instructions). See
//! [`agent`] for the behaviour and the README for the API.
//!
//! It is a reference target: it shares no code with the runner, so a bug common to a client
//! and this agent cannot hide itself.
//!
//! # Protocol with a test
//!
//! - Once bound, one line on stdout: `{"listening":"127.0.0.1:PORT"}`; nothing else is ever
//!   written there. Logs go to stderr.
//! - `--log PATH` appends one JSON line per request (header names, never their values).
//! - SIGTERM, SIGINT, and with `--exit-on-stdin-eof` the end of stdin, stop it: in-flight
//!   requests get two seconds, then it exits 0.
//! - Exit codes: 0 stopped cleanly, 1 the server failed (e.g. the address is taken), 2 bad
//!   arguments or an unusable log file.

mod agent;
mod server;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use axum::http::HeaderName;
use clap::Parser;
use elengtis_target_kit::stop::stop_signal;

use crate::{
    agent::Build,
    server::{RequiredHeader, Settings},
};

/// Reference black-box agent behind HTTP: `POST /chat` summarises the document in a message.
#[derive(Debug, Parser)]
#[command(name = "elengtis-rest-agent", version, about)]
struct Args {
    /// Address to listen on (port 0 picks a free one; the ready line reports it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    bind: SocketAddr,

    /// `vulnerable` obeys instructions found in the document; `guarded` treats it as data.
    #[arg(long, value_enum)]
    build: Build,

    /// Answer 401 to `/chat` unless header NAME's value has this hex SHA-256.
    #[arg(long, value_name = "NAME=SHA256HEX", value_parser = parse_required_header)]
    require_header: Option<RequiredHeader>,

    /// Answer 503 (with `Retry-After: 0`) to the first N `/chat` requests.
    #[arg(long, value_name = "N", default_value_t = 0)]
    fail_first: u64,

    /// Wait this long before answering a `/chat` request.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    delay_ms: u64,

    /// Append one JSON line per request to this file.
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,

    /// Stop when stdin reaches end of file.
    #[arg(long)]
    exit_on_stdin_eof: bool,
}

/// Reads `NAME=SHA256HEX`.
fn parse_required_header(text: &str) -> Result<RequiredHeader, String> {
    const SHAPE: &str = "expected NAME=SHA256HEX (a header name, `=`, 64 hex digits)";
    let (name, hash) = text.split_once('=').ok_or(SHAPE)?;
    let name =
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("`{name}` is not a header name; {SHAPE}"))?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("`{hash}` is not 64 hex digits (a SHA-256); {SHAPE}"));
    }
    Ok(RequiredHeader { name, sha256: hash.to_ascii_lowercase() })
}

fn main() -> ExitCode {
    let args = Args::parse();
    elengtis_target_kit::init_logging("warn,elengtis_rest_agent=info");

    let log = match args.log.as_deref().map(server::RequestLog::open).transpose() {
        Ok(log) => log,
        Err(error) => {
            let path = args.log.as_deref().unwrap_or_else(|| std::path::Path::new("")).display();
            eprintln!("elengtis-rest-agent: failed to open the log {path}: {error}");
            return ExitCode::from(2);
        }
    };
    let settings = Settings {
        build: args.build,
        require_header: args.require_header,
        fail_first: args.fail_first,
        delay: Duration::from_millis(args.delay_ms),
    };
    let app = server::App::new(settings, log);

    // One thread is plenty: replies are computed in microseconds; waits are timers.
    elengtis_target_kit::run_single_threaded("elengtis-rest-agent", async {
        let stop = stop_signal(args.exit_on_stdin_eof)?;
        server::run(app, args.bind, stop).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_headers_are_a_name_and_a_sha256() {
        let hash = "A".repeat(64);
        let parsed = parse_required_header(&format!("X-Agent-Key={hash}")).unwrap();
        assert_eq!((parsed.name.as_str(), parsed.sha256), ("x-agent-key", "a".repeat(64)));
        assert!(parse_required_header("X-Agent-Key").unwrap_err().contains("NAME=SHA256HEX"));
        assert!(parse_required_header("X-Agent-Key=abc").unwrap_err().contains("64 hex digits"));
        assert!(parse_required_header(&format!("bad name={hash}")).unwrap_err().contains("not a header name"));
    }
}
