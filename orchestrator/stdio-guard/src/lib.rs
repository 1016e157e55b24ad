//! The stdio guard of elengtis: the process between the runner and each stdio target, its
//! exec stage with the light sandbox, and the records that let a leftover target be reaped.
//!
//! Two executables run this code under the same hidden subcommands
//! ([`GUARD_COMMAND`], [`EXEC_COMMAND`]): `elengtis-stdio-guard`, small and quick to start,
//! which the runner prefers when it lies beside `elengtis`, and `elengtis` itself. The guard
//! starts its exec stage with the executable it runs from. Both stay single-threaded (no
//! runtime, no logging): the exec stage may create a user namespace, which needs exactly one
//! thread.

pub mod guard;
pub mod live;
pub mod sandbox;

use std::ffi::OsString;

pub use crate::guard::{EXEC_COMMAND, ExecArgs, GUARD_COMMAND, GuardArgs, exec_main, guard_main};

/// The name of the small executable.
pub const EXECUTABLE: &str = "elengtis-stdio-guard";

/// Exit status of a command line the guard or the exec stage cannot read.
pub const USAGE_STATUS: i32 = 2;

/// Run the guard or the exec stage when `args` (the whole command line, program first) names
/// one of them; `None` otherwise. The status is what the process should exit with.
pub fn internal_main(args: &[OsString]) -> Option<i32> {
    let command = args.get(1)?.to_str()?;
    let rest = args.get(2..).unwrap_or_default();
    let status = match command {
        GUARD_COMMAND => GuardArgs::parse(rest).map(|a| guard_main(&a)),
        EXEC_COMMAND => ExecArgs::parse(rest).map(|a| exec_main(&a)),
        _ => return None,
    };
    Some(status.unwrap_or_else(|message| {
        eprintln!("elengtis {command}: {message}");
        USAGE_STATUS
    }))
}
