//! Images for isolated trials, made locally from our own static binaries: no registry, no
//! base image, no Dockerfile.
//!
//! Why this shape:
//!
//! - **No registry.** elengtis never pulls. Audit machines often have no registry access,
//!   and a pulled base image would be third-party code running next to the server under test.
//!   Everything in the bundled images is built from this source tree: the static executables
//!   of the build the user ran (the release build is static by default, `.cargo/config.toml`),
//!   or a static build of their own ([`static_build`]), sent straight to the engine
//!   ([`default_source`] picks).
//! - **FROM scratch, by import.** The binaries are statically linked (glibc with
//!   `crt-static`, see [`STATIC_RUSTFLAGS`]), so the root filesystem is just them plus two
//!   directories ([`rootfs_tar`]). The tar goes to `POST /images/create?fromSrc=-` (what
//!   `docker import` does, [`import`]): one layer, no builder, no BuildKit/buildx, and the
//!   directory modes are kept exactly. The legacy builder's `COPY` lost `/tmp`'s 01777, which
//!   makes the read-only container's tmpfs unwritable.
//! - **Non-root.** Every image gets `USER 65534:65534` unless the caller names another
//!   unprivileged user. [`import_rootfs_file`] refuses uid or gid 0. The container layer still
//!   sets the user again at create time. This is defence in depth, not the only guard.
//! - **No shell.** There is no `/bin/sh`, no package manager and no loader in the bundled
//!   images. A prompt-injected server cannot spawn anything that is not one of our
//!   executables. `ENTRYPOINT` is always the JSON exec form.
//!
//! Layout of a bundled root filesystem: the executables at `/` (0755, root-owned); `/tmp`
//! with mode 01777, because runc gives the tmpfs mounted there the image directory's mode;
//! `/data` with mode 0755, owned by 65534:65534, because an anonymous volume mounted there
//! copies the image directory's ownership. Entries have mtime 0, so identical binaries give
//! byte-identical layers. The image *id* still differs per import, because the engine stamps
//! the creation time into the config.
//!
//! Every engine call has a deadline, so a stalled engine cannot hang the CLI. Only the
//! Engine API (`bollard`) is used; this module never runs the `docker` CLI.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bollard::Docker;

use super::api::DockerEngine;
use bollard::models::{CreateImageInfo, ImageInspect};
use bollard::query_parameters::{CreateImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures_util::TryStreamExt;
use serde::Serialize;

/// Repository of the fixture image (the synthetic support-note MCP server).
pub const FIXTURE_REPO: &str = "elengtis/fixture";
/// Repository of the tool image (`elengtis` itself, with the fixture beside it).
pub const TOOL_REPO: &str = "elengtis/elengtis";
/// Tag of both bundled images: the version of this build.
pub const TAG: &str = env!("CARGO_PKG_VERSION");
/// Label naming which bundled image this is (`fixture` or `elengtis`).
pub const LABEL_IMAGE: &str = "org.elengtis.image";
/// Label carrying the elengtis version that built the image.
pub const LABEL_VERSION: &str = "org.elengtis.version";
/// Label on bundled images: the SHA-256 of the root filesystem tar and the change list, so a
/// rebuild of identical content keeps the existing image (and containers already resolved to
/// its id) instead of importing a copy.
pub const LABEL_CONTENT: &str = "org.elengtis.content-sha256";
/// Label on bundled images: the executables they were made from, as JSON `{name: {sha256,
/// size, mtime_ns}}` — the content hash of each, and the size and modification time of the file
/// it was read from. Every command that uses the bundled images compares it with the
/// executables beside the running `elengtis` ([`ensure_bundled`], [`ensure_current`]) and
/// re-imports them when they differ.
pub const LABEL_EXECUTABLES: &str = "org.elengtis.executables";
/// How long a command waits for another that is making the bundled images on this host (a
/// compile from cold takes minutes; an import seconds).
pub const LOCK_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// The unprivileged user and group every image runs as unless told otherwise (`nobody`).
pub const IMAGE_USER: &str = "65534:65534";
/// The fixture executable's name, in `target/` and in the image.
pub const FIXTURE_BIN: &str = "elengtis-fixture";
/// The canary sink's executable.
pub const SINK_BIN: &str = "elengtis-sink";
/// The SQLite notes server's executable.
pub const NOTES_BIN: &str = "elengtis-notes";
/// The hostile test server's executable (egress probes, resource abuse; tests only).
pub const HOSTILE_BIN: &str = "elengtis-hostile";
/// Repository of the hostile test server image.
pub const HOSTILE_REPO: &str = "elengtis/hostile";
/// Repository of the canary sink image.
pub const SINK_REPO: &str = "elengtis/sink";
/// Repository of the SQLite notes server image.
pub const NOTES_REPO: &str = "elengtis/notes";
/// The reference twins' executable (`--build vulnerable|guarded`, for `elengtis prove`).
pub const TWIN_BIN: &str = "elengtis-twin";
/// Repository of the reference twins image.
pub const TWIN_REPO: &str = "elengtis/twin";
/// The reference black-box agent's executable (`--build vulnerable|guarded`, `POST /chat`: a
/// `rest` target's endpoint, run in a container by its tests).
pub const REST_AGENT_BIN: &str = "elengtis-rest-agent";
/// Repository of the reference black-box agent image.
pub const REST_AGENT_REPO: &str = "elengtis/rest-agent";
/// The tool executable's name, in `target/` and in the image.
pub const TOOL_BIN: &str = "elengtis";
/// The tool image's working directory (empty, owned by the image user; CI mounts the checkout
/// there).
pub const TOOL_WORKDIR: &str = "/work";
/// The tool image's `PATH`: its root, where the executables are.
pub const TOOL_PATH: &str = "/";
/// Target triple of the static build. It must be explicit, because with `crt-static` and no
/// `--target`, cargo also applies the flag to proc-macros, which then fail to build.
pub const IMAGE_TARGET: &str = "x86_64-unknown-linux-gnu";
/// Cargo profile of the static build (`[profile.image]` in the workspace `Cargo.toml`).
pub const IMAGE_PROFILE: &str = "image";
/// `RUSTFLAGS` of the static build. `crt-static` links glibc in. The getrandom cfg makes
/// getrandom 0.3/0.4 use the syscall: their default finds `getrandom` through `dlsym`, which
/// fails in a static binary, and then falls back to `/dev/urandom`, which a scratch rootfs
/// may not have.
pub const STATIC_RUSTFLAGS: &str = r#"-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom""#;
/// Deadline for uploading one bundled image (about 20 MB; a healthy engine takes well under
/// a second).
pub const IMPORT_DEADLINE: Duration = Duration::from_secs(120);
/// Deadline for small engine calls (inspect, remove).
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// The packages the static build compiles, and the executable each one provides.
const PACKAGES: [(&str, &str); 7] = [
    ("elengtis", TOOL_BIN),
    ("elengtis-fixture", FIXTURE_BIN),
    ("elengtis-sink", SINK_BIN),
    ("elengtis-notes", NOTES_BIN),
    ("elengtis-hostile", HOSTILE_BIN),
    ("elengtis-twin", TWIN_BIN),
    ("elengtis-rest-agent", REST_AGENT_BIN),
];

/// Why building or importing an image failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The static build could not run, failed, or produced something unusable.
    #[error("failed to build static binaries: {0}")]
    Build(String),
    /// A host file could not be read.
    #[error("failed to {what} `{}`: {source}", .path.display())]
    Io {
        /// What we were doing.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The root filesystem asked for is not valid.
    #[error("failed to assemble the image root filesystem: {0}")]
    Rootfs(String),
    /// The reference, user, entrypoint, command or labels asked for are not acceptable.
    #[error("failed to configure image `{reference}`: {detail}")]
    Config {
        /// The image reference.
        reference: String,
        /// What is wrong and what to do.
        detail: String,
    },
    /// Nothing to make the bundled images from: no usable executables beside this one and no
    /// source tree.
    #[error(
        "failed to make the bundled images: {reason}, and the source tree this binary was built from ({}) is gone. The images need the static executables {} of this version in one directory: build them in an elengtis checkout with `cargo build --release --locked` (static by default) and run that build's elengtis (target/{IMAGE_TARGET}/release/elengtis), or run `elengtis images build --binaries DIR` (or `--source CHECKOUT`, which compiles them)",
        .source_tree.display(),
        bundled_list()
    )]
    NoSource {
        /// Why the executables beside this one cannot be used.
        reason: String,
        /// Where the source tree was.
        source_tree: PathBuf,
    },
    /// The engine did not answer in time.
    #[error(
        "failed to {what} `{reference}`: the Docker engine did not answer within {} s; check that the daemon is healthy (`docker info`) and retry",
        .limit.as_secs_f32()
    )]
    Timeout {
        /// The call.
        what: &'static str,
        /// The image reference or id.
        reference: String,
        /// The deadline.
        limit: Duration,
    },
    /// Another command on this host held the bundled images' lock for too long.
    #[error(
        "failed to make sure of the bundled images: another elengtis on this host held their lock `{}` for more than {} min; when none is running, remove that file and retry",
        .path.display(),
        .limit.as_secs() / 60
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// How long was waited.
        limit: Duration,
    },
    /// The engine refused or failed the call.
    #[error("failed to {what} `{reference}`: {detail}")]
    Engine {
        /// The call.
        what: &'static str,
        /// The image reference or id.
        reference: String,
        /// The engine's answer.
        detail: String,
    },
}

