//! `elengtis merge`: shards of one campaign (`run --partition K/N`, run on as many machines)
//! into one results directory that `verify`, `analyze` and `report` read as the whole run.
//!
//! Each shard is checked with the verifier every reader uses (a shard that does not verify,
//! or is not sealed, is refused); shards must be of one campaign, one matrix and one partition
//! scheme, and no trial may be in two. The merged directory is written through the results
//! store: its `runs.jsonl` is each shard's log byte for byte, one after another in shard order
//! (each a chain of its own, closed by the shard's seal, which the manifest's `merge` records
//! whole, signatures included), its evidence files are copied (their hashes unchanged), and
//! its own seal covers the merged log and manifest. Trials no shard ran are reported `not_run`
//! (the merged matrix is the full one), with the command that fills the gap.
//!
//! It lives beside `run` (not in `results/`) because it writes the run's summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis_core::load;
use elengtis_core::matrix::{self, TrialSpec};
use elengtis_core::partition;
use elengtis_core::records::manifest::{MergeRecord, MergedShard};
use elengtis_core::records::read::from_value;
use elengtis_core::records::{Manifest, ResultsFormat, Row, Seal, SealStatus, bounds, strict};
use serde_json::Value;

use crate::results::keys::Key;
use crate::results::store::{self, DirLock, StoreError};
use crate::results::verify::{self, SealState, VerifyError, VerifyOptions};
use crate::run;

