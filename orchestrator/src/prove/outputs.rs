//! The files of a prove: `validation_report.json` per seed and `findings.sarif` over all.

use std::path::Path;

use elengtis_core::prove::{SarifFinding, SarifOptions, SarifTool, ValidationReport, sarif_log};

use super::ProveError;
use crate::results::store;

/// The tool as SARIF names it.
pub const TOOL: SarifTool<'static> = SarifTool {
    name: "elengtis",
    version: env!("CARGO_PKG_VERSION"),
    information_uri: "https://github.com/elengtis/elengtis",
};

fn io(path: &Path) -> impl FnOnce(store::StoreError) -> ProveError + '_ {
    move |e| ProveError::Io { what: "write", path: path.to_owned(), detail: e.to_string() }
}

/// Write one seed's report.
pub fn write_report(path: &Path, report: &ValidationReport) -> Result<(), ProveError> {
    write_json(path, report)
}

/// Write any report crash-safely (temp, fsync, rename).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), ProveError> {
    store::write_json_atomic(path, value).map_err(io(path))
}

/// Write the SARIF 2.1.0 log of `findings`: an alert where the side you ship let the attack
/// through; the other findings only with `options.include_undecided` (`crate::sarif` finds
/// their lines in the repository).
pub fn write_sarif(path: &Path, findings: &[SarifFinding<'_>], options: &SarifOptions) -> Result<(), ProveError> {
    store::write_json_atomic(path, &sarif_log(findings, &TOOL, options)).map_err(io(path))
}
