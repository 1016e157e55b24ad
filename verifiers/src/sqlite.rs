//! The `container_sqlite_query` action: one read-only `SELECT` on a snapshot of an SQLite
//! database taken from the audited container.
//!
//! # Trust boundary
//!
//! This module never talks to the container or to Docker: the sandbox layer freezes the
//! container, copies the database file together with its `-wal` (and `-journal`) in one
//! freeze, and hands the bytes over as [`SnapshotFiles`]. Everything here runs in the trusted
//! runner on a private copy, so neither the audited server nor the model can influence what
//! the query sees after the copy was taken. The bytes themselves are untrusted (the server
//! wrote them): they are hashed before SQLite ever opens them, size-capped, checked with
//! `PRAGMA quick_check`, and read with SQLite's hardening for untrusted databases on
//! (defensive mode, no trusted schema, no triggers, no extension loading, length limits).
//!
//! # Why the WAL is folded first
//!
//! In WAL mode the `-wal` file is part of the database: a transaction that committed but was
//! not checkpointed yet exists only there. Opening the copy with `immutable=1`, or without its
//! WAL, silently drops such rows. So the copy is first opened read-write (it is ours, in a
//! private directory), which runs SQLite's WAL recovery: valid frames are replayed, a torn tail
//! (frames whose checksum or salt does not match, i.e. a write still in progress when the
//! container was frozen) is ignored. The WAL is then checkpointed into the database and the
//! journal mode switched to `DELETE`, and only this folded file is reopened read-only for the
//! query. A hot rollback `-journal` is likewise rolled back by that first read-write open. A
//! `-shm` from the container is never used: it is a cache of the WAL index that SQLite
//! rebuilds from the WAL, and a stale one could mislead recovery.
//!
//! # Files written
//!
//! Into the caller's private directory (each created new; an existing file is an error):
//!
//! - `snapshot.db`, `snapshot.db-wal`, `snapshot.db-journal`: the bytes exactly as received;
//!   SQLite never opens these, so their SHA-256 stays what the record says.
//! - `folded.db` (plus its companions while it is being folded): the working copy the query
//!   reads. After a successful fold only `folded.db` remains.
//!
//! # Blocking
//!
//! [`query_snapshot`] does file and SQLite I/O on the calling thread and may run for up to
//! [`SqliteLimits::deadline`]; call it from `tokio::task::spawn_blocking` in async code.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

/// The most parameters a query may take (as in the original tool).
pub const MAX_PARAMETERS: usize = 32;

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Name of the as-received database file in the private directory.
pub const SNAPSHOT_DB: &str = "snapshot.db";
/// Name of the folded working copy the query reads.
pub const FOLDED_DB: &str = "folded.db";

/// How many SQLite virtual-machine steps run between two deadline checks.
const PROGRESS_STEPS: i32 = 1000;

/// The files copied out of the container in one freeze.
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotFiles {
    /// The database file (empty if the file was empty).
    pub db: Vec<u8>,
    /// Its `-wal`, if one existed.
    pub wal: Option<Vec<u8>>,
    /// Its rollback `-journal`, if one existed.
    pub journal: Option<Vec<u8>>,
}

impl std::fmt::Debug for SnapshotFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Sizes only: the contents may be large and are untrusted.
        f.debug_struct("SnapshotFiles")
            .field("db_bytes", &self.db.len())
            .field("wal_bytes", &self.wal.as_ref().map(Vec::len))
            .field("journal_bytes", &self.journal.as_ref().map(Vec::len))
            .finish()
    }
}

/// Bounds of one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteLimits {
    /// Largest accepted file (database, WAL or journal, each; also the folded database).
    pub max_snapshot_bytes: u64,
    /// Most rows a query may return; one more is an error.
    pub max_rows: usize,
    /// Wall-clock budget for checking the snapshot and running the query.
    pub deadline: Duration,
}

impl Default for SqliteLimits {
    /// 8 MiB, 100 rows, 5 s: the original tool's limits.
    fn default() -> Self {
        Self { max_snapshot_bytes: 8 * 1024 * 1024, max_rows: 100, deadline: Duration::from_secs(5) }
    }
}