/// Why shards could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No shard was given.
    #[error("failed to merge: no shard given; pass each shard's results directory with --input")]
    NoShards,
    /// A shard could not be checked at all.
    #[error("failed to merge: shard {}: {source}", .dir.display())]
    Verify {
        /// The shard.
        dir: PathBuf,
        /// Why.
        source: VerifyError,
    },
    /// A shard does not verify.
    #[error(
        "failed to merge: shard {} does not verify ({count} problem{}); nothing was merged:\n{problems}check it with `elengtis verify {}`",
        .dir.display(), if *.count == 1 { "" } else { "s" }, .dir.display()
    )]
    Unverified {
        /// The shard.
        dir: PathBuf,
        /// How many problems.
        count: usize,
        /// Each on its own line.
        problems: String,
        /// Whether a record cannot be read as one (exit 3) rather than records that do not
        /// hold together (exit 4).
        malformed: bool,
    },
    /// A shard is not sealed (a run still going, or killed), or of a format without a chain.
    #[error(
        "failed to merge: shard {} is not sealed ({why}); nothing was merged. Finish it with `elengtis run --resume --out {}`, then merge again",
        .dir.display(), .dir.display()
    )]
    Unsealed {
        /// The shard.
        dir: PathBuf,
        /// Why, in words.
        why: String,
    },
    /// A results directory of a run of the whole matrix, or one merged already.
    #[error("failed to merge: {} is not a shard: {why}", .dir.display())]
    NotAShard {
        /// The directory.
        dir: PathBuf,
        /// Why.
        why: &'static str,
    },
    /// Two shards disagree on what they are shards of.
    #[error(
        "failed to merge: shard {} is not of the campaign of shard {}: its `{field}` is {found}, not {expected}; shards of one merge must be cut from one campaign, matrix and partition scheme",
        .dir.display(), .first.display()
    )]
    Mismatch {
        /// The shard that differs.
        dir: PathBuf,
        /// The first shard.
        first: PathBuf,
        /// The manifest field that differs.
        field: &'static str,
        /// Its value in `dir`.
        found: String,
        /// Its value in `first`.
        expected: String,
    },
    /// Two shards hold the same trials.
    #[error(
        "failed to merge: shards {} and {} overlap: both are shard {shard}/{total} (trial `{trial}` is in both); give each shard once",
        .dir.display(), .other.display()
    )]
    Overlap {
        /// The later shard.
        dir: PathBuf,
        /// The earlier one.
        other: PathBuf,
        /// The shard number both claim.
        shard: u32,
        /// N.
        total: u32,
        /// A trial in both.
        trial: String,
    },
    /// The recorded campaign does not rebuild.
    #[error("failed to merge: the campaign recorded by {} does not rebuild: {source}", .dir.display())]
    Load {
        /// The shard.
        dir: PathBuf,
        /// Why.
        source: elengtis_core::format::LoadError,
    },
    /// The output directory exists.
    #[error("failed to merge: {} already exists; choose a new --out (the merged directory is written whole, never into an existing one)", .0.display())]
    OutExists(PathBuf),
    /// The staging directory could not be created.
    #[error(transparent)]
    Out(#[from] run::RunError),
    /// Writing the merged directory failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading a shard's file failed.
    #[error("failed to merge: failed to read {}: {detail}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A file of the merged directory could not be written.
    #[error("failed to merge: failed to write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The merged directory could not be sealed.
    #[error(transparent)]
    Seal(#[from] crate::results::seal::SealError),
    /// The merged directory does not verify (a bug: nothing of it should be trusted).
    #[error("failed to merge: the merged directory {} does not verify:\n{problems}", .dir.display())]
    SelfCheck {
        /// The merged directory.
        dir: PathBuf,
        /// What is wrong.
        problems: String,
    },
}

/// What a merge reads shards with and seals with.
#[derive(Debug, Default)]
pub struct MergeOptions {
    /// Keys the shards' seals are checked with.
    pub verify: VerifyOptions,
    /// Keys the merged seal is signed with.
    pub keys: Vec<Arc<Key>>,
}

impl MergeOptions {
    /// The signing keys the environment gives: the shards are checked with them (sealed and
    /// signed by one of them when `require_sealed`), and the merged seal is signed with them.
    ///
    /// # Errors
    ///
    /// A key in the environment that does not read.
    pub fn from_env(require_sealed: bool) -> Result<MergeOptions, crate::results::keys::KeyError> {
        let keys: Vec<Arc<Key>> = Key::from_env()?.into_iter().map(Arc::new).collect();
        let verify = VerifyOptions {
            checkers: keys.iter().map(|k| crate::results::keys::Checker::Key(Arc::clone(k))).collect(),
            require_sealed,
        };
        Ok(MergeOptions { verify, keys })
    }
}

/// One shard as merged.
#[derive(Debug, Clone)]
pub struct ShardReport {
    /// Its directory.
    pub dir: PathBuf,
    /// Its shard number (1-based).
    pub shard: u32,
    /// Its run id.
    pub run_id: String,
    /// Its rows.
    pub rows: usize,
    /// How it ended, as its seal says.
    pub status: SealStatus,
    /// Its seal's hash.
    pub seal_sha256: String,
    /// What its rows were charged.
    pub spend_usd: f64,
    /// Its spend cap, when it had one.
    pub budget_usd: Option<f64>,
}

/// Trials of one shard without a complete attempt.
#[derive(Debug, Clone)]
pub struct Gap {
    /// The shard (1-based).
    pub shard: u32,
    /// Its directory, when it was given (else the whole shard is missing).
    pub dir: Option<PathBuf>,
    /// Trials of it with no row at all.
    pub not_run: Vec<String>,
    /// Trials of it whose attempts are all incomplete.
    pub incomplete: Vec<String>,
}

/// What a merge did.
#[derive(Debug)]
pub struct MergeReport {
    /// The merged directory.
    pub out: PathBuf,
    /// Its run id.
    pub run_id: String,
    /// The partition scheme.
    pub scheme: partition::Scheme,
    /// N.
    pub total: u32,
    /// The shards, in shard order.
    pub shards: Vec<ShardReport>,
    /// Trials of the full matrix.
    pub trials: usize,
    /// Rows merged.
    pub rows: usize,
    /// Per shard, the trials without a complete attempt (shards with none are left out).
    pub gaps: Vec<Gap>,
    /// How the merged seal reads.
    pub status: SealStatus,
    /// The merged seal's hash.
    pub seal_sha256: String,
    /// The summary (also in summary.txt).
    pub summary: String,
    /// The campaign file the shards were started with (for the gap's command line).
    pub campaign_path: String,
}

impl MergeReport {
    /// Rows charged across shards.
    pub fn spend_usd(&self) -> f64 {
        self.shards.iter().map(|s| s.spend_usd).sum()
    }

    /// The shards' caps added up (None when some shard had none).
    pub fn budget_usd(&self) -> Option<f64> {
        self.shards.iter().map(|s| s.budget_usd).sum()
    }
}

/// A shard read and verified.
struct Shard {
    dir: PathBuf,
    manifest: Manifest,
    seal: Seal,
    rows: Vec<Row>,
    lines: Vec<Vec<u8>>,
}

/// Merges `inputs` (shard results directories) into `out` (new).
///
/// # Errors
///
/// [`MergeError`] naming the shard and what is wrong.
pub fn merge(inputs: &[PathBuf], out: &Path, options: &MergeOptions) -> Result<MergeReport, MergeError> {
    if inputs.is_empty() {
        return Err(MergeError::NoShards);
    }
    let mut shards = Vec::with_capacity(inputs.len());
    for dir in inputs {
        shards.push(read_shard(dir, &options.verify)?);
    }
    shards.sort_by_key(|s| s.manifest.partition.as_ref().map_or(0, |p| p.shard));
    // One campaign, one matrix, one scheme.
    let first = &shards[0];
    let first_partition = first.manifest.partition.clone().ok_or(MergeError::NotAShard {
        dir: first.dir.clone(),
        why: "it ran the whole matrix (no `partition` in its manifest)",
    })?;
    let identity = |m: &Manifest| -> Vec<(&'static str, String)> {
        let p = m.partition.as_ref();
        vec![
            ("schema_version", m.schema_version.to_string()),
            ("metrics_version", m.metrics_version.to_string()),
            (
                "configuration.recorded_campaign_sha256",
                m.configuration.recorded_campaign_sha256.clone().unwrap_or_default(),
            ),
            ("configuration.scenario_sha256", format!("{:?}", m.configuration.scenario_sha256)),
            ("partition.matrix_sha256", p.map(|p| p.matrix_sha256.clone()).unwrap_or_default()),
            ("partition.scheme", p.map(|p| p.scheme.as_str().to_owned()).unwrap_or_default()),
            ("partition.total", p.map(|p| p.total.to_string()).unwrap_or_default()),
            ("experiment", serde_json::to_string(&m.experiment).unwrap_or_default()),
        ]
    };
    let expected = identity(&first.manifest);
    for shard in &shards[1..] {
        for ((field, found), (_, wanted)) in identity(&shard.manifest).into_iter().zip(&expected) {
            if found != *wanted {
                return Err(MergeError::Mismatch {
                    dir: shard.dir.clone(),
                    first: first.dir.clone(),
                    field,
                    found,
                    expected: wanted.clone(),
                });
            }
        }
    }
    // The full matrix, rebuilt from the campaign every shard records.
    let scenarios: Vec<(PathBuf, Value)> =
        first.manifest.scenarios.iter().map(|s| (PathBuf::from(&s.path), s.dump.clone())).collect();
    let bundle = load::bundle_from_dumps(
        &first.dir.join("manifest.json"),
        &first.manifest.campaign,
        &scenarios,
        first.manifest.configuration.campaign_sha256.clone(),
    )
    .map_err(|source| MergeError::Load { dir: first.dir.clone(), source })?;
    let all: Vec<TrialSpec> = matrix::expand(&bundle);
    // No trial in two shards.
    let mut owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, shard) in shards.iter().enumerate() {
        for row in &shard.rows {
            if let Some(&other) = owner.get(row.trial_id.as_str())
                && other != index
            {
                let number = shard.manifest.partition.as_ref().map_or(0, |p| p.shard);
                return Err(MergeError::Overlap {
                    dir: shard.dir.clone(),
                    other: shards[other].dir.clone(),
                    shard: number,
                    total: first_partition.total,
                    trial: row.trial_id.clone(),
                });
            }
            owner.insert(row.trial_id.as_str(), index);
        }
    }
    for pair in shards.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let number = |s: &Shard| s.manifest.partition.as_ref().map_or(0, |p| p.shard);
        if number(a) == number(b) {
            let trial = first_partition_trial(&all, &first_partition, number(a));
            return Err(MergeError::Overlap {
                dir: b.dir.clone(),
                other: a.dir.clone(),
                shard: number(a),
                total: first_partition.total,
                trial,
            });
        }
    }

    // Write the merged directory: into a staging directory beside `out`, made durable with one
    // `syncfs`, then renamed into place (never over an existing `out`). A merge killed on the
    // way leaves `out` absent, never half written; the staging directory is removed on error.
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(MergeError::OutExists(out.to_owned()));
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| MergeError::Write { path: parent.to_owned(), source: e })?;
    }
    let staging = staging_dir(out);
    let written = write_merged(&shards, &bundle, &all, &first_partition, &staging, options);
    let (run_id, rows, gaps, status, sealed, summary) = match written {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if let Err(e) = publish(&staging, out) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let shard_reports = shards
        .iter()
        .map(|s| ShardReport {
            dir: s.dir.clone(),
            shard: s.manifest.partition.as_ref().map_or(0, |p| p.shard),
            run_id: s.manifest.run_id.clone(),
            rows: s.lines.len(),
            status: s.seal.status,
            seal_sha256: s.seal.sha256(),
            spend_usd: run::committed_spend(&s.rows),
            budget_usd: s.manifest.spend_cap(),
        })
        .collect();
    Ok(MergeReport {
        out: out.to_owned(),
        run_id,
        scheme: first_partition.scheme,
        total: first_partition.total,
        shards: shard_reports,
        trials: all.len(),
        rows: rows.len(),
        gaps,
        status,
        seal_sha256: sealed.sha256(),
        summary,
        campaign_path: first.manifest.campaign_path.clone(),
    })
}