/// `elengtis, elengtis-fixture, … and elengtis-rest-agent`.
fn bundled_list() -> String {
    let names: Vec<String> = PACKAGES.iter().map(|(_, binary)| format!("`{binary}`")).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// One bundled image as the engine holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuiltImage {
    /// Which bundled image: `fixture` or `elengtis`.
    pub name: &'static str,
    /// `repo:tag`.
    pub reference: String,
    /// Image id (`sha256:…`). Containers should be created from this, not the tag.
    pub id: String,
    /// Size in bytes as the engine reports it.
    pub size: i64,
    /// The engine already held this exact image (same content), so nothing was imported.
    pub unchanged: bool,
}

/// What goes into one bundled image.
struct Bundled {
    name: &'static str,
    repo: &'static str,
    binaries: &'static [&'static str],
    entrypoint: &'static str,
    /// The image's working directory (`WORKDIR`), if it has one.
    workdir: Option<&'static str>,
    /// The image's `PATH`, if it sets one.
    path: Option<&'static str>,
}

const BUNDLED: [Bundled; 7] = [
    Bundled {
        name: "fixture",
        repo: FIXTURE_REPO,
        binaries: &[FIXTURE_BIN],
        entrypoint: FIXTURE_BIN,
        workdir: None,
        path: None,
    },
    Bundled { name: "sink", repo: SINK_REPO, binaries: &[SINK_BIN], entrypoint: SINK_BIN, workdir: None, path: None },
    Bundled {
        name: "notes",
        repo: NOTES_REPO,
        binaries: &[NOTES_BIN],
        entrypoint: NOTES_BIN,
        workdir: None,
        path: None,
    },
    // The mail database goes to `/data` (`--mail-db`, a volume in the sandbox).
    Bundled { name: "twin", repo: TWIN_REPO, binaries: &[TWIN_BIN], entrypoint: TWIN_BIN, workdir: None, path: None },
    // A `rest` target's endpoint in a container (its `command` chooses the build and binds the
    // port: `[--build, vulnerable, --bind, "0.0.0.0:8000"]`).
    Bundled {
        name: "rest-agent",
        repo: REST_AGENT_REPO,
        binaries: &[REST_AGENT_BIN],
        entrypoint: REST_AGENT_BIN,
        workdir: None,
        path: None,
    },
    // Used only by the Docker tests (egress battery, resource abuse).
    Bundled {
        name: "hostile",
        repo: HOSTILE_REPO,
        binaries: &[HOSTILE_BIN],
        entrypoint: HOSTILE_BIN,
        workdir: None,
        path: None,
    },
    // The tool carries every bundled executable: `elengtis example` finds bare `elengtis-*`
    // beside itself, and `images build` inside the image imports the other images from them
    // (there is no source tree in the image). It starts in `/work`, where CI mounts the
    // checkout, so relative paths in commands and campaign files resolve. `PATH` is `/`, so
    // `elengtis` runs by name: a Kubernetes `command: [elengtis]`, a CI job's `elengtis …`.
    Bundled {
        name: "elengtis",
        repo: TOOL_REPO,
        binaries: &[TOOL_BIN, FIXTURE_BIN, SINK_BIN, NOTES_BIN, TWIN_BIN, HOSTILE_BIN, REST_AGENT_BIN],
        entrypoint: TOOL_BIN,
        workdir: Some(TOOL_WORKDIR),
        path: Some(TOOL_PATH),
    },
];

/// `elengtis/fixture:<version>`.
pub fn fixture_ref() -> String {
    format!("{FIXTURE_REPO}:{TAG}")
}

/// `elengtis/sink:<version>`.
pub fn sink_ref() -> String {
    format!("{SINK_REPO}:{TAG}")
}

/// `elengtis/notes:<version>`.
pub fn notes_ref() -> String {
    format!("{NOTES_REPO}:{TAG}")
}

/// `elengtis/twin:<version>`.
pub fn twin_ref() -> String {
    format!("{TWIN_REPO}:{TAG}")
}

/// `elengtis/rest-agent:<version>`.
pub fn rest_agent_ref() -> String {
    format!("{REST_AGENT_REPO}:{TAG}")
}

/// `elengtis/elengtis:<version>`.
pub fn tool_ref() -> String {
    format!("{TOOL_REPO}:{TAG}")
}

/// Build every bundled executable statically from the workspace at `source` and return the
/// directory holding them (`<target-dir>/x86_64-unknown-linux-gnu/image/`).
///
/// Runs `$CARGO` (or `cargo`) with `--locked --quiet --profile image --target
/// x86_64-unknown-linux-gnu` and [`STATIC_RUSTFLAGS`]. Before it starts, `notify` says what is
/// compiled, why (`reason`) and how long the last such build here took (recorded next to the
/// executables, [`BUILD_RECORD`]); while it runs, progress (units compiled, the last crate,
/// time elapsed) replaces cargo's own status lines. Diagnostics still go to our stderr. The
/// paths come from cargo's own artifact messages, so `CARGO_TARGET_DIR` and
/// `build.target-dir` are respected. Each executable is checked to have no ELF interpreter,
/// because a dynamically linked binary would fail in a scratch image with a misleading "no
/// such file or directory". Blocking: takes minutes on a cold cache. Call it from
/// `spawn_blocking` in async code.
pub fn static_build(source: &Path, reason: Option<&str>, notify: &Notify) -> Result<PathBuf, ImageError> {
    if !source.join("Cargo.toml").is_file() {
        return Err(ImageError::Build(format!(
            "`{}` has no Cargo.toml; pass the elengtis source tree (the workspace root)",
            source.display()
        )));
    }
    let record_path = image_target_dir(source).join(BUILD_RECORD);
    let last = BuildRecord::read(&record_path);
    notify.line(&compile_announcement(source, reason, last.as_ref()));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(source)
        // `--quiet`: the progress below replaces cargo's status lines (which a non-terminal
        // never shows as a bar, and which said nothing but "Blocking waiting for file lock" when
        // another cargo held the target directory).
        .args(["build", "--locked", "--quiet", "--profile", IMAGE_PROFILE, "--target", IMAGE_TARGET])
        // Diagnostics are still rendered to stderr; stdout carries one JSON message per line.
        .arg("--message-format=json-render-diagnostics")
        .args(PACKAGES.iter().flat_map(|(package, _)| ["-p", package]))
        // CARGO_ENCODED_RUSTFLAGS would take precedence over RUSTFLAGS.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("RUSTFLAGS", STATIC_RUSTFLAGS)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    tracing::info!(source = %source.display(), "building static binaries for the sandbox images");
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        ImageError::Build(format!(
            "could not start `{}`: {e}; is the Rust toolchain installed (or CARGO set)?",
            Path::new(&cargo).display()
        ))
    })?;
    let progress = BuildProgress::start(*notify, last.map(|l| (l.units, l.seconds)), source);
    let mut executables: Vec<(String, PathBuf)> = Vec::new();
    let mut read_error = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = match line {
                Ok(line) => line,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            };
            if let Some(unit) = artifact_unit(&line) {
                progress.unit(&unit);
            }
            if let Some(found) = artifact_executable(&line) {
                executables.push(found);
            }
        }
    }
    let units = progress.finish();
    if let Some(e) = read_error {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ImageError::Build(format!("could not read cargo's output: {e}")));
    }
    let status = child.wait().map_err(|e| ImageError::Build(format!("could not wait for cargo: {e}")))?;
    if !status.success() {
        let how = match status.code() {
            Some(code) => format!("status {code}"),
            None => "a signal".to_owned(),
        };
        return Err(ImageError::Build(format!("cargo exited with {how} (see its output above)")));
    }
    let mut dir: Option<PathBuf> = None;
    for (_, binary) in PACKAGES {
        let Some((_, path)) = executables.iter().find(|(name, _)| name == binary) else {
            return Err(ImageError::Build(format!(
                "cargo succeeded but reported no `{binary}` executable; is `{}` the elengtis workspace?",
                source.display()
            )));
        };
        if !is_static_executable(path)? {
            return Err(ImageError::Build(format!(
                "`{}` is dynamically linked (it has an ELF interpreter) and cannot run in a scratch image; is RUSTFLAGS overridden by a cargo config `target.{IMAGE_TARGET}.rustflags`?",
                path.display()
            )));
        }
        let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
        match &dir {
            None => dir = Some(parent),
            Some(d) if *d == parent => {}
            Some(d) => {
                return Err(ImageError::Build(format!(
                    "the executables landed in different directories (`{}` and `{}`)",
                    d.display(),
                    parent.display()
                )));
            }
        }
    }
    let dir = dir.unwrap_or_default();
    let seconds = started.elapsed().as_secs_f64();
    // Where cargo really put them (a `build.target-dir` of a cargo config moves them).
    BuildRecord { seconds, units }.write(&dir.join(BUILD_RECORD));
    notify.line(&format!("elengtis: compiled the images' executables in {} ({units} units)", duration_text(seconds)));
    tracing::info!(dir = %dir.display(), elapsed_ms = started.elapsed().as_millis() as u64, "static binaries built");
    Ok(dir)
}

