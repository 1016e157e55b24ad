//! Helpers for the end-to-end tests: locate (and build, once per process) the workspace's
//! binaries, run the CLI, and make scratch directories.
//!
//! The binaries are built through cargo on first use, so a test never runs a stale
//! `elengtis` or `elengtis-fixture` left over from an earlier build.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn target_dir() -> PathBuf {
    // tests/…/target/debug/deps/<test binary> → target/debug
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().map(Path::to_path_buf).unwrap_or(deps)
    } else {
        deps
    }
}

/// Directory holding freshly built `elengtis` and `elengtis-fixture`.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir();
        let profile_release = dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace()).args(["build", "--quiet", "-p", "elengtis", "-p", "elengtis-fixture", "--bins"]);
        if profile_release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("failed to run cargo build for the test binaries");
        assert!(status.success(), "cargo build of the test binaries failed");
        dir
    })
}

/// Path of a workspace binary.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Run `elengtis` with arguments in `cwd`.
pub fn elengtis(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin("elengtis"))
        .current_dir(cwd)
        .args(args)
        .env_remove("ELENGTIS_LOG")
        .output()
        .expect("failed to run elengtis")
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A scratch directory.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("elengtis-test-").tempdir().expect("failed to create a scratch directory")
}

/// Write a file (creating parents) and return its path.
pub fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("failed to create parent");
    }
    std::fs::write(&path, content).expect("failed to write test file");
    path
}

/// Read JSONL rows.
pub fn rows(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("failed to read rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row is JSON"))
        .collect()
}