/// Why a snapshot query failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqliteError {
    /// The query is not one read-only `SELECT`.
    #[error("failed to accept the query: container_sqlite_query accepts one read-only SELECT statement ({reason})")]
    NotSelect {
        /// What was wrong.
        reason: String,
    },
    /// Too many parameters.
    #[error("failed to accept the query: {given} parameters given, at most {max} are allowed")]
    TooManyParameters {
        /// How many were given.
        given: usize,
        /// The limit.
        max: usize,
    },
    /// A snapshot file is over the cap.
    #[error("failed to accept the snapshot: {file} is {bytes} bytes, over the {max}-byte cap")]
    TooLarge {
        /// Which file.
        file: String,
        /// Its size.
        bytes: u64,
        /// The cap.
        max: u64,
    },
    /// The file is not an SQLite database at all (another format).
    #[error("failed to open the snapshot: {0}")]
    NotADatabase(String),
    /// The file looks like SQLite but is not consistent.
    #[error("failed to check the snapshot: not a consistent SQLite database ({0})")]
    Corrupt(String),
    /// SQLite rejected or failed the query.
    #[error("failed to run the query: {0}")]
    Query(String),
    /// The deadline passed.
    #[error("failed to run the query: it did not finish within {} ms", .limit.as_millis())]
    Timeout {
        /// The deadline.
        limit: Duration,
    },
    /// The query returned more rows than allowed.
    #[error("failed to run the query: it returned more than {max} rows")]
    TooManyRows {
        /// The limit.
        max: usize,
    },
    /// A parameter cannot be bound.
    #[error("failed to bind parameter {index}: {detail}")]
    Parameter {
        /// 1-based position.
        index: usize,
        /// Why.
        detail: String,
    },
    /// The private copy could not be written.
    #[error("failed to {what}: {detail}")]
    Io {
        /// The operation.
        what: String,
        /// The OS error.
        detail: String,
    },
}

impl SqliteError {
    /// A short classification for evidence.
    #[must_use]
    pub const fn kind_name(&self) -> &'static str {
        match self {
            Self::NotSelect { .. } => "not_select",
            Self::TooManyParameters { .. } => "too_many_parameters",
            Self::TooLarge { .. } => "too_large",
            Self::NotADatabase(_) => "not_a_database",
            Self::Corrupt(_) => "corrupt",
            Self::Query(_) => "query",
            Self::Timeout { .. } => "timeout",
            Self::TooManyRows { .. } => "too_many_rows",
            Self::Parameter { .. } => "parameter",
            Self::Io { .. } => "io",
        }
    }
}

/// What a successful query returns (the action's `response`, minus `source_path`, which the
/// caller knows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryRecord {
    /// One JSON object per row, column name → value, in column order. A BLOB is
    /// `{"$blob_hex": "…"}`, text that is not UTF-8 `{"$text_hex": "…"}`, an infinite REAL
    /// `{"$real": "Infinity"}` / `{"$real": "-Infinity"}`. With duplicate column names the
    /// last value wins.
    pub rows: Vec<Map<String, Value>>,
    /// Lower-case hex SHA-256 of the database bytes as received.
    pub snapshot_sha256: String,
    /// Size of the database as received.
    pub snapshot_bytes: u64,
    /// Size of the `-wal` as received, if there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_bytes: Option<u64>,
    /// SHA-256 of the `-wal` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_sha256: Option<String>,
    /// Size of the rollback `-journal` as received, if there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_bytes: Option<u64>,
    /// SHA-256 of the `-journal` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_sha256: Option<String>,
    /// Where the as-received database was written (`<dir>/snapshot.db`).
    pub snapshot_path: PathBuf,
    /// The consistent database the query read (WAL and journal folded in).
    pub folded_path: PathBuf,
    /// SHA-256 of that folded database.
    pub folded_sha256: String,
    /// Its size.
    pub folded_bytes: u64,
    /// The query as given.
    pub query: String,
    /// The parameters as given.
    pub parameters: Vec<Value>,
}

