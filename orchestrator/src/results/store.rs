//! Crash-safe storage primitives for a results directory.
//!
//! A results directory holds `manifest.json`, `runs.jsonl` (append-only, one
//! JSON object per trial attempt), one evidence JSON per attempt and
//! `summary.txt`. Runs get killed (Ctrl-C, SIGKILL, power loss, a full disk),
//! so every write here follows one contract: **nothing that was already
//! recorded is lost or silently corrupted**.
//!
//! # Whole documents: [`write_atomic`] / [`write_json_atomic`]
//!
//! The new content goes to a uniquely named temporary file in the *same*
//! directory, which is fsynced, renamed over the target, and then the
//! directory itself is fsynced so the rename is durable. A crash at any point
//! leaves either the complete old document or the complete new one, never a
//! mix or a truncated file. If any step before the rename fails, the
//! temporary file is removed again (also on panic), and the target is left
//! as it was. The rename replaces a symlink at `path` rather than the file
//! it points to.
//!
//! # The run log: [`AppendLog`]
//!
//! Each row is one compact JSON object followed by `"\n"`, written with a
//! single `write_all` and then `sync_data`. Compact `serde_json` output never
//! contains a raw newline, so a newline marks the end of a row whose write
//! finished; since every append is synced before the next one starts, at most
//! the *last* row can be incomplete after a crash. Therefore:
//!
//! * every complete line (terminated by `"\n"`) must be a JSON object; any
//!   other complete line (including an empty one) means the log is corrupt,
//!   and it is refused and left byte-for-byte untouched
//!   ([`StoreErrorKind::CorruptLine`]);
//! * a non-empty final segment without `"\n"` is a torn tail from a crash
//!   mid-write. [`AppendLog::open_existing`] cuts it off (even if it happens
//!   to parse as JSON: its sync never completed) and reports what it cut in
//!   [`Recovery::truncated_tail`]; [`read_rows`], the read-only reader for
//!   other tools, ignores it and never modifies the file.
//!
//! If an append fails (for example on a full disk) the partial row is cut off
//! again so that later appends still start on a fresh line. Should even that
//! fail, the log refuses further appends; reopening it with
//! [`AppendLog::open_existing`] repairs the tail.
//!
//! The log assumes a single writer: hold a [`DirLock`] on the results
//! directory for as long as an [`AppendLog`] is open. It is opened without
//! following a symbolic link ([`AppendLog::open_existing`]), so a `runs.jsonl`
//! replaced by a link to a file elsewhere is refused, never appended to.
//!
//! # Exclusion: [`DirLock`]
//!
//! An exclusive, non-blocking advisory lock (`flock`) on the results
//! directory itself, held for the life of the value. A lock *file* could be
//! deleted from under its holder and a second runner would then lock a new
//! one; the directory cannot be replaced while it is open, so the lock holds
//! as long as the holder lives. The operating system drops the lock when the
//! process dies, so a killed run never leaves a stale lock behind.
//!
//! # Reading without following links: [`open_beneath`] / [`read_beneath`]
//!
//! Every results file is read through these: each component below the
//! results directory is opened with `O_NOFOLLOW` relative to the one before,
//! so a symbolic link anywhere below the directory (a `runs.jsonl`, an
//! `evidence/` directory or an evidence file pointing elsewhere) is refused,
//! never followed; and only a regular file is read, and only up to its bound
//! (`elengtis_core::records::bounds`): a larger file is refused from its size on
//! disk before a byte of it is read.
//!
//! # Never writing through a link
//!
//! Documents are replaced by a rename, which never writes into the file a
//! link shares. The log is appended to in place, so [`AppendLog::open_existing`]
//! refuses a `runs.jsonl` that is a symbolic link or has another hard link
//! (`st_nlink > 1`: a `cp -al` or `rsync --link-dest` snapshot), which an
//! append would change in every copy at once.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use elengtis_core::records::{bounds, strict};
use serde::Serialize;

/// An error from a results-directory store operation.
///
/// Displays as `failed to <action> <path>: <detail>`, for example
/// `failed to write /x/manifest.json: No space left on device (os error 28)`.
/// The underlying error's text is part of the message, so `source()` is
/// `None` (chained reporters would otherwise print it twice); match on
/// [`StoreError::kind`] to inspect it.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}: {kind}", .path.display())]
pub struct StoreError {
    /// The file or directory the operation was about.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: StoreErrorKind,
    /// The verb phrase in the message ("write", "read", "create", ...).
    action: &'static str,
}

/// What went wrong in a [`StoreError`]. Its `Display` is the detail part of
/// the error message.
#[derive(Debug, thiserror::Error)]
pub enum StoreErrorKind {
    /// An operating-system I/O error.
    #[error("{0}")]
    Io(io::Error),
    /// Another process (or another handle in this one) holds the lock.
    #[error("another elengtis run is using it")]
    Locked,
    /// A complete line of a JSONL log is not a JSON object.
    #[error("line {line} is not a valid JSON row ({detail}); the log is corrupt and was left untouched")]
    CorruptLine {
        /// 1-based line number.
        line: usize,
        /// Why the line was rejected.
        detail: String,
    },
    /// [`AppendLog::create_new`] found a file already there.
    #[error("already exists")]
    Exists,
    /// A value could not be serialized (or is not a valid log row).
    #[error("{0}")]
    Serialize(serde_json::Error),
    /// A file larger than its bound, or a row longer than one may be.
    #[error("{0}")]
    TooLarge(String),
    /// A file to be written in place has another hard link (or is not a regular file).
    #[error("{0}")]
    Linked(String),
}

impl StoreError {
    fn new(action: &'static str, path: &Path, kind: StoreErrorKind) -> StoreError {
        StoreError { path: path.to_path_buf(), kind, action }
    }

    fn io(action: &'static str, path: &Path, err: io::Error) -> StoreError {
        StoreError::new(action, path, StoreErrorKind::Io(err))
    }

    fn serialize(path: &Path, err: serde_json::Error) -> StoreError {
        StoreError::new("serialize data for", path, StoreErrorKind::Serialize(err))
    }

