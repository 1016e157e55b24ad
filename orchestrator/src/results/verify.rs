//! `elengtis verify`: checks a results directory end to end and says what is wrong, where
//! and how to repair it. `run --resume` and `analyze` refuse what this refuses.
//!
//! Checked, for this tool's results:
//!
//! - `manifest.json` is JSON and a manifest of a version this build reads (1 or 2); its
//!   recorded campaign and scenarios rebuild into a valid campaign; the campaign's canonical
//!   hash equals `configuration.recorded_campaign_sha256` (schema 2) and each scenario's equals
//!   its `sha256` and `configuration.scenario_sha256` — an edit such as `campaign.trials` is
//!   found;
//! - every complete line of `runs.jsonl` is a row of the manifest's version and run; its
//!   `trial_id` is in the recorded matrix with the same target, scenario and index; attempt
//!   ids are unique;
//! - schema 2: each row's `prev_row_sha256` is the SHA-256 of the line before it (of the
//!   empty string for the first): nothing was removed, inserted, reordered or edited before
//!   the last row; its `evidence_sha256` is that of the evidence file, which is present;
//! - every evidence file a row names is inside `evidence/`, present, and names the row's
//!   trial and attempt.
//!
//! A torn final line (a crash mid-append; `run --resume` cuts it) and evidence files no row
//! names (a crash between the evidence write and the row append) are notes, not problems.
//! Results of the original tool (0.1.0) carry no hashes and are not checked (a note says so).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::path::{Component, Path, PathBuf};

use elengtis_core::analysis::PlannedTrial;
use elengtis_core::format::{canonical_json, sha256_hex};
use elengtis_core::load;
use elengtis_core::matrix;
use elengtis_core::records::read::from_value;
use elengtis_core::records::{Manifest, RESULTS_SCHEMA_VERSION, RESULTS_SCHEMA_VERSION_UNCHAINED, Row, original};
use serde_json::Value;

use super::store::line_sha256;

/// Why a directory could not be checked at all.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Not a results directory.
    #[error("failed to use {}: {} is not an elengtis results directory: {why}", .dir.display(), .dir.display())]
    NotAResultsDir {
        /// The directory.
        dir: PathBuf,
        /// What is missing (`no manifest.json`, `it does not exist`, …).
        why: &'static str,
    },
    /// A file could not be read.
    #[error("failed to read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Whether a problem is input that cannot be read as records, or records that do not hold
/// together (edited, removed, replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Not JSON, or not a record of its type (`analyze`: exit 3).
    Malformed,
    /// Records that contradict each other or their hashes (exit 4).
    Inconsistent,
}

/// One thing wrong with a results directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// The file, relative to the results directory.
    pub file: String,
    /// 1-based line in that file, when the problem has one.
    pub line: Option<usize>,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// What is wrong.
    pub problem: String,
    /// How to repair it.
    pub repair: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}; repair: {}", self.file, self.problem, self.repair),
            None => write!(f, "{}: {}; repair: {}", self.file, self.problem, self.repair),
        }
    }
}

/// Who wrote a results directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// This tool, at this schema version.
    ThisTool(u64),
    /// The original tool (0.1.0).
    Original,
    /// Unknown (the manifest could not be read).
    Unknown,
}

/// What `verify` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verification {
    /// The directory.
    pub dir: PathBuf,
    /// Who wrote it.
    pub writer: Writer,
    /// Complete rows in `runs.jsonl`.
    pub rows: usize,
    /// Trials in the recorded matrix (this tool's runs whose campaign rebuilds).
    pub matrix_trials: Option<usize>,
    /// Everything wrong, in file order.
    pub problems: Vec<Problem>,
    /// What was noticed but is not wrong (a torn tail, unreferenced evidence, an old version).
    pub notes: Vec<String>,
    /// The recorded matrix, for `analyze`'s denominators.
    #[serde(skip)]
    pub matrix: Option<Vec<PlannedTrial>>,
    /// The parsed manifest (when it is JSON).
    #[serde(skip)]
    pub manifest: Option<Value>,
    /// The parsed complete rows (when every line is JSON).
    #[serde(skip)]
    pub row_values: Vec<Value>,
}

impl Verification {
    /// Nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Some problem is malformed input (rather than inconsistent records).
    pub fn is_malformed(&self) -> bool {
        self.problems.iter().any(|p| p.kind == ProblemKind::Malformed)
    }

    /// Every problem, one per line, each prefixed with the directory.
    pub fn render_problems(&self) -> String {
        let mut out = String::new();
        for problem in &self.problems {
            let _ = writeln!(out, "{}/{problem}", self.dir.display());
        }
        out
    }
}

