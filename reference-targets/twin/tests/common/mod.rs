//! Shared by the twin's binary tests: a running `elengtis-twin` over stdio with its stderr
//! captured and its outbox in a temporary directory, and a TCP sink counting connections.

// Each test crate uses part of it.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::{
    RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, CallToolResult, JsonObject, Tool},
    service::RunningService,
    transport::{ConfigureCommandExt as _, TokioChildProcess},
};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::TcpListener,
    process::Command,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_elengtis-twin");

/// A running twin.
pub struct Twin {
    pub client: RunningService<RoleClient, ()>,
    stderr: Arc<Mutex<Vec<String>>>,
    pub db: PathBuf,
    _dir: tempfile::TempDir,
}

/// What a tool call gave: `error` is isError (or a protocol error, e.g. an unknown tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub error: bool,
    pub text: String,
}

impl Outcome {
    pub fn ok(&self) -> &str {
        assert!(!self.error, "{self:?}");
        &self.text
    }

    pub fn refused(&self) -> bool {
        self.error && self.text.starts_with("refused: ")
    }
}

impl Twin {
    /// Starts the twin with `args` (plus `--mail-db` in a fresh directory).
    pub async fn start(args: &[String]) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = dir.path().join("mail.db");
        let command = Command::new(BIN).configure(|cmd| {
            cmd.args(args).arg("--mail-db").arg(&db).env_remove("RUST_LOG");
        });
        let (transport, stderr) =
            TokioChildProcess::builder(command).stderr(Stdio::piped()).spawn().expect("spawn the twin");
        let lines = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = stderr {
            let sink = lines.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    sink.lock().expect("lock").push(line);
                }
            });
        }
        let client = ().serve(transport).await.expect("initialize over stdio");
        Self { client, stderr: lines, db, _dir: dir }
    }

    /// `args` as owned strings.
    pub async fn with(args: &[&str]) -> Self {
        Self::start(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>()).await
    }

    /// Calls `name` with the object `args`.
    pub async fn call(&self, name: &str, args: Value) -> Outcome {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(JsonObject::from_iter(map));
        }
        match self.client.call_tool(params).await {
            Ok(result) => outcome(&result),
            Err(e) => Outcome { error: true, text: e.to_string() },
        }
    }

    pub async fn tools(&self) -> Vec<Tool> {
        self.client.list_all_tools().await.expect("tools/list")
    }

    pub async fn description(&self, tool: &str) -> String {
        let tools = self.tools().await;
        let found = tools.iter().find(|t| t.name == tool).unwrap_or_else(|| panic!("no tool {tool}"));
        found.description.as_deref().unwrap_or_default().to_owned()
    }

    /// The committed rows of `sent_emails`, read by a second connection.
    pub fn rows(&self) -> Vec<(String, String, String)> {
        read_rows(&self.db)
    }

    /// The first stderr line starting with `prefix`, waiting up to 5 s for it.
    pub async fn stderr_line(&self, prefix: &str) -> Option<String> {
        for _ in 0..100 {
            if let Some(line) = self.stderr.lock().expect("lock").iter().find(|l| l.starts_with(prefix)) {
                return Some(line.clone());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Waits until the twin logged that it starts serving (after any out-of-band line).
    pub async fn started(&self) {
        for _ in 0..100 {
            if self.stderr.lock().expect("lock").iter().any(|l| l.contains("starting elengtis-twin")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no start line: {:?}", self.stderr());
    }

    /// Every stderr line so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().expect("lock").clone()
    }

    /// The confirmation code the twin printed (out of band).
    pub async fn code(&self) -> String {
        let line = self.stderr_line("twin: confirmation code ").await.expect("the code is printed");
        line.trim_start_matches("twin: confirmation code ").to_owned()
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// The rows of `sent_emails` in `db` (none when the file or table is missing).
pub fn read_rows(db: &std::path::Path) -> Vec<(String, String, String)> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT to_addr, subject, body FROM sent_emails ORDER BY id") else {
        return Vec::new();
    };
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).expect("query").map(|r| r.expect("row")).collect()
}

pub fn outcome(result: &CallToolResult) -> Outcome {
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n");
    Outcome { error: result.is_error == Some(true), text }
}

/// A TCP endpoint answering every request `200` with `body`, counting connections.
pub struct Sink {
    pub port: u16,
    /// The port of the IPv6 loopback listener, when the host has IPv6.
    pub port6: Option<u16>,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Sink {
    pub async fn start(body: &'static str) -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let v4 = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = v4.local_addr().expect("address").port();
        tokio::spawn(accept(v4, body, hits.clone(), requests.clone()));
        let port6 = match TcpListener::bind("[::1]:0").await {
            Ok(v6) => {
                let port6 = v6.local_addr().map(|a: SocketAddr| a.port()).ok();
                tokio::spawn(accept(v6, body, hits.clone(), requests.clone()));
                port6
            }
            Err(_) => None,
        };
        Self { port, port6, hits, requests }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The request heads received.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

async fn accept(listener: TcpListener, body: &'static str, hits: Arc<AtomicUsize>, requests: Arc<Mutex<Vec<String>>>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        hits.fetch_add(1, Ordering::SeqCst);
        let requests = requests.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut chunk = [0_u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&chunk[..n]),
                }
            }
            requests.lock().expect("lock").push(String::from_utf8_lossy(&head).into_owned());
            let answer = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            let _ = stream.write_all(answer.as_bytes()).await;
        });
    }
}
