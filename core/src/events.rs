//! What the engine reports while it works. The engine never prints: it emits these events,
//! and the command line renders them (a progress display on a terminal, warnings as lines
//! otherwise) or writes them to an events file, one [`EventLine`] per line, for scripts and
//! dashboards (`--events FILE`, see docs/events.md).

use schemars::JsonSchema;
use serde::Serialize;

use crate::agent::Termination;
use crate::records::{EvidenceStatus, FailureClass};

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
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
        /// The run.
        run_id: String,
        /// The trial.
        trial_id: String,
        /// The attempt.
        attempt_id: String,
    },
    /// An attempt entered one of its phases (in phase order; a phase that does not run is
    /// not reported).
    TrialPhase {
        /// The run.
        run_id: String,
        /// The trial.
        trial_id: String,
        /// The attempt.
        attempt_id: String,
        /// Which phase.
        phase: PhaseKind,
    },
    /// An attempt was recorded (its row is in `runs.jsonl`).
    TrialFinished {
        /// The run.
        run_id: String,
        /// The trial.
        trial_id: String,
        /// The attempt.
        attempt_id: String,
        /// What the attempt found, in one word (from `evidence_status` and `completed`).
        outcome: Outcome,
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
    /// One target's breaker tripped: it failed the manifest's `max_consecutive_target_failures` trials, so its
    /// remaining trials are not started (those in flight finish and are recorded); the other
    /// targets' trials go on.
    TargetStopped {
        /// The run.
        run_id: String,
        /// The target's id.
        target: String,
        /// Why, with its last failed trial and that trial's evidence file.
        reason: String,
    },
    /// The run stops starting trials (the ones in flight finish and are recorded).
    RunStopping {
        /// The run.
        run_id: String,
        /// Why.
        reason: String,
    },
    /// The run ended; `summary.txt` is written.
    RunFinished {
        /// The run.
        run_id: String,
        /// How it ended.
        end: RunEnd,
        /// Why it did not complete (absent when complete).
        message: Option<String>,
        /// Trials in the matrix.
        total: usize,
        /// Attempts this invocation recorded.
        attempts: usize,
        /// Each trial's final attempt (its last complete one, else its last) by outcome,
        /// over the whole matrix (earlier invocations' rows included).
        outcomes: OutcomeCounts,
    },
}

/// The phases of an attempt, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// Start the target (a stdio child, or a container) and open its MCP session.
    Launch,
    /// The scenario's setup actions.
    Setup,
    /// The agent loop against the target's tools (absent for model-free campaigns).
    Exercise,
    /// Safety and proposal rules over the recorded tool calls.
    Judge,
    /// The scenario's checks.
    Verify,
    /// The scenario's cleanup actions.
    Cleanup,
    /// Close the session and take the target down.
    Teardown,
}

impl PhaseKind {
    /// Every phase, in order.
    pub const ALL: [PhaseKind; 7] = [
        PhaseKind::Launch,
        PhaseKind::Setup,
        PhaseKind::Exercise,
        PhaseKind::Judge,
        PhaseKind::Verify,
        PhaseKind::Cleanup,
        PhaseKind::Teardown,
    ];
}

/// What a recorded attempt found, in one word: the words of the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A complete attempt whose checks found the attack completed (`completed: true`).
    Completed,
    /// A complete attempt whose checks found it not completed (`completed: false`): the
    /// target or model resisted.
    NotCompleted,
    /// A complete attempt with no verified outcome (`completed: null`: no checks, or a
    /// model-free campaign).
    Unknown,
    /// An attempt that does not count (`evidence_status` not `complete`): a setup, target,
    /// provider or verifier failure; the summary lists it "without a complete attempt".
    Incomplete,
}

impl Outcome {
    /// The outcome of an attempt with this evidence status and verified outcome.
    pub fn of(evidence_status: EvidenceStatus, completed: Option<bool>) -> Outcome {
        match (evidence_status, completed) {
            (EvidenceStatus::Complete, Some(true)) => Outcome::Completed,
            (EvidenceStatus::Complete, Some(false)) => Outcome::NotCompleted,
            (EvidenceStatus::Complete, None) => Outcome::Unknown,
            _ => Outcome::Incomplete,
        }
    }