const RESTORE: &str = "restore the file from a copy taken before the change; if there is none, results that cannot be checked cannot be trusted: start a new run (`elengtis run --config CAMPAIGN --out NEW_DIR`)";

/// Checks `dir` (see the module docs).
///
/// # Errors
///
/// [`VerifyError::NotAResultsDir`] when `dir` is missing, not a directory or has no
/// `manifest.json`; [`VerifyError::Read`] when a file cannot be read.
pub fn verify(dir: &Path) -> Result<Verification, VerifyError> {
    let not = |why| VerifyError::NotAResultsDir { dir: dir.to_owned(), why };
    if !dir.exists() {
        return Err(not("it does not exist"));
    }
    if !dir.is_dir() {
        return Err(not("it is not a directory"));
    }
    let manifest_path = dir.join("manifest.json");
    if !manifest_path.is_file() {
        return Err(not("no manifest.json"));
    }
    let read = |path: &Path| std::fs::read(path).map_err(|source| VerifyError::Read { path: path.to_owned(), source });
    let mut v = Verification {
        dir: dir.to_owned(),
        writer: Writer::Unknown,
        rows: 0,
        matrix_trials: None,
        problems: Vec::new(),
        notes: Vec::new(),
        matrix: None,
        manifest: None,
        row_values: Vec::new(),
    };
    let manifest_bytes = read(&manifest_path)?;
    let manifest_text = String::from_utf8_lossy(&manifest_bytes).into_owned();
    let manifest_value: Value = match serde_json::from_slice(&manifest_bytes) {
        Ok(value) => value,
        Err(e) => {
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: Some(e.line()),
                kind: ProblemKind::Malformed,
                problem: if e.is_eof() {
                    format!("it is truncated: not valid JSON ({})", strip_position(&e))
                } else {
                    format!("it is not valid JSON ({})", strip_position(&e))
                },
                repair: RESTORE.into(),
            });
            return Ok(v);
        }
    };
    v.manifest = Some(manifest_value.clone());
    let original =
        manifest_value.get("environment").and_then(Value::as_object).is_some_and(original::is_original_environment);

    // The log, read whatever the manifest says, so every problem is reported.
    let rows_path = dir.join("runs.jsonl");
    let lines = if rows_path.is_file() {
        let bytes = read(&rows_path)?;
        Some(split_lines(&bytes, &mut v))
    } else {
        v.problems.push(Problem {
            file: "runs.jsonl".into(),
            line: None,
            kind: ProblemKind::Inconsistent,
            problem: "it is missing (the run's log of attempts)".into(),
            repair: "restore runs.jsonl from a copy; an empty file records that no attempt finished".into(),
        });
        None
    };
    if let Some(lines) = &lines
        && lines.iter().all(|(_, value)| value.is_some())
    {
        v.row_values = lines.iter().filter_map(|(_, value)| value.clone()).collect();
        v.rows = lines.len();
    }
    if original {
        v.writer = Writer::Original;
        v.notes
            .push("written by the original elengtis 0.1.0: its results carry no hashes and are not checked".to_owned());
        return Ok(v);
    }
    let Some(manifest) = read_manifest(&manifest_value, &mut v) else {
        return Ok(v);
    };
    let version = manifest.schema_version;
    v.writer = Writer::ThisTool(version);
    if version == RESULTS_SCHEMA_VERSION_UNCHAINED {
        v.notes.push(format!(
            "written before results were tamper-evident (schema_version {version}): the row chain, the evidence hashes and the recorded campaign's hash are not checked"
        ));
    }

    // The recorded campaign, its hashes and its matrix.
    let specs = check_campaign(dir, &manifest, &manifest_text, &mut v);

    let Some(lines) = lines else { return Ok(v) };
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    let mut previous: &[u8] = b"";
    for (index, (line_bytes, value)) in lines.iter().enumerate() {
        let line = index + 1;
        let prev_sha = line_sha256(previous);
        previous = line_bytes;
        let Some(value) = value else { continue };
        let problem = |kind, problem: String, repair: &str| Problem {
            file: "runs.jsonl".into(),
            line: Some(line),
            kind,
            problem,
            repair: repair.to_owned(),
        };
        let row: Row = match from_value(value) {
            Ok(row) => row,
            Err(e) => {
                let detail = e.to_string();
                let detail = detail.strip_prefix("failed to read the record: ").unwrap_or(&detail);
                v.problems.push(problem(ProblemKind::Malformed, format!("the row is not valid: {detail}"), RESTORE));
                continue;
            }
        };
        if row.schema_version != version {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("the row has schema_version {} but the run has {version}", row.schema_version),
                RESTORE,
            ));
        }
        if row.run_id != manifest.run_id {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("the row belongs to run {}, not {}", row.run_id, manifest.run_id),
                "remove the line: rows of another run do not belong in this log (then the next row's chain breaks: restore from a copy instead if there is one)",
            ));
        }
        if let Some(specs) = &specs {
            match specs.get(&row.trial_id) {
                None => v.problems.push(problem(
                    ProblemKind::Inconsistent,
                    format!(
                        "trial `{}` is not in the recorded matrix ({} trials: {})",
                        row.trial_id,
                        specs.len(),
                        sample(specs.keys())
                    ),
                    "the row is not of this campaign: restore runs.jsonl from a copy, or start a new run",
                )),
                Some(spec)
                    if (spec.target.as_str(), spec.scenario.as_str(), spec.index)
                        != (row.target.as_str(), row.scenario.as_str(), row.trial_index) =>
                {
                    v.problems.push(problem(
                        ProblemKind::Inconsistent,
                        format!(
                            "trial `{}` is target `{}`, scenario `{}`, index {} in the recorded matrix, but the row says `{}`, `{}`, {}",
                            row.trial_id, spec.target, spec.scenario, spec.index, row.target, row.scenario, row.trial_index
                        ),
                        RESTORE,
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(first) = attempts.get(&row.attempt_id) {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("attempt `{}` is also recorded on line {first}: one attempt counted twice", row.attempt_id),
                &format!(
                    "remove line {line} (a copy of line {first}) from runs.jsonl, or restore the file from a copy"
                ),
            ));
        } else {
            attempts.insert(row.attempt_id.clone(), line);
        }
        let chained = version >= RESULTS_SCHEMA_VERSION;
        if chained {
            match &row.prev_row_sha256 {
                None => v.problems.push(problem(ProblemKind::Malformed, "the row has no `prev_row_sha256`".into(), RESTORE)),
                Some(sha) if *sha != prev_sha => v.problems.push(problem(
                    ProblemKind::Inconsistent,
                    if line == 1 {
                        "the chain does not start here: rows before this one were removed, or this row was edited".to_owned()
                    } else {
                        format!(
                            "the chain is broken: `prev_row_sha256` is not the hash of line {}; a row was removed, inserted or reordered here, or line {} was edited",
                            line - 1,
                            line - 1
                        )
                    },
                    RESTORE,
                )),
                Some(_) => {}
            }
        }
        check_evidence(dir, &row, line, chained, &mut referenced, &mut v)?;
    }
    // Evidence no row names: a crash between the evidence write and the row append leaves one.
    if let Ok(entries) = std::fs::read_dir(dir.join("evidence")) {
        let mut orphans: Vec<String> = entries
            .flatten()
            .map(|e| format!("evidence/{}", e.file_name().to_string_lossy()))
            .filter(|name| name.ends_with(".json") && !referenced.contains(name))
            .collect();
        orphans.sort();
        for name in orphans {
            v.notes.push(format!(
                "{name} is named by no row (an attempt whose row was never written, e.g. the runner was killed between the two; `run --resume` retries it)"
            ));
        }
    }
    Ok(v)
}

/// A matrix entry by trial id.
struct Spec {
    target: String,
    scenario: String,
    index: u32,
}

/// The manifest as this build's type, or a problem.
fn read_manifest(value: &Value, v: &mut Verification) -> Option<Manifest> {
    let version = value.get("schema_version").and_then(Value::as_u64);
    if !matches!(version, Some(RESULTS_SCHEMA_VERSION | RESULTS_SCHEMA_VERSION_UNCHAINED)) {
        v.problems.push(Problem {
            file: "manifest.json".into(),
            line: None,
            kind: ProblemKind::Malformed,
            problem: format!(
                "schema_version {} is not one this build reads ({RESULTS_SCHEMA_VERSION_UNCHAINED} or {RESULTS_SCHEMA_VERSION})",
                value.get("schema_version").unwrap_or(&Value::Null)
            ),
            repair: "use the elengtis version that wrote it".into(),
        });
        return None;
    }
    match from_value::<Manifest>(value) {
        Ok(manifest) => {
            if manifest.schema_version >= RESULTS_SCHEMA_VERSION
                && manifest.configuration.recorded_campaign_sha256.is_none()
            {
                v.problems.push(Problem {
                    file: "manifest.json".into(),
                    line: None,
                    kind: ProblemKind::Malformed,
                    problem: "it has no `configuration.recorded_campaign_sha256`".into(),
                    repair: RESTORE.into(),
                });
            }
            Some(manifest)
        }
        Err(e) => {
            let detail = e.to_string();
            let detail = detail.strip_prefix("failed to read the record: ").unwrap_or(&detail);
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: None,
                kind: ProblemKind::Malformed,
                problem: format!("it is not a valid manifest: {detail}"),
                repair: RESTORE.into(),
            });
            None
        }
    }
}

