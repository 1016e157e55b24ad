//! Isolated-container trials against the real Docker engine. Every test here needs the
//! engine; without one they are skipped locally and fail in CI (`CI` set).

mod isolated;
mod mounted_socket;
mod verifiers;
