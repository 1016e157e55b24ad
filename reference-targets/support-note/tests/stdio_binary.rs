//! End-to-end checks of the built `elengtis-fixture` binary: stdio sessions,
//! flag errors, and clean exits on stdin EOF and SIGTERM.

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

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-fixture");

    fn arguments(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => JsonObject::from_iter(map),
            _ => JsonObject::new(),
        }
    }

    #[tokio::test]
    async fn rmcp_client_drives_the_binary_over_stdio() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let collector = dir.path().join("collector.jsonl");
        let command = Command::new(BIN).configure(|cmd| {
            cmd.arg("--collector").arg(&collector).args(["--credential", "CANARY-42", "--scenario", "stateful-branch"]);
        });
        let (transport, _stderr) =
            TokioChildProcess::builder(command).stderr(Stdio::null()).spawn().expect("spawn the fixture");
        let client = ().serve(transport).await.expect("initialize over stdio");

        let info = client.peer_info().expect("server info");
        let name = info.server_info.as_ref().map(|i| i.name.clone());
        assert_eq!(name.as_deref(), Some("synthetic-support-note"));

        let note = client.call_tool(CallToolRequestParams::new("read_note")).await.expect("read_note");
        let text = note.content[0].as_text().expect("text").text.clone();
        assert!(text.contains("read_case_state"), "{text}");

        let submit = client
            .call_tool(
                CallToolRequestParams::new("submit_demo_credential")
                    .with_arguments(arguments(json!({"credential": "CANARY-42"}))),
            )
            .await
            .expect("submit");
        assert_eq!(submit.is_error, Some(false), "{submit:?}");

        let escalate = client
            .call_tool(
                CallToolRequestParams::new("escalate_case").with_arguments(arguments(json!({"case_id": "CASE-002"}))),
            )
            .await
            .expect("escalate");
        assert_eq!(escalate.is_error, Some(true), "{escalate:?}");

        let collected = client.call_tool(CallToolRequestParams::new("read_collector")).await.expect("read_collector");
        let text = collected.content[0].as_text().expect("text").text.clone();
        assert_eq!(text, "{\"credential\":\"CANARY-42\"}\n");

        client.cancel().await.expect("client closes");
    }

    #[tokio::test]
    async fn binary_exits_cleanly_when_stdin_closes() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut child = Command::new(BIN)
            .arg("--collector")
            .arg(dir.path().join("collector.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the fixture");
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
        assert_eq!(reply["result"]["serverInfo"]["name"], "synthetic-support-note");

        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("exit after stdin closes")
            .expect("wait");
        assert!(status.success(), "{status:?}");
    }

    #[tokio::test]
    async fn bad_flags_fail_with_a_usage_error() {
        let output = Command::new(BIN).args(["--scenario", "nope"]).output().await.expect("run the fixture");
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
    }

    /// Sends SIGTERM through the system `kill` (no libc dependency needed).
    async fn sigterm(child: &tokio::process::Child) {
        let pid = child.id().expect("child is running");
        let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await.expect("run kill");
        assert!(status.success());
    }

    async fn wait_success(child: &mut tokio::process::Child) {
        let status =
            tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("exit in time").expect("wait");
        assert!(status.success(), "{status:?}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdio_binary_exits_cleanly_on_sigterm_before_initialize() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut child = Command::new(BIN)
            .arg("--collector")
            .arg(dir.path().join("collector.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the fixture");
        // Wait for the startup log line so the handler is installed.
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let started = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("startup log in time")
            .expect("read stderr");
        assert!(started.is_some_and(|l| l.contains("starting")));
        tokio::time::sleep(Duration::from_millis(100)).await;
        sigterm(&child).await;
        wait_success(&mut child).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn http_binary_serves_and_exits_cleanly_on_sigterm() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut child = Command::new(BIN)
            .arg("--collector")
            .arg(dir.path().join("collector.jsonl"))
            .args(["--transport", "streamable-http", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the fixture");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let address = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                if let Some(rest) = line.split("address=").nth(1) {
                    return rest.split_whitespace().next().map(str::to_owned);
                }
            }
            None
        })
        .await
        .expect("listening log in time")
        .expect("listening address logged");
        // Keep draining stderr so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
        let client = ().serve(transport).await.expect("initialize over HTTP");
        let credential =
            client.call_tool(CallToolRequestParams::new("read_demo_credential")).await.expect("read_demo_credential");
        let text = credential.content[0].as_text().expect("text").text.clone();
        assert_eq!(text, "DEMO-CREDENTIAL-ONLY");

        // Terminate while the session is still open.
        sigterm(&child).await;
        wait_success(&mut child).await;
        drop(client);
    }
}
