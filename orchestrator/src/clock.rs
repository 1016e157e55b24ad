//! The runner's clock for attempt timelines ([`elengtis_core::records::Timeline`]):
//! microseconds on the process's monotonic clock, counted from the first reading. Calls,
//! sightings and the canary sink's arrivals are stamped with it, so they can be ordered
//! against each other within an attempt.

use std::sync::LazyLock;
use std::time::Instant;

static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Now, in microseconds since the process's first reading of this clock.
pub fn now_us() -> u64 {
    u64::try_from(ORIGIN.elapsed().as_micros()).unwrap_or(u64::MAX)
}
