//! Serving code shared by the elengtis reference MCP servers (`elengtis-fixture`,
//! `elengtis-notes`): the stdio and Streamable HTTP transports with clean shutdown, the
//! transport flags of their command lines, the stderr-only logging, and the runtime setup
//! of their `main`.
//!
//! Everything is generic over the server's [`rmcp::ServerHandler`]; a server crate keeps
//! only its tools and its command line. The kit shares no code with the trusted runner
//! (it depends on neither the orchestrator nor the verifiers).
//!
//! With the `testing` feature, the `testing` module holds the helpers the servers' tests share.

mod cli;
mod serve;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::{future::Future, time::Duration};

use anyhow::Context as _;

pub use crate::{
    cli::{Transport, TransportArgs, serve},
    serve::{HttpOptions, run_http, run_stdio, serve_http, shutdown_signal},
};

/// How long [`run_main`] waits for blocking tasks when the runtime shuts down.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(500);

/// Sends log records to stderr (stdout is the MCP channel in stdio mode), without colours.
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
pub fn run_main_for(transport: Transport, main: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    match transport {
        Transport::Stdio => block_on(tokio::runtime::Builder::new_current_thread().enable_all().build(), main),
        Transport::StreamableHttp => run_main(main),
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