/// What [`write_merged`] made: the merged run id, its rows, the gaps, how it is sealed.
type Written = (String, Vec<Row>, Vec<Gap>, SealStatus, Seal, String);

/// Writes the merged directory into `staging` (created, locked) and checks it.
fn write_merged(
    shards: &[Shard],
    bundle: &elengtis_core::format::Bundle,
    all: &[TrialSpec],
    first_partition: &partition::PartitionRecord,
    staging: &Path,
    options: &MergeOptions,
) -> Result<Written, MergeError> {
    let first = &shards[0];
    std::fs::create_dir_all(staging.join("evidence"))
        .map_err(|e| run::RunError::Create { path: staging.join("evidence"), source: e })?;
    let _lock = DirLock::acquire(staging)?;
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut merged_shards = Vec::with_capacity(shards.len());
    for shard in shards {
        for row in &shard.rows {
            copy_evidence(&shard.dir, staging, row)?;
        }
        let partition = shard.manifest.partition.as_ref().map_or(0, |p| p.shard);
        merged_shards.push(MergedShard {
            shard: partition,
            run_id: shard.manifest.run_id.clone(),
            source: shard.dir.display().to_string(),
            started_at: shard.manifest.started_at.clone(),
            environment: shard.manifest.environment.clone(),
            rows: shard.lines.len() as u64,
            seal: shard.seal.clone(),
            seal_sha256: shard.seal.sha256(),
            budget_usd: shard.manifest.spend_cap(),
            spend_usd: run::committed_spend(&shard.rows),
        });
    }
    let rows: Vec<Row> = shards.iter().flat_map(|s| s.rows.iter().cloned()).collect();
    let gaps = gaps(all, first_partition, shards, &rows);
    let not_run: usize = gaps.iter().map(|g| g.not_run.len()).sum();
    let mut manifest = first.manifest.clone();
    manifest.run_id = run_id.clone();
    manifest.started_at = crate::results::now_rfc3339();
    manifest.environment = run::environment();
    manifest.resumes = Vec::new();
    manifest.engine_gate = None;
    manifest.budget_usd = None;
    manifest.partition = None;
    manifest.merge = Some(MergeRecord {
        scheme: first_partition.scheme,
        total: first_partition.total,
        matrix_sha256: first_partition.matrix_sha256.clone(),
        shards: merged_shards,
        not_run: not_run as u64,
    });
    crate::results::seal::sign_manifest(&mut manifest, &options.keys);
    write_plain(&staging.join("manifest.json"), &json_bytes(&staging.join("manifest.json"), &manifest)?)?;
    let mut log = Vec::new();
    let mut last_line = store::line_sha256(b"");
    for shard in shards {
        for line in &shard.lines {
            log.extend_from_slice(line);
            log.push(b'\n');
            last_line = store::line_sha256(line);
        }
    }
    write_plain(&staging.join("runs.jsonl"), &log)?;
    let mut summary = run::summarize(bundle, all, &rows);
    if bundle.campaign.value.model.is_some() {
        summary.push_str(&run::summary::spend(&rows, None));
    }
    summary.push_str(&run::summary::endpoints(&rows));
    write_plain(&staging.join("summary.txt"), summary.as_bytes())?;
    let status = if gaps.is_empty() { SealStatus::Complete } else { SealStatus::Incomplete };
    let keys: Vec<&Key> = options.keys.iter().map(AsRef::as_ref).collect();
    let sealed = crate::results::seal::write(
        staging,
        crate::results::seal::LogState { run_id: &run_id, rows: rows.len() as u64, last_row_sha256: &last_line },
        status,
        &keys,
    )?;
    // What was written must read back as it is meant to: the verifier every reader uses.
    let check = verify::verify_with(
        staging,
        &VerifyOptions { checkers: options.verify.checkers.clone(), require_sealed: false },
    )
    .map_err(|source| MergeError::Verify { dir: staging.to_owned(), source })?;
    if !check.problems.is_empty() {
        return Err(MergeError::SelfCheck { dir: staging.to_owned(), problems: check.render_problems() });
    }
    Ok((run_id, rows, gaps, status, sealed, summary))
}

