//! `elengtis report`: render the HTML report and say what it holds.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use crate::output::{errln, outln};

/// Renders the report over `inputs` into `out`.
pub fn run(inputs: &[PathBuf], out: &Path) -> Result<i32, Error> {
    let report = elengtis::report::build(inputs)?;
    elengtis::report::write(&report, out)?;
    outln!(
        "wrote {}: {} results director{}, {} trial{}, {} validation report{}",
        out.display(),
        report.runs,
        if report.runs == 1 { "y" } else { "ies" },
        report.trials,
        if report.trials == 1 { "" } else { "s" },
        report.validations,
        if report.validations == 1 { "" } else { "s" },
    );
    if report.not_run > 0 {
        errln!(
            "warning: {} trial{} of the recorded matri{} never ran (shown as not run); finish with `elengtis run --resume --out DIR`",
            report.not_run,
            if report.not_run == 1 { "" } else { "s" },
            if report.runs == 1 { "x" } else { "ces" }
        );
    }
    Ok(exit_codes::SUCCESS)
}
