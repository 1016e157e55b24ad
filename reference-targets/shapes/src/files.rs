//! `--shape files`: six tools of `@modelcontextprotocol/server-filesystem`, confined to one
//! allowed directory (`--root`).
//!
//! A path is absolute or relative to the root. It is normalised (`.`/`..`), its existing
//! part resolved through symlinks, and then it must lie inside the root; anything else, a
//! dangling symlink included, is the real server's tool error `Access denied - path outside
//! allowed directories: <path> not in <root>`.

use std::{
    io,
    path::{Component, Path, PathBuf},
    time::SystemTime,
};

use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::server::{ToolOutcome, arguments, blocking, tool};

/// The tools, with the real server's (zod-generated) schemas, titles and annotations.
pub fn tools() -> Vec<Tool> {
    let schema = |properties: Value, required: &[&str]| {
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#",
        });
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    };
    let path = || json!({"path": {"type": "string"}});
    vec![
        tool(json!({
            "name": "read_file",
            "title": "Read File",
            "description": "Read the complete contents of a file from the file system. Handles various text encodings and \
                provides detailed error messages if the file cannot be read. Use this tool when you need to examine the \
                contents of a single file. Use the 'head' parameter to read only the first N lines of a file, or the \
                'tail' parameter to read only the last N lines of a file. Only works within allowed directories.",
            "inputSchema": schema(
                json!({
                    "path": {"type": "string"},
                    "tail": {"type": "number", "description": "If provided, returns only the last N lines of the file"},
                    "head": {"type": "number", "description": "If provided, returns only the first N lines of the file"},
                }),
                &["path"],
            ),
            "annotations": {"readOnlyHint": true},
        })),
        tool(json!({
            "name": "write_file",
            "title": "Write File",
            "description": "Create a new file or completely overwrite an existing file with new content. Use with caution \
                as it will overwrite existing files without warning. Handles text content with proper encoding. Only works \
                within allowed directories.",
            "inputSchema": schema(json!({"path": {"type": "string"}, "content": {"type": "string"}}), &["path", "content"]),
            "annotations": {"readOnlyHint": false, "idempotentHint": true, "destructiveHint": true},
        })),
        tool(json!({
            "name": "create_directory",
            "title": "Create Directory",
            "description": "Create a new directory or ensure a directory exists. Can create multiple nested directories in \
                one operation. If the directory already exists, this operation will succeed silently. Perfect for setting \
                up directory structures for projects or ensuring required paths exist. Only works within allowed directories.",
            "inputSchema": schema(path(), &["path"]),
            "annotations": {"readOnlyHint": false, "idempotentHint": true, "destructiveHint": false},
        })),
        tool(json!({
            "name": "list_directory",
            "title": "List Directory",
            "description": "Get a detailed listing of all files and directories in a specified path. Results clearly \
                distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is essential for \
                understanding directory structure and finding specific files within a directory. Only works within allowed \
                directories.",
            "inputSchema": schema(path(), &["path"]),
            "annotations": {"readOnlyHint": true},
        })),
        tool(json!({
            "name": "get_file_info",
            "title": "Get File Info",
            "description": "Retrieve detailed metadata about a file or directory. Returns comprehensive information \
                including size, creation time, last modified time, permissions, and type. This tool is perfect for \
                understanding file characteristics without reading the actual content. Only works within allowed \
                directories.",
            "inputSchema": schema(path(), &["path"]),
            "annotations": {"readOnlyHint": true},
        })),
        tool(json!({
            "name": "list_allowed_directories",
            "title": "List Allowed Directories",
            "description": "Returns the list of directories that this server is allowed to access. Subdirectories within \
                these allowed directories are also accessible. Use this to understand which directories and their nested \
                paths are available before trying to access files.",
            "inputSchema": schema(json!({}), &[]),
            "annotations": {"readOnlyHint": true},
        })),
    ]
}

#[derive(Debug, Deserialize)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    tail: Option<f64>,
    #[serde(default)]
    head: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Debug, Deserialize)]
struct PathArgs {
    path: String,
}

/// The allowed directory (canonical).
#[derive(Debug)]
pub struct Files {
    root: PathBuf,
}