/// The file beside the static build's executables recording how long that build took, so the
/// next one can say so up front.
pub const BUILD_RECORD: &str = "elengtis-static-build.json";

/// A cold static build of every bundled executable, measured on this project's machine kind
/// (2 vCPU; docs/performance.md, "Images from the build you ran"): what the announcement says
/// when no build here has been recorded yet.
const COLD_BUILD_ESTIMATE: &str = "about 12 minutes on 2 idle cores, much longer on a busy machine";

/// How long the last static build here took, and how many units (crates, build scripts) cargo
/// reported: the denominator of the next build's progress.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, Serialize)]
struct BuildRecord {
    seconds: f64,
    units: usize,
}

impl BuildRecord {
    fn read(path: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// Best effort: a missing record only makes the next announcement less precise.
    fn write(&self, path: &Path) {
        if let Ok(text) = serde_json::to_vec(self)
            && let Err(e) = std::fs::write(path, text)
        {
            tracing::debug!(path = %path.display(), error = %e, "could not record the static build's duration");
        }
    }
}

/// Where the static build puts its executables when nothing moves the target directory:
/// `$CARGO_TARGET_DIR` (relative to `source`, where cargo runs) or `source/target`, then
/// `x86_64-unknown-linux-gnu/image`.
fn image_target_dir(source: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| source.join("target"), |dir| source.join(dir));
    target.join(IMAGE_TARGET).join(IMAGE_PROFILE)
}

/// What the user reads before a compile starts: what is compiled, why, and how long it took
/// last time (or what a cold build takes).
fn compile_announcement(source: &Path, reason: Option<&str>, last: Option<&BuildRecord>) -> String {
    let why = match reason {
        Some(reason) => format!("the images are made from static executables, and {reason}. "),
        None => String::new(),
    };
    let how_long = match last {
        Some(last) => format!(
            "the last such build here took {} ({} units); with nothing changed since, it takes seconds",
            duration_text(last.seconds),
            last.units
        ),
        None => format!("no such build has run here yet: from cold it takes {COLD_BUILD_ESTIMATE}"),
    };
    format!(
        "elengtis: {why}Compiling them now: every bundled executable, static, from the source tree {} (`cargo build --profile {IMAGE_PROFILE} --target {IMAGE_TARGET}` with `crt-static`); {how_long}. Progress follows; Ctrl-C stops it and keeps what is compiled.",
        source.display()
    )
}

/// `12 min 03 s`, `4.2 s`.
fn duration_text(seconds: f64) -> String {
    if seconds < 60.0 {
        format!("{seconds:.1} s")
    } else {
        let whole = seconds.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

/// The crate (or build script) a `compiler-artifact` message reports, for any unit.
fn artifact_unit(line: &str) -> Option<String> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    Some(message.get("target")?.get("name")?.as_str()?.to_owned())
}

/// The progress of a static build, reported by a thread of its own so that the elapsed time
/// moves even while one large crate compiles: on a terminal one line redrawn every second,
/// elsewhere a line every [`BuildProgress::QUIET_EVERY`].
struct BuildProgress {
    state: std::sync::Arc<std::sync::Mutex<ProgressState>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct ProgressState {
    units: usize,
    last: String,
}

impl BuildProgress {
    /// How often a non-terminal gets a progress line.
    const QUIET_EVERY: Duration = Duration::from_secs(30);
    /// With nothing compiled after this long, the line says what cargo is probably waiting for.
    const STALLED_AFTER: Duration = Duration::from_secs(20);

    fn start(notify: Notify, last: Option<(usize, f64)>, source: &Path) -> Self {
        let state = std::sync::Arc::new(std::sync::Mutex::new(ProgressState::default()));
        if !notify.enabled {
            return BuildProgress { state, stop: None, thread: None };
        }
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shared = state.clone();
        let lock_dir = image_target_dir(source).parent().and_then(Path::parent).map(Path::to_path_buf);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let every = if notify.interactive { Duration::from_secs(1) } else { BuildProgress::QUIET_EVERY };
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let (units, crate_name) = match shared.lock() {
                    Ok(state) => (state.units, state.last.clone()),
                    Err(_) => return,
                };
                notify.progress(&progress_text(units, &crate_name, started.elapsed(), last, lock_dir.as_deref()));
            }
        });
        BuildProgress { state, stop: Some(stop), thread: Some(thread) }
    }

    fn unit(&self, name: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.units += 1;
            name.clone_into(&mut state.last);
        }
    }

    /// Stop reporting; the number of units compiled (or found fresh).
    fn finish(mut self) -> usize {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.state.lock().map(|s| s.units).unwrap_or_default()
    }
}

/// One progress line of the static build: units so far (of the last build's count), the last
/// crate, the time elapsed (and the last build's), and a hint when nothing has compiled for
/// [`BuildProgress::STALLED_AFTER`] (cargo waits for a lock another cargo holds).
fn progress_text(
    units: usize,
    crate_name: &str,
    elapsed: Duration,
    last: Option<(usize, f64)>,
    lock_dir: Option<&Path>,
) -> String {
    let of = match last {
        Some((total, _)) if total >= units => format!(" of ≈{total}"),
        _ => String::new(),
    };
    let previous = match last {
        Some((_, seconds)) => format!(" (last build: {})", duration_text(seconds)),
        None => String::new(),
    };
    let crate_name = if crate_name.is_empty() { String::new() } else { format!(", last `{crate_name}`") };
    let mut text = format!(
        "elengtis: compiling the images' executables: {units}{of} units{crate_name}, {} elapsed{previous}",
        duration_text(elapsed.as_secs_f64()),
    );
    if units == 0 && elapsed >= BuildProgress::STALLED_AFTER {
        let dir = lock_dir.map_or_else(|| "the target directory".to_owned(), |d| d.display().to_string());
        text.push_str("; nothing compiled yet: cargo may be waiting for another cargo that holds the lock on ");
        text.push_str(&dir);
    }
    text
}

/// Where the image commands report what they do and how far they are: stderr (the CLI), or
/// nowhere (library callers, tests).
#[derive(Debug, Clone, Copy)]
pub struct Notify {
    enabled: bool,
    interactive: bool,
}

impl Notify {
    /// Report on stderr; `interactive` (stderr is a terminal) redraws progress in place.
    pub fn stderr(interactive: bool) -> Self {
        Notify { enabled: true, interactive }
    }

    /// Report nothing.
    pub fn silent() -> Self {
        Notify { enabled: false, interactive: false }
    }

    /// A line of its own (ends a progress line being redrawn).
    fn line(&self, text: &str) {
        if !self.enabled {
            return;
        }
        if self.interactive {
            eprint!("\r\x1b[2K");
        }
        eprintln!("{text}");
    }

    /// A progress line: redrawn in place on a terminal, appended elsewhere.
    fn progress(&self, text: &str) {
        use std::io::Write as _;
        if !self.enabled {
            return;
        }
        if self.interactive {
            eprint!("\r\x1b[2K{text}");
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("{text}");
        }
    }
}

/// The `(binary name, path)` of a `compiler-artifact` message for one of our executables.
fn artifact_executable(line: &str) -> Option<(String, PathBuf)> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    let target = message.get("target")?;
    let is_bin = target.get("kind")?.as_array()?.iter().any(|k| k.as_str() == Some("bin"));
    let name = target.get("name")?.as_str()?;
    if !is_bin || !PACKAGES.iter().any(|(_, binary)| *binary == name) {
        return None;
    }
    let executable = message.get("executable")?.as_str()?;
    Some((name.to_owned(), PathBuf::from(executable)))
}

/// True when `path` is an ELF64 little-endian executable without a `PT_INTERP` program
/// header, i.e. one the kernel runs without a dynamic loader (static or static-pie).
fn is_static_executable(path: &Path) -> Result<bool, ImageError> {
    let io_error = |source| ImageError::Io { what: "inspect the executable", path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io_error)?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header).map_err(io_error)?;
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Ok(false);
    }
    let phoff = u64::from_le_bytes(header[0x20..0x28].try_into().unwrap_or_default());
    let phentsize = u64::from(u16::from_le_bytes([header[0x36], header[0x37]]));
    let phnum = u64::from(u16::from_le_bytes([header[0x38], header[0x39]]));
    if phentsize < 4 || phnum == 0 || phentsize * phnum > 1 << 20 {
        return Ok(false);
    }
    let mut table = vec![0u8; usize::try_from(phentsize * phnum).unwrap_or(0)];
    file.seek(SeekFrom::Start(phoff)).map_err(io_error)?;
    file.read_exact(&mut table).map_err(io_error)?;
    const PT_INTERP: u32 = 3;
    let has_interp = table
        .chunks_exact(usize::try_from(phentsize).unwrap_or(usize::MAX))
        .any(|entry| u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]) == PT_INTERP);
    Ok(!has_interp)
}

