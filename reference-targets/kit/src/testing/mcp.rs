//! Helpers for the MCP servers' tests: an in-process client over a duplex pipe, tool-call
//! shorthands, an HTTP harness on a free port, and checks of a built server binary (clean
//! exits on stdin EOF and SIGTERM).

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    process::Stdio,
    time::Duration,
};

use rmcp::{
    RoleClient, ServerHandler, ServiceExt as _,
    model::{CallToolRequestParams, CallToolResult, JsonObject},
    service::RunningService,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::{TcpListener, TcpStream},
    process::{Child, Command},
    sync::oneshot,
    task::JoinHandle,
};

use crate::serve::{HttpOptions, serve_http};

/// An rmcp client with no handler of its own.
pub type Client = RunningService<RoleClient, ()>;

/// How long a server gets to answer, start or exit.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs `server` in-process and connects an rmcp client to it over a duplex pipe.
pub async fn connect<S: ServerHandler>(server: S) -> Client {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("client connects")
}

/// The object `value` as tool arguments (empty when `value` is not an object).
pub fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => JsonObject::from_iter(map),
        _ => JsonObject::new(),
    }
}

/// Calls tool `name` with the object `args` and returns the (possibly failed) result.
pub async fn call(client: &Client, name: &'static str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name);
    if let Value::Object(map) = args {
        params = params.with_arguments(JsonObject::from_iter(map));
    }
    client.call_tool(params).await.expect("tool call is answered")
}

/// The single text content of `result`.
pub fn text(result: &CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1, "{result:?}");
    &result.content[0].as_text().expect("text content").text
}

/// The text of a successful `result`.
pub fn assert_ok(result: &CallToolResult) -> &str {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    text(result)
}

/// Checks that `result` is a tool error saying exactly `message`.
pub fn assert_tool_error(result: &CallToolResult, message: &str) {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(result), message);
}

/// A raw JSON-RPC `initialize` request (id 1).
pub fn initialize_request() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}
    })
}

/// A server on [`serve_http`] at a free port under `/mcp`, stopped by [`RunningHttp::stop`].
#[derive(Debug)]
pub struct RunningHttp {
    /// Where a client connects (loopback even when bound to 0.0.0.0).
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningHttp {
    /// Serves `server` bound to `bind` on a free port.
    pub async fn start<S: ServerHandler + Clone>(server: S, bind: IpAddr) -> Self {
        let listener = TcpListener::bind(SocketAddr::new(bind, 0)).await.expect("bind a free port");
        let port = listener.local_addr().expect("local address").port();
        let options = HttpOptions { bind, port, path: "/mcp".to_owned() };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve_http(server, listener, &options, async {
                let _ = stopped.await;
            })
            .await
        });
        Self { addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port), stop, task }
    }

    /// Serves `server` on a free loopback port (so with the Host check on).
    pub async fn loopback<S: ServerHandler + Clone>(server: S) -> Self {
        Self::start(server, IpAddr::V4(Ipv4Addr::LOCALHOST)).await
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:41234/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Signals shutdown and checks that the server stops promptly and cleanly.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let finished =
            tokio::time::timeout(PATIENCE, self.task).await.expect("server stops promptly").expect("server task joins");
        assert!(finished.is_ok(), "{finished:?}");
    }

    /// Status code of a raw `initialize` POST carrying `host` as Host.
    pub async fn initialize_status(&self, host: &str) -> u16 {
        let body = initialize_request().to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let mut stream = TcpStream::connect(self.addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("send request");
        let mut head = [0_u8; 12];
        stream.read_exact(&mut head).await.expect("read status line");
        let line = String::from_utf8_lossy(&head);
        line[9..12].parse().expect("numeric status")
    }
}

/// Spawns `command` (a server binary, its flags set) with the given stdio, killed when
/// dropped. `RUST_LOG` is unset: the helpers read the default log lines.
fn spawn(command: &mut Command, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Child {
    command
        .env_remove("RUST_LOG")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server")
}

/// Takes the piped stderr of `child` and returns the first part of a line that `pick`
/// accepts; stderr is drained in the background from then on, so the child never blocks
/// on a full pipe.
async fn from_stderr<T>(child: &mut Child, pick: impl Fn(&str) -> Option<T>) -> T {
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let picked = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if let Some(picked) = pick(&line) {
                return Some(picked);
            }
        }
        None
    })
    .await
    .expect("log line in time")
    .expect("log line before stderr closed");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    picked
}

/// Spawns `command` (a server binary in stdio mode, its flags set), sends `initialize`,
/// reads the reply, closes stdin and checks the process then exits successfully. Returns
/// the reply.
pub async fn initialize_then_close_stdin(mut command: Command) -> Value {
    let mut child = spawn(&mut command, Stdio::piped(), Stdio::piped(), Stdio::null());
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    stdin.write_all(format!("{}\n", initialize_request()).as_bytes()).await.expect("send initialize");
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("answer in time")
        .expect("read stdout")
        .expect("one line");
    let reply: Value = serde_json::from_str(&first).expect("stdout carries JSON-RPC only");

    drop(stdin);
    wait_success(&mut child).await;
    reply
}

/// Spawns `command` (a server binary in stdio mode, its flags set), closes its stdin at
/// once (the client went away before initializing) and checks that it exits successfully
/// without writing to stdout.
pub async fn stdin_closed_before_initialize(mut command: Command) {
    let mut child = spawn(&mut command, Stdio::piped(), Stdio::piped(), Stdio::piped());
    drop(child.stdin.take());
    let output =
        tokio::time::timeout(PATIENCE, child.wait_with_output()).await.expect("exit in time").expect("run the server");
    assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    assert!(output.stdout.is_empty(), "{:?}", String::from_utf8_lossy(&output.stdout));
}

/// Spawns `command` (a server binary in stdio mode, its flags set), waits for its
/// `starting` log line, sends SIGTERM before any `initialize` and checks that the process
/// exits successfully.
pub async fn sigterm_before_initialize(mut command: Command) {
    let mut child = spawn(&mut command, Stdio::piped(), Stdio::piped(), Stdio::piped());
    from_stderr(&mut child, |line| line.contains("starting").then_some(())).await;
    // The signal handlers are installed right after that line.
    tokio::time::sleep(Duration::from_millis(100)).await;
    sigterm(&child).await;
    wait_success(&mut child).await;
}

/// Spawns `command` (a server binary taking [`TransportArgs`](crate::TransportArgs), its
/// other flags set) serving streamable HTTP on a free loopback port, and waits for the
/// address it logs as listening on.
pub async fn spawn_http_binary(mut command: Command) -> (Child, SocketAddr) {
    command.args(["--transport", "streamable-http", "--bind", "127.0.0.1", "--port", "0"]);
    let mut child = spawn(&mut command, Stdio::null(), Stdio::null(), Stdio::piped());
    let address = from_stderr(&mut child, |line| {
        let rest = line.split("address=").nth(1)?;
        rest.split_whitespace().next().map(str::to_owned)
    })
    .await;
    (child, address.parse().expect("numeric listening address"))
}

/// Sends SIGTERM through the system `kill` (no libc dependency needed).
pub async fn sigterm(child: &Child) {
    let pid = child.id().expect("child is running");
    let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await.expect("run kill");
    assert!(status.success());
}

/// Waits (a bounded time) for `child` to exit and checks it succeeded.
pub async fn wait_success(child: &mut Child) {
    let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("exit in time").expect("wait");
    assert!(status.success(), "{status:?}");
}