    /// Whether this error means the disk (or the user's quota) is full:
    /// `ENOSPC` / [`io::ErrorKind::StorageFull`], or `EDQUOT` /
    /// [`io::ErrorKind::QuotaExceeded`].
    pub fn is_disk_full(&self) -> bool {
        match &self.kind {
            StoreErrorKind::Io(err) => matches!(err.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded),
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------
// Atomic whole-file writes
// ---------------------------------------------------------------------------

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many temp names to try before giving up on `AlreadyExists`.
const TEMP_ATTEMPTS: u32 = 16;

/// Longest prefix of the target's file name kept in a temp file's name, so
/// the temp name stays well under the usual 255-byte limit.
const TEMP_NAME_PREFIX_CHARS: usize = 64;

fn random_u64() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    // `RandomState` is seeded from the OS once per thread and perturbed on
    // every `new()`, which is random enough for a collision-avoiding suffix.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(nanos);
    hasher.finish()
}

fn temp_name(target_name: &str) -> String {
    let prefix: String = target_name.chars().take(TEMP_NAME_PREFIX_CHARS).collect();
    let counter = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(".{prefix}.{}.{counter}.{:016x}.tmp", std::process::id(), random_u64())
}

/// The directory `path` lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Make a directory entry change (create, rename) durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directories cannot be opened (and need no fsync) on other platforms.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Removes the temp file when dropped unless disarmed (covers `?` and panics).
struct TempGuard {
    path: Option<PathBuf>,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Write a whole document crash-safely: write to a temp file in the same
/// directory, fsync it, rename over the target, fsync the directory.
///
/// After a crash the target holds either its old content or `bytes`, never
/// anything in between. On failure before the rename the temp file is
/// removed and the target is unchanged.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let fail = |err: io::Error| StoreError::io("write", path, err);
    let dir = parent_dir(path);
    let (temp_path, mut file) = create_temp(path)?;
    let mut guard = TempGuard { path: Some(temp_path.clone()) };

    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    drop(file);
    fs::rename(&temp_path, path).map_err(fail)?;
    // The temp name no longer exists; nothing to clean up from here on.
    guard.path = None;
    sync_dir(dir).map_err(fail)?;
    Ok(())
}

/// [`write_atomic`] of `value` as pretty-printed JSON with a trailing newline.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_json_atomic_hashed(path, value).map(drop)
}

/// [`write_json_atomic`], returning the SHA-256 (hex) of the bytes written (a row's
/// `evidence_sha256`).
pub fn write_json_atomic_hashed<T: Serialize>(path: &Path, value: &T) -> Result<String, StoreError> {
    let document = json_document(path.to_owned(), value)?;
    write_atomic(path, &document.bytes)?;
    Ok(elengtis_core::format::sha256_hex(&document.bytes))
}

/// Most fsyncs of one [`write_documents`] batch in flight at once: the file system groups
/// concurrent syncs into one journal commit, so a batch of documents costs about one sync's
/// latency instead of one per document.
const PARALLEL_SYNCS: usize = 16;

/// One document of a [`write_documents`] batch.
#[derive(Debug)]
pub struct Document {
    /// Where it goes.
    pub path: PathBuf,
    /// Its complete bytes.
    pub bytes: Vec<u8>,
}

/// What [`write_documents`] made durable.
#[derive(Debug)]
pub struct Written {
    /// The first `durable` documents of the batch are in place and durable; none after them
    /// was renamed into place (their temporary files are removed).
    pub durable: usize,
    /// Why the document at index `durable` could not be written (a full disk, say).
    pub error: Option<StoreError>,
}

/// [`write_atomic`] for a batch of documents, with the syncs shared (group commit): every
/// document is written to its own temporary file, the temporary files are fsynced together
/// (up to [`PARALLEL_SYNCS`] at once), renamed into place in order, and each directory they
/// are in is fsynced once. The guarantee per document is [`write_atomic`]'s: its target holds
/// the old content or the new, never a torn file. When a document fails, the ones before it
/// are still made durable and reported in [`Written::durable`]; it and the ones after it are
/// not renamed into place.
pub fn write_documents(documents: &[Document]) -> Written {
    struct Temp<'a> {
        doc: &'a Document,
        path: PathBuf,
        file: File,
    }
    let mut temps: Vec<Temp<'_>> = Vec::with_capacity(documents.len());
    let mut error = None;
    for doc in documents {
        let created = create_temp(&doc.path).and_then(|(path, mut file)| match file.write_all(&doc.bytes) {
            Ok(()) => Ok(Temp { doc, path, file }),
            Err(err) => {
                drop(file);
                let _ = fs::remove_file(&path);
                Err(StoreError::io("write", &doc.path, err))
            }
        });
        match created {
            Ok(temp) => temps.push(temp),
            Err(err) => {
                error = Some(err);
                break;
            }
        }
    }
    // Sync the temporary files together: thread t takes every `threads`-th file from t.
    let mut synced: Vec<Option<io::Error>> = (0..temps.len()).map(|_| None).collect();
    let threads = temps.len().clamp(1, PARALLEL_SYNCS);
    if temps.len() <= 1 {
        for (slot, temp) in synced.iter_mut().zip(&temps) {
            *slot = temp.file.sync_all().err();
        }
    } else {
        let joined = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let temps = &temps;
                    scope.spawn(move || {
                        temps
                            .iter()
                            .enumerate()
                            .skip(t)
                            .step_by(threads)
                            .filter_map(|(i, temp)| temp.file.sync_all().err().map(|err| (i, err)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(std::thread::ScopedJoinHandle::join).collect::<Vec<_>>()
        });
        for result in joined {
            match result {
                Ok(errors) => errors.into_iter().for_each(|(i, err)| synced[i] = Some(err)),
                // A sync thread that panicked: count nothing as synced.
                Err(_) => synced.iter_mut().filter(|s| s.is_none()).for_each(|s| {
                    *s = Some(io::Error::other("a sync thread panicked"));
                }),
            }
        }
    }
    // Rename in order, up to the first document that failed.
    // (`temps` holds only documents written whole: a write failure ended the list.)
    let mut durable = 0;
    for (temp, sync_error) in temps.iter().zip(synced) {
        let renamed = match sync_error {
            Some(err) => Err(err),
            None => fs::rename(&temp.path, &temp.doc.path),
        };
        match renamed {
            Ok(()) => durable += 1,
            Err(err) => {
                error = Some(StoreError::io("write", &temp.doc.path, err));
                break;
            }
        }
    }
    for temp in &temps[durable..] {
        let _ = fs::remove_file(&temp.path);
    }
    // One directory sync per directory makes the renames durable.
    let mut dirs: Vec<&Path> = temps[..durable].iter().map(|t| parent_dir(&t.doc.path)).collect();
    dirs.dedup();
    for dir in dirs {
        if let Err(err) = sync_dir(dir) {
            // The renames may not survive a power loss: report none of them as durable (the
            // files stay, named by no row: harmless, as after a crash).
            let path = temps.first().map_or(dir, |t| t.doc.path.as_path());
            return Written { durable: 0, error: Some(StoreError::io("write", path, err)) };
        }
    }
    Written { durable, error }
}

/// `value` as the document [`write_json_atomic`] writes (pretty-printed JSON and a newline),
/// for [`write_documents`].
pub fn json_document<T: Serialize>(path: PathBuf, value: &T) -> Result<Document, StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|err| StoreError::serialize(&path, err))?;
    bytes.push(b'\n');
    Ok(Document { path, bytes })
}

