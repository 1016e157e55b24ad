//! `elengtis-hostile`: a deliberately misbehaving MCP server, used only by the elengtis tests
//! to show that a trial container holds (see README.md).
//!
//! Modes: the MCP server (stdio or streamable HTTP, the kit's `TransportArgs`) with tools
//! that probe the network and abuse resources; `probe --json SPEC` (the probes as a one-shot
//! program, for positive-control containers); `--exit-at-once` (exit 3 before any MCP
//! traffic); `--never-initialize` (read stdin / accept HTTP connections, never answer).

mod abuse;
mod probe;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use elengtis_target_kit::{Transport, TransportArgs};
use tokio::io::AsyncReadExt as _;

use crate::tools::{FORK_BOMB_CAP, HostileServer};

/// Exit status of `--exit-at-once`.
const EXIT_AT_ONCE_STATUS: u8 = 3;

/// A deliberately misbehaving MCP server (elengtis tests only).
#[derive(Debug, Parser)]
#[command(name = "elengtis-hostile", version, about)]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,

    /// Exit with status 3 at once, before any MCP traffic.
    #[arg(long)]
    exit_at_once: bool,

    /// Read stdin (or accept HTTP connections and read them) but never answer `initialize`.
    #[arg(long)]
    never_initialize: bool,

    /// Before serving: try the escapes a stdio sandbox must stop (TCP connects, file
    /// creation, capabilities) and print the outcomes on stderr as one line
    /// `ELENGTIS-HOSTILE-PROBE {json}`. SPEC: `{"tcp": ["ADDR:PORT", …], "write": [PATH, …]}`.
    #[arg(long, value_name = "SPEC")]
    escape_probe: Option<String>,

    /// Before serving: start a child (`sleep 300`) and a grandchild in a new session (escaping
    /// the process group), and write their pids and this process's into DIR (`child.pid`,
    /// `escaped.pid`, `server.pid`).
    #[arg(long, value_name = "DIR")]
    spawn_children: Option<std::path::PathBuf>,

    /// Internal: the fork bomb's child process.
    #[arg(long = "fork-bomb-child", hide = true)]
    fork_bomb_child: bool,

    // `--transport`, `--port`, `--bind`, `--path` (shared with the other reference servers).
    #[command(flatten)]
    serve: TransportArgs,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Run egress probes once and print the outcomes as a JSON array on stdout.
    Probe {
        /// The probes: a JSON array of {name, kind: tcp|dns|icmp, target, resolver?, timeout_ms?}.
        #[arg(long, value_name = "SPEC")]
        json: String,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.exit_at_once {
        return ExitCode::from(EXIT_AT_ONCE_STATUS);
    }
    if args.fork_bomb_child {
        println!("{}", abuse::fork_bomb_child(FORK_BOMB_CAP));
        return ExitCode::SUCCESS;
    }
    if let Some(Mode::Probe { json }) = &args.mode {
        return match serde_json::from_str::<Vec<probe::Spec>>(json) {
            Ok(specs) => {
                let outcomes = probe::run_all(&specs);
                println!("{}", serde_json::to_string(&outcomes).unwrap_or_default());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("failed to read the probe spec: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Some(spec) = &args.escape_probe {
        match serde_json::from_str::<abuse::EscapeSpec>(spec) {
            Ok(spec) => eprintln!("ELENGTIS-HOSTILE-PROBE {}", abuse::escape_probe(&spec)),
            Err(e) => {
                eprintln!("failed to read the escape probe spec: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(dir) = &args.spawn_children
        && let Err(e) = abuse::spawn_children(dir)
    {
        eprintln!("failed to spawn children: {e}");
        return ExitCode::from(2);
    }
    elengtis_target_kit::init_logging("warn,elengtis_hostile=info,elengtis_target_kit=info");
    match elengtis_target_kit::run_main(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elengtis-hostile: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    tracing::info!(transport = ?args.serve.transport, never_initialize = args.never_initialize, "starting elengtis-hostile");
    if !args.never_initialize {
        return elengtis_target_kit::serve(HostileServer::new(), args.serve).await;
    }
    let silent = async {
        match args.serve.transport {
            Transport::Stdio => {
                // Read and drop everything; end when stdin closes.
                let mut stdin = tokio::io::stdin();
                let mut buffer = vec![0_u8; 64 * 1024];
                while stdin.read(&mut buffer).await.is_ok_and(|n| n > 0) {}
                Ok(())
            }
            Transport::StreamableHttp => {
                let listener = tokio::net::TcpListener::bind((args.serve.bind, args.serve.port)).await?;
                tracing::info!(address = %listener.local_addr()?, "listening (never answering)");
                loop {
                    let (mut socket, _) = listener.accept().await?;
                    tokio::spawn(async move {
                        let mut buffer = vec![0_u8; 64 * 1024];
                        while socket.read(&mut buffer).await.is_ok_and(|n| n > 0) {}
                    });
                }
            }
        }
    };
    tokio::select! {
        result = silent => result,
        () = elengtis_target_kit::shutdown_signal() => Ok(()),
    }
}
