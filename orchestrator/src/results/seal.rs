//! Sealing a results directory when its run ends: `seal.json`, the chain's last link, signed
//! with every key the environment gives (see `elengtis_core::records::seal`). The one place a
//! seal is written, and where the runner signs each row it appends and the manifest each time
//! it writes it ([`sign_row`], [`sign_manifest`]).

use std::path::Path;

use elengtis_core::records::seal::{self, SEAL_VERSION, Seal, SealStatus};
use elengtis_core::records::{Manifest, Row, bounds, strict};
use serde_json::Value;

use super::keys::Key;
use super::store::{self, StoreError};
use super::verify::SEAL_FILE;

/// Why a seal could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The manifest could not be read back.
    #[error("failed to seal {}: its manifest.json cannot be read: {detail}", .dir.display())]
    Manifest {
        /// The results directory.
        dir: std::path::PathBuf,
        /// Why.
        detail: String,
    },
    /// `seal.json` could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the runner knows of its log when it seals.
#[derive(Debug, Clone, Copy)]
pub struct LogState<'a> {
    /// The run.
    pub run_id: &'a str,
    /// Complete rows in `runs.jsonl`.
    pub rows: u64,
    /// SHA-256 of the last of them (of the empty string when there is none).
    pub last_row_sha256: &'a str,
}

/// Writes `seal.json` in `dir` (crash-safely) for a run that ended as `status`, signed with
/// `keys`; returns it.
///
/// # Errors
///
/// [`SealError`] when the manifest cannot be read back or the seal cannot be written.
pub fn write(dir: &Path, log: LogState<'_>, status: SealStatus, keys: &[&Key]) -> Result<Seal, SealError> {
    let manifest_error = |detail: String| SealError::Manifest { dir: dir.to_owned(), detail };
    let bytes = store::read_beneath(dir, Path::new("manifest.json"), bounds::MANIFEST)
        .map_err(|e| manifest_error(e.to_string()))?;
    let manifest: Value = strict::parse(&bytes).map_err(|e| manifest_error(e.to_string()))?;
    let recorded = manifest
        .pointer("/configuration/recorded_campaign_sha256")
        .and_then(Value::as_str)
        .ok_or_else(|| manifest_error("it has no configuration.recorded_campaign_sha256".into()))?;
    let resumes = manifest.get("resumes").and_then(Value::as_array).map_or(0, Vec::len) as u64;
    let mut sealed = Seal {
        seal_version: SEAL_VERSION,
        run_id: log.run_id.to_owned(),
        sealed_at: super::now_rfc3339(),
        status,
        rows: log.rows,
        prev_row_sha256: log.last_row_sha256.to_owned(),
        recorded_campaign_sha256: recorded.to_owned(),
        manifest_sha256: seal::manifest_sha256(&manifest, resumes),
        resumes,
        signatures: Vec::new(),
    };
    sealed.signatures = keys.iter().map(|key| key.sign(&sealed)).collect();
    store::write_json_atomic(&dir.join(SEAL_FILE), &sealed)?;
    Ok(sealed)
}

/// Signs `row` (its chain link and evidence hash set) with `keys`: its `signatures` replaced by
/// each key's over [`seal::row_message`]. Without keys it is left unsigned.
pub fn sign_row(row: &mut Row, keys: &[std::sync::Arc<Key>]) {
    row.signatures.clear();
    row.signatures = signatures(&*row, seal::row_message, keys);
}

/// Signs `manifest` with `keys`: its `signatures` replaced by each key's over
/// [`seal::manifest_message`]. Without keys it is left unsigned.
pub fn sign_manifest(manifest: &mut Manifest, keys: &[std::sync::Arc<Key>]) {
    manifest.signatures.clear();
    manifest.signatures = signatures(&*manifest, seal::manifest_message, keys);
}

/// Each key's signature over `message` of `document` (whose own signatures are empty).
fn signatures<T: serde::Serialize>(
    document: &T,
    message: fn(&Value) -> Vec<u8>,
    keys: &[std::sync::Arc<Key>],
) -> Vec<seal::SealSignature> {
    if keys.is_empty() {
        return Vec::new();
    }
    let message = message(&serde_json::to_value(document).unwrap_or(Value::Null));
    keys.iter().map(|key| key.sign_message(&message)).collect()
}
