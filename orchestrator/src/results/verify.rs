//! `elengtis verify`: checks a results directory end to end and says what is wrong, where
//! and how to repair it. `analyze` and `report` read a results directory only through
//! [`read_verified`], `run --resume` and `merge` through [`verify_with`] with the environment's
//! keys, so they agree by construction.
//!
//! A directory is read in exactly one format ([`elengtis_core::records::shape`]), decided from
//! the manifest's whole shape, never from a version field alone. For this tool's chained
//! results (schema 2) every check below runs; results of schema 1 and of the original 0.1.0
//! carry no chain, so only their shape is checked, and `verify` says so (and does not exit 0).
//!
//! Checked, for chained results:
//!
//! - `manifest.json` is JSON and this tool's manifest of schema 2, field for field; its
//!   recorded campaign and scenarios rebuild into a valid campaign; the campaign's canonical
//!   hash equals `configuration.recorded_campaign_sha256` and each scenario's equals its
//!   `sha256` and `configuration.scenario_sha256` — an edit such as `campaign.trials` is found;
//! - every complete line of `runs.jsonl` is a row of the manifest's schema and run; its
//!   `trial_id` is in the recorded matrix with the same target, scenario and index, and the
//!   campaign's engine and model; attempt ids are unique;
//! - each row's `prev_row_sha256` is the SHA-256 of the line before it (of the empty string
//!   for the first): nothing was removed, inserted, reordered or edited before the last row;
//! - every evidence file a row names is `evidence/<trial>.json` (or `.retry-<n>.json`), a
//!   regular file reached through no symbolic link, whose SHA-256 the row pins, which is
//!   evidence of the row's attempt, and which determines the row's outcome: every row field
//!   the evidence determines is recomputed from it ([`elengtis_core::records::derive`]) and
//!   must be equal, and the evidence's own summaries must agree with their parts;
//! - `seal.json`, when there is one: the seal is the chain's last link (the row count, the
//!   last row's hash, the campaign's and the manifest's hashes it pins must hold), and with a
//!   key its signature must be that key's; without one the directory is *unsealed* (a run that
//!   is still going or was killed), which `--require-sealed` (and any key) refuses;
//! - the history is one an honest runner can write: no row after a complete seal, none after a
//!   seal without a resume record begun after it, no attempt of a trial that already has a
//!   complete one, no more attempts of a trial than the run had sessions;
//! - with a key, everything is authenticated by it: the manifest by its own signature or a
//!   seal signed by the key that covers it as it is, and every row by such a seal or its own
//!   signature (a row after the seal, or in a run killed before it).
//!
//! Every file is read through the one strict reader ([`elengtis_core::records::strict`]: a key
//! twice or a number in another form is refused) and within its bound
//! ([`elengtis_core::records::bounds`], `runs.jsonl` as a stream, a row at a time).
//!
//! A torn final line (a crash mid-append; `run --resume` cuts it), evidence files no row
//! names (a crash between the evidence write and the row append) and files with other hard
//! links (which `run --resume` refuses to write through) are notes, not problems.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::io::{BufRead as _, Read as _};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use elengtis_core::analysis::PlannedTrial;
use elengtis_core::format::quote::count;
use elengtis_core::format::{canonical_json, sha256_hex};
use elengtis_core::load;
use elengtis_core::matrix;
use elengtis_core::partition;
use elengtis_core::records::manifest::MergeRecord;
use elengtis_core::records::read::from_value;
use elengtis_core::records::seal::{self, Seal};
use elengtis_core::records::shape::{self, ResultsFormat};
use elengtis_core::records::{Evidence, Manifest, Row, SealSignature, bounds, derive, strict};
use serde_json::Value;

use super::keys::{Checker, Key, KeyError};
use super::store::{self, BeneathError, line_sha256};

/// The seal file of a results directory.
pub const SEAL_FILE: &str = "seal.json";

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
    /// A key to check the seal with could not be used.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// A directory that a key asks to be sealed and signed by it and that is not (unsealed, or of
/// a format without a seal): nothing wrong was found, but `analyze`, `report` and `merge` do
/// not read it.
#[derive(Debug, thiserror::Error)]
#[error(
    "failed to use {}: {why}; with a key (`ELENGTIS_SIGNING_KEY`, `ELENGTIS_SIGNING_KEY_FILE`) only a sealed directory signed by it is read: finish it with `elengtis run --resume --out {}` (with the key), or read it without the key",
    .dir.display(), .dir.display()
)]
pub struct NotSealedForKey {
    /// The results directory.
    pub dir: PathBuf,
    /// What it is, in words.
    pub why: String,
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

/// What to check beyond the records: keys, and whether a seal is required.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Keys everything must be authenticated by: the seal must carry each one's signature,
    /// the manifest and every row must be signed by each, or covered by a seal that is.
    pub checkers: Vec<Checker>,
    /// An unsealed directory does not verify (`verify --require-sealed`; implied by a key
    /// given in any way to `verify`, `analyze`, `report` and `merge`).
    pub require_sealed: bool,
}

impl VerifyOptions {
    /// The keys the environment gives (`ELENGTIS_SIGNING_KEY`, `ELENGTIS_SIGNING_KEY_FILE`),
    /// and, when it gives any, a sealed directory required: what `analyze`, `report` and
    /// `merge` read with (`run --resume` takes the keys, not the seal: it continues a run
    /// killed before its seal, every row of which its keys signed).
    ///
    /// # Errors
    ///
    /// [`KeyError`] when a key is set but unusable (or set but empty).
    pub fn from_env() -> Result<VerifyOptions, KeyError> {
        let checkers: Vec<Checker> = Key::from_env()?.into_iter().map(|k| Checker::Key(Arc::new(k))).collect();
        Ok(VerifyOptions { require_sealed: !checkers.is_empty(), checkers })
    }
}

/// Whether the directory is sealed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SealState {
    /// `seal.json` anchors every row.
    Sealed {
        /// How the run ended, as the seal says.
        status: seal::SealStatus,
        /// SHA-256 of the seal (to keep out of band).
        sha256: String,
        /// Each signature, and whether it was checked.
        signatures: Vec<String>,
    },
    /// No seal, or rows or a resume after it: a run still going, or killed.
    Unsealed {
        /// Why, in words.
        why: String,
    },
    /// The format has no seal (schema 1, the original's).
    NotApplicable,
}

/// What a reader read, in one word and one sentence: the integrity status `report` shows in
/// its banner and `analyze` writes into `summary.md` and `summary.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Integrity {
    /// `verified_signed`, `verified_signature_unchecked`, `verified_unsigned`, `unsealed`,
    /// `legacy_unverified` or `refused`.
    pub status: &'static str,
    /// What it means, in words (`verified, signed by hmac-sha256 key … (checked with the key)`).
    pub says: String,
    /// The seal's SHA-256 (sealed directories).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seal_sha256: Option<String>,
    /// Each key that signed something in the directory (`hmac-sha256 key …`).
    pub signed_by: Vec<String>,
}

/// What `verify` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verification {
    /// The directory.
    pub dir: PathBuf,
    /// The format it was read in (`None` when the manifest has no format's shape).
    pub format: Option<ResultsFormat>,
    /// Complete rows in `runs.jsonl`.
    pub rows: usize,
    /// Trials in the recorded matrix (this tool's runs whose campaign rebuilds).
    pub matrix_trials: Option<usize>,
    /// Everything wrong, in file order.
    pub problems: Vec<Problem>,
    /// What was noticed but is not wrong (a torn tail, unreferenced evidence).
    pub notes: Vec<String>,
    /// What was checked, in words.
    pub checked: Vec<String>,
    /// What could not be checked, in words (empty only for a sealed, signed, chained run
    /// checked with its key).
    pub unchecked: Vec<String>,
    /// The seal.
    pub seal: SealState,
    /// Results files with another hard link (`run --resume` refuses to write through them).
    pub linked: Vec<String>,
    /// Each key whose signature is on the seal, the manifest or a row (`hmac-sha256 key …`),
    /// checked or not.
    pub signed_by: BTreeSet<String>,
    /// A seal was required (`--require-sealed`, or a key given).
    #[serde(skip)]
    pub require_sealed: bool,
    /// Keys were given: everything had to be authenticated by them.
    #[serde(skip)]
    pub keys_given: bool,
    /// The recorded matrix, for `analyze`'s denominators.
    #[serde(skip)]
    pub matrix: Option<Vec<PlannedTrial>>,
    /// The parsed manifest (when it is JSON).
    #[serde(skip)]
    pub manifest: Option<Value>,
    /// The parsed complete rows (when every line is JSON).
    #[serde(skip)]
    pub row_values: Vec<Value>,
    /// SHA-256 of the last complete line of `runs.jsonl` as read (of the empty string when it
    /// has none; `None` when it could not be read): what a resume checks its log against.
    #[serde(skip)]
    pub last_line_sha256: Option<String>,
}

