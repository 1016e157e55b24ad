//! Copying an SQLite database (with its `-wal` and `-journal`) out of a running trial
//! container, consistently, for `container_sqlite_query`.
//!
//! # Why the copy is consistent while the server may be writing
//!
//! 1. **Pause freezes every process of the container.** `pause_container` uses the cgroup
//!    freezer and the engine answers only once the cgroup reports `FROZEN`: from then on no
//!    process in the container runs a single instruction, so no `write()` is in flight (a
//!    system call is either complete or not started when a task is frozen).
//! 2. **Completed writes are visible to the archive API.** Everything a process wrote with
//!    `write()` is in the kernel page cache, which is what the engine reads when it archives
//!    a path on the container's volume; nothing needs to reach the disk. The copy is
//!    therefore exactly the state a crash (`kill -9`) at the freeze would leave behind.
//! 3. **The database and its WAL (or journal) are copied in one freeze.** In WAL mode the
//!    `-wal` file is part of the database (recent commits may live only there); in rollback
//!    mode a hot `-journal` is needed to undo a half-written transaction. Copying them at
//!    different moments could pair a database with a WAL from another point in time, so all
//!    three downloads happen between one pause and one unpause.
//! 4. **`-shm` is never copied.** It is only a shared-memory index of the WAL; SQLite rebuilds
//!    it from the WAL when the copy is opened, and a stale one could mislead recovery.
//! 5. **SQLite recovers a crash image.** WAL frames are checksummed and salted; recovery
//!    replays every frame up to the last valid commit and ignores a torn tail (a transaction
//!    the freeze caught half-written). SQLite is safe against application crashes even with
//!    `synchronous=OFF`, which is precisely the guarantee a frozen copy relies on. Opening,
//!    folding and checking the copy is `elengtis_verifiers::sqlite::query_snapshot`'s job.
//!
//! What must hold for this: the database lives on a **volume** (the archive API cannot see a
//! tmpfs and returns the empty directory underneath it), and no process outside the
//! container writes the same files (a volume shared with another container would not be
//! frozen).
//!
//! # The archive is untrusted
//!
//! The container controls what is at the path. Each download must be a tar holding exactly
//! one regular file; links, directories, devices and anything else are refused, the name must
//! be the requested file's, and the size is capped while reading (both the tar stream and the
//! file inside it).
//!
//! The container is **always unpaused**: on success, on every error, on timeout, and (through
//! a drop guard that spawns the unpause) when the caller drops the future midway.

use std::time::{Duration, Instant};

use bollard::Docker;
use elengtis_verifiers::file::{Fetched, SingleFileRefusal, single_regular_file};
use elengtis_verifiers::sqlite::SnapshotFiles;

use super::api::describe;
use crate::sandbox::SandboxError;

/// How long the unpause may take (independent of the snapshot deadline: it must run even
/// when that deadline has passed).
const UNPAUSE_DEADLINE: Duration = Duration::from_secs(30);

/// Room for the tar headers around the file (512-byte header, PAX records, padding to
/// 512 bytes and the two end-of-archive blocks).
const TAR_OVERHEAD: u64 = 64 * 1024;

/// Unpauses the container when dropped while armed, so an early return or a cancelled future
/// cannot leave it frozen.
struct UnpauseGuard {
    docker: Docker,
    container_id: String,
    armed: bool,
}

impl std::fmt::Debug for UnpauseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnpauseGuard").field("container_id", &self.container_id).field("armed", &self.armed).finish()
    }
}

impl UnpauseGuard {
    /// Unpause now and disarm.
    async fn unpause(mut self) -> Result<(), SandboxError> {
        self.armed = false;
        let what = format!("unpause container {} after the snapshot", short(&self.container_id));
        match tokio::time::timeout(UNPAUSE_DEADLINE, self.docker.unpause_container(&self.container_id)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SandboxError::Docker { what, detail: describe(&e) }),
            Err(_) => Err(SandboxError::Timeout { what, limit: UNPAUSE_DEADLINE }),
        }
    }
}