/// Rebuilds the recorded campaign, checks its hashes, and returns its matrix by trial id.
fn check_campaign(dir: &Path, manifest: &Manifest, text: &str, v: &mut Verification) -> Option<BTreeMap<String, Spec>> {
    let scenarios: Vec<(PathBuf, Value)> =
        manifest.scenarios.iter().map(|s| (PathBuf::from(&s.path), s.dump.clone())).collect();
    let bundle = match load::bundle_from_dumps(
        &dir.join("manifest.json"),
        &manifest.campaign,
        &scenarios,
        manifest.configuration.campaign_sha256.clone(),
    ) {
        Ok(bundle) => bundle,
        Err(e) => {
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: line_of(text, "  \"campaign\":"),
                kind: ProblemKind::Inconsistent,
                problem: format!("the recorded campaign is not a valid campaign: {e}"),
                repair: RESTORE.into(),
            });
            return None;
        }
    };
    if let Some(pinned) = &manifest.configuration.recorded_campaign_sha256 {
        let actual = sha256_hex(&canonical_json(&bundle.campaign.value));
        if *pinned != actual {
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: line_of(text, "  \"campaign\":"),
                kind: ProblemKind::Inconsistent,
                problem: format!(
                    "the recorded campaign was changed after the run started (its hash is {actual}, `configuration.recorded_campaign_sha256` pins {pinned}): a resume and the analysis would use a matrix the run never had"
                ),
                repair: "restore manifest.json from a copy (undo the edit, e.g. of `campaign.trials`); to run a changed campaign, start a new run with it".into(),
            });
        }
    }
    for (recorded, rebuilt) in manifest.scenarios.iter().zip(&bundle.scenarios) {
        let id = &rebuilt.value.id;
        let pinned = manifest.configuration.scenario_sha256.get(id);
        if recorded.sha256 != rebuilt.sha256 || pinned != Some(&rebuilt.sha256) {
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: line_of(text, &format!("\"sha256\": \"{}\"", recorded.sha256)),
                kind: ProblemKind::Inconsistent,
                problem: format!(
                    "scenario `{id}` was changed after the run started (its hash is {}, the manifest records {})",
                    rebuilt.sha256, recorded.sha256
                ),
                repair: "restore manifest.json from a copy; to run a changed scenario, start a new run with it".into(),
            });
        }
    }
    let campaign = &bundle.campaign.value;
    let trials = matrix::expand(&bundle);
    let model_id = campaign
        .model_id
        .clone()
        .filter(|id| !id.is_empty())
        .or_else(|| campaign.model.clone().filter(|m| !m.is_empty()));
    let planned: Vec<PlannedTrial> = trials
        .iter()
        .map(|t| PlannedTrial {
            trial_id: t.trial_id.clone(),
            target: campaign.targets[t.target].id.clone(),
            scenario: bundle.scenarios[t.scenario].value.id.clone(),
            engine: campaign.engine.as_str().to_owned(),
            model_id: model_id.clone(),
        })
        .collect();
    let specs = trials
        .iter()
        .map(|t| {
            (
                t.trial_id.clone(),
                Spec {
                    target: campaign.targets[t.target].id.clone(),
                    scenario: bundle.scenarios[t.scenario].value.id.clone(),
                    index: t.index,
                },
            )
        })
        .collect();
    v.matrix_trials = Some(planned.len());
    v.matrix = Some(planned);
    Some(specs)
}