/// A staging directory beside `out` (same file system, so the final rename is atomic).
fn staging_dir(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "merged".into());
    out.with_file_name(format!(".{name}.merging-{}", uuid::Uuid::new_v4()))
}

/// Writes a file in the staging directory (made durable later, all at once, by [`publish`]).
fn write_plain(path: &Path, bytes: &[u8]) -> Result<(), MergeError> {
    std::fs::write(path, bytes).map_err(|e| MergeError::Write { path: path.to_owned(), source: e })
}

fn json_bytes<T: serde::Serialize>(path: &Path, value: &T) -> Result<Vec<u8>, MergeError> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| MergeError::Write { path: path.to_owned(), source: std::io::Error::other(e) })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Makes every file of `staging` durable (one `syncfs` of its file system), renames it to
/// `out` (refused if `out` appeared meanwhile) and syncs the parent directory.
fn publish(staging: &Path, out: &Path) -> Result<(), MergeError> {
    let fail = |path: &Path, source: std::io::Error| MergeError::Write { path: path.to_owned(), source };
    let dir = std::fs::File::open(staging).map_err(|e| fail(staging, e))?;
    nix::unistd::syncfs(&dir).map_err(|e| fail(staging, e.into()))?;
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        staging,
        nix::fcntl::AT_FDCWD,
        out,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(|e| fail(out, e.into()))?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(parent).and_then(|d| d.sync_all()).map_err(|e| fail(parent, e))?;
    Ok(())
}

