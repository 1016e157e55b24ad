//! `elengtis-model-server`: a scripted LLM server speaking real wire formats.
//!
//! No model provider is reachable from the project's machines, so every live-model code
//! path of elengtis (OpenRouter / OpenAI-compatible / Anthropic providers, retries, 429
//! handling, record and replay) is tested against this server on 127.0.0.1. It answers
//! the OpenAI Chat Completions API (`/v1/chat/completions`, `/chat/completions`,
//! `/api/v1/chat/completions`) and the Anthropic Messages API (`/v1/messages`), both
//! plain and streamed, from a script: which tool calls to make at each assistant turn,
//! arguments derived from the conversation's tool results, refusals, and faults (error
//! statuses with `Retry-After`, slow or cut bodies, broken JSON, …) per step and attempt.
//!
//! It is a reference target: it shares no code with the runner, so a bug common to a
//! client and this server cannot hide itself. See the README for the script format.
//!
//! # Protocol with a test
//!
//! - Once bound, one line on stdout: `{"listening":"127.0.0.1:PORT"}`; nothing else is
//!   ever written there. Logs go to stderr.
//! - `--log PATH` appends one JSON line per request (see [`log::Entry`]).
//! - SIGTERM, SIGINT, and with `--exit-on-stdin-eof` the end of stdin, stop it: in-flight
//!   requests get two seconds, then it exits 0.
//! - Exit codes: 0 stopped cleanly (or `--check` passed), 1 the server failed (e.g. the
//!   address is taken), 2 unusable script, log file or arguments.

mod anthropic;
mod conversation;
mod faults;
mod log;
mod openai;
mod reply;
mod script;
mod server;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Parser;
use elengtis_target_kit::stop::stop_signal;

/// Scripted LLM server (OpenAI Chat Completions and Anthropic Messages) for tests.
#[derive(Debug, Parser)]
#[command(name = "elengtis-model-server", version, about)]
struct Args {
    /// The script (JSON) that decides every answer; see the README.
    #[arg(long, value_name = "PATH")]
    script: PathBuf,

    /// Address to listen on (port 0 picks a free one; the ready line reports it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    bind: SocketAddr,

    /// Append one JSON line per request to this file.
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,

    /// Answer 401 unless the key (`Authorization: Bearer KEY` for OpenAI, `x-api-key` for
    /// Anthropic) has this hex SHA-256.
    #[arg(long, value_name = "SHA256", value_parser = parse_sha256)]
    require_key: Option<String>,

    /// Largest request body accepted; larger ones get 413.
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    max_body_bytes: usize,

    /// Stop when stdin reaches end of file.
    #[arg(long)]
    exit_on_stdin_eof: bool,

    /// Check the script and exit (0 when it is usable).
    #[arg(long)]
    check: bool,
}

fn parse_sha256(text: &str) -> Result<String, String> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err("expected 64 hex digits (a SHA-256)".to_owned())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    elengtis_target_kit::init_logging("warn,elengtis_model_server=info");

    let script = match script::Script::load(&args.script) {
        Ok(script) => script,
        Err(error) => {
            eprintln!("elengtis-model-server: {error}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        return ExitCode::SUCCESS;
    }
    tracing::info!(
        script = %args.script.display(),
        description = script.description.as_deref().unwrap_or_default(),
        steps = script.steps.len(),
        "script loaded"
    );
    let log = match args.log.as_deref().map(log::RequestLog::open).transpose() {
        Ok(log) => log,
        Err(error) => {
            let path = args.log.as_deref().unwrap_or_else(|| std::path::Path::new("")).display();
            eprintln!("elengtis-model-server: log {path}: {error}");
            return ExitCode::from(2);
        }
    };
    let app = server::App::new(script, log, args.require_key, args.max_body_bytes);

    // One thread is plenty: answers are computed in microseconds; waits are timers.
    elengtis_target_kit::run_single_threaded("elengtis-model-server", async {
        let stop = stop_signal(args.exit_on_stdin_eof)?;
        server::run(app, args.bind, stop).await
    })
}

#[cfg(test)]
mod tests {
    use super::parse_sha256;

    #[test]
    fn key_hashes_must_be_sha256_hex() {
        let hash = "A".repeat(64);
        assert_eq!(parse_sha256(&hash), Ok("a".repeat(64)));
        assert!(parse_sha256("abc").is_err());
        assert!(parse_sha256(&"g".repeat(64)).is_err());
    }
}
