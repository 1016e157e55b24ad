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
        format!(
            "register gVisor with the engine: install it (Debian: `apt-get install runsc`), add to /etc/docker/daemon.json \
             `\"runtimes\": {{\"{RUNSC}\": {{\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=host\"]}}}}` \
             (gVisor then uses the container's own network namespace, which Docker sets up: an internal bridge or \
             loopback only), and reload the engine's configuration with `kill -HUP $(pidof dockerd)`; runc stays the \
             default. docs/security.md, \"Runtimes\", has the details"
        )
    } else {
        format!(
            "register `{name}` with the engine: a `\"runtimes\": {{\"{name}\": {{\"path\": \"…\"}}}}` entry in \
             /etc/docker/daemon.json, then `kill -HUP $(pidof dockerd)` to reload the configuration"
        )
    }
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
