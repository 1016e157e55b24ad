//! Tests of the snapshot query: consistency of WAL and rollback-journal snapshots, the
//! query checks, limits, binding and rendering.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::{
    FOLDED_DB, QueryRecord, SNAPSHOT_DB, SnapshotFiles, SqliteError, SqliteLimits, check_query, query_snapshot,
    sha256_hex,
};

/// A database built in a temporary directory by `setup`, closed, and read back.
fn build(setup: impl FnOnce(&Connection)) -> SnapshotFiles {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("app.db");
    let conn = Connection::open(&path).expect("create database");
    setup(&conn);
    conn.close().expect("close");
    SnapshotFiles { db: std::fs::read(&path).expect("read database"), wal: None, journal: None }
}

fn items(rows: usize) -> SnapshotFiles {
    build(|c| {
        c.execute_batch("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, v INTEGER); BEGIN").expect("schema");
        for i in 0..rows {
            c.execute(
                "INSERT INTO items(name, v) VALUES (?1, ?2)",
                (format!("item-{i}"), i64::try_from(i).expect("small")),
            )
            .expect("insert");
        }
        c.execute_batch("COMMIT").expect("commit");
    })
}

fn run_with(
    files: &SnapshotFiles,
    query: &str,
    params: &[Value],
    limits: &SqliteLimits,
) -> Result<QueryRecord, SqliteError> {
    let dir = tempfile::tempdir().expect("temporary directory");
    query_snapshot(files, dir.path(), query, params, limits)
}

fn run(files: &SnapshotFiles, query: &str, params: &[Value]) -> Result<QueryRecord, SqliteError> {
    run_with(files, query, params, &SqliteLimits::default())
}

fn single(record: &QueryRecord) -> &serde_json::Map<String, Value> {
    assert_eq!(record.rows.len(), 1, "{:?}", record.rows);
    &record.rows[0]
}

fn kind(result: Result<QueryRecord, SqliteError>) -> &'static str {
    match result {
        Ok(record) => panic!("expected an error, got {:?}", record.rows),
        Err(e) => e.kind_name(),
    }
}

#[test]
fn limits_default_to_the_original_tool() {
    let limits = SqliteLimits::default();
    assert_eq!(limits.max_snapshot_bytes, 8 * 1024 * 1024);
    assert_eq!(limits.max_rows, 100);
    assert_eq!(limits.deadline, Duration::from_secs(5));
}

#[test]
fn rows_come_back_as_ordered_objects_with_a_full_record() {
    let files = items(3);
    let dir = tempfile::tempdir().expect("temporary directory");
    let record = query_snapshot(
        &files,
        dir.path(),
        "SELECT v, name, id FROM items WHERE v >= ? ORDER BY id",
        &[json!(1)],
        &SqliteLimits::default(),
    )
    .expect("query");
    assert_eq!(record.rows.len(), 2);
    let first = serde_json::to_string(&record.rows[0]).expect("json");
    assert_eq!(first, r#"{"v":1,"name":"item-1","id":2}"#);
    assert_eq!(record.snapshot_sha256, sha256_hex(&files.db));
    assert_eq!(record.snapshot_sha256.len(), 64);
    assert_eq!(record.snapshot_bytes, files.db.len() as u64);
    assert_eq!(record.snapshot_path, dir.path().join(SNAPSHOT_DB));
    assert_eq!(std::fs::read(&record.snapshot_path).expect("evidence copy"), files.db);
    assert_eq!(record.folded_path, dir.path().join(FOLDED_DB));
    let folded = std::fs::read(&record.folded_path).expect("folded copy");
    assert_eq!(record.folded_sha256, sha256_hex(&folded));
    assert_eq!(record.folded_bytes, folded.len() as u64);

    let value = serde_json::to_value(&record).expect("serialise");
    assert_eq!(value["query"], "SELECT v, name, id FROM items WHERE v >= ? ORDER BY id");
    assert_eq!(value["parameters"], json!([1]));
    assert!(value.get("wal_bytes").is_none() && value.get("journal_sha256").is_none(), "{value}");
    // Nothing but the evidence copy and the folded database is left.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [FOLDED_DB, SNAPSHOT_DB]);
}

/// A writer in WAL mode that never checkpoints; the connection stays open so nothing is folded
/// on close either.
fn wal_only_commit() -> (tempfile::TempDir, Connection, SnapshotFiles) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("app.db");
    let conn = Connection::open(&path).expect("create");
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
         CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);",
    )
    .expect("schema");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").expect("fold the schema in");
    for i in 0..5 {
        conn.execute("INSERT INTO notes(body) VALUES (?1)", [format!("note {i}")]).expect("insert");
    }
    let files = SnapshotFiles {
        db: std::fs::read(&path).expect("db"),
        wal: Some(std::fs::read(dir.path().join("app.db-wal")).expect("wal")),
        journal: None,
    };
    (dir, conn, files)
}

