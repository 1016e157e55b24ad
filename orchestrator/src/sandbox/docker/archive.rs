//! Downloading one path out of a running trial container for `container_file`: the engine's
//! archive API (`GET /containers/{id}/archive`), streamed into memory under a cap and a
//! deadline. The bytes are untrusted and handed over unparsed; what is accepted in them
//! (one regular file, or a directory's entries below it) is decided by
//! `elengtis_verifiers::file::read_archive`, which never talks to Docker.
//!
//! Unlike the SQLite snapshot, the container is not paused: a file is read after the agent
//! has finished, and a single file has no companion that must be copied at the same instant.
//! The path must lie on a volume (the archive API cannot see a tmpfs).

use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use elengtis_verifiers::file::Fetched;
use futures_util::StreamExt as _;

use super::api::{describe, is_not_found};
use crate::sandbox::SandboxError;

/// Streams the archive of `path` under `deadline`: [`fetch`].
pub async fn download(
    docker: &Docker,
    container_id: &str,
    path: &str,
    max_bytes: u64,
    deadline: Duration,
) -> Result<Fetched, SandboxError> {
    match tokio::time::timeout(deadline, fetch(docker, container_id, path, max_bytes)).await {
        Ok(result) => result,
        Err(_) => Err(SandboxError::Timeout { what: what(container_id, path), limit: deadline }),
    }
}

/// Streams the archive of `path`; `Fetched::Missing` on 404, `Fetched::OverCap` as soon as it
/// grows over `max_bytes` (the rest is not read). No deadline of its own: the caller bounds it
/// (the SQLite snapshot bounds the pause and both copies together).
pub async fn fetch(docker: &Docker, container_id: &str, path: &str, max_bytes: u64) -> Result<Fetched, SandboxError> {
    let options = DownloadFromContainerOptionsBuilder::default().path(path).build();
    let mut stream = docker.download_from_container(container_id, Some(options));
    let mut tar = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                if u64::try_from(tar.len() + bytes.len()).unwrap_or(u64::MAX) > max_bytes {
                    return Ok(Fetched::OverCap { cap: max_bytes });
                }
                tar.extend_from_slice(&bytes);
            }
            Err(e) if is_not_found(&e) && tar.is_empty() => return Ok(Fetched::Missing),
            Err(e) => return Err(SandboxError::Docker { what: what(container_id, path), detail: describe(&e) }),
        }
    }
    Ok(Fetched::Tar(tar))
}

fn what(container_id: &str, path: &str) -> String {
    format!("copy {path} out of container {}", container_id.get(..12).unwrap_or(container_id))
}
