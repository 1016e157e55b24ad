//! Connecting to the Docker engine, with a deadline on every call, and what the engine
//! says about itself (versions, runtime) for the evidence.

use std::future::Future;
use std::time::Duration;

use bollard::Docker;
use serde::Serialize;
use serde_json::Value;

use crate::sandbox::SandboxError;

/// Deadline for ordinary engine calls (inspect, create, remove, …).
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// Run one engine call under a deadline, naming it in errors.
pub async fn call<T, F>(what: &str, limit: Duration, fut: F) -> Result<T, SandboxError>
where
    F: Future<Output = Result<T, bollard::errors::Error>>,
{
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(SandboxError::Docker { what: what.to_owned(), detail: describe(&e) }),
        Err(_) => Err(SandboxError::Timeout { what: what.to_owned(), limit }),
    }
}

/// The engine's message without bollard's wrapping.
pub fn describe(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code, message } => {
            format!("{message} (HTTP {status_code})")
        }
        other => other.to_string(),
    }
}

/// True when the error is the engine's 404.
pub fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

/// What the engine says about itself.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EngineFacts {
    /// Engine version (e.g. `20.10.24+dfsg1`).
    pub server_version: Option<String>,
    /// Engine API version.
    pub api_version: Option<String>,
    /// Host kernel.
    pub kernel_version: Option<String>,
    /// Host operating system.
    pub operating_system: Option<String>,
    /// Default OCI runtime.
    pub default_runtime: Option<String>,
    /// runc version as the engine reports it.
    pub runc_version: Option<String>,
    /// containerd version as the engine reports it.
    pub containerd_version: Option<String>,
    /// cgroup version.
    pub cgroup_version: Option<String>,
    /// Engine security options (seccomp, apparmor, rootless, …).
    pub security_options: Vec<String>,
    /// The OCI runtimes the engine lists (`/info`, `Runtimes`), by name.
    pub runtimes: std::collections::BTreeMap<String, super::runtime::Registered>,
}

/// A connected engine.
#[derive(Debug, Clone)]
pub struct DockerEngine {
    /// The client (cheap to clone).
    pub docker: Docker,
    /// Facts for the evidence.
    pub facts: EngineFacts,
}

/// Connect (honouring `DOCKER_HOST`), ping, and read the engine's facts.
pub async fn connect() -> Result<DockerEngine, SandboxError> {
    let endpoint = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| SandboxError::Connect { endpoint: endpoint.clone(), detail: describe(&e) })?
        .with_timeout(Duration::from_secs(120));
    let connect_err = |e: SandboxError| match e {
        SandboxError::Docker { detail, .. } => SandboxError::Connect { endpoint: endpoint.clone(), detail },
        SandboxError::Timeout { what, limit } => SandboxError::Connect {
            endpoint: endpoint.clone(),
            detail: format!("failed to {what}: no answer within {} s", limit.as_secs()),
        },
        other => other,
    };
    if let Err(e) = call("ping the engine", Duration::from_secs(10), docker.ping()).await {
        return Err(socket_denied(&endpoint).unwrap_or_else(|| connect_err(e)));
    }
    let version = call("read the engine version", CALL_DEADLINE, docker.version()).await?;
    let info = call("read the engine info", CALL_DEADLINE, docker.info()).await?;
    let info = serde_json::to_value(&info).unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let component = |name: &str| {
        version
            .components
            .as_ref()
            .and_then(|cs| cs.iter().find(|c| c.name.eq_ignore_ascii_case(name)))
            .map(|c| c.version.clone())
    };
    let facts = EngineFacts {
        server_version: version.version.clone(),
        api_version: version.api_version.clone(),
        kernel_version: version.kernel_version.clone(),
        operating_system: text(&info["OperatingSystem"]),
        default_runtime: text(&info["DefaultRuntime"]),
        runc_version: component("runc").or_else(|| text(&info["RuncCommit"]["ID"])),
        containerd_version: component("containerd"),
        cgroup_version: text(&info["CgroupVersion"]),
        security_options: info["SecurityOptions"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default(),
        runtimes: super::runtime::registered(&info["Runtimes"]),
    };
    Ok(DockerEngine { docker, facts })
}

/// When `endpoint` is a Unix socket this process is not allowed to open, the error that says
/// who we are, who owns the socket, and how to get access (the tool image runs as 65534 and
/// needs the socket's group added).
fn socket_denied(endpoint: &str) -> Option<SandboxError> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    if !path.starts_with('/') {
        return None;
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
        _ => return None,
    }
    let socket = std::fs::metadata(path).ok();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| rest.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let first = |name: &str| field(name).into_iter().next().unwrap_or_else(|| "?".into());
    let (uid, gid, groups) = (first("Uid:"), first("Gid:"), field("Groups:"));
    let groups = if groups.is_empty() { "none".to_owned() } else { groups.join(" ") };
    let detail = match socket {
        Some(meta) => format!(
            "this process runs as uid {uid} gid {gid} (supplementary groups: {groups}); the socket is owned by uid {} gid {} with mode {:04o}. Add the socket's group to this process (for the tool image: `docker run --group-add {}` or `--group-add \"$(stat -c %g {path})\"`), or run it as a member of that group",
            meta.uid(),
            meta.gid(),
            meta.permissions().mode() & 0o7777,
            meta.gid(),
        ),
        None => format!(
            "this process runs as uid {uid} gid {gid} (supplementary groups: {groups}) and cannot read the socket's owner; give it access to the socket's group"
        ),
    };
    Some(SandboxError::SocketDenied { path: path.to_owned(), detail })
}

/// An image resolved to its immutable id.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedImage {
    /// As configured.
    pub reference: String,
    /// `sha256:…`, what containers are created from.
    pub id: String,
    /// Repository tags.
    pub repo_tags: Vec<String>,
    /// Repository digests (empty for locally built or imported images).
    pub repo_digests: Vec<String>,
    /// Size in bytes.
    pub size: Option<i64>,
}

/// Resolve an image reference to its id. Never pulls.
pub async fn resolve_image(docker: &Docker, reference: &str) -> Result<ResolvedImage, SandboxError> {
    match tokio::time::timeout(CALL_DEADLINE, docker.inspect_image(reference)).await {
        Ok(Ok(image)) => {
            let id = image.id.clone().filter(|id| id.starts_with("sha256:")).ok_or_else(|| SandboxError::Docker {
                what: format!("resolve image `{reference}`"),
                detail: "the engine reported no immutable image id".into(),
            })?;
            Ok(ResolvedImage {
                reference: reference.to_owned(),
                id,
                repo_tags: image.repo_tags.clone().unwrap_or_default(),
                repo_digests: image.repo_digests.clone().unwrap_or_default(),
                size: image.size,
            })
        }
        Ok(Err(e)) if is_not_found(&e) => Err(SandboxError::ImageMissing { image: reference.to_owned() }),
        Ok(Err(e)) => Err(SandboxError::Docker { what: format!("resolve image `{reference}`"), detail: describe(&e) }),
        Err(_) => Err(SandboxError::Timeout { what: format!("resolve image `{reference}`"), limit: CALL_DEADLINE }),
    }
}