#[test]
fn commits_that_live_only_in_the_wal_are_visible() {
    let (_dir, _writer, files) = wal_only_commit();
    let out = tempfile::tempdir().expect("temporary directory");
    let record = query_snapshot(
        &files,
        out.path(),
        "SELECT count(*) AS n, max(body) AS last FROM notes",
        &[],
        &SqliteLimits::default(),
    )
    .expect("query");
    assert_eq!(single(&record)["n"], 5);
    assert_eq!(single(&record)["last"], "note 4");
    assert_eq!(record.wal_bytes, files.wal.as_ref().map(|w| w.len() as u64));
    assert_eq!(record.wal_sha256.as_deref(), files.wal.as_deref().map(sha256_hex).as_deref());
    // The raw WAL is kept as evidence next to the raw database.
    let wal_copy = record.snapshot_path.with_file_name(format!("{SNAPSHOT_DB}-wal"));
    assert_eq!(std::fs::read(wal_copy).ok(), files.wal);

    // The pitfall: the database file alone (or opened with immutable=1) has none of them.
    let without = SnapshotFiles { wal: None, ..files.clone() };
    let record = run(&without, "SELECT count(*) AS n FROM notes", &[]).expect("query");
    assert_eq!(single(&record)["n"], 0);
    let raw = tempfile::tempdir().expect("temporary directory");
    let raw_db = raw.path().join("copy.db");
    std::fs::write(&raw_db, &files.db).expect("write");
    std::fs::write(raw.path().join("copy.db-wal"), files.wal.as_ref().expect("wal")).expect("write");
    let immutable = Connection::open_with_flags(
        format!("file:{}?immutable=1", raw_db.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .expect("open immutable");
    let n: i64 = immutable.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)).expect("count");
    assert_eq!(n, 0, "immutable=1 ignores the WAL");
}

#[test]
fn a_torn_wal_tail_is_ignored() {
    let (_dir, _writer, mut files) = wal_only_commit();
    let wal = files.wal.as_mut().expect("wal");
    // Cut the last frame in half: the writer "was frozen" in the middle of a write.
    let frame = 24 + 4096;
    let keep = wal.len() - frame / 2;
    wal.truncate(keep);
    let record = run(&files, "SELECT count(*) AS n FROM notes", &[]).expect("query");
    assert_eq!(single(&record)["n"], 4, "every complete commit, nothing torn");
}

