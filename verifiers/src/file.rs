//! The `container_file` action: one file (or a small directory listing) read out of the
//! audited container, as the runner's own evidence of what the trial left on disk.
//!
//! # Trust boundary
//!
//! This module never talks to the container or to Docker. The sandbox layer downloads the
//! path through the engine's archive API and hands over the raw tar ([`Fetched`]); everything
//! here runs in the trusted runner on those bytes. The bytes are untrusted (the audited
//! server, or the model through it, chose what is at the path), so [`read_archive`] accepts
//! only:
//!
//! - for a file: exactly one **regular file** named like the requested path, at most
//!   [`FileLimits::max_file_bytes`]; a symbolic or hard link, a directory, a device, a FIFO,
//!   a second entry or another name is refused (a link is never followed: the runner reads
//!   what is at the path, not what it points to);
//! - for a listing (`list: true`): a directory named like the requested path whose entries
//!   all lie below it (no absolute name, no `..`, `.` or empty component), at most
//!   [`FileLimits::max_entries`] of them; only names, sizes and types are kept, never
//!   contents or link targets.
//!
//! The whole archive is capped by the sandbox layer while it streams
//! ([`FileLimits::max_archive_bytes`] for a listing, the file cap plus room for tar headers
//! for a file); an archive over the cap arrives as [`Fetched::OverCap`].
//!
//! # What the check sees
//!
//! [`response`] turns what was read into the JSON document the check's assertions (the
//! usual `{path, op, value}` predicates: `equals`, `contains`, `matches`) point into:
//!
//! - a file: `{path, exists: true, type: "file", size, sha256, text}` where `text` is the
//!   content when it is UTF-8 (else `null`, and `content_hex` holds it), plus `json`, the
//!   parsed content, when an assertion or capture points under `/json`;
//! - a listing: `{path, exists: true, type: "directory", count, entries: [{name, type, size}]}`;
//! - nothing at the path: `{path, exists: false}`, but only when an assertion points at
//!   `/exists`; otherwise a missing file is an error, so that a typo in the path cannot
//!   quietly read as "not written".

use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

/// Room for the tar headers around one file (a 512-byte header, PAX records, padding to 512
/// bytes and the two end-of-archive blocks).
pub const TAR_OVERHEAD: u64 = 64 * 1024;

/// Bounds of one `container_file` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// Largest file read (its content is kept in the evidence).
    pub max_file_bytes: u64,
    /// Most entries a listing may have (the directory itself not counted).
    pub max_entries: usize,
    /// Largest archive accepted for a listing (the engine sends the contents too).
    pub max_archive_bytes: u64,
}

impl Default for FileLimits {
    /// 1 MiB per file, 1000 entries, an 8 MiB archive for a listing.
    fn default() -> Self {
        Self { max_file_bytes: 1024 * 1024, max_entries: 1000, max_archive_bytes: 8 * 1024 * 1024 }
    }
}

impl FileLimits {
    /// The cap on the downloaded archive for a file (`list == false`) or a listing.
    #[must_use]
    pub const fn archive_cap(&self, list: bool) -> u64 {
        if list { self.max_archive_bytes } else { self.max_file_bytes.saturating_add(TAR_OVERHEAD) }
    }
}

/// What the sandbox layer got from the engine for a path.
#[derive(Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The engine has nothing at the path (404).
    Missing,
    /// The archive, complete.
    Tar(Vec<u8>),
    /// The archive grew over the cap while streaming; the download was abandoned.
    OverCap {
        /// The cap.
        cap: u64,
    },
}

impl std::fmt::Debug for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Sizes only: the contents are untrusted.
        match self {
            Self::Missing => f.write_str("Missing"),
            Self::Tar(bytes) => write!(f, "Tar({} bytes)", bytes.len()),
            Self::OverCap { cap } => write!(f, "OverCap({cap})"),
        }
    }
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Path relative to the listed directory (`a/b.txt`; a directory without a trailing `/`).
    pub name: String,
    /// `file`, `directory`, `symlink`, `hardlink`, `device`, `fifo` or `other`.
    pub kind: &'static str,
    /// Size in bytes (0 for anything but a regular file).
    pub size: u64,
}

/// What was found at the path.
#[derive(Clone, PartialEq, Eq)]
pub enum Found {
    /// Nothing.
    Missing,
    /// A regular file's content.
    File(Vec<u8>),
    /// A directory's entries, sorted by name.
    Listing(Vec<DirEntry>),
}

impl std::fmt::Debug for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("Missing"),
            Self::File(bytes) => write!(f, "File({} bytes)", bytes.len()),
            Self::Listing(entries) => f.debug_tuple("Listing").field(entries).finish(),
        }
    }
}

