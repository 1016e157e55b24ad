//! The one error of the `elengtis` commands, and the exit code each kind maps to
//! ([`crate::exit_codes`], documented in `docs/exit-codes.md`). Every variant keeps its
//! source chain; messages read "failed to …".

use std::path::PathBuf;

use elengtis_core::analysis::AnalyzeError;
use elengtis_core::format::LoadError;

use crate::bench::BenchError;
use crate::exit_codes;
use crate::results::store::StoreError;
use crate::run::RunError;
use crate::sandbox::SandboxError;
use crate::sandbox::docker::images::ImageError;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command line asks for something that cannot be done.
    #[error("{0}")]
    Usage(String),
    /// A campaign or scenario is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A run could not start or continue.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The sandbox (the Docker engine) is not usable.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// An image could not be built or imported.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// A results file could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Result directories could not be analysed.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
    /// The benchmark could not measure.
    #[error(transparent)]
    Bench(#[from] BenchError),
    /// A file or directory could not be used.
    #[error("failed to {what} {}", .path.display())]
    Io {
        /// What was being done ("create", "read", …).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be parsed.
    #[error("failed to parse {}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Something this build cannot do.
    #[error("{0}")]
    Unavailable(String),
    /// A results directory does not verify (`verify`, `analyze`).
    #[error("failed to use {}: its results do not verify ({count} problem{}):\n{problems}", .dir.display(), if *.count == 1 { "" } else { "s" })]
    Unverified {
        /// The results directory.
        dir: PathBuf,
        /// How many problems.
        count: usize,
        /// Each problem on its own line.
        problems: String,
        /// Some problem is input that cannot be read as records (exit 3, else 4).
        malformed: bool,
    },
    /// A key asks for a sealed, signed directory and this one is not.
    #[error(transparent)]
    NotVerifiable(#[from] crate::results::verify::NotSealedForKey),
    /// A results directory could not be checked (not one, or unreadable).
    #[error(transparent)]
    Verify(#[from] crate::results::verify::VerifyError),
    /// `prove` could not run (a finding that does not hold is a verdict, not this error).
    #[error(transparent)]
    Prove(#[from] crate::prove::ProveError),
    /// `gate` could not run (a finding that fails is an outcome, not this error).
    #[error(transparent)]
    Gate(#[from] crate::gate::GateError),
    /// `init` wrote no skeleton.
    #[error(transparent)]
    Init(#[from] crate::init::InitError),
    /// `experiment plan` or `experiment run` could not plan, start or continue.
    #[error(transparent)]
    Experiment(#[from] crate::experiment::ExperimentError),
    /// `merge` refused its shards or could not write the merged directory.
    #[error(transparent)]
    Merge(#[from] crate::merge::MergeError),
    /// `report` could not read its inputs or write the page (boxed: it is large).
    #[error(transparent)]
    Report(Box<crate::report::ReportError>),
}

impl From<crate::report::ReportError> for CommandError {
    fn from(e: crate::report::ReportError) -> Self {
        CommandError::Report(Box::new(e))
    }
}

impl CommandError {
    /// A file or directory error.
    pub fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CommandError {
        let path = path.into();
        move |source| CommandError::Io { what, path, source }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Usage(_) => exit_codes::USAGE,
            CommandError::Load(_) => exit_codes::INVALID_CONFIG,
            CommandError::Run(e) => run_error_code(e),
            CommandError::Sandbox(_)
            | CommandError::Image(_)
            | CommandError::Bench(_)
            | CommandError::Unavailable(_) => exit_codes::UNAVAILABLE,
            CommandError::Store(_) | CommandError::Io { .. } | CommandError::Parse { .. } => exit_codes::IO,
            CommandError::Analyze(e) => analyze_error_code(e),
            CommandError::NotVerifiable(_) => exit_codes::UNVERIFIED,
            CommandError::Unverified { malformed: true, .. } => exit_codes::INVALID_CONFIG,
            CommandError::Unverified { malformed: false, .. } => exit_codes::RESULTS_DIR,
            CommandError::Verify(e) => verify_error_code(e),
            CommandError::Prove(e) => CommandError::exit_code_of_prove(e),
            CommandError::Init(e) => match e {
                crate::init::InitError::Usage(_) => exit_codes::USAGE,
                crate::init::InitError::Exists { .. } => exit_codes::RESULTS_DIR,
                crate::init::InitError::Start { .. } => exit_codes::RUN_INCOMPLETE,
                crate::init::InitError::CreateDir { .. } | crate::init::InitError::Write(_) => exit_codes::IO,
                crate::init::InitError::Invalid { .. } => exit_codes::INVALID_CONFIG,
            },
            CommandError::Experiment(e) => match (e.exit_code(), e.run_error()) {
                (Some(code), _) => code,
                (None, Some(run)) => run_error_code(run),
                (None, None) => exit_codes::RUN_INCOMPLETE,
            },
            CommandError::Report(e) => report_error_code(e),
            CommandError::Merge(e) => merge_error_code(e),
            CommandError::Gate(e) => match e {
                crate::gate::GateError::Selection(_) => exit_codes::USAGE,
                crate::gate::GateError::Record(_) => exit_codes::UNAVAILABLE,
                crate::gate::GateError::Prove(e) => CommandError::exit_code_of_prove(e),
            },
        }
    }

    fn exit_code_of_prove(e: &crate::prove::ProveError) -> i32 {
        match e {
            crate::prove::ProveError::Load(_) => exit_codes::INVALID_CONFIG,
            crate::prove::ProveError::Run(e) => run_error_code(e),
            crate::prove::ProveError::Io { .. } => exit_codes::IO,
            crate::prove::ProveError::Usage(_) => exit_codes::USAGE,
            crate::prove::ProveError::Merge(e) => merge_error_code(e),
        }
    }
}

fn merge_error_code(e: &crate::merge::MergeError) -> i32 {
    use crate::merge::MergeError;
    match e {
        MergeError::NoShards => exit_codes::USAGE,
        MergeError::Verify { source, .. } => verify_error_code(source),
        MergeError::Unverified { malformed: true, .. } | MergeError::Load { .. } => exit_codes::INVALID_CONFIG,
        MergeError::Unsealed { .. } => exit_codes::UNVERIFIED,
        MergeError::Unverified { malformed: false, .. }
        | MergeError::NotAShard { .. }
        | MergeError::Mismatch { .. }
        | MergeError::Overlap { .. }
        | MergeError::SelfCheck { .. } => exit_codes::RESULTS_DIR,
        MergeError::Out(e) => run_error_code(e),
        MergeError::OutExists(_) => exit_codes::RESULTS_DIR,
        MergeError::Store(s) if s.is_disk_full() || refused_write(s) => exit_codes::IO,
        MergeError::Store(_) => exit_codes::RESULTS_DIR,
        MergeError::Read { .. } | MergeError::Write { .. } | MergeError::Seal(_) => exit_codes::IO,
    }
}

fn run_error_code(e: &RunError) -> i32 {
    match e {
        RunError::Load(_) => exit_codes::INVALID_CONFIG,
        RunError::Unavailable(_) | RunError::Sandbox(_) => exit_codes::UNAVAILABLE,
        RunError::Store(s) if s.is_disk_full() || refused_write(s) => exit_codes::IO,
        RunError::Exists(_)
        | RunError::NotADirectory(_)
        | RunError::Unusable { .. }
        | RunError::NotARun { .. }
        | RunError::Manifest { .. }
        | RunError::Version { .. }
        | RunError::Store(_) => exit_codes::RESULTS_DIR,
        RunError::Create { .. } | RunError::Http(_) | RunError::Record(_) => exit_codes::IO,
        RunError::BudgetSpent(_) => exit_codes::RUN_INCOMPLETE,
        RunError::Unverified { .. } => exit_codes::RESULTS_DIR,
        RunError::Verify(e) => verify_error_code(e),
        RunError::Key(_) => exit_codes::USAGE,
        RunError::Seal(_) => exit_codes::IO,
        RunError::PartitionMismatch { .. } => exit_codes::USAGE,
        RunError::Merged(_)
        | RunError::NotThisRun { .. }
        | RunError::Linked { .. }
        | RunError::SignedWithoutKey { .. } => exit_codes::RESULTS_DIR,
    }
}

/// A write the file system refused for what was written, not for the directory: a file name
/// longer than it allows (ENAMETOOLONG, also a path past PATH_MAX) or a file larger than it
/// allows (EFBIG). Like a full disk, exit 6.
fn refused_write(e: &crate::results::store::StoreError) -> bool {
    use crate::results::store::StoreErrorKind;
    matches!(&e.kind, StoreErrorKind::Io(io) if matches!(io.kind(), std::io::ErrorKind::InvalidFilename | std::io::ErrorKind::FileTooLarge))
}

fn report_error_code(e: &crate::report::ReportError) -> i32 {
    use crate::report::ReportError;
    match e {
        ReportError::NoInputs => exit_codes::USAGE,
        ReportError::Input { .. } | ReportError::Unverified { malformed: false, .. } => exit_codes::RESULTS_DIR,
        ReportError::Analyze(e) => analyze_error_code(e),
        ReportError::NotVerifiable(_) => exit_codes::UNVERIFIED,
        ReportError::Parse { .. }
        | ReportError::Strict { .. }
        | ReportError::Record { .. }
        | ReportError::Unverified { malformed: true, .. } => exit_codes::INVALID_CONFIG,
        ReportError::Verify(e) => verify_error_code(e),
        ReportError::Read { .. } | ReportError::Encode(_) | ReportError::Write(_) => exit_codes::IO,
    }
}

/// Inputs that overlap are a command line to change (give each once, or `--dedupe`); anything
/// else is input that cannot be analysed.
fn analyze_error_code(e: &AnalyzeError) -> i32 {
    match e {
        AnalyzeError::Overlap { .. } | AnalyzeError::Forked { .. } => exit_codes::USAGE,
        _ => exit_codes::INVALID_CONFIG,
    }
}

fn verify_error_code(e: &crate::results::verify::VerifyError) -> i32 {
    match e {
        crate::results::verify::VerifyError::NotAResultsDir { .. } => exit_codes::RESULTS_DIR,
        crate::results::verify::VerifyError::Read { .. } => exit_codes::IO,
        crate::results::verify::VerifyError::Key(_) => exit_codes::USAGE,
    }
}

/// The error and its causes on one line, each cause after `: ` unless the message already
/// contains its text (see [`crate::capture::chain`]).
pub fn render(error: &(dyn std::error::Error + 'static)) -> String {
    crate::capture::chain(error)
}