/// A writer thread commits batches in WAL mode with frequent auto-checkpoints; after each
/// commit it waits while the test copies the database and its WAL (the writer then holds no
/// transaction, as in a container frozen between statements). Every copy must read back every
/// committed row and the invariants.
#[test]
fn consistent_copies_of_a_live_wal_database_read_back_every_commit() {
    const BATCHES: i64 = 40;
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("app.db");
    let (committed_tx, committed_rx) = mpsc::channel::<i64>();
    let (resume_tx, resume_rx) = mpsc::channel::<()>();
    let writer_path = path.clone();
    let writer = std::thread::spawn(move || {
        let mut conn = Connection::open(&writer_path).expect("create");
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA wal_autocheckpoint=8;
             CREATE TABLE items(id INTEGER PRIMARY KEY, batch INTEGER, payload BLOB);
             CREATE TABLE summary(k INTEGER PRIMARY KEY, total INTEGER, last_batch INTEGER);
             INSERT INTO summary VALUES (1, 0, -1);",
        )
        .expect("schema");
        for batch in 0..BATCHES {
            let tx = conn.transaction().expect("begin");
            for i in 0..60 {
                tx.execute("INSERT INTO items(batch, payload) VALUES (?1, zeroblob(?2))", (batch, 100 + i * 7))
                    .expect("insert");
            }
            // Deletes keep pages moving between the tree and the freelist.
            let deleted = tx.execute("DELETE FROM items WHERE batch = ?1 AND id % 3 = 0", [batch - 1]).expect("delete");
            tx.execute(
                "UPDATE summary SET total = total + 60 - ?1, last_batch = ?2 WHERE k = 1",
                (i64::try_from(deleted).expect("count"), batch),
            )
            .expect("summary");
            tx.commit().expect("commit");
            committed_tx.send(batch).expect("report the commit");
            if resume_rx.recv().is_err() {
                return;
            }
        }
    });

    let mut checked = 0;
    while let Ok(batch) = committed_rx.recv() {
        let files = SnapshotFiles {
            db: std::fs::read(&path).expect("db"),
            wal: std::fs::read(path.with_file_name("app.db-wal")).ok(),
            journal: None,
        };
        resume_tx.send(()).expect("resume the writer");
        let record = run(
            &files,
            "SELECT (SELECT count(*) FROM items) AS n, total, last_batch, (SELECT max(batch) FROM items) AS top
             FROM summary WHERE k = 1",
            &[],
        )
        .unwrap_or_else(|e| panic!("copy after batch {batch}: {e}"));
        let row = single(&record);
        assert_eq!(row["n"], row["total"], "batch {batch}: {row:?}");
        assert_eq!(row["last_batch"], batch, "batch {batch}");
        assert_eq!(row["top"], batch, "batch {batch}");
        checked += 1;
    }
    writer.join().expect("writer thread");
    assert_eq!(checked, BATCHES);
}

/// A rollback-journal database copied in the middle of a write transaction that already
/// spilled pages into the database file: with its hot journal the copy rolls back to the last
/// commit.
#[test]
fn a_hot_rollback_journal_is_rolled_back() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("app.db");
    let conn = Connection::open(&path).expect("create");
    conn.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE items(id INTEGER PRIMARY KEY, v INTEGER, pad TEXT);")
        .expect("schema");
    conn.execute_batch(
        "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)
         INSERT INTO items(v, pad) SELECT i, printf('%.200c', 'x') FROM c;",
    )
    .expect("rows");
    let committed = std::fs::read(&path).expect("committed db");
    conn.execute_batch("PRAGMA cache_size=10; BEGIN; UPDATE items SET v = v + 1000000;").expect("open write");
    let files = SnapshotFiles {
        db: std::fs::read(&path).expect("db"),
        wal: None,
        journal: Some(std::fs::read(path.with_file_name("app.db-journal")).expect("journal")),
    };
    conn.execute_batch("ROLLBACK").expect("rollback");
    assert_ne!(files.db, committed, "the update must have spilled into the file for this test to mean anything");

    let query = "SELECT count(*) AS n, sum(v) AS s FROM items";
    let record = run(&files, query, &[]).expect("query");
    assert_eq!(single(&record)["n"], 3000);
    assert_eq!(single(&record)["s"], 3000 * 3001 / 2);
    assert!(record.journal_sha256.is_some());

    // Without its journal the same database file shows the half-written transaction (or is
    // unreadable): the journal is part of the state.
    let without = SnapshotFiles { journal: None, ..files };
    match run(&without, query, &[]) {
        Ok(record) => assert_ne!(single(&record)["s"], 3000 * 3001 / 2),
        Err(e) => assert_eq!(e.kind_name(), "corrupt", "{e}"),
    }
}