/// A new, uniquely named temporary file beside `path`.
fn create_temp(path: &Path) -> Result<(PathBuf, File), StoreError> {
    let fail = |err: io::Error| StoreError::io("write", path, err);
    let name = path
        .file_name()
        .ok_or_else(|| fail(io::Error::new(io::ErrorKind::InvalidInput, "the path does not name a file")))?;
    let dir = parent_dir(path);
    let name = name.to_string_lossy();
    let mut attempt = 0;
    loop {
        let candidate = dir.join(temp_name(&name));
        match OpenOptions::new().write(true).create_new(true).open(&candidate) {
            Ok(file) => return Ok((candidate, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists && attempt < TEMP_ATTEMPTS => {
                attempt += 1;
            }
            Err(err) => return Err(fail(err)),
        }
    }
}

/// Whether a file name is one of [`write_atomic`]'s temporary files (`.<name>.<pid>.<n>.<hex>.tmp`).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Remove the temporary files a killed writer left in `dir` (not below it). Only for a
/// directory whose writer is gone: the caller holds the results directory's lock. Returns how
/// many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()) && e.file_name().to_str().is_some_and(is_temp_name))
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

// ---------------------------------------------------------------------------
// Directory lock
// ---------------------------------------------------------------------------

/// Exclusive advisory lock (`flock`) on the results directory itself, held for
/// the life of the value.
///
/// The lock belongs to the open directory, so it conflicts with any other
/// lock of the same directory, including a second [`DirLock::acquire`] in this
/// process. Nothing inside the directory can be deleted to defeat it. It is
/// released when the value is dropped or the process exits.
#[derive(Debug)]
pub struct DirLock {
    // Held only to keep the lock; closing the directory releases it.
    _dir: File,
    path: PathBuf,
}

impl DirLock {
    /// Take the lock without blocking. If another holder has it, fails with
    /// [`StoreErrorKind::Locked`]: `failed to lock results directory <dir>:
    /// another elengtis run is using it`.
    pub fn acquire(dir: &Path) -> Result<DirLock, StoreError> {
        const ACTION: &str = "lock results directory";
        let handle = File::open(dir).map_err(|err| StoreError::io(ACTION, dir, err))?;
        let is_dir = handle.metadata().map_err(|err| StoreError::io(ACTION, dir, err))?.is_dir();
        if !is_dir {
            return Err(StoreError::io(ACTION, dir, io::Error::other("it is not a directory")));
        }
        match handle.try_lock() {
            Ok(()) => Ok(DirLock { _dir: handle, path: dir.to_path_buf() }),
            Err(fs::TryLockError::WouldBlock) => Err(StoreError::new(ACTION, dir, StoreErrorKind::Locked)),
            Err(fs::TryLockError::Error(err)) => Err(StoreError::io(ACTION, dir, err)),
        }
    }

    /// The locked directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

// ---------------------------------------------------------------------------
// Reading without following links
// ---------------------------------------------------------------------------

/// Why a results file could not be opened by [`open_beneath`].
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// It does not exist.
    #[error("it is missing")]
    Missing,
    /// It, or a directory on the way to it, is a symbolic link.
    #[error("it is a symbolic link (or is reached through one): results files are never read through links")]
    Link,
    /// It is not a regular file (a directory, a FIFO, a device…).
    #[error("it is not a regular file")]
    NotAFile,
    /// The path is not a relative path of plain names.
    #[error("the path is not a plain relative path")]
    NotRelative,
    /// It is larger than a file of its kind may be.
    #[error(
        "it is {size} bytes, larger than the {} a file of its kind may have: it is not one this tool wrote (refused without reading it)",
        elengtis_core::records::bounds::describe(*.bound)
    )]
    TooLarge {
        /// Its size on disk.
        size: u64,
        /// Its bound.
        bound: u64,
    },
    /// Any other failure.
    #[error("{0}")]
    Io(io::Error),
}

impl BeneathError {
    fn of(err: nix::errno::Errno) -> BeneathError {
        match err {
            nix::errno::Errno::ENOENT => BeneathError::Missing,
            nix::errno::Errno::ELOOP => BeneathError::Link,
            nix::errno::Errno::ENOTDIR => BeneathError::Link,
            other => BeneathError::Io(io::Error::from(other)),
        }
    }
}

/// Opens `relative` (plain names only) under `dir` for reading, following no symbolic link
/// below `dir`: each directory on the way is opened with `O_DIRECTORY | O_NOFOLLOW` relative
/// to the one before, and the file itself with `O_NOFOLLOW` (and `O_NONBLOCK`, so a FIFO
/// cannot block the open). Only a regular file is returned. `dir` itself is opened as given.
pub fn open_beneath(dir: &Path, relative: &Path) -> Result<File, BeneathError> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    use std::path::Component;
    let names: Vec<&std::ffi::OsStr> = relative
        .components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(BeneathError::NotRelative),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, parents)) = names.split_last() else { return Err(BeneathError::NotRelative) };
    let mut current: std::os::fd::OwnedFd = match File::open(dir) {
        Ok(file) => file.into(),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(BeneathError::Missing),
        Err(err) => return Err(BeneathError::Io(err)),
    };
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
    for name in parents {
        current = openat(&current, *name, flags | OFlag::O_DIRECTORY, Mode::empty()).map_err(BeneathError::of)?;
    }
    let fd = openat(&current, *last, flags | OFlag::O_NONBLOCK, Mode::empty()).map_err(BeneathError::of)?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(BeneathError::Io)?;
    if meta.file_type().is_symlink() {
        return Err(BeneathError::Link);
    }
    if !meta.is_file() {
        return Err(BeneathError::NotAFile);
    }
    Ok(file)
}

/// A results file as read by [`read_bounded`].
#[derive(Debug)]
pub struct ReadFile {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its hard links (`st_nlink`): more than 1 when it is shared with another directory.
    pub links: u64,
}

/// [`open_beneath`], then the whole file, when it is at most `bound` bytes: a larger file is
/// refused from its size before anything is read (and one that grows while it is read, once it
/// passes the bound).
pub fn read_bounded(dir: &Path, relative: &Path, bound: u64) -> Result<ReadFile, BeneathError> {
    use std::os::unix::fs::MetadataExt as _;
    let file = open_beneath(dir, relative)?;
    let meta = file.metadata().map_err(BeneathError::Io)?;
    let bytes = read_within(file, meta.len(), bound).map_err(|e| match e {
        TooLarge::Size(size) => BeneathError::TooLarge { size, bound },
        TooLarge::Io(e) => BeneathError::Io(e),
    })?;
    Ok(ReadFile { bytes, links: meta.nlink() })
}

/// Why [`read_within`] read nothing.
#[derive(Debug)]
pub enum TooLarge {
    /// The file has (at least) this many bytes, more than its bound.
    Size(u64),
    /// Reading failed.
    Io(io::Error),
}

