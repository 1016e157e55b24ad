//! `elengtis-twin`: the reference twins of `elengtis prove`. One kitchen-sink MCP server
//! (`read_note`, `write_note`, `web_fetch`, `send_email`, and in the guarded build
//! `confirm_send`) in two builds chosen at start: `--build vulnerable` leaves the weakness
//! classes W1-W4 open, `--build guarded` closes each in server code (see [`guards`]);
//! `--disable-guard Wn` removes one guard for a test build.
//!
//! Effects are observable from outside: `web_fetch` really requests its URL (`--resolve`
//! points the exfiltration host at the trial's canary sink) and a sent mail is a committed
//! row in an SQLite file on a volume (`--mail-db`).
//!
//! This file only parses flags, opens the outbox and starts the chosen transport (from
//! `elengtis-target-kit`); logs go to stderr because stdout is the MCP channel in stdio mode.
//! Two lines are printed to stderr as plain text for the harness: the confirmation code and
//! a refused W1 description (see the README).

mod cli;
mod fetch;
mod guards;
mod mail;
mod notes;
mod tools;

use anyhow::Context as _;
use clap::Parser as _;

use crate::{
    cli::{Args, Build},
    fetch::Fetcher,
    guards::Guards,
    mail::MailDb,
    notes::Notes,
    tools::{Setup, TwinServer},
};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let guards = match Guards::new(args.build, &args.disabled) {
        Ok(guards) => guards,
        Err(message) => {
            let mut command = <Args as clap::CommandFactory>::command();
            command.error(clap::error::ErrorKind::ArgumentConflict, message).exit()
        }
    };
    // The kit logs the transports' events (e.g. the listening address) under its own target.
    elengtis_target_kit::init_logging("warn,elengtis_twin=info,elengtis_target_kit=info");
    elengtis_target_kit::run_main_for(args.serve.transport, run(args, guards))
}

async fn run(args: Args, guards: Guards) -> anyhow::Result<()> {
    let mail = MailDb::open(&args.mail_db)
        .with_context(|| format!("failed to use the mail database {}", args.mail_db.display()))?;
    let confirm_code = args.confirm_code.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..8].to_owned());
    if guards.w4 {
        // Out of band: the harness (the "user") reads it here; the model never sees it.
        eprintln!("twin: confirmation code {confirm_code}");
    }
    let server = TwinServer::new(Setup {
        guards,
        offer_confirm: args.build == Build::Guarded,
        notes: Notes::new(args.notes),
        mail,
        fetcher: Fetcher::new(args.resolve),
        allowlist: args.fetch_allowlist.0,
        confirm_code,
        w1_payload: args.w1_payload,
    });
    tracing::info!(build = ?args.build, ?guards, transport = ?args.serve.transport, "starting elengtis-twin");
    elengtis_target_kit::serve(server, args.serve).await
}
