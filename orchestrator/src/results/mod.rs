//! Result files: crash-safe documents, the append-only attempt log and the directory lock;
//! `verify`, which checks a results directory end to end (and which every reader goes
//! through); the seal a finished run writes, and the keys that sign it.

pub mod keys;
pub mod seal;
pub mod store;
pub mod verify;

/// The current time as the records write it: RFC 3339 in UTC (nanoseconds).
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
