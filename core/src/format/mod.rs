//! Campaign and scenario formats: strict parsing, positions in every error, semantic checks.
//!
//! Loading is two passes, in the manner of ripgrep's low/high-level arguments: YAML text is
//! parsed into a spanned tree ([`yaml`]) and deserialized into typed structs through a
//! path-tracking deserializer ([`de`]); then [`validate`] checks ranges, references,
//! bindings and rule examples against the whole campaign. Both passes report
//! `file:line:column: field.path: what was expected`, and every problem found is
//! reported, not only the first.

pub mod campaign;
pub mod de;
pub mod gate;
pub mod generation;
pub mod path;
pub mod scenario;
pub mod script;
pub mod seed;
pub mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use self::campaign::Campaign;
use self::scenario::Scenario;
use self::yaml::Node;

/// Largest configuration file accepted.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Serialize a newtype variant's struct with a leading `type` field.
pub(crate) fn tagged<T: Serialize, S: serde::Serializer>(
    kind: &str,
    inner: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    let value = serde_json::to_value(inner).map_err(S::Error::custom)?;
    let mut map = serde_json::Map::new();
    map.insert("type".to_owned(), Value::String(kind.to_owned()));
    if let Value::Object(fields) = value {
        map.extend(fields);
    }
    map.serialize(serializer)
}

/// `schema_version` as pydantic's `Literal[1]` reads it: an integer, a whole float or a
/// boolean (`true` is 1), never a string. The value is range-checked by validation.
pub(crate) fn schema_version<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the integer 1")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<u32, E> {
            Ok(u32::from(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
        }
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "whole and in range")]
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u32, E> {
            if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) {
                Ok(v as u32)
            } else {
                Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
            }
        }
    }
    deserializer.deserialize_any(V)
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Blocks loading.
    Error,
    /// Reported, does not block.
    Warning,
}

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The file (as given, or resolved for scenarios).
    pub file: PathBuf,
    /// 1-based line; 0 when unknown (for example a command-line override).
    pub line: usize,
    /// 1-based column; 0 when unknown.
    pub column: usize,
    /// Field path such as `targets[0].transport.uid`.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if self.severity == Severity::Warning {
            write!(f, ": warning")?;
        }
        if self.path.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.path, self.message)
        }
    }
}

/// Why a campaign could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("failed to read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// One or more problems in the files.
    #[error("{}", render_diagnostics(.0))]
    Invalid(Vec<Diagnostic>),
}

impl LoadError {
    /// The diagnostics (empty for read errors).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            LoadError::Invalid(d) => d,
            LoadError::Read { .. } => &[],
        }
    }
}

fn render_diagnostics(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
    let mut out = format!("failed to load the campaign: {errors} problem{}", if errors == 1 { "" } else { "s" });
    for d in diagnostics {
        out.push('\n');
        out.push_str(&d.to_string());
    }
    out
}

/// A parsed file with its tree (for positions) and digest.
#[derive(Debug, Clone)]
pub struct Document<T> {
    /// Where it was read from.
    pub path: PathBuf,
    /// The typed content.
    pub value: T,
    /// The spanned tree (positions for diagnostics).
    pub node: Node,
    /// SHA-256 of the file bytes (campaign) or of the canonical JSON dump (scenario).
    pub sha256: String,
}

/// A loaded, validated campaign and its scenarios (in campaign order).
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The campaign.
    pub campaign: Document<Campaign>,
    /// The scenarios.
    pub scenarios: Vec<Document<Scenario>>,
    /// Warnings found while loading.
    pub warnings: Vec<Diagnostic>,
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Canonical JSON (sorted keys, compact) of a serializable value.
pub fn canonical_json<T: Serialize>(value: &T) -> Vec<u8> {
    fn sort(value: Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(String, Value)> = map.into_iter().map(|(k, v)| (k, sort(v))).collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(entries.into_iter().collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sort).collect()),
            other => other,
        }
    }
    let value = serde_json::to_value(value).map(sort).unwrap_or(Value::Null);
    serde_json::to_vec(&value).unwrap_or_default()
}

pub(crate) fn read_limited(path: &Path) -> Result<String, LoadError> {
    use std::io::Read as _;
    let read_err = |source| LoadError::Read { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut text = String::new();
    let mut limited = file.take(MAX_FILE_BYTES + 1);
    limited.read_to_string(&mut text).map_err(read_err)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::Invalid(vec![Diagnostic {
            severity: Severity::Error,
            file: path.to_owned(),
            line: 0,
            column: 0,
            path: String::new(),
            message: format!("file is larger than {} MiB", MAX_FILE_BYTES / (1024 * 1024)),
        }]));
    }
    Ok(text)
}

pub(crate) fn diagnostic_at(file: &Path, line: usize, column: usize, path: String, message: String) -> Diagnostic {
    Diagnostic { severity: Severity::Error, file: file.to_owned(), line, column, path, message }
}

/// Parse one YAML document into `T`, with positions in every error.
pub fn parse_document<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<(T, Node), Diagnostic> {
    let node =
        yaml::parse(text).map_err(|e| diagnostic_at(file, e.mark.line, e.mark.column, String::new(), e.message))?;
    let value = de::from_node::<T>(&node)
        .map_err(|e| diagnostic_at(file, e.mark.line, e.mark.column, e.path.to_string(), e.message))?;
    Ok((value, node))
}

pub(crate) fn check_extension(path: &Path) -> Option<Diagnostic> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("yaml" | "yml") => None,
        _ => Some(diagnostic_at(path, 0, 0, String::new(), "configuration files must end in .yaml or .yml".into())),
    }
}