/// Why a `container_file` read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The path is not a plain absolute path.
    #[error("failed to accept the path `{path}`: it {reason}")]
    BadPath {
        /// The path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing at the path, and no assertion on `/exists`.
    #[error(
        "failed to read {path}: there is no file at {path} in the container (to check that it is absent, assert on `/exists`)"
    )]
    Missing {
        /// The path.
        path: String,
    },
    /// Over the size cap.
    #[error("failed to read {path}: {detail}")]
    TooLarge {
        /// The path.
        path: String,
        /// The size and the cap.
        detail: String,
    },
    /// Something other than a regular file where a file was asked for.
    #[error("failed to read {path}: it is {what}; only a regular file is read{hint}")]
    NotRegularFile {
        /// The path.
        path: String,
        /// What it is.
        what: &'static str,
        /// What to write instead, if anything.
        hint: &'static str,
    },
    /// Something other than a directory where a listing was asked for.
    #[error("failed to list {path}: it is {what}, not a directory (drop `list: true` to read a file)")]
    NotADirectory {
        /// The path.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// A listing with too many entries.
    #[error("failed to list {path}: it has more than {max} entries")]
    TooManyEntries {
        /// The path.
        path: String,
        /// The limit.
        max: usize,
    },
    /// An archive that does not hold what was asked for (another name, a second file, an
    /// entry outside the directory).
    #[error("failed to accept the archive of {path}: {detail}")]
    UnsafeArchive {
        /// The path.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// Bytes that are not a tar.
    #[error("failed to read the archive of {path}: {detail}")]
    BadArchive {
        /// The path.
        path: String,
        /// The parser's complaint.
        detail: String,
    },
    /// An assertion points into `/json` but the file is not JSON.
    #[error("failed to parse {path} as JSON (an assertion or capture points under `/json`): {detail}")]
    NotJson {
        /// The path.
        path: String,
        /// The parser's complaint.
        detail: String,
    },
    /// The kept copy could not be written.
    #[error("failed to {what}: {detail}")]
    Io {
        /// The operation.
        what: String,
        /// The OS error.
        detail: String,
    },
}

impl FileError {
    /// A short classification for evidence.
    #[must_use]
    pub const fn kind_name(&self) -> &'static str {
        match self {
            Self::BadPath { .. } => "bad_path",
            Self::Missing { .. } => "missing",
            Self::TooLarge { .. } => "too_large",
            Self::NotRegularFile { .. } => "not_a_regular_file",
            Self::NotADirectory { .. } => "not_a_directory",
            Self::TooManyEntries { .. } => "too_many_entries",
            Self::UnsafeArchive { .. } => "unsafe_archive",
            Self::BadArchive { .. } => "bad_archive",
            Self::NotJson { .. } => "not_json",
            Self::Io { .. } => "io",
        }
    }
}

/// Checks that `path` is a plain absolute path (no empty, `.` or `..` component, no trailing
/// `/`, no NUL) and returns its last component, the name the engine's archive uses.
pub fn check_path(path: &str) -> Result<&str, FileError> {
    let bad = |reason: &str| FileError::BadPath { path: path.to_owned(), reason: reason.to_owned() };
    let Some(rest) = path.strip_prefix('/') else {
        return Err(bad("must be absolute (start with `/`)"));
    };
    if path.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    if rest.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(bad("must name a file or directory without empty, `.` or `..` components or a trailing `/`"));
    }
    rest.rsplit('/').next().filter(|name| !name.is_empty()).ok_or_else(|| bad("must name a file or directory"))
}

/// What a tar entry type is, in the words of errors and listings.
fn kind_of(kind: tar::EntryType) -> (&'static str, &'static str) {
    if kind.is_file() {
        ("file", "a regular file")
    } else if kind.is_dir() {
        ("directory", "a directory")
    } else if kind.is_symlink() {
        ("symlink", "a symbolic link")
    } else if kind.is_hard_link() {
        ("hardlink", "a hard link")
    } else if kind.is_character_special() || kind.is_block_special() {
        ("device", "a device")
    } else if kind.is_fifo() {
        ("fifo", "a FIFO")
    } else {
        ("other", "not a regular file")
    }
}

/// Reads what the engine sent for `path` (which [`check_path`] accepted): one regular file,
/// or with `list` the listing of a directory. See the module documentation for what is
/// refused.
pub fn read_archive(path: &str, fetched: &Fetched, list: bool, limits: &FileLimits) -> Result<Found, FileError> {
    let name = check_path(path)?;
    match fetched {
        Fetched::Missing => Ok(Found::Missing),
        Fetched::OverCap { cap } => Err(FileError::TooLarge {
            path: path.to_owned(),
            detail: if list {
                format!("the directory's archive is larger than the {cap}-byte cap")
            } else {
                format!("the file is larger than the {}-byte cap", limits.max_file_bytes)
            },
        }),
        Fetched::Tar(tar) if list => read_listing(path, name, tar, limits).map(Found::Listing),
        Fetched::Tar(tar) => read_file(path, name, tar, limits.max_file_bytes).map(Found::File),
    }
}

