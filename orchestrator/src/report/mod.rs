//! `elengtis report`: one self-contained HTML file over one or more results directories and
//! `prove`/`gate` validation reports (docs/report.md).
//!
//! Concerns, one module each: [`load`] finds and reads the inputs (results directories through
//! [`crate::results::verify`], which `analyze` also relies on; validation reports as the core's
//! [`ValidationReport`](elengtis_core::prove::report::ValidationReport)); the statistics are the
//! core's analysis ([`elengtis_core::analysis`]), never recomputed here; `trials` turns each
//! trial's final row and evidence into the data the page embeds; `html` renders the page: the
//! overview, the comparisons and the validation reports server-side (readable without
//! JavaScript), the trial data as JSON the page's one script renders on demand, a strict
//! Content-Security-Policy whose script hash is computed here.
//!
//! Everything that came from a target or a model is text: HTML-escaped on the server, inserted
//! with `textContent` by the script, and escaped inside the embedded JSON so it cannot end its
//! `<script>` element.

pub(crate) mod html;
mod load;
mod trials;

use std::path::{Path, PathBuf};

use elengtis_core::analysis::{AnalyzeError, Campaigns, Overlap};

use crate::results::store::StoreError;
use crate::results::verify::VerifyError;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No input was given.
    #[error("failed to make a report: no --input was given")]
    NoInputs,
    /// An input is not usable (missing, not a directory, nothing to report in it).
    #[error("failed to read {}: {why}", .path.display())]
    Input {
        /// The input.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A file could not be read.
    #[error("failed to read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not JSON.
    #[error("failed to parse {}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A file is not JSON as the strict reader reads it (a key twice, a number in another
    /// form, not JSON).
    #[error("failed to read {}: {source}", .path.display())]
    Strict {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: elengtis_core::records::strict::StrictError,
    },
    /// A file is JSON but not the record it should be.
    #[error("failed to read {}: {source}", .path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// Which field is wrong.
        #[source]
        source: elengtis_core::records::read::FieldError,
    },
    /// A results directory could not be checked.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// A results directory does not verify (the report reads only what `verify` accepts).
    #[error("failed to use {}: its results do not verify ({count} problem{}; see `elengtis verify {}`):\n{problems}", .dir.display(), if *.count == 1 { "" } else { "s" }, .dir.display())]
    Unverified {
        /// The results directory.
        dir: PathBuf,
        /// How many problems.
        count: usize,
        /// Each problem on its own line.
        problems: String,
        /// Some problem is input that cannot be read as records.
        malformed: bool,
    },
    /// A key asks for a sealed, signed directory and this one is not.
    #[error(transparent)]
    NotVerifiable(#[from] crate::results::verify::NotSealedForKey),
    /// The results could not be analysed.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
    /// The page could not be encoded.
    #[error("failed to encode the report's data")]
    Encode(#[source] serde_json::Error),
    /// The report could not be written.
    #[error(transparent)]
    Write(#[from] StoreError),
}

/// A rendered report.
#[derive(Debug, Clone)]
pub struct Report {
    /// The page.
    pub html: String,
    /// Results directories read.
    pub runs: usize,
    /// Trials shown (those that never ran included).
    pub trials: usize,
    /// Validation reports shown.
    pub validations: usize,
    /// Trials of the recorded matrices that never ran.
    pub not_run: u64,
}

/// Reads the inputs and renders the report.
///
/// Each input is a results directory (`manifest.json`), a directory holding a
/// `validation_report.json`, or a directory above such directories (a `prove` or `gate`
/// output root: searched three levels deep).
///
/// # Errors
///
/// A [`ReportError`] naming the input or file at fault: a missing input, one holding nothing
/// to report, a results directory that does not verify, an unreadable evidence file or
/// validation report.
pub fn build(inputs: &[PathBuf], overlap: Overlap) -> Result<Report, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let loaded = load::load(inputs)?;
    let run_inputs: Vec<elengtis_core::analysis::RunInput> =
        loaded.runs.iter().map(load::Run::analysis_input).collect();
    let analysis = if run_inputs.is_empty() {
        None
    } else {
        let rule = elengtis_core::analysis::RecommendOptions::default();
        Some(elengtis_core::analysis::analyze_counted(&run_inputs, &rule, Campaigns::Apart, overlap)?)
    };
    let trials = match &analysis {
        Some(analysis) => trials::collect(&loaded.runs, &analysis.trials)?,
        None => trials::Trials::default(),
    };
    let html = html::page(&html::PageInput {
        runs: &loaded.runs,
        analysis: analysis.as_ref(),
        trials: &trials,
        validations: &loaded.validations,
    })?;
    Ok(Report {
        html,
        runs: loaded.runs.len(),
        trials: trials.len(),
        validations: loaded.validations.len(),
        not_run: analysis.as_ref().map_or(0, |a| a.not_run),
    })
}

/// The page `report` writes when a results directory is refused (it does not verify, or a key
/// asks for a seal it does not have): the refusal in its banner, its problems, and nothing of
/// any input. `None` for other errors (nothing is written for them).
pub fn refusal_page(error: &ReportError) -> Option<String> {
    let (dir, says, problems) = match error {
        ReportError::Unverified { dir, count, problems, .. } => (
            dir,
            format!(
                "refused: {dir} does not verify ({count} problem{}); nothing of it, or of any other input, is shown",
                if *count == 1 { "" } else { "s" },
                dir = dir.display()
            ),
            problems.as_str(),
        ),
        ReportError::NotVerifiable(refused) => (&refused.dir, format!("refused: {}", refused.why), ""),
        _ => return None,
    };
    Some(html::refusal(dir, &says, problems))
}

/// Writes the report to `out` crash-safely (a temporary file renamed into place).
///
/// # Errors
///
/// [`ReportError::Write`] when the file cannot be written.
pub fn write(report: &Report, out: &Path) -> Result<(), ReportError> {
    crate::results::store::write_atomic(out, report.html.as_bytes())?;
    Ok(())
}
