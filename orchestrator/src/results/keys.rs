//! Keys that sign and check a results directory's seal: an HMAC-SHA256 secret, or an Ed25519
//! key pair. Keys are read when they are needed, kept in memory only and never written into
//! any results file, event or log (their `Debug` says only which kind of key it is).
//!
//! Where they come from:
//!
//! - `ELENGTIS_SIGNING_KEY`: the key itself in the environment — an HMAC secret (at least 32
//!   bytes; `openssl rand -hex 32` makes one), or an Ed25519 private key in PKCS#8 PEM;
//! - `ELENGTIS_SIGNING_KEY_FILE`: a file holding either (`elengtis keygen` writes an Ed25519
//!   pair; `openssl genpkey -algorithm ed25519` one too);
//! - `verify --key FILE` (a secret or a private key) and `verify --public-key FILE` (an Ed25519
//!   public key in SPKI PEM, as `elengtis keygen` and `openssl pkey -pubout` write it).

use std::path::{Path, PathBuf};

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use elengtis_core::records::seal::{Seal, SealSignature, SignatureAlgorithm, signed_message};
use hmac::{KeyInit as _, Mac as _};

/// The environment variable holding a signing key.
pub const KEY_ENV: &str = "ELENGTIS_SIGNING_KEY";
/// The environment variable naming a file that holds a signing key.
pub const KEY_FILE_ENV: &str = "ELENGTIS_SIGNING_KEY_FILE";
/// Shortest HMAC secret accepted, in bytes.
pub const MIN_HMAC_KEY_BYTES: usize = 32;
/// Largest key file read: a PEM key or a secret is a few hundred bytes.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Why a key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A key file could not be read.
    #[error("failed to read the key file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A key is not one this build can use.
    #[error("failed to use the key from {from}: {why}")]
    Invalid {
        /// Where it came from (`ELENGTIS_SIGNING_KEY`, a file).
        from: String,
        /// What is wrong with it (never the key).
        why: String,
    },
    /// A key pair could not be written.
    #[error("failed to write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A key that signs seals (and checks them).
pub enum Key {
    /// An HMAC-SHA256 secret.
    Hmac(zeroize_vec::Secret),
    /// An Ed25519 private key.
    Ed25519(Box<SigningKey>),
}

/// A key that checks seals only.
#[derive(Debug, Clone)]
pub enum Checker {
    /// An HMAC secret or an Ed25519 private key: checks what it signs.
    Key(std::sync::Arc<Key>),
    /// An Ed25519 public key.
    Public(VerifyingKey),
}

mod zeroize_vec {
    /// Bytes overwritten with zeros when dropped.
    pub struct Secret(pub(super) Vec<u8>);

    impl std::fmt::Debug for Secret {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("<secret>")
        }
    }

    impl Drop for Secret {
        fn drop(&mut self) {
            self.0.fill(0);
            std::hint::black_box(&self.0);
        }
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Hmac(_) => f.write_str("Key::Hmac(<secret>)"),
            Key::Ed25519(_) => f.write_str("Key::Ed25519(<secret>)"),
        }
    }
}

impl Key {
    /// Reads a key from its text: an Ed25519 private key in PKCS#8 PEM, else an HMAC secret
    /// (the bytes, less one trailing newline). `from` names where it came from in errors.
    ///
    /// # Errors
    ///
    /// [`KeyError::Invalid`] for a PEM that is not an Ed25519 private key, or a secret shorter
    /// than [`MIN_HMAC_KEY_BYTES`].
    pub fn parse(text: &[u8], from: &str) -> Result<Key, KeyError> {
        let invalid = |why: String| KeyError::Invalid { from: from.to_owned(), why };
        if text.trim_ascii().is_empty() {
            return Err(invalid(
                "it is empty (or only whitespace): a key that is set but missing — a CI secret not given to a fork's pull request, say — is an error, never the absence of a key; give the key, or unset the variable to run and read unsigned"
                    .into(),
            ));
        }
        let as_text = std::str::from_utf8(text).ok();
        if let Some(pem) = as_text.filter(|t| t.trim_start().starts_with("-----BEGIN")) {
            if !pem.contains("-----BEGIN PRIVATE KEY-----") {
                return Err(invalid(
                    "it is PEM but not a PKCS#8 private key (`-----BEGIN PRIVATE KEY-----`); give the private key, or `verify --public-key` for a public one".into(),
                ));
            }
            let key = SigningKey::from_pkcs8_pem(pem.trim())
                .map_err(|e| invalid(format!("it is not an Ed25519 private key in PKCS#8 PEM ({e})")))?;
            return Ok(Key::Ed25519(Box::new(key)));
        }
        let secret = text.strip_suffix(b"\n").unwrap_or(text);
        let secret = secret.strip_suffix(b"\r").unwrap_or(secret);
        if secret.len() < MIN_HMAC_KEY_BYTES {
            return Err(invalid(format!(
                "an HMAC secret must be at least {MIN_HMAC_KEY_BYTES} bytes, and this one has {} (make one with `openssl rand -hex 32`)",
                secret.len()
            )));
        }
        Ok(Key::Hmac(zeroize_vec::Secret(secret.to_vec())))
    }

