//! `elengtis report`: render the HTML report and say what it holds.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis_core::analysis::Overlap;

use crate::output::{errln, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// A results directory, or a directory holding validation_report.json files, e.g. a
    /// `prove --out` directory (repeat, or list several).
    #[arg(long = "input", required = true, num_args = 1.., action = clap::ArgAction::Append)]
    inputs: Vec<PathBuf>,
    /// The HTML file to write (replaced atomically).
    #[arg(long)]
    out: PathBuf,
    /// Count each trial once when inputs hold the same trials (a merged directory given
    /// with its shards, two merges of the same shards, a copy); without it such inputs
    /// are refused (docs/results.md, "Inputs that overlap").
    #[arg(long)]
    dedupe: bool,
}

pub(crate) fn run(args: ReportArgs) -> Result<i32, Error> {
    render(&args.inputs, &args.out, args.dedupe)
}

/// Renders the report over `inputs` into `out` (`dedupe`: overlapping inputs counted once).
/// A refused results directory still gets a page: its refusal, and nothing of any input.
fn render(inputs: &[PathBuf], out: &Path, dedupe: bool) -> Result<i32, Error> {
    let overlap = if dedupe { Overlap::Dedupe } else { Overlap::Refuse };
    let report = match elengtis::report::build(inputs, overlap) {
        Ok(report) => report,
        Err(error) => {
            if let Some(html) = elengtis::report::refusal_page(&error) {
                let page = elengtis::report::Report { html, runs: 0, trials: 0, validations: 0, not_run: 0 };
                elengtis::report::write(&page, out)?;
                errln!("wrote {}: the refusal only (nothing of any input)", out.display());
            }
            return Err(error.into());
        }
    };
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