/// An in-memory root filesystem tar: each `(name in image, host file)` as `/<name>` (0755,
/// uid/gid 0), plus `tmp/` (01777, root), `data/` and `work/` (0755, 65534:65534). Every mtime is 0,
/// so the same inputs always give the same bytes. Names must be plain file names (no `/`).
pub fn rootfs_tar(files: &[(&str, &Path)]) -> Result<Vec<u8>, ImageError> {
    let mut seen = BTreeSet::new();
    for (name, _) in files {
        let bad = name.is_empty()
            || *name == "."
            || *name == ".."
            || name.contains(['/', '\\', '\0'])
            || name.chars().any(char::is_control);
        if bad {
            return Err(ImageError::Rootfs(format!(
                "`{name}` is not a plain file name; binaries go at the image root"
            )));
        }
        if matches!(*name, "tmp" | "data" | "work") {
            return Err(ImageError::Rootfs(format!("`{name}` is reserved for the image's directory")));
        }
        if !seen.insert(*name) {
            return Err(ImageError::Rootfs(format!("`{name}` is listed twice")));
        }
    }
    let mut builder = tar::Builder::new(Vec::new());
    let tar_error = |e: io::Error| ImageError::Rootfs(format!("could not write the tar: {e}"));
    append_dir(&mut builder, "tmp/", 0o1777, 0).map_err(tar_error)?;
    append_dir(&mut builder, "data/", 0o755, 65534).map_err(tar_error)?;
    append_dir(&mut builder, "work/", 0o755, 65534).map_err(tar_error)?;
    for (name, host) in files {
        let io_error =
            |source| ImageError::Io { what: "read the file for the image", path: host.to_path_buf(), source };
        let metadata = std::fs::metadata(host).map_err(io_error)?;
        if !metadata.is_file() {
            return Err(ImageError::Rootfs(format!("`{}` is not a regular file", host.display())));
        }
        let file = File::open(host).map_err(io_error)?;
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(metadata.len());
        header.set_mode(0o755);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        // Reads exactly `size` bytes; a file that shrank while we read it is an error.
        builder.append_data(&mut header, name, file.take(metadata.len())).map_err(io_error)?;
    }
    builder.into_inner().map_err(tar_error)
}

fn append_dir(builder: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32, owner: u64) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_size(0);
    header.set_mode(mode);
    header.set_uid(owner);
    header.set_gid(owner);
    header.set_mtime(0);
    builder.append_data(&mut header, path, io::empty())
}

/// The `changes` (Dockerfile instructions applied at import) for an image: `ENV PATH` (when
/// given), `WORKDIR`, `ENTRYPOINT` and `CMD` as JSON arrays (exec form, no shell), `USER`, and
/// one `LABEL` per pair.
///
/// Validation: no value may contain a newline or NUL (bollard sends the changes
/// newline-joined, so a newline would smuggle in another instruction); the user must be
/// unprivileged (see [`check_user`]); label keys and values are double-quoted with `\`, `"`
/// and `$` escaped, so nothing is expanded; entrypoint and command must not be empty arrays.
pub fn image_changes(
    reference: &str,
    user: &str,
    entrypoint: Option<&[String]>,
    cmd: Option<&[String]>,
    workdir: Option<&str>,
    path: Option<&str>,
    labels: &[(String, String)],
) -> Result<Vec<String>, ImageError> {
    let config_error = |detail: String| ImageError::Config { reference: reference.to_owned(), detail };
    check_user(user).map_err(config_error)?;
    let mut changes = Vec::new();
    if let Some(path) = path {
        let plain = path.split(':').all(|dir| dir.starts_with('/') && !dir.contains(['$', '\\', '"', '\'']));
        if !plain || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(config_error(format!(
                "PATH {path:?} must be absolute directories separated by `:`, without spaces, quotes, `$` or `\\`"
            )));
        }
        changes.push(format!("ENV PATH={path}"));
    }
    if let Some(dir) = workdir {
        check_value(dir).map_err(|why| config_error(format!("WORKDIR {dir:?} {why}")))?;
        if !dir.starts_with('/') || dir.contains(['$', '\\', '"']) || dir.chars().any(char::is_whitespace) {
            return Err(config_error(format!(
                "WORKDIR {dir:?} must be an absolute path without spaces, quotes, `$` or `\\`"
            )));
        }
        changes.push(format!("WORKDIR {dir}"));
    }
    for (instruction, argv) in [("ENTRYPOINT", entrypoint), ("CMD", cmd)] {
        let Some(argv) = argv else { continue };
        if argv.is_empty() {
            return Err(config_error(format!("{instruction} must not be an empty list; leave it unset instead")));
        }
        for arg in argv {
            check_value(arg).map_err(|why| config_error(format!("{instruction} argument {arg:?} {why}")))?;
        }
        let json =
            serde_json::to_string(argv).map_err(|e| config_error(format!("could not encode {instruction}: {e}")))?;
        changes.push(format!("{instruction} {json}"));
    }
    changes.push(format!("USER {user}"));
    for (key, value) in labels {
        if key.is_empty() {
            return Err(config_error("a label key must not be empty".to_owned()));
        }
        check_value(key).map_err(|why| config_error(format!("label key {key:?} {why}")))?;
        check_value(value).map_err(|why| config_error(format!("label {key:?} value {why}")))?;
        changes.push(format!("LABEL {}={}", quote(key), quote(value)));
    }
    Ok(changes)
}

fn check_value(value: &str) -> Result<(), &'static str> {
    if value.contains(['\n', '\r', '\0']) {
        Err("contains a newline or NUL, which the engine's change list cannot carry safely")
    } else {
        Ok(())
    }
}

/// A Dockerfile double-quoted word: `\`, `"` and `$` escaped, so `LABEL` expands nothing.
fn quote(word: &str) -> String {
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('"');
    for c in word.chars() {
        if matches!(c, '\\' | '"' | '$') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// Accept `user[:group]` made of names or numeric ids (`[A-Za-z0-9._-]`), unless the user or
/// the group is root (`0`, `root`, or any all-zero number). Images for isolated trials must run
/// unprivileged. Prefer numeric ids: a name is resolved through the image's `/etc/passwd`,
/// which this check cannot see.
pub fn check_user(user: &str) -> Result<(), String> {
    let (name, group) = match user.split_once(':') {
        Some((name, group)) => (name, Some(group)),
        None => (user, None),
    };
    for part in std::iter::once(name).chain(group) {
        let valid = !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid {
            return Err(format!(
                "user {user:?} is not `user[:group]` of names or numeric ids; use e.g. `{IMAGE_USER}`"
            ));
        }
        let is_root = part == "root" || (part.bytes().all(|b| b.is_ascii_digit()) && part.bytes().all(|b| b == b'0'));
        if is_root {
            return Err(format!(
                "user {user:?} names root (uid or gid 0); images for isolated trials must run unprivileged, use e.g. `{IMAGE_USER}`"
            ));
        }
    }
    Ok(())
}

/// Split `repo:tag`. The tag is required (we never want an implicit `latest`), and digests
/// are refused (imports have none).
fn split_reference(reference: &str) -> Result<(&str, &str), ImageError> {
    let config_error = |detail: &str| ImageError::Config { reference: reference.to_owned(), detail: detail.to_owned() };
    if reference.is_empty() || reference.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(config_error("a reference must be `repo:tag` without spaces"));
    }
    if reference.contains('@') {
        return Err(config_error("an imported image has no digest; use `repo:tag`"));
    }
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !repo.is_empty() && !tag.is_empty() && !tag.contains('/') => Ok((repo, tag)),
        _ => Err(config_error("the reference needs an explicit tag (`repo:tag`)")),
    }
}

/// Where an import's tar comes from.
enum Source {
    Bytes(Vec<u8>),
    File(tokio::fs::File),
}

/// Import a root filesystem tar as image `reference` (`repo:tag`), applying `changes`
/// (Dockerfile instructions such as `USER 65534:65534`; see [`image_changes`]). Returns the
/// image id, confirmed by inspecting `reference` afterwards. `deadline` bounds the upload
/// and import.
///
/// If `reference` previously named another image that is left untagged and unused, that
/// image is removed (best effort), so that rebuilds do not pile up dangling images.
pub async fn import(
    docker: &Docker,
    tar: Vec<u8>,
    reference: &str,
    changes: &[String],
    deadline: Duration,
) -> Result<String, ImageError> {
    import_source(docker, Source::Bytes(tar), reference, changes, deadline).await
}

