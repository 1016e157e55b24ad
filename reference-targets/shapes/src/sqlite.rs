//! `--shape sqlite`: the tools of PyPI `mcp-server-sqlite` over one database file.
//!
//! As the real server, the start opens and closes the file without writing to it (a new file
//! stays empty: 0 bytes), and every call opens its own connection, runs one statement and
//! commits. Rows are returned as JSON text (the real server prints Python's `str()` of the
//! same list of dicts). `append_insight` keeps the memo in memory.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use rmcp::model::{JsonObject, Tool};
use rusqlite::{Connection, types::ValueRef};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::server::{ToolOutcome, arguments, blocking, tool};

/// The six tools, as the real server lists them.
pub fn tools() -> Vec<Tool> {
    let query = |description: &str| {
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": description}},
            "required": ["query"],
        })
    };
    vec![
        tool(json!({
            "name": "read_query",
            "description": "Execute a SELECT query on the SQLite database",
            "inputSchema": query("SELECT SQL query to execute"),
        })),
        tool(json!({
            "name": "write_query",
            "description": "Execute an INSERT, UPDATE, or DELETE query on the SQLite database",
            "inputSchema": query("SQL query to execute"),
        })),
        tool(json!({
            "name": "create_table",
            "description": "Create a new table in the SQLite database",
            "inputSchema": query("CREATE TABLE SQL statement"),
        })),
        tool(json!({
            "name": "list_tables",
            "description": "List all tables in the SQLite database",
            "inputSchema": {"type": "object", "properties": {}},
        })),
        tool(json!({
            "name": "describe_table",
            "description": "Get the schema information for a specific table",
            "inputSchema": {
                "type": "object",
                "properties": {"table_name": {"type": "string", "description": "Name of the table to describe"}},
                "required": ["table_name"],
            },
        })),
        tool(json!({
            "name": "append_insight",
            "description": "Add a business insight to the memo",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "insight": {"type": "string", "description": "Business insight discovered from data analysis"},
                },
                "required": ["insight"],
            },
        })),
    ]
}

#[derive(Debug, Deserialize)]
struct QueryArgs {
    query: String,
}

#[derive(Debug, Deserialize)]
struct TableArgs {
    table_name: String,
}

#[derive(Debug, Deserialize)]
struct InsightArgs {
    insight: String,
}

/// The database file and the memo.
#[derive(Debug)]
pub struct Database {
    path: PathBuf,
    insights: Arc<Mutex<Vec<String>>>,
}

impl Database {
    /// Creates the parent directories and the file (empty) when missing, as the real
    /// server's start does: a connection opened and closed without a statement.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let conn = Connection::open(path)?;
        conn.close().map_err(|(_, e)| e)?;
        Ok(Self { path: path.to_path_buf(), insights: Arc::default() })
    }

    pub async fn call(&self, name: &str, args: JsonObject) -> Option<ToolOutcome> {
        let outcome = match name {
            "read_query" => self.read_query(arguments::<QueryArgs>(name, args)).await,
            "write_query" => self.write_query(arguments::<QueryArgs>(name, args)).await,
            "create_table" => self.create_table(arguments::<QueryArgs>(name, args)).await,
            "list_tables" => {
                self.run(|conn| rows(conn, "SELECT name FROM sqlite_master WHERE type='table'", &[])).await
            }
            "describe_table" => match arguments::<TableArgs>(name, args) {
                Ok(TableArgs { table_name }) => {
                    self.run(move |conn| rows(conn, "SELECT * FROM pragma_table_info(?1)", &[&table_name])).await
                }
                Err(e) => Err(e),
            },
            "append_insight" => arguments::<InsightArgs>(name, args).and_then(|InsightArgs { insight }| {
                let mut memo = self.insights.lock().map_err(|_| "Error: the memo is unavailable".to_owned())?;
                memo.push(insight);
                tracing::info!(insights = memo.len(), "insight added");
                Ok("Insight added to memo".to_owned())
            }),
            _ => return None,
        };
        Some(outcome)
    }

    async fn read_query(&self, args: Result<QueryArgs, String>) -> ToolOutcome {
        let QueryArgs { query } = args?;
        if !starts_with_keyword(&query, "SELECT") {
            return Err("Error: Only SELECT queries are allowed for read_query".to_owned());
        }
        self.run(move |conn| rows(conn, &query, &[])).await
    }

    async fn write_query(&self, args: Result<QueryArgs, String>) -> ToolOutcome {
        let QueryArgs { query } = args?;
        if starts_with_keyword(&query, "SELECT") {
            return Err("Error: SELECT queries are not allowed for write_query".to_owned());
        }
        self.run(move |conn| {
            let affected = conn.execute(&query, [])?;
            Ok(json!([{"affected_rows": affected}]).to_string())
        })
        .await
    }

    async fn create_table(&self, args: Result<QueryArgs, String>) -> ToolOutcome {
        let QueryArgs { query } = args?;
        if !query.trim().to_uppercase().starts_with("CREATE TABLE") {
            return Err("Error: Only CREATE TABLE statements are allowed".to_owned());
        }
        self.run(move |conn| {
            conn.execute(&query, [])?;
            Ok("Table created successfully".to_owned())
        })
        .await
    }

    /// Runs `op` on a fresh connection (committed when it returns); SQLite errors become
    /// `Database error: …`.
    async fn run(&self, op: impl FnOnce(&Connection) -> rusqlite::Result<String> + Send + 'static) -> ToolOutcome {
        let path = self.path.clone();
        blocking(move || {
            let conn = Connection::open(&path).map_err(database_error)?;
            op(&conn).map_err(database_error)
        })
        .await
    }
}