/// What a reader may do with a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing wrong, and its integrity established (a chained run; sealed when required).
    Verified,
    /// Nothing wrong, but integrity cannot be established: a format without a chain, or an
    /// unsealed run when a seal was required. Readable (`analyze`, `report`), not verified.
    Unverifiable,
    /// Something is wrong.
    Refused,
}

impl Verification {
    /// Nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The verdict every reader acts on.
    pub fn verdict(&self) -> Verdict {
        if !self.is_ok() {
            return Verdict::Refused;
        }
        let chained = self.format.is_some_and(ResultsFormat::is_chained);
        let sealed_ok = !self.require_sealed || matches!(self.seal, SealState::Sealed { .. });
        if chained && sealed_ok { Verdict::Verified } else { Verdict::Unverifiable }
    }

    /// Whether `analyze` and `report` may read it: verified, or nothing wrong but its
    /// integrity cannot be established while no seal was required (no key given).
    pub fn is_readable(&self) -> bool {
        match self.verdict() {
            Verdict::Verified => true,
            Verdict::Unverifiable => !self.require_sealed,
            Verdict::Refused => false,
        }
    }

    /// What was read, as readers say it ([`Integrity`]).
    pub fn integrity(&self) -> Integrity {
        let signed_by: Vec<String> = self.signed_by.iter().cloned().collect();
        let (status, says, seal_sha256) = match (&self.seal, self.verdict()) {
            (_, Verdict::Refused) => (
                "refused",
                format!(
                    "refused: {} problem{}: it does not verify (`elengtis verify {}`)",
                    self.problems.len(),
                    if self.problems.len() == 1 { "" } else { "s" },
                    self.dir.display()
                ),
                None,
            ),
            (SealState::Sealed { sha256, signatures, .. }, _) => {
                let valid: Vec<String> = signatures
                    .iter()
                    .filter_map(|s| s.strip_suffix(": valid"))
                    .map(|s| s.replacen(" by key ", " key ", 1))
                    .collect();
                if !valid.is_empty() {
                    (
                        "verified_signed",
                        format!("verified, signed by {} (checked with the key)", valid.join(", ")),
                        Some(sha256.clone()),
                    )
                } else if !signatures.is_empty() {
                    (
                        "verified_signature_unchecked",
                        format!(
                            "verified, signature not checked: sealed and signed by {}, but no key was given to check it (anyone can recompute the hashes; give the key to check who sealed it)",
                            signed_by.join(", ")
                        ),
                        Some(sha256.clone()),
                    )
                } else {
                    (
                        "verified_unsigned",
                        "verified, unsigned: sealed, its hashes hold, but the seal is not signed and anyone can recompute an unsigned seal".to_owned(),
                        Some(sha256.clone()),
                    )
                }
            }
            (SealState::Unsealed { why }, Verdict::Verified) => (
                "unsealed",
                format!("unsealed ({why}): its chain holds up to its last row, but nothing anchors the end"),
                None,
            ),
            (SealState::Unsealed { why }, _) => {
                ("refused", format!("refused: unsealed ({why}) while a key asks for a sealed, signed directory"), None)
            }
            (SealState::NotApplicable, Verdict::Unverifiable) if self.require_sealed => (
                "refused",
                format!(
                    "refused: {}, without a seal, while a key asks for a sealed, signed directory",
                    self.format.map_or("no format this build reads", ResultsFormat::describe)
                ),
                None,
            ),
            (SealState::NotApplicable, Verdict::Unverifiable) if self.format.is_some_and(|f| !f.is_chained()) => (
                "legacy_unverified",
                format!(
                    "legacy, unverified: {}; its shape was checked, its integrity cannot be",
                    self.format.map_or("", ResultsFormat::describe)
                ),
                None,
            ),
            (SealState::NotApplicable, _) => {
                ("refused", "refused: its integrity cannot be established".to_owned(), None)
            }
        };
        Integrity { status, says, seal_sha256, signed_by }
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

    /// One line: which format was checked and what could not be.
    pub fn summary_line(&self) -> String {
        let format = self.format.map_or("no format this build reads", ResultsFormat::describe);
        let seal = match &self.seal {
            SealState::Sealed { status, .. } => format!("; sealed ({})", serde_plain(status)),
            SealState::Unsealed { why } => format!("; unsealed ({why})"),
            SealState::NotApplicable => String::new(),
        };
        format!("read as {format}{seal}")
    }
}

fn serde_plain<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

const RESTORE: &str = "restore the file from a copy taken before the change; if there is none, results that cannot be checked cannot be trusted: start a new run (`elengtis run --config CAMPAIGN --out NEW_DIR`)";

const LINK_REPAIR: &str = "replace the link with the file itself (copied from where it points, if that is this run's), or restore the directory from a copy";

/// A directory as a reader (`analyze`, `report`) may use it: verified with the keys the
/// environment gives, a seal required when it gives any ([`VerifyOptions::from_env`]). A
/// directory [`Verification::is_readable`] refuses is an error to every reader.
///
/// # Errors
///
/// As [`verify_with`].
pub fn read_verified(dir: &Path) -> Result<Verification, VerifyError> {
    verify_with(dir, &VerifyOptions::from_env()?)
}

/// Checks `dir` without keys (see the module docs).
///
/// # Errors
///
/// As [`verify_with`].
pub fn verify(dir: &Path) -> Result<Verification, VerifyError> {
    verify_with(dir, &VerifyOptions::default())
}

/// Checks `dir` (see the module docs).
///
/// # Errors
///
/// [`VerifyError::NotAResultsDir`] when `dir` is missing, not a directory or has no
/// `manifest.json`; [`VerifyError::Read`] when a file cannot be read.
pub fn verify_with(dir: &Path, options: &VerifyOptions) -> Result<Verification, VerifyError> {
    let not = |why| VerifyError::NotAResultsDir { dir: dir.to_owned(), why };
    if !dir.exists() {
        return Err(not("it does not exist"));
    }
    if !dir.is_dir() {
        return Err(not("it is not a directory"));
    }
    if std::fs::symlink_metadata(dir.join("manifest.json")).is_err() {
        return Err(not("no manifest.json"));
    }
    let mut v = Verification {
        dir: dir.to_owned(),
        format: None,
        rows: 0,
        matrix_trials: None,
        problems: Vec::new(),
        notes: Vec::new(),
        checked: Vec::new(),
        unchecked: Vec::new(),
        seal: SealState::NotApplicable,
        linked: Vec::new(),
        signed_by: BTreeSet::new(),
        require_sealed: options.require_sealed,
        keys_given: !options.checkers.is_empty(),
        matrix: None,
        manifest: None,
        row_values: Vec::new(),
        last_line_sha256: None,
    };
    let Some(manifest_bytes) = read_file(dir, "manifest.json", None, bounds::MANIFEST, &mut v)? else { return Ok(v) };
    let manifest_text = String::from_utf8_lossy(&manifest_bytes).into_owned();
    let manifest_value: Value = match strict::parse(&manifest_bytes) {
        Ok(value) => value,
        Err(e) => {
            let problem = match &e {
                strict::StrictError::Syntax { detail, truncated: true, .. } => {
                    format!("it is truncated: not valid JSON ({detail})")
                }
                strict::StrictError::Syntax { detail, .. } => format!("it is not valid JSON ({detail})"),
                other => other.to_string(),
            };
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: Some(e.line()),
                kind: ProblemKind::Malformed,
                problem,
                repair: RESTORE.into(),
            });
            return Ok(v);
        }
    };
    drop(manifest_bytes);
    v.manifest = Some(manifest_value.clone());
    // Files no reader reads but a resume writes: their links count too, and the live-target
    // log (which the guards append to) must not be a symbolic link.
    for relative in ["summary.txt", "stdio-live", "stdio-live/guards.jsonl"] {
        let Ok(meta) = std::fs::symlink_metadata(dir.join(relative)) else { continue };
        if meta.file_type().is_symlink() && relative.starts_with("stdio-live") {
            v.problems.push(Problem {
                file: relative.into(),
                line: None,
                kind: ProblemKind::Inconsistent,
                problem: format!(
                    "{relative} is a symbolic link: the guards of a resumed run would append through it; results files are never written through links"
                ),
                repair: LINK_REPAIR.into(),
            });
        } else if meta.is_file() && std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
            note_linked(&mut v, relative, std::os::unix::fs::MetadataExt::nlink(&meta));
        }
    }

    // The log, read whatever the manifest says, so every problem is reported.
    let lines = read_log(dir, &mut v)?;
    v.last_line_sha256 =
        lines.as_ref().map(|lines| lines.last().map_or_else(|| line_sha256(b""), |line| line.sha256.clone()));
    let all_parsed = lines.as_ref().is_some_and(|lines| lines.iter().all(|line| line.value.is_some()));
    if let Some(lines) = &lines
        && all_parsed
    {
        v.rows = lines.len();
    }
    check_records(dir, options, &manifest_value, &manifest_text, lines.as_deref(), &mut v)?;
    if all_parsed {
        // Moved, not copied: a large run's rows are held once.
        v.row_values = lines.into_iter().flatten().filter_map(|line| line.value).collect();
    }
    Ok(v)
}