/// Reads one shard through the verifier; refuses one that does not verify, is not sealed or
/// is not a shard.
fn read_shard(dir: &Path, options: &VerifyOptions) -> Result<Shard, MergeError> {
    let v = verify::verify_with(dir, options).map_err(|source| MergeError::Verify { dir: dir.to_owned(), source })?;
    if !v.problems.is_empty() {
        return Err(MergeError::Unverified {
            dir: dir.to_owned(),
            count: v.problems.len(),
            problems: v.render_problems(),
            malformed: v.is_malformed(),
        });
    }
    if v.format != Some(ResultsFormat::Chained) {
        return Err(MergeError::NotAShard {
            dir: dir.to_owned(),
            why: "it is of a format without a chain or seal (schema 1, or the original 0.1.0's), which has no partition",
        });
    }
    if let SealState::Unsealed { why } = &v.seal {
        return Err(MergeError::Unsealed { dir: dir.to_owned(), why: why.clone() });
    }
    let manifest_value = v.manifest.clone().unwrap_or(Value::Null);
    let manifest: Manifest = from_value(&manifest_value)
        .map_err(|e| MergeError::Read { path: dir.join("manifest.json"), detail: e.to_string() })?;
    if manifest.merge.is_some() {
        return Err(MergeError::NotAShard {
            dir: dir.to_owned(),
            why: "it is a merged directory already; merge the shards it was made from",
        });
    }
    if manifest.partition.is_none() {
        return Err(MergeError::NotAShard {
            dir: dir.to_owned(),
            why: "it ran the whole matrix (no `partition` in its manifest); run shards with `elengtis run --partition K/N`",
        });
    }
    let seal_bytes = store::read_beneath(dir, Path::new(verify::SEAL_FILE), bounds::SEAL)
        .map_err(|e| MergeError::Read { path: dir.join(verify::SEAL_FILE), detail: e.to_string() })?;
    let seal: Seal = strict::parse(&seal_bytes)
        .map_err(|e| e.to_string())
        .and_then(|value| from_value(&value).map_err(|e| e.to_string()))
        .map_err(|detail| MergeError::Read { path: dir.join(verify::SEAL_FILE), detail })?;
    let log = store::read_beneath(dir, Path::new("runs.jsonl"), bounds::LOG)
        .map_err(|e| MergeError::Read { path: dir.join("runs.jsonl"), detail: e.to_string() })?;
    // Complete lines only (a torn tail is no row), each exactly as written.
    let complete = log.iter().rposition(|&b| b == b'\n').map_or(0, |pos| pos + 1);
    let lines: Vec<Vec<u8>> = if complete == 0 {
        Vec::new()
    } else {
        log[..complete - 1].split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
    };
    let mut rows = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        let row: Row = serde_json::from_slice(line).map_err(|e| MergeError::Read {
            path: dir.join("runs.jsonl"),
            detail: format!("line {}: {e}", index + 1),
        })?;
        rows.push(row);
    }
    // The bytes read now are those the seal closes (nothing changed since `verify`).
    let last = lines.last().map_or_else(|| store::line_sha256(b""), |l| store::line_sha256(l));
    if lines.len() as u64 != seal.rows || last != seal.prev_row_sha256 {
        return Err(MergeError::Read {
            path: dir.join("runs.jsonl"),
            detail: "it changed while it was being merged (its rows no longer match its seal)".into(),
        });
    }
    Ok(Shard { dir: dir.to_owned(), manifest, seal, rows, lines })
}

