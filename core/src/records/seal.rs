//! `seal.json`: what a run's runner attests when it finishes — how many rows the log holds,
//! the hash of the last one, the campaign and manifest it ran and how it ended — optionally
//! signed.
//!
//! The seal is the chain's last link: its `prev_row_sha256` is the hash of the last row, as a
//! row's is of the row before it, so it pins every row and, through their `evidence_sha256`,
//! every evidence file; `recorded_campaign_sha256` and `manifest_sha256` pin the matrix and
//! what ran. Without a key anyone can recompute a seal, so an unsigned seal catches edits made
//! by someone who did not recompute it (and rows removed from the end, which the chain alone
//! cannot show). A signature over it (HMAC-SHA256 or Ed25519) can only be made with the key.
//!
//! With a key the runner also signs each row as it appends it and the manifest each time it
//! writes it ([`row_message`], [`manifest_message`]): what a run killed before its seal left,
//! or rows after a seal, are then as authenticated as a sealed run, so a resume with the key
//! never extends or re-signs rows its key holder's runner did not write. Each kind of
//! signature covers its own domain prefix, so none can stand in for another.
//!
//! `elengtis merge` of sharded runs writes a seal of its own over the merged directory, whose
//! manifest records each shard's seal whole and its hash ([`Seal::sha256`]); `verify` checks
//! each shard's seal against its segment of the merged log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::format::{canonical_json, sha256_hex};

/// Format version of the seal written by this build: 2, whose `manifest_sha256` covers the
/// whole manifest (its resume records up to the seal's `resumes`, and `budget_usd`).
pub const SEAL_VERSION: u64 = 2;
/// The first version of the seal, still read: its `manifest_sha256` leaves out `resumes` and
/// `budget_usd` ([`manifest_sha256_v1`]), so they are reported as not checked.
pub const SEAL_VERSION_V1: u64 = 1;

/// The seal of a results directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    /// Format version of the seal ([`SEAL_VERSION`]).
    pub seal_version: u64,
    /// The run.
    pub run_id: String,
    /// When the runner sealed it (RFC 3339, UTC).
    pub sealed_at: String,
    /// How the run (or its latest resume) ended.
    pub status: SealStatus,
    /// Complete rows in `runs.jsonl` when it was sealed.
    pub rows: u64,
    /// SHA-256 (hex) of the last of those rows (its bytes without the newline; of the empty
    /// string when there is none): the chain's last link.
    pub prev_row_sha256: String,
    /// The manifest's `configuration.recorded_campaign_sha256`: the campaign, and so the
    /// matrix, that ran.
    pub recorded_campaign_sha256: String,
    /// SHA-256 of the canonical JSON of `manifest.json` as it was when sealed: less its own
    /// `signatures`, with the resume records it then had (the first [`Seal::resumes`]; a
    /// resume begun later appends one), [`manifest_sha256`]. Version 1: less `resumes` and
    /// `budget_usd` ([`manifest_sha256_v1`]).
    pub manifest_sha256: String,
    /// Resume records in the manifest when it was sealed.
    pub resumes: u64,
    /// Signatures over the seal ([`signed_message`]); empty when no key was given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<SealSignature>,
}

/// How a sealed run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SealStatus {
    /// Every trial has a complete attempt.
    Complete,
    /// It ran to the end with trials that have none.
    Incomplete,
    /// It stopped early (a spend cap, consecutive failures, an exhausted step budget).
    Stopped,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// One signature over a seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SealSignature {
    /// `hmac-sha256` or `ed25519`.
    pub algorithm: SignatureAlgorithm,
    /// Which key: for Ed25519 the public key (hex); for HMAC the first 16 bytes (hex) of
    /// HMAC-SHA256(key, "elengtis key id"), which names the key without revealing it.
    pub key_id: String,
    /// The signature (hex) over [`signed_message`].
    pub signature: String,
}

/// A signature algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureAlgorithm {
    /// HMAC-SHA256 with a shared secret.
    HmacSha256,
    /// Ed25519 (RFC 8032) with a key pair.
    Ed25519,
}

impl SignatureAlgorithm {
    /// The name written in a seal.
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureAlgorithm::HmacSha256 => "hmac-sha256",
            SignatureAlgorithm::Ed25519 => "ed25519",
        }
    }
}

impl Seal {
    /// SHA-256 (hex) of the seal's canonical JSON, signatures included: what names this seal
    /// (to keep out of band, or in a merged run's seal).
    pub fn sha256(&self) -> String {
        sha256_hex(&canonical_json(self))
    }
}

/// The bytes a seal's signature covers: a fixed domain prefix, then the canonical JSON of the
/// seal without its signatures.
pub fn signed_message(seal: &Seal) -> Vec<u8> {
    let unsigned = Seal { signatures: Vec::new(), ..seal.clone() };
    let mut message = b"elengtis seal v1\n".to_vec();
    message.extend_from_slice(&canonical_json(&unsigned));
    message
}

/// The bytes a row's signature covers: a fixed domain prefix, then the canonical JSON of the
/// parsed row without its `signatures` (its chain link and evidence hash included, so a signed
/// row pins every row before it and its evidence).
pub fn row_message(row: &Value) -> Vec<u8> {
    domain_message(b"elengtis row v1\n", row)
}

