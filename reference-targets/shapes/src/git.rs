//! `--shape git`: the tools of PyPI `mcp-server-git`, over a tiny repository format of this
//! server's own (no git needed, nothing random: the same calls give the same hashes).
//!
//! A repository is a directory whose `.git/` holds:
//!
//! - `elengtis-shapes-repo`: the marker (a `.git/` without it is a real repository, which this
//!   server refuses to touch);
//! - `HEAD`: `ref: refs/heads/<branch>` (`main` at first);
//! - `refs/heads/<branch>`: the branch's newest commit hash;
//! - `index.json`: the staged tree, path → blob id;
//! - `objects/<blob id>`: file contents (the id is the SHA-256 of the content);
//! - `commits/<hash>`: one commit as JSON `{parent, message, tree}`; the hash is the first 40
//!   hex digits of the SHA-256 of that JSON;
//! - `logs/HEAD`: one line per commit, `<hash> commit: <first line of the message>` (like
//!   git's reflog).
//!
//! A tool's `repo_path` must be an existing directory; its `.git/` is created on first use.
//! `--repo DIR` creates and initialises one at start. Calls are serialised per process.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    io,
    path::{Component, Path, PathBuf},
    sync::{Arc, Mutex},
};

use rmcp::model::{JsonObject, Tool};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::server::{ToolOutcome, arguments, blocking, tool};

/// The marker file of a repository this server created.
const MARKER: &str = "elengtis-shapes-repo";
/// The branch of a new repository.
const FIRST_BRANCH: &str = "main";
/// The author every commit shows.
const AUTHOR: &str = "elengtis-shapes <shapes@elengtis.invalid>";
/// Lines of context around a change (the real server's default).
const DEFAULT_CONTEXT_LINES: usize = 3;

/// The tools, with the real server's pydantic schemas (titles and defaults included).
pub fn tools() -> Vec<Tool> {
    let repo_path = json!({"title": "Repo Path", "type": "string"});
    let schema = |title: &str, extra: serde_json::Value, required: &[&str]| {
        let mut properties = serde_json::Map::new();
        properties.insert("repo_path".to_owned(), repo_path.clone());
        if let serde_json::Value::Object(extra) = extra {
            properties.extend(extra);
        }
        json!({"properties": properties, "required": required, "title": title, "type": "object"})
    };
    vec![
        tool(json!({
            "name": "git_status",
            "description": "Shows the working tree status",
            "inputSchema": schema("GitStatus", json!({}), &["repo_path"]),
        })),
        tool(json!({
            "name": "git_diff_unstaged",
            "description": "Shows changes in the working directory that are not yet staged",
            "inputSchema": schema(
                "GitDiffUnstaged",
                json!({"context_lines": {"default": DEFAULT_CONTEXT_LINES, "title": "Context Lines", "type": "integer"}}),
                &["repo_path"],
            ),
        })),
        tool(json!({
            "name": "git_commit",
            "description": "Records changes to the repository",
            "inputSchema": schema("GitCommit", json!({"message": {"title": "Message", "type": "string"}}), &["repo_path", "message"]),
        })),
        tool(json!({
            "name": "git_add",
            "description": "Adds file contents to the staging area",
            "inputSchema": schema(
                "GitAdd",
                json!({"files": {"items": {"type": "string"}, "title": "Files", "type": "array"}}),
                &["repo_path", "files"],
            ),
        })),
        tool(json!({
            "name": "git_log",
            "description": "Shows the commit logs",
            "inputSchema": schema(
                "GitLog",
                json!({"max_count": {"default": 10, "title": "Max Count", "type": "integer"}}),
                &["repo_path"],
            ),
        })),
        tool(json!({
            "name": "git_create_branch",
            "description": "Creates a new branch from an optional base branch",
            "inputSchema": schema(
                "GitCreateBranch",
                json!({
                    "branch_name": {"title": "Branch Name", "type": "string"},
                    "base_branch": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Base Branch"},
                }),
                &["repo_path", "branch_name"],
            ),
        })),
        tool(json!({
            "name": "git_show",
            "description": "Shows the contents of a commit",
            "inputSchema": schema("GitShow", json!({"revision": {"title": "Revision", "type": "string"}}), &["repo_path", "revision"]),
        })),
    ]
}

