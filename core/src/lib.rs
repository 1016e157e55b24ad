//! The pure core of elengtis: what a campaign *is* and what a trial *means*, with no async
//! runtime, no Docker, no MCP SDK and no HTTP client. The engine (`elengtis`) runs trials
//! against these types; the report, `prove` and SARIF read them.
//!
//! Layers, each using only those above it:
//!
//! 1. [`format`] — YAML text → spanned tree → typed campaign, scenario and script (strict,
//!    positions on every error); [`rules`] — JSON Pointer and the Python-semantics operators;
//!    [`refs`] — references and prompt templates.
//! 2. [`judge`] — the one evaluator: rules over recorded calls, assertions over responses.
//! 3. [`validate`] — semantic checks before anything runs (rule examples run through the
//!    judge); [`load`] — files → a validated [`format::Bundle`].
//! 4. [`matrix`] — the stable trial matrix; [`schema`] — JSON Schemas generated from the types.
//!
//! Beside them: [`agent`] — what an agent loop observes; [`records`] — the typed result
//! records (row, evidence, manifest) every writer and reader shares, and what an attempt
//! means; [`events`] — what the engine reports; [`analysis`] — results directories →
//! `summary.json` and `summary.md`, over [`stats`] (Wilson interval, means, a reproducible
//! bootstrap); [`jsonschema`] — how every schema is generated; [`toolargs`] — tool-call
//! arguments checked against the tools a target lists (preflight, `validate --tools`).

pub mod agent;
pub mod analysis;
pub mod decisive;
pub mod events;
pub mod experiment;
pub mod format;
pub mod jsonschema;
pub mod judge;
pub mod load;
pub mod matrix;
pub(crate) mod nullable;
pub mod partition;
pub mod prove;
pub mod records;
pub mod refs;
pub mod rules;
pub mod schema;
pub mod stats;
pub mod toolargs;
pub mod validate;