async fn import_source(
    docker: &Docker,
    source: Source,
    reference: &str,
    changes: &[String],
    deadline: Duration,
) -> Result<String, ImageError> {
    let (repo, tag) = split_reference(reference)?;
    for change in changes {
        check_value(change).map_err(|why| ImageError::Config {
            reference: reference.to_owned(),
            detail: format!("change {change:?} {why}"),
        })?;
    }
    let previous = image_id(docker, reference).await?;
    let options =
        CreateImageOptionsBuilder::default().from_src("-").repo(repo).tag(tag).changes(changes.to_vec()).build();
    let body = match source {
        Source::Bytes(bytes) => bollard::body_full(bytes.into()),
        Source::File(file) => bollard::body_try_stream(tokio_util::io::ReaderStream::new(file)),
    };
    let started = Instant::now();
    let what = "import image";
    let items: Vec<CreateImageInfo> = match tokio::time::timeout(
        deadline,
        docker.create_image(Some(options), Some(body), None).try_collect(),
    )
    .await
    {
        Ok(Ok(items)) => items,
        Ok(Err(e)) => return Err(engine_error(what, reference, &e)),
        Err(_) => return Err(ImageError::Timeout { what, reference: reference.to_owned(), limit: deadline }),
    };
    let Some(id) = items.iter().rev().find_map(|item| item.status.as_deref().filter(|s| s.starts_with("sha256:")))
    else {
        return Err(ImageError::Engine {
            what,
            reference: reference.to_owned(),
            detail: format!("the engine reported no image id (its answer: {items:?})"),
        });
    };
    let id = id.to_owned();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    match image_id(docker, reference).await? {
        Some(confirmed) if confirmed == id => {}
        other => {
            return Err(ImageError::Engine {
                what: "confirm imported image",
                reference: reference.to_owned(),
                detail: format!(
                    "the import returned {id} but the tag now names {}; was it re-tagged concurrently? Retry",
                    other.as_deref().unwrap_or("nothing")
                ),
            });
        }
    }
    tracing::info!(reference, id = %id, elapsed_ms, "imported image");
    if let Some(previous) = previous
        && previous != id
    {
        remove_if_dangling(docker, &previous).await;
    }
    Ok(id)
}

/// Remove an image that no tag names any more. Failure (e.g. a container still uses it) is
/// only logged: it is housekeeping.
async fn remove_if_dangling(docker: &Docker, id: &str) {
    match inspect(docker, id).await {
        // Removing by id an image that still has one tag would remove that tag: never do that.
        Ok(Some(image)) if image.repo_tags.as_ref().is_none_or(Vec::is_empty) => {}
        Ok(_) => return,
        Err(e) => {
            tracing::debug!(image = id, error = %e, "could not inspect the replaced image");
            return;
        }
    }
    let options = RemoveImageOptionsBuilder::default().force(false).noprune(false).build();
    match tokio::time::timeout(CALL_DEADLINE, docker.remove_image(id, Some(options), None)).await {
        Ok(Ok(_)) => tracing::info!(image = id, "removed the image the new import replaced"),
        Ok(Err(e)) => tracing::debug!(image = id, error = %describe(&e), "kept the replaced image"),
        Err(_) => tracing::debug!(image = id, "removing the replaced image timed out"),
    }
}

/// Import a user-supplied root filesystem tarball (optionally compressed; the engine
/// detects it) as `reference`, streaming it from disk. `user` defaults to
/// [`IMAGE_USER`]; root is refused. `entrypoint` and `cmd` become JSON exec-form
/// instructions. `labels` are applied as given.
#[expect(clippy::too_many_arguments, reason = "the recipe passes each image setting separately")]
pub async fn import_rootfs_file(
    engine: &DockerEngine,
    tar_path: &Path,
    reference: &str,
    user: Option<&str>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    labels: &[(String, String)],
    deadline: Duration,
) -> Result<String, ImageError> {
    let docker = &engine.docker;
    let changes = image_changes(
        reference,
        user.unwrap_or(IMAGE_USER),
        entrypoint.as_deref(),
        cmd.as_deref(),
        None,
        None,
        labels,
    )?;
    let io_error = |source| ImageError::Io { what: "open the rootfs tarball", path: tar_path.to_path_buf(), source };
    let file = tokio::fs::File::open(tar_path).await.map_err(io_error)?;
    if !file.metadata().await.map_err(io_error)?.is_file() {
        return Err(ImageError::Rootfs(format!("`{}` is not a regular file", tar_path.display())));
    }
    import_source(docker, Source::File(file), reference, &changes, deadline).await
}

/// The id of the local image `reference`, or `None` when the engine does not have it.
/// Never pulls.
pub async fn image_id(docker: &Docker, reference: &str) -> Result<Option<String>, ImageError> {
    Ok(inspect(docker, reference).await?.and_then(|image| image.id))
}

async fn inspect(docker: &Docker, reference: &str) -> Result<Option<ImageInspect>, ImageError> {
    let what = "inspect image";
    match tokio::time::timeout(CALL_DEADLINE, docker.inspect_image(reference)).await {
        Ok(Ok(image)) => Ok(Some(image)),
        Ok(Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })) => Ok(None),
        Ok(Err(e)) => Err(engine_error(what, reference, &e)),
        Err(_) => Err(ImageError::Timeout { what, reference: reference.to_owned(), limit: CALL_DEADLINE }),
    }
}

fn engine_error(what: &'static str, reference: &str, e: &bollard::errors::Error) -> ImageError {
    ImageError::Engine { what, reference: reference.to_owned(), detail: describe(e) }
}

/// The engine's message without bollard's wrapping.
fn describe(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code, message } => {
            format!("{message} (HTTP {status_code})")
        }
        bollard::errors::Error::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

/// Import the bundled images from the static executables in `binaries_dir` (as returned by
/// [`static_build`], or [`default_source`]), tagged with this version. The tags move to the new
/// images; an image whose content (root filesystem and configuration) is unchanged, and that
/// records the executables it was made from, is kept. `notify` gets a line per image
/// (reference, size, time). Holds the host's images lock ([`ImagesLock`]) meanwhile.
pub async fn build_bundled(
    engine: &DockerEngine,
    binaries_dir: &Path,
    notify: &Notify,
) -> Result<Vec<BuiltImage>, ImageError> {
    let _lock = ImagesLock::acquire(notify).await?;
    import_bundled(engine, binaries_dir, notify).await
}

/// [`build_bundled`] under a lock the caller holds.
async fn import_bundled(
    engine: &DockerEngine,
    binaries_dir: &Path,
    notify: &Notify,
) -> Result<Vec<BuiltImage>, ImageError> {
    let docker = &engine.docker;
    let mut built = Vec::with_capacity(BUNDLED.len());
    for image in &BUNDLED {
        let started = Instant::now();
        let reference = format!("{}:{TAG}", image.repo);
        let paths: Vec<(&str, PathBuf)> = image.binaries.iter().map(|name| (*name, binaries_dir.join(name))).collect();
        for (_, path) in &paths {
            if !is_static_executable(path)? {
                return Err(ImageError::Rootfs(format!(
                    "`{}` is not a static executable and cannot run in a scratch image; build it with the static flags (.cargo/config.toml)",
                    path.display()
                )));
            }
        }
        let files: Vec<(&str, &Path)> = paths.iter().map(|(name, path)| (*name, path.as_path())).collect();
        let tar = rootfs_tar(&files)?;
        let entrypoint = [format!("/{}", image.entrypoint)];
        let mut labels =
            vec![(LABEL_IMAGE.to_owned(), image.name.to_owned()), (LABEL_VERSION.to_owned(), TAG.to_owned())];
        let unlabelled =
            image_changes(&reference, IMAGE_USER, Some(&entrypoint), None, image.workdir, image.path, &labels)?;
        let content = content_digest(&tar, &unlabelled);
        if let Some(existing) = inspect(docker, &reference).await?
            && let Some(id) = existing.id.clone()
            && label(&existing, LABEL_CONTENT) == Some(content.as_str())
            && recorded_executables(&existing).is_some()
        {
            built.push(BuiltImage {
                name: image.name,
                reference,
                id,
                size: existing.size.unwrap_or_default(),
                unchanged: true,
            });
            continue;
        }
        labels.push((LABEL_CONTENT.to_owned(), content));
        let mut stamps = std::collections::BTreeMap::new();
        for (name, path) in &paths {
            stamps.insert((*name).to_owned(), stamp(path)?);
        }
        let stamps = serde_json::to_string(&stamps)
            .map_err(|e| ImageError::Rootfs(format!("could not record the executables: {e}")))?;
        labels.push((LABEL_EXECUTABLES.to_owned(), stamps));
        let changes =
            image_changes(&reference, IMAGE_USER, Some(&entrypoint), None, image.workdir, image.path, &labels)?;
        let id = import(docker, tar, &reference, &changes, IMPORT_DEADLINE).await?;
        let size = inspect(docker, &id).await?.and_then(|i| i.size).unwrap_or_default();
        notify.line(&format!(
            "  imported {reference} ({:.1} MB) in {}",
            size as f64 / 1e6,
            duration_text(started.elapsed().as_secs_f64())
        ));
        built.push(BuiltImage { name: image.name, reference, id, size, unchanged: false });
    }
    Ok(built)
}