/// Checks the evidence file a row names.
fn check_evidence(
    dir: &Path,
    row: &Row,
    line: usize,
    chained: bool,
    referenced: &mut BTreeSet<String>,
    v: &mut Verification,
) -> Result<(), VerifyError> {
    let problem = |problem: String, repair: String| Problem {
        file: "runs.jsonl".into(),
        line: Some(line),
        kind: ProblemKind::Inconsistent,
        problem,
        repair,
    };
    let relative = Path::new(&row.evidence);
    let inside = relative.components().all(|c| matches!(c, Component::Normal(_)))
        && relative.components().next() == Some(Component::Normal("evidence".as_ref()))
        && relative.components().count() == 2;
    if !inside {
        v.problems.push(problem(
            format!("the row's evidence `{}` is not a file inside evidence/", row.evidence),
            RESTORE.to_owned(),
        ));
        return Ok(());
    }
    referenced.insert(row.evidence.clone());
    let path = dir.join(relative);
    if !path.is_file() {
        v.problems.push(problem(
            format!(
                "{} is missing: trial `{}` cannot be checked, so its attempt does not count",
                row.evidence, row.trial_id
            ),
            format!("restore {} from a copy; if there is none, the trial must be run again in a new run", row.evidence),
        ));
        return Ok(());
    }
    let bytes = std::fs::read(&path).map_err(|source| VerifyError::Read { path: path.clone(), source })?;
    if chained {
        let actual = sha256_hex(&bytes);
        match &row.evidence_sha256 {
            None => v.problems.push(Problem {
                kind: ProblemKind::Malformed,
                ..problem("the row has no `evidence_sha256`".into(), RESTORE.to_owned())
            }),
            Some(pinned) if *pinned != actual => v.problems.push(problem(
                format!(
                    "{} was changed after its row was written (its hash is {actual}, the row pins {pinned})",
                    row.evidence
                ),
                format!(
                    "restore {} from a copy; if there is none, the trial must be run again in a new run",
                    row.evidence
                ),
            )),
            Some(_) => {}
        }
    }
    let names = serde_json::from_slice::<Value>(&bytes).ok().map(|evidence| {
        (
            evidence.get("trial_id").and_then(Value::as_str).map(str::to_owned),
            evidence.get("attempt_id").and_then(Value::as_str).map(str::to_owned),
        )
    });
    match names {
        Some((Some(trial), Some(attempt))) if trial == row.trial_id && attempt == row.attempt_id => {}
        Some((trial, attempt)) => v.problems.push(problem(
            format!(
                "{} is the evidence of trial {} attempt {}, not of this row (trial `{}`, attempt `{}`)",
                row.evidence,
                trial.map_or_else(|| "(none)".to_owned(), |t| format!("`{t}`")),
                attempt.map_or_else(|| "(none)".to_owned(), |a| format!("`{a}`")),
                row.trial_id,
                row.attempt_id
            ),
            format!("restore {} from a copy", row.evidence),
        )),
        None => v.problems.push(Problem {
            kind: ProblemKind::Malformed,
            ..problem(format!("{} is not valid JSON", row.evidence), format!("restore {} from a copy", row.evidence))
        }),
    }
    Ok(())
}

