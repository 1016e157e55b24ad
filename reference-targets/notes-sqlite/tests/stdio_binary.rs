//! End-to-end checks of the built `elengtis-notes` binary: a seeded stdio session whose
//! effect is read back from the database file, flag errors, and clean exits on stdin EOF
//! and SIGTERM (stdio and HTTP).

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use elengtis_target_kit::testing::{
        arguments, call, initialize_then_close_stdin, sigterm, sigterm_before_initialize, spawn_http_binary,
        stdin_closed_before_initialize, wait_success,
    };
    use rmcp::{
        ServiceExt as _,
        model::CallToolRequestParams,
        transport::{ConfigureCommandExt as _, StreamableHttpClientTransport, TokioChildProcess},
    };
    use serde_json::{Value, json};
    use tokio::process::Command;

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-notes");

    /// The server (stdio unless told otherwise) with its database in `dir`.
    fn notes_command(dir: &tempfile::TempDir) -> Command {
        let mut command = Command::new(BIN);
        command.arg("--db").arg(dir.path().join("notes.db"));
        command
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
        let reply = initialize_then_close_stdin(notes_command(&dir)).await;
        assert_eq!(reply["result"]["serverInfo"]["name"], "synthetic-notes");
    }

    #[tokio::test]
    async fn binary_exits_cleanly_when_stdin_closes_before_initialize() {
        let dir = tempfile::tempdir().expect("temporary directory");
        stdin_closed_before_initialize(notes_command(&dir)).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdio_binary_exits_cleanly_on_sigterm_before_initialize() {
        let dir = tempfile::tempdir().expect("temporary directory");
        sigterm_before_initialize(notes_command(&dir)).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn http_binary_serves_and_exits_cleanly_on_sigterm() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temporary directory");
        let (mut child, address) = spawn_http_binary(notes_command(&dir)).await;

        let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
        let client = ().serve(transport).await.expect("initialize over HTTP");
        let added = call(&client, "add_note", json!({"title": "over http", "body": "b"})).await;
        assert_eq!(added.is_error, Some(false), "{added:?}");

        // Terminate while the session is still open.
        sigterm(&child).await;
        wait_success(&mut child).await;
        drop(client);
    }
}
