//! Independent effect verifiers for elengtis trials.
//!
//! # Trust boundary
//!
//! Everything in this crate runs inside the **trusted runner**. Scenario
//! `setup`, `verify` and `cleanup` phases use it to look at the world
//! directly: an `http_request` action is sent by the runner's own HTTP client
//! to the URL the scenario names, never through the audited MCP server and
//! never through the model. A verdict built from these answers therefore does
//! not depend on what the agent claims or on the audited server's code.
//!
//! Secrets (header values read from the environment) are wrapped in
//! [`SecretValue`] and never appear in `Debug` output, error messages, log
//! lines or evidence records; [`redacted_input`] builds the evidence form of
//! a request.
//!
//! The [`sqlite`] module answers `container_sqlite_query` actions on a
//! snapshot of a database the sandbox layer copied out of a frozen container;
//! it takes bytes and never talks to Docker. The [`file`] module likewise reads the archive
//! of one file (or a small directory listing) the sandbox layer downloaded for a
//! `container_file` action, and builds the document its assertions see.
//!
//! # TLS
//!
//! The workspace compiles rustls with the `ring` provider and no built-in
//! default. [`HttpClient::new`] installs `ring` as the process-wide default
//! provider if no provider is installed yet (idempotent); a binary that wants
//! another provider must install it before building the first client.

pub mod file;
#[cfg(feature = "http")]
mod http;
pub mod sqlite;

#[cfg(feature = "http")]
pub use http::{
    HttpClient, HttpClientBuildError, HttpError, HttpErrorKind, HttpLimits, HttpRequestSpec, HttpResponseRecord,
    Method, REDACTED, SecretValue, build_client, is_valid_header_name, redacted_input,
};
pub use sqlite::{QueryRecord, SnapshotFiles, SqliteError, SqliteLimits, check_query, query_snapshot};
