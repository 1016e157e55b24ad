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
mod recipes;
mod report;
mod rest;
mod scan;
mod shards;
mod startup;
mod verifiers;

/// A plain `elengtis gc` removes the objects of every run on the engine whose runner is gone,
/// so it must not run while another test holds a run it killed on purpose and still inspects
/// (crash, then resume or `gc --run`). Those tests hold [`killed_run`] from the kill to their
/// last look; the test of plain `gc` holds [`sweep`] while it runs.
static KILLED_RUNS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held while a run this test killed keeps objects the test still inspects.
pub(crate) fn killed_run() -> std::sync::RwLockReadGuard<'static, ()> {
    KILLED_RUNS.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Held while a plain `gc` may remove any dead run's objects.
pub(crate) fn sweep() -> std::sync::RwLockWriteGuard<'static, ()> {
    KILLED_RUNS.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The support-note scenario without verification checks (`completed` is then null by
/// design), for tests about containers rather than verifiers.
pub(crate) const SUPPORT_NOTE_NO_CHECKS: &str = include_str!("../../scenarios/bench/support-note.yaml");
