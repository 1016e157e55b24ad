//! Exit codes of the `elengtis` binary, in one place (documented in `docs/exit-codes.md`).

/// Everything asked for was done: for `run` and `example`, every trial has a complete attempt.
pub const SUCCESS: i32 = 0;
/// A run finished or stopped with incomplete trials (an infrastructure, verifier or provider
/// failure, a budget exhausted, or three consecutive failures on one target, which stop that
/// target's trials only), or a
/// preflight found a target that does not satisfy the campaign. Results are kept; fix the
/// cause and `run --resume`.
pub const RUN_INCOMPLETE: i32 = 1;
/// The command line is invalid (unknown flag, missing argument), a signing key cannot be used
/// (too short, or set but empty), or `analyze`/`report` inputs hold the same trials (without
/// `--dedupe`).
pub const USAGE: i32 = 2;
/// A campaign or scenario file is invalid (or not a readable regular UTF-8 file of at most
/// 8 MiB); nothing was contacted or created.
pub const INVALID_CONFIG: i32 = 3;
/// The results directory cannot be used (exists, names a file, cannot be created, locked,
/// corrupt or truncated, or from another version; its records do not hold together, or hold a
/// history no runner writes; with a key, not signed by it; `run --resume`: signed but resumed
/// without its key, or a results file with another hard link).
pub const RESULTS_DIR: i32 = 4;
/// The campaign is valid but cannot run here (a key, price, fixture directory, engine, image or runtime missing; an engine the gate refuses; a mechanism the runtime cannot support).
pub const UNAVAILABLE: i32 = 5;
/// Writing results failed (for example the disk is full); earlier records are intact.
pub const IO: i32 = 6;
/// `prove`, `gate`: at least one finding was REJECTED (its decided runs show it does not
/// discriminate reliably, or it did not survive the rewrites). Its report says why.
pub const REJECTED: i32 = 7;
/// `prove`, `gate`: nothing was rejected, but at least one finding is only STABLE, NOT PROVEN (it
/// reproduces, and nothing showed that a safeguard stops it, or the metamorphic stage was
/// skipped so nothing showed it survives rewrites).
pub const NOT_PROVEN: i32 = 8;
/// `prove`: a finding is NOT TESTED (too little was decided, or its verifier failed its
/// calibration); `ablate`: a control could not be classified. `gate`: the gate has nothing to
/// stand on — a fixture stale, absent, corrupt or of another version, a leg that decided
/// nothing, or (with `ELENGTIS_REQUIRE_GATE_RUN=1`) a finding that was skipped. Never a pass:
/// re-record the fixtures or fix the cause.
pub const NO_EVIDENCE: i32 = 9;
/// `verify`: nothing wrong was found, but the directory's integrity cannot be established: it
/// is of a format without a chain (the original 0.1.0's, or this tool's schema 1), or it is not
/// sealed while a seal was required (`--require-sealed`, or a key given in any way). Without a
/// key `analyze` and `report` still read such a directory (with a note); with one they refuse
/// it with this code; `run --resume` does not resume results without a chain.
pub const UNVERIFIED: i32 = 10;
/// Interrupted by Ctrl-C (SIGINT, 128 + 2); the current trial was not recorded. Resume
/// continues.
pub const INTERRUPTED: i32 = 130;
/// Stopped by SIGTERM (128 + 15, what `timeout` and CI runners expect); as [`INTERRUPTED`]
/// otherwise.
pub const TERMINATED: i32 = 143;

/// Whether the interruption a run saw was a SIGTERM (set by the run's signal handler).
static SIGTERM_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Record that the interruption was a SIGTERM.
pub fn note_sigterm() {
    SIGTERM_SEEN.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The exit code of an interrupted command: [`TERMINATED`] after a SIGTERM, else
/// [`INTERRUPTED`].
pub fn interrupted() -> i32 {
    if SIGTERM_SEEN.load(std::sync::atomic::Ordering::SeqCst) { TERMINATED } else { INTERRUPTED }
}
/// The command did what it was asked, but its stdout was closed before it printed everything
/// (the reader of a pipe went away: `elengtis … | head -1`): the status a shell shows for a
/// filter killed by SIGPIPE (128 + 13). Everything it writes to files is written. A command
/// that failed for its own reason keeps its own code.
pub const STDOUT_CLOSED: i32 = 141;
