//! OCI runtimes per target: the campaign's `runtime:` (or `--runtime` for every container
//! target of a run) names a runtime registered with the engine, such as gVisor's `runsc`.
//! Every container of such a trial — the target, its relay, canary sink and egress proxy —
//! is created with it, and the hardening facts assert it from the engine's inspect answer.
//!
//! Before any trial the run checks that the engine lists every runtime it will use (an
//! unlisted one is refused with the registration recipe, [`recipe`]) and records what it
//! knows of each: the engine's path and arguments, and the version — runc's from the engine's
//! `/version` answer, another runtime's from `<path> --version` when that path exists on the
//! runner's host (the runner and engine share a host in the common set-ups; otherwise the
//! version stays unknown and the engine gate says so).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::api::EngineFacts;
use crate::sandbox::SandboxError;

/// The variable that sets `--runtime` (the runtime of every container target of a run).
pub const ENV: &str = "ELENGTIS_RUNTIME";

/// gVisor's runtime, as the registration recipe names it.
pub const RUNSC: &str = "runsc";

/// `--runtime NAME` (or `ELENGTIS_RUNTIME`): the command-line override of every container
/// target's runtime, for the commands that start containers.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RuntimeArg {
    /// Run every container target — and its relay, canary sink and egress proxy — under this
    /// OCI runtime registered with the Docker engine, e.g. `runsc` (gVisor), instead of each
    /// target's `runtime:` or the engine's default (docs/security.md, "Runtimes").
    #[arg(long = "runtime", value_name = "NAME", env = ENV, value_parser = parse_name)]
    pub runtime: Option<String>,
}

/// Check a runtime name given on the command line.
pub fn parse_name(value: &str) -> Result<String, String> {
    if elengtis_core::format::campaign::valid_runtime_name(value) {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "expected the name of a runtime registered with the engine (letters, digits, `.`, `_`, `-`; at most 64), got {value:?}"
        ))
    }
}

/// A runtime as the engine lists it (`/info`, `Runtimes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Registered {
    /// The runtime binary's path on the engine's host, if the engine reports one.
    pub path: Option<String>,
    /// The arguments the engine passes to it (`runtimeArgs` in `daemon.json`).
    pub args: Vec<String>,
}