/// All of `file` (of `size` bytes on disk), when it is at most `bound` bytes: a larger file
/// is refused from its size before a byte is read, and one that grows while it is read once
/// it passes the bound. The one bounded read every results file (and key file) goes through.
pub fn read_within(file: File, size: u64, bound: u64) -> Result<Vec<u8>, TooLarge> {
    if size > bound {
        return Err(TooLarge::Size(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(bound + 1).read_to_end(&mut bytes).map_err(TooLarge::Io)?;
    if bytes.len() as u64 > bound {
        return Err(TooLarge::Size(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A file's bytes (following links: for the runner's own bookkeeping of directories it
/// writes, not for verifying), when it is at most `bound` bytes; a larger one is an
/// `InvalidData` error, unread.
pub fn read_file_bounded(path: &Path, bound: u64) -> io::Result<Vec<u8>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    read_within(file, size, bound).map_err(|e| match e {
        TooLarge::Size(size) => io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is {size} bytes, larger than the {} a file of its kind may have (refused without reading it)",
                bounds::describe(bound)
            ),
        ),
        TooLarge::Io(e) => e,
    })
}

/// [`read_bounded`]'s bytes.
pub fn read_beneath(dir: &Path, relative: &Path, bound: u64) -> Result<Vec<u8>, BeneathError> {
    read_bounded(dir, relative, bound).map(|read| read.bytes)
}

/// Whether `relative` under `dir` is a real directory (not a link to one), as
/// `lstat` sees it.
pub fn is_real_dir(dir: &Path, relative: &str) -> bool {
    fs::symlink_metadata(dir.join(relative)).is_ok_and(|m| m.file_type().is_dir())
}

// ---------------------------------------------------------------------------
// Append-only JSONL log
// ---------------------------------------------------------------------------

/// What [`AppendLog::open_existing`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// Every complete row, in file order.
    pub rows: Vec<serde_json::Value>,
    /// The torn final line that was cut off, if any.
    pub truncated_tail: Option<TornTail>,
}

/// A torn final line (no terminating newline) that was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the torn line started; the file's new length.
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: usize,
}

/// The append-only JSONL log (`runs.jsonl`). See the module docs for the
/// crash-safety contract. Assumes it is the only writer of its file.
#[derive(Debug)]
pub struct AppendLog {
    file: File,
    path: PathBuf,
    /// Length of the file up to the end of the last fully synced row.
    committed_len: u64,
    /// Set when a failed append left bytes that could not be removed.
    poisoned: bool,
    /// SHA-256 (hex) of the last complete line (without its newline); of the empty string
    /// while the log has no row. The next row's `prev_row_sha256`.
    last_line_sha256: String,
}

/// SHA-256 (hex) of a log line's bytes (without its newline): what the next row's
/// `prev_row_sha256` holds. `line_sha256(b"")` starts the chain.
pub fn line_sha256(line: &[u8]) -> String {
    elengtis_core::format::sha256_hex(line)
}

/// Result of scanning a log's bytes.
struct Scan {
    rows: Vec<serde_json::Value>,
    /// Bytes up to and including the last `"\n"`.
    complete_len: usize,
    /// SHA-256 of the last complete line ([`line_sha256`] of `b""` when there is none).
    last_line_sha256: String,
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Parse every complete line; ignore the final segment without a newline.
fn scan(bytes: &[u8]) -> Result<Scan, StoreErrorKind> {
    let complete_len = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |pos| pos + 1);
    let mut rows = Vec::new();
    let mut last_line_sha256 = line_sha256(b"");
    if complete_len == 0 {
        return Ok(Scan { rows, complete_len, last_line_sha256 });
    }
    // Drop the final "\n" so splitting yields exactly the complete lines.
    let complete = &bytes[..complete_len - 1];
    for (index, line) in complete.split(|&b| b == b'\n').enumerate() {
        let corrupt = |detail: String| StoreErrorKind::CorruptLine { line: index + 1, detail };
        if line.is_empty() {
            return Err(corrupt("empty line".to_owned()));
        }
        if line.len() as u64 > bounds::ROW {
            return Err(corrupt(format!(
                "it is {} bytes, longer than the {} a row may have",
                line.len(),
                bounds::describe(bounds::ROW)
            )));
        }
        // The one strict reader: a key twice, or a number in another form, is refused.
        match strict::parse(line) {
            Ok(value @ serde_json::Value::Object(_)) => {
                rows.push(value);
                last_line_sha256 = line_sha256(line);
            }
            Ok(other) => {
                return Err(corrupt(format!("expected a JSON object, found {}", json_type(&other))));
            }
            Err(strict::StrictError::Syntax { detail, .. }) => return Err(corrupt(detail)),
            Err(err) => return Err(corrupt(err.to_string())),
        }
    }
    Ok(Scan { rows, complete_len, last_line_sha256 })
}

/// A log's bytes, when it is at most [`bounds::LOG`] of them.
fn read_all(file: &mut File, path: &Path) -> Result<Vec<u8>, StoreError> {
    let size = file.metadata().map_err(|err| StoreError::io("read", path, err))?.len();
    let handle = file.try_clone().map_err(|err| StoreError::io("read", path, err))?;
    read_within(handle, size, bounds::LOG).map_err(|e| match e {
        TooLarge::Size(size) => StoreError::new(
            "read",
            path,
            StoreErrorKind::TooLarge(format!(
                "it is {size} bytes, larger than the {} a log may have (refused without reading it)",
                bounds::describe(bounds::LOG)
            )),
        ),
        TooLarge::Io(err) => StoreError::io("read", path, err),
    })
}

impl AppendLog {
    /// Create a new, empty log. Fails with [`StoreErrorKind::Exists`] if the
    /// file is already there (it is left untouched). The new directory entry
    /// is fsynced.
    pub fn create_new(path: &Path) -> Result<AppendLog, StoreError> {
        let fail = |err: io::Error| StoreError::io("create", path, err);
        let file = OpenOptions::new().read(true).append(true).create_new(true).open(path).map_err(|err| {
            if err.kind() == io::ErrorKind::AlreadyExists {
                StoreError::new("create", path, StoreErrorKind::Exists)
            } else {
                fail(err)
            }
        })?;
        file.sync_all().map_err(fail)?;
        sync_dir(parent_dir(path)).map_err(fail)?;
        Ok(AppendLog {
            file,
            path: path.to_path_buf(),
            committed_len: 0,
            poisoned: false,
            last_line_sha256: line_sha256(b""),
        })
    }

    /// Open an existing log for appending, validating every complete row and
    /// cutting off a torn final line (reported in [`Recovery`]). A corrupt
    /// complete line fails with [`StoreErrorKind::CorruptLine`] and the file
    /// is not modified.
    pub fn open_existing(path: &Path) -> Result<(AppendLog, Recovery), StoreError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(path)
            .map_err(|err| {
                if err.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
                    StoreError::io(
                        "open",
                        path,
                        io::Error::other("it is a symbolic link: the log is never appended through a link"),
                    )
                } else {
                    StoreError::io("open", path, err)
                }
            })?;
        let meta = file.metadata().map_err(|err| StoreError::io("open", path, err))?;
        if !meta.is_file() {
            return Err(StoreError::io("open", path, io::Error::other("it is not a regular file")));
        }
        if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
            return Err(StoreError::new(
                "append to",
                path,
                StoreErrorKind::Linked(linked_message(std::os::unix::fs::MetadataExt::nlink(&meta))),
            ));
        }
        let bytes = read_all(&mut file, path)?;
        let scan = scan(&bytes).map_err(|kind| StoreError::new("read", path, kind))?;
        let committed_len = scan.complete_len as u64;
        let torn = bytes.len() - scan.complete_len;
        let truncated_tail = if torn > 0 {
            let fail = |err| StoreError::io("cut the torn final row of", path, err);
            file.set_len(committed_len).map_err(fail)?;
            file.sync_all().map_err(fail)?;
            Some(TornTail { offset: committed_len, bytes: torn })
        } else {
            None
        };
        let log = AppendLog {
            file,
            path: path.to_path_buf(),
            committed_len,
            poisoned: false,
            last_line_sha256: scan.last_line_sha256,
        };
        Ok((log, Recovery { rows: scan.rows, truncated_tail }))
    }

    /// Append one row as a compact JSON line and sync it to disk. The row
    /// must serialize to a JSON object. When this returns `Ok`, the row is
    /// durable; when it returns `Err`, the row is not in the log.
    pub fn append<T: Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        let line = serde_json::to_vec(row).map_err(|err| StoreError::serialize(&self.path, err))?;
        self.append_line(line)
    }

    /// Append one line as it is (a JSON object, without its newline) and sync it to disk:
    /// `elengtis merge` copies each shard's rows byte for byte, so their chain and seal still
    /// hold. The same contract as [`AppendLog::append`].
    pub fn append_line(&mut self, line: Vec<u8>) -> Result<(), StoreError> {
        let line = self.terminated(line)?;

        if self.poisoned {
            return Err(StoreError::io(
                "append to",
                &self.path,
                io::Error::other(
                    "an earlier append failed and its partial row could not be removed; \
                     reopen the log to repair it",
                ),
            ));
        }
        crate::crashpoint::reach_torn(crate::crashpoint::CrashPoint::RowAppend, &mut self.file, &line);
        let written = self.file.write_all(&line).and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.committed_len += line.len() as u64;
                self.last_line_sha256 = line_sha256(&line[..line.len() - 1]);
                Ok(())
            }
            Err(err) => {
                // Cut whatever part of the row made it, so the next append
                // starts on a fresh line and the error means "not recorded".
                let rolled_back = self.file.set_len(self.committed_len).and_then(|()| self.file.sync_data());
                if rolled_back.is_err() {
                    self.poisoned = true;
                }
                Err(StoreError::io("append to", &self.path, err))
            }
        }
    }

    /// Append `rows` in order as compact JSON lines, each chained to the line before it
    /// (`chain(row, sha256 of the line before)` sets the link before the row is serialized),
    /// with one sync for the whole batch (group commit). Returns how many rows, from the
    /// first, are in the log and durable, and the error that stopped the rest: a row that
    /// cannot be serialized, or a write that fails (its partial bytes are cut, as in
    /// [`AppendLog::append`]). When the sync itself fails, none of the batch is kept.
    pub fn append_batch<T: Serialize>(
        &mut self,
        rows: &mut [T],
        mut chain: impl FnMut(&mut T, &str),
    ) -> (usize, Option<StoreError>) {
        if self.poisoned {
            return (0, Some(self.poisoned_error()));
        }
        let start_len = self.committed_len;
        let mut len = start_len;
        let mut prev = self.last_line_sha256.clone();
        let mut appended = 0;
        let mut error = None;
        for row in rows.iter_mut() {
            chain(row, &prev);
            let line = match self.line(row) {
                Ok(line) => line,
                Err(err) => {
                    error = Some(err);
                    break;
                }
            };
            // The row's evidence is durable; the row is not yet written.
            crate::crashpoint::reach(crate::crashpoint::CrashPoint::EvidenceWrite);
            crate::crashpoint::reach_torn(crate::crashpoint::CrashPoint::RowAppend, &mut self.file, &line);
            if let Err(err) = self.file.write_all(&line) {
                // Cut whatever part of the row made it: the rows before it stay.
                if self.file.set_len(len).is_err() {
                    self.poisoned = true;
                }
                error = Some(StoreError::io("append to", &self.path, err));
                break;
            }
            len += line.len() as u64;
            prev = line_sha256(&line[..line.len() - 1]);
            appended += 1;
        }
        if appended > 0
            && let Err(err) = self.file.sync_data()
        {
            let rolled_back = self.file.set_len(start_len).and_then(|()| self.file.sync_data());
            if rolled_back.is_err() {
                self.poisoned = true;
            }
            // The first failure is the one to report (a full disk rather than the sync after it).
            return (0, Some(error.unwrap_or_else(|| StoreError::io("append to", &self.path, err))));
        }
        self.committed_len = len;
        self.last_line_sha256 = prev;
        (appended, error)
    }

    /// A row as one log line: compact JSON, an object, no raw newline, then `"\n"`.
    fn line<T: Serialize>(&self, row: &T) -> Result<Vec<u8>, StoreError> {
        let line = serde_json::to_vec(row).map_err(|err| StoreError::serialize(&self.path, err))?;
        self.terminated(line)
    }

    /// `line` checked as one log line (an object, no raw newline), with its `"\n"`.
    fn terminated(&self, mut line: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let invalid = |message: &str| {
            StoreError::serialize(&self.path, <serde_json::Error as serde::ser::Error>::custom(message))
        };
        if line.first() != Some(&b'{') {
            return Err(invalid("a log row must be a JSON object"));
        }
        if line.contains(&b'\n') {
            return Err(invalid("a log row must not contain a raw newline"));
        }
        line.push(b'\n');
        Ok(line)
    }

    fn poisoned_error(&self) -> StoreError {
        StoreError::io(
            "append to",
            &self.path,
            io::Error::other(
                "an earlier append failed and its partial row could not be removed; \
                 reopen the log to repair it",
            ),
        )
    }

    /// Path of the log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SHA-256 (hex) of the last row appended or found (the next row's `prev_row_sha256`).
    pub fn last_line_sha256(&self) -> &str {
        &self.last_line_sha256
    }
}