/// Checks the text of a query the way the original tool does, plus comments and `WITH`: after
/// leading whitespace and SQL comments it must start with the keyword `SELECT` or `WITH`
/// (case-insensitive), contain no `;` anywhere, and take at most [`MAX_PARAMETERS`]
/// parameters. [`query_snapshot`] additionally requires SQLite to report the prepared
/// statement read-only, which is what makes `WITH …` safe to accept.
pub fn check_query(query: &str, parameters: usize) -> Result<(), SqliteError> {
    let not_select = |reason: &str| SqliteError::NotSelect { reason: reason.to_owned() };
    if query.contains(';') {
        return Err(not_select("it contains ';'"));
    }
    let rest = skip_space_and_comments(query);
    let keyword: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if !(keyword.eq_ignore_ascii_case("select") || keyword.eq_ignore_ascii_case("with")) {
        return Err(not_select("it does not start with SELECT"));
    }
    if parameters > MAX_PARAMETERS {
        return Err(SqliteError::TooManyParameters { given: parameters, max: MAX_PARAMETERS });
    }
    Ok(())
}

/// `text` without leading whitespace, `-- …` line comments and `/* … */` block comments. An
/// unterminated block comment swallows the rest (SQLite treats it the same way).
fn skip_space_and_comments(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix("--") {
            text = rest.find('\n').map_or("", |i| &rest[i + 1..]);
        } else if let Some(rest) = text.strip_prefix("/*") {
            text = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else {
            return text;
        }
    }
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn len_u64(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).unwrap_or(u64::MAX)
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> SqliteError {
    move |e| SqliteError::Io { what, detail: e.to_string() }
}

/// Writes `bytes` to a file that must not exist yet (`O_EXCL`: never follows a planted link).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), SqliteError> {
    let what = format!("write {}", path.display());
    let mut file = OpenOptions::new().write(true).create_new(true).open(path).map_err(io_error(what.clone()))?;
    file.write_all(bytes).map_err(io_error(what))
}

/// Fails if `path` exists (as anything, including a dangling link).
fn require_absent(path: &Path) -> Result<(), SqliteError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SqliteError::Io { what: format!("check {}", path.display()), detail: e.to_string() }),
        Ok(_) => Err(SqliteError::Io {
            what: format!("prepare {}", path.display()),
            detail: "the file already exists; the snapshot directory must be fresh".into(),
        }),
    }
}

/// Classifies an SQLite error met while opening, recovering or checking the snapshot.
fn open_error(context: &str, e: &rusqlite::Error) -> SqliteError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => SqliteError::NotADatabase(format!("{context}: {e}")),
        Some(ErrorCode::DatabaseCorrupt) => SqliteError::Corrupt(format!("{context}: {e}")),
        _ => SqliteError::Corrupt(format!("{context}: {e}")),
    }
}

/// Applies the per-connection hardening for an untrusted database file.
fn harden(conn: &Connection, max_length: u64) -> Result<(), rusqlite::Error> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, false)?;
    // Values can never be larger than the snapshot; computed ones are bounded the same way.
    let length = i32::try_from(max_length.max(1024 * 1024)).unwrap_or(i32::MAX);
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, length)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.pragma_update(None, "cell_size_check", true)?;
    conn.pragma_update(None, "mmap_size", 0)?;
    Ok(())
}

/// Copies the snapshot into `dir/folded.db` (+ companions), recovers it read-write and folds
/// the WAL in, leaving one self-contained database in `DELETE` journal mode.
fn fold(files: &SnapshotFiles, folded: &Path, limits: &SqliteLimits) -> Result<(), SqliteError> {
    let companion = |suffix: &str| {
        let mut name = folded.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let (wal, journal, shm) = (companion("-wal"), companion("-journal"), companion("-shm"));
    for path in [&wal, &journal, &shm] {
        require_absent(path)?;
    }
    write_new(folded, &files.db)?;
    if let Some(bytes) = &files.wal {
        write_new(&wal, bytes)?;
    }
    if let Some(bytes) = &files.journal {
        write_new(&journal, bytes)?;
    }

    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(folded, flags).map_err(|e| open_error("open the copy", &e))?;
    harden(&conn, limits.max_snapshot_bytes).map_err(|e| open_error("configure the copy", &e))?;
    // A scratch copy: durability against power loss is pointless, fsyncs only cost time.
    conn.pragma_update(None, "synchronous", "OFF").map_err(|e| open_error("configure the copy", &e))?;
    // The first read takes a shared lock: that replays the WAL or rolls back a hot journal.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        .map_err(|e| open_error("read the schema", &e))?;
    let mode: String =
        conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(|e| open_error("read the journal mode", &e))?;
    if mode.eq_ignore_ascii_case("wal") {
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(|e| open_error("checkpoint the WAL", &e))?;
        if busy != 0 {
            return Err(SqliteError::Corrupt("the WAL checkpoint of the private copy did not complete".into()));
        }
    }
    let mode: String =
        conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0)).map_err(|e| open_error("leave WAL mode", &e))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(SqliteError::Corrupt(format!("the private copy stayed in journal mode {mode:?}")));
    }
    conn.close().map_err(|(_, e)| open_error("close the copy", &e))?;
    for path in [&wal, &journal, &shm] {
        if fs::symlink_metadata(path).is_ok() {
            return Err(SqliteError::Corrupt(format!("{} is still present after folding", path.display())));
        }
    }
    Ok(())
}

