//! Result files: crash-safe documents, the append-only attempt log and the directory lock;
//! and `verify`, which checks a results directory end to end.

pub mod store;
pub mod verify;
