//! The outbox: one SQLite file with the table
//! `sent_emails(id INTEGER PRIMARY KEY, to_addr TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL)`.
//! A mail counts as sent only once its row is committed here; a verifier reads the file from
//! outside (`container_sqlite_query`). The default rollback journal keeps every committed row
//! in the main file, so a snapshot of that one file is complete.

use std::{
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

use rusqlite::{Connection, params};

/// Longest recipient, subject or body accepted, in bytes (keeps the file small).
pub const MAX_FIELD_BYTES: usize = 64 * 1024;
/// Most rows the outbox holds.
pub const MAX_ROWS: i64 = 1000;

/// Why the outbox failed; the message is what the model sees as a tool error.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// A field is too long, or the outbox is full.
    #[error("{0}")]
    Invalid(String),
    /// SQLite failed.
    #[error("failed to {what}: {source}")]
    Sqlite {
        /// The operation.
        what: &'static str,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
}

fn sqlite(what: &'static str) -> impl FnOnce(rusqlite::Error) -> MailError {
    move |source| MailError::Sqlite { what, source }
}

/// The outbox. Clones share one connection.
#[derive(Debug, Clone)]
pub struct MailDb {
    conn: Arc<Mutex<Connection>>,
}

impl MailDb {
    /// Opens (creating if needed) the outbox at `path`.
    pub fn open(path: &Path) -> Result<Self, MailError> {
        let conn = Connection::open(path).map_err(sqlite("open the mail database"))?;
        conn.execute_batch(
            "PRAGMA busy_timeout=5000;
             CREATE TABLE IF NOT EXISTS sent_emails(
                 id INTEGER PRIMARY KEY,
                 to_addr TEXT NOT NULL,
                 subject TEXT NOT NULL,
                 body TEXT NOT NULL
             );",
        )
        .map_err(sqlite("create the sent_emails table"))?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)) })
    }

    /// Commits one sent mail and returns its row id.
    pub fn send(&self, to: &str, subject: &str, body: &str) -> Result<i64, MailError> {
        for (name, value) in [("to", to), ("subject", subject), ("body", body)] {
            if value.len() > MAX_FIELD_BYTES {
                return Err(MailError::Invalid(format!("{name} is longer than {MAX_FIELD_BYTES} bytes")));
            }
        }
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let tx = conn.unchecked_transaction().map_err(sqlite("send the mail"))?;
        let rows: i64 =
            tx.query_row("SELECT count(*) FROM sent_emails", [], |r| r.get(0)).map_err(sqlite("send the mail"))?;
        if rows >= MAX_ROWS {
            return Err(MailError::Invalid(format!("the outbox is full ({MAX_ROWS} mails)")));
        }
        tx.execute("INSERT INTO sent_emails(to_addr, subject, body) VALUES (?1, ?2, ?3)", params![to, subject, body])
            .map_err(sqlite("send the mail"))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(sqlite("send the mail"))?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_FIELD_BYTES, MailDb};

    #[test]
    fn a_sent_mail_is_a_committed_row_another_reader_sees() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("mail.db");
        let db = MailDb::open(&path).expect("open");
        assert_eq!(db.send("ops@example.com", "Status", "all good").expect("send"), 1);
        let reader = rusqlite::Connection::open(&path).expect("second connection");
        let row: (String, String, String) = reader
            .query_row("SELECT to_addr, subject, body FROM sent_emails", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("row");
        assert_eq!(row, ("ops@example.com".into(), "Status".into(), "all good".into()));
        assert!(db.send("x", "s", &"b".repeat(MAX_FIELD_BYTES + 1)).is_err());
        drop(db);
        // Reopening keeps the rows.
        assert_eq!(MailDb::open(&path).expect("reopen").send("y", "s", "b").expect("send"), 2);
    }
}