/// Binds one JSON parameter at `index` (1-based).
fn bind(stmt: &mut rusqlite::Statement<'_>, index: usize, value: &Value) -> Result<(), SqliteError> {
    use rusqlite::types::Value as Sql;
    let parameter = |detail: &str| SqliteError::Parameter { index, detail: detail.to_owned() };
    let sql = match value {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Sql::Integer(i)
            } else if n.is_u64() {
                return Err(parameter("integer out of SQLite's 64-bit signed range"));
            } else if let Some(f) = n.as_f64() {
                Sql::Real(f)
            } else {
                return Err(parameter("number cannot be represented"));
            }
        }
        Value::String(s) => Sql::Text(s.clone()),
        Value::Array(_) => return Err(parameter("arrays cannot be bound; use null, a boolean, a number or a string")),
        Value::Object(_) => {
            return Err(parameter("objects cannot be bound; use null, a boolean, a number or a string"));
        }
    };
    stmt.raw_bind_parameter(index, sql).map_err(|e| SqliteError::Parameter { index, detail: e.to_string() })
}

/// The JSON form of one SQLite value.
fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            // SQLite stores NaN as NULL; only the infinities are left.
            None if f == f64::INFINITY => json!({"$real": "Infinity"}),
            None if f == f64::NEG_INFINITY => json!({"$real": "-Infinity"}),
            None => Value::Null,
        },
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => Value::String(text.to_owned()),
            Err(_) => json!({"$text_hex": hex(bytes)}),
        },
        ValueRef::Blob(bytes) => json!({"$blob_hex": hex(bytes)}),
    }
}

