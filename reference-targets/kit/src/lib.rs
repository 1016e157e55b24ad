//! Serving code shared by the elengtis reference targets.
//!
//! With the `mcp` feature (on by default), for the reference MCP servers (`elengtis-fixture`,
//! `elengtis-notes`, …): the stdio and Streamable HTTP transports with clean shutdown, the
//! transport flags of their command lines, and the runtime setup of their `main`, all
//! generic over the server's `rmcp::ServerHandler`; a server crate keeps only its tools and
//! its command line.
//!
//! Without it, for the plain HTTP targets (`elengtis-model-server`, `elengtis-rest-agent`,
//! `elengtis-sink`), which turn the default features off and so never build rmcp: [`http`]
//! (the `{"listening":"ADDR"}` ready line, serving an axum router with a graceful stop) and
//! [`stop`] (SIGTERM, SIGINT, the end of stdin). The stderr-only logging is for both.
//!
//! The kit is serving code only: no HTTP or MCP client of the trusted runner goes through
//! it, and it shares no code with the runner (it depends on neither the orchestrator nor
//! the verifiers).
//!
//! With the `testing` feature, the `testing` module holds the helpers the targets' tests
//! share.

#[cfg(feature = "mcp")]
mod cli;
pub mod http;
#[cfg(feature = "mcp")]
mod serve;
#[cfg(unix)]
pub mod stop;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::{future::Future, process::ExitCode, time::Duration};

use anyhow::Context as _;

#[cfg(feature = "mcp")]
pub use crate::{
    cli::{Transport, TransportArgs, serve},
    serve::{HttpOptions, run_http, run_stdio, serve_http, shutdown_signal},
};

/// How long [`run_main`] waits for blocking tasks when the runtime shuts down.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(500);

/// Sends log records to stderr (stdout is the MCP channel in stdio mode, and the ready line
/// or the records of the plain HTTP targets), without colours.
///
/// `RUST_LOG` overrides `default_filter`. The kit logs under its own target
/// (`elengtis_target_kit`), among others the `listening for streamable HTTP` line carrying
/// the bound `address=`, so a default filter should name it too, e.g.
/// `"warn,my_server=info,elengtis_target_kit=info"`.
pub fn init_logging(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .init();
}

/// Runs `main` on a new multi-threaded runtime and returns its result.
///
/// Afterwards the runtime is shut down without waiting more than [`SHUTDOWN_TIMEOUT`] for
/// blocking tasks: a blocking stdin read cannot be cancelled, and the process must not hang
/// on it after a shutdown signal.
pub fn run_main(main: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build();
    block_on(runtime, main)
}

/// Like [`run_main`], on the runtime that suits `transport`: one thread for stdio (a single
/// session, started once per trial, where the worker threads of a multi-threaded runtime
/// were ≈0.8 ms of the ≈1.9 ms of CPU a start cost: docs/performance.md, "stdio trials at
/// scale"), a multi-threaded one for streamable HTTP (concurrent sessions).
#[cfg(feature = "mcp")]
pub fn run_main_for(transport: Transport, main: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    match transport {
        Transport::Stdio => block_on(tokio::runtime::Builder::new_current_thread().enable_all().build(), main),
        Transport::StreamableHttp => run_main(main),
    }
}

/// Runs `main` on a single-threaded runtime, for a target whose work is computed in
/// microseconds and whose waits are timers, and turns its result into the exit code: 0, or
/// 1 after `PROGRAM: ERROR` (with its causes) on stderr, as when the runtime cannot start.
pub fn run_single_threaded(program: &str, main: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
        .and_then(|runtime| runtime.block_on(main));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{program}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn block_on(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    main: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let runtime = runtime.context("failed to start the async runtime")?;
    let result = runtime.block_on(main);
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    result
}