fn bad_archive(path: &str) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |e| FileError::BadArchive { path: path.to_owned(), detail: format!("not a valid tar ({e})") }
}

fn unsafe_archive(path: &str, detail: String) -> FileError {
    FileError::UnsafeArchive { path: path.to_owned(), detail }
}

/// Why an archive is not exactly one regular file of the expected name within the cap
/// ([`single_regular_file`]). Each caller words it for its own error.
#[derive(Debug)]
pub enum SingleFileRefusal {
    /// The bytes are not a readable tar: `what` went wrong (`not a tar`, `not a valid tar`,
    /// `an invalid size field`, `unreadable content`), with the parser's complaint.
    Invalid {
        /// What went wrong.
        what: &'static str,
        /// The parser's complaint.
        detail: std::io::Error,
    },
    /// A second entry.
    MoreThanOne,
    /// An entry that is not a regular file: its name and type.
    NotRegular {
        /// The entry's name.
        name: String,
        /// Its type.
        kind: tar::EntryType,
    },
    /// A regular file of another name.
    OtherName(String),
    /// Over the cap: the size the header declares, or `None` when the content overran it.
    TooLarge(Option<u64>),
    /// No file at all.
    Empty,
}

impl SingleFileRefusal {
    /// What the entry is, for messages: `a symbolic link`, `a directory`, ….
    pub fn what(kind: tar::EntryType) -> &'static str {
        kind_of(kind).1
    }
}

/// The content of the one regular file named `name` in an untrusted `tar`. A second entry, a
/// link, a directory, a device, a FIFO, another name or a file over `max_bytes` is refused;
/// PAX global headers carry only metadata and are skipped. The SQLite snapshot and
/// `container_file` both read the engine's archives with it.
pub fn single_regular_file(tar: &[u8], name: &str, max_bytes: u64) -> Result<Vec<u8>, SingleFileRefusal> {
    let invalid = |what| move |detail| SingleFileRefusal::Invalid { what, detail };
    let mut archive = tar::Archive::new(tar);
    let mut found: Option<Vec<u8>> = None;
    for entry in archive.entries().map_err(invalid("not a tar"))? {
        let mut entry = entry.map_err(invalid("not a valid tar"))?;
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            continue;
        }
        if found.is_some() {
            return Err(SingleFileRefusal::MoreThanOne);
        }
        let entry_name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if !kind.is_file() {
            return Err(SingleFileRefusal::NotRegular { name: entry_name, kind });
        }
        if entry_name != name {
            return Err(SingleFileRefusal::OtherName(entry_name));
        }
        let size = entry.header().size().map_err(invalid("an invalid size field"))?;
        if size > max_bytes {
            return Err(SingleFileRefusal::TooLarge(Some(size)));
        }
        let mut content = Vec::new();
        (&mut entry)
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(invalid("unreadable content"))?;
        if len_u64(&content) > max_bytes {
            return Err(SingleFileRefusal::TooLarge(None));
        }
        found = Some(content);
    }
    found.ok_or(SingleFileRefusal::Empty)
}

fn read_file(path: &str, name: &str, tar: &[u8], max_bytes: u64) -> Result<Vec<u8>, FileError> {
    single_regular_file(tar, name, max_bytes).map_err(|refusal| match refusal {
        SingleFileRefusal::Invalid { detail, .. } => bad_archive(path)(detail),
        SingleFileRefusal::MoreThanOne => unsafe_archive(path, "the archive holds more than one entry".into()),
        SingleFileRefusal::NotRegular { kind, .. } => {
            let hint = if kind.is_dir() { " (set `list: true` to list a directory)" } else { "" };
            FileError::NotRegularFile { path: path.to_owned(), what: SingleFileRefusal::what(kind), hint }
        }
        SingleFileRefusal::OtherName(entry_name) => {
            unsafe_archive(path, format!("it holds `{entry_name}`, not `{name}`"))
        }
        SingleFileRefusal::TooLarge(size) => FileError::TooLarge {
            path: path.to_owned(),
            detail: match size {
                Some(size) => format!("the file is {size} bytes, larger than the {max_bytes}-byte cap"),
                None => format!("the file is larger than the {max_bytes}-byte cap"),
            },
        },
        SingleFileRefusal::Empty => unsafe_archive(path, "the archive holds no file".into()),
    })
}