impl Files {
    /// Creates `root` if missing.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root)?;
        Ok(Self { root: root.canonicalize()? })
    }

    pub async fn call(&self, name: &str, args: JsonObject) -> Option<ToolOutcome> {
        let outcome = match name {
            "read_file" => match arguments::<ReadArgs>(name, args) {
                Ok(a) => self.run(a.path.clone(), move |real| read(real, a.head, a.tail)).await,
                Err(e) => Err(e),
            },
            "write_file" => match arguments::<WriteArgs>(name, args) {
                Ok(WriteArgs { path, content }) => {
                    let shown = path.clone();
                    self.run(path, move |real| {
                        std::fs::write(real, content).map_err(|e| io_message(&e, "open", real))?;
                        tracing::info!(path = %real.display(), "file written");
                        Ok(format!("Successfully wrote to {shown}"))
                    })
                    .await
                }
                Err(e) => Err(e),
            },
            "create_directory" => match arguments::<PathArgs>(name, args) {
                Ok(PathArgs { path }) => {
                    let shown = path.clone();
                    self.run(path, move |real| {
                        std::fs::create_dir_all(real).map_err(|e| io_message(&e, "mkdir", real))?;
                        Ok(format!("Successfully created directory {shown}"))
                    })
                    .await
                }
                Err(e) => Err(e),
            },
            "list_directory" => match arguments::<PathArgs>(name, args) {
                Ok(PathArgs { path }) => self.run(path, list).await,
                Err(e) => Err(e),
            },
            "get_file_info" => match arguments::<PathArgs>(name, args) {
                Ok(PathArgs { path }) => self.run(path, info).await,
                Err(e) => Err(e),
            },
            "list_allowed_directories" => Ok(format!("Allowed directories:\n{}", self.root.display())),
            _ => return None,
        };
        Some(outcome)
    }

    /// Resolves `requested` inside the root and runs `op` on the real path.
    async fn run(
        &self,
        requested: String,
        op: impl FnOnce(&Path) -> Result<String, String> + Send + 'static,
    ) -> ToolOutcome {
        let root = self.root.clone();
        blocking(move || {
            let real = resolve(&root, &requested)?;
            op(&real)
        })
        .await
    }
}

/// The real path of `requested` (absolute, or relative to `root`), refused outside `root`.
fn resolve(root: &Path, requested: &str) -> Result<PathBuf, String> {
    let given = Path::new(requested);
    let joined = if given.is_absolute() { given.to_path_buf() } else { root.join(given) };
    let normal = normalise(&joined);
    let denied =
        || format!("Access denied - path outside allowed directories: {} not in {}", normal.display(), root.display());
    let real = real_path(&normal).ok_or_else(denied)?;
    if real.starts_with(root) { Ok(real) } else { Err(denied()) }
}

/// `path` with `.` dropped and `..` applied lexically (never above `/`).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` (absolute, normalised) with its longest existing ancestor resolved through
/// symlinks; `None` when a missing part is a (dangling) symlink.
fn real_path(path: &Path) -> Option<PathBuf> {
    for ancestor in path.ancestors() {
        if let Ok(base) = ancestor.canonicalize() {
            let rest = path.strip_prefix(ancestor).ok()?;
            let mut real = base;
            for part in rest.components() {
                real.push(part);
                if std::fs::symlink_metadata(&real).is_ok() {
                    // It exists yet did not resolve: a dangling symlink could point anywhere.
                    return None;
                }
            }
            return Some(real);
        }
    }
    None
}

/// An I/O failure worded as Node words it (the real server's messages).
fn io_message(e: &io::Error, op: &str, path: &Path) -> String {
    let shown = path.display();
    match e.kind() {
        io::ErrorKind::NotFound => format!("ENOENT: no such file or directory, {op} '{shown}'"),
        io::ErrorKind::IsADirectory => format!("EISDIR: illegal operation on a directory, {op} '{shown}'"),
        io::ErrorKind::NotADirectory => format!("ENOTDIR: not a directory, {op} '{shown}'"),
        io::ErrorKind::PermissionDenied => format!("EACCES: permission denied, {op} '{shown}'"),
        io::ErrorKind::AlreadyExists => format!("EEXIST: file already exists, {op} '{shown}'"),
        _ => format!("{e}, {op} '{shown}'"),
    }
}

/// A line count from the schema's `number` (0, negative or not finite: none).
fn lines_wanted(value: Option<f64>) -> Option<usize> {
    value.filter(|v| v.is_finite() && *v >= 1.0).map(|v| v.min(1e12) as usize)
}

fn read(real: &Path, head: Option<f64>, tail: Option<f64>) -> ToolOutcome {
    let (head, tail) = (lines_wanted(head), lines_wanted(tail));
    if head.is_some() && tail.is_some() {
        return Err("Cannot specify both head and tail parameters simultaneously".to_owned());
    }
    let bytes = std::fs::read(real).map_err(|e| io_message(&e, "open", real))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(match (head, tail) {
        (Some(n), _) => text.lines().take(n).collect::<Vec<_>>().join("\n"),
        (_, Some(n)) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        _ => text,
    })
}

