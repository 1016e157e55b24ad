//! elengtis: audit MCP servers, and the agents that use them, for prompt-injection
//! weaknesses — and prove each finding before anyone relies on it.
//!
//! The crate is the engine behind the `elengtis` binary, built over the pure core
//! ([`elengtis_core`]: formats, references, rules, the judge, the matrix, result records).
//! A trial is phases over small interfaces ([`trial`]):
//!
//! - a [`model::Model`] answers requests (the scripted model; providers and replay later);
//! - a [`toolhost::ToolHost`] lists and calls tools (the MCP session);
//! - an [`agent::AgentLoop`] drives the model against the tool host within a budget;
//! - a [`sandbox::SandboxBackend`] runs container targets (Docker; a fake one for tests).
//!
//! [`run`] executes a matrix of trials crash-safely ([`results`]) and reports through events
//! ([`elengtis_core::events`]); the library never prints. [`preflight`] (with
//! [`calibrate`]), [`bench`] and
//! [`examples`] are the other commands' engines; `analyze` is pure and lives in the core
//! ([`elengtis_core::analysis`]).

pub mod actions;
pub mod agent;
pub mod bench;
pub mod calibrate;
pub mod capture;
pub mod clock;
pub mod crashpoint;
pub mod error;
pub mod examples;
pub mod exit_codes;
pub mod experiment;
pub mod gate;
pub mod init;
pub mod inventory;
pub mod merge;
pub mod model;
pub mod preflight;
pub mod prove;
pub mod report;
pub mod results;
pub mod run;
pub mod sandbox;
pub mod sarif;
pub mod scan;
pub mod sink;
pub mod toolhost;
pub mod trial;