/// The complete lines of a log, each with its JSON object (None, and a problem, when it is
/// not one). A torn final line is a note.
fn split_lines(bytes: &[u8], v: &mut Verification) -> Vec<(Vec<u8>, Option<Value>)> {
    let complete_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |pos| pos + 1);
    if complete_len < bytes.len() {
        v.notes.push(format!(
            "runs.jsonl ends in a torn row ({} bytes without a newline: a write the runner never finished); `run --resume` cuts it, `analyze` ignores it",
            bytes.len() - complete_len
        ));
    }
    if complete_len == 0 {
        return Vec::new();
    }
    bytes[..complete_len - 1]
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(index, line)| {
            let malformed = |problem: String| Problem {
                file: "runs.jsonl".into(),
                line: Some(index + 1),
                kind: ProblemKind::Malformed,
                problem,
                repair: RESTORE.into(),
            };
            let value = match serde_json::from_slice::<Value>(line) {
                Ok(value @ Value::Object(_)) => Some(value),
                Ok(_) => {
                    v.problems.push(malformed(format!("line {} is not a JSON object", index + 1)));
                    None
                }
                Err(_) if line.is_empty() => {
                    v.problems.push(malformed(format!("line {} is empty", index + 1)));
                    None
                }
                Err(e) => {
                    v.problems.push(malformed(format!(
                        "line {} is not valid JSON ({})",
                        index + 1,
                        strip_position(&e)
                    )));
                    None
                }
            };
            (line.to_vec(), value)
        })
        .collect()
}

/// `serde_json`'s message without its " at line L column C" (the line is given separately).
fn strip_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    message.strip_suffix(&suffix).map_or(message.clone(), |m| format!("{m} at column {}", e.column()))
}

/// The 1-based line of the first occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.find(needle).map(|at| text[..at].matches('\n').count() + 1)
}

/// The first few of a list of ids.
fn sample<'a>(ids: impl Iterator<Item = &'a String>) -> String {
    let ids: Vec<&String> = ids.collect();
    let shown: Vec<&str> = ids.iter().take(3).map(|s| s.as_str()).collect();
    if ids.len() > shown.len() { format!("{}, …", shown.join(", ")) } else { shown.join(", ") }
}