/// The runtimes an engine lists, by name, from its `/info` answer's `Runtimes` object.
pub fn registered(info_runtimes: &Value) -> BTreeMap<String, Registered> {
    info_runtimes
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(name, r)| {
                    let path = r["path"].as_str().filter(|p| !p.is_empty()).map(str::to_owned);
                    let args = r["runtimeArgs"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default();
                    (name.clone(), Registered { path, args })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a run records of one runtime it uses (the manifest's and each trial's
/// `target_execution.runtime`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeFacts {
    /// The name the engine lists it under.
    pub name: String,
    /// Whether it is the engine's default runtime (no `runtime:` was asked for).
    pub engine_default: bool,
    /// Where the engine runs it from, if reported.
    pub path: Option<String>,
    /// The engine's arguments to it.
    pub args: Vec<String>,
    /// Its version, when it could be read.
    pub version: Option<String>,
    /// Where the version came from, or why it could not be read.
    pub version_source: String,
    /// How the hardening contract holds differently under this runtime (measured; stated in
    /// every trial's evidence and once per run as a warning).
    pub differences: Vec<String>,
}

/// What holds differently under gVisor than under runc (measured with release 20221219 on
/// Docker 20.10; tests/docker/abuse.rs and egress.rs assert each).
pub const RUNSC_DIFFERENCES: &[&str] = &[
    "pids_limit bounds the sandbox's host threads, not the server's tasks: gVisor runs them inside its own kernel, so a fork bomb is not refused at 128 tasks — it runs on (bounded by the memory and CPU limits) or ends the whole sandbox when gVisor cannot create a host thread",
    "a server killed at the memory limit ends the whole sandbox and reads as `killed` (exit 137), not `oom_killed`: the engine does not see gVisor's out-of-memory kill",
    "ICMP datagram sockets are not available inside the sandbox (gVisor's host network mode)",
];

/// The effective runtime of a target: the run's override, else the campaign's, else `None`
/// (the engine's default).
pub fn effective(override_runtime: Option<&str>, campaign: Option<&str>) -> Option<String> {
    override_runtime.or(campaign).map(str::to_owned)
}

/// The name a container created with `requested` runs under: the requested one, else the
/// engine's default (runc when the engine does not say).
pub fn expected_name(requested: Option<&str>, facts: &EngineFacts) -> String {
    requested.map_or_else(|| facts.default_runtime.clone().unwrap_or_else(|| "runc".to_owned()), str::to_owned)
}

/// How to register `name` with a Docker engine: the refusal's advice.
pub fn recipe(name: &str) -> String {
    if name == RUNSC {
        gvisor_recipe(name, "/usr/bin/runsc")
    } else {
        format!(
            "register `{name}` with the engine: a `\"runtimes\": {{\"{name}\": {{\"path\": \"…\"}}}}` entry in \
             /etc/docker/daemon.json, then `kill -HUP $(pidof dockerd)` to reload the configuration"
        )
    }
}

/// How to register gVisor as `name` (its executable at `path`) so that it runs the trial
/// layout.
fn gvisor_recipe(name: &str, path: &str) -> String {
    format!(
        "register gVisor with the engine: install it (Debian: `apt-get install runsc`), add to /etc/docker/daemon.json \
         `\"runtimes\": {{\"{name}\": {{\"path\": \"{path}\", \"runtimeArgs\": [\"--network=host\"]}}}}` \
         (gVisor then uses the container's own network namespace, which Docker sets up: an internal bridge or \
         loopback only), and reload the engine's configuration with `kill -HUP $(pidof dockerd)`; runc stays the \
         default. docs/security.md, \"Runtimes\", has the details"
    )
}

/// Whether a registered runtime is gVisor: named `runsc`, or run from an executable of that name.
fn is_gvisor(name: &str, registered: &Registered) -> bool {
    name == RUNSC
        || registered.path.as_deref().and_then(|p| std::path::Path::new(p).file_name()).is_some_and(|f| f == RUNSC)
}

/// The network mode gVisor runs with under these engine arguments: the last `--network`
/// (`--network=MODE`, `--network MODE`, one or two dashes), else gVisor's default, `sandbox`.
pub fn gvisor_network(args: &[String]) -> String {
    let mut mode = "sandbox".to_owned();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].trim_start_matches('-');
        if args[i].starts_with('-') {
            if let Some(value) = flag.strip_prefix("network=") {
                value.clone_into(&mut mode);
            } else if flag == "network"
                && let Some(value) = args.get(i + 1)
            {
                value.clone_into(&mut mode);
                i += 1;
            }
        }
        i += 1;
    }
    mode
}

/// Check that the runtime `name`, as the engine registered it, can run the trial layout (a
/// container in a network namespace Docker sets up: an internal bridge, or loopback only).
/// gVisor registered the default way (its own network stack, `--network=sandbox`) fails every
/// trial at start ("cannot run with network enabled in root network namespace"); it is
/// refused here, before any trial, with the registration that works. A runtime the engine does
/// not list is left to [`check_registered`].
pub fn check_layout(name: &str, listed: &BTreeMap<String, Registered>) -> Result<(), SandboxError> {
    let Some(registered) = listed.get(name) else { return Ok(()) };
    if !is_gvisor(name, registered) {
        return Ok(());
    }
    let mode = gvisor_network(&registered.args);
    if mode == "host" {
        return Ok(());
    }
    let args = if registered.args.is_empty() {
        "no runtimeArgs".to_owned()
    } else {
        format!("runtimeArgs {:?}", registered.args)
    };
    Err(SandboxError::Unusable(format!(
        "the Docker engine runs the runtime `{name}` (gVisor, {}) with {args}: gVisor's own network stack \
         (`--network={mode}`), under which every trial fails at start (\"cannot run with network enabled in root \
         network namespace\"); nothing was started. {}",
        registered.path.as_deref().unwrap_or("no path reported"),
        gvisor_recipe(name, registered.path.as_deref().unwrap_or("/usr/bin/runsc"))
    )))
}

/// Check that the engine lists `name`: the error names the runtimes it does list and the
/// registration recipe.
pub fn check_registered(name: &str, listed: &BTreeMap<String, Registered>) -> Result<(), SandboxError> {
    if listed.contains_key(name) {
        return Ok(());
    }
    let known = if listed.is_empty() {
        "none".to_owned()
    } else {
        listed.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
    };
    Err(SandboxError::Unusable(format!(
        "the Docker engine does not list the runtime `{name}` (it lists {known}); {}",
        recipe(name)
    )))
}

/// Why a target cannot run under `runtime` as configured, if it cannot: a mechanism that does
/// not work there is refused before any trial, never degraded silently.
///
/// Under gVisor the allowlisting egress proxy cannot start: it listens on port 80 as an
/// unprivileged user with every capability dropped, which Docker allows under runc (it sets
/// `net.ipv4.ip_unprivileged_port_start=0` in the container's network namespace) but gVisor's
/// own socket layer refuses without `CAP_NET_BIND_SERVICE` — and adding a capability would
/// break the hardening contract.
pub fn refusal(runtime: &str, egress_proxy: bool) -> Option<String> {
    (runtime == RUNSC && egress_proxy).then(|| {
        "a target with an `egress_proxy` cannot run under runsc: the proxy listens on port 80 as an unprivileged \
         user with every capability dropped, which gVisor refuses without CAP_NET_BIND_SERVICE (runc allows it); \
         run that target under runc, or without the proxy (docs/security.md, \"Runtimes\")"
            .to_owned()
    })
}

/// The first line of a runtime's `--version` output, trimmed (`runsc version 0.0~20221219.0`
/// gives `0.0~20221219.0`; `runsc version release-20240212.0` gives `release-20240212.0`).
pub fn parse_version_output(name: &str, output: &str) -> Option<String> {
    let line = output.lines().next()?.trim();
    let rest = line.strip_prefix(name).map_or(line, str::trim_start);
    let rest = rest.strip_prefix("version").map_or(rest, str::trim_start);
    (!rest.is_empty()).then(|| rest.to_owned())
}

/// How long `<path> --version` may take.
const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// What a run records of the runtime `name` (`None`: the engine's default).
pub async fn facts(name: Option<&str>, listed: &BTreeMap<String, Registered>, engine: &EngineFacts) -> RuntimeFacts {
    let resolved = expected_name(name, engine);
    let registered = listed.get(&resolved).cloned().unwrap_or_default();
    let (version, version_source) = if resolved == "runc" {
        match &engine.runc_version {
            Some(v) => (Some(v.clone()), "the engine's /version answer (runc component)".to_owned()),
            None => (None, "unreadable: the engine did not report runc's version".to_owned()),
        }
    } else {
        read_version(&resolved, registered.path.as_deref()).await
    };
    let differences =
        if resolved == RUNSC { RUNSC_DIFFERENCES.iter().map(|d| (*d).to_owned()).collect() } else { Vec::new() };
    RuntimeFacts {
        name: resolved,
        engine_default: name.is_none(),
        path: registered.path,
        args: registered.args,
        version,
        version_source,
        differences,
    }
}

/// Run `<path> --version` on the runner's host, bounded in time.
async fn read_version(name: &str, path: Option<&str>) -> (Option<String>, String) {
    let Some(path) = path.filter(|p| p.starts_with('/')) else {
        return (None, "unreadable: the engine reports no absolute path for the runtime".to_owned());
    };
    if !std::path::Path::new(path).is_file() {
        return (
            None,
            format!("unreadable: {path} is not on the runner's host (is the runner in another mount namespace?)"),
        );
    }
    let run = tokio::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(VERSION_DEADLINE, run).await {
        Ok(Ok(out)) if out.status.success() => {
            match parse_version_output(name, &String::from_utf8_lossy(&out.stdout)) {
                Some(v) => (Some(v), format!("`{path} --version` on the runner's host")),
                None => (None, format!("unreadable: `{path} --version` printed no version")),
            }
        }
        Ok(Ok(out)) => (None, format!("unreadable: `{path} --version` exited with {}", out.status)),
        Ok(Err(e)) => (None, format!("unreadable: failed to run `{path} --version`: {e}")),
        Err(_) => {
            (None, format!("unreadable: `{path} --version` did not answer within {} s", VERSION_DEADLINE.as_secs()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_the_engines_runtimes_with_their_paths_and_arguments() {
        let listed = registered(&json!({
            "runc": {"path": "runc"},
            "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]},
        }));
        assert_eq!(listed.len(), 2);
        assert_eq!(listed["runsc"].path.as_deref(), Some("/usr/bin/runsc"));
        assert_eq!(listed["runsc"].args, vec!["--network=host".to_owned()]);
        assert!(registered(&Value::Null).is_empty());
    }

    #[test]
    fn an_unlisted_runtime_is_refused_with_the_recipe_and_what_is_listed() {
        let listed = registered(&json!({"runc": {"path": "runc"}}));
        assert!(check_registered("runc", &listed).is_ok());
        let e = check_registered("runsc", &listed).expect_err("runsc is not listed").to_string();
        assert!(e.contains("does not list the runtime `runsc`"), "{e}");
        assert!(e.contains("it lists `runc`"), "{e}");
        assert!(e.contains("daemon.json") && e.contains("--network=host") && e.contains("HUP"), "{e}");
        let e = check_registered("kata", &BTreeMap::new()).expect_err("nothing listed").to_string();
        assert!(e.contains("it lists none") && e.contains("\"kata\""), "{e}");
    }

    #[test]
    fn gvisor_registered_with_its_own_network_stack_is_refused_with_the_registration_that_works() {
        let listed = registered(&json!({
            "runc": {"path": "runc"},
            "runsc": {"path": "/usr/bin/runsc"},
            "gvisor": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--debug", "--network", "sandbox"]},
            "runsc-host": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]},
            "runsc-last": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "-network=host"]},
            "kata": {"path": "/usr/bin/kata-runtime"},
        }));
        for ok in ["runc", "runsc-host", "runsc-last", "kata", "not-listed"] {
            assert!(check_layout(ok, &listed).is_ok(), "{ok}");
        }
        let e = check_layout("runsc", &listed).expect_err("the default registration").to_string();
        assert!(e.contains("`runsc` (gVisor, /usr/bin/runsc) with no runtimeArgs"), "{e}");
        assert!(e.contains("cannot run with network enabled in root network namespace"), "{e}");
        assert!(e.contains(r#""runtimeArgs": ["--network=host"]"#) && e.contains("HUP"), "{e}");
        // Any name, found by its executable; the recipe keeps the name and the path.
        let e = check_layout("gvisor", &listed).expect_err("gVisor under another name").to_string();
        assert!(e.contains("(`--network=sandbox`)"), "{e}");
        assert!(e.contains(r#""gvisor": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--network=host"]}"#), "{e}");
        assert_eq!(gvisor_network(&["--network".into()]), "sandbox");
    }

    #[test]
    fn the_egress_proxy_is_refused_under_gvisor_only() {
        let refused = refusal("runsc", true).expect("refused");
        assert!(refused.contains("egress_proxy") && refused.contains("CAP_NET_BIND_SERVICE"), "{refused}");
        assert_eq!(refusal("runsc", false), None);
        assert_eq!(refusal("runc", true), None);
    }

    #[test]
    fn reads_the_version_line_of_runsc() {
        assert_eq!(
            parse_version_output("runsc", "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n").as_deref(),
            Some("0.0~20221219.0")
        );
        assert_eq!(
            parse_version_output("runsc", "runsc version release-20240212.0\n").as_deref(),
            Some("release-20240212.0")
        );
        assert_eq!(parse_version_output("runsc", "runsc version\n"), None);
        assert_eq!(parse_version_output("runsc", ""), None);
    }

    #[test]
    fn the_override_wins_and_nothing_means_the_engine_default() {
        assert_eq!(effective(Some("runsc"), Some("kata")).as_deref(), Some("runsc"));
        assert_eq!(effective(None, Some("kata")).as_deref(), Some("kata"));
        assert_eq!(effective(None, None), None);
        let facts = EngineFacts { default_runtime: Some("crun".into()), ..EngineFacts::default() };
        assert_eq!(expected_name(None, &facts), "crun");
        assert_eq!(expected_name(Some("runsc"), &facts), "runsc");
        assert_eq!(expected_name(None, &EngineFacts::default()), "runc");
    }
}
