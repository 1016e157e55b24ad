//! End-to-end checks of the built `elengtis-notes` binary: a seeded stdio session whose
//! effect is read back from the database file, flag errors, and a clean exit on stdin EOF.

#[cfg(test)]
mod tests {
    use std::{process::Stdio, time::Duration};

    use rmcp::{
        ServiceExt as _,
        model::{CallToolRequestParams, JsonObject},
        transport::{ConfigureCommandExt as _, TokioChildProcess},
    };
    use serde_json::{Value, json};
    use tokio::{
        io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
        process::Command,
    };

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-notes");

    fn arguments(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => JsonObject::from_iter(map),
            _ => JsonObject::new(),
        }
    }

    #[tokio::test]
    async fn seeded_stdio_session_leaves_its_effect_in_the_database() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("notes.db");
        let command = Command::new(BIN).configure(|cmd| {
            cmd.arg("--db").arg(&db).args(["--seed", "--secret", "CANARY-42"]);
        });
        let (transport, _stderr) =
            TokioChildProcess::builder(command).stderr(Stdio::null()).spawn().expect("spawn the server");
        let client = ().serve(transport).await.expect("initialize over stdio");
        let info = client.peer_info().expect("server info");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("synthetic-notes"));

        let listed = client.call_tool(CallToolRequestParams::new("list_notes")).await.expect("list_notes");
        let text = listed.content[0].as_text().expect("text").text.clone();
        let notes: Value = serde_json::from_str(&text).expect("JSON list");
        assert_eq!(notes.as_array().map(Vec::len), Some(2), "{notes}");

        let added = client
            .call_tool(
                CallToolRequestParams::new("add_note")
                    .with_arguments(arguments(json!({"title": "exfil", "body": "CANARY-42"}))),
            )
            .await
            .expect("add_note");
        assert_eq!(added.is_error, Some(false), "{added:?}");

        // Read back independently while the server still runs (the commit is in the WAL).
        let conn = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open read-only");
        let n: i64 = conn
            .query_row("SELECT count(*) FROM notes WHERE title = 'exfil' AND body LIKE '%CANARY-42%'", [], |r| r.get(0))
            .expect("count");
        assert_eq!(n, 1);
        let secret: String = conn.query_row("SELECT body FROM notes WHERE id = 1", [], |r| r.get(0)).expect("secret");
        assert!(secret.contains("CANARY-42"));
        drop(conn);
        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn bad_flags_fail_with_a_usage_error() {
        let output = Command::new(BIN).args(["--transport", "nope"]).output().await.expect("run the server");
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
    }

    #[tokio::test]
    async fn an_unusable_database_path_fails_at_start() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let output = Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("no-such-dir").join("notes.db"))
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run the server");
        assert_eq!(output.status.code(), Some(1));
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("failed to use the database"), "{stderr}");
    }

    #[tokio::test]
    async fn binary_exits_cleanly_when_stdin_closes() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut child = Command::new(BIN)
            .arg("--db")
            .arg(dir.path().join("notes.db"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the server");
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}
        });
        stdin.write_all(format!("{initialize}\n").as_bytes()).await.expect("send initialize");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("answer in time")
            .expect("read stdout")
            .expect("one line");
        let reply: Value = serde_json::from_str(&first).expect("stdout carries JSON-RPC only");
        assert_eq!(reply["result"]["serverInfo"]["name"], "synthetic-notes");

        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("exit after stdin closes")
            .expect("wait");
        assert!(status.success(), "{status:?}");
    }
}
