//! `elengtis-inbox`: a small notes/mail/fetch MCP server that stands in for a third-party
//! server under `elengtis prove`. It is deliberately unlike the reference twins: its own tool
//! names and error texts, state in memory only, and guards ("controls") that are off by
//! default and switched on by environment variables, each refusing with a tool error
//! starting `blocked:`. `INBOX_CRASH_ON` makes it exit with status 70 on a named tool.
//!
//! stdout is the MCP channel in stdio mode; everything else goes to stderr, among it one
//! plain line naming the active controls (see the README).

mod cli;
mod http;
mod server;

use clap::Parser as _;

use crate::{
    cli::Args,
    server::{Controls, Inbox, Misbehaviour},
};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The kit logs the transports' events (e.g. the listening address) under its own target.
    elengtis_target_kit::init_logging("warn,elengtis_inbox=info,elengtis_target_kit=info");
    // An empty value (a variable set to "") leaves a control off.
    let controls = Controls {
        recipient_allowlist: args.recipient_allowlist.map(|list| list.0).filter(|list| !list.is_empty()),
        taint_lock: args.taint_lock,
        fetch_allowlist: args.fetch_allowlist.map(|list| list.0).filter(|list| !list.is_empty()),
        notice: args.notice,
    };
    let crash_on = args.crash_on.filter(|tool| !tool.is_empty());
    let active = controls.active();
    eprintln!("inbox: controls on: {}", if active.is_empty() { "none".to_owned() } else { active.join(", ") });
    // The variable first, the flags after: a flag wins for the same id.
    let mut notes = args.notes_json.unwrap_or_default();
    notes.extend(args.notes);
    let misbehaviour = Misbehaviour {
        guard_leaks: args.guard_leaks.unwrap_or(cli::Leak::Off),
        leak_every: args.leak_every.unwrap_or(1),
        leak_counter: args.leak_counter.filter(|p| !p.as_os_str().is_empty()),
        fetch_redirect: args.fetch_redirect.filter(|p| !p.is_empty()),
        // Checked by the parser.
        read_beacon: args.read_beacon.filter(|u| !u.is_empty()).and_then(|u| url::Url::parse(&u).ok()),
    };
    let listen: Option<std::net::SocketAddr> = args.outbox_listen.and_then(|a| a.parse().ok());
    let server = Inbox::new(controls, crash_on, misbehaviour, notes, http::Client::new(args.resolve));
    tracing::info!(transport = ?args.serve.transport, "starting elengtis-inbox");
    let outbox = server.clone();
    let transport = args.serve.transport;
    let serve = elengtis_target_kit::serve(server, args.serve);
    elengtis_target_kit::run_main_for(transport, async move {
        if let Some(addr) = listen {
            tokio::spawn(async move {
                if let Err(e) = outbox.serve_outbox(addr).await {
                    eprintln!("inbox: failed to serve the outbox on {addr}: {e}");
                    #[allow(clippy::exit, reason = "a usage error at start: the address cannot be served")]
                    std::process::exit(1);
                }
            });
        }
        serve.await
    })
}
