//! Helpers for the reference targets' tests.
//!
//! With the `mcp` feature: an in-process MCP client over a duplex pipe, tool-call
//! shorthands, an HTTP harness on a free port, and checks of a built MCP server binary
//! (clean exits on stdin EOF and SIGTERM). Always: [`RunningBinary`] and
//! [`spawn_listening`], which run a built binary under plain `std::process` and read its
//! stdout lines, [`http_request`], a deliberately plain HTTP/1.1 client, and [`json_lines`]
//! for the request logs.
//!
//! They panic on failure, as test code does.

#[cfg(feature = "mcp")]
mod mcp;
mod process;

#[cfg(feature = "mcp")]
pub use self::mcp::*;
pub use self::process::{HttpResponse, RunningBinary, http_request, json_lines, spawn_listening};
