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
pub mod quote;
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

/// The `file:line:column` (the position left out when `line` is 0) and `: warning` that every
/// message about a place in a document starts with.
pub fn write_place(
    f: &mut fmt::Formatter<'_>,
    file: &std::path::Path,
    line: usize,
    column: usize,
    severity: Severity,
) -> fmt::Result {
    write!(f, "{}", file.display())?;
    if line > 0 {
        write!(f, ":{line}:{column}")?;
    }
    if severity == Severity::Warning {
        write!(f, ": warning")?;
    }
    Ok(())
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_place(f, &self.file, self.line, self.column, self.severity)?;
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

/// Read a configuration file as UTF-8 text: only a regular file (a FIFO, a device, a socket or
/// a directory is refused before it is opened for reading, so nothing blocks on it), at most
/// [`MAX_FILE_BYTES`], and UTF-8 (UTF-16 and UTF-32, with or without a byte order mark, and
/// invalid UTF-8 are refused with the position of the first offending byte and what was found).
///
/// # Errors
///
/// [`LoadError::Read`] when the file cannot be opened or read; [`LoadError::Invalid`] (one
/// diagnostic naming the file) when it is not a regular file, too large, or not UTF-8.
pub fn read_limited(path: &Path) -> Result<String, LoadError> {
    use std::io::Read as _;
    let read_err = |source| LoadError::Read { path: path.to_owned(), source };
    let refuse = |line: usize, column: usize, message: String| {
        LoadError::Invalid(vec![diagnostic_at(path, line, column, String::new(), message)])
    };
    let not_regular = |meta: &std::fs::Metadata| {
        refuse(0, 0, format!("not a regular file but {}; expected a regular file", file_kind(meta)))
    };
    let too_large = || {
        refuse(
            0,
            0,
            format!(
                "the file is larger than {} MiB; expected at most {MAX_FILE_BYTES} bytes",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        )
    };
    // Checked before opening: opening a FIFO for reading blocks until a writer appears.
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let file = std::fs::File::open(path).map_err(read_err)?;
    // And again on what was opened (the path may have been replaced in between).
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    if let Some(found) = wide_encoding(&bytes) {
        return Err(refuse(1, 1, format!("the file is {found} (at byte offset 0); expected UTF-8")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let (line, column) = text_position(&bytes[..at]);
        let bad = bytes.get(at).copied().unwrap_or_default();
        refuse(
            line,
            column,
            format!(
                "invalid UTF-8 at byte offset {at} (byte 0x{bad:02X}): the file is not UTF-8 (an 8-bit encoding such as Latin-1 or Windows-1252?); expected UTF-8"
            ),
        )
    })
}

/// What a file that is not a regular file is.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        } else if kind.is_char_device() {
            return "a character device";
        } else if kind.is_block_device() {
            return "a block device";
        } else if kind.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// UTF-16 or UTF-32 text, told by its byte order mark or, without one, by the zero bytes
/// of its first character (as YAML's own encoding detection does).
fn wide_encoding(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xFE, 0, 0, ..] => Some("UTF-32LE (byte order mark FF FE 00 00)"),
        [0, 0, 0xFE, 0xFF, ..] => Some("UTF-32BE (byte order mark 00 00 FE FF)"),
        [0xFF, 0xFE, ..] => Some("UTF-16LE (byte order mark FF FE)"),
        [0xFE, 0xFF, ..] => Some("UTF-16BE (byte order mark FE FF)"),
        [0, 0, 0, b, ..] if *b != 0 => Some("UTF-32BE (no byte order mark)"),
        [b, 0, 0, 0, ..] if *b != 0 => Some("UTF-32LE (no byte order mark)"),
        [0, b, ..] if *b != 0 => Some("UTF-16BE (no byte order mark)"),
        [b, 0, ..] if *b != 0 => Some("UTF-16LE (no byte order mark)"),
        _ => None,
    }
}

/// The 1-based line and column (in characters) just after `valid`, which is UTF-8.
fn text_position(valid: &[u8]) -> (usize, usize) {
    let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
    let start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = std::str::from_utf8(&valid[start..]).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// An error diagnostic; its message is [`quote::bounded`].
pub(crate) fn diagnostic_at(file: &Path, line: usize, column: usize, path: String, message: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: file.to_owned(),
        line,
        column,
        path: quote::bounded(path),
        message: quote::bounded(message),
    }
}

/// Parse one YAML document into `T`, with positions in every error: a YAML syntax error, or
/// every mismatch between the document and `T` (see [`de::from_node_all`]).
///
/// # Errors
///
/// The syntax error, or every mismatch, each naming the file, line, column and field path.
pub fn parse_document_all<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<(T, Node), Vec<Diagnostic>> {
    let node = yaml::parse(text)
        .map_err(|e| vec![diagnostic_at(file, e.mark.line, e.mark.column, String::new(), e.message)])?;
    let value = de::from_node_all::<T>(&node).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| diagnostic_at(file, e.mark.line, e.mark.column, e.path.to_string(), e.message))
            .collect::<Vec<_>>()
    })?;
    Ok((value, node))
}

/// A document that does not match its type, as [`parse_document_lenient`] reports it.
#[derive(Debug)]
pub struct Mismatch<T> {
    /// Every problem.
    pub diagnostics: Vec<Diagnostic>,
    /// The document read without its unknown fields, when those are its only problems (see
    /// [`de::from_node_lenient`]).
    pub lenient: Option<T>,
    /// The document's tree, unless its YAML is broken.
    pub node: Option<Node>,
}