#[derive(Debug, Deserialize)]
struct StatusArgs {
    repo_path: String,
}

#[derive(Debug, Deserialize)]
struct DiffArgs {
    repo_path: String,
    #[serde(default = "default_context_lines")]
    context_lines: usize,
}

fn default_context_lines() -> usize {
    DEFAULT_CONTEXT_LINES
}

#[derive(Debug, Deserialize)]
struct CommitArgs {
    repo_path: String,
    message: String,
}

#[derive(Debug, Deserialize)]
struct AddArgs {
    repo_path: String,
    files: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct LogArgs {
    repo_path: String,
    #[serde(default = "default_max_count")]
    max_count: i64,
}

fn default_max_count() -> i64 {
    10
}

#[derive(Debug, Deserialize)]
struct BranchArgs {
    repo_path: String,
    branch_name: String,
    #[serde(default)]
    base_branch: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ShowArgs {
    repo_path: String,
    revision: String,
}

/// The git shape: stateless apart from a lock that serialises repository changes.
#[derive(Debug, Default)]
pub struct Git {
    lock: Arc<Mutex<()>>,
}

/// Creates `dir` if missing and initialises it as a repository (an existing one is kept).
pub fn init_at_start(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    Repo::open(dir).map_err(anyhow::Error::msg)?;
    Ok(())
}

impl Git {
    pub async fn call(&self, name: &str, args: JsonObject) -> Option<ToolOutcome> {
        let outcome = match name {
            "git_status" => self.with(name, args, |repo, _: StatusArgs| repo.status()).await,
            "git_diff_unstaged" => self.with(name, args, |repo, a: DiffArgs| repo.diff_unstaged(a.context_lines)).await,
            "git_commit" => self.with(name, args, |repo, a: CommitArgs| repo.commit(&a.message)).await,
            "git_add" => self.with(name, args, |repo, a: AddArgs| repo.add(&a.files)).await,
            "git_log" => self.with(name, args, |repo, a: LogArgs| repo.log(a.max_count)).await,
            "git_create_branch" => {
                self.with(name, args, |repo, a: BranchArgs| {
                    repo.create_branch(&a.branch_name, a.base_branch.as_deref())
                })
                .await
            }
            "git_show" => self.with(name, args, |repo, a: ShowArgs| repo.show(&a.revision)).await,
            _ => return None,
        };
        Some(outcome)
    }

    /// Parses the arguments, opens (or creates) the repository at their `repo_path` and runs
    /// `op` on it, under the lock.
    async fn with<T: RepoPath + serde::de::DeserializeOwned + Send + 'static>(
        &self,
        name: &str,
        args: JsonObject,
        op: impl FnOnce(&Repo, T) -> Result<String, String> + Send + 'static,
    ) -> ToolOutcome {
        let parsed: T = arguments(name, args)?;
        let lock = self.lock.clone();
        let tool = name.to_owned();
        blocking(move || {
            let _guard = lock.lock().map_err(|_| "Error: the repository lock is unavailable".to_owned())?;
            let repo = Repo::open(Path::new(parsed.repo_path()))?;
            let text = op(&repo, parsed)?;
            tracing::info!(tool = %tool, repo = %repo.work.display(), "git tool ran");
            Ok(text)
        })
        .await
    }
}

/// Arguments that name a repository.
trait RepoPath {
    fn repo_path(&self) -> &str;
}

macro_rules! repo_path {
    ($($t:ty),*) => {
        $(impl RepoPath for $t {
            fn repo_path(&self) -> &str {
                &self.repo_path
            }
        })*
    };
}
repo_path!(StatusArgs, DiffArgs, CommitArgs, AddArgs, LogArgs, BranchArgs, ShowArgs);

/// One commit as stored in `commits/<hash>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Commit {
    parent: Option<String>,
    message: String,
    tree: BTreeMap<String, String>,
}

