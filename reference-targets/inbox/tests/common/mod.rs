//! Shared by the binary tests: a running `elengtis-inbox` over stdio (the test owns the child
//! process, so it can read its exit status, and captures its stderr), and a local HTTP site
//! that records the requests it receives.

// Each test crate uses part of it.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, JsonObject},
    service::{RunningService, ServiceError},
};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::TcpListener,
    process::{Child, Command},
};

pub const BIN: &str = env!("CARGO_BIN_EXE_elengtis-inbox");

/// How long the server gets to answer, log or exit.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// `command` without any `INBOX_*` variable of the test's own environment, nor `RUST_LOG`.
pub fn clean(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("INBOX_") {
            command.env_remove(&name);
        }
    }
    command.env_remove("RUST_LOG")
}

/// A running server.
pub struct Inbox {
    pub client: RunningService<RoleClient, ()>,
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// What a tool call gave: `error` is `isError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub error: bool,
    pub text: String,
}

impl Outcome {
    /// The text of a successful call.
    pub fn ok(&self) -> &str {
        assert!(!self.error, "{self:?}");
        &self.text
    }

    /// The text of a tool error.
    pub fn err(&self) -> &str {
        assert!(self.error, "{self:?}");
        &self.text
    }
}

impl Inbox {
    /// Starts the server with `args` and the variables `env` (and no other `INBOX_*`).
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BIN);
        clean(&mut command)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn the inbox");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().expect("lock").push(line);
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let client = tokio::time::timeout(PATIENCE, ().serve((stdout, stdin)))
            .await
            .expect("initialize in time")
            .expect("initialize over stdio");
        Self { client, child, stderr: lines }
    }

    /// Calls `name` with the object `args`; `Err` when the call got no answer.
    pub async fn try_call(&self, name: &str, args: Value) -> Result<Outcome, ServiceError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(JsonObject::from_iter(map));
        }
        let result = tokio::time::timeout(PATIENCE, self.client.call_tool(params)).await.expect("call ends in time")?;
        let text =
            result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n");
        Ok(Outcome { error: result.is_error == Some(true), text })
    }

    /// Calls `name` with the object `args` and expects an answer.
    pub async fn call(&self, name: &str, args: Value) -> Outcome {
        self.try_call(name, args).await.expect("the call is answered")
    }

    /// The outbox, parsed.
    pub async fn outbox(&self) -> Vec<Value> {
        let text = self.call("outbox", serde_json::json!({})).await.ok().to_owned();
        serde_json::from_str(&text).expect("the outbox is a JSON list")
    }

    /// The first stderr line starting with `prefix`, waiting for it.
    pub async fn stderr_line(&self, prefix: &str) -> Option<String> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if let Some(line) = self.stderr.lock().expect("lock").iter().find(|l| l.starts_with(prefix)) {
                return Some(line.clone());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// Every stderr line so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().expect("lock").clone()
    }

    /// Waits for the process to exit and returns its status.
    pub async fn exit_status(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("exit in time").expect("wait")
    }

    /// Closes the session (and so stdin) and checks the server exits successfully.
    pub async fn stop(self) {
        let Self { client, mut child, stderr } = self;
        let _ = client.cancel().await;
        let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("exit in time").expect("wait");
        assert!(status.success(), "{status:?}: {:?}", stderr.lock().expect("lock"));
    }
}

/// A local HTTP site answering every request with one status and body (or never answering),
/// recording the request heads.
pub struct Site {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Site {
    /// Answers `status` with `body`.
    pub async fn start(status: u16, body: String) -> Self {
        Self::with(Some(format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}", body.len()))).await
    }

    /// Reads the request and never answers.
    pub async fn silent() -> Self {
        Self::with(None).await
    }

    /// Answers the bytes `raw` as they are.
    pub async fn raw(raw: &str) -> Self {
        Self::with(Some(raw.to_owned())).await
    }

    async fn with(answer: Option<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0_u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    seen.lock().expect("lock").push(String::from_utf8_lossy(&head).into_owned());
                    match answer {
                        Some(answer) => {
                            let _ = stream.write_all(answer.as_bytes()).await;
                        }
                        None => tokio::time::sleep(Duration::from_secs(30)).await,
                    }
                });
            }
        });
        Self { addr, requests }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The request heads received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

/// A loopback URL nobody listens on.
pub fn closed_port_url() -> String {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = unused.local_addr().expect("address");
    drop(unused);
    format!("http://{addr}/")
}
