//! Result files: crash-safe documents, the append-only attempt log and the directory lock.

pub mod store;