    /// Reads a key file.
    ///
    /// # Errors
    ///
    /// [`KeyError::Read`] when it cannot be read, else as [`Key::parse`].
    pub fn from_file(path: &Path) -> Result<Key, KeyError> {
        Key::parse(&read_key_file(path)?, &path.display().to_string())
    }

    /// The keys the environment gives (`ELENGTIS_SIGNING_KEY`, `ELENGTIS_SIGNING_KEY_FILE`),
    /// in that order; none when neither is set. A variable that is set is used: set but empty
    /// (or only whitespace) is an error, like a key too short.
    ///
    /// # Errors
    ///
    /// As [`Key::parse`] and [`Key::from_file`]; [`KeyError::Invalid`] for
    /// `ELENGTIS_SIGNING_KEY_FILE` set to nothing.
    pub fn from_env() -> Result<Vec<Key>, KeyError> {
        let mut keys = Vec::new();
        if let Some(value) = std::env::var_os(KEY_ENV) {
            keys.push(Key::parse(value.as_encoded_bytes(), KEY_ENV)?);
        }
        if let Some(path) = std::env::var_os(KEY_FILE_ENV) {
            let from = format!("{KEY_FILE_ENV} ({})", Path::new(&path).display());
            if path.as_encoded_bytes().trim_ascii().is_empty() {
                return Err(KeyError::Invalid {
                    from: KEY_FILE_ENV.to_owned(),
                    why: "it is set but empty: it names no key file; give the file, or unset the variable to run and read unsigned".into(),
                });
            }
            keys.push(Key::parse(&read_key_file(Path::new(&path))?, &from)?);
        }
        Ok(keys)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        match self {
            Key::Hmac(_) => SignatureAlgorithm::HmacSha256,
            Key::Ed25519(_) => SignatureAlgorithm::Ed25519,
        }
    }

    /// Which key this is, as a seal names it (never the key itself).
    pub fn key_id(&self) -> String {
        match self {
            Key::Hmac(secret) => hex(&hmac(&secret.0, b"elengtis key id")[..16]),
            Key::Ed25519(key) => hex(key.verifying_key().as_bytes()),
        }
    }

    /// This key's signature over `seal`.
    pub fn sign(&self, seal: &Seal) -> SealSignature {
        self.sign_message(&signed_message(seal))
    }

    /// This key's signature over `message` (a seal's, a row's or a manifest's: each begins
    /// with its own domain prefix, `elengtis_core::records::seal`).
    pub fn sign_message(&self, message: &[u8]) -> SealSignature {
        let signature = match self {
            Key::Hmac(secret) => hex(&hmac(&secret.0, message)),
            Key::Ed25519(key) => hex(&key.sign(message).to_bytes()),
        };
        SealSignature { algorithm: self.algorithm(), key_id: self.key_id(), signature }
    }
}