/// Why a file with `links` hard links is not written in place, and what to do.
pub fn linked_message(links: u64) -> String {
    format!(
        "it has {links} hard links (a `cp -al` or `rsync --link-dest` snapshot shares it with another directory): appending to it would change every copy at once, so it is never written through a link; copy the directory (`cp -a`, not `cp -al`) and resume the copy"
    )
}

/// Read every complete row of a log without modifying it (for tools such as
/// `analyze` that may run next to a live writer). A torn final line is
/// ignored; a corrupt complete line is an error
/// ([`StoreErrorKind::CorruptLine`]).
pub fn read_rows(path: &Path) -> Result<Vec<serde_json::Value>, StoreError> {
    let mut file = File::open(path).map_err(|err| StoreError::io("open", path, err))?;
    let bytes = read_all(&mut file, path)?;
    let scan = scan(&bytes).map_err(|kind| StoreError::new("read", path, kind))?;
    Ok(scan.rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn dir_entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    fn log_with(dir: &Path, content: &[u8]) -> PathBuf {
        let path = dir.join("runs.jsonl");
        fs::write(&path, content).unwrap();
        path
    }

    // --- error formatting -------------------------------------------------

    #[test]
    fn error_display_and_disk_full() {
        let err = StoreError::io("write", Path::new("/x/manifest.json"), io::Error::from_raw_os_error(28));
        assert_eq!(err.to_string(), "failed to write /x/manifest.json: No space left on device (os error 28)");
        assert!(err.is_disk_full());
        assert!(std::error::Error::source(&err).is_none());

        let quota = StoreError::io("write", Path::new("/x"), io::Error::from_raw_os_error(122));
        assert!(quota.is_disk_full());

        let other = StoreError::io("write", Path::new("/x"), io::Error::from_raw_os_error(13));
        assert!(!other.is_disk_full());
        let locked = StoreError::new("lock results directory", Path::new("/r"), StoreErrorKind::Locked);
        assert!(!locked.is_disk_full());
        assert_eq!(locked.to_string(), "failed to lock results directory /r: another elengtis run is using it");
    }

    // --- write_atomic -----------------------------------------------------

    #[test]
    fn write_atomic_creates_then_replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.txt");
        write_atomic(&path, b"first version, fairly long\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first version, fairly long\n");
        write_atomic(&path, b"second\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second\n");
        write_atomic(&path, b"").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"");
        assert_eq!(dir_entries(dir.path()), vec!["summary.txt"]);
    }

    #[test]
    fn write_json_atomic_is_pretty_with_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        let value = json!({"b": 1, "a": [true, null]});
        write_json_atomic(&path, &value).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n", serde_json::to_string_pretty(&value).unwrap()));
        assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
        // preserve_order keeps key order.
        assert!(text.find("\"b\"").unwrap() < text.find("\"a\"").unwrap());
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        assert_eq!(dir_entries(dir.path()), vec!["manifest.json"]);
    }

    #[test]
    fn write_json_atomic_serialize_error_leaves_nothing() {
        use std::collections::BTreeMap;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        // Non-string map keys cannot be JSON object keys.
        let mut bad = BTreeMap::new();
        bad.insert(vec![1u8], 1);
        let err = write_json_atomic(&path, &bad).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Serialize(_)));
        assert!(err.to_string().starts_with("failed to serialize data for "));
        assert!(dir_entries(dir.path()).is_empty());
    }

    #[test]
    fn write_atomic_into_missing_directory_errors_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("manifest.json");
        let err = write_atomic(&path, b"{}").unwrap_err();
        assert_eq!(err.path, path);
        match &err.kind {
            StoreErrorKind::Io(io_err) => assert_eq!(io_err.kind(), io::ErrorKind::NotFound),
            other => panic!("unexpected kind {other:?}"),
        }
        let message = err.to_string();
        assert!(message.starts_with(&format!("failed to write {}: ", path.display())), "{message}");
        assert!(!message.ends_with('.'), "{message}");
        assert!(dir_entries(dir.path()).is_empty());
        assert!(!err.is_disk_full());
    }

    #[test]
    fn write_atomic_onto_a_directory_fails_and_removes_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("evidence");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"keep").unwrap();
        let err = write_atomic(&target, b"data").unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Io(_)), "{err:?}");
        assert_eq!(dir_entries(dir.path()), vec!["evidence"]);
        assert_eq!(fs::read(target.join("inside")).unwrap(), b"keep");
    }

    #[test]
    fn write_atomic_rejects_path_without_file_name() {
        let err = write_atomic(Path::new("/"), b"x").unwrap_err();
        match &err.kind {
            StoreErrorKind::Io(io_err) => assert_eq!(io_err.kind(), io::ErrorKind::InvalidInput),
            other => panic!("unexpected kind {other:?}"),
        }
    }

    #[test]
    fn concurrent_atomic_writes_use_unique_temp_names() {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let path = dir.path().join("manifest.json");
        let handles: Vec<_> = (0..8)
            .map(|thread| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for round in 0..20 {
                        let body = format!("{thread}:{round}:{}\n", "x".repeat(4096));
                        write_atomic(&path, body.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(&format!("{}\n", "x".repeat(4096))));
        assert_eq!(dir_entries(dir.path()), vec!["manifest.json"]);
    }

    #[test]
    fn temp_names_are_unique_hidden_and_bounded() {
        let long = "n".repeat(250);
        let a = temp_name(&long);
        let b = temp_name(&long);
        assert_ne!(a, b);
        assert!(a.starts_with('.') && a.ends_with(".tmp"));
        assert!(a.len() < 255, "{}", a.len());
        assert!(a.contains(&std::process::id().to_string()));
    }

    #[test]
    fn bare_file_name_uses_current_directory() {
        assert_eq!(parent_dir(Path::new("manifest.json")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/a/b.json")), Path::new("/a"));
    }

    // --- DirLock ----------------------------------------------------------

    #[test]
    fn lock_is_exclusive_within_process_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path()).unwrap();
        assert_eq!(lock.path(), dir.path());

        let err = DirLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Locked), "{err:?}");
        assert_eq!(err.path, dir.path());
        assert_eq!(
            err.to_string(),
            format!("failed to lock results directory {}: another elengtis run is using it", dir.path().display())
        );

        // A plain second open of the directory conflicts too (locks belong to
        // the open file description, not the process).
        let other = File::open(dir.path()).unwrap();
        assert!(matches!(other.try_lock(), Err(fs::TryLockError::WouldBlock)));
        drop(other);

        drop(lock);
        let again = DirLock::acquire(dir.path()).unwrap();
        drop(again);
    }

    #[test]
    fn deleting_files_inside_does_not_release_the_lock() {
        // A lock *file* could be unlinked from under its holder and a second runner would lock
        // a new one; the directory itself cannot be.
        let dir = tempfile::tempdir().unwrap();
        let _lock = DirLock::acquire(dir.path()).unwrap();
        for entry in fs::read_dir(dir.path()).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let err = DirLock::acquire(dir.path()).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Locked), "{err:?}");
        assert!(dir_entries(dir.path()).is_empty(), "the lock creates nothing inside the directory");
    }

    // --- reading without following links ---------------------------------

    #[test]
    fn links_below_the_directory_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("runs.jsonl"), b"{}\n").unwrap();
        fs::create_dir(outside.path().join("evidence")).unwrap();
        fs::write(outside.path().join("evidence/a.json"), b"{}").unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("evidence")).unwrap();
        fs::write(dir.path().join("evidence/real.json"), b"{\"a\":1}").unwrap();
        assert_eq!(read_beneath(dir.path(), Path::new("evidence/real.json"), 1 << 20).unwrap(), b"{\"a\":1}");
        std::os::unix::fs::symlink(outside.path().join("runs.jsonl"), dir.path().join("runs.jsonl")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("evidence/a.json"), dir.path().join("evidence/b.json")).unwrap();
        for link in ["runs.jsonl", "evidence/b.json"] {
            assert!(matches!(read_beneath(dir.path(), Path::new(link), 1 << 20), Err(BeneathError::Link)), "{link}");
        }
        // A directory on the way that is a link.
        fs::remove_dir_all(dir.path().join("evidence")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("evidence"), dir.path().join("evidence")).unwrap();
        assert!(matches!(read_beneath(dir.path(), Path::new("evidence/a.json"), 1 << 20), Err(BeneathError::Link)));
        assert!(!is_real_dir(dir.path(), "evidence"));
        assert!(matches!(read_beneath(dir.path(), Path::new("missing.json"), 1 << 20), Err(BeneathError::Missing)));
        assert!(matches!(read_beneath(dir.path(), Path::new("../x"), 1 << 20), Err(BeneathError::NotRelative)));
        // The append log refuses a link too, and leaves the outside file as it was.
        let err = AppendLog::open_existing(&dir.path().join("runs.jsonl")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read(outside.path().join("runs.jsonl")).unwrap(), b"{}\n");
    }

    #[test]
    fn a_file_larger_than_its_bound_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("small.json"), b"{}").unwrap();
        let read = read_bounded(dir.path(), Path::new("small.json"), 2).unwrap();
        assert_eq!((read.bytes.as_slice(), read.links), (&b"{}"[..], 1));
        // A sparse file of 3 GiB: refused from its size, at once.
        let big = dir.path().join("big.json");
        File::create(&big).unwrap().set_len(3 << 30).unwrap();
        let started = std::time::Instant::now();
        let err = read_beneath(dir.path(), Path::new("big.json"), 1 << 20).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(
            matches!(err, BeneathError::TooLarge { size, bound } if size == 3 << 30 && bound == 1 << 20),
            "{err:?}"
        );
        assert!(err.to_string().contains("larger than the 1 MiB"), "{err}");
        // The log too, before any row is read.
        fs::rename(&big, dir.path().join("runs.jsonl")).unwrap();
        let err = AppendLog::open_existing(&dir.path().join("runs.jsonl")).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::TooLarge(_)), "{err:?}");
        assert!(read_rows(&dir.path().join("runs.jsonl")).is_err());
    }

    #[test]
    fn a_log_with_another_hard_link_is_never_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"a\":1}\n{\"a\":");
        let snapshot = dir.path().join("snapshot.jsonl");
        fs::hard_link(&path, &snapshot).unwrap();
        let err = AppendLog::open_existing(&path).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Linked(_)), "{err:?}");
        assert!(err.to_string().contains("2 hard links") && err.to_string().contains("cp -a"), "{err}");
        // Not even the torn tail was cut: both names still read the same bytes.
        assert_eq!(fs::read(&snapshot).unwrap(), b"{\"a\":1}\n{\"a\":");
        fs::remove_file(&snapshot).unwrap();
        assert!(AppendLog::open_existing(&path).is_ok());
    }

    #[test]
    fn rows_are_read_by_the_strict_reader() {
        assert_refused(b"{\"a\":1}\n{\"a\":2,\"a\":3}\n", 2, "key `a` appears twice");
        assert_refused(b"{\"a\":1.50}\n", 1, "not in the form elengtis writes");
    }

    #[test]
    fn lock_in_missing_directory_is_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = DirLock::acquire(&missing).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Io(_)), "{err:?}");
        assert!(err.to_string().starts_with(&format!("failed to lock results directory {}: ", missing.display())));
    }

    // --- AppendLog: create / append / reopen -------------------------------

    #[test]
    fn append_and_reopen_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let rows = vec![
            json!({"trial": 1, "outcome": "pass", "note": "line\nbreak \u{2028} ok"}),
            json!({"trial": 2, "outcome": "fail", "nested": {"z": 1, "a": [1, 2]}}),
            json!({}),
        ];
        {
            let mut log = AppendLog::create_new(&path).unwrap();
            assert_eq!(log.path(), path);
            for row in &rows {
                log.append(row).unwrap();
            }
        }
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches('\n').count(), 3);
        assert!(text.lines().all(|line| !line.contains(": ")), "compact");

        let (mut log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert_eq!(recovery.rows, rows);
        assert_eq!(recovery.truncated_tail, None);

        #[derive(Serialize)]
        struct Row<'a> {
            trial: u32,
            outcome: &'a str,
        }
        log.append(&Row { trial: 3, outcome: "error" }).unwrap();
        drop(log);

        let all = read_rows(&path).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[..3], rows[..]);
        assert_eq!(all[3], json!({"trial": 3, "outcome": "error"}));
        // Key order is preserved.
        assert_eq!(fs::read_to_string(&path).unwrap().lines().last().unwrap(), r#"{"trial":3,"outcome":"error"}"#);
    }

    #[test]
    fn open_existing_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"");
        let (mut log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert!(recovery.rows.is_empty());
        assert_eq!(recovery.truncated_tail, None);
        log.append(&json!({"a": 1})).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn open_existing_missing_file_is_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let err = AppendLog::open_existing(&path).unwrap_err();
        match &err.kind {
            StoreErrorKind::Io(io_err) => assert_eq!(io_err.kind(), io::ErrorKind::NotFound),
            other => panic!("unexpected kind {other:?}"),
        }
        assert!(err.to_string().starts_with("failed to open "));
        assert!(!path.exists());
    }

    #[test]
    fn create_new_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"keep\":true}\n");
        let err = AppendLog::create_new(&path).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Exists), "{err:?}");
        assert_eq!(err.to_string(), format!("failed to create {}: already exists", path.display()));
        assert_eq!(fs::read(&path).unwrap(), b"{\"keep\":true}\n");
    }

    #[test]
    fn create_new_in_missing_directory_is_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("runs.jsonl");
        let err = AppendLog::create_new(&path).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Io(_)), "{err:?}");
        assert!(err.to_string().starts_with("failed to create "));
    }

    #[test]
    fn append_rejects_non_object_rows_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        log.append(&json!({"ok": 1})).unwrap();
        for bad in [json!(1), json!("s"), json!([1]), json!(null)] {
            let err = log.append(&bad).unwrap_err();
            assert!(matches!(err.kind, StoreErrorKind::Serialize(_)), "{err:?}");
            assert!(err.to_string().contains("must be a JSON object"), "{err}");
        }
        log.append(&json!({"ok": 2})).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"ok\":1}\n{\"ok\":2}\n");
    }

    #[test]
    fn append_serialize_failure_writes_nothing() {
        use std::collections::BTreeMap;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        let mut bad = BTreeMap::new();
        bad.insert(vec![1u8], 1);
        let err = log.append(&bad).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Serialize(_)), "{err:?}");
        assert_eq!(fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn failed_append_that_cannot_be_undone_poisons_the_log() {
        // A read-only handle: the write fails and so does the rollback.
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"a\":1}\n");
        let mut log = AppendLog {
            file: File::open(&path).unwrap(),
            path: path.clone(),
            committed_len: 8,
            poisoned: false,
            last_line_sha256: String::new(),
        };
        let err = log.append(&json!({"b": 2})).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Io(_)), "{err:?}");
        assert!(err.to_string().starts_with("failed to append to "));
        assert!(log.poisoned);
        let err = log.append(&json!({"c": 3})).unwrap_err();
        assert!(err.to_string().contains("reopen the log"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn append_on_full_disk_reports_disk_full() {
        let dev_full = Path::new("/dev/full");
        if !dev_full.exists() {
            return;
        }
        let mut log = AppendLog {
            file: OpenOptions::new().append(true).open(dev_full).unwrap(),
            path: dev_full.to_path_buf(),
            committed_len: 0,
            poisoned: false,
            last_line_sha256: String::new(),
        };
        let err = log.append(&json!({"a": 1})).unwrap_err();
        assert!(err.is_disk_full(), "{err:?}");
        assert_eq!(err.to_string(), "failed to append to /dev/full: No space left on device (os error 28)");
    }

    // --- group commit ----------------------------------------------------

    #[test]
    fn write_documents_makes_every_document_whole_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<Document> = (0..40)
            .map(|i| Document {
                path: dir.path().join(format!("d{i}.json")),
                bytes: format!("{{\"i\":{i}}}\n").into_bytes(),
            })
            .collect();
        let written = write_documents(&docs);
        assert_eq!(written.durable, 40);
        assert!(written.error.is_none());
        for (i, doc) in docs.iter().enumerate() {
            assert_eq!(fs::read(&doc.path).unwrap(), format!("{{\"i\":{i}}}\n").into_bytes());
        }
        assert_eq!(dir_entries(dir.path()).len(), 40, "{:?}", dir_entries(dir.path()));
        assert!(write_documents(&[]).durable == 0);
    }

    #[test]
    fn write_documents_keeps_the_documents_before_a_failure_and_none_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut docs: Vec<Document> =
            (0..3).map(|i| Document { path: dir.path().join(format!("d{i}")), bytes: vec![b'x'; 10] }).collect();
        // The second document's directory does not exist: it and the third are not written.
        docs[1].path = dir.path().join("missing").join("d1");
        let written = write_documents(&docs);
        assert_eq!(written.durable, 1);
        let err = written.error.unwrap();
        assert!(err.to_string().starts_with(&format!("failed to write {}", docs[1].path.display())), "{err}");
        assert_eq!(dir_entries(dir.path()), vec!["d0".to_owned()], "no temporary file and no later document");
    }

    #[test]
    fn append_batch_chains_rows_with_one_sync_and_reopens_to_the_same_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        log.append(&json!({"a": 0})).unwrap();
        let mut rows = vec![json!({"a": 1}), json!({"a": 2}), json!({"a": 3})];
        let (appended, error) = log.append_batch(&mut rows, |row, prev| row["prev"] = json!(prev));
        assert_eq!((appended, error.is_none()), (3, true));
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        for pair in lines.windows(2) {
            let row: serde_json::Value = serde_json::from_str(pair[1]).unwrap();
            assert_eq!(row["prev"], json!(line_sha256(pair[0].as_bytes())), "each row links the line before it");
        }
        assert_eq!(log.last_line_sha256(), line_sha256(lines[3].as_bytes()));
        drop(log);
        let (log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert_eq!(recovery.rows.len(), 4);
        assert_eq!(log.last_line_sha256(), line_sha256(lines[3].as_bytes()));
    }

    #[test]
    fn append_batch_stops_at_a_row_that_cannot_be_written_and_keeps_the_ones_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        let mut rows = vec![json!({"a": 1}), json!([2]), json!({"a": 3})];
        let (appended, error) = log.append_batch(&mut rows, |_, _| {});
        assert_eq!(appended, 1);
        assert!(error.unwrap().to_string().contains("must be a JSON object"));
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n");
        assert_eq!(log.last_line_sha256(), line_sha256(b"{\"a\":1}"));
        // On a full disk nothing of the failing row stays, and the error says so.
        let dev_full = Path::new("/dev/full");
        if dev_full.exists() {
            let mut full = AppendLog {
                file: OpenOptions::new().append(true).open(dev_full).unwrap(),
                path: dev_full.to_path_buf(),
                committed_len: 0,
                poisoned: false,
                last_line_sha256: String::new(),
            };
            let (appended, error) = full.append_batch(&mut [json!({"a": 1})], |_, _| {});
            assert_eq!(appended, 0);
            assert!(error.unwrap().is_disk_full());
        }
    }

    #[test]
    fn stale_temp_files_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".a.json.1.2.0123456789abcdef.tmp"), b"{").unwrap();
        fs::write(dir.path().join("a.json"), b"{}").unwrap();
        fs::write(dir.path().join("b.tmp"), b"").unwrap();
        assert_eq!(remove_stale_temps(dir.path()), 1);
        assert_eq!(dir_entries(dir.path()), vec!["a.json".to_owned(), "b.tmp".to_owned()]);
    }

    // --- AppendLog: the hash chain ----------------------------------------

    #[test]
    fn last_line_hash_follows_appends_reopens_and_torn_tails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        assert_eq!(log.last_line_sha256(), line_sha256(b""));
        log.append(&json!({"a": 1})).unwrap();
        assert_eq!(log.last_line_sha256(), line_sha256(b"{\"a\":1}"));
        log.append(&json!({"a": 2})).unwrap();
        let after_two = log.last_line_sha256().to_owned();
        assert_eq!(after_two, line_sha256(b"{\"a\":2}"));
        drop(log);
        // A torn tail is cut: the chain continues from the last complete line.
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"a\":3,\"tor");
        fs::write(&path, &bytes).unwrap();
        let (mut log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert!(recovery.truncated_tail.is_some());
        assert_eq!(log.last_line_sha256(), after_two);
        // A failed append leaves it unchanged.
        let mut bad = std::collections::BTreeMap::new();
        bad.insert(vec![1u8], 1);
        assert!(log.append(&bad).is_err());
        assert_eq!(log.last_line_sha256(), after_two);
    }

    // --- AppendLog: torn tails ------------------------------------------

    fn assert_torn_tail_recovered(tail: &[u8]) {
        let dir = tempfile::tempdir().unwrap();
        let good = b"{\"trial\":1}\n{\"trial\":2}\n";
        let mut content = good.to_vec();
        content.extend_from_slice(tail);
        let path = log_with(dir.path(), &content);

        let (mut log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert_eq!(recovery.rows, vec![json!({"trial": 1}), json!({"trial": 2})]);
        assert_eq!(recovery.truncated_tail, Some(TornTail { offset: good.len() as u64, bytes: tail.len() }));
        assert_eq!(fs::read(&path).unwrap(), good);

        log.append(&json!({"trial": 3})).unwrap();
        drop(log);
        let mut expected = good.to_vec();
        expected.extend_from_slice(b"{\"trial\":3}\n");
        assert_eq!(fs::read(&path).unwrap(), expected);

        let (_log, again) = AppendLog::open_existing(&path).unwrap();
        assert_eq!(again.rows.len(), 3);
        assert_eq!(again.truncated_tail, None);
    }

    #[test]
    fn torn_tail_partial_json_is_truncated_and_reported() {
        assert_torn_tail_recovered(b"{\"trial\":3,\"outco");
    }

    #[test]
    fn torn_tail_complete_json_without_newline_is_still_truncated() {
        assert_torn_tail_recovered(b"{\"trial\":3}");
    }

    #[test]
    fn torn_tail_of_zero_bytes_is_truncated() {
        // What a power loss can leave: the size grew but the data never landed.
        assert_torn_tail_recovered(&[0u8; 37]);
    }

    #[test]
    fn torn_tail_without_any_complete_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"tri");
        let (mut log, recovery) = AppendLog::open_existing(&path).unwrap();
        assert!(recovery.rows.is_empty());
        assert_eq!(recovery.truncated_tail, Some(TornTail { offset: 0, bytes: 5 }));
        assert_eq!(fs::read(&path).unwrap(), b"");
        log.append(&json!({"trial": 1})).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"trial\":1}\n");
    }

    // --- corrupt logs ----------------------------------------------------

    fn assert_refused(content: &[u8], line: usize, detail_contains: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), content);
        let err = AppendLog::open_existing(&path).unwrap_err();
        match &err.kind {
            StoreErrorKind::CorruptLine { line: got, detail } => {
                assert_eq!(*got, line, "{err}");
                assert!(detail.contains(detail_contains), "{detail}");
            }
            other => panic!("unexpected kind {other:?}"),
        }
        let message = err.to_string();
        let prefix = format!("failed to read {}: line {line} is not a valid JSON row (", path.display());
        assert!(message.starts_with(&prefix), "{message}");
        assert!(message.ends_with("); the log is corrupt and was left untouched"), "{message}");
        assert_eq!(fs::read(&path).unwrap(), content, "file must be untouched");

        // The read-only reader refuses it the same way.
        let err = read_rows(&path).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::CorruptLine { line: got, .. } if got == line), "{err:?}");
        assert_eq!(err.to_string(), message);
        assert_eq!(fs::read(&path).unwrap(), content);
    }

    #[test]
    fn corrupt_middle_line_is_refused_with_line_number() {
        assert_refused(b"{\"a\":1}\n{\"a\":2}\n{\"a\":3,oops}\n{\"a\":4}\n", 3, "at column");
    }

    #[test]
    fn corrupt_detail_does_not_mention_serde_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"a\":1}\n{\"a\":\n");
        let err = read_rows(&path).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("line 2 is not"), "{message}");
        assert!(!message.contains("line 1"), "{message}");
    }

    #[test]
    fn empty_middle_line_is_refused() {
        assert_refused(b"{\"a\":1}\n\n{\"a\":2}\n", 2, "empty line");
    }

    #[test]
    fn empty_first_line_is_refused() {
        assert_refused(b"\n", 1, "empty line");
    }

    #[test]
    fn non_object_line_is_refused() {
        assert_refused(b"{\"a\":1}\n[1,2]\n", 2, "found an array");
        assert_refused(b"42\n", 1, "found a number");
    }

    #[test]
    fn invalid_utf8_line_is_refused() {
        assert_refused(b"{\"a\":\"\xff\xfe\"}\n", 1, "");
    }

    #[test]
    fn corrupt_last_complete_line_with_torn_tail_is_refused_untouched() {
        assert_refused(b"{\"a\":1}\ngarbage\n{\"a\":", 2, "");
    }

    #[test]
    fn trailing_whitespace_inside_a_line_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"{\"a\":1}\r\n {\"a\":2} \n");
        assert_eq!(read_rows(&path).unwrap(), vec![json!({"a": 1}), json!({"a": 2})]);
    }

    // --- read_rows --------------------------------------------------------

    #[test]
    fn read_rows_ignores_torn_tail_without_modifying_file() {
        let dir = tempfile::tempdir().unwrap();
        for tail in [&b"{\"a\":3,\"b"[..], &b"{\"a\":3}"[..]] {
            let mut content = b"{\"a\":1}\n{\"a\":2}\n".to_vec();
            content.extend_from_slice(tail);
            let path = log_with(dir.path(), &content);
            let rows = read_rows(&path).unwrap();
            assert_eq!(rows, vec![json!({"a": 1}), json!({"a": 2})]);
            assert_eq!(fs::read(&path).unwrap(), content);
        }
    }

    #[test]
    fn read_rows_empty_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_with(dir.path(), b"");
        assert!(read_rows(&path).unwrap().is_empty());
        let err = read_rows(&dir.path().join("none.jsonl")).unwrap_err();
        assert!(matches!(err.kind, StoreErrorKind::Io(_)), "{err:?}");
    }

    #[test]
    fn read_rows_works_while_log_is_open_and_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _lock = DirLock::acquire(dir.path()).unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut log = AppendLog::create_new(&path).unwrap();
        log.append(&json!({"a": 1})).unwrap();
        assert_eq!(read_rows(&path).unwrap(), vec![json!({"a": 1})]);
        log.append(&json!({"a": 2})).unwrap();
        assert_eq!(read_rows(&path).unwrap().len(), 2);
    }
}