/// As [`parse_document_all`], keeping what a document whose only problems are unknown
/// fields means without them, so that the rest of it can still be checked.
///
/// # Errors
///
/// The syntax error, or every mismatch, with the document read leniently when it could be.
pub fn parse_document_lenient<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<(T, Node), Mismatch<T>> {
    let node = yaml::parse(text).map_err(|e| Mismatch {
        diagnostics: vec![diagnostic_at(file, e.mark.line, e.mark.column, String::new(), e.message)],
        lenient: None,
        node: None,
    })?;
    match de::from_node_lenient::<T>(&node) {
        Ok(value) => Ok((value, node)),
        Err((value, errors)) => Err(Mismatch {
            diagnostics: errors
                .into_iter()
                .map(|e| diagnostic_at(file, e.mark.line, e.mark.column, e.path.to_string(), e.message))
                .collect(),
            lenient: value,
            node: Some(node),
        }),
    }
}

/// The file names a campaign's `scenarios` lists, read from its tree: for a campaign that does
/// not otherwise read, so that its scenarios are still checked.
pub(crate) fn scenario_files(node: &Node) -> Vec<String> {
    use self::yaml::NodeKind;
    let NodeKind::Map(entries) = &node.kind else { return Vec::new() };
    let Some((_, list)) = entries.iter().find(|(key, _)| key.as_str() == Some("scenarios")) else {
        return Vec::new();
    };
    match &list.kind {
        NodeKind::Seq(items) => items.iter().filter_map(|item| item.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

/// Parse one YAML document into `T`, with positions in every error (the first problem only;
/// loaders use [`parse_document_all`]).
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

#[cfg(all(test, unix))]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn refused(path: &Path) -> Diagnostic {
        match read_limited(path) {
            Err(LoadError::Invalid(d)) if d.len() == 1 => d.into_iter().next().expect("one"),
            other => panic!("{}: expected one diagnostic, got {other:?}", path.display()),
        }
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        // A FIFO with no writer would block `open` forever; it is refused at once.
        let started = Instant::now();
        let d = refused(&fifo);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(d.file, fifo);
        assert!(d.to_string().contains("not a regular file but a FIFO (named pipe)"), "{d}");
        let d = refused(Path::new("/dev/zero"));
        assert!(d.to_string().starts_with("/dev/zero: not a regular file but a character device"), "{d}");
        let d = refused(dir.path());
        assert!(d.message.contains("a directory"), "{d}");
        // Through a symbolic link too.
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        assert!(refused(&link).message.contains("character device"));
    }

    #[test]
    fn a_file_over_the_cap_is_refused_unread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("big.yaml");
        let file = std::fs::File::create(&big).expect("create");
        file.set_len(MAX_FILE_BYTES + 1).expect("sparse file");
        let d = refused(&big);
        assert_eq!(d.file, big);
        assert!(d.message.contains("larger than 8 MiB"), "{d}");
        std::fs::File::create(&big).and_then(|f| f.set_len(MAX_FILE_BYTES)).expect("at the cap");
        assert!(read_limited(&big).is_ok());
    }

    #[test]
    fn encoding_errors_have_a_position_and_name_what_was_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write");
            path
        };
        let utf16le: Vec<u8> = "a: 1\n".encode_utf16().flat_map(u16::to_le_bytes).collect();
        let utf16be: Vec<u8> = "a: 1\n".encode_utf16().flat_map(u16::to_be_bytes).collect();
        for (name, bytes, found) in [
            ("le-bom.yaml", [&[0xFF, 0xFE][..], &utf16le].concat(), "UTF-16LE (byte order mark FF FE)"),
            ("be-bom.yaml", [&[0xFE, 0xFF][..], &utf16be].concat(), "UTF-16BE (byte order mark FE FF)"),
            ("le.yaml", utf16le.clone(), "UTF-16LE (no byte order mark)"),
            ("be.yaml", utf16be.clone(), "UTF-16BE (no byte order mark)"),
            ("le32.yaml", vec![0xFF, 0xFE, 0, 0, b'a', 0, 0, 0], "UTF-32LE (byte order mark FF FE 00 00)"),
        ] {
            let path = write(name, &bytes);
            let d = refused(&path);
            assert_eq!((d.line, d.column), (1, 1), "{d}");
            assert_eq!(
                d.to_string(),
                format!("{}:1:1: the file is {found} (at byte offset 0); expected UTF-8", path.display())
            );
        }
        // Latin-1: the offending byte's line, column and offset.
        let path = write("latin1.yaml", b"schema_version: 1\ntitle: caf\xE9\n");
        let d = refused(&path);
        assert_eq!((d.line, d.column), (2, 11), "{d}");
        assert!(d.message.starts_with("invalid UTF-8 at byte offset 28 (byte 0xE9)"), "{d}");
        // Columns count characters.
        let path = write("mixed.yaml", "é: \"".bytes().chain([0xFF]).collect::<Vec<u8>>().as_slice());
        assert_eq!((refused(&path).line, refused(&path).column), (1, 5));
        assert_eq!(read_limited(&write("ok.yaml", "a: é\n".as_bytes())).expect("utf-8"), "a: é\n");
    }
}