    /// The words shown for it (as in the summary).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::NotCompleted => "not completed",
            Outcome::Unknown => "unknown",
            Outcome::Incomplete => "incomplete",
        }
    }
}

/// Trials by the outcome of their final attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct OutcomeCounts {
    /// `completed: true`.
    pub completed: usize,
    /// `completed: false`.
    pub not_completed: usize,
    /// Complete, `completed: null`.
    pub unknown: usize,
    /// No complete attempt.
    pub incomplete: usize,
    /// No attempt at all (the run stopped or was interrupted first).
    pub not_run: usize,
}

impl OutcomeCounts {
    /// Count one more attempt of this outcome.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Completed => self.completed += 1,
            Outcome::NotCompleted => self.not_completed += 1,
            Outcome::Unknown => self.unknown += 1,
            Outcome::Incomplete => self.incomplete += 1,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every trial has a complete attempt.
    Complete,
    /// Some trials have no complete attempt.
    Incomplete,
    /// The run stopped early (a failing target, the spend cap, the step budget).
    Stopped,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// One line of an events file: the event with the time it was written.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventLine<'a> {
    /// When the event was written (RFC 3339, UTC).
    pub ts: String,
    /// The event (its fields beside `ts`).
    #[serde(flatten)]
    pub event: &'a Event,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_that_does_not_count_is_incomplete_whatever_its_checks_said() {
        assert_eq!(Outcome::of(EvidenceStatus::Complete, Some(true)), Outcome::Completed);
        assert_eq!(Outcome::of(EvidenceStatus::Complete, Some(false)), Outcome::NotCompleted);
        assert_eq!(Outcome::of(EvidenceStatus::Complete, None), Outcome::Unknown);
        assert_eq!(Outcome::of(EvidenceStatus::Incomplete, Some(true)), Outcome::Incomplete);
        assert_eq!(Outcome::of(EvidenceStatus::Incomplete, None), Outcome::Incomplete);
    }

    #[test]
    fn an_event_line_carries_its_time_beside_the_events_fields() {
        let event = Event::TrialPhase {
            run_id: "r".into(),
            trial_id: "t".into(),
            attempt_id: "a".into(),
            phase: PhaseKind::Exercise,
        };
        let line =
            serde_json::to_value(EventLine { ts: "2026-01-01T00:00:00Z".into(), event: &event }).expect("serialise");
        assert_eq!(
            line,
            serde_json::json!({"ts": "2026-01-01T00:00:00Z", "event": "trial_phase", "run_id": "r",
                               "trial_id": "t", "attempt_id": "a", "phase": "exercise"})
        );
    }

    /// `docs/events.md`, which describes the events file.
    const EVENTS_DOC: &str = include_str!("../../docs/events.md");

    #[test]
    fn the_events_doc_describes_every_event_and_each_of_its_fields() {
        let schema = crate::jsonschema::schema_for::<EventLine<'static>>();
        let variants = schema.get("oneOf").and_then(serde_json::Value::as_array).expect("one schema per event");
        assert_eq!(variants.len(), 8, "every event kind");
        for variant in variants {
            let name = variant["properties"]["event"]["const"].as_str().expect("the event's name");
            let heading = format!("\n### `{name}`\n");
            let start =
                EVENTS_DOC.find(&heading).unwrap_or_else(|| panic!("docs/events.md has no section {heading:?}"));
            let rest = &EVENTS_DOC[start + heading.len()..];
            let section = &rest[..rest.find("\n### ").unwrap_or(rest.len())];
            let fields = variant["properties"].as_object().expect("the event's fields");
            for field in fields.keys().filter(|f| *f != "event") {
                assert!(
                    section.contains(&format!("| `{field}` |")),
                    "docs/events.md, `{name}`, does not describe `{field}`"
                );
            }
        }
        for phase in PhaseKind::ALL {
            let name = serde_json::to_value(phase).expect("a phase name");
            let name = name.as_str().expect("a string");
            assert!(
                EVENTS_DOC.contains(&format!("| `{name}` |")),
                "docs/events.md does not describe the phase `{name}`"
            );
        }
    }
}
