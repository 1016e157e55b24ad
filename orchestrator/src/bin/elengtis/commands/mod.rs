//! The subcommands of `elengtis`: one module per command, each with its flags and what runs it.

mod common;

pub(crate) mod ablate;
pub(crate) mod analyze;
pub(crate) mod bench;
pub(crate) mod example;
pub(crate) mod experiment;
pub(crate) mod gate;
pub(crate) mod gc;
pub(crate) mod images;
pub(crate) mod init;
pub(crate) mod keygen;
pub(crate) mod merge;
pub(crate) mod preflight;
pub(crate) mod prove;
pub(crate) mod relay_mux;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod scan;
pub(crate) mod schema;
pub(crate) mod validate;
pub(crate) mod verify;
