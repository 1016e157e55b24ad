//! Finding and reading the report's inputs: results directories (through `verify`, as
//! `analyze` reads them) and validation reports.

use std::path::{Path, PathBuf};

use elengtis_core::analysis::{InputIntegrity, PlannedTrial, RunInput};
use elengtis_core::prove::report::ValidationReport;
use elengtis_core::records::read::from_value;
use serde_json::Value;

use super::ReportError;
use crate::results::verify;

/// How deep under an input directory results directories and validation reports are looked
/// for (`<prove out>/<seed>/repeat/results` is three levels down).
const SEARCH_DEPTH: usize = 3;

/// One results directory, verified.
#[derive(Debug)]
pub(super) struct Run {
    /// The directory.
    pub(super) dir: PathBuf,
    /// The parsed manifest.
    pub(super) manifest: Value,
    /// Every row, in order.
    pub(super) rows: Vec<Value>,
    /// The recorded matrix (this tool's runs).
    pub(super) matrix: Option<Vec<PlannedTrial>>,
    /// What `verify` established about it (the page's banner).
    pub(super) integrity: verify::Integrity,
}

impl Run {
    /// The directory as the report and the analysis name it.
    pub(super) fn label(&self) -> String {
        self.dir.display().to_string()
    }

    /// The analysis input of this run.
    pub(super) fn analysis_input(&self) -> RunInput {
        RunInput {
            label: self.label(),
            manifest: self.manifest.clone(),
            rows: self.rows.clone(),
            matrix: self.matrix.clone(),
            integrity: Some(InputIntegrity {
                status: self.integrity.status.to_owned(),
                says: self.integrity.says.clone(),
            }),
        }
    }
}

/// One validation report.
#[derive(Debug)]
pub(super) struct Validation {
    /// The file.
    pub(super) path: PathBuf,
    /// The report.
    pub(super) report: ValidationReport,
}

/// Everything the inputs hold.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    pub(super) runs: Vec<Run>,
    pub(super) validations: Vec<Validation>,
}

/// Finds and reads every input.
pub(super) fn load(inputs: &[PathBuf]) -> Result<Loaded, ReportError> {
    let mut loaded = Loaded::default();
    for input in inputs {
        let (runs, reports) = discover(input)?;
        for dir in runs {
            loaded.runs.push(read_run(&dir)?);
        }
        for path in reports {
            loaded.validations.push(read_validation(&path)?);
        }
    }
    Ok(loaded)
}

/// The results directories and validation reports under `input`.
fn discover(input: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ReportError> {
    let unusable = |why: &str| ReportError::Input { path: input.to_owned(), why: why.to_owned() };
    if !input.exists() {
        return Err(unusable("it does not exist"));
    }
    if !input.is_dir() {
        return Err(unusable(
            "it is not a directory (give a results directory, or a directory holding validation_report.json)",
        ));
    }
    let mut runs = Vec::new();
    let mut reports = Vec::new();
    walk(input, SEARCH_DEPTH, &mut runs, &mut reports)?;
    if runs.is_empty() && reports.is_empty() {
        return Err(unusable(
            "it holds no results directory (manifest.json) and no validation_report.json, here or up to three levels below",
        ));
    }
    Ok((runs, reports))
}

fn walk(dir: &Path, depth: usize, runs: &mut Vec<PathBuf>, reports: &mut Vec<PathBuf>) -> Result<(), ReportError> {
    let report = dir.join("validation_report.json");
    if report.is_file() {
        reports.push(report);
    }
    if dir.join("manifest.json").is_file() {
        // A results directory holds nothing else to report.
        runs.push(dir.to_owned());
        return Ok(());
    }
    if depth == 0 {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ReportError::Read { path: dir.to_owned(), source })?;
    let mut children = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ReportError::Read { path: dir.to_owned(), source })?;
        // Symbolic links are not followed: a link cannot make the search loop or leave the input.
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            children.push(entry.path());
        }
    }
    children.sort();
    for child in children {
        walk(&child, depth - 1, runs, reports)?;
    }
    Ok(())
}

fn read_run(dir: &Path) -> Result<Run, ReportError> {
    // The report reads what `verify` accepts, with the environment's keys (and then only what
    // it verifies sealed and signed), as `analyze` does.
    let verification = verify::read_verified(dir)?;
    if verification.verdict() == verify::Verdict::Unverifiable && verification.is_readable() {
        eprintln!(
            "note: {}: {}; reported for its shape only: its integrity cannot be established",
            dir.display(),
            verification.summary_line()
        );
    }
    let integrity = verification.integrity();
    match verification.manifest {
        Some(manifest) if verification.is_readable() => Ok(Run {
            dir: dir.to_owned(),
            manifest,
            rows: verification.row_values,
            matrix: verification.matrix,
            integrity,
        }),
        _ if verification.verdict() == verify::Verdict::Unverifiable => {
            Err(verify::NotSealedForKey { dir: dir.to_owned(), why: integrity.says }.into())
        }
        _ => Err(ReportError::Unverified {
            dir: dir.to_owned(),
            count: verification.problems.len(),
            problems: verification.render_problems(),
            malformed: verification.is_malformed(),
        }),
    }
}

/// Largest validation report read (a report lists every run of a seed's legs).
const MAX_VALIDATION_REPORT_BYTES: u64 = 64 << 20;

/// Reads a JSON file (a validation report): at most [`MAX_VALIDATION_REPORT_BYTES`], through
/// the strict reader.
pub(super) fn read_json(path: &Path) -> Result<Value, ReportError> {
    use crate::results::store::{TooLarge, read_within};
    let read = |source| ReportError::Read { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(read)?;
    let size = file.metadata().map_err(read)?.len();
    let bytes = read_within(file, size, MAX_VALIDATION_REPORT_BYTES).map_err(|e| match e {
        TooLarge::Size(size) => ReportError::Input {
            path: path.to_owned(),
            why: format!(
                "it is {size} bytes, larger than the {} a validation report may have (refused without reading it)",
                elengtis_core::records::bounds::describe(MAX_VALIDATION_REPORT_BYTES)
            ),
        },
        TooLarge::Io(source) => read(source),
    })?;
    elengtis_core::records::strict::parse(&bytes)
        .map_err(|source| ReportError::Strict { path: path.to_owned(), source })
}

fn read_validation(path: &Path) -> Result<Validation, ReportError> {
    let value = read_json(path)?;
    let report = from_value(&value).map_err(|source| ReportError::Record { path: path.to_owned(), source })?;
    Ok(Validation { path: path.to_owned(), report })
}