/// Everything after reading the manifest and the log: the format, the manifest, the campaign,
/// each row, its evidence and the seal.
fn check_records(
    dir: &Path,
    options: &VerifyOptions,
    manifest_value: &Value,
    manifest_text: &str,
    lines: Option<&[LogLine]>,
    v: &mut Verification,
) -> Result<(), VerifyError> {
    // Exactly one format, from the manifest's whole shape.
    let format = match shape::detect(manifest_value) {
        Ok(format) => format,
        Err(e) => {
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: None,
                kind: ProblemKind::Malformed,
                problem: e.to_string(),
                repair: "restore manifest.json from a copy; a results directory is read in one format, decided by its manifest's whole shape".into(),
            });
            return Ok(());
        }
    };
    v.format = Some(format);
    if format == ResultsFormat::Original {
        check_original(dir, lines, manifest_value, v)?;
        return Ok(());
    }
    let manifest: Manifest = match from_value(manifest_value) {
        Ok(manifest) => manifest,
        Err(e) => {
            // `detect` read it as one already; kept for a plain message should it not.
            v.problems.push(Problem {
                file: "manifest.json".into(),
                line: None,
                kind: ProblemKind::Malformed,
                problem: format!("it is not a valid manifest: {e}"),
                repair: RESTORE.into(),
            });
            return Ok(());
        }
    };
    let chained = format.is_chained();
    v.checked.push(if chained {
        "the manifest field for field, its campaign and scenarios against their hashes, and the matrix they make".into()
    } else {
        "the manifest field for field and the matrix its campaign makes".into()
    });
    if !chained {
        v.unchecked.push(
            "integrity: results of schema 1 carry no row chain, evidence hashes or campaign hash, so rows removed, reordered or edited together with their evidence cannot be found"
                .into(),
        );
        v.notes.push(format!(
            "{}: its shape and the agreement of each row with its evidence were checked; its integrity cannot be",
            format.describe()
        ));
    }

    // The recorded campaign, its hashes and its matrix.
    let specs = check_campaign(dir, &manifest, manifest_text, v);

    let Some(lines) = lines else { return Ok(()) };
    // A merged directory: each shard's log as it was, one after another, each its own chain.
    let segments = manifest.merge.as_ref().map(segments_of).unwrap_or_default();
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    let empty_sha = line_sha256(b"");
    let mut previous: &str = &empty_sha;
    let mut history = History::new(&manifest);
    let evidence_dir_ok = lines.is_empty() || check_evidence_dir(dir, v);
    // Rows whose evidence is checked after the loop, on every core: (line, row, where in
    // `v.problems` its evidence's problems belong, right after the row's own).
    let mut to_check: Vec<(usize, Row, usize)> = Vec::with_capacity(lines.len());
    for (index, log_line) in lines.iter().enumerate() {
        let line = index + 1;
        let segment = segments.iter().find(|s| index >= s.start && index < s.start + s.len);
        let prev_sha: &str = if segment.is_some_and(|s| s.start == index) { &empty_sha } else { previous };
        previous = &log_line.sha256;
        let Some(value) = &log_line.value else { continue };
        let problem = |kind, problem: String, repair: &str| Problem {
            file: "runs.jsonl".into(),
            line: Some(line),
            kind,
            problem,
            repair: repair.to_owned(),
        };
        let row = match shape::read_row(format, value) {
            Ok(row) => row,
            Err(detail) => {
                v.problems.push(problem(ProblemKind::Malformed, format!("the row is not valid: {detail}"), RESTORE));
                continue;
            }
        };
        let expected_run = segment.map_or(manifest.run_id.as_str(), |s| s.run_id.as_str());
        if row.run_id != expected_run {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("the row belongs to run {}, not {expected_run}", row.run_id),
                "remove the line: rows of another run do not belong in this log (then the next row's chain breaks: restore from a copy instead if there is one)",
            ));
        }
        if let Some(specs) = &specs {
            check_against_matrix(&row, specs, &problem, v);
            if let (Some(segment), Some(merge), Some(spec)) =
                (segment, manifest.merge.as_ref(), specs.trials.get(&row.trial_id))
            {
                let belongs = partition::shard_of(merge.scheme, merge.total, spec.position, &row.trial_id);
                if belongs != segment.shard {
                    v.problems.push(problem(
                        ProblemKind::Inconsistent,
                        format!(
                            "trial `{}` is in the log of shard {}/{} but belongs to shard {belongs}/{} ({})",
                            row.trial_id,
                            segment.shard,
                            merge.total,
                            merge.total,
                            merge.scheme.as_str()
                        ),
                        RESTORE,
                    ));
                }
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
        if chained && row.prev_row_sha256.as_deref() != Some(prev_sha) {
            v.problems.push(problem(
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
            ));
        }
        if chained {
            history.row(&row, line, &problem, v);
        }
        for signature in &row.signatures {
            v.signed_by.insert(signer(signature));
        }
        if evidence_dir_ok {
            if names_its_own_evidence(&row) {
                referenced.insert(row.evidence.clone());
            }
            let at = v.problems.len();
            to_check.push((line, row, at));
        }
    }
    let evidence_problems = check_evidence_all(dir, &to_check, chained)?;
    let row_problems = std::mem::take(&mut v.problems);
    let mut row_problems = row_problems.into_iter();
    let mut taken = 0;
    let mut linked = Vec::new();
    for ((_, _, at), (problems, links)) in to_check.iter().zip(evidence_problems) {
        v.problems.extend(row_problems.by_ref().take(at - taken));
        taken = *at;
        v.problems.extend(problems);
        linked.extend(links);
    }
    v.problems.extend(row_problems);
    for (relative, links) in linked {
        note_linked(v, &relative, links);
    }
    if chained {
        v.checked.push("the row chain, and each row's evidence against the hash it pins".into());
    }
    v.checked.push("each row against its evidence: every field the evidence determines".into());
    // Evidence no row names: a crash between the evidence write and the row append leaves one.
    if evidence_dir_ok && let Ok(entries) = std::fs::read_dir(dir.join("evidence")) {
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
    if chained {
        if let Some(merge) = &manifest.merge {
            check_shard_seals(merge, &manifest, &segments, lines, options, v);
        }
        let cover = check_seal(dir, &manifest, manifest_value, lines, options, v)?;
        check_authenticity(&manifest, manifest_value, lines, cover, options, v);
    }
    Ok(())
}

/// One complete line of `runs.jsonl` as read.
pub(crate) struct LogLine {
    /// SHA-256 of its bytes without the newline: the next row's `prev_row_sha256`.
    pub(crate) sha256: String,
    /// Its JSON object (None, and a problem, when it is not one).
    pub(crate) value: Option<Value>,
}

/// Reads `runs.jsonl` as a stream, a row at a time: at most [`bounds::LOG`] bytes in all
/// (a larger file is refused from its size, unread) and [`bounds::ROW`] a row, each row read
/// by the strict reader. `None` (and a problem) when it cannot be read as a log.
fn read_log(dir: &Path, v: &mut Verification) -> Result<Option<Vec<LogLine>>, VerifyError> {
    const LOG: &str = "runs.jsonl";
    let file = match store::open_beneath(dir, Path::new(LOG)) {
        Ok(file) => file,
        Err(e) => {
            read_problem(dir, LOG, None, e, v)?;
            return Ok(None);
        }
    };
    let meta = file.metadata().map_err(|source| VerifyError::Read { path: dir.join(LOG), source })?;
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        note_linked(v, LOG, std::os::unix::fs::MetadataExt::nlink(&meta));
    }
    let too_large = |size: u64, v: &mut Verification| {
        read_problem(dir, LOG, None, BeneathError::TooLarge { size, bound: bounds::LOG }, v)
    };
    if meta.len() > bounds::LOG {
        too_large(meta.len(), v)?;
        return Ok(None);
    }
    let read_error = |source| VerifyError::Read { path: dir.join(LOG), source };
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file.take(bounds::LOG + 1));
    let mut lines = Vec::new();
    let mut buffer = Vec::new();
    let mut total: u64 = 0;
    loop {
        buffer.clear();
        let read = (&mut reader).take(bounds::ROW + 1).read_until(b'\n', &mut buffer).map_err(read_error)?;
        if read == 0 {
            break;
        }
        total += read as u64;
        if total > bounds::LOG {
            too_large(total, v)?;
            return Ok(None);
        }
        let number = lines.len() + 1;
        if buffer.last() != Some(&b'\n') {
            if buffer.len() as u64 > bounds::ROW {
                v.problems.push(Problem {
                    file: LOG.into(),
                    line: Some(number),
                    kind: ProblemKind::Malformed,
                    problem: format!(
                        "line {number} is longer than the {} a row may have (refused without reading the rest of it)",
                        bounds::describe(bounds::ROW)
                    ),
                    repair: RESTORE.into(),
                });
                return Ok(None);
            }
            v.notes.push(format!(
                "runs.jsonl ends in a torn row ({} bytes without a newline: a write the runner never finished); `run --resume` cuts it, `analyze` ignores it",
                buffer.len()
            ));
            break;
        }
        buffer.pop();
        lines.push(log_line(&buffer, number, v));
    }
    Ok(Some(lines))
}