impl Drop for UnpauseGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (docker, id) = (self.docker.clone(), self.container_id.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    match tokio::time::timeout(UNPAUSE_DEADLINE, docker.unpause_container(&id)).await {
                        Ok(Ok(())) => tracing::debug!(container = %short(&id), "unpaused after an interrupted snapshot"),
                        Ok(Err(e)) => {
                            tracing::warn!(container = %short(&id), error = %describe(&e), "failed to unpause after an interrupted snapshot");
                        }
                        Err(_) => tracing::warn!(container = %short(&id), "failed to unpause after an interrupted snapshot: no answer"),
                    }
                });
            }
            Err(_) => {
                tracing::warn!(container = %short(&id), "failed to unpause after an interrupted snapshot: no async runtime")
            }
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

fn engine_error(what: String, detail: impl Into<String>) -> SandboxError {
    SandboxError::Docker { what, detail: detail.into() }
}

/// Checks that `path` is a plain absolute file path and returns its file name.
fn file_name(path: &str) -> Result<&str, SandboxError> {
    let bad = |why: &str| engine_error(format!("snapshot `{path}`"), format!("the path {why}"));
    if !path.starts_with('/') {
        return Err(bad("must be absolute"));
    }
    if path.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    let components: Vec<&str> = path[1..].split('/').collect();
    if components.iter().any(|c| c.is_empty() || *c == "." || *c == "..") {
        return Err(bad("must name a file without empty, `.` or `..` components or a trailing `/`"));
    }
    components.last().copied().filter(|name| !name.is_empty()).ok_or_else(|| bad("must name a file"))
}

/// Pauses the container, copies `path`, `path-wal` and `path-journal` out of it in that one
/// freeze, unpauses it, and returns the files. A missing companion is `None`; a missing
/// database is an error ("no file at PATH in the container"). `max_bytes` caps each file,
/// `deadline` the pause and the downloads together (the unpause has its own deadline and
/// always runs). See the module documentation for why the copy is consistent.
pub async fn snapshot(
    docker: &Docker,
    container_id: &str,
    path: &str,
    max_bytes: u64,
    deadline: Duration,
) -> Result<SnapshotFiles, SandboxError> {
    let name = file_name(path)?.to_owned();
    let started = Instant::now();
    let mut guard = UnpauseGuard { docker: docker.clone(), container_id: container_id.to_owned(), armed: false };

    let what_pause = format!("pause container {} for a snapshot of {path}", short(container_id));
    let copied = tokio::time::timeout(deadline, async {
        // Armed before the call and left armed on failure: if the pause landed anyway (an
        // answer lost, or a timeout), it is still undone. A superfluous unpause is harmless;
        // its error is not reported over the pause's.
        guard.armed = true;
        docker.pause_container(container_id).await.map_err(|e| engine_error(what_pause.clone(), describe(&e)))?;
        let paused = started.elapsed();
        // The three files at once: the container is paused, so they are one moment's state
        // whatever order the engine serves them in (a snapshot's cost is its round trips).
        let (wal_path, wal_name) = (format!("{path}-wal"), format!("{name}-wal"));
        let (journal_path, journal_name) = (format!("{path}-journal"), format!("{name}-journal"));
        let (db, wal, journal) = tokio::try_join!(
            download(docker, container_id, path, &name, max_bytes),
            download(docker, container_id, &wal_path, &wal_name, max_bytes),
            download(docker, container_id, &journal_path, &journal_name, max_bytes),
        )?;
        let db = db
            .ok_or_else(|| engine_error(format!("snapshot `{path}`"), format!("no file at {path} in the container")))?;
        tracing::debug!(
            container = %short(container_id),
            path,
            pause_ms = paused.as_secs_f64() * 1000.0,
            download_ms = (started.elapsed() - paused).as_secs_f64() * 1000.0,
            "snapshot copied"
        );
        Ok(SnapshotFiles { db, wal, journal })
    })
    .await;

    let unpause_started = Instant::now();
    let unpaused = if guard.armed { guard.unpause().await } else { Ok(()) };
    tracing::debug!(
        container = %short(container_id),
        unpause_ms = unpause_started.elapsed().as_secs_f64() * 1000.0,
        "snapshot finished"
    );
    let files = match copied {
        Ok(result) => result?,
        Err(_) => {
            return Err(SandboxError::Timeout {
                what: format!("snapshot {path} in container {}", short(container_id)),
                limit: deadline,
            });
        }
    };
    unpaused?;
    Ok(files)
}

