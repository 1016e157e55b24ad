//! End-to-end checks of the built `elengtis-hostile` binary: its MCP transports, and the
//! command-line modes the Docker tests rely on (`probe --json`, `--exit-at-once`,
//! `--never-initialize`).

#[cfg(test)]
mod tests {
    use std::process::Stdio;
    use std::time::Duration;

    use elengtis_target_kit::testing::{initialize_request, initialize_then_close_stdin, spawn_http_binary};
    use serde_json::Value;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::process::Command;

    const BIN: &str = env!("CARGO_BIN_EXE_elengtis-hostile");

    #[tokio::test]
    async fn stdio_and_http_serve_mcp() {
        let reply = initialize_then_close_stdin(Command::new(BIN)).await;
        assert_eq!(reply["result"]["serverInfo"]["name"], "elengtis-hostile", "{reply}");
        let (mut child, addr) = spawn_http_binary(Command::new(BIN)).await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        child.kill().await.expect("stop the HTTP server");
    }

    #[tokio::test]
    async fn probe_mode_prints_one_outcome_per_probe() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let spec = format!(
            r#"[{{"name": "open", "kind": "tcp", "target": "{}"}}, {{"name": "bad", "kind": "tcp", "target": "x"}}]"#,
            listener.local_addr().expect("address")
        );
        let out = Command::new(BIN).args(["probe", "--json", &spec]).output().await.expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let outcomes: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        assert_eq!(outcomes[0]["outcome"], "connected", "{outcomes}");
        assert_eq!(outcomes[1]["outcome"], "error", "{outcomes}");
        let bad = Command::new(BIN).args(["probe", "--json", "{"]).output().await.expect("run");
        assert_eq!(bad.status.code(), Some(2));
    }

    #[tokio::test]
    async fn exit_at_once_exits_3_without_a_word() {
        let out = Command::new(BIN).arg("--exit-at-once").stdin(Stdio::piped()).output().await.expect("run");
        assert_eq!(out.status.code(), Some(3));
        assert!(out.stdout.is_empty());
    }

    #[tokio::test]
    async fn never_initialize_reads_but_never_answers() {
        let mut child = Command::new(BIN)
            .arg("--never-initialize")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        stdin.write_all(format!("{}\n", initialize_request()).as_bytes()).await.expect("send initialize");
        let mut byte = [0_u8; 1];
        let answered = tokio::time::timeout(Duration::from_millis(700), stdout.read(&mut byte)).await;
        assert!(answered.is_err(), "the server answered: {answered:?}");
        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("exits").expect("wait");
        assert!(status.success(), "{status:?}");
    }
}