/// Runs `query` with `parameters` on a private, consistent copy of `files` written into
/// `dir`, under `limits`. See the module documentation for the steps and the files written.
///
/// `dir` must be a directory only the caller writes to; the names this function creates in
/// it must not exist yet.
pub fn query_snapshot(
    files: &SnapshotFiles,
    dir: &Path,
    query: &str,
    parameters: &[Value],
    limits: &SqliteLimits,
) -> Result<QueryRecord, SqliteError> {
    check_query(query, parameters.len())?;

    // Sizes and hashes of the bytes as received, before SQLite sees them.
    for (name, bytes) in
        [("the database", Some(&files.db)), ("the WAL", files.wal.as_ref()), ("the journal", files.journal.as_ref())]
    {
        if let Some(bytes) = bytes
            && len_u64(bytes) > limits.max_snapshot_bytes
        {
            return Err(SqliteError::TooLarge {
                file: name.to_owned(),
                bytes: len_u64(bytes),
                max: limits.max_snapshot_bytes,
            });
        }
    }
    let snapshot_sha256 = sha256_hex(&files.db);
    let wal_sha256 = files.wal.as_deref().map(sha256_hex);
    let journal_sha256 = files.journal.as_deref().map(sha256_hex);
    // A file of 0 bytes is an empty database, as SQLite defines it (and as the original tool
    // read it, opening the file with SQLite in the container): a server that opened its
    // database and wrote nothing yet has one. A query of its tables then fails (no such
    // table) and a count of `sqlite_master` answers 0; only bytes that are not SQLite are
    // refused.
    if !files.db.is_empty() && !files.db.starts_with(SQLITE_HEADER) {
        return Err(SqliteError::NotADatabase("file is not an SQLite database (no SQLite header)".into()));
    }

    let snapshot_path = dir.join(SNAPSHOT_DB);
    let mut evidence = vec![(snapshot_path.clone(), Some(&files.db))];
    evidence.push((dir.join(format!("{SNAPSHOT_DB}-wal")), files.wal.as_ref()));
    evidence.push((dir.join(format!("{SNAPSHOT_DB}-journal")), files.journal.as_ref()));
    for (path, bytes) in evidence {
        if let Some(bytes) = bytes {
            write_new(&path, bytes)?;
        }
    }

    let folded_path = dir.join(FOLDED_DB);
    fold(files, &folded_path, limits)?;
    let folded = fs::read(&folded_path).map_err(io_error(format!("read {}", folded_path.display())))?;
    if len_u64(&folded) > limits.max_snapshot_bytes {
        return Err(SqliteError::TooLarge {
            file: "the folded database".into(),
            bytes: len_u64(&folded),
            max: limits.max_snapshot_bytes,
        });
    }
    let folded_sha256 = sha256_hex(&folded);
    let folded_bytes = len_u64(&folded);
    drop(folded);

    let rows = read_rows(&folded_path, query, parameters, limits)?;
    Ok(QueryRecord {
        rows,
        snapshot_sha256,
        snapshot_bytes: len_u64(&files.db),
        wal_bytes: files.wal.as_deref().map(len_u64),
        wal_sha256,
        journal_bytes: files.journal.as_deref().map(len_u64),
        journal_sha256,
        snapshot_path,
        folded_bytes,
        folded_path,
        folded_sha256,
        query: query.to_owned(),
        parameters: parameters.to_vec(),
    })
}

/// Opens the folded copy read-only and runs the query under the deadline.
fn read_rows(
    path: &Path,
    query: &str,
    parameters: &[Value],
    limits: &SqliteLimits,
) -> Result<Vec<Map<String, Value>>, SqliteError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| open_error("open the folded copy", &e))?;
    harden(&conn, limits.max_snapshot_bytes).map_err(|e| open_error("configure the folded copy", &e))?;
    conn.pragma_update(None, "query_only", true).map_err(|e| open_error("make the copy query-only", &e))?;

    let deadline = Instant::now() + limits.deadline;
    let expired = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&expired);
    conn.progress_handler(
        PROGRESS_STEPS,
        Some(move || {
            let late = Instant::now() >= deadline;
            if late {
                flag.store(true, Ordering::Relaxed);
            }
            late
        }),
    )
    .map_err(|e| SqliteError::Query(format!("failed to install the deadline: {e}")))?;
    let timeout = || SqliteError::Timeout { limit: limits.deadline };
    let classify = |e: rusqlite::Error, expired: &AtomicBool| {
        if expired.load(Ordering::Relaxed) || e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) {
            timeout()
        } else {
            SqliteError::Query(e.to_string())
        }
    };

    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| if expired.load(Ordering::Relaxed) { timeout() } else { open_error("run quick_check", &e) })?;
    if check != "ok" {
        return Err(SqliteError::Corrupt(format!("quick_check: {check}")));
    }

    let mut stmt = conn.prepare(query).map_err(|e| classify(e, &expired))?;
    if !stmt.readonly() {
        return Err(SqliteError::NotSelect { reason: "SQLite reports the statement is not read-only".into() });
    }
    let expected = stmt.parameter_count();
    if expected != parameters.len() {
        return Err(SqliteError::Parameter {
            index: parameters.len().min(expected) + 1,
            detail: format!("the query has {expected} placeholders but {} parameters were given", parameters.len()),
        });
    }
    for (i, value) in parameters.iter().enumerate() {
        bind(&mut stmt, i + 1, value)?;
    }
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut out = Vec::new();
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next().map_err(|e| classify(e, &expired))? {
        if out.len() >= limits.max_rows {
            return Err(SqliteError::TooManyRows { max: limits.max_rows });
        }
        let mut object = Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = row.get_ref(i).map_err(|e| SqliteError::Query(e.to_string()))?;
            object.insert(name.clone(), to_json(value));
        }
        out.push(object);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