/// A repository of this server's format.
#[derive(Debug)]
struct Repo {
    work: PathBuf,
    git: PathBuf,
}

fn io_error(what: &str) -> impl FnOnce(io::Error) -> String + '_ {
    move |e| format!("Error: failed to {what}: {e}")
}

impl Repo {
    /// The repository at `work`, initialised when its `.git/` is missing.
    fn open(work: &Path) -> Result<Self, String> {
        if !work.is_dir() {
            return Err(format!("Error: no such repository path: {}", work.display()));
        }
        let repo = Self { work: work.to_path_buf(), git: work.join(".git") };
        if repo.git.exists() {
            if !repo.git.join(MARKER).is_file() {
                return Err(format!(
                    "Error: {} holds a repository this server did not create (it never writes to real git repositories)",
                    work.display()
                ));
            }
        } else {
            repo.init().map_err(io_error("initialise the repository"))?;
            tracing::info!(repo = %work.display(), "repository initialised");
        }
        Ok(repo)
    }

    fn init(&self) -> io::Result<()> {
        std::fs::create_dir(&self.git)?;
        std::fs::write(self.git.join(MARKER), "elengtis-shapes repository format 1\n")?;
        for dir in ["refs/heads", "objects", "commits", "logs"] {
            std::fs::create_dir_all(self.git.join(dir))?;
        }
        std::fs::write(self.git.join("HEAD"), format!("ref: refs/heads/{FIRST_BRANCH}\n"))?;
        std::fs::write(self.git.join("index.json"), "{}\n")?;
        std::fs::write(self.git.join("logs/HEAD"), "")
    }

