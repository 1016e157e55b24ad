//! Result records — the row of `runs.jsonl`, the evidence document of an attempt and the
//! run's `manifest.json` — as typed, versioned data.
//!
//! One definition serves every reader and writer: the runner writes these types, resume and
//! `analyze` read them back, and later readers (the HTML report, `prove`, SARIF) read the same
//! types. The JSON Schemas generated from them are checked in and drift-checked like the
//! campaign schema. Field names and shapes are those of the original tool's records, so its
//! `analyze` keeps reading ours; fields this tool adds are optional for readers.
//!
//! [`outcome`] decides what an attempt's phase results mean (complete or not, the failure
//! class, the derived metrics) as a pure function, and [`derive`] sets a row's fields from its
//! evidence with it (the runner writes rows so, `verify` checks them so). [`read`] reads a
//! record from parsed JSON with errors that name the field; [`shape`] decides the one format a
//! results directory is read in; [`original`] says how the original tool's records differ and
//! brings its rows to this build's shape; [`seal`] is what a finished run attests (and the
//! messages the runner signs rows and manifests with). [`strict`] is the one reader of results
//! JSON (a key twice, or a number in another form than the runner writes, is refused) and
//! [`bounds`] how large each results file may be.

pub mod bounds;
pub mod derive;
pub mod evidence;
pub mod manifest;
pub(crate) use crate::nullable;
pub mod original;
pub mod outcome;
pub mod read;
pub mod row;
pub mod seal;
pub mod shape;
pub mod shim;
pub mod strict;
pub mod timeline;

pub use evidence::{CheckOutcome, CheckRecord, DecidingCheck, Evidence, Verification, decided_by};
pub use manifest::{Manifest, ResumeRecord, ScenarioDump};
pub use outcome::{Outcome, OutcomeInputs};
pub use row::{Diagnostics, EvidenceStatus, FailureClass, Phase, RecordedError, Row, Usage};
pub use seal::{Seal, SealSignature, SealStatus, SignatureAlgorithm};
pub use shape::ResultsFormat;
pub use shim::{Classified, ClassifiedBy, ShimAction, ShimCall, ShimDecision, ShimRecord, ShimTool, ShimVerdict};
pub use timeline::{CallTime, Sighting, Timeline};

/// Version of the row, evidence and manifest formats written by this build: 2, rows with
/// `evidence_sha256` and `prev_row_sha256` (a hash chain, unkeyed), a manifest with
/// `configuration.recorded_campaign_sha256`, and `seal.json` when the run ended
/// ([`seal::Seal`], optionally signed; with a key, every row and the manifest are signed too).
pub const RESULTS_SCHEMA_VERSION: u64 = 2;
/// The first version of this tool's results: the same records without the hashes. Still read
/// by `analyze` and `verify`; `run --resume` continues only runs of [`RESULTS_SCHEMA_VERSION`].
pub const RESULTS_SCHEMA_VERSION_UNCHAINED: u64 = 1;
/// Version of the metric definitions (proposed, completed, …) of this build.
pub const METRICS_VERSION: u64 = 1;