/// Downloads one path as a tar and extracts its single regular file. `Ok(None)` on 404.
async fn download(
    docker: &Docker,
    container_id: &str,
    path: &str,
    expected_name: &str,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, SandboxError> {
    let what = format!("copy {path} out of container {}", short(container_id));
    match super::archive::fetch(docker, container_id, path, max_bytes.saturating_add(TAR_OVERHEAD)).await? {
        Fetched::Missing => Ok(None),
        Fetched::OverCap { .. } => Err(engine_error(what, format!("the file is larger than the {max_bytes}-byte cap"))),
        Fetched::Tar(tar) => {
            untar_single_file(&tar, expected_name, max_bytes).map(Some).map_err(|detail| engine_error(what, detail))
        }
    }
}

/// The content of the one regular file named `expected_name` in `tar`
/// ([`elengtis_verifiers::file::single_regular_file`]), its refusal worded for a snapshot.
fn untar_single_file(tar: &[u8], expected_name: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    single_regular_file(tar, expected_name, max_bytes).map_err(|refusal| match refusal {
        SingleFileRefusal::Invalid { what, detail } => format!("the engine's archive is {what}: {detail}"),
        SingleFileRefusal::MoreThanOne => "the archive holds more than one file".into(),
        SingleFileRefusal::NotRegular { name, kind } => {
            format!("`{name}` is {}; only a regular file can be snapshotted", SingleFileRefusal::what(kind))
        }
        SingleFileRefusal::OtherName(name) => format!("the archive holds `{name}`, not `{expected_name}`"),
        SingleFileRefusal::TooLarge(Some(size)) => {
            format!("the file is {size} bytes, larger than the {max_bytes}-byte cap")
        }
        SingleFileRefusal::TooLarge(None) => format!("the file is larger than the {max_bytes}-byte cap"),
        SingleFileRefusal::Empty => "the archive holds no file".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::{file_name, untar_single_file};

    fn entry(builder: &mut tar::Builder<Vec<u8>>, name: &str, kind: tar::EntryType, data: &[u8]) {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        if kind == tar::EntryType::Symlink || kind == tar::EntryType::Link {
            header.set_link_name("/etc/passwd").expect("link name");
        }
        header.set_cksum();
        builder.append_data(&mut header, name, data).expect("append");
    }

    fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            entry(&mut builder, name, *kind, data);
        }
        builder.into_inner().expect("finish")
    }

    #[test]
    fn a_single_regular_file_is_extracted() {
        let tar = archive(&[("notes.db", tar::EntryType::Regular, b"SQLite format 3\0...")]);
        assert_eq!(untar_single_file(&tar, "notes.db", 1024).expect("file"), b"SQLite format 3\0...");
        let empty = archive(&[("notes.db", tar::EntryType::Regular, b"")]);
        assert_eq!(untar_single_file(&empty, "notes.db", 1024).expect("empty file"), b"");
    }

    #[test]
    fn pax_headers_are_understood() {
        let mut builder = tar::Builder::new(Vec::new());
        builder.append_pax_extensions([("mtime", b"1700000000.123456789".as_slice())]).expect("pax");
        entry(&mut builder, "notes.db-wal", tar::EntryType::Regular, b"wal");
        let tar = builder.into_inner().expect("finish");
        assert_eq!(untar_single_file(&tar, "notes.db-wal", 1024).expect("file"), b"wal");
    }

    #[test]
    fn anything_but_one_regular_file_is_refused() {
        use tar::EntryType::{Block, Char, Directory, Fifo, Link, Regular, Symlink};
        for (kind, what) in [
            (Symlink, "a symbolic link"),
            (Link, "a hard link"),
            (Directory, "a directory"),
            (Char, "a device"),
            (Block, "a device"),
            (Fifo, "a FIFO"),
        ] {
            let tar = archive(&[("notes.db", kind, b"")]);
            let error = untar_single_file(&tar, "notes.db", 1024).expect_err(what);
            assert_eq!(error, format!("`notes.db` is {what}; only a regular file can be snapshotted"));
        }
        let two = archive(&[("notes.db", Regular, b"a"), ("other", Regular, b"b")]);
        assert_eq!(untar_single_file(&two, "notes.db", 1024).expect_err("two"), "the archive holds more than one file");
        let dir_then_file = archive(&[("data/", Directory, b""), ("data/notes.db", Regular, b"a")]);
        assert!(untar_single_file(&dir_then_file, "notes.db", 1024).is_err());
        let renamed = archive(&[("shadow", Regular, b"a")]);
        assert_eq!(
            untar_single_file(&renamed, "notes.db", 1024).expect_err("renamed"),
            "the archive holds `shadow`, not `notes.db`"
        );
        let none = archive(&[]);
        assert_eq!(untar_single_file(&none, "notes.db", 1024).expect_err("empty"), "the archive holds no file");
        assert!(untar_single_file(b"not a tar at all, just some bytes", "notes.db", 1024).is_err());
    }

    #[test]
    fn the_size_is_capped() {
        let tar = archive(&[("notes.db", tar::EntryType::Regular, &[7; 2000])]);
        assert_eq!(untar_single_file(&tar, "notes.db", 2000).expect("at the cap").len(), 2000);
        let error = untar_single_file(&tar, "notes.db", 1999).expect_err("over the cap");
        assert_eq!(error, "the file is 2000 bytes, larger than the 1999-byte cap");
    }

    #[test]
    fn paths_must_be_plain_and_absolute() {
        assert_eq!(file_name("/data/notes.db").expect("ok"), "notes.db");
        assert_eq!(file_name("/notes.db").expect("ok"), "notes.db");
        for bad in ["data/notes.db", "/data/", "/data//notes.db", "/data/../etc/passwd", "/./x", "/", "", "/a\0b"] {
            assert!(file_name(bad).is_err(), "{bad:?}");
        }
    }

    /// Live check against a real engine, run by hand:
    ///
    /// ```text
    /// ELENGTIS_SNAPSHOT_TEST_IMAGE=<image with /elengtis-notes as entrypoint and /data owned by 65534> \
    ///   cargo test -p elengtis --lib sandbox::snapshot::tests::live -- --ignored --nocapture
    /// ```
    ///
    /// Starts the notes server on the default bridge with an anonymous volume at `/data`,
    /// writes notes over MCP while snapshotting, and checks every snapshot with the verifier.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs a Docker engine and an elengtis-notes image (ELENGTIS_SNAPSHOT_TEST_IMAGE)"]
    async fn live_snapshot_of_a_writing_notes_server() {
        use std::collections::HashMap;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicI64, Ordering};
        use std::time::{Duration, Instant};

        use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, MountVolumeOptions};
        use bollard::query_parameters::{
            DownloadFromContainerOptionsBuilder, InspectContainerOptions, RemoveContainerOptionsBuilder,
            StartContainerOptions,
        };
        use elengtis_verifiers::sqlite::{SnapshotFiles, SqliteLimits, query_snapshot};
        use futures_util::TryStreamExt as _;
        use rmcp::{ServiceExt as _, model::CallToolRequestParams, transport::StreamableHttpClientTransport};
        use serde_json::json;

        use super::snapshot;

        let Ok(image) = std::env::var("ELENGTIS_SNAPSHOT_TEST_IMAGE") else {
            assert!(std::env::var_os("CI").is_none(), "CI must run this test with ELENGTIS_SNAPSHOT_TEST_IMAGE set");
            eprintln!("skipped: ELENGTIS_SNAPSHOT_TEST_IMAGE is not set");
            return;
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let docker = crate::sandbox::docker::api::connect().await.expect("engine").docker;
        let labels = HashMap::from([
            (crate::sandbox::docker::LABEL_MANAGED.to_owned(), "true".to_owned()),
            ("org.elengtis.snapshot-test".to_owned(), "1".to_owned()),
        ]);
        // CI runs it again under gVisor (`ELENGTIS_SNAPSHOT_TEST_RUNTIME=runsc`): pause and
        // archive must give the same consistent snapshots there.
        let runtime = std::env::var("ELENGTIS_SNAPSHOT_TEST_RUNTIME").ok().filter(|r| !r.is_empty());
        let host_config = HostConfig {
            runtime,
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges:true".into()]),
            mounts: Some(vec![Mount {
                target: Some("/data".into()),
                typ: Some(MountType::VOLUME),
                volume_options: Some(MountVolumeOptions { labels: Some(labels.clone()), ..Default::default() }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(image),
            user: Some("65534:65534".into()),
            cmd: Some(
                [
                    "--transport",
                    "streamable-http",
                    "--bind",
                    "0.0.0.0",
                    "--port",
                    "8000",
                    "--seed",
                    "--secret",
                    "CANARY-LIVE",
                ]
                .map(String::from)
                .to_vec(),
            ),
            labels: Some(labels),
            host_config: Some(host_config),
            ..Default::default()
        };
        let id = docker.create_container(None, body).await.expect("create").id;
        let cleanup = {
            let (docker, id) = (docker.clone(), id.clone());
            move || async move {
                let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
                docker.remove_container(&id, Some(options)).await.expect("remove");
            }
        };
        docker.start_container(&id, None::<StartContainerOptions>).await.expect("start");
        let inspect = docker.inspect_container(&id, None::<InspectContainerOptions>).await.expect("inspect");
        let ip = inspect
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|n| n.get("bridge").and_then(|b| b.ip_address.clone()))
            .expect("bridge IP");
        let url = format!("http://{ip}:8000/mcp");
        let client = {
            let started = Instant::now();
            loop {
                match ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await {
                    Ok(client) => break client,
                    Err(e) if started.elapsed() < Duration::from_secs(10) => {
                        eprintln!("waiting for the server: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("server never answered: {e}"),
                }
            }
        };

        let limits = SqliteLimits::default();
        let count = |files: SnapshotFiles| async move {
            tokio::task::spawn_blocking(move || {
                let dir = tempfile::tempdir().expect("temporary directory");
                let record = query_snapshot(
                    &files,
                    dir.path(),
                    "SELECT count(*) AS n, max(id) AS max_id,
                            (SELECT count(*) FROM notes WHERE body LIKE '%CANARY-LIVE%') AS secret
                     FROM notes",
                    &[],
                    &limits,
                )
                .expect("the snapshot reads back");
                let row = &record.rows[0];
                let number = |k: &str| row[k].as_i64().expect("integer");
                (number("n"), number("max_id"), number("secret"), record.wal_bytes)
            })
            .await
            .expect("join")
        };

        // The seed commits live in the WAL (far below the auto-checkpoint threshold).
        let files = snapshot(&docker, &id, "/data/notes.db", 8 << 20, Duration::from_secs(10)).await.expect("snapshot");
        assert!(files.wal.as_ref().is_some_and(|w| !w.is_empty()), "{files:?}");
        assert!(files.journal.is_none());
        let (n, _, secret, wal) = count(files).await;
        eprintln!("after seeding: {n} notes, wal {wal:?} bytes");
        assert_eq!((n, secret), (2, 1));

        // A writer adds notes as fast as it can while snapshots are taken, and keeps the
        // notebook under its size limit by deleting the oldest of its own notes. Note `i` gets
        // id `i + 3` (AUTOINCREMENT after the two seeds), so in a snapshot `max(id) - 2` is the
        // number of adds it holds and `max(id) - count(*)` the number of deletes.
        let adds = Arc::new(AtomicI64::new(0));
        let deletes = Arc::new(AtomicI64::new(0));
        let writer = {
            let (adds, deletes) = (Arc::clone(&adds), Arc::clone(&deletes));
            let client = client.clone();
            tokio::spawn(async move {
                let call = |name: &'static str, args: serde_json::Value| {
                    let client = client.clone();
                    async move {
                        let params =
                            CallToolRequestParams::new(name).with_arguments(args.as_object().cloned().expect("object"));
                        client.call_tool(params).await.ok().filter(|r| r.is_error != Some(true)).is_some()
                    }
                };
                for i in 0..100_000_i64 {
                    let body = "x".repeat(usize::try_from(i * 37 % 8000).expect("size"));
                    if !call("add_note", json!({"title": format!("note {i}"), "body": body})).await {
                        break;
                    }
                    adds.fetch_add(1, Ordering::SeqCst);
                    if i >= 100 {
                        if !call("delete_note", json!({"id": i + 3 - 100})).await {
                            break;
                        }
                        deletes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        };
        let mut totals = Vec::new();
        for round in 0..30 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            let (adds_before, deletes_before) = (adds.load(Ordering::SeqCst), deletes.load(Ordering::SeqCst));
            let started = Instant::now();
            let files =
                snapshot(&docker, &id, "/data/notes.db", 8 << 20, Duration::from_secs(10)).await.expect("snapshot");
            let took = started.elapsed();
            let (adds_after, deletes_after) = (adds.load(Ordering::SeqCst), deletes.load(Ordering::SeqCst));
            let (n, max_id, secret, wal) = count(files).await;
            let (in_adds, in_deletes) = (max_id - 2, max_id - n);
            eprintln!(
                "round {round}: {n} notes, adds {in_adds} ({adds_before}..={adds_after}), deletes {in_deletes} \
                 ({deletes_before}..={deletes_after}), wal {wal:?}, snapshot {took:?}"
            );
            assert_eq!(secret, 1);
            // One call may have committed without its answer having arrived yet.
            assert!(in_adds >= adds_before && in_adds <= adds_after + 1, "round {round}");
            assert!(in_deletes >= deletes_before && in_deletes <= deletes_after + 1, "round {round}");
            totals.push(took);
        }
        assert!(deletes.load(Ordering::SeqCst) > 0, "the writer ran long enough to delete");
        writer.abort();

        // Timings of the three engine calls on their own.
        let (mut pause, mut download, mut unpause) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..10 {
            let t = Instant::now();
            docker.pause_container(&id).await.expect("pause");
            pause.push(t.elapsed());
            let t = Instant::now();
            let options = DownloadFromContainerOptionsBuilder::default().path("/data/notes.db").build();
            let tar: Vec<u8> = docker
                .download_from_container(&id, Some(options))
                .map_ok(|b| b.to_vec())
                .try_concat()
                .await
                .expect("download");
            download.push(t.elapsed());
            let t = Instant::now();
            docker.unpause_container(&id).await.expect("unpause");
            unpause.push(t.elapsed());
            assert!(!tar.is_empty());
        }
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        eprintln!(
            "medians (n=10): pause {:?}, download db {:?}, unpause {:?}; whole snapshot (n=30) {:?}",
            median(&mut pause),
            median(&mut download),
            median(&mut unpause),
            median(&mut totals)
        );

        // A missing database is a clear error; a directory is refused; the container runs on.
        let missing = snapshot(&docker, &id, "/data/missing.db", 8 << 20, Duration::from_secs(10)).await;
        let error = missing.expect_err("missing").to_string();
        assert!(error.contains("no file at /data/missing.db in the container"), "{error}");
        let dir = snapshot(&docker, &id, "/data", 8 << 20, Duration::from_secs(10)).await.expect_err("directory");
        assert!(dir.to_string().contains("is a directory"), "{dir}");
        let small = snapshot(&docker, &id, "/data/notes.db", 1024, Duration::from_secs(10)).await.expect_err("cap");
        assert!(small.to_string().contains("1024-byte cap"), "{small}");

        // A deadline that expires, and a future dropped midway, both leave it running.
        let late = snapshot(&docker, &id, "/data/notes.db", 8 << 20, Duration::from_millis(1)).await.expect_err("late");
        assert_eq!(late.kind(), "timeout", "{late}");
        let dropped = tokio::time::timeout(
            Duration::from_millis(15),
            snapshot(&docker, &id, "/data/notes.db", 8 << 20, Duration::from_secs(10)),
        )
        .await;
        eprintln!("dropped snapshot finished in time: {}", dropped.is_ok());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let state = docker.inspect_container(&id, None::<InspectContainerOptions>).await.expect("inspect").state;
        assert_eq!(state.as_ref().and_then(|s| s.paused), Some(false), "{state:?}");
        assert_eq!(state.as_ref().and_then(|s| s.running), Some(true), "{state:?}");
        let listed =
            client.call_tool(CallToolRequestParams::new("list_notes")).await.expect("the server still answers");
        assert_ne!(listed.is_error, Some(true));

        drop(client);
        cleanup().await;
    }
}
