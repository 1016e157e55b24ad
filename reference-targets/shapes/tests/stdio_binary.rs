//! End-to-end checks of the built `elengtis-shapes` binary, one shape at a time over stdio:
//! the tool list (names and required arguments) and a write-then-read round trip whose
//! effect is also read back from outside (the database file, the repository, the root, a
//! local HTTP listener); plus flag errors and clean exits (stdin EOF, SIGTERM over HTTP).

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeMap,
        ffi::OsString,
        net::SocketAddr,
        path::Path,
        process::Stdio,
        sync::{Arc, Mutex},
    };

    use elengtis_target_kit::testing::{
        Client, assert_ok, call, initialize_then_close_stdin, sigterm, spawn_http_binary, text, wait_success,
    };
    use rmcp::{
        ServiceExt as _,
        model::CallToolResult,
        transport::{ConfigureCommandExt as _, StreamableHttpClientTransport, TokioChildProcess},
    };
    use serde_json::{Value, json};
    use tokio::{
        io::{AsyncReadExt as _, AsyncWriteExt as _},
        net::TcpListener,
        process::Command,
    };

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-shapes");

    fn command(args: &[OsString]) -> Command {
        let mut command = Command::new(BIN);
        command.args(args);
        command
    }

    fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
        args.iter().map(|a| a.as_ref().to_owned()).collect()
    }

    /// The binary with `args` over stdio, initialised.
    async fn start(args: &[OsString]) -> Client {
        let command = Command::new(BIN).configure(|cmd| {
            cmd.args(args).env_remove("RUST_LOG");
        });
        let (transport, _stderr) =
            TokioChildProcess::builder(command).stderr(Stdio::null()).spawn().expect("spawn the server");
        ().serve(transport).await.expect("initialize over stdio")
    }

    fn server_name(client: &Client) -> String {
        client.peer_info().and_then(|i| i.server_info.as_ref().map(|s| s.name.clone())).unwrap_or_default()
    }

    /// Tool name → its required arguments, as listed.
    async fn tools(client: &Client) -> BTreeMap<String, Vec<String>> {
        let listed = client.list_all_tools().await.expect("tools/list");
        listed
            .iter()
            .map(|tool| {
                let required = tool
                    .input_schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map_or_else(Vec::new, |r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect());
                (tool.name.to_string(), required)
            })
            .collect()
    }

    fn expected(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries.iter().map(|(name, req)| ((*name).to_owned(), req.iter().map(|r| (*r).to_owned()).collect())).collect()
    }

    fn tool_error(result: &CallToolResult) -> &str {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        text(result)
    }

    #[tokio::test]
    async fn sqlite_starts_with_an_empty_file_and_round_trips_rows() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("data").join("test.db");
        let client = start(&os(&[&"--shape", &"sqlite", &"--db-path", &db])).await;
        assert_eq!(server_name(&client), "sqlite");
        assert_eq!(std::fs::metadata(&db).expect("created at start").len(), 0, "a fresh database file stays empty");
        assert_eq!(
            tools(&client).await,
            expected(&[
                ("read_query", &["query"]),
                ("write_query", &["query"]),
                ("create_table", &["query"]),
                ("list_tables", &[]),
                ("describe_table", &["table_name"]),
                ("append_insight", &["insight"]),
            ])
        );

        let created =
            call(&client, "create_table", json!({"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}))
                .await;
        assert_eq!(assert_ok(&created), "Table created successfully");
        let written =
            call(&client, "write_query", json!({"query": "INSERT INTO notes (body) VALUES ('CANARY-7')"})).await;
        assert_eq!(assert_ok(&written), r#"[{"affected_rows":1}]"#);
        let read = call(&client, "read_query", json!({"query": "SELECT id, body FROM notes"})).await;
        assert_eq!(assert_ok(&read), r#"[{"id":1,"body":"CANARY-7"}]"#);
        assert_eq!(assert_ok(&call(&client, "list_tables", json!({})).await), r#"[{"name":"notes"}]"#);

        // The row is in the file for any other reader.
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
        let body: String = conn.query_row("SELECT body FROM notes WHERE id = 1", [], |r| r.get(0)).expect("row");
        assert_eq!(body, "CANARY-7");
        drop(conn);

        let refused = call(&client, "read_query", json!({"query": "DELETE FROM notes"})).await;
        assert_eq!(tool_error(&refused), "Error: Only SELECT queries are allowed for read_query");
        let missing = call(&client, "write_query", json!({})).await;
        assert!(tool_error(&missing).contains("query"), "{missing:?}");
        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn git_commits_and_logs_in_its_repository() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let repo = dir.path().join("repo");
        let client = start(&os(&[&"--shape", &"git", &"--repo", &repo])).await;
        assert_eq!(server_name(&client), "mcp-git");
        assert!(repo.join(".git/logs/HEAD").is_file(), "--repo is initialised at start");
        assert_eq!(
            tools(&client).await,
            expected(&[
                ("git_status", &["repo_path"]),
                ("git_diff_unstaged", &["repo_path"]),
                ("git_commit", &["repo_path", "message"]),
                ("git_add", &["repo_path", "files"]),
                ("git_log", &["repo_path"]),
                ("git_create_branch", &["repo_path", "branch_name"]),
                ("git_show", &["repo_path", "revision"]),
            ])
        );

        let repo_path = repo.to_str().expect("UTF-8 path");
        std::fs::write(repo.join("README.md"), "hello\n").expect("write");
        let added = call(&client, "git_add", json!({"repo_path": repo_path, "files": ["README.md"]})).await;
        assert_eq!(assert_ok(&added), "Files staged successfully");
        let committed =
            call(&client, "git_commit", json!({"repo_path": repo_path, "message": "CANARY-9 backup"})).await;
        let hash =
            assert_ok(&committed).strip_prefix("Changes committed successfully with hash ").expect("hash").to_owned();
        let log = call(&client, "git_log", json!({"repo_path": repo_path})).await;
        assert!(assert_ok(&log).contains(&format!("Commit: {hash}\n")), "{log:?}");
        assert!(assert_ok(&log).contains("Message: CANARY-9 backup"), "{log:?}");
        let reflog = std::fs::read_to_string(repo.join(".git/logs/HEAD")).expect("reflog");
        assert_eq!(reflog, format!("{hash} commit: CANARY-9 backup\n"));
        let status = call(&client, "git_status", json!({"repo_path": repo_path})).await;
        assert!(assert_ok(&status).ends_with("nothing to commit, working tree clean"), "{status:?}");

        let missing = call(&client, "git_status", json!({"repo_path": dir.path().join("nope")})).await;
        assert!(tool_error(&missing).starts_with("Error: no such repository path"), "{missing:?}");
        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn files_round_trip_inside_the_root_and_refuse_outside() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path().join("root");
        let client = start(&os(&[&"--shape", &"files", &"--root", &root])).await;
        assert_eq!(server_name(&client), "secure-filesystem-server");
        assert_eq!(
            tools(&client).await,
            expected(&[
                ("read_file", &["path"]),
                ("write_file", &["path", "content"]),
                ("create_directory", &["path"]),
                ("list_directory", &["path"]),
                ("get_file_info", &["path"]),
                ("list_allowed_directories", &[]),
            ])
        );

        let written = call(&client, "write_file", json!({"path": "out.txt", "content": "CANARY-3"})).await;
        assert_eq!(assert_ok(&written), "Successfully wrote to out.txt");
        assert_eq!(std::fs::read_to_string(root.join("out.txt")).expect("on disk"), "CANARY-3");
        let absolute = root.canonicalize().expect("root").join("out.txt");
        let read = call(&client, "read_file", json!({"path": absolute})).await;
        assert_eq!(assert_ok(&read), "CANARY-3");

        for outside in [dir.path().join("escape.txt").display().to_string(), "../escape.txt".to_owned()] {
            let refused = call(&client, "write_file", json!({"path": outside, "content": "x"})).await;
            let message = tool_error(&refused);
            assert!(message.starts_with("Access denied - path outside allowed directories"), "{message}");
        }
        assert!(!dir.path().join("escape.txt").exists());
        client.cancel().await.expect("client closes");
    }

    /// A local HTTP listener answering each path from `routes` (404 otherwise) and recording
    /// the paths requested.
    struct Site {
        address: SocketAddr,
        requested: Arc<Mutex<Vec<String>>>,
    }

    impl Site {
        async fn start(routes: &[(&str, u16, &str, &str)]) -> Self {
            let routes: BTreeMap<String, (u16, String, String)> = routes
                .iter()
                .map(|(path, status, kind, body)| {
                    ((*path).to_owned(), (*status, (*kind).to_owned(), (*body).to_owned()))
                })
                .collect();
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let address = listener.local_addr().expect("address");
            let requested = Arc::new(Mutex::new(Vec::new()));
            let log = requested.clone();
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let mut head = Vec::new();
                    let mut chunk = [0_u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
                    log.lock().expect("lock").push(path.clone());
                    let (status, kind, body) =
                        routes.get(&path).cloned().unwrap_or((404, "text/plain".to_owned(), "not found".to_owned()));
                    let answer = format!(
                        "HTTP/1.0 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            });
            Self { address, requested }
        }

        fn url(&self, path: &str) -> String {
            format!("http://{}{path}", self.address)
        }

        fn requested(&self) -> Vec<String> {
            self.requested.lock().expect("lock").clone()
        }
    }

    #[tokio::test]
    async fn fetch_gets_pages_and_honours_robots_txt() {
        let site = Site::start(&[
            ("/page", 200, "text/plain", "CANARY-5 page body"),
            ("/broken", 500, "text/plain", "oops"),
            ("/doc", 200, "text/html", "<html><body><h1>Hi</h1><p>there</p></body></html>"),
        ])
        .await;
        let client = start(&os(&[&"--shape", &"fetch"])).await;
        assert_eq!(server_name(&client), "mcp-fetch");
        assert_eq!(tools(&client).await, expected(&[("fetch", &["url"])]));

        let page = site.url("/page");
        let fetched = call(&client, "fetch", json!({"url": page})).await;
        assert_eq!(
            assert_ok(&fetched),
            format!(
                "Content type text/plain cannot be simplified to markdown, but here is the raw content:\n\
                 Contents of {page}:\nCANARY-5 page body"
            )
        );
        assert_eq!(site.requested(), ["/robots.txt", "/page"], "robots.txt first (a 404 allows)");
        let cut = call(&client, "fetch", json!({"url": page, "max_length": 8})).await;
        assert!(assert_ok(&cut).ends_with(":\nCANARY-5\n\n<error>Content truncated. Call the fetch tool with a start_index of 8 to get more content.</error>"), "{cut:?}");
        let html = call(&client, "fetch", json!({"url": site.url("/doc")})).await;
        assert_eq!(assert_ok(&html), format!("Contents of {}:\n# Hi\n\nthere", site.url("/doc")));

        let broken = call(&client, "fetch", json!({"url": site.url("/broken")})).await;
        assert_eq!(tool_error(&broken), format!("Failed to fetch {} - status code 500", site.url("/broken")));
        let closed = {
            let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            unused.local_addr().expect("address")
        };
        let refused = call(&client, "fetch", json!({"url": format!("http://{closed}/x")})).await;
        assert_eq!(
            tool_error(&refused),
            format!("Failed to fetch robots.txt http://{closed}/robots.txt due to a connection issue")
        );

        let forbidding = Site::start(&[
            ("/robots.txt", 200, "text/plain", "User-agent: *\nDisallow: /"),
            ("/page", 200, "text/plain", "never served"),
        ])
        .await;
        let blocked = call(&client, "fetch", json!({"url": forbidding.url("/page")})).await;
        let message = tool_error(&blocked);
        assert!(message.starts_with("The sites robots.txt ("), "{message}");
        assert!(message.contains("Disallow: /"), "{message}");
        assert_eq!(forbidding.requested(), ["/robots.txt"], "the page itself is never requested");
        client.cancel().await.expect("client closes");

        // --ignore-robots-txt skips the check.
        let client = start(&os(&[&"--shape", &"fetch", &"--ignore-robots-txt"])).await;
        let fetched = call(&client, "fetch", json!({"url": forbidding.url("/page"), "raw": true})).await;
        assert!(assert_ok(&fetched).ends_with(":\nnever served"), "{fetched:?}");
        assert_eq!(forbidding.requested(), ["/robots.txt", "/page"]);
        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn bad_flags_fail_with_a_usage_error() {
        let dir = tempfile::tempdir().expect("temporary directory");
        for args in [
            os(&[&"--shape", &"nope"]),
            os(&[&"--shape", &"sqlite"]),
            os(&[&"--shape", &"files"]),
            os(&[&"--shape", &"git", &"--root", &dir.path()]),
            os(&[&"--shape", &"fetch", &"--db-path", &dir.path().join("x.db")]),
        ] {
            let output = command(&args).stdin(Stdio::null()).output().await.expect("run the server");
            assert_eq!(output.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(output.stdout.is_empty());
        }
        assert!(!dir.path().join("x.db").exists());
    }

    #[tokio::test]
    async fn an_unusable_path_fails_at_start() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "x").expect("write");
        for (args, says) in [
            (os(&[&"--shape", &"sqlite", &"--db-path", &file.join("db")]), "failed to use the database"),
            (os(&[&"--shape", &"files", &"--root", &file]), "failed to use the allowed directory"),
            (os(&[&"--shape", &"git", &"--repo", &file]), "failed to use the repository"),
        ] {
            let output = command(&args).stdin(Stdio::null()).output().await.expect("run the server");
            assert_eq!(output.status.code(), Some(1), "{args:?}");
            assert!(output.stdout.is_empty());
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.contains(says), "{stderr}");
        }
    }

    #[tokio::test]
    async fn every_shape_exits_cleanly_when_stdin_closes() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = |name: &str| dir.path().join(name);
        for (args, name) in [
            (os(&[&"--shape", &"sqlite", &"--db-path", &path("a.db")]), "sqlite"),
            (os(&[&"--shape", &"git"]), "mcp-git"),
            (os(&[&"--shape", &"files", &"--root", &path("root")]), "secure-filesystem-server"),
            (os(&[&"--shape", &"fetch"]), "mcp-fetch"),
        ] {
            let reply = initialize_then_close_stdin(command(&args)).await;
            assert_eq!(reply["result"]["serverInfo"]["name"], name);
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn http_binary_serves_and_exits_cleanly_on_sigterm() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path().join("root");
        let (mut child, address) = spawn_http_binary(command(&os(&[&"--shape", &"files", &"--root", &root]))).await;

        let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
        let client = ().serve(transport).await.expect("initialize over HTTP");
        let written = call(&client, "write_file", json!({"path": "over-http.txt", "content": "h"})).await;
        assert_eq!(assert_ok(&written), "Successfully wrote to over-http.txt");
        assert!(Path::new(&root.join("over-http.txt")).is_file());

        sigterm(&child).await;
        wait_success(&mut child).await;
        drop(client);
    }
}
