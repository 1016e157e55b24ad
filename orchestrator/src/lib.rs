//! elengtis: audit MCP servers, and the agents that use them, for prompt-injection
//! weaknesses — and prove each finding before anyone relies on it.
//!
//! The crate is the engine behind the `elengtis` binary. A campaign ([`format`]) expands
//! into a stable trial matrix ([`matrix`]); each attempt ([`trial`]) opens a target
//! ([`target`]), runs trusted actions ([`actions`]), lets a model use the offered tools
//! ([`engine`]), judges the recorded calls with declarative rules ([`judge`], [`rules`]) and
//! records everything crash-safely ([`results`], [`run`]). [`analyze`] summarises result
//! directories with honest denominators.

pub mod actions;
pub mod analyze;
pub mod bench;
pub mod crashpoint;
pub mod engine;
pub mod examples;
pub mod exit_codes;
pub mod preflight;
pub mod relay;
pub mod results;
pub mod run;
pub mod sandbox;
pub mod sink;
pub mod target;
pub mod trial;