/// One complete line of the log, read by the strict reader.
fn log_line(bytes: &[u8], number: usize, v: &mut Verification) -> LogLine {
    let malformed = |problem: String| Problem {
        file: "runs.jsonl".into(),
        line: Some(number),
        kind: ProblemKind::Malformed,
        problem,
        repair: RESTORE.into(),
    };
    let value = match strict::parse(bytes) {
        Ok(value @ Value::Object(_)) => Some(value),
        Ok(_) => {
            v.problems.push(malformed(format!("line {number} is not a JSON object")));
            None
        }
        Err(_) if bytes.is_empty() => {
            v.problems.push(malformed(format!("line {number} is empty")));
            None
        }
        Err(strict::StrictError::Syntax { detail, .. }) => {
            v.problems.push(malformed(format!("line {number} is not valid JSON ({detail})")));
            None
        }
        Err(e) => {
            v.problems.push(malformed(format!("line {number}: {e}")));
            None
        }
    };
    LogLine { sha256: line_sha256(bytes), value }
}

/// Notes a results file with another hard link: readable, but never written through.
fn note_linked(v: &mut Verification, relative: &str, links: u64) {
    v.linked.push(relative.to_owned());
    v.notes.push(format!(
        "{relative} has {links} hard links: it is shared with another directory (a `cp -al` or `rsync --link-dest` snapshot), so a change made through either shows in both; `run --resume` refuses to write through it: copy the directory (`cp -a`, not `cp -al`) to resume it"
    ));
}

/// How a key that signed something is named: `hmac-sha256 key <id>`.
fn signer(signature: &SealSignature) -> String {
    format!("{} key {}", signature.algorithm.as_str(), signature.key_id)
}

/// What an honest runner's history looks like, checked row by row: a trial is never run
/// again once it has a complete attempt, and never more often than the run had sessions (its
/// start and each resume, which records itself before it runs anything).
struct History {
    complete: BTreeMap<String, usize>,
    attempts: BTreeMap<String, usize>,
    /// Sessions of the run (None for a merged directory, whose shards' resumes it does not
    /// record).
    sessions: Option<usize>,
}

impl History {
    fn new(manifest: &Manifest) -> History {
        let sessions = manifest.merge.is_none().then_some(1 + manifest.resumes.len());
        History { complete: BTreeMap::new(), attempts: BTreeMap::new(), sessions }
    }

    fn row(
        &mut self,
        row: &Row,
        line: usize,
        problem: &dyn Fn(ProblemKind, String, &str) -> Problem,
        v: &mut Verification,
    ) {
        const FORGED: &str =
            "restore runs.jsonl from a copy taken before the change; the row was not written by an honest runner";
        if let Some(first) = self.complete.get(&row.trial_id) {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!(
                    "trial `{}` already has a complete attempt (line {first}): a runner never runs a trial again once it has one, so this attempt was not written by one",
                    row.trial_id
                ),
                FORGED,
            ));
        } else if row.is_complete() {
            self.complete.insert(row.trial_id.clone(), line);
        }
        let attempts = self.attempts.entry(row.trial_id.clone()).or_default();
        *attempts += 1;
        if let Some(sessions) = self.sessions
            && *attempts > sessions
        {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!(
                    "trial `{}` has {attempts} attempts, but the run had {sessions} session{} (its start and {} resume{} recorded in the manifest), and a session runs a trial at most once",
                    row.trial_id,
                    if sessions == 1 { "" } else { "s" },
                    sessions - 1,
                    if sessions == 2 { "" } else { "s" },
                ),
                FORGED,
            ));
        }
    }
}

/// One shard's log inside a merged directory's `runs.jsonl`.
struct Segment {
    /// 0-based index of its first line.
    start: usize,
    /// Its lines.
    len: usize,
    /// Its shard (1-based).
    shard: u32,
    /// Its run id.
    run_id: String,
}

/// The segments a merge record lays out, in order.
fn segments_of(merge: &MergeRecord) -> Vec<Segment> {
    let mut start = 0;
    merge
        .shards
        .iter()
        .map(|shard| {
            let len = usize::try_from(shard.rows).unwrap_or(usize::MAX);
            let segment = Segment { start, len, shard: shard.shard, run_id: shard.run_id.clone() };
            start = start.saturating_add(len);
            segment
        })
        .collect()
}

