//! `elengtis-stdio-guard`: the stdio guard and its exec stage in a small executable (see the
//! library's documentation). Only the two hidden subcommands exist.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let status = elengtis_stdio_guard::internal_main(&args).unwrap_or_else(|| {
        eprintln!(
            "{}: the stdio guard of elengtis, started by `elengtis` for each stdio target; usage: {} {} | {} …",
            elengtis_stdio_guard::EXECUTABLE,
            elengtis_stdio_guard::EXECUTABLE,
            elengtis_stdio_guard::GUARD_COMMAND,
            elengtis_stdio_guard::EXEC_COMMAND,
        );
        elengtis_stdio_guard::USAGE_STATUS
    });
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}