#[test]
fn an_empty_file_is_an_empty_database_and_foreign_bytes_are_not_a_database() {
    // A server that opened its database and wrote nothing yet leaves 0 bytes: SQLite (and the
    // original tool) read that as an empty database, which answers a count and has no tables.
    let empty = SnapshotFiles { db: Vec::new(), wal: None, journal: None };
    let record = run(&empty, "SELECT count(*) AS n FROM sqlite_master", &[]).expect("an empty database");
    assert_eq!(single(&record)["n"], 0);
    assert_eq!(record.snapshot_bytes, 0);
    let error = run(&empty, "SELECT count(*) AS n FROM notes", &[]).expect_err("no such table");
    assert_eq!(error.kind_name(), "query", "{error}");
    assert!(error.to_string().contains("no such table: notes"), "{error}");

    let random: Vec<u8> = (0..8192_u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let foreign = SnapshotFiles { db: random, wal: None, journal: None };
    assert_eq!(kind(run(&foreign, "SELECT 1", &[])), "not_a_database");

    let text = SnapshotFiles { db: b"just some text, not SQLite".to_vec(), wal: None, journal: None };
    assert_eq!(kind(run(&text, "SELECT 1", &[])), "not_a_database");
}

#[test]
fn a_damaged_database_is_reported_as_corrupt() {
    let mut files = items(6000);
    assert!(files.db.len() > 16 * 4096);
    // Scribble over the middle of the B-tree.
    let middle = files.db.len() / 2;
    for b in &mut files.db[middle..middle + 3 * 4096] {
        *b = 0x5a;
    }
    let error = run(&files, "SELECT count(*) FROM items", &[]).expect_err("damaged");
    assert!(matches!(error.kind_name(), "corrupt"), "{error}");
    assert!(error.to_string().contains("not a consistent SQLite database"), "{error}");
}

#[test]
fn files_over_the_cap_are_refused_before_opening() {
    let files = items(500);
    let limits = SqliteLimits { max_snapshot_bytes: 4096, ..SqliteLimits::default() };
    let error = run_with(&files, "SELECT 1", &[], &limits).expect_err("too large");
    assert_eq!(error.kind_name(), "too_large");
    assert!(error.to_string().contains("the database is"), "{error}");

    let small = items(1);
    let big_wal = SnapshotFiles { wal: Some(vec![0; small.db.len() + 1]), ..small.clone() };
    let limits = SqliteLimits { max_snapshot_bytes: small.db.len() as u64, ..SqliteLimits::default() };
    let error = run_with(&big_wal, "SELECT 1", &[], &limits).expect_err("too large wal");
    assert_eq!(error.kind_name(), "too_large");
    assert!(error.to_string().contains("the WAL"), "{error}");
}

#[test]
fn only_one_select_is_accepted_textually() {
    for bad in [
        "DELETE FROM x",
        "SELECT 1; DROP TABLE x",
        "SELECT 1;",
        "PRAGMA writable_schema=1",
        "  -- comment\n /* block */ INSERT INTO x VALUES (1)",
        "",
        "   ",
        "/* unterminated SELECT 1",
        "selectx FROM t",
        "VALUES (1)",
        "EXPLAIN SELECT 1",
        "ATTACH 'x' AS y",
    ] {
        let error = check_query(bad, 0).expect_err(bad);
        assert_eq!(error.kind_name(), "not_select", "{bad}");
        assert!(error.to_string().contains("accepts one read-only SELECT statement"), "{error}");
    }
    for good in [
        "SELECT 1",
        "select 1",
        "\n\t SeLeCt * FROM t",
        "-- leading comment\nSELECT 1",
        "/* a */ /* b */ SELECT 1",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "SELECT(1)",
    ] {
        check_query(good, 0).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    check_query("SELECT 1", 32).expect("32 parameters");
    let error = check_query("SELECT 1", 33).expect_err("33 parameters");
    assert_eq!(error.kind_name(), "too_many_parameters");
    assert_eq!(error.to_string(), "failed to accept the query: 33 parameters given, at most 32 are allowed");
}

#[test]
fn statements_sqlite_reports_writable_are_refused() {
    let files = items(3);
    let record = run(&files, "WITH x AS (SELECT 41 AS a) SELECT a + 1 AS b FROM x", &[]).expect("read-only WITH");
    assert_eq!(single(&record)["b"], 42);
    for writes in [
        "WITH x AS (SELECT 1) DELETE FROM items",
        "WITH x AS (SELECT 1) INSERT INTO items(name, v) SELECT 'n', 1 FROM x",
        "WITH x AS (SELECT 1) UPDATE items SET v = 0",
    ] {
        let error = run(&files, writes, &[]).expect_err(writes);
        assert_eq!(error.kind_name(), "not_select", "{writes}: {error}");
    }
    // A SELECT on the snapshot's own folded copy never changes the evidence copy.
    let dir = tempfile::tempdir().expect("temporary directory");
    let _ = query_snapshot(&files, dir.path(), "SELECT * FROM items", &[], &SqliteLimits::default()).expect("query");
    assert_eq!(std::fs::read(dir.path().join(SNAPSHOT_DB)).expect("evidence"), files.db);
}

#[test]
fn extension_loading_is_not_available() {
    let files = items(1);
    let error = run(&files, "SELECT load_extension('/nonexistent/ext.so') AS x", &[]).expect_err("load_extension");
    assert_eq!(error.kind_name(), "query", "{error}");
    assert!(error.to_string().contains("not authorized"), "{error}");
}

#[test]
fn more_than_max_rows_is_an_error() {
    let files = items(101);
    let record = run(&files, "SELECT id FROM items LIMIT 100", &[]).expect("100 rows");
    assert_eq!(record.rows.len(), 100);
    let error = run(&files, "SELECT id FROM items", &[]).expect_err("101 rows");
    assert_eq!(error.kind_name(), "too_many_rows");
    assert_eq!(error.to_string(), "failed to run the query: it returned more than 100 rows");

    let limits = SqliteLimits { max_rows: 3, ..SqliteLimits::default() };
    assert_eq!(kind(run_with(&files, "SELECT id FROM items LIMIT 4", &[], &limits)), "too_many_rows");
    assert_eq!(run_with(&files, "SELECT id FROM items LIMIT 3", &[], &limits).expect("3 rows").rows.len(), 3);
}

#[test]
fn a_query_that_never_ends_times_out_near_the_deadline() {
    let files = items(1);
    let limits = SqliteLimits { deadline: Duration::from_millis(300), ..SqliteLimits::default() };
    let started = Instant::now();
    let error = run_with(
        &files,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        &[],
        &limits,
    )
    .expect_err("endless");
    let elapsed = started.elapsed();
    assert_eq!(error.kind_name(), "timeout", "{error}");
    assert_eq!(error.to_string(), "failed to run the query: it did not finish within 300 ms");
    assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[test]
fn each_json_type_binds_as_the_matching_sqlite_type() {
    let files = items(1);
    let query = "SELECT ?1 AS v, typeof(?1) AS t";
    for (param, value, sql_type) in [
        (json!(null), json!(null), "null"),
        (json!(true), json!(1), "integer"),
        (json!(false), json!(0), "integer"),
        (json!(42), json!(42), "integer"),
        (json!(-9_223_372_036_854_775_808_i64), json!(-9_223_372_036_854_775_808_i64), "integer"),
        (json!(-1.5), json!(-1.5), "real"),
        (json!("héllo"), json!("héllo"), "text"),
    ] {
        let record = run(&files, query, std::slice::from_ref(&param)).unwrap_or_else(|e| panic!("{param}: {e}"));
        assert_eq!(single(&record)["v"], value, "{param}");
        assert_eq!(single(&record)["t"], sql_type, "{param}");
    }
    // Parameters filter as expected.
    let record = run(&files, "SELECT name FROM items WHERE name = ?", &[json!("item-0")]).expect("filter");
    assert_eq!(single(&record)["name"], "item-0");
    let record = run(&files, "SELECT :a AS a, :b AS b", &[json!(1), json!("two")]).expect("named");
    assert_eq!(single(&record)["b"], "two");

    for bad in [json!([1, 2]), json!({"a": 1}), json!(u64::MAX)] {
        let error = run(&files, "SELECT ? AS v", std::slice::from_ref(&bad)).expect_err("unbindable");
        assert_eq!(error.kind_name(), "parameter", "{bad}");
        assert!(error.to_string().starts_with("failed to bind parameter 1: "), "{error}");
    }
    let error = run(&files, "SELECT ? AS a, ? AS b", &[json!(1)]).expect_err("too few");
    assert_eq!(error.kind_name(), "parameter");
    assert!(error.to_string().contains("2 placeholders but 1 parameters"), "{error}");
    assert_eq!(kind(run(&files, "SELECT 1", &[json!(1)])), "parameter");
}

#[test]
fn values_render_as_json() {
    let files = items(1);
    let record = run(
        &files,
        "SELECT x'00ff10' AS b, x'' AS e, CAST(x'ff' AS TEXT) AS bad, 'é' AS t, 1e999 AS inf, -1e999 AS ninf,
                1.25 AS r, 7 AS i, NULL AS n, 1 AS dup, 2 AS dup",
        &[],
    )
    .expect("query");
    let row = single(&record);
    assert_eq!(row["b"], json!({"$blob_hex": "00ff10"}));
    assert_eq!(row["e"], json!({"$blob_hex": ""}));
    assert_eq!(row["bad"], json!({"$text_hex": "ff"}));
    assert_eq!(row["t"], "é");
    assert_eq!(row["inf"], json!({"$real": "Infinity"}));
    assert_eq!(row["ninf"], json!({"$real": "-Infinity"}));
    assert_eq!(row["r"], 1.25);
    assert_eq!(row["i"], 7);
    assert_eq!(row["n"], Value::Null);
    assert_eq!(row["dup"], 2, "the last duplicate column wins");
}

#[test]
fn query_errors_are_reported_not_panicked() {
    let files = items(1);
    let error = run(&files, "SELECT * FROM missing_table", &[]).expect_err("no table");
    assert_eq!(error.kind_name(), "query");
    assert!(error.to_string().contains("no such table: missing_table"), "{error}");
    assert_eq!(kind(run(&files, "SELECT FROM", &[])), "query");
    assert_eq!(kind(run(&files, "SELECT abs(-9223372036854775808)", &[])), "query");
}

#[test]
fn the_directory_must_be_fresh() {
    let files = items(1);
    let planted = |name: &str| {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join(name), b"planted").expect("plant");
        let error = query_snapshot(&files, dir.path(), "SELECT 1", &[], &SqliteLimits::default()).expect_err(name);
        assert_eq!(error.kind_name(), "io", "{name}: {error}");
        // The planted file is untouched.
        assert_eq!(std::fs::read(dir.path().join(name)).expect("still there"), b"planted");
    };
    planted(SNAPSHOT_DB);
    planted(FOLDED_DB);
    planted("folded.db-shm");
    planted("folded.db-wal");
    planted("folded.db-journal");
}

#[cfg(unix)]
#[test]
fn a_planted_link_is_never_followed() {
    let files = items(1);
    let dir = tempfile::tempdir().expect("temporary directory");
    let target = tempfile::NamedTempFile::new().expect("target");
    std::os::unix::fs::symlink(target.path(), dir.path().join(SNAPSHOT_DB)).expect("link");
    let error = query_snapshot(&files, dir.path(), "SELECT 1", &[], &SqliteLimits::default()).expect_err("link");
    assert_eq!(error.kind_name(), "io");
    assert_eq!(std::fs::read(target.path()).expect("target").len(), 0);
    assert!(!Path::new(&dir.path().join(FOLDED_DB)).exists());
}

#[test]
fn snapshot_files_debug_shows_sizes_only() {
    let files = SnapshotFiles { db: b"SQLite format 3\0secret".to_vec(), wal: Some(vec![1, 2]), journal: None };
    let shown = format!("{files:?}");
    assert_eq!(shown, "SnapshotFiles { db_bytes: 22, wal_bytes: Some(2), journal_bytes: None }");
}