/// Why a directory cannot give the bundled images their executables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// A bundled executable is not there; the package that provides it.
    Missing { path: PathBuf, package: &'static str },
    /// A bundled executable has an ELF interpreter (it needs a loader the images do not have).
    Dynamic { path: PathBuf },
    /// A bundled executable could not be read.
    Unreadable { path: PathBuf, error: String },
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Missing { path, package } => {
                write!(f, "`{}` is missing (package `{package}` provides it)", path.display())
            }
            Unusable::Dynamic { path } => {
                write!(f, "`{}` is dynamically linked (it has an ELF interpreter)", path.display())
            }
            Unusable::Unreadable { path, error } => write!(f, "`{}` cannot be read: {error}", path.display()),
        }
    }
}

/// `Ok` when `dir` holds every bundled executable, each static; else the first one that is
/// missing, dynamically linked or unreadable.
pub fn check_executables(dir: &Path) -> Result<(), Unusable> {
    for (package, binary) in PACKAGES {
        let path = dir.join(binary);
        if !path.is_file() {
            return Err(Unusable::Missing { path, package });
        }
        match is_static_executable(&path) {
            Ok(true) => {}
            Ok(false) => return Err(Unusable::Dynamic { path }),
            Err(e) => return Err(Unusable::Unreadable { path, error: e.to_string() }),
        }
    }
    Ok(())
}

/// `dir` when it holds every bundled executable, each static (`images build --binaries DIR`):
/// for example the README's release build or a static test build, so the images need no
/// second compile. The error names the first executable that is missing or dynamically linked.
pub fn prebuilt_in(dir: &Path) -> Result<PathBuf, ImageError> {
    match check_executables(dir) {
        Ok(()) => Ok(dir.to_path_buf()),
        Err(Unusable::Missing { path, package }) => Err(ImageError::Build(format!(
            "`{}` is missing: --binaries needs every bundled executable (`cargo build --release --locked` in an elengtis checkout makes them all, static); package `{package}` provides it",
            path.display()
        ))),
        Err(Unusable::Dynamic { path }) => Err(ImageError::Build(format!(
            "`{}` is dynamically linked (it has an ELF interpreter) and cannot run in a scratch image; build it with the checkout's settings (.cargo/config.toml: `crt-static` for {IMAGE_TARGET}, not replaced by RUSTFLAGS or another CARGO_BUILD_TARGET), or with `CARGO_BUILD_TARGET={IMAGE_TARGET}` and `RUSTFLAGS='{STATIC_RUSTFLAGS}'`",
            path.display()
        ))),
        Err(Unusable::Unreadable { path, error }) => {
            Err(ImageError::Build(format!("`{}` cannot be read: {error}", path.display())))
        }
    }
}

/// Where the bundled images take their executables from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinarySource {
    /// A static build of this elengtis checkout ([`static_build`]); `reason` says why nothing
    /// already built could be used (`None` when `--source` asked for the build).
    Build {
        /// The workspace root.
        source: PathBuf,
        /// Why a compile is needed, for the announcement.
        reason: Option<String>,
    },
    /// Static executables already built: beside this one (the README's build, the tool image)
    /// or named by `--binaries`.
    Prebuilt(PathBuf),
}

impl BinarySource {
    /// The directory holding the static executables, building them first when needed (with
    /// an announcement and progress through `notify`).
    pub async fn binaries(&self, notify: &Notify) -> Result<PathBuf, ImageError> {
        match self {
            Self::Prebuilt(dir) => Ok(dir.clone()),
            Self::Build { source, reason } => {
                let (source, reason, notify) = (source.clone(), reason.clone(), *notify);
                tokio::task::spawn_blocking(move || static_build(&source, reason.as_deref(), &notify))
                    .await
                    .map_err(|e| ImageError::Build(format!("the build task failed: {e}")))?
            }
        }
    }
}

/// The source tree this binary was built from, while it is still there.
fn built_from() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?.to_path_buf();
    dir.join("Cargo.toml").is_file().then_some(dir)
}

/// Where the bundled images come from when nothing is named, cheapest first:
///
/// 1. the executables beside this one, when every bundled one is there and static: the
///    README's `cargo build --release --locked` (static by default, `.cargo/config.toml`),
///    a static test build, the tool image (`/elengtis`, `/elengtis-fixture`, …). An import
///    of seconds, and the images then run the very code of this build;
/// 2. else the source tree this binary was built from, compiled statically ([`static_build`],
///    minutes; the reason is kept for the announcement);
/// 3. else nothing: the error says exactly which executables are needed and how to get them.
pub fn default_source() -> Result<BinarySource, ImageError> {
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    let unusable = match &beside {
        Some(dir) => match check_executables(dir) {
            Ok(()) => return Ok(BinarySource::Prebuilt(dir.clone())),
            Err(why) => format!("beside this executable {why}"),
        },
        None => "the path of this executable is unknown".to_owned(),
    };
    match built_from() {
        Some(source) => Ok(BinarySource::Build { source, reason: Some(unusable) }),
        None => Err(ImageError::NoSource {
            reason: unusable,
            source_tree: Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default(),
        }),
    }
}

/// SHA-256 (hex) over the root filesystem tar and the change list that configure an image.
fn content_digest(tar: &[u8], changes: &[String]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(tar);
    for change in changes {
        hasher.update([0]);
        hasher.update(change.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn label<'a>(image: &'a ImageInspect, key: &str) -> Option<&'a str> {
    image.config.as_ref()?.labels.as_ref()?.get(key).map(String::as_str)
}

/// What one executable an image was made from looked like: its content hash, and the size and
/// modification time of the file it was read from (so an unchanged file is recognised without
/// reading it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stamp {
    /// SHA-256 of the executable (hex).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, ns since the epoch.
    pub mtime_ns: u64,
}

/// The size and modification time of `path`.
fn file_stat(path: &Path) -> Result<(u64, u64), ImageError> {
    let io_error = |source| ImageError::Io { what: "inspect the executable", path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(io_error)?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    Ok((meta.len(), mtime))
}

/// The SHA-256 of the file at `path`, read once per process for a given size and modification
/// time (the tool image carries every executable the other images do).
fn file_sha256(path: &Path, size: u64, mtime_ns: u64) -> Result<String, ImageError> {
    use sha2::{Digest as _, Sha256};
    type Cache = std::sync::Mutex<std::collections::HashMap<(PathBuf, u64, u64), String>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let key = (path.to_path_buf(), size, mtime_ns);
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(hash) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(hash);
    }
    let io_error = |source| ImageError::Io { what: "read the executable", path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io_error)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io_error)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if let Ok(mut c) = cache.lock() {
        c.insert(key, hash.clone());
    }
    Ok(hash)
}

/// The [`Stamp`] of the executable at `path`.
pub fn stamp(path: &Path) -> Result<Stamp, ImageError> {
    let (size, mtime_ns) = file_stat(path)?;
    Ok(Stamp { sha256: file_sha256(path, size, mtime_ns)?, size, mtime_ns })
}

/// The executables an image records it was made from ([`LABEL_EXECUTABLES`]), if it does.
fn recorded_executables(image: &ImageInspect) -> Option<std::collections::BTreeMap<String, Stamp>> {
    serde_json::from_str(label(image, LABEL_EXECUTABLES)?).ok()
}

/// Why the bundled image `image` (its inspect answer `found`) is not made from the executables
/// in `dir`: the executables that differ, or that it records none; `None` when it is. A file of
/// the recorded size and modification time is taken as unchanged; any other is hashed.
fn made_from_others(image: &Bundled, found: &ImageInspect, dir: &Path) -> Result<Option<String>, ImageError> {
    let Some(recorded) = recorded_executables(found) else {
        return Ok(Some("it records no executables it was made from (an import of an older elengtis)".into()));
    };
    let mut differ = Vec::new();
    for name in image.binaries {
        let path = dir.join(name);
        let same = match recorded.get(*name) {
            None => false,
            Some(stamp) => {
                let (size, mtime_ns) = file_stat(&path)?;
                (size, mtime_ns) == (stamp.size, stamp.mtime_ns)
                    || (size == stamp.size && file_sha256(&path, size, mtime_ns)? == stamp.sha256)
            }
        };
        if !same {
            differ.push(format!("`{name}`"));
        }
    }
    Ok((!differ.is_empty())
        .then(|| format!("{} differ{}", differ.join(", "), if differ.len() == 1 { "s" } else { "" })))
}

/// What making sure of the bundled images did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ensured {
    /// The bundled images, as the engine now holds them.
    pub images: Vec<BuiltImage>,
    /// What was (re)imported and why, in one sentence; `None` when nothing was.
    pub imported: Option<String>,
}

/// The bundled images of this version, made from the executables beside this `elengtis`: the
/// existing ones when every one is present, carries our label and records that it was made from
/// those very executables (their content hashes, [`LABEL_EXECUTABLES`]); otherwise (re)imported
/// from [`default_source`] ([`build_bundled`]: an image whose content did not change is kept),
/// saying so up front through `notify`: which images are missing or made from other
/// executables (which ones), what they are made from, and (for a compile) why and how long it
/// took last time. Never pulls. When the executables beside this one cannot make the images (a
/// dynamic build), present images are used as they are: only missing ones are made.
pub async fn ensure_bundled(engine: &DockerEngine, notify: &Notify) -> Result<Vec<BuiltImage>, ImageError> {
    Ok(ensure(engine, None, notify).await?.images)
}