/// The bytes a manifest's signature covers: a fixed domain prefix, then the canonical JSON of
/// the parsed manifest without its `signatures` (everything else: campaign, resume records,
/// spend cap).
pub fn manifest_message(manifest: &Value) -> Vec<u8> {
    domain_message(b"elengtis manifest v1\n", manifest)
}

fn domain_message(prefix: &[u8], document: &Value) -> Vec<u8> {
    let mut message = prefix.to_vec();
    match document {
        Value::Object(object) if object.contains_key("signatures") => {
            let mut unsigned = object.clone();
            unsigned.remove("signatures");
            message.extend_from_slice(&canonical_json(&unsigned));
        }
        _ => message.extend_from_slice(&canonical_json(document)),
    }
    message
}

/// SHA-256 (hex) of the canonical JSON of a parsed `manifest.json` as a seal of this version
/// pins it: without the manifest's own `signatures`, and with only its first `resumes` resume
/// records (those it had when sealed; a resume begun after the seal appends one, which leaves
/// the directory unsealed rather than the seal broken). Everything else is covered, the spend
/// cap (`budget_usd`, and each resume record's) included.
pub fn manifest_sha256(manifest: &Value, resumes: u64) -> String {
    let mut pinned = manifest.clone();
    if let Some(object) = pinned.as_object_mut() {
        object.remove("signatures");
        if let Some(Value::Array(records)) = object.get_mut("resumes") {
            records.truncate(usize::try_from(resumes).unwrap_or(usize::MAX));
        }
    }
    sha256_hex(&canonical_json(&pinned))
}

/// The manifest hash of a seal of version 1: without `resumes` and `budget_usd` (so neither
/// is covered), nor `signatures`.
pub fn manifest_sha256_v1(manifest: &Value) -> String {
    let mut pinned = manifest.clone();
    if let Some(object) = pinned.as_object_mut() {
        object.remove("resumes");
        object.remove("budget_usd");
        object.remove("signatures");
    }
    sha256_hex(&canonical_json(&pinned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_manifest_hash_covers_everything_but_later_resumes() {
        let manifest =
            json!({"run_id": "r", "campaign": {"trials": 6}, "resumes": [{"resumed_at": "t"}], "budget_usd": 1.0});
        let sealed = manifest_sha256(&manifest, 1);
        // A resume begun after the seal appends a record: the seal still holds for what it covered.
        let mut resumed = manifest.clone();
        resumed["resumes"] = json!([{"resumed_at": "t"}, {"resumed_at": "u", "budget_usd": 9.0}]);
        assert_eq!(manifest_sha256(&resumed, 1), sealed);
        // The manifest's own signatures are not part of what it pins.
        let mut signed = manifest.clone();
        signed["signatures"] = json!([{"algorithm": "ed25519", "key_id": "k", "signature": "s"}]);
        assert_eq!(manifest_sha256(&signed, 1), sealed);
        type Edit = fn(&mut Value);
        let edits: [Edit; 4] = [
            |m| m["campaign"]["trials"] = json!(8),
            |m| m["budget_usd"] = json!(1000.0),
            |m| m["resumes"][0]["resumed_at"] = json!("forged"),
            |m| m["resumes"] = json!([]),
        ];
        for edit in edits {
            let mut edited = manifest.clone();
            edit(&mut edited);
            assert_ne!(manifest_sha256(&edited, 1), sealed, "{edited}");
        }
        // Version 1 left the resumes and the cap out.
        let mut v1 = manifest.clone();
        v1["budget_usd"] = json!(1000.0);
        v1["resumes"] = json!([]);
        assert_eq!(manifest_sha256_v1(&v1), manifest_sha256_v1(&manifest));
    }

    #[test]
    fn each_kind_of_signed_message_has_its_own_domain_and_leaves_signatures_out() {
        let row = json!({"run_id": "r", "completed": true, "signatures": [{"signature": "x"}]});
        let mut unsigned = row.clone();
        unsigned.as_object_mut().expect("object").remove("signatures");
        assert_eq!(row_message(&row), row_message(&unsigned));
        assert_ne!(row_message(&row), manifest_message(&row));
        assert!(row_message(&row).starts_with(b"elengtis row v1\n"));
        let mut flipped = unsigned.clone();
        flipped["completed"] = json!(false);
        assert_ne!(row_message(&flipped), row_message(&unsigned));
    }

    #[test]
    fn the_signed_message_leaves_the_signatures_out() {
        let seal = Seal {
            seal_version: SEAL_VERSION,
            run_id: "r".into(),
            sealed_at: "t".into(),
            status: SealStatus::Complete,
            rows: 2,
            prev_row_sha256: "a".into(),
            recorded_campaign_sha256: "b".into(),
            manifest_sha256: "c".into(),
            resumes: 0,
            signatures: Vec::new(),
        };
        let mut signed = seal.clone();
        signed.signatures.push(SealSignature {
            algorithm: SignatureAlgorithm::Ed25519,
            key_id: "k".into(),
            signature: "s".into(),
        });
        assert_eq!(signed_message(&seal), signed_message(&signed));
        assert_ne!(seal.sha256(), signed.sha256());
        let mut other = seal.clone();
        other.rows = 3;
        assert_ne!(signed_message(&seal), signed_message(&other));
    }
}