/// Copies a row's evidence file into `out`, byte for byte, only while it has the hash its row
/// pins.
fn copy_evidence(shard: &Path, out: &Path, row: &Row) -> Result<(), MergeError> {
    let relative = Path::new(&row.evidence);
    let bytes = store::read_beneath(shard, relative, bounds::EVIDENCE)
        .map_err(|e| MergeError::Read { path: shard.join(relative), detail: e.to_string() })?;
    if row.evidence_sha256.as_deref() != Some(elengtis_core::format::sha256_hex(&bytes).as_str()) {
        return Err(MergeError::Read {
            path: shard.join(relative),
            detail: "it was changed after its row was written (its hash is not the one the row pins)".into(),
        });
    }
    write_plain(&out.join(relative), &bytes)
}

/// The first trial of shard `number` (for an overlap's message).
fn first_partition_trial(all: &[TrialSpec], record: &partition::PartitionRecord, number: u32) -> String {
    let p = partition::Partition { scheme: record.scheme, shard: number, total: record.total };
    p.select(all, |t| t.trial_id.as_str())
        .first()
        .map_or_else(|| "(none: an empty shard)".to_owned(), |t| t.trial_id.clone())
}

/// Per shard, the trials of the full matrix without a complete attempt.
fn gaps(all: &[TrialSpec], record: &partition::PartitionRecord, shards: &[Shard], rows: &[Row]) -> Vec<Gap> {
    let mut by_shard: BTreeMap<u32, Gap> = BTreeMap::new();
    let given: BTreeMap<u32, &Path> =
        shards.iter().filter_map(|s| s.manifest.partition.as_ref().map(|p| (p.shard, s.dir.as_path()))).collect();
    let mut attempted: BTreeMap<&str, bool> = BTreeMap::new();
    for row in rows {
        let complete = attempted.entry(row.trial_id.as_str()).or_insert(false);
        *complete |= row.is_complete();
    }
    for (position, trial) in all.iter().enumerate() {
        let number = partition::shard_of(record.scheme, record.total, position, &trial.trial_id);
        let state = attempted.get(trial.trial_id.as_str()).copied();
        if state == Some(true) {
            continue;
        }
        let gap = by_shard.entry(number).or_insert_with(|| Gap {
            shard: number,
            dir: given.get(&number).map(|d| d.to_path_buf()),
            not_run: Vec::new(),
            incomplete: Vec::new(),
        });
        match state {
            None => gap.not_run.push(trial.trial_id.clone()),
            Some(_) => gap.incomplete.push(trial.trial_id.clone()),
        }
    }
    by_shard.into_values().collect()
}