/// A merged directory: the segments cover the log exactly, no shard is merged twice, and each
/// shard's seal (as it was) closes its segment, with its signatures checked by every key given.
fn check_shard_seals(
    merge: &MergeRecord,
    manifest: &Manifest,
    segments: &[Segment],
    lines: &[LogLine],
    options: &VerifyOptions,
    v: &mut Verification,
) {
    let problem = |problem: String| Problem {
        file: "manifest.json".into(),
        line: None,
        kind: ProblemKind::Inconsistent,
        problem,
        repair: "restore the merged directory from a copy, or merge the shards again".to_owned(),
    };
    let covered: usize = segments.iter().map(|s| s.len).fold(0, usize::saturating_add);
    if covered != lines.len() {
        v.problems.push(problem(format!(
            "`merge.shards` lays out {} but runs.jsonl has {}: rows were added to or removed from the merged log",
            count(covered, "row"),
            lines.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for (shard, segment) in merge.shards.iter().zip(segments) {
        if !seen.insert(shard.shard) {
            v.problems.push(problem(format!("shard {}/{} is merged twice", shard.shard, merge.total)));
        }
        let seal = &shard.seal;
        let last = if segment.len == 0 {
            Some(line_sha256(b""))
        } else {
            lines.get(segment.start + segment.len - 1).map(|line| line.sha256.clone())
        };
        let mut wrong = Vec::new();
        if seal.rows != shard.rows {
            wrong.push(format!("it counts {}, the merge lays out {}", count(seal.rows, "row"), shard.rows));
        }
        if last.as_deref() != Some(seal.prev_row_sha256.as_str()) {
            wrong.push("its `prev_row_sha256` is not the hash of the shard's last row".to_owned());
        }
        if seal.run_id != shard.run_id {
            wrong.push(format!("it is of run {}, not {}", seal.run_id, shard.run_id));
        }
        if Some(seal.recorded_campaign_sha256.as_str()) != manifest.configuration.recorded_campaign_sha256.as_deref() {
            wrong.push("it pins another campaign".to_owned());
        }
        if seal.sha256() != shard.seal_sha256 {
            wrong.push("its hash is not the `seal_sha256` recorded".to_owned());
        }
        for signature in &seal.signatures {
            match options.checkers.iter().find_map(|c| c.check(seal, signature)) {
                Some(false) => wrong.push(format!(
                    "its {} signature by key {} does not match it",
                    signature.algorithm.as_str(),
                    signature.key_id
                )),
                Some(true) => v.checked.push(format!(
                    "shard {}/{}'s seal: its {} signature by key {}",
                    shard.shard,
                    merge.total,
                    signature.algorithm.as_str(),
                    signature.key_id
                )),
                None => {}
            }
        }
        for what in wrong {
            v.problems.push(problem(format!(
                "the seal of shard {}/{} (run {}) does not hold: {what}",
                shard.shard, merge.total, shard.run_id
            )));
        }
    }
    v.checked.push(format!(
        "{} against its segment of runs.jsonl, and each row against its shard's partition",
        if merge.shards.len() == 1 {
            "the shard's seal".to_owned()
        } else {
            format!("each of the {} shards' seals", merge.shards.len())
        },
    ));
}

/// Reads the evidence a row of a verified directory names, as `verify` read it: through no
/// symbolic link, and, when the row pins a hash, only while the bytes still have it (a file
/// swapped after `verify` is refused, not shown). `None` when the row names no evidence.
///
/// # Errors
///
/// What is wrong, in words.
pub fn read_row_evidence(dir: &Path, row: &Value) -> Result<Option<Value>, String> {
    let Some(relative) = row.get("evidence").and_then(Value::as_str) else { return Ok(None) };
    let bytes =
        store::read_beneath(dir, Path::new(relative), bounds::EVIDENCE).map_err(|e| format!("{relative}: {e}"))?;
    if let Some(pinned) = row.get("evidence_sha256").and_then(Value::as_str)
        && sha256_hex(&bytes) != pinned
    {
        return Err(format!("{relative} was changed after its row was written"));
    }
    strict::parse(&bytes).map(Some).map_err(|e| format!("{relative}: {e}"))
}

/// Reads a results file without following links and within `bound`; a missing, linked or
/// oversized file is a problem (`None`). `line` is the row that names it, for evidence.
fn read_results_file(
    dir: &Path,
    relative: &str,
    line: Option<usize>,
    bound: u64,
    problems: &mut Vec<Problem>,
) -> Result<Option<store::ReadFile>, VerifyError> {
    match store::read_bounded(dir, Path::new(relative), bound) {
        Ok(read) => Ok(Some(read)),
        Err(e) => {
            problems.push(beneath_problem(dir, relative, line, e)?);
            Ok(None)
        }
    }
}

/// [`read_results_file`] for a file of the directory itself, its hard links noted.
fn read_file(
    dir: &Path,
    relative: &str,
    line: Option<usize>,
    bound: u64,
    v: &mut Verification,
) -> Result<Option<Vec<u8>>, VerifyError> {
    let Some(read) = read_results_file(dir, relative, line, bound, &mut v.problems)? else { return Ok(None) };
    if read.links > 1 {
        note_linked(v, relative, read.links);
    }
    Ok(Some(read.bytes))
}

/// The problem a results file that cannot be read makes.
fn read_problem(
    dir: &Path,
    relative: &str,
    line: Option<usize>,
    error: BeneathError,
    v: &mut Verification,
) -> Result<(), VerifyError> {
    v.problems.push(beneath_problem(dir, relative, line, error)?);
    Ok(())
}

/// What is wrong with a results file that could not be read (an I/O failure is an error).
fn beneath_problem(
    dir: &Path,
    relative: &str,
    line: Option<usize>,
    error: BeneathError,
) -> Result<Problem, VerifyError> {
    let file = if line.is_some() { "runs.jsonl".to_owned() } else { relative.to_owned() };
    let problem = |kind, problem: String, repair: String| Problem { file: file.clone(), line, kind, problem, repair };
    Ok(match error {
        BeneathError::Missing => {
            let (what, repair) = if relative == "runs.jsonl" {
                (
                    "it is missing (the run's log of attempts)".to_owned(),
                    "restore runs.jsonl from a copy; an empty file records that no attempt finished".to_owned(),
                )
            } else {
                (
                    format!("{relative} is missing: its trial cannot be checked, so its attempt does not count"),
                    format!(
                        "restore {relative} from a copy; if there is none, the trial must be run again in a new run"
                    ),
                )
            };
            problem(ProblemKind::Inconsistent, what, repair)
        }
        e @ (BeneathError::Link | BeneathError::NotAFile) => {
            problem(ProblemKind::Inconsistent, format!("{relative}: {e}"), LINK_REPAIR.to_owned())
        }
        BeneathError::NotRelative => problem(
            ProblemKind::Inconsistent,
            format!("{relative} is not a file inside the directory"),
            RESTORE.to_owned(),
        ),
        e @ BeneathError::TooLarge { .. } => {
            problem(ProblemKind::Malformed, format!("{relative}: {e}"), RESTORE.to_owned())
        }
        BeneathError::Io(source) => return Err(VerifyError::Read { path: dir.join(relative), source }),
    })
}

/// `evidence/` is a real directory (not a link to one elsewhere).
fn check_evidence_dir(dir: &Path, v: &mut Verification) -> bool {
    match std::fs::symlink_metadata(dir.join("evidence")) {
        Ok(meta) if meta.file_type().is_dir() => true,
        Ok(meta) if meta.file_type().is_symlink() => {
            v.problems.push(Problem {
                file: "evidence".into(),
                line: None,
                kind: ProblemKind::Inconsistent,
                problem: "evidence/ is a symbolic link: results files are never read through links".into(),
                repair: LINK_REPAIR.into(),
            });
            false
        }
        // Missing or not a directory: each row's evidence is then reported missing.
        _ => true,
    }
}

/// The original 0.1.0's results: their shape only.
fn check_original(
    dir: &Path,
    lines: Option<&[LogLine]>,
    manifest: &Value,
    v: &mut Verification,
) -> Result<(), VerifyError> {
    let run_id = manifest.get("run_id").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut attempts: BTreeMap<String, usize> = BTreeMap::new();
    for (index, log_line) in lines.unwrap_or_default().iter().enumerate() {
        let line = index + 1;
        let Some(value) = &log_line.value else { continue };
        let problem = |kind, problem: String| Problem {
            file: "runs.jsonl".into(),
            line: Some(line),
            kind,
            problem,
            repair: RESTORE.to_owned(),
        };
        let row = match shape::read_row(ResultsFormat::Original, value) {
            Ok(row) => row,
            Err(detail) => {
                v.problems.push(problem(
                    ProblemKind::Malformed,
                    format!("the row is not a row of the original 0.1.0: {detail}"),
                ));
                continue;
            }
        };
        if row.run_id != run_id {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("the row belongs to run {}, not {run_id}", row.run_id),
            ));
        }
        if let Some(first) = attempts.insert(row.attempt_id.clone(), line) {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("attempt `{}` is also recorded on line {first}: one attempt counted twice", row.attempt_id),
            ));
        }
        // The original writes its evidence beside the log, named by the row.
        let name = Path::new(&row.evidence);
        if name.components().count() != 1 || !matches!(name.components().next(), Some(Component::Normal(_))) {
            v.problems.push(problem(
                ProblemKind::Inconsistent,
                format!("the row's evidence `{}` is not a file of the directory", row.evidence),
            ));
            continue;
        }
        read_file(dir, &row.evidence, Some(line), bounds::EVIDENCE, v)?;
    }
    v.checked.push("the manifest and every row against the original 0.1.0's record shapes; every evidence file a row names is present".into());
    v.unchecked.push("integrity: the original's results carry no chain or hashes, so rows and evidence edited, removed or reordered cannot be found, nor a row that disagrees with its evidence".into());
    v.notes.push(
        "written by the original elengtis 0.1.0: its results carry no chain, so nothing beyond their shape was checked"
            .to_owned(),
    );
    Ok(())
}