fn database_error(e: rusqlite::Error) -> String {
    tracing::warn!(error = %e, "database error");
    format!("Database error: {e}")
}

/// Whether `query` starts with `keyword`, as the real server tests it (upper-cased, trimmed).
fn starts_with_keyword(query: &str, keyword: &str) -> bool {
    query.trim().to_uppercase().starts_with(keyword)
}

/// The rows of one query as a JSON array of objects, columns in order.
fn rows(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> rusqlite::Result<String> {
    let mut stmt = conn.prepare(sql)?;
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut object = Map::new();
        for (i, column) in columns.iter().enumerate() {
            object.insert(column.clone(), json_value(row.get_ref(i)?));
        }
        out.push(Value::Object(object));
    }
    Ok(Value::Array(out).to_string())
}

fn json_value(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(b.iter().map(|byte| format!("{byte:02x}")).collect()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Database;

    fn args(value: Value) -> rmcp::model::JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn a_new_file_stays_empty_and_an_existing_one_is_kept() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("nested").join("test.db");
        let db = Database::open(&path).expect("open");
        assert_eq!(std::fs::metadata(&path).expect("created").len(), 0);
        let created = db.call("create_table", args(json!({"query": "CREATE TABLE t (x)"}))).await;
        assert_eq!(created, Some(Ok("Table created successfully".to_owned())));
        let size = std::fs::metadata(&path).expect("file").len();
        assert!(size > 0);
        Database::open(&path).expect("reopen");
        assert_eq!(std::fs::metadata(&path).expect("file").len(), size);
    }

    #[tokio::test]
    async fn queries_are_checked_and_errors_are_tool_errors() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = Database::open(&dir.path().join("t.db")).expect("open");
        let call = |name: &'static str, query: &'static str| db.call(name, args(json!({"query": query})));
        assert_eq!(
            call("read_query", "DELETE FROM t").await,
            Some(Err("Error: Only SELECT queries are allowed for read_query".to_owned()))
        );
        assert_eq!(
            call("write_query", " select 1").await,
            Some(Err("Error: SELECT queries are not allowed for write_query".to_owned()))
        );
        assert_eq!(
            call("create_table", "DROP TABLE t").await,
            Some(Err("Error: Only CREATE TABLE statements are allowed".to_owned()))
        );
        let missing = call("read_query", "SELECT * FROM nope").await.expect("a sqlite tool");
        assert_eq!(missing, Err("Database error: no such table: nope".to_owned()));
        assert_eq!(
            call("create_table", "CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL, b BLOB)").await,
            Some(Ok("Table created successfully".to_owned()))
        );
        assert_eq!(
            call("write_query", "INSERT INTO t (v, b) VALUES (1.5, x'00ff'), (NULL, NULL)").await,
            Some(Ok(r#"[{"affected_rows":2}]"#.to_owned()))
        );
        assert_eq!(
            call("read_query", "SELECT * FROM t ORDER BY id").await,
            Some(Ok(r#"[{"id":1,"v":1.5,"b":"00ff"},{"id":2,"v":null,"b":null}]"#.to_owned()))
        );
        assert_eq!(db.call("list_tables", args(json!({}))).await, Some(Ok(r#"[{"name":"t"}]"#.to_owned())));
        let described = db.call("describe_table", args(json!({"table_name": "t"}))).await.expect("tool");
        let described: Value = serde_json::from_str(&described.expect("ok")).expect("JSON");
        assert_eq!(described[0]["name"], "id");
        assert_eq!(described[0]["pk"], 1);
        assert_eq!(
            db.call("append_insight", args(json!({"insight": "sales rise"}))).await,
            Some(Ok("Insight added to memo".to_owned()))
        );
        assert!(db.call("no_such_tool", args(json!({}))).await.is_none());
    }
}
