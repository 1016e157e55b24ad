//! A tiny git-like file store for the `commit_file` tool (only with `--repo DIR`): a commit
//! writes one file under `DIR` and replaces `DIR/HEAD.json` with `{commit, path, message}`.
//! It exists so that `container_file` has a reference target whose effect is a plain file
//! on the container's volume, checked from outside by the runner.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file a commit records itself in.
pub const HEAD: &str = "HEAD.json";
/// The largest content a commit may write.
pub const MAX_CONTENT: usize = 64 * 1024;
/// How deep a committed path may be.
const MAX_DEPTH: usize = 4;

/// The repository directory. Clones share the commit lock.
#[derive(Debug, Clone)]
pub struct Repo {
    dir: PathBuf,
    lock: Arc<Mutex<()>>,
}

impl Repo {
    /// Uses `dir` (created if missing) as the repository.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { dir: dir.to_owned(), lock: Arc::new(Mutex::new(())) })
    }

    /// Writes `content` to `path` (relative to the repository) and records the commit in
    /// `HEAD.json`; returns the commit's number (1 for the first). Errors are messages for
    /// the model.
    pub fn commit(&self, path: &str, content: &str, message: &str) -> Result<u64, String> {
        check_path(path)?;
        if content.len() > MAX_CONTENT {
            return Err(format!("The content is {} bytes; at most {MAX_CONTENT} are allowed", content.len()));
        }
        if message.trim().is_empty() {
            return Err("The commit message must not be empty".to_owned());
        }
        let _guard = self.lock.lock().map_err(|_| "the repository lock is poisoned".to_owned())?;
        let head = self.dir.join(HEAD);
        let previous = match std::fs::read(&head) {
            Ok(bytes) => {
                serde_json::from_slice::<serde_json::Value>(&bytes).ok().and_then(|v| v["commit"].as_u64()).unwrap_or(0)
            }
            Err(_) => 0,
        };
        let target = self.dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("failed to create the directory of {path}: {e}"))?;
        }
        write_replacing(&target, content.as_bytes()).map_err(|e| format!("failed to write {path}: {e}"))?;
        let commit = previous + 1;
        let record = serde_json::json!({"commit": commit, "path": path, "message": message});
        let bytes = serde_json::to_vec_pretty(&record).map_err(|e| format!("failed to encode the commit: {e}"))?;
        write_replacing(&head, &bytes).map_err(|e| format!("failed to write {HEAD}: {e}"))?;
        Ok(commit)
    }
}

/// A relative path of plain names (letters, digits, `.`, `_`, `-`; not `.` or `..`), at most
/// four deep, not `HEAD.json` itself.
fn check_path(path: &str) -> Result<(), String> {
    let components: Vec<&str> = path.split('/').collect();
    let plain = |c: &&str| {
        !c.is_empty()
            && *c != "."
            && *c != ".."
            && c.chars().all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-'))
    };
    if components.len() > MAX_DEPTH || !components.iter().all(plain) {
        return Err(format!(
            "The path `{path}` must be relative, at most {MAX_DEPTH} names deep, each of letters, digits, `.`, `_` or `-`"
        ));
    }
    if path == HEAD {
        return Err(format!("`{HEAD}` is written by the commit itself"));
    }
    Ok(())
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temp, bytes)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::{HEAD, Repo};

    #[test]
    fn a_commit_writes_the_file_and_head() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let repo = Repo::open(&dir.path().join("repo")).expect("repo");
        assert_eq!(repo.commit("config/app.toml", "x = 1\n", "first").expect("commit"), 1);
        assert_eq!(repo.commit("leak.txt", "CANARY", "second").expect("commit"), 2);
        assert_eq!(std::fs::read_to_string(dir.path().join("repo/config/app.toml")).expect("file"), "x = 1\n");
        let head: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("repo").join(HEAD)).expect("head")).expect("json");
        assert_eq!(head, serde_json::json!({"commit": 2, "path": "leak.txt", "message": "second"}));
    }

    #[test]
    fn paths_outside_the_repository_are_refused() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let repo = Repo::open(dir.path()).expect("repo");
        for bad in ["../x", "/etc/passwd", "a//b", "a/./b", "", "a/b/c/d/e", "HEAD.json", "sp ace"] {
            assert!(repo.commit(bad, "x", "m").is_err(), "{bad}");
        }
        assert!(repo.commit("ok.txt", "x", " ").is_err(), "an empty message is refused");
        assert!(repo.commit("ok.txt", &"x".repeat(super::MAX_CONTENT + 1), "m").is_err());
        assert!(!dir.path().join(HEAD).exists());
    }
}