/// [`ensure_bundled`] for a run that uses `references`: nothing happens unless one of them is a
/// bundled image of this version (the fixture, the sink, the twins, the relay's tool image) and
/// the executables beside this one can make the images (an import of seconds, never a compile
/// in the middle of a run: a missing image is then reported as missing); otherwise those images
/// are made sure of, and what was (re)imported is returned for the run to report.
pub async fn ensure_current(engine: &DockerEngine, references: &[String]) -> Result<Ensured, ImageError> {
    let bundled = BUNDLED.iter().any(|b| references.contains(&format!("{}:{TAG}", b.repo)));
    if !bundled || !matches!(default_source(), Ok(BinarySource::Prebuilt(_))) {
        return Ok(Ensured::default());
    }
    ensure(engine, Some(references), &Notify::silent()).await
}

async fn ensure(engine: &DockerEngine, wanted: Option<&[String]>, notify: &Notify) -> Result<Ensured, ImageError> {
    let docker = &engine.docker;
    let _lock = ImagesLock::acquire(notify).await?;
    // What the images must be made from; an error only matters when something must be made.
    let source = default_source();
    let mut present = Vec::with_capacity(BUNDLED.len());
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for image in &BUNDLED {
        let reference = format!("{}:{TAG}", image.repo);
        if wanted.is_some_and(|w| !w.contains(&reference)) {
            continue;
        }
        match inspect(docker, &reference).await? {
            Some(found) if label(&found, LABEL_IMAGE) == Some(image.name) && found.id.is_some() => {
                if let Ok(BinarySource::Prebuilt(dir)) = &source
                    && let Some(why) = made_from_others(image, &found, dir)?
                {
                    stale.push(format!("{reference}: {why}"));
                }
                present.push(BuiltImage {
                    name: image.name,
                    reference,
                    id: found.id.unwrap_or_default(),
                    size: found.size.unwrap_or_default(),
                    unchanged: true,
                });
            }
            _ => missing.push(reference),
        }
    }
    if missing.is_empty() && stale.is_empty() {
        return Ok(Ensured { images: present, imported: None });
    }
    let from = source?;
    let started = Instant::now();
    let what = match &from {
        BinarySource::Prebuilt(dir) => {
            format!("importing them from the static executables beside this one, in {} (no compile)", dir.display())
        }
        BinarySource::Build { .. } => "making them".to_owned(),
    };
    let mut why = Vec::new();
    if !missing.is_empty() {
        why.push(format!(
            "the bundled images of this version are not in the Docker engine yet ({})",
            missing.join(", ")
        ));
    }
    if !stale.is_empty() {
        why.push(format!(
            "the bundled images in the Docker engine were made from other executables than those beside this elengtis ({})",
            stale.join("; ")
        ));
    }
    let why = why.join("; ");
    notify.line(&format!("elengtis: {why}; {what}:"));
    let dir = from.binaries(notify).await?;
    let built = import_bundled(engine, &dir, notify).await?;
    let took = duration_text(started.elapsed().as_secs_f64());
    notify.line(&format!("elengtis: the bundled images are ready ({took} in all)"));
    let imported: Vec<&str> = built.iter().filter(|b| !b.unchanged).map(|b| b.reference.as_str()).collect();
    let summary = format!(
        "{why}; imported {} from {} in {took}",
        if imported.is_empty() { "nothing new".to_owned() } else { imported.join(", ") },
        dir.display()
    );
    Ok(Ensured { images: built, imported: Some(summary) })
}

/// An exclusive lock, on this host, over making the bundled images: two commands that find them
/// missing or stale at once (parallel CI jobs, a test suite) import one after the other, and the
/// second finds them current. A file lock on `elengtis-bundled-images.lock` in the temporary
/// directory (`flock`, released when the process ends, also when it is killed); it cannot order
/// commands on other hosts of a shared engine. A lock file that cannot be opened (a read-only
/// temporary directory) is logged and not waited for.
#[derive(Debug)]
pub struct ImagesLock {
    _file: Option<File>,
}

impl ImagesLock {
    /// The lock file.
    pub fn path() -> PathBuf {
        std::env::temp_dir().join("elengtis-bundled-images.lock")
    }

