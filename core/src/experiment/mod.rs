//! Live comparison experiments: models × engines × scenarios in randomised blocks, frozen as
//! a bundle of one-trial campaigns and a run order (`elengtis experiment plan`), then run in
//! that order under a spend cap (`elengtis experiment run`). See docs/experiments.md.
//!
//! This module is pure: the profile file ([`profiles`]), the cells, the seeded shuffle, the
//! cell names, each cell's campaign text and the `run-order.json` record ([`plan`]). Writing
//! the bundle and running it is the orchestrator's `experiment` module.

pub mod plan;
pub mod profiles;

pub use plan::{PlanSpec, PlannedRun, RunOrder, Scenario, expand, shuffle};
pub use profiles::{Pricing, Profile};
