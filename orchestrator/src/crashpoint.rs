//! Crashpoints: a test hook that stops the runner in a named phase so that a test can kill
//! it there with SIGKILL (`tests/docker/crash.rs`, `tests/cli/crash.rs`).
//!
//! When the environment variable `ELENGTIS_CRASHPOINT` is `PHASE` or `PHASE:N`, the N-th
//! time (default the first; counted over the whole process, all trials together) the runner
//! reaches `PHASE` it writes `elengtis crashpoint reached: PHASE` to stderr and then blocks
//! that thread forever. It never exits or aborts by itself: the point is an external kill at
//! exactly that place. The variable is read once; when it is unset a call costs one atomic
//! load. The places are the variants of [`CrashPoint`].

use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms a crashpoint.
pub const ENV: &str = "ELENGTIS_CRASHPOINT";

/// Every place the runner reports, in the order a trial reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// The trial network exists, no container yet (isolated targets).
    NetworkCreate,
    /// The target container exists, not started (isolated targets).
    ContainerCreate,
    /// The target container runs, no MCP handshake yet (isolated targets).
    Start,
    /// The MCP handshake is done (every transport).
    Initialize,
    /// After a tool call of the agent, before its next one.
    Exercise,
    /// Before the verifiers run.
    Verify,
    /// The session is over, the target about to be torn down (with `--prepare-ahead`, off
    /// the critical path while the next trial runs).
    Teardown,
    /// The attempt's evidence is renamed into place, its row not yet appended.
    EvidenceWrite,
    /// Half of the row's bytes are written to runs.jsonl (a torn tail), no newline, no fsync.
    RowAppend,
}

impl CrashPoint {
    /// Every crashpoint, in the order a trial reaches them.
    pub const ALL: [CrashPoint; 9] = [
        CrashPoint::NetworkCreate,
        CrashPoint::ContainerCreate,
        CrashPoint::Start,
        CrashPoint::Initialize,
        CrashPoint::Exercise,
        CrashPoint::Verify,
        CrashPoint::Teardown,
        CrashPoint::EvidenceWrite,
        CrashPoint::RowAppend,
    ];

    /// The name `ELENGTIS_CRASHPOINT` uses.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::NetworkCreate => "network-create",
            CrashPoint::ContainerCreate => "container-create",
            CrashPoint::Start => "start",
            CrashPoint::Initialize => "initialize",
            CrashPoint::Exercise => "exercise",
            CrashPoint::Verify => "verify",
            CrashPoint::Teardown => "teardown",
            CrashPoint::EvidenceWrite => "evidence-write",
            CrashPoint::RowAppend => "row-append",
        }
    }
}

#[derive(Debug)]
struct Armed {
    phase: String,
    nth: u64,
    seen: AtomicU64,
}

impl Armed {
    /// Count one arrival at the armed phase; whether it is the N-th.
    fn arrive(&self) -> bool {
        self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.nth
    }
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| std::env::var(ENV).ok().and_then(|v| parse(&v))).as_ref()
}

fn parse(value: &str) -> Option<Armed> {
    let (phase, nth) = match value.rsplit_once(':') {
        Some((phase, n)) => (phase, n.trim().parse::<u64>().ok().filter(|&n| n > 0)?),
        None => (value, 1),
    };
    let phase = phase.trim();
    (!phase.is_empty()).then(|| Armed { phase: phase.to_owned(), nth, seen: AtomicU64::new(0) })
}

/// Whether this arrival at `phase` is the armed one.
fn hit(phase: &str) -> bool {
    match armed() {
        Some(armed) if armed.phase == phase => armed.arrive(),
        _ => false,
    }
}

fn halt(phase: &str) -> ! {
    {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "elengtis crashpoint reached: {phase}");
        let _ = err.flush();
    }
    loop {
        std::thread::park();
    }
}

/// Block forever here if `ELENGTIS_CRASHPOINT` names this arrival at `point`.
pub fn reach(point: CrashPoint) {
    if hit(point.name()) {
        halt(point.name());
    }
}

/// Like [`reach`], but first write the first half of `bytes` to `out` (a torn write, as a
/// kill in the middle of a `write` would leave).
pub fn reach_torn(point: CrashPoint, out: &mut impl std::io::Write, bytes: &[u8]) {
    if hit(point.name()) {
        let _ = out.write_all(&bytes[..bytes.len() / 2]);
        let _ = out.flush();
        halt(point.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_and_count_are_parsed() {
        let a = parse("verify").unwrap();
        assert_eq!((a.phase.as_str(), a.nth), ("verify", 1));
        let a = parse("row-append:3").unwrap();
        assert_eq!((a.phase.as_str(), a.nth), ("row-append", 3));
        assert!(parse("verify:0").is_none());
        assert!(parse("verify:x").is_none());
        assert!(parse("").is_none());
    }

    #[test]
    fn only_the_nth_arrival_hits() {
        let a = parse("start:2").unwrap();
        let hits: Vec<bool> = (0..4).map(|_| a.arrive()).collect();
        assert_eq!(hits, [false, true, false, false]);
    }

    #[test]
    fn unarmed_phases_do_not_block() {
        // The test process does not set the variable (or names another phase).
        for point in CrashPoint::ALL {
            if armed().is_none_or(|a| a.phase != point.name()) {
                reach(point);
            }
        }
    }
}