/// A row's place in the recorded matrix.
fn check_against_matrix(
    row: &Row,
    specs: &Matrix,
    problem: &dyn Fn(ProblemKind, String, &str) -> Problem,
    v: &mut Verification,
) {
    match specs.trials.get(&row.trial_id) {
        None => v.problems.push(problem(
            ProblemKind::Inconsistent,
            match &specs.shard {
                None => format!(
                    "trial `{}` is not in the recorded matrix ({}: {})",
                    row.trial_id,
                    count(specs.trials.len(), "trial"),
                    sample(specs.trials.keys())
                ),
                Some(shard) => format!(
                    "trial `{}` is not in this run's shard {shard} of the recorded matrix ({}: {})",
                    row.trial_id,
                    count(specs.trials.len(), "trial"),
                    sample(specs.trials.keys())
                ),
            },
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
    let campaign = (specs.engine.as_str(), specs.model.as_deref(), specs.model_id.as_deref());
    if campaign != (row.engine.as_str(), row.model.as_deref(), row.model_id.as_deref()) {
        v.problems.push(problem(
            ProblemKind::Inconsistent,
            format!(
                "the row says engine `{}`, model {:?}, model_id {:?}, but the recorded campaign runs engine `{}`, model {:?}, model_id {:?}",
                row.engine.as_str(),
                row.model,
                row.model_id,
                specs.engine,
                specs.model,
                specs.model_id
            ),
            RESTORE,
        ));
    }
}

/// A matrix entry by trial id.
struct Spec {
    target: String,
    scenario: String,
    index: u32,
    /// Its position in the full matrix (a `count:` partition's key).
    position: usize,
}

/// The recorded matrix, and what the campaign says every row of it ran.
struct Matrix {
    trials: BTreeMap<String, Spec>,
    /// The run's partition (`count:2/4`), when it is a shard.
    shard: Option<String>,
    engine: String,
    model: Option<String>,
    model_id: Option<String>,
}

/// Rebuilds the recorded campaign, checks its hashes, and returns its matrix by trial id.
fn check_campaign(dir: &Path, manifest: &Manifest, text: &str, v: &mut Verification) -> Option<Matrix> {
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
    let all = matrix::expand(&bundle);
    let full_sha = matrix::matrix_sha256(&all);
    let position: BTreeMap<&str, usize> = all.iter().enumerate().map(|(i, t)| (t.trial_id.as_str(), i)).collect();
    let recorded_matrix = manifest
        .partition
        .as_ref()
        .map(|p| ("partition", &p.matrix_sha256))
        .or_else(|| manifest.merge.as_ref().map(|m| ("merge", &m.matrix_sha256)));
    if let Some((field, pinned)) = recorded_matrix
        && *pinned != full_sha
    {
        v.problems.push(Problem {
            file: "manifest.json".into(),
            line: line_of(text, &format!("\"{field}\":")),
            kind: ProblemKind::Inconsistent,
            problem: format!(
                "`{field}.matrix_sha256` is {pinned}, but the recorded campaign's matrix hashes to {full_sha}: the shard was cut from another matrix"
            ),
            repair: RESTORE.into(),
        });
    }
    let shard_label = manifest.partition.as_ref().map(|p| p.partition().to_string());
    let trials = match &manifest.partition {
        Some(record) => {
            let shard: Vec<_> = record.partition().select(&all, |t| t.trial_id.as_str()).into_iter().cloned().collect();
            if (record.matrix_trials, record.shard_trials) != (all.len() as u64, shard.len() as u64) {
                v.problems.push(Problem {
                    file: "manifest.json".into(),
                    line: line_of(text, "\"partition\":"),
                    kind: ProblemKind::Inconsistent,
                    problem: format!(
                        "`partition` records {} of {}, but shard {} of the recorded matrix has {} of {}",
                        count(record.shard_trials, "trial"),
                        record.matrix_trials,
                        record.partition(),
                        shard.len(),
                        all.len()
                    ),
                    repair: RESTORE.into(),
                });
            }
            v.checked.push(format!(
                "the shard's partition {}: {} of the recorded matrix's {}, against the matrix hash every shard records",
                record.partition(),
                shard.len(),
                count(all.len(), "trial")
            ));
            shard
        }
        None => all.clone(),
    };
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
                    position: position.get(t.trial_id.as_str()).copied().unwrap_or_default(),
                },
            )
        })
        .collect();
    v.matrix_trials = Some(planned.len());
    v.matrix = Some(planned);
    Some(Matrix {
        trials: specs,
        shard: shard_label,
        engine: campaign.engine.as_str().to_owned(),
        model: campaign.model.clone(),
        model_id: campaign.model_id.clone().or_else(|| campaign.model.clone()),
    })
}

/// Checks the evidence file a row names: its name, that it is a regular file inside
/// `evidence/` within its bound, its hash (chained runs), that it is this attempt's, that it
/// reads strictly, and that it determines the row's fields as the row has them. Returns the
/// file and its hard links when it has more than one.
fn check_evidence(
    dir: &Path,
    row: &Row,
    line: usize,
    chained: bool,
    problems: &mut Vec<Problem>,
) -> Result<Option<Linked>, VerifyError> {
    let problem = |kind, problem: String, repair: String| Problem {
        file: "runs.jsonl".into(),
        line: Some(line),
        kind,
        problem,
        repair,
    };
    if !names_its_own_evidence(row) {
        problems.push(problem(
            ProblemKind::Inconsistent,
            format!(
                "the row's evidence `{}` is not `evidence/{}.json` (or `.retry-<n>.json`), the file of its trial inside evidence/",
                row.evidence, row.trial_id
            ),
            RESTORE.to_owned(),
        ));
        return Ok(None);
    }
    let Some(read) = read_results_file(dir, &row.evidence, Some(line), bounds::EVIDENCE, problems)? else {
        return Ok(None);
    };
    let linked = (read.links > 1).then(|| (row.evidence.clone(), read.links));
    let bytes = read.bytes;
    if chained {
        let actual = sha256_hex(&bytes);
        if let Some(pinned) = row.evidence_sha256.as_deref()
            && pinned != actual
        {
            problems.push(problem(
                ProblemKind::Inconsistent,
                format!(
                    "{} was changed after its row was written (its hash is {actual}, the row pins {pinned})",
                    row.evidence
                ),
                format!(
                    "restore {} from a copy; if there is none, the trial must be run again in a new run",
                    row.evidence
                ),
            ));
            return Ok(linked);
        }
    }
    let restore = format!("restore {} from a copy", row.evidence);
    // Typed straight from the bytes (the common case); the slower reader that names the field
    // at fault only for evidence that is not valid.
    let evidence: Evidence = match serde_json::from_slice::<Evidence>(&bytes) {
        Ok(evidence) => evidence,
        Err(_) => {
            let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
                problems.push(problem(ProblemKind::Malformed, format!("{} is not valid JSON", row.evidence), restore));
                return Ok(linked);
            };
            let names =
                (value.get("trial_id").and_then(Value::as_str), value.get("attempt_id").and_then(Value::as_str));
            if names != (Some(row.trial_id.as_str()), Some(row.attempt_id.as_str())) {
                problems.push(not_this_rows(row, line, names, restore));
                return Ok(linked);
            }
            let detail = from_value::<Evidence>(&value).err().map_or_else(String::new, |e| e.to_string());
            let detail = detail.strip_prefix("failed to read the record: ").unwrap_or(&detail).to_owned();
            problems.push(problem(
                ProblemKind::Malformed,
                format!("{} is not valid evidence: {detail}", row.evidence),
                restore,
            ));
            return Ok(linked);
        }
    };
    // The one strict reader: the typed read above took the last of a key given twice.
    if let Err(e) = strict::check(&bytes) {
        problems.push(problem(ProblemKind::Malformed, format!("{} (line {}): {e}", row.evidence, e.line()), restore));
        return Ok(linked);
    }
    let names = (Some(evidence.trial_id.as_str()), Some(evidence.attempt_id.as_str()));
    if names != (Some(row.trial_id.as_str()), Some(row.attempt_id.as_str())) {
        problems.push(not_this_rows(row, line, names, restore));
        return Ok(linked);
    }
    // The row says only what its evidence says.
    for (field, in_row, from_evidence) in derive::differences(&evidence, row) {
        problems.push(problem(
            ProblemKind::Inconsistent,
            format!("the row's `{field}` is {in_row} but its evidence {} makes it {from_evidence}", row.evidence),
            restore.clone(),
        ));
    }
    for inconsistency in derive::inconsistencies(&evidence) {
        problems.push(problem(
            ProblemKind::Inconsistent,
            format!("{} contradicts itself: {inconsistency}", row.evidence),
            restore.clone(),
        ));
    }
    Ok(linked)
}

