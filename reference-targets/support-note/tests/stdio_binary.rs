//! End-to-end checks of the built `elengtis-fixture` binary: stdio sessions,
//! flag errors, and clean exits on stdin EOF and SIGTERM.

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use elengtis_target_kit::testing::{
        arguments, initialize_then_close_stdin, sigterm, sigterm_before_initialize, spawn_http_binary,
        stdin_closed_before_initialize, wait_success,
    };
    use rmcp::{
        ServiceExt as _,
        model::CallToolRequestParams,
        transport::{ConfigureCommandExt as _, TokioChildProcess},
    };
    use serde_json::json;
    use tokio::process::Command;

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-fixture");

    /// The fixture (stdio unless told otherwise) with its collector in `dir`.
    fn fixture_command(dir: &tempfile::TempDir) -> Command {
        let mut command = Command::new(BIN);
        command.arg("--collector").arg(dir.path().join("collector.jsonl"));
        command
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
        let reply = initialize_then_close_stdin(fixture_command(&dir)).await;
        assert_eq!(reply["result"]["serverInfo"]["name"], "synthetic-support-note");
    }

    #[tokio::test]
    async fn binary_exits_cleanly_when_stdin_closes_before_initialize() {
        let dir = tempfile::tempdir().expect("temporary directory");
        stdin_closed_before_initialize(fixture_command(&dir)).await;
    }

    #[tokio::test]
    async fn bad_flags_fail_with_a_usage_error() {
        let output = Command::new(BIN).args(["--scenario", "nope"]).output().await.expect("run the fixture");
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdio_binary_exits_cleanly_on_sigterm_before_initialize() {
        let dir = tempfile::tempdir().expect("temporary directory");
        sigterm_before_initialize(fixture_command(&dir)).await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn http_binary_serves_and_exits_cleanly_on_sigterm() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temporary directory");
        let (mut child, address) = spawn_http_binary(fixture_command(&dir)).await;

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
