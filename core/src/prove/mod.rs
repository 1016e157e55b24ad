//! The validation engine's pure logic (`elengtis prove`): what a run of an attack seed on
//! either side of a differential means, whether the finding discriminates reliably and
//! survives rewrites, the verdict, and the reports.
//!
//! Nothing here runs anything: the runner (`orchestrator/src/prove/`) drives the legs in
//! containers and hands their rows and evidence to these functions.

pub mod filter;
pub mod leg;
pub mod metamorphic;
pub mod report;
pub mod rewrite;
pub mod sarif;
pub mod verdict;
