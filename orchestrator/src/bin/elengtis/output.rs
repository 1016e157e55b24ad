//! The command line's stdout and stderr, as a Unix filter treats them.
//!
//! `println!` panics when stdout is a pipe whose reader has gone (`elengtis … | head -1`),
//! and Rust ignores SIGPIPE, so such a write fails instead of ending the process. Every line
//! this binary prints goes through [`outln!`]/[`out!`] (stdout) or [`errln!`] (stderr)
//! instead: a write that fails marks the stream closed and later output to it is dropped, so
//! the command goes on and finishes its work (a run records every trial) without a panic.
//! [`exit`] then ends the process as a filter would: a command that succeeded but whose
//! stdout closed exits 141, the status a shell shows for a filter killed by SIGPIPE (128 +
//! 13; this binary does not kill itself: `unsafe` is forbidden here), a stdout that failed otherwise (a full
//! disk behind `> file`) is exit 6, and a command that failed for its own reason keeps its
//! code (docs/exit-codes.md).
//!
//! SIGPIPE stays ignored while the command runs: a stdio target that exits closes the pipe
//! the runner writes to, and that must be an error of the trial, never the runner's death.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Mutex;

use elengtis::exit_codes;

/// What went wrong with stdout, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Its reader went away (EPIPE).
    Closed,
    /// Another write error, e.g. a full disk.
    Failed(std::io::ErrorKind),
}

static STDOUT_FAILURE: Mutex<Option<Failure>> = Mutex::new(None);
static STDERR_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn stdout_failure() -> Option<Failure> {
    *STDOUT_FAILURE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes to stdout, unless an earlier write failed.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    let mut failure = STDOUT_FAILURE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if failure.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        *failure = Some(match e.kind() {
            std::io::ErrorKind::BrokenPipe => Failure::Closed,
            kind => Failure::Failed(kind),
        });
    }
}

/// Writes to stderr, unless an earlier write failed (a closed stderr is not reported:
/// there is nowhere to report it).
pub fn write_stderr(args: std::fmt::Arguments<'_>) {
    use std::sync::atomic::Ordering;
    if STDERR_FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut stderr = std::io::stderr().lock();
    if stderr.write_fmt(args).and_then(|()| stderr.flush()).is_err() {
        STDERR_FAILED.store(true, Ordering::Relaxed);
    }
}

/// `print!` that never panics.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!($($arg)*)) };
}

/// `println!` that never panics.
macro_rules! outln {
    () => { $crate::output::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    () => { $crate::output::write_stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {errln, out, outln};

/// Ends the process with `code`, as a filter whose stdout closed would end: see the module
/// documentation.
pub fn exit(code: i32) -> ExitCode {
    match stdout_failure() {
        Some(Failure::Closed) if code == exit_codes::SUCCESS => {
            ExitCode::from(exit_code_byte(exit_codes::STDOUT_CLOSED))
        }
        Some(Failure::Failed(kind)) if code == exit_codes::SUCCESS => {
            errln!("error: failed to write to stdout: {kind}");
            ExitCode::from(exit_code_byte(exit_codes::IO))
        }
        _ => ExitCode::from(exit_code_byte(code)),
    }
}

fn exit_code_byte(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(1)
}