fn list(real: &Path) -> ToolOutcome {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(real).map_err(|e| io_message(&e, "scandir", real))? {
        let entry = entry.map_err(|e| io_message(&e, "scandir", real))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        entries.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    entries.sort();
    Ok(entries
        .iter()
        .map(|(name, dir)| format!("{} {name}", if *dir { "[DIR]" } else { "[FILE]" }))
        .collect::<Vec<_>>()
        .join("\n"))
}

fn info(real: &Path) -> ToolOutcome {
    let meta = std::fs::metadata(real).map_err(|e| io_message(&e, "stat", real))?;
    let when = |time: io::Result<SystemTime>| {
        time.ok()
            .and_then(|t| time::OffsetDateTime::from(t).format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_else(|| "unknown".to_owned())
    };
    #[cfg(unix)]
    let permissions = format!("{:03o}", std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777);
    #[cfg(not(unix))]
    let permissions = if meta.permissions().readonly() { "444" } else { "666" }.to_owned();
    Ok([
        format!("size: {}", meta.len()),
        format!("created: {}", when(meta.created())),
        format!("modified: {}", when(meta.modified())),
        format!("accessed: {}", when(meta.accessed())),
        format!("isDirectory: {}", meta.is_dir()),
        format!("isFile: {}", meta.is_file()),
        format!("permissions: {permissions}"),
    ]
    .join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Files;

    fn args(value: Value) -> rmcp::model::JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn files_are_written_read_listed_and_described_inside_the_root() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let files = Files::open(&dir.path().join("root")).expect("root");
        let root = dir.path().join("root").canonicalize().expect("root");
        let call = |name: &'static str, value: Value| files.call(name, args(value));

        let done = call("write_file", json!({"path": "notes.txt", "content": "a\nb\nc"})).await;
        assert_eq!(done, Some(Ok("Successfully wrote to notes.txt".to_owned())));
        assert_eq!(std::fs::read_to_string(root.join("notes.txt")).expect("on disk"), "a\nb\nc");
        let absolute = root.join("notes.txt").display().to_string();
        assert_eq!(call("read_file", json!({"path": absolute})).await, Some(Ok("a\nb\nc".to_owned())));
        assert_eq!(call("read_file", json!({"path": "notes.txt", "head": 2})).await, Some(Ok("a\nb".to_owned())));
        assert_eq!(call("read_file", json!({"path": "./x/../notes.txt", "tail": 1})).await, Some(Ok("c".to_owned())));

        let made = call("create_directory", json!({"path": "sub/deeper"})).await;
        assert_eq!(made, Some(Ok("Successfully created directory sub/deeper".to_owned())));
        assert_eq!(
            call("list_directory", json!({"path": "."})).await,
            Some(Ok("[FILE] notes.txt\n[DIR] sub".to_owned()))
        );
        let info = call("get_file_info", json!({"path": "notes.txt"})).await.expect("tool").expect("ok");
        assert!(info.starts_with("size: 5\ncreated: ") && info.contains("isFile: true"), "{info}");
        assert_eq!(
            call("list_allowed_directories", json!({})).await,
            Some(Ok(format!("Allowed directories:\n{}", root.display())))
        );
        let missing = call("read_file", json!({"path": "gone.txt"})).await.expect("tool");
        assert_eq!(
            missing,
            Err(format!("ENOENT: no such file or directory, open '{}'", root.join("gone.txt").display()))
        );
    }

    #[tokio::test]
    async fn paths_outside_the_root_are_refused() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let files = Files::open(&dir.path().join("root")).expect("root");
        let outside = dir.path().canonicalize().expect("dir");
        for path in ["../escape.txt", "/etc/passwd", "sub/../../escape.txt"] {
            let refused = files.call("write_file", args(json!({"path": path, "content": "x"}))).await.expect("tool");
            let message = refused.expect_err(path);
            assert!(message.starts_with("Access denied - path outside allowed directories: "), "{message}");
        }
        assert!(!outside.join("escape.txt").exists());

        #[cfg(unix)]
        {
            let root = outside.join("root");
            std::os::unix::fs::symlink(&outside, root.join("out")).expect("symlink");
            std::os::unix::fs::symlink(outside.join("nowhere.txt"), root.join("dangling")).expect("symlink");
            for path in ["out/escape.txt", "dangling"] {
                let refused =
                    files.call("write_file", args(json!({"path": path, "content": "x"}))).await.expect("tool");
                assert!(refused.is_err(), "{path}: {refused:?}");
            }
            assert!(!outside.join("escape.txt").exists() && !outside.join("nowhere.txt").exists());
        }
    }
}
