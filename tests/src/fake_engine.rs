//! A fake Docker engine on a unix socket (`DOCKER_HOST=unix://…`): a tiny HTTP/1.1 server
//! that answers `/_ping`, `/version` and `/info` with a chosen version, and either answers
//! everything else with 404 or never answers it (a black hole). It records every request, so
//! a test can show that nothing was created.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fake engine does.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Accept connections and never answer anything.
    BlackHole,
    /// Answer ping, version and info with this `/version` body; answer everything else with 404.
    Answer(serde_json::Value),
    /// Answer ping, version and info with this `/version` body; never answer anything else.
    AnswerThenSilent(serde_json::Value),
}

/// The `/info` answer of an engine that lists runc only, its default.
pub fn runc_only_info() -> serde_json::Value {
    serde_json::json!({"ID": "fake", "OperatingSystem": "fake engine", "DefaultRuntime": "runc", "Runtimes": {"runc": {"path": "runc"}}, "SecurityOptions": []})
}

/// A fake engine, stopped when dropped.
#[derive(Debug)]
pub struct FakeEngine {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

/// The `/version` answer of Debian 12's docker.io (this project's CI machine kind).
pub fn debian_bookworm_version() -> serde_json::Value {
    version_answer("20.10.24+dfsg1", ("1.1.5+ds1", "1.1.5+ds1-1+deb12u1"), ("1.6.20~ds1", "1.6.20~ds1-1+deb12u3"))
}

/// A `/version` answer of an engine with every known fix (Docker CE 28.2.2, runc 1.3.3).
pub fn patched_version() -> serde_json::Value {
    version_answer("28.2.2", ("1.3.3", "v1.3.3-0-gd842d771"), ("1.7.28", "b98a3aace656320842a23f4a392a33f46af97866"))
}

/// A `/version` answer with these engine, runc and containerd versions (and `GitCommit`s).
pub fn version_answer(engine: &str, runc: (&str, &str), containerd: (&str, &str)) -> serde_json::Value {
    serde_json::json!({
        "Platform": {"Name": ""},
        "Components": [
            {"Name": "Engine", "Version": engine, "Details": {"ApiVersion": "1.41", "GitCommit": "fake", "MinAPIVersion": "1.12", "Os": "linux"}},
            {"Name": "containerd", "Version": containerd.0, "Details": {"GitCommit": containerd.1}},
            {"Name": "runc", "Version": runc.0, "Details": {"GitCommit": runc.1}},
            {"Name": "docker-init", "Version": "0.19.0", "Details": {"GitCommit": ""}}
        ],
        "Version": engine,
        "ApiVersion": "1.41",
        "MinAPIVersion": "1.12",
        "GitCommit": "fake",
        "GoVersion": "go1.24",
        "Os": "linux",
        "Arch": "amd64",
        "KernelVersion": "6.1.0-fake"
    })
}

impl FakeEngine {
    /// Start serving, with an engine that lists runc only ([`runc_only_info`]).
    pub fn start(behaviour: Behaviour) -> FakeEngine {
        FakeEngine::start_with_info(behaviour, runc_only_info())
    }

    /// Start serving, answering `/info` with `info` (its runtimes, its default runtime).
    pub fn start_with_info(behaviour: Behaviour, info: serde_json::Value) -> FakeEngine {
        let dir =
            tempfile::Builder::new().prefix("elengtis-fake-engine-").tempdir().expect("failed to make a temp dir");
        let socket = dir.path().join("docker.sock");
        let listener = UnixListener::bind(&socket).expect("failed to bind the fake engine's socket");
        listener.set_nonblocking(true).expect("failed to make the listener non-blocking");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (requests2, stop2) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (behaviour, requests, info) = (behaviour.clone(), requests2.clone(), info.clone());
                        std::thread::spawn(move || serve(stream, &behaviour, &info, &requests));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FakeEngine { _dir: dir, socket, requests, stop }
    }

    /// The value for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Requests received so far, as `METHOD /path` without the API version prefix.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Requests other than reading the engine's ping, version and info (anything that could
    /// create, change or even look up an object).
    pub fn other_requests(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| !["GET /_ping", "HEAD /_ping", "GET /version", "GET /info"].contains(&r.as_str()))
            .collect()
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(stream: UnixStream, behaviour: &Behaviour, info: &serde_json::Value, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default();
        let path = target.split('?').next().unwrap_or_default();
        // `/v1.41/version` → `/version`
        let path = match path.strip_prefix("/v").and_then(|p| p.split_once('/')) {
            Some((version, rest)) if version.chars().all(|c| c.is_ascii_digit() || c == '.') => format!("/{rest}"),
            _ => path.to_owned(),
        };
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(mut r) = requests.lock() {
            r.push(format!("{method} {path}"));
        }
        let version = match behaviour {
            Behaviour::BlackHole => None,
            Behaviour::Answer(v) | Behaviour::AnswerThenSilent(v) => Some(v),
        };
        let answer = match (version, path.as_str()) {
            (None, _) => None,
            (Some(_), "/_ping") => Some((200, "text/plain", "OK".to_owned())),
            (Some(v), "/version") => Some((200, "application/json", v.to_string())),
            (Some(_), "/info") => Some((200, "application/json", info.to_string())),
            (Some(_), _) if matches!(behaviour, Behaviour::AnswerThenSilent(_)) => None,
            (Some(_), other) => Some((
                404,
                "application/json",
                serde_json::json!({"message": format!("fake engine: no such object ({other})")}).to_string(),
            )),
        };
        let Some((status, content_type, body)) = answer else {
            // The black hole: hold the connection open and never answer.
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
            return;
        };
        let reason = if status == 200 { "OK" } else { "Not Found" };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nApi-Version: 1.41\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
