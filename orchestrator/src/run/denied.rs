//! The explanation of a results directory this process may not create: who the process is,
//! who owns the directory it would be created in, and what fixes it — the same shape as the
//! Docker socket's error (`sandbox/docker/api.rs`), since the usual case is the same: the tool
//! image runs as an unprivileged uid that does not own the directory mounted at `/work`.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

/// Who tried, and the directory that refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denied<'a> {
    /// The effective uid and gid of this process.
    pub uid: u32,
    pub gid: u32,
    /// The nearest existing ancestor of the directory being created.
    pub dir: &'a Path,
    /// Its owner, group and permission bits, when they could be read.
    pub owner: Option<(u32, u32, u32)>,
    /// This process runs in a container (`/.dockerenv`).
    pub in_container: bool,
}

/// `detail` for a creation of `path` refused with `EACCES`/`EPERM`: what failed, who this process
/// is, who owns the directory, and the fix.
pub(crate) fn explain(path: &Path, source: &std::io::Error) -> String {
    let nearest = path.ancestors().find(|a| !a.as_os_str().is_empty() && a.is_dir()).unwrap_or(Path::new("."));
    // Absolute, so that `.` reads as the directory it is (`/work` in the tool image).
    let dir = nearest.canonicalize().unwrap_or_else(|_| nearest.to_path_buf());
    let owner = std::fs::metadata(&dir).ok().map(|m| (m.uid(), m.gid(), m.permissions().mode() & 0o7777));
    let denied = Denied {
        uid: nix::unistd::geteuid().as_raw(),
        gid: nix::unistd::getegid().as_raw(),
        dir: &dir,
        owner,
        in_container: Path::new("/.dockerenv").exists(),
    };
    text(path, source, &denied)
}

pub(crate) fn text(path: &Path, source: &std::io::Error, denied: &Denied<'_>) -> String {
    let Denied { uid, gid, dir, owner, in_container } = denied;
    let dir = dir.display();
    let owned = match owner {
        Some((owner, group, mode)) => format!("{dir} is owned by uid {owner} gid {group} with mode {mode:04o}"),
        None => format!("the owner of {dir} cannot be read"),
    };
    let fix = if *in_container {
        format!(
            "in a container with that directory mounted (the tool image runs as uid 65534 unless told otherwise), run the container as the directory's owner: `docker run --user \"$(id -u):$(id -g)\" …` when you own it, as the README's line does; or give uid {uid} write access to the host directory mounted at {dir}"
        )
    } else {
        format!("give uid {uid} write access to {dir} (e.g. `chown {uid}:{gid} {dir}`)")
    };
    format!(
        "failed to create {}: {source}; this process runs as uid {uid} gid {gid} and {owned}, so it cannot create entries there: {fix}",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_uid_the_owner_and_the_fix() {
        let error = std::io::Error::from_raw_os_error(13);
        let denied =
            Denied { uid: 65534, gid: 65534, dir: Path::new("/work"), owner: Some((0, 0, 0o755)), in_container: true };
        let text = text(Path::new("results/ci"), &error, &denied);
        assert!(text.starts_with("failed to create results/ci: Permission denied"), "{text}");
        assert!(text.contains("runs as uid 65534 gid 65534"), "{text}");
        assert!(text.contains("/work is owned by uid 0 gid 0 with mode 0755"), "{text}");
        assert!(
            text.contains(r#"run the container as the directory's owner: `docker run --user "$(id -u):$(id -g)" …`"#),
            "{text}"
        );
        assert!(text.contains("give uid 65534 write access to the host directory mounted at /work"), "{text}");
        let outside = Denied { in_container: false, owner: None, ..denied };
        let text = super::text(Path::new("results/ci"), &error, &outside);
        assert!(text.contains("the owner of /work cannot be read"), "{text}");
        assert!(text.ends_with("give uid 65534 write access to /work (e.g. `chown 65534:65534 /work`)"), "{text}");
        assert!(!text.contains("docker run"), "{text}");
    }
}
