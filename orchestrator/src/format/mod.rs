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
pub mod scenario;
pub mod script;
mod validate;
pub mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use validate::{LoadOptions, MAX_TRIALS_OVERRIDE, Overrides};

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

fn read_limited(path: &Path) -> Result<String, LoadError> {
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

fn diagnostic_at(file: &Path, line: usize, column: usize, path: String, message: String) -> Diagnostic {
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

fn check_extension(path: &Path) -> Option<Diagnostic> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("yaml" | "yml") => None,
        _ => Some(diagnostic_at(path, 0, 0, String::new(), "configuration files must end in .yaml or .yml".into())),
    }
}

/// Load a campaign file and its scenarios, and validate everything.
pub fn load_campaign(path: &Path, options: &LoadOptions) -> Result<Bundle, LoadError> {
    if let Some(d) = check_extension(path) {
        return Err(LoadError::Invalid(vec![d]));
    }
    let text = read_limited(path)?;
    let sha256 = sha256_hex(text.as_bytes());
    let (campaign, node) = parse_document::<Campaign>(path, &text).map_err(|d| LoadError::Invalid(vec![d]))?;
    let campaign = Document { path: path.to_owned(), value: campaign, node, sha256 };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut diagnostics = Vec::new();
    let mut scenarios = Vec::new();
    for (i, rel) in campaign.value.scenarios.iter().enumerate() {
        let scenario_path = base.join(rel);
        let position = validate::position(&campaign.node, &validate::At::root().k("scenarios").i(i));
        if let Some(mut d) = check_extension(&scenario_path) {
            d.file = path.to_owned();
            (d.line, d.column) = position;
            d.path = format!("scenarios[{i}]");
            d.message = format!("scenario file {rel:?} must end in .yaml or .yml");
            diagnostics.push(d);
            continue;
        }
        let text = match read_limited(&scenario_path) {
            Ok(text) => text,
            Err(LoadError::Read { source, .. }) => {
                diagnostics.push(diagnostic_at(
                    path,
                    position.0,
                    position.1,
                    format!("scenarios[{i}]"),
                    format!("failed to read scenario {}: {source}", scenario_path.display()),
                ));
                continue;
            }
            Err(LoadError::Invalid(d)) => {
                diagnostics.extend(d);
                continue;
            }
        };
        match parse_document::<Scenario>(&scenario_path, &text) {
            Ok((scenario, node)) => {
                let sha256 = sha256_hex(&canonical_json(&scenario));
                scenarios.push(Document { path: scenario_path, value: scenario, node, sha256 });
            }
            Err(d) => diagnostics.push(d),
        }
    }
    if !diagnostics.is_empty() {
        return Err(LoadError::Invalid(diagnostics));
    }
    let mut bundle = Bundle { campaign, scenarios, warnings: Vec::new() };
    validate::validate(&mut bundle, options)?;
    Ok(bundle)
}

/// Rebuild a bundle from the dumps stored in a results manifest (for resume). Positions
/// refer to the manifest's dumps; environment and rule examples are not rechecked.
pub fn bundle_from_dumps(
    manifest: &Path,
    campaign: &Value,
    scenarios: &[(PathBuf, Value)],
    campaign_sha256: String,
) -> Result<Bundle, LoadError> {
    let node = Node::from_json(campaign);
    let value = de::from_node::<Campaign>(&node).map_err(|e| {
        LoadError::Invalid(vec![diagnostic_at(manifest, 0, 0, format!("campaign.{}", e.path), e.message)])
    })?;
    let campaign = Document { path: manifest.to_owned(), value, node, sha256: campaign_sha256 };
    let mut docs = Vec::new();
    for (i, (path, dump)) in scenarios.iter().enumerate() {
        let node = Node::from_json(dump);
        let value = de::from_node::<Scenario>(&node).map_err(|e| {
            LoadError::Invalid(vec![diagnostic_at(manifest, 0, 0, format!("scenarios[{i}].{}", e.path), e.message)])
        })?;
        let sha256 = sha256_hex(&canonical_json(&value));
        docs.push(Document { path: path.clone(), value, node, sha256 });
    }
    let mut bundle = Bundle { campaign, scenarios: docs, warnings: Vec::new() };
    validate::validate(
        &mut bundle,
        &LoadOptions { max_trials: validate::MAX_TRIALS_OVERRIDE, ..LoadOptions::resume() },
    )?;
    Ok(bundle)
}

/// Apply run-time overrides and validate the result again.
pub fn apply_overrides(bundle: &mut Bundle, overrides: &Overrides) -> Result<(), LoadError> {
    validate::apply_overrides(bundle, overrides)
}
