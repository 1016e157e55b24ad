//! What the engine reports while it works. The engine never prints: it emits these events,
//! and the command line renders them (a progress display on a terminal, lines otherwise, or
//! one JSON object per line for scripts).

use serde::Serialize;

use crate::agent::Termination;
use crate::records::{EvidenceStatus, FailureClass};

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Something a user must know before results are trusted (an engine accepted despite
    /// known bugs, a sandbox that isolates nothing).
    Warning {
        /// What to know.
        message: String,
    },
    /// A run (new or resumed) begins its trials.
    RunStarted {
        /// The run.
        run_id: String,
        /// Trials in the matrix.
        total: usize,
        /// Trials this invocation will attempt.
        todo: usize,
        /// Trials run at once.
        jobs: usize,
    },
    /// An attempt started.
    TrialStarted {
        /// The trial.
        trial_id: String,
        /// The attempt.
        attempt_id: String,
    },
    /// An attempt was recorded.
    TrialFinished {
        /// The trial.
        trial_id: String,
        /// The attempt.
        attempt_id: String,
        /// How its agent phase ended.
        termination: Termination,
        /// Whether it counts.
        evidence_status: EvidenceStatus,
        /// Why not.
        failure_class: Option<FailureClass>,
        /// Proposal judgement.
        proposed: Option<bool>,
        /// Verified outcome.
        completed: Option<bool>,
        /// Wall time, ms.
        duration_ms: Option<f64>,
    },
    /// The run stops starting trials (the ones in flight finish and are recorded).
    RunStopping {
        /// Why.
        reason: String,
    },
}

/// Where events go.
pub trait EventSink: Send + Sync + std::fmt::Debug {
    /// Take one event. Must not block for long: it is called from the run loop.
    fn emit(&self, event: &Event);
}

/// Drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _: &Event) {}
}
