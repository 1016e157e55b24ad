//! Resource abuse: each function misbehaves in one way and reports, as JSON, how far it got
//! and which error stopped it (when it is still alive to say so).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::probe::errno_text;

/// One MiB.
const MIB: usize = 1 << 20;

/// The fork bomb, run in a child process (`--fork-bomb-child`) so that the tasks it holds
/// are all released when it exits: start sleeping threads (each is a task, counted by the
/// pids limit like a process) until the kernel refuses one, then try to start a process.
/// Returns `{tasks_started, error, errno, spawn_error}`; stops by itself at `cap` tasks.
pub fn fork_bomb_child(cap: usize) -> Value {
    let mut started = 0_usize;
    let mut error = None;
    while started < cap {
        let spawned = std::thread::Builder::new().stack_size(64 * 1024).spawn(|| {
            loop {
                std::thread::park();
            }
        });
        match spawned {
            Ok(_) => started += 1,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let spawn_error =
        match std::env::current_exe().and_then(|exe| std::process::Command::new(exe).arg("--version").output()) {
            Ok(_) => None,
            Err(e) => Some(errno_text(&e)),
        };
    json!({
        "tasks_started": started,
        "error": error.as_ref().map(errno_text),
        "errno": error.as_ref().and_then(std::io::Error::raw_os_error),
        "spawn_error": spawn_error,
    })
}

/// Allocates and touches memory in 8 MiB steps until `limit_mib` (or forever, until the
/// kernel's OOM killer ends the process). Returns how much it held when it stopped.
pub fn balloon(limit_mib: Option<usize>) -> Value {
    let step = 8 * MIB;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let started = Instant::now();
    loop {
        let total = held.len() * step;
        if limit_mib.is_some_and(|limit| total >= limit * MIB) {
            return json!({"held_mib": total / MIB, "elapsed_ms": started.elapsed().as_millis() as u64});
        }
        let mut chunk = vec![0_u8; step];
        // Touch every page, so the memory is really resident.
        for i in (0..step).step_by(4096) {
            chunk[i] = 1;
        }
        held.push(chunk);
    }
}

/// Writes 1 MiB blocks to a new file in `dir` until a write fails (ENOSPC on a full tmpfs)
/// or `cap_mib` is reached; removes the file. Returns `{bytes_written, error, errno}`.
pub fn fill_dir(dir: &Path, cap_mib: usize) -> Value {
    let path = dir.join(format!("elengtis-hostile-fill-{}", std::process::id()));
    let block = vec![0x5a_u8; MIB];
    let mut written: u64 = 0;
    let error = match std::fs::File::create(&path) {
        Ok(mut file) => loop {
            if written >= (cap_mib * MIB) as u64 {
                break None;
            }
            // A partial write is counted, then the next call reports the error.
            match file.write(&block) {
                Ok(0) => break Some(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                Ok(n) => written += n as u64,
                Err(e) => break Some(e),
            }
        },
        Err(e) => Some(e),
    };
    let removed = std::fs::remove_file(&path).is_ok();
    json!({
        "path": path.display().to_string(),
        "bytes_written": written,
        "error": error.as_ref().map(errno_text),
        "errno": error.as_ref().and_then(std::io::Error::raw_os_error),
        "removed": removed,
    })
}

/// Writes `mib` MiB of log lines to stderr as fast as it can, then holds for `hold_ms`
/// (so a test can look at the engine's log while the container is still alive).
pub fn flood_log(mib: usize, hold_ms: u64) -> Value {
    flood(&mut std::io::stderr().lock(), mib, hold_ms)
}

fn flood(out: &mut impl std::io::Write, mib: usize, hold_ms: u64) -> Value {
    let line = format!("{}\n", "flood ".repeat(64 * 1024 / 6));
    let started = Instant::now();
    let mut written = 0_usize;
    let mut error = None;
    while written < mib * MIB {
        match out.write_all(line.as_bytes()) {
            Ok(()) => written += line.len(),
            Err(e) => {
                error = Some(errno_text(&e));
                break;
            }
        }
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    std::thread::sleep(Duration::from_millis(hold_ms.min(120_000)));
    json!({"bytes_written": written, "elapsed_ms": elapsed_ms, "error": error})
}

/// The directories `write_outside_tmp` tries by default: the root, `/etc`, `/home`, the
/// working directory and the image's `/data`.
pub fn outside_dirs() -> Vec<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    vec!["/".into(), "/etc".into(), "/home".into(), cwd, "/data".into()]
}

/// Tries to create a file in each directory (creating the directory first if it is
/// missing); reports `{dir, outcome: created|failed, step, error, errno}` for each, and
/// removes what it created.
pub fn write_outside(dirs: &[PathBuf]) -> Value {
    let name = format!("elengtis-hostile-{}", std::process::id());
    let results: Vec<Value> = dirs
        .iter()
        .map(|dir| {
            let attempt = if dir.is_dir() { Ok(()) } else { std::fs::create_dir(dir).map_err(|e| ("mkdir", e)) }
                .and_then(|()| std::fs::File::create(dir.join(&name)).map(drop).map_err(|e| ("create", e)));
            match attempt {
                Ok(()) => {
                    let _ = std::fs::remove_file(dir.join(&name));
                    json!({"dir": dir.display().to_string(), "outcome": "created"})
                }
                Err((step, e)) => json!({
                    "dir": dir.display().to_string(),
                    "outcome": "failed",
                    "step": step,
                    "error": errno_text(&e),
                    "errno": e.raw_os_error(),
                }),
            }
        })
        .collect();
    Value::Array(results)
}

/// What `--escape-probe` tries.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscapeSpec {
    /// TCP connects to try (`ADDR:PORT`).
    #[serde(default)]
    pub tcp: Vec<String>,
    /// Files to create (and remove again when created).
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

/// The escapes a stdio sandbox must stop: `{tcp: [{target, outcome, detail}], write: [{path,
/// outcome: created|failed, error}], status: {Uid, CapEff, CapPrm, CapBnd, CapAmb, NoNewPrivs}}`.
/// A file that was created is left in place (the caller checks and removes it).
pub fn escape_probe(spec: &EscapeSpec) -> Value {
    let tcp: Vec<Value> = spec
        .tcp
        .iter()
        .map(|target| {
            let outcome = crate::probe::run(&crate::probe::Spec {
                name: target.clone(),
                kind: crate::probe::Kind::Tcp,
                target: target.clone(),
                port: None,
                resolver: None,
                timeout_ms: Some(1000),
            });
            json!({"target": target, "outcome": outcome.outcome, "detail": outcome.detail})
        })
        .collect();
    let write: Vec<Value> = spec
        .write
        .iter()
        .map(|path| match std::fs::write(path, b"elengtis-hostile") {
            Ok(()) => json!({"path": path.display().to_string(), "outcome": "created"}),
            Err(e) => json!({"path": path.display().to_string(), "outcome": "failed", "error": errno_text(&e)}),
        })
        .collect();
    let status_text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mut status = serde_json::Map::new();
    for line in status_text.lines() {
        if let Some((key, value)) = line.split_once(':')
            && ["Uid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh", "NoNewPrivs"].contains(&key)
        {
            status.insert(key.to_owned(), json!(value.trim()));
        }
    }
    json!({"tcp": tcp, "write": write, "status": status})
}

/// `--spawn-children DIR`: a child `sleep 300` in this process group and one in a new
/// session; their pids and this process's written into DIR.
pub fn spawn_children(dir: &Path) -> std::io::Result<()> {
    let child = std::process::Command::new("sleep").arg("300").stdin(std::process::Stdio::null()).spawn()?;
    let escaped =
        std::process::Command::new("setsid").args(["sleep", "300"]).stdin(std::process::Stdio::null()).spawn()?;
    // Each file appears whole (written aside, then renamed): a reader that sees `server.pid`
    // sees all three with their contents.
    let publish = |name: &str, pid: u32| {
        let aside = dir.join(format!(".{name}.tmp"));
        std::fs::write(&aside, pid.to_string())?;
        std::fs::rename(&aside, dir.join(name))
    };
    publish("child.pid", child.id())?;
    publish("escaped.pid", escaped.id())?;
    publish("server.pid", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_bomb_stops_at_its_cap_without_a_limit() {
        let report = fork_bomb_child(8);
        assert_eq!(report["tasks_started"], 8, "{report}");
        assert_eq!(report["error"], Value::Null, "{report}");
    }

    #[test]
    fn balloon_holds_what_it_was_asked_for() {
        assert_eq!(balloon(Some(16))["held_mib"], 16);
    }

    #[test]
    fn flood_writes_what_was_asked_then_holds() {
        let mut out = Vec::new();
        let started = Instant::now();
        let report = flood(&mut out, 2, 50);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(report["bytes_written"], out.len());
        assert!(out.len() >= 2 * MIB && out.len() < 2 * MIB + 70_000, "{}", out.len());
        assert!(out.ends_with(b"flood \n"));
    }

    #[test]
    fn fill_stops_at_the_cap_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("hostile-fill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let report = fill_dir(&dir, 3);
        assert_eq!(report["bytes_written"], 3 * MIB as u64, "{report}");
        assert_eq!(report["removed"], true);
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
        let missing = fill_dir(&dir.join("absent"), 3);
        assert_eq!(missing["errno"], 2, "{missing}");
        std::fs::remove_dir(&dir).expect("remove");
    }

    #[test]
    fn writes_report_each_directory() {
        let dir = std::env::temp_dir().join(format!("hostile-write-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let report = write_outside(&[dir.clone(), PathBuf::from("/proc/elengtis-no/such")]);
        assert_eq!(report[0]["outcome"], "created", "{report}");
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0, "created files are removed");
        assert_eq!(report[1]["outcome"], "failed", "{report}");
        assert_eq!(report[1]["step"], "mkdir", "{report}");
        std::fs::remove_dir(&dir).expect("remove");
    }
}
