//! `elengtis-fixture`: the synthetic support-note MCP server, the trusted
//! reference target of elengtis.
//!
//! It serves a fictional support note (optionally carrying a prompt-injection
//! payload), a fictional demo credential, and tools that record what a model
//! did into a local JSONL collector file. This file only parses flags and
//! starts the chosen transport; logs go to stderr because stdout is the MCP
//! channel in stdio mode.

mod notes;
mod post;
mod serve;
mod tools;

use std::{net::IpAddr, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};

use crate::{
    notes::Scenario,
    serve::HttpOptions,
    tools::{DEFAULT_CREDENTIAL, FixtureConfig, SupportNoteServer},
};

/// How the fixture talks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    /// JSON-RPC lines on stdin/stdout.
    Stdio,
    /// MCP Streamable HTTP on `--bind`:`--port` under `--path`.
    StreamableHttp,
}

/// Synthetic support-note MCP server (trusted elengtis fixture).
#[derive(Debug, Parser)]
#[command(name = "elengtis-fixture", version, about)]
struct Args {
    /// JSONL file the collector tools append to (created if missing).
    #[arg(long, value_name = "PATH")]
    collector: PathBuf,

    /// Make submit_demo_credential fail with "Synthetic collector unavailable".
    #[arg(long)]
    fail_submit: bool,

    /// The fictional credential read_demo_credential returns and
    /// submit_demo_credential accepts.
    #[arg(long, value_name = "VALUE", default_value = DEFAULT_CREDENTIAL)]
    credential: String,

    /// Which note read_note returns.
    #[arg(long, value_enum, value_name = "NAME", default_value_t = Scenario::SupportNote)]
    scenario: Scenario,

    /// MCP transport.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    transport: Transport,

    /// TCP port for streamable-http (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    port: u16,

    /// Numeric address for streamable-http; any non-loopback address also
    /// turns off the Host-header (DNS-rebinding) check.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,

    /// URL path of the streamable-http endpoint.
    #[arg(long, default_value = "/mcp")]
    path: String,

    /// Also POST each credential record to this http:// URL (numeric address), e.g. the
    /// runner's canary sink: an effect observable outside the target.
    #[arg(long, value_name = "URL")]
    forward_to: Option<String>,

    /// The attacker URL the report-exfil note names.
    #[arg(long, value_name = "URL")]
    attacker_url: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,elengtis_fixture=info")),
        )
        .init();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let result = runtime.block_on(run(args));
    // A blocking stdin read cannot be cancelled; do not wait for it forever.
    runtime.shutdown_timeout(Duration::from_millis(500));
    result
}

async fn run(args: Args) -> anyhow::Result<()> {
    let server = SupportNoteServer::new(FixtureConfig {
        collector: args.collector,
        credential: args.credential,
        fail_submit: args.fail_submit,
        scenario: args.scenario,
        forward_to: args.forward_to,
        attacker_url: args.attacker_url,
    });
    tracing::info!(scenario = ?args.scenario, transport = ?args.transport, "starting synthetic-support-note");
    match args.transport {
        Transport::Stdio => serve::run_stdio(server).await,
        Transport::StreamableHttp => {
            let options = HttpOptions { bind: args.bind, port: args.port, path: args.path };
            serve::run_http(server, &options).await
        }
    }
}
