//! Isolated-container trials against the real Docker engine. Every test here needs the
//! engine; without one they are skipped locally and fail in CI (`CI` set).

mod abuse;
mod crash;
mod egress;
mod egress_proxy;
mod engine_gate;
mod gate;
mod gc;
mod init;
mod isolated;
mod live;
mod mounted_socket;
mod prove;
mod prove_shim;
mod report;
mod shards;
mod startup;
mod verifiers;

/// The support-note scenario without verification checks (`completed` is then null by
/// design), for tests about containers rather than verifiers.
pub(crate) const SUPPORT_NOTE_NO_CHECKS: &str = include_str!("../../scenarios/bench/support-note.yaml");