    fn branch(&self) -> Result<String, String> {
        let head = std::fs::read_to_string(self.git.join("HEAD")).map_err(io_error("read HEAD"))?;
        head.trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_owned)
            .ok_or_else(|| format!("Error: HEAD is not a branch: {}", head.trim()))
    }

    fn branch_commit(&self, branch: &str) -> Result<Option<String>, String> {
        match std::fs::read_to_string(self.git.join("refs/heads").join(branch)) {
            Ok(hash) => Ok(Some(hash.trim().to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("read a branch")(e)),
        }
    }

    fn head_commit(&self) -> Result<Option<String>, String> {
        self.branch_commit(&self.branch()?)
    }

    fn read_commit(&self, hash: &str) -> Result<Commit, String> {
        let text = std::fs::read_to_string(self.git.join("commits").join(hash)).map_err(io_error("read a commit"))?;
        serde_json::from_str(&text).map_err(|e| format!("Error: commit {hash} is damaged: {e}"))
    }

    fn tree_of(&self, hash: Option<&str>) -> Result<BTreeMap<String, String>, String> {
        hash.map_or_else(|| Ok(BTreeMap::new()), |h| self.read_commit(h).map(|c| c.tree))
    }

    fn index(&self) -> Result<BTreeMap<String, String>, String> {
        let text = std::fs::read_to_string(self.git.join("index.json")).map_err(io_error("read the index"))?;
        serde_json::from_str(&text).map_err(|e| format!("Error: the index is damaged: {e}"))
    }

    fn write_index(&self, index: &BTreeMap<String, String>) -> Result<(), String> {
        let text = serde_json::to_string_pretty(index).map_err(|e| format!("Error: {e}"))?;
        std::fs::write(self.git.join("index.json"), text + "\n").map_err(io_error("write the index"))
    }

    fn write_blob(&self, content: &[u8]) -> Result<String, String> {
        let id = hex(&Sha256::digest(content));
        let path = self.git.join("objects").join(&id);
        if !path.exists() {
            std::fs::write(path, content).map_err(io_error("write an object"))?;
        }
        Ok(id)
    }

    fn blob(&self, id: &str) -> Result<Vec<u8>, String> {
        std::fs::read(self.git.join("objects").join(id)).map_err(io_error("read an object"))
    }

    /// Every regular file of the working tree (outside `.git`), by `/`-separated path.
    fn worktree(&self) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let mut files = BTreeMap::new();
        let mut pending = vec![(self.work.clone(), String::new())];
        while let Some((dir, prefix)) = pending.pop() {
            for entry in std::fs::read_dir(&dir).map_err(io_error("list the working tree"))? {
                let entry = entry.map_err(io_error("list the working tree"))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == ".git" {
                    continue;
                }
                let path = format!("{prefix}{name}");
                let kind = entry.file_type().map_err(io_error("list the working tree"))?;
                if kind.is_dir() {
                    pending.push((entry.path(), format!("{path}/")));
                } else if kind.is_file() {
                    files.insert(path, std::fs::read(entry.path()).map_err(io_error("read a file"))?);
                }
            }
        }
        Ok(files)
    }

    fn status(&self) -> Result<String, String> {
        let head = self.head_commit()?;
        let committed = self.tree_of(head.as_deref())?;
        let index = self.index()?;
        let work = self.worktree()?;
        let mut text = format!("Repository status:\nOn branch {}\n", self.branch()?);
        if head.is_none() {
            text.push_str("\nNo commits yet\n");
        }
        let mut staged = Vec::new();
        for (path, id) in &index {
            match committed.get(path) {
                None => staged.push(format!("\tnew file:   {path}")),
                Some(old) if old != id => staged.push(format!("\tmodified:   {path}")),
                Some(_) => {}
            }
        }
        staged.extend(committed.keys().filter(|p| !index.contains_key(*p)).map(|p| format!("\tdeleted:    {p}")));
        let mut unstaged = Vec::new();
        for (path, id) in &index {
            match work.get(path) {
                None => unstaged.push(format!("\tdeleted:    {path}")),
                Some(content) if hex(&Sha256::digest(content)) != *id => unstaged.push(format!("\tmodified:   {path}")),
                Some(_) => {}
            }
        }
        let untracked: Vec<String> =
            work.keys().filter(|p| !index.contains_key(*p)).map(|p| format!("\t{p}")).collect();
        for (title, lines) in [
            ("Changes to be committed:", &staged),
            ("Changes not staged for commit:", &unstaged),
            ("Untracked files:", &untracked),
        ] {
            if !lines.is_empty() {
                let _ = write!(text, "\n{title}\n{}\n", lines.join("\n"));
            }
        }
        if staged.is_empty() && unstaged.is_empty() && untracked.is_empty() {
            text.push_str(if head.is_none() {
                "\nnothing to commit (create/copy files and use \"git add\" to track)"
            } else {
                "\nnothing to commit, working tree clean"
            });
        }
        Ok(text)
    }

    fn diff_unstaged(&self, context: usize) -> Result<String, String> {
        let index = self.index()?;
        let work = self.worktree()?;
        let mut text = "Unstaged changes:\n".to_owned();
        for (path, id) in &index {
            let new = work.get(path);
            if new.is_some_and(|content| hex(&Sha256::digest(content)) == *id) {
                continue;
            }
            let old = self.blob(id)?;
            text.push_str(&file_diff(path, Some(&old), new.map(Vec::as_slice), context));
        }
        Ok(text)
    }

    fn add(&self, files: &[String]) -> Result<String, String> {
        let work = self.worktree()?;
        let mut index = self.index()?;
        for file in files {
            let prefix = self.relative(file)?;
            let matches = |path: &str| prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"));
            let present: Vec<&String> = work.keys().filter(|p| matches(p)).collect();
            let removed: Vec<String> = index.keys().filter(|p| matches(p) && !work.contains_key(*p)).cloned().collect();
            if present.is_empty() && removed.is_empty() {
                return Err(format!("Error: pathspec '{file}' did not match any files"));
            }
            for path in present {
                let id = self.write_blob(&work[path])?;
                index.insert(path.clone(), id);
            }
            for path in removed {
                index.remove(&path);
            }
        }
        self.write_index(&index)?;
        Ok("Files staged successfully".to_owned())
    }

    /// `file` as a `/`-separated path inside the working tree (`""` for the whole tree).
    fn relative(&self, file: &str) -> Result<String, String> {
        let given = Path::new(file);
        let inside = if given.is_absolute() {
            given
                .strip_prefix(&self.work)
                .map_err(|_| format!("Error: '{file}' is outside repository at '{}'", self.work.display()))?
        } else {
            given
        };
        let mut parts = Vec::new();
        for component in inside.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
                Component::CurDir => {}
                _ => return Err(format!("Error: '{file}' is outside repository at '{}'", self.work.display())),
            }
        }
        if parts.first().is_some_and(|p| p == ".git") {
            return Err(format!("Error: invalid path '{file}'"));
        }
        Ok(parts.join("/"))
    }

    fn commit(&self, message: &str) -> Result<String, String> {
        let branch = self.branch()?;
        let parent = self.branch_commit(&branch)?;
        let commit = Commit { parent: parent.clone(), message: message.to_owned(), tree: self.index()? };
        let body = serde_json::to_string_pretty(&commit).map_err(|e| format!("Error: {e}"))?;
        let hash = hex(&Sha256::digest(body.as_bytes()))[..40].to_owned();
        std::fs::write(self.git.join("commits").join(&hash), body + "\n").map_err(io_error("write the commit"))?;
        std::fs::write(self.git.join("refs/heads").join(&branch), format!("{hash}\n"))
            .map_err(io_error("move the branch"))?;
        let subject = message.lines().next().unwrap_or_default();
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.git.join("logs/HEAD"))
            .map_err(io_error("open the log"))?;
        io::Write::write_all(&mut log, format!("{hash} commit: {subject}\n").as_bytes())
            .map_err(io_error("write the log"))?;
        Ok(format!("Changes committed successfully with hash {hash}"))
    }

    fn log(&self, max_count: i64) -> Result<String, String> {
        let mut entries = Vec::new();
        let mut next = self.head_commit()?;
        while let Some(hash) = next {
            if i64::try_from(entries.len()).unwrap_or(i64::MAX) >= max_count {
                break;
            }
            let commit = self.read_commit(&hash)?;
            entries.push(format!("Commit: {hash}\nAuthor: {AUTHOR}\nMessage: {}\n", commit.message));
            next = commit.parent;
        }
        Ok(format!("Commit history:\n{}", entries.join("\n")))
    }

    fn create_branch(&self, name: &str, base: Option<&str>) -> Result<String, String> {
        if !valid_branch_name(name) {
            return Err(format!("Error: '{name}' is not a valid branch name"));
        }
        if self.branch_commit(name)?.is_some() {
            return Err(format!("Error: a branch named '{name}' already exists"));
        }
        let base = match base {
            Some(base) => base.to_owned(),
            None => self.branch()?,
        };
        let hash = match self.branch_commit(&base)? {
            Some(hash) => hash,
            None if valid_branch_name(&base) => return Err(format!("Error: Not a valid object name: '{base}'")),
            None => return Err(format!("Error: '{base}' is not a valid branch name")),
        };
        let path = self.git.join("refs/heads").join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error("create the branch"))?;
        }
        std::fs::write(path, format!("{hash}\n")).map_err(io_error("create the branch"))?;
        Ok(format!("Created branch '{name}' from '{base}'"))
    }

    /// A commit hash from `HEAD`, a branch name or a hash (a unique prefix of 4 or more
    /// digits), each optionally followed by `^` and `~N` steps to parents.
    fn resolve(&self, revision: &str) -> Result<String, String> {
        let not_found = || format!("Error: Ref '{revision}' did not resolve to an object");
        let split = revision.find(['^', '~']).unwrap_or(revision.len());
        let (base, steps) = revision.split_at(split);
        let mut hash = if base == "HEAD" {
            self.head_commit()?.ok_or_else(not_found)?
        } else if let Some(hash) = self.branch_commit(base).ok().flatten().filter(|_| valid_branch_name(base)) {
            hash
        } else if base.len() >= 4 && base.chars().all(|c| c.is_ascii_hexdigit()) {
            let lower = base.to_ascii_lowercase();
            let mut found = Vec::new();
            for entry in std::fs::read_dir(self.git.join("commits")).map_err(io_error("list the commits"))? {
                let name = entry.map_err(io_error("list the commits"))?.file_name().to_string_lossy().into_owned();
                if name.starts_with(&lower) {
                    found.push(name);
                }
            }
            match found.as_slice() {
                [one] => one.clone(),
                [] => return Err(not_found()),
                _ => return Err(format!("Error: short object ID {base} is ambiguous")),
            }
        } else {
            return Err(not_found());
        };
        let mut rest = steps;
        while !rest.is_empty() {
            let count = if let Some(after) = rest.strip_prefix('^') {
                rest = after;
                1
            } else if let Some(after) = rest.strip_prefix('~') {
                let digits = after.chars().take_while(char::is_ascii_digit).count();
                rest = &after[digits..];
                if digits == 0 { 1 } else { after[..digits].parse::<usize>().map_err(|_| not_found())? }
            } else {
                return Err(not_found());
            };
            for _ in 0..count {
                hash = self.read_commit(&hash)?.parent.ok_or_else(not_found)?;
            }
        }
        Ok(hash)
    }

    fn show(&self, revision: &str) -> Result<String, String> {
        let hash = self.resolve(revision)?;
        let commit = self.read_commit(&hash)?;
        let parent_tree = self.tree_of(commit.parent.as_deref())?;
        let mut text = format!("Commit: {hash}\nAuthor: {AUTHOR}\nMessage: {}\n", commit.message);
        let paths: BTreeSet<&String> = parent_tree.keys().chain(commit.tree.keys()).collect();
        for path in paths {
            let (old, new) = (parent_tree.get(path), commit.tree.get(path));
            if old == new {
                continue;
            }
            let old = old.map(|id| self.blob(id)).transpose()?;
            let new = new.map(|id| self.blob(id)).transpose()?;
            text.push('\n');
            text.push_str(&file_diff(path, old.as_deref(), new.as_deref(), DEFAULT_CONTEXT_LINES));
        }
        Ok(text)
    }
}