    /// Take the lock, waiting at most [`LOCK_DEADLINE`] for another holder (said once through
    /// `notify`).
    pub async fn acquire(notify: &Notify) -> Result<ImagesLock, ImageError> {
        let path = Self::path();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .or_else(|_| File::open(&path));
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open the bundled images' lock; not waiting for other commands");
                return Ok(ImagesLock { _file: None });
            }
        };
        let started = Instant::now();
        let mut said = false;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(ImagesLock { _file: Some(file) }),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(ImageError::Io { what: "lock", path, source });
                }
            }
            if !said {
                notify.line(&format!(
                    "elengtis: waiting for another elengtis on this host that is making the bundled images (lock {})",
                    path.display()
                ));
                said = true;
            }
            if started.elapsed() > LOCK_DEADLINE {
                return Err(ImageError::Locked { path, limit: LOCK_DEADLINE });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn rootfs_tar_has_the_layout_and_owners() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "host-a", b"#!binary a");
        let b = write(dir.path(), "host-b", b"binary b, longer");
        let tar = rootfs_tar(&[("elengtis", &a), ("elengtis-fixture", &b)]).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            seen.push((
                path,
                header.entry_type(),
                header.mode().unwrap(),
                header.uid().unwrap(),
                header.gid().unwrap(),
                header.mtime().unwrap(),
                body,
            ));
        }
        use tar::EntryType::{Directory, Regular};
        assert_eq!(
            seen,
            vec![
                ("tmp/".to_owned(), Directory, 0o1777, 0, 0, 0, vec![]),
                ("data/".to_owned(), Directory, 0o755, 65534, 65534, 0, vec![]),
                ("work/".to_owned(), Directory, 0o755, 65534, 65534, 0, vec![]),
                ("elengtis".to_owned(), Regular, 0o755, 0, 0, 0, b"#!binary a".to_vec()),
                ("elengtis-fixture".to_owned(), Regular, 0o755, 0, 0, 0, b"binary b, longer".to_vec()),
            ]
        );
    }

    #[test]
    fn rootfs_tar_is_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", b"same bytes");
        let first = rootfs_tar(&[("elengtis-fixture", &a)]).unwrap();
        // A different host mtime and mode must not change the layer.
        std::thread::sleep(Duration::from_millis(20));
        let b = write(dir.path(), "b", b"same bytes");
        let second = rootfs_tar(&[("elengtis-fixture", &b)]).unwrap();
        assert_eq!(first, second);
        let other = write(dir.path(), "c", b"other bytes");
        assert_ne!(first, rootfs_tar(&[("elengtis-fixture", &other)]).unwrap());
    }

    #[test]
    fn rootfs_tar_refuses_bad_names_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", b"x");
        for name in ["", ".", "..", "bin/sh", "../x", "tmp", "data", "a\nb"] {
            assert!(matches!(rootfs_tar(&[(name, &a)]), Err(ImageError::Rootfs(_))), "{name:?}");
        }
        assert!(matches!(rootfs_tar(&[("x", &a), ("x", &a)]), Err(ImageError::Rootfs(_))));
        let missing = dir.path().join("missing");
        let error = rootfs_tar(&[("x", &missing)]).unwrap_err();
        assert!(matches!(error, ImageError::Io { .. }));
        assert!(error.to_string().starts_with("failed to read the file for the image"), "{error}");
        assert!(matches!(rootfs_tar(&[("x", dir.path())]), Err(ImageError::Rootfs(_))));
    }

    #[test]
    fn changes_are_exec_form_quoted_and_ordered() {
        let entrypoint = ["/opt/venv/bin/python".to_owned(), "-m".to_owned(), "server \"x\" \\ $HOME".to_owned()];
        let cmd = ["--stdio".to_owned()];
        let labels = [
            ("org.elengtis.image".to_owned(), "custom".to_owned()),
            ("note".to_owned(), r#"a "quoted" $VAR \ value = ok"#.to_owned()),
        ];
        let changes =
            image_changes("x/y:1", "65534:65534", Some(&entrypoint), Some(&cmd), None, None, &labels).unwrap();
        assert_eq!(
            changes,
            vec![
                r#"ENTRYPOINT ["/opt/venv/bin/python","-m","server \"x\" \\ $HOME"]"#.to_owned(),
                r#"CMD ["--stdio"]"#.to_owned(),
                "USER 65534:65534".to_owned(),
                r#"LABEL "org.elengtis.image"="custom""#.to_owned(),
                r#"LABEL "note"="a \"quoted\" \$VAR \\ value = ok""#.to_owned(),
            ]
        );
        assert_eq!(image_changes("x/y:1", "1000", None, None, None, None, &[]).unwrap(), vec!["USER 1000".to_owned()]);
        assert_eq!(
            image_changes("x/y:1", "1000", None, None, Some("/work"), None, &[]).unwrap(),
            vec!["WORKDIR /work".to_owned(), "USER 1000".to_owned()]
        );
        assert_eq!(
            image_changes("x/y:1", "1000", None, None, Some("/work"), Some("/"), &[]).unwrap(),
            vec!["ENV PATH=/".to_owned(), "WORKDIR /work".to_owned(), "USER 1000".to_owned()]
        );
        for bad in ["bin", "/a b", "/$X", "/a:bin", "/a\nUSER 0", ""] {
            assert!(image_changes("x/y:1", "1000", None, None, None, Some(bad), &[]).is_err(), "{bad:?}");
        }
        // The tool image runs `elengtis` by name (a Kubernetes `command: [elengtis]`).
        let tool = BUNDLED.iter().find(|b| b.repo == TOOL_REPO).unwrap();
        assert_eq!((tool.path, tool.workdir), (Some("/"), Some("/work")));
        for bad in ["work", "/a b", "/$HOME", "/a\nUSER 0"] {
            assert!(image_changes("x/y:1", "1000", None, None, Some(bad), None, &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn changes_refuse_newlines_and_empty_lists() {
        let injected = ["/server\nUSER 0".to_owned()];
        let error = image_changes("x/y:1", IMAGE_USER, Some(&injected), None, None, None, &[]).unwrap_err();
        assert!(error.to_string().starts_with("failed to configure image `x/y:1`: ENTRYPOINT argument"), "{error}");
        assert!(image_changes("x/y:1", IMAGE_USER, None, Some(&["a\rb".to_owned()]), None, None, &[]).is_err());
        assert!(image_changes("x/y:1", IMAGE_USER, None, None, None, None, &[("k\n".into(), "v".into())]).is_err());
        assert!(
            image_changes("x/y:1", IMAGE_USER, None, None, None, None, &[("k".into(), "v\nUSER 0".into())]).is_err()
        );
        assert!(image_changes("x/y:1", IMAGE_USER, None, None, None, None, &[(String::new(), "v".into())]).is_err());
        assert!(image_changes("x/y:1", IMAGE_USER, Some(&[]), None, None, None, &[]).is_err());
        assert!(image_changes("x/y:1", IMAGE_USER, None, Some(&[]), None, None, &[]).is_err());
    }

    #[test]
    fn root_users_are_refused() {
        for user in
            ["0", "00", "0:0", "0:65534", "root", "root:nogroup", "65534:0", "1000:root", "", ":", "1000:", ":1000"]
        {
            let error = check_user(user).unwrap_err();
            assert!(!error.is_empty(), "{user:?}");
        }
        for user in ["1 000", "$UID", "a\nb", "10:20:30", "${USER}"] {
            assert!(check_user(user).is_err(), "{user:?}");
        }
        for user in ["65534:65534", "65534", "1000", "10", "nobody", "nobody:nogroup", "app-user", "100:1000"] {
            assert!(check_user(user).is_ok(), "{user:?}");
        }
        let error = image_changes("x/y:1", "root", None, None, None, None, &[]).unwrap_err();
        assert!(error.to_string().contains("must run unprivileged"), "{error}");
    }

    #[test]
    fn references_need_a_tag() {
        assert_eq!(split_reference("elengtis/fixture:0.1.0").unwrap(), ("elengtis/fixture", "0.1.0"));
        assert_eq!(split_reference("localhost:5000/a/b:v1").unwrap(), ("localhost:5000/a/b", "v1"));
        for bad in ["", "elengtis/fixture", "localhost:5000/a", "a:", ":b", "a b:1", "a@sha256:00", "a:1\n"] {
            assert!(split_reference(bad).is_err(), "{bad:?}");
        }
        assert_eq!(fixture_ref(), format!("elengtis/fixture:{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(tool_ref(), format!("elengtis/elengtis:{}", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn build_messages_yield_our_executables() {
        let line = r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"elengtis-fixture"},"executable":"/t/x86_64-unknown-linux-gnu/image/elengtis-fixture","fresh":true}"#;
        assert_eq!(
            artifact_executable(line),
            Some(("elengtis-fixture".to_owned(), PathBuf::from("/t/x86_64-unknown-linux-gnu/image/elengtis-fixture")))
        );
        let lib = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"elengtis"},"executable":null}"#;
        assert_eq!(artifact_executable(lib), None);
        let other =
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"other"},"executable":"/t/other"}"#;
        assert_eq!(artifact_executable(other), None);
        assert_eq!(artifact_executable(r#"{"reason":"build-finished","success":true}"#), None);
        assert_eq!(artifact_executable("not json"), None);
    }

    /// A minimal ELF64 little-endian header followed by one program header of `p_type`.
    fn elf(p_type: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 + 56];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        bytes[64..68].copy_from_slice(&p_type.to_le_bytes());
        bytes
    }

    #[test]
    fn progress_says_how_far_how_long_and_why_it_may_wait() {
        let line = progress_text(57, "tokio", Duration::from_secs(130), Some((412, 723.0)), None);
        assert_eq!(
            line,
            "elengtis: compiling the images' executables: 57 of ≈412 units, last `tokio`, 2 min 10 s elapsed (last build: 12 min 03 s)"
        );
        let first = progress_text(3, "libc", Duration::from_millis(4300), None, None);
        assert_eq!(first, "elengtis: compiling the images' executables: 3 units, last `libc`, 4.3 s elapsed");
        let stalled = progress_text(0, "", Duration::from_secs(25), None, Some(Path::new("/src/target")));
        assert!(
            stalled.ends_with(
                "nothing compiled yet: cargo may be waiting for another cargo that holds the lock on /src/target"
            ),
            "{stalled}"
        );
    }

    #[test]
    fn the_announcement_says_what_why_and_how_long() {
        let why = "beside this executable `/x/elengtis-twin` is missing (package `elengtis-twin` provides it)";
        let first = compile_announcement(Path::new("/src"), Some(why), None);
        assert!(first.contains(why), "{first}");
        assert!(first.contains("from the source tree /src"), "{first}");
        assert!(first.contains(&format!("from cold it takes {COLD_BUILD_ESTIMATE}")), "{first}");
        let again = compile_announcement(Path::new("/src"), None, Some(&BuildRecord { seconds: 723.4, units: 412 }));
        assert!(again.contains("the last such build here took 12 min 03 s (412 units)"), "{again}");
    }

    #[test]
    fn with_nothing_to_make_the_images_from_the_error_names_what_is_needed() {
        let error = ImageError::NoSource {
            reason: "beside this executable `/usr/local/bin/elengtis-fixture` is missing".into(),
            source_tree: PathBuf::from("/gone/elengtis"),
        };
        let text = error.to_string();
        assert!(text.starts_with("failed to make the bundled images: beside this executable"), "{text}");
        assert!(text.contains("(/gone/elengtis) is gone"), "{text}");
        assert!(
            text.contains("`elengtis`, `elengtis-fixture`, `elengtis-sink`, `elengtis-notes`, `elengtis-hostile`, `elengtis-twin` and `elengtis-rest-agent`"),
            "{text}"
        );
        assert!(text.contains("cargo build --release --locked"), "{text}");
        assert!(text.contains("elengtis images build --binaries DIR"), "{text}");
    }

    #[test]
    fn the_build_record_round_trips_and_a_bad_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(BUILD_RECORD);
        assert_eq!(BuildRecord::read(&path), None);
        BuildRecord { seconds: 12.5, units: 3 }.write(&path);
        assert_eq!(BuildRecord::read(&path), Some(BuildRecord { seconds: 12.5, units: 3 }));
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(BuildRecord::read(&path), None);
    }

    #[test]
    fn executables_are_checked_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(check_executables(dir.path()), Err(Unusable::Missing { package: "elengtis", .. })));
        for (_, binary) in PACKAGES {
            write(dir.path(), binary, &elf(1));
        }
        assert_eq!(check_executables(dir.path()), Ok(()));
        write(dir.path(), TWIN_BIN, &elf(3));
        let why = check_executables(dir.path()).unwrap_err();
        assert_eq!(why, Unusable::Dynamic { path: dir.path().join(TWIN_BIN) });
        assert!(why.to_string().ends_with("elengtis-twin` is dynamically linked (it has an ELF interpreter)"), "{why}");
    }

    #[test]
    fn elf_check_tells_static_from_dynamic() {
        let dir = tempfile::tempdir().unwrap();
        let load = write(dir.path(), "static", &elf(1));
        assert!(is_static_executable(&load).unwrap());
        let interp = write(dir.path(), "dynamic", &elf(3));
        assert!(!is_static_executable(&interp).unwrap());
        let text = write(dir.path(), "script", &[b'#'; 100]);
        assert!(!is_static_executable(&text).unwrap());
        let short = write(dir.path(), "short", b"\x7fELF");
        assert!(matches!(is_static_executable(&short), Err(ImageError::Io { .. })));
    }
}
