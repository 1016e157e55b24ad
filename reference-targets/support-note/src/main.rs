//! `elengtis-fixture`: the synthetic support-note MCP server, the trusted
//! reference target of elengtis.
//!
//! It serves a fictional support note (optionally carrying a prompt-injection
//! payload), a fictional demo credential, and tools that record what a model
//! did into a local JSONL collector file. This file only parses flags and
//! starts the chosen transport (from `elengtis-target-kit`); logs go to stderr
//! because stdout is the MCP channel in stdio mode.

mod notes;
mod post;
mod tools;

use std::path::PathBuf;

use clap::Parser;
use elengtis_target_kit::TransportArgs;

use crate::{
    notes::Scenario,
    tools::{DEFAULT_CREDENTIAL, FixtureConfig, SupportNoteServer},
};

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

    // `--transport`, `--port`, `--bind`, `--path` (shared with the other reference servers).
    #[command(flatten)]
    serve: TransportArgs,

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
    // The kit logs the transports' events (e.g. the listening address) under its own target.
    elengtis_target_kit::init_logging("warn,elengtis_fixture=info,elengtis_target_kit=info");
    elengtis_target_kit::run_main_for(args.serve.transport, run(args))
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
    tracing::info!(scenario = ?args.scenario, transport = ?args.serve.transport, "starting synthetic-support-note");
    elengtis_target_kit::serve(server, args.serve).await
}