/// Letters, digits, `-`, `_`, `.` and `/` between non-empty parts that do not start with `.`.
fn valid_branch_name(name: &str) -> bool {
    !name.is_empty()
        && !name.ends_with(".lock")
        && name.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        && !name.contains("..")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// A unified diff of one file with a single hunk: the changed lines between the common
/// first and last lines, with up to `context` lines around them.
fn file_diff(path: &str, old: Option<&[u8]>, new: Option<&[u8]>, context: usize) -> String {
    let old_text = old.map(String::from_utf8_lossy).unwrap_or_default();
    let new_text = new.map(String::from_utf8_lossy).unwrap_or_default();
    let a: Vec<&str> = old_text.lines().collect();
    let b: Vec<&str> = new_text.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let start = prefix.saturating_sub(context);
    let after = suffix.min(context);
    let (a_end, b_end) = (a.len() - suffix + after, b.len() - suffix + after);
    let range = |from: usize, to: usize| {
        let count = to - from;
        if count == 0 { format!("{from},0") } else { format!("{},{count}", from + 1) }
    };
    let mut text = format!(
        "diff --git a/{path} b/{path}\n--- {}\n+++ {}\n@@ -{} +{} @@\n",
        if old.is_some() { format!("a/{path}") } else { "/dev/null".to_owned() },
        if new.is_some() { format!("b/{path}") } else { "/dev/null".to_owned() },
        range(start, a_end),
        range(start, b_end),
    );
    let changed_a = a.len() - suffix;
    let changed_b = b.len() - suffix;
    for line in &a[start..prefix] {
        let _ = writeln!(text, " {line}");
    }
    for line in &a[prefix..changed_a] {
        let _ = writeln!(text, "-{line}");
    }
    for line in &b[prefix..changed_b] {
        let _ = writeln!(text, "+{line}");
    }
    for line in &a[changed_a..a_end] {
        let _ = writeln!(text, " {line}");
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Git, file_diff, valid_branch_name};

    fn args(value: Value) -> rmcp::model::JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    async fn ok(git: &Git, name: &str, value: Value) -> String {
        match git.call(name, args(value)).await {
            Some(Ok(text)) => text,
            other => panic!("{name}: {other:?}"),
        }
    }

    async fn err(git: &Git, name: &str, value: Value) -> String {
        match git.call(name, args(value)).await {
            Some(Err(text)) => text,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn add_commit_log_show_status_and_branches() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let repo = dir.path().to_str().expect("UTF-8 path").to_owned();
        let git = Git::default();

        let status = ok(&git, "git_status", json!({"repo_path": repo})).await;
        assert!(status.contains("On branch main") && status.contains("No commits yet"), "{status}");
        assert!(dir.path().join(".git/elengtis-shapes-repo").is_file());
        assert_eq!(ok(&git, "git_log", json!({"repo_path": repo})).await, "Commit history:\n");

        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/b.txt"), "b\n").expect("write");
        let status = ok(&git, "git_status", json!({"repo_path": repo})).await;
        assert!(status.contains("Untracked files:\n\ta.txt\n\tsub/b.txt"), "{status}");
        assert_eq!(
            ok(&git, "git_add", json!({"repo_path": repo, "files": ["a.txt"]})).await,
            "Files staged successfully"
        );
        let status = ok(&git, "git_status", json!({"repo_path": repo})).await;
        assert!(status.contains("Changes to be committed:\n\tnew file:   a.txt"), "{status}");
        let first = ok(&git, "git_commit", json!({"repo_path": repo, "message": "first"})).await;
        let first_hash = first.strip_prefix("Changes committed successfully with hash ").expect("hash").to_owned();
        assert_eq!(first_hash.len(), 40);

        std::fs::write(dir.path().join("a.txt"), "one\n2\n").expect("write");
        let diff = ok(&git, "git_diff_unstaged", json!({"repo_path": repo})).await;
        assert!(diff.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"), "{diff}");
        ok(&git, "git_add", json!({"repo_path": repo, "files": ["."]})).await;
        let second = ok(&git, "git_commit", json!({"repo_path": repo, "message": "second\n\nbody"})).await;
        let second_hash = second.rsplit(' ').next().expect("hash").to_owned();
        assert_eq!(
            ok(&git, "git_status", json!({"repo_path": repo})).await,
            "Repository status:\nOn branch main\n\nnothing to commit, working tree clean"
        );

        let log = ok(&git, "git_log", json!({"repo_path": repo})).await;
        let at_second = log.find("Message: second").expect("second");
        let at_first = log.find("Message: first").expect("first");
        assert!(at_second < at_first, "newest first: {log}");
        let one = ok(&git, "git_log", json!({"repo_path": repo, "max_count": 1})).await;
        assert!(one.contains("second") && !one.contains("Message: first"), "{one}");
        let reflog = std::fs::read_to_string(dir.path().join(".git/logs/HEAD")).expect("reflog");
        assert_eq!(reflog, format!("{first_hash} commit: first\n{second_hash} commit: second\n"));

        let shown = ok(&git, "git_show", json!({"repo_path": repo, "revision": "HEAD"})).await;
        assert!(shown.starts_with(&format!("Commit: {second_hash}\n")), "{shown}");
        assert!(shown.contains("+++ b/sub/b.txt") && shown.contains("+2"), "{shown}");
        let shown = ok(&git, "git_show", json!({"repo_path": repo, "revision": "HEAD~1"})).await;
        assert!(shown.starts_with(&format!("Commit: {first_hash}\n")), "{shown}");
        let shown = ok(&git, "git_show", json!({"repo_path": repo, "revision": &first_hash[..7]})).await;
        assert!(shown.contains("--- /dev/null\n+++ b/a.txt"), "{shown}");
        assert!(
            err(&git, "git_show", json!({"repo_path": repo, "revision": "nope"})).await.contains("did not resolve")
        );

        assert_eq!(
            ok(&git, "git_create_branch", json!({"repo_path": repo, "branch_name": "feature/x"})).await,
            "Created branch 'feature/x' from 'main'"
        );
        let branch = std::fs::read_to_string(dir.path().join(".git/refs/heads/feature/x")).expect("ref");
        assert_eq!(branch.trim(), second_hash);
        assert!(
            err(&git, "git_create_branch", json!({"repo_path": repo, "branch_name": "y", "base_branch": "gone"}))
                .await
                .contains("Not a valid object name")
        );
        assert!(
            err(&git, "git_create_branch", json!({"repo_path": repo, "branch_name": "../x"})).await.contains("valid")
        );

        // The same calls in a new repository give the same hashes.
        let other = tempfile::tempdir().expect("temporary directory");
        let other_repo = other.path().to_str().expect("UTF-8 path");
        std::fs::write(other.path().join("a.txt"), "one\ntwo\n").expect("write");
        ok(&git, "git_add", json!({"repo_path": other_repo, "files": ["a.txt"]})).await;
        assert_eq!(ok(&git, "git_commit", json!({"repo_path": other_repo, "message": "first"})).await, first);
    }

    #[tokio::test]
    async fn bad_paths_and_real_repositories_are_refused() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let git = Git::default();
        let missing = dir.path().join("missing");
        let text = err(&git, "git_status", json!({"repo_path": missing})).await;
        assert!(text.starts_with("Error: no such repository path"), "{text}");
        assert!(!missing.exists());

        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join(".git")).expect("mkdir");
        let text = err(&git, "git_commit", json!({"repo_path": real, "message": "m"})).await;
        assert!(text.contains("did not create"), "{text}");
        assert_eq!(std::fs::read_dir(real.join(".git")).expect("list").count(), 0);

        let repo = dir.path().to_str().expect("UTF-8 path");
        for outside in ["../x", "/etc/passwd", ".git/HEAD"] {
            let text = err(&git, "git_add", json!({"repo_path": repo, "files": [outside]})).await;
            assert!(text.starts_with("Error: "), "{text}");
        }
        let text = err(&git, "git_add", json!({"repo_path": repo, "files": ["nothing"]})).await;
        assert_eq!(text, "Error: pathspec 'nothing' did not match any files");
        let text = err(&git, "git_add", json!({"repo_path": repo})).await;
        assert!(text.starts_with("Invalid arguments for git_add") && text.contains("files"), "{text}");
    }

    #[test]
    fn branch_names_and_diffs() {
        for good in ["main", "feature/x", "v1.2", "a_b-c"] {
            assert!(valid_branch_name(good), "{good}");
        }
        for bad in ["", "/x", "x/", "a..b", ".hidden", "x.lock", "a b", "a//b"] {
            assert!(!valid_branch_name(bad), "{bad}");
        }
        assert_eq!(
            file_diff("f", None, Some(b"x\n"), 3),
            "diff --git a/f b/f\n--- /dev/null\n+++ b/f\n@@ -0,0 +1,1 @@\n+x\n"
        );
        assert_eq!(
            file_diff("f", Some(b"x\n"), None, 3),
            "diff --git a/f b/f\n--- a/f\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n"
        );
        let old = b"1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = b"1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            file_diff("f", Some(old), Some(new), 1),
            "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n"
        );
    }
}