/// A results file with other hard links: its path in the directory and its link count.
type Linked = (String, u64);

/// What checking one row's evidence found: its problems, and its hard links when it has others.
type EvidenceChecked = (Vec<Problem>, Option<Linked>);

/// The row's evidence is `evidence/<trial>.json` (or `.retry-<n>.json`), inside evidence/.
fn names_its_own_evidence(row: &Row) -> bool {
    let relative = Path::new(&row.evidence);
    let inside = relative.components().all(|c| matches!(c, Component::Normal(_)))
        && relative.components().next() == Some(Component::Normal("evidence".as_ref()))
        && relative.components().count() == 2;
    let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    inside
        && (name == format!("{}.json", row.trial_id)
            || name
                .strip_prefix(&format!("{}.retry-", row.trial_id))
                .and_then(|rest| rest.strip_suffix(".json"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

/// Checks each row's evidence (read, hash, parse, derive: most of `verify`'s time) on every
/// core; the problems of each row come back in its order.
fn check_evidence_all(
    dir: &Path,
    rows: &[(usize, Row, usize)],
    chained: bool,
) -> Result<Vec<EvidenceChecked>, VerifyError> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).clamp(1, 8);
    let chunk = rows.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = rows
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(line, row, _)| {
                            let mut problems = Vec::new();
                            check_evidence(dir, row, *line, chained, &mut problems).map(|links| (problems, links))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(rows.len());
        for worker in workers {
            match worker.join() {
                Ok(problems) => all.extend(problems?),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(all)
    })
}

/// The problem of evidence that names another trial or attempt than its row.
fn not_this_rows(row: &Row, line: usize, names: (Option<&str>, Option<&str>), repair: String) -> Problem {
    Problem {
        file: "runs.jsonl".into(),
        line: Some(line),
        kind: ProblemKind::Inconsistent,
        problem: format!(
            "{} is the evidence of trial {} attempt {}, not of this row (trial `{}`, attempt `{}`)",
            row.evidence,
            names.0.map_or_else(|| "(none)".to_owned(), |t| format!("`{t}`")),
            names.1.map_or_else(|| "(none)".to_owned(), |a| format!("`{a}`")),
            row.trial_id,
            row.attempt_id
        ),
        repair,
    }
}

/// What a seal signed by every key given covers: the first `rows` rows, and the manifest
/// as it is (`manifest`: a seal of this version whose resume count is the manifest's).
#[derive(Debug, Clone, Copy, Default)]
struct Cover {
    rows: u64,
    manifest: bool,
}

/// Checks `seal.json` against the rows and the manifest, its signatures against the keys, and
/// the history after it; returns what it covers when every key given signed it.
fn check_seal(
    dir: &Path,
    manifest: &Manifest,
    manifest_value: &Value,
    lines: &[LogLine],
    options: &VerifyOptions,
    v: &mut Verification,
) -> Result<Cover, VerifyError> {
    let problem = |problem: String, repair: &str| Problem {
        file: SEAL_FILE.into(),
        line: None,
        kind: ProblemKind::Inconsistent,
        problem,
        repair: repair.to_owned(),
    };
    let unsealed = |why: String, v: &mut Verification| {
        if !options.checkers.is_empty() {
            v.unchecked.push("the signature: there is no seal to carry one".into());
        }
        v.unchecked.push(
            "rows at the end: without a seal, rows removed from the end (with their evidence) leave no trace".into(),
        );
        v.seal = SealState::Unsealed { why };
    };
    let read = match store::read_bounded(dir, Path::new(SEAL_FILE), bounds::SEAL) {
        Ok(read) => read,
        Err(BeneathError::Missing) => {
            unsealed("no seal.json: a run still going, or killed".into(), v);
            return Ok(Cover::default());
        }
        Err(e @ (BeneathError::Link | BeneathError::NotAFile | BeneathError::NotRelative)) => {
            v.problems.push(problem(format!("{SEAL_FILE}: {e}"), LINK_REPAIR));
            return Ok(Cover::default());
        }
        Err(e @ BeneathError::TooLarge { .. }) => {
            v.problems.push(Problem { kind: ProblemKind::Malformed, ..problem(format!("{SEAL_FILE}: {e}"), RESTORE) });
            return Ok(Cover::default());
        }
        Err(BeneathError::Io(source)) => return Err(VerifyError::Read { path: dir.join(SEAL_FILE), source }),
    };
    if read.links > 1 {
        note_linked(v, SEAL_FILE, read.links);
    }
    let seal: Seal = match strict::parse(&read.bytes).map(|value| from_value::<Seal>(&value)) {
        Ok(Ok(seal)) => seal,
        Ok(Err(e)) => {
            v.problems
                .push(Problem { kind: ProblemKind::Malformed, ..problem(format!("it is not a seal: {e}"), RESTORE) });
            return Ok(Cover::default());
        }
        Err(strict::StrictError::Syntax { .. }) => {
            v.problems
                .push(Problem { kind: ProblemKind::Malformed, ..problem("it is not valid JSON".into(), RESTORE) });
            return Ok(Cover::default());
        }
        Err(e) => {
            v.problems.push(Problem {
                kind: ProblemKind::Malformed,
                line: Some(e.line()),
                ..problem(e.to_string(), RESTORE)
            });
            return Ok(Cover::default());
        }
    };
    for signature in &seal.signatures {
        v.signed_by.insert(signer(signature));
    }
    let before = v.problems.len();
    if seal.seal_version != seal::SEAL_VERSION && seal.seal_version != seal::SEAL_VERSION_V1 {
        v.problems.push(problem(
            format!(
                "seal_version {} is not one this build reads ({} or {})",
                seal.seal_version,
                seal::SEAL_VERSION,
                seal::SEAL_VERSION_V1
            ),
            RESTORE,
        ));
    }
    if seal.run_id != manifest.run_id {
        v.problems.push(problem(format!("the seal is of run {}, not {}", seal.run_id, manifest.run_id), RESTORE));
    }
    let rows = lines.len() as u64;
    let sealed_rows = usize::try_from(seal.rows).unwrap_or(usize::MAX);
    if seal.rows > rows {
        v.problems.push(problem(
            format!(
                "the seal counts {} but runs.jsonl has {rows}: rows the run recorded were removed",
                count(seal.rows, "row")
            ),
            RESTORE,
        ));
    } else {
        let at_seal = if sealed_rows == 0 { line_sha256(b"") } else { lines[sealed_rows - 1].sha256.clone() };
        if at_seal != seal.prev_row_sha256 {
            v.problems.push(problem(
                format!(
                    "the seal's `prev_row_sha256` is not the hash of row {}: the rows it seals were changed (edited, reordered, replaced and rehashed)",
                    seal.rows
                ),
                RESTORE,
            ));
        }
    }
    let recorded = manifest.configuration.recorded_campaign_sha256.as_deref().unwrap_or_default();
    if seal.recorded_campaign_sha256 != recorded {
        v.problems.push(problem(
            "the seal pins another campaign than the manifest's `configuration.recorded_campaign_sha256`: the campaign (and its matrix) was changed after the run".into(),
            "restore manifest.json from a copy",
        ));
    }
    let resumes = manifest.resumes.len() as u64;
    let pinned = if seal.seal_version == seal::SEAL_VERSION_V1 {
        seal::manifest_sha256_v1(manifest_value)
    } else {
        seal::manifest_sha256(manifest_value, seal.resumes)
    };
    if seal.resumes > resumes {
        v.problems.push(problem(
            format!(
                "the seal counts {} resumes but the manifest records {resumes}: resume records were removed",
                seal.resumes
            ),
            "restore manifest.json from a copy",
        ));
    } else if seal.manifest_sha256 != pinned {
        v.problems.push(problem(
            "the seal pins another manifest: manifest.json was changed after the run was sealed (its campaign, a resume record the seal counts, or the spend cap)".into(),
            "restore manifest.json from a copy",
        ));
    }
    if seal.seal_version == seal::SEAL_VERSION_V1 {
        v.unchecked.push(
            "the resume records and the spend cap: a seal of version 1 (written by an earlier build) does not cover them"
                .into(),
        );
    }
    // Signatures, checked with every key given.
    let mut signatures = Vec::new();
    for signature in &seal.signatures {
        let checked = options.checkers.iter().find_map(|c| c.check(&seal, signature));
        let by = format!("{} by key {}", signature.algorithm.as_str(), signature.key_id);
        signatures.push(match checked {
            Some(true) => format!("{by}: valid"),
            Some(false) => format!("{by}: INVALID"),
            None => format!("{by}: not checked (no such key given)"),
        });
        if checked == Some(false) {
            v.problems.push(problem(
                format!(
                    "the {} signature by key {} does not match the seal: the seal was changed after it was signed",
                    signature.algorithm.as_str(),
                    signature.key_id
                ),
                "restore the directory from a copy; a seal can be signed again only by the key's holder, after checking the records",
            ));
        }
    }
    for checker in &options.checkers {
        let by_it = seal.signatures.iter().any(|s| checker.check(&seal, s).is_some());
        if !by_it {
            v.problems.push(problem(
                format!(
                    "the seal is not signed by the {} key {} given: it was sealed without that key, or re-sealed by someone without it",
                    checker.algorithm().as_str(),
                    checker.key_id()
                ),
                "restore the directory from a copy; or check it with the key that signed it",
            ));
        }
    }
    if options.checkers.is_empty() {
        v.unchecked.push(if seal.signatures.is_empty() {
            "authenticity: the seal is not signed, and anyone can recompute an unsigned seal with its hashes".into()
        } else {
            "authenticity: the seal is signed, but no key was given to check the signature (`--key`, `--public-key`)"
                .into()
        });
    } else {
        v.checked.push("the seal's signature with every key given".into());
    }
    if v.problems.len() > before {
        return Ok(Cover::default());
    }
    v.checked.push("the seal: the rows it counts, the last row's hash, the campaign and the manifest it pins".into());
    // What an honest runner can have written after its seal: nothing after a complete one
    // (every trial has a complete attempt: a resume runs none), and rows only after a resume
    // recorded itself.
    if rows > seal.rows {
        let first = sealed_rows + 1;
        let forged = |what: String| {
            Problem {
            file: "runs.jsonl".into(),
            line: Some(first),
            kind: ProblemKind::Inconsistent,
            problem: what,
            repair: "restore runs.jsonl from a copy taken before the change (without the rows after the seal); they were not written by an honest runner".into(),
        }
        };
        if seal.status == seal::SealStatus::Complete {
            v.problems.push(forged(format!(
                "{} row{} after a complete seal: every trial had a complete attempt when it was sealed, so no runner writes another row",
                rows - seal.rows,
                if rows - seal.rows == 1 { "" } else { "s" }
            )));
        }
        if resumes == seal.resumes {
            v.problems.push(forged(format!(
                "{} row{} after the seal without a resume record after it: a resume records itself in the manifest before it writes a row",
                rows - seal.rows,
                if rows - seal.rows == 1 { "" } else { "s" }
            )));
        }
        if v.problems.len() > before {
            return Ok(Cover::default());
        }
    }
    let by_every_key = !options.checkers.is_empty();
    let cover = Cover {
        rows: if by_every_key { seal.rows } else { 0 },
        manifest: by_every_key && resumes == seal.resumes && seal.seal_version == seal::SEAL_VERSION,
    };
    if rows > seal.rows {
        let why = format!(
            "{} after the seal: a resume still going, or killed; the seal covers the first {}",
            count(rows - seal.rows, "row"),
            seal.rows
        );
        v.seal = SealState::Unsealed { why };
        v.unchecked.push(if by_every_key {
            "the end of the rows after the seal: each is signed, but rows removed from the end leave no trace until a seal counts them".into()
        } else {
            "the rows after the seal: nothing anchors them yet".into()
        });
    } else if resumes > seal.resumes {
        v.seal = SealState::Unsealed { why: "a resume began after the seal: still going, or killed".into() };
    } else {
        v.seal = SealState::Sealed { status: seal.status, sha256: seal.sha256(), signatures };
    }
    Ok(cover)
}

/// With keys: the manifest and every row must be authenticated by each key, by a seal it
/// signed that covers them (`cover`) or by their own signatures. Without: what is signed is
/// said to be unchecked.
fn check_authenticity(
    manifest: &Manifest,
    manifest_value: &Value,
    lines: &[LogLine],
    cover: Cover,
    options: &VerifyOptions,
    v: &mut Verification,
) {
    for signature in &manifest.signatures {
        v.signed_by.insert(signer(signature));
    }
    if options.checkers.is_empty() {
        let rows_signed = lines.iter().any(|l| l.value.as_ref().is_some_and(|r| r.get("signatures").is_some()));
        if !manifest.signatures.is_empty() || rows_signed {
            v.unchecked.push(
                "the signatures of the manifest and the rows: no key was given to check them (`--key`, `--public-key`)"
                    .into(),
            );
        }
        return;
    }
    let problem = |file: &str, line: Option<usize>, problem: String, repair: &str| Problem {
        file: file.to_owned(),
        line,
        kind: ProblemKind::Inconsistent,
        problem,
        repair: repair.to_owned(),
    };
    let manifest_message = seal::manifest_message(manifest_value);
    for checker in &options.checkers {
        let checked = manifest.signatures.iter().find_map(|s| checker.check_message(&manifest_message, s));
        match checked {
            Some(true) => {}
            Some(false) => v.problems.push(problem(
                "manifest.json",
                None,
                format!(
                    "the manifest's {} signature by key {} does not match it: manifest.json was changed after it was signed",
                    checker.algorithm().as_str(),
                    checker.key_id()
                ),
                "restore manifest.json from a copy",
            )),
            None if cover.manifest => {}
            None => v.problems.push(problem(
                "manifest.json",
                None,
                format!(
                    "manifest.json is not signed by the {} key {} given, and no seal signed by it covers it as it is: it was written or changed without the key (a directory run without the key is not resumed or read with it)",
                    checker.algorithm().as_str(),
                    checker.key_id()
                ),
                WITHOUT_KEY,
            )),
        }
    }
    v.checked.push("the manifest: signed by every key given, or covered by a seal each signed".into());
    let first = usize::try_from(cover.rows).unwrap_or(usize::MAX);
    let mut unsigned: Vec<Vec<usize>> = vec![Vec::new(); options.checkers.len()];
    for (index, log_line) in lines.iter().enumerate().skip(first) {
        let Some(value) = &log_line.value else { continue };
        let signatures: Vec<SealSignature> =
            value.get("signatures").and_then(|s| serde_json::from_value(s.clone()).ok()).unwrap_or_default();
        let message = seal::row_message(value);
        for (k, checker) in options.checkers.iter().enumerate() {
            match signatures.iter().find_map(|s| checker.check_message(&message, s)) {
                Some(true) => {}
                Some(false) => v.problems.push(problem(
                    "runs.jsonl",
                    Some(index + 1),
                    format!(
                        "the row's {} signature by key {} does not match it: the row was changed after it was signed",
                        checker.algorithm().as_str(),
                        checker.key_id()
                    ),
                    WITHOUT_KEY,
                )),
                None => unsigned[k].push(index + 1),
            }
        }
    }
    for (checker, lines) in options.checkers.iter().zip(unsigned) {
        let Some(&line) = lines.first() else { continue };
        let one = lines.len() == 1;
        v.problems.push(problem(
            "runs.jsonl",
            Some(line),
            format!(
                "{} row{} ({}) {} not signed by the {} key {} given, and no seal signed by it covers {}: rows its holder's runner did not write",
                lines.len(),
                if one { "" } else { "s" },
                sample_lines(&lines),
                if one { "is" } else { "are" },
                checker.algorithm().as_str(),
                checker.key_id(),
                if one { "it" } else { "them" },
            ),
            WITHOUT_KEY,
        ));
    }
    if lines.len() > first {
        v.checked.push(format!(
            "{} row{} no seal signed by the key covers: each against its own signature by every key given",
            lines.len() - first,
            if lines.len() - first == 1 { "" } else { "s" }
        ));
    }
}

/// The repair of what was written without the key.
const WITHOUT_KEY: &str = "restore the directory from a copy taken before the change; what no key holder's runner wrote cannot be signed afterwards: run again (`elengtis run`) with the key";

/// Line numbers, the first few of them (`lines 1, 2, 3, …`).
fn sample_lines(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(5).map(usize::to_string).collect();
    let more = if lines.len() > shown.len() { ", …" } else { "" };
    format!("line{} {}{more}", if lines.len() == 1 { "" } else { "s" }, shown.join(", "))
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