/// A key file's bytes, at most [`MAX_KEY_FILE_BYTES`] of them.
fn read_key_file(path: &Path) -> Result<Vec<u8>, KeyError> {
    use super::store::{TooLarge, read_within};
    let read = |source| KeyError::Read { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(read)?;
    let size = file.metadata().map_err(read)?.len();
    read_within(file, size, MAX_KEY_FILE_BYTES).map_err(|e| match e {
        TooLarge::Size(size) => KeyError::Invalid {
            from: path.display().to_string(),
            why: format!(
                "it is {size} bytes, larger than the {MAX_KEY_FILE_BYTES} bytes a key file may have: it is not a key"
            ),
        },
        TooLarge::Io(source) => read(source),
    })
}

impl Checker {
    /// The algorithm it checks.
    pub fn algorithm(&self) -> SignatureAlgorithm {
        match self {
            Checker::Key(key) => key.algorithm(),
            Checker::Public(_) => SignatureAlgorithm::Ed25519,
        }
    }

    /// The key id a signature by this key carries.
    pub fn key_id(&self) -> String {
        match self {
            Checker::Key(key) => key.key_id(),
            Checker::Public(public) => hex(public.as_bytes()),
        }
    }

    /// Reads an Ed25519 public key in SPKI PEM.
    ///
    /// # Errors
    ///
    /// [`KeyError::Read`] or [`KeyError::Invalid`].
    pub fn public_from_file(path: &Path) -> Result<Checker, KeyError> {
        let bytes = read_key_file(path)?;
        let invalid = |why: String| KeyError::Invalid { from: path.display().to_string(), why };
        let text = std::str::from_utf8(&bytes).map_err(|_| invalid("it is not PEM text".into()))?;
        let key = VerifyingKey::from_public_key_pem(text.trim())
            .map_err(|e| invalid(format!("it is not an Ed25519 public key in SPKI PEM ({e})")))?;
        Ok(Checker::Public(key))
    }

    /// Whether `signature` is this key's valid signature over `seal` (`None` when it was made
    /// by another key or algorithm).
    pub fn check(&self, seal: &Seal, signature: &SealSignature) -> Option<bool> {
        self.check_message(&signed_message(seal), signature)
    }

    /// Whether `signature` is this key's valid signature over `message` (`None` when it was
    /// made by another key or algorithm).
    pub fn check_message(&self, message: &[u8], signature: &SealSignature) -> Option<bool> {
        if signature.algorithm != self.algorithm() || signature.key_id != self.key_id() {
            return None;
        }
        let Some(bytes) = unhex(&signature.signature) else { return Some(false) };
        Some(match self {
            Checker::Key(key) => match key.as_ref() {
                Key::Hmac(secret) => {
                    let Ok(mut mac) = HmacSha256::new_from_slice(&secret.0) else { return Some(false) };
                    mac.update(message);
                    mac.verify_slice(&bytes).is_ok()
                }
                Key::Ed25519(key) => verify_ed25519(&key.verifying_key(), message, &bytes),
            },
            Checker::Public(public) => verify_ed25519(public, message, &bytes),
        })
    }
}

fn verify_ed25519(public: &VerifyingKey, message: &[u8], bytes: &[u8]) -> bool {
    ed25519_dalek::Signature::from_slice(bytes).is_ok_and(|signature| public.verify_strict(message, &signature).is_ok())
}

fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
    // An HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| HmacSha256::new(&Default::default()));
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Writes a new Ed25519 key pair: the private key to `private` (PKCS#8 PEM, mode 0600) and the
/// public key to `public` (SPKI PEM). Neither may exist. Returns the key id (the public key,
/// hex) that seals signed with it carry.
///
/// # Errors
///
/// [`KeyError::Write`] when a file exists or cannot be written, [`KeyError::Read`] when the
/// operating system's randomness cannot be read.
pub fn generate(private: &Path, public: &Path) -> Result<String, KeyError> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut seed = [0u8; 32];
    let urandom = Path::new("/dev/urandom");
    std::fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|source| KeyError::Read { path: urandom.to_owned(), source })?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    let encode = |why: String| KeyError::Invalid { from: "the new key".into(), why };
    let private_pem =
        key.to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF).map_err(|e| encode(e.to_string()))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map_err(|e| encode(e.to_string()))?;
    let write = |path: &Path, text: &[u8], mode: u32| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text).and_then(|()| f.sync_all()))
            .map_err(|source| KeyError::Write { path: path.to_owned(), source })
    };
    write(private, private_pem.as_bytes(), 0o600)?;
    write(public, public_pem.as_bytes(), 0o644)?;
    Ok(hex(key.verifying_key().as_bytes()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use elengtis_core::records::seal::{SEAL_VERSION, SealStatus};

    fn seal() -> Seal {
        Seal {
            seal_version: SEAL_VERSION,
            run_id: "r".into(),
            sealed_at: "t".into(),
            status: SealStatus::Complete,
            rows: 3,
            prev_row_sha256: "a".repeat(64),
            recorded_campaign_sha256: "b".repeat(64),
            manifest_sha256: "c".repeat(64),
            resumes: 0,
            signatures: Vec::new(),
        }
    }

    #[test]
    fn an_hmac_signature_checks_with_its_key_only() {
        let key = Key::parse(b"0123456789abcdef0123456789abcdef\n", "test").unwrap();
        let signature = key.sign(&seal());
        assert_eq!(signature.algorithm, SignatureAlgorithm::HmacSha256);
        let checker = Checker::Key(std::sync::Arc::new(key));
        assert_eq!(checker.check(&seal(), &signature), Some(true));
        let mut edited = seal();
        edited.rows = 4;
        assert_eq!(checker.check(&edited, &signature), Some(false));
        let other = Checker::Key(std::sync::Arc::new(Key::parse(&[b'x'; 32], "other").unwrap()));
        assert_eq!(other.check(&seal(), &signature), None, "another key's signature is not this key's");
        assert!(!format!("{checker:?}").contains("0123"), "the key never shows");
        assert!(!signature.key_id.contains("0123"));
        let short = Key::parse(b"short", "ELENGTIS_SIGNING_KEY").unwrap_err().to_string();
        assert!(short.contains("at least 32 bytes") && !short.contains("short"), "{short}");
        for blank in [&b""[..], b"\n", b"  \t\r\n", &[b' '; 40]] {
            let error = Key::parse(blank, "ELENGTIS_SIGNING_KEY").unwrap_err().to_string();
            assert!(error.contains("ELENGTIS_SIGNING_KEY") && error.contains("empty"), "{error}");
        }
    }

    #[test]
    fn an_ed25519_pair_from_keygen_signs_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let (private, public) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
        let id = generate(&private, &public).unwrap();
        assert!(generate(&private, &public).is_err(), "never overwrites");
        let key = Key::from_file(&private).unwrap();
        let signature = key.sign(&seal());
        assert_eq!((signature.algorithm, signature.key_id.as_str()), (SignatureAlgorithm::Ed25519, id.as_str()));
        let checker = Checker::public_from_file(&public).unwrap();
        assert_eq!(checker.check(&seal(), &signature), Some(true));
        let mut edited = seal();
        edited.status = SealStatus::Incomplete;
        assert_eq!(checker.check(&edited, &signature), Some(false));
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(Checker::public_from_file(&private).is_err(), "a private key is not a public key");
    }
}