fn read_listing(path: &str, name: &str, tar: &[u8], limits: &FileLimits) -> Result<Vec<DirEntry>, FileError> {
    let mut archive = tar::Archive::new(tar);
    let mut root_seen = false;
    let mut entries = Vec::new();
    for entry in archive.entries().map_err(bad_archive(path))? {
        let entry = entry.map_err(bad_archive(path))?;
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            continue;
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let trimmed = raw.strip_suffix(b"/").unwrap_or(&raw);
        if !root_seen {
            if trimmed != name.as_bytes() {
                return Err(unsafe_archive(path, format!("it starts with `{shown}`, not `{name}/`")));
            }
            if !kind.is_dir() {
                let (_, what) = kind_of(kind);
                return Err(FileError::NotADirectory { path: path.to_owned(), what });
            }
            root_seen = true;
            continue;
        }
        let Some(relative) = trimmed.strip_prefix(name.as_bytes()).and_then(|r| r.strip_prefix(b"/")) else {
            return Err(unsafe_archive(path, format!("the entry `{shown}` lies outside `{name}/`")));
        };
        if relative.split(|b| *b == b'/').any(|c| c.is_empty() || c == b"." || c == b"..") || relative.contains(&0) {
            return Err(unsafe_archive(path, format!("the entry `{shown}` has an empty, `.` or `..` component")));
        }
        if entries.len() >= limits.max_entries {
            return Err(FileError::TooManyEntries { path: path.to_owned(), max: limits.max_entries });
        }
        let (kind_name, _) = kind_of(kind);
        let size = if kind.is_file() { entry.header().size().map_err(bad_archive(path))? } else { 0 };
        entries.push(DirEntry { name: String::from_utf8_lossy(relative).into_owned(), kind: kind_name, size });
    }
    if !root_seen {
        return Err(unsafe_archive(path, "the archive holds no directory".into()));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// What the check's assertions and the action's captures need from the response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Something points at `/exists`: a missing file is `{exists: false}`, not an error.
    pub exists: bool,
    /// Something points under `/json`: the file must parse as JSON.
    pub json: bool,
}

impl Needs {
    /// From the RFC 6901 pointers of the assertions and captures.
    pub fn from_pointers<'a>(pointers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut needs = Self::default();
        for pointer in pointers {
            let first = pointer.strip_prefix('/').map(|rest| rest.split('/').next().unwrap_or(""));
            match first {
                Some("exists") => needs.exists = true,
                Some("json") => needs.json = true,
                _ => {}
            }
        }
        needs
    }
}

/// The check's document for what was found at `path` (see the module documentation).
pub fn response(path: &str, found: &Found, needs: Needs) -> Result<Value, FileError> {
    let mut out = Map::new();
    out.insert("path".into(), json!(path));
    match found {
        Found::Missing if needs.exists => {
            out.insert("exists".into(), json!(false));
        }
        Found::Missing => return Err(FileError::Missing { path: path.to_owned() }),
        Found::File(bytes) => {
            out.insert("exists".into(), json!(true));
            out.insert("type".into(), json!("file"));
            out.insert("size".into(), json!(len_u64(bytes)));
            out.insert("sha256".into(), json!(sha256_hex(bytes)));
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    out.insert("text".into(), json!(text));
                }
                Err(_) => {
                    out.insert("text".into(), Value::Null);
                    out.insert("content_hex".into(), json!(hex(bytes)));
                }
            }
            if needs.json {
                let parsed: Value = serde_json::from_slice(bytes)
                    .map_err(|e| FileError::NotJson { path: path.to_owned(), detail: e.to_string() })?;
                out.insert("json".into(), parsed);
            }
        }
        Found::Listing(entries) => {
            out.insert("exists".into(), json!(true));
            out.insert("type".into(), json!("directory"));
            out.insert("count".into(), json!(entries.len()));
            let listed: Vec<Value> =
                entries.iter().map(|e| json!({"name": e.name, "type": e.kind, "size": e.size})).collect();
            out.insert("entries".into(), Value::Array(listed));
        }
    }
    Ok(Value::Object(out))
}

/// Keeps a copy of a file read from the container as `<dir>/<name>` (`dir` created if
/// missing; the file must not exist yet, so a planted link is never followed) and returns
/// its path.
pub fn keep(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, FileError> {
    let io = |what: String| move |e: std::io::Error| FileError::Io { what, detail: e.to_string() };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let path = dir.join(name);
    let what = format!("write {}", path.display());
    let mut file = OpenOptions::new().write(true).create_new(true).open(&path).map_err(io(what.clone()))?;
    file.write_all(bytes).map_err(io(what))?;
    Ok(path)
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Lower-case hex SHA-256 of `bytes`.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn len_u64(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
