//! Leftovers: containers, networks and volumes elengtis created and did not remove (a
//! crashed or killed runner). Only objects carrying [`super::LABEL_MANAGED`] are ever
//! touched.
//!
//! Every object also carries the identity of the runner that created it
//! ([`RunnerIdentity`]: host, boot, pid namespace, pid and the process's start time). A sweep
//! of one run (`elengtis gc --run ID`, and a resume of its own run) removes that run's objects;
//! a sweep of everything (`elengtis gc`) removes only objects whose runner is provably dead —
//! same host, and the host rebooted since, or no process has that pid, or the process with
//! that pid started at another time. Objects whose runner is alive, ran on another host or
//! pid namespace, or recorded no identity (older versions) are kept and reported.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use super::api::{self as docker, CALL_DEADLINE, DockerEngine};
use super::{LABEL_MANAGED, LABEL_RUN};
use crate::sandbox::{SandboxError, SweepReport as GcReport};
use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveVolumeOptions,
};

/// Label: the host name of the runner that created the object.
pub const LABEL_RUNNER_HOST: &str = "org.elengtis.runner.host";
/// Label: the boot id of that host when the runner ran.
pub const LABEL_RUNNER_BOOT: &str = "org.elengtis.runner.boot";
/// Label: the runner's pid namespace.
pub const LABEL_RUNNER_PIDNS: &str = "org.elengtis.runner.pidns";
/// Label: the runner's pid.
pub const LABEL_RUNNER_PID: &str = "org.elengtis.runner.pid";
/// Label: the runner's start time (clock ticks after boot, from `/proc/PID/stat`).
pub const LABEL_RUNNER_START: &str = "org.elengtis.runner.start";

/// Who created an object: enough to tell, on the same host, whether that process still exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerIdentity {
    /// Host name.
    pub host: String,
    /// Boot id (`/proc/sys/kernel/random/boot_id`).
    pub boot: String,
    /// Pid namespace (`/proc/self/ns/pid`).
    pub pidns: String,
    /// Process id.
    pub pid: u32,
    /// Start time of the process, in clock ticks after boot.
    pub start: u64,
}

impl RunnerIdentity {
    /// This process.
    pub fn current() -> &'static RunnerIdentity {
        static CURRENT: OnceLock<RunnerIdentity> = OnceLock::new();
        CURRENT.get_or_init(|| {
            let pid = std::process::id();
            RunnerIdentity {
                host: host_name(),
                boot: read_trimmed("/proc/sys/kernel/random/boot_id"),
                pidns: pid_namespace(),
                pid,
                start: process_start(pid).unwrap_or(0),
            }
        })
    }

    /// The labels that record it.
    pub fn labels(&self) -> [(String, String); 5] {
        [
            (LABEL_RUNNER_HOST.to_owned(), self.host.clone()),
            (LABEL_RUNNER_BOOT.to_owned(), self.boot.clone()),
            (LABEL_RUNNER_PIDNS.to_owned(), self.pidns.clone()),
            (LABEL_RUNNER_PID.to_owned(), self.pid.to_string()),
            (LABEL_RUNNER_START.to_owned(), self.start.to_string()),
        ]
    }

    /// The identity recorded in an object's labels, if complete.
    pub fn from_labels(labels: &HashMap<String, String>) -> Option<RunnerIdentity> {
        Some(RunnerIdentity {
            host: labels.get(LABEL_RUNNER_HOST)?.clone(),
            boot: labels.get(LABEL_RUNNER_BOOT)?.clone(),
            pidns: labels.get(LABEL_RUNNER_PIDNS)?.clone(),
            pid: labels.get(LABEL_RUNNER_PID)?.parse().ok()?,
            start: labels.get(LABEL_RUNNER_START)?.parse().ok()?,
        })
    }
}

fn host_name() -> String {
    read_trimmed("/proc/sys/kernel/hostname")
}

fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid").map(|p| p.display().to_string()).unwrap_or_default()
}

// A process's start time and small /proc files, read the way the stdio guard's records do.
pub use elengtis_stdio_guard::live::{process_start, read_trimmed};

/// Whether the runner that created an object is alive, as far as can be proven from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Provably gone: its objects may be removed.
    Dead(String),
    /// Alive, or not provably dead: its objects are kept.
    Kept(String),
}

/// Judges the runner recorded in `labels` against this host and its processes.
pub fn liveness(labels: &HashMap<String, String>) -> Liveness {
    let Some(runner) = RunnerIdentity::from_labels(labels) else {
        return Liveness::Kept("it records no runner identity (created by an older elengtis)".to_owned());
    };
    let here = RunnerIdentity::current();
    if runner.host != here.host || runner.host.is_empty() {
        return Liveness::Kept(format!("its runner ran on another host ({})", runner.host));
    }
    if runner.boot != here.boot && !runner.boot.is_empty() && !here.boot.is_empty() {
        return Liveness::Dead(format!("its runner (pid {}) ran before this host last booted", runner.pid));
    }
    if runner.pidns != here.pidns {
        return Liveness::Kept(format!("its runner (pid {}) ran in another pid namespace", runner.pid));
    }
    match process_start(runner.pid) {
        None => Liveness::Dead(format!("its runner (pid {}) no longer exists", runner.pid)),
        Some(start) if start != runner.start => Liveness::Dead(format!(
            "its runner (pid {}) no longer exists (the pid now belongs to another process)",
            runner.pid
        )),
        Some(_) => Liveness::Kept(format!("its runner (pid {} on {}) is alive", runner.pid, runner.host)),
    }
}

fn filters(run: Option<&str>) -> HashMap<String, Vec<String>> {
    let mut labels = vec![format!("{LABEL_MANAGED}=true")];
    if let Some(run) = run {
        labels.push(format!("{LABEL_RUN}={run}"));
    }
    HashMap::from([("label".to_owned(), labels)])
}

/// Whether a sweep may remove an object with these labels; a kept object's run is noted.
struct Judge {
    /// One run named: all of its objects go.
    named: bool,
    /// Kept runs: run id → (why, objects kept).
    kept: BTreeMap<String, (String, usize)>,
}

impl Judge {
    fn allows(&mut self, labels: Option<&HashMap<String, String>>) -> bool {
        if self.named {
            return true;
        }
        let empty = HashMap::new();
        let labels = labels.unwrap_or(&empty);
        match liveness(labels) {
            Liveness::Dead(_) => true,
            Liveness::Kept(why) => {
                let run = labels.get(LABEL_RUN).cloned().unwrap_or_else(|| "(no run id)".to_owned());
                self.kept.entry(run).or_insert((why, 0)).1 += 1;
                false
            }
        }
    }
}

/// Remove what elengtis left behind: every object of one run, if given (even a live one's:
/// naming the run is the explicit choice); else only objects of runs whose runner is provably
/// dead ([`liveness`]), the others listed in the report's `kept`.
pub async fn sweep(engine: &DockerEngine, run: Option<&str>) -> Result<GcReport, SandboxError> {
    let docker = &engine.docker;
    let filters = filters(run);
    let mut report = GcReport::default();
    let mut judge = Judge { named: run.is_some(), kept: BTreeMap::new() };
    let containers = docker::call(
        "list leftover containers",
        CALL_DEADLINE,
        docker.list_containers(Some(ListContainersOptionsBuilder::default().all(true).filters(&filters).build())),
    )
    .await?;
    for c in containers {
        if !judge.allows(c.labels.as_ref()) {
            continue;
        }
        let Some(id) = c.id else { continue };
        let name = c.names.and_then(|n| n.first().cloned()).unwrap_or_else(|| id.clone());
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        match docker::call("remove a leftover container", CALL_DEADLINE, docker.remove_container(&id, Some(options)))
            .await
        {
            Ok(()) => report.containers.push(name.trim_start_matches('/').to_owned()),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    let networks = docker::call(
        "list leftover networks",
        CALL_DEADLINE,
        docker.list_networks(Some(ListNetworksOptionsBuilder::default().filters(&filters).build())),
    )
    .await?;
    for n in networks {
        if !judge.allows(n.labels.as_ref()) {
            continue;
        }
        let Some(id) = n.id else { continue };
        match docker::call("remove a leftover network", CALL_DEADLINE, docker.remove_network(&id)).await {
            Ok(()) => report.networks.push(n.name.unwrap_or(id)),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    let volumes = docker::call(
        "list leftover volumes",
        CALL_DEADLINE,
        docker.list_volumes(Some(ListVolumesOptionsBuilder::default().filters(&filters).build())),
    )
    .await?;
    for v in volumes.volumes.unwrap_or_default() {
        if !judge.allows(Some(&v.labels)) {
            continue;
        }
        match docker::call(
            "remove a leftover volume",
            CALL_DEADLINE,
            docker.remove_volume(&v.name, None::<RemoveVolumeOptions>),
        )
        .await
        {
            Ok(()) => report.volumes.push(v.name),
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    report.kept = judge
        .kept
        .into_iter()
        .map(|(run, (why, objects))| {
            format!("run {run}: {objects} object{} kept: {why}", if objects == 1 { "" } else { "s" })
        })
        .collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_runner_is_kept_and_a_gone_one_is_dead() {
        let here = RunnerIdentity::current();
        assert!(here.start > 0, "{here:?}");
        let labels = |identity: &RunnerIdentity| identity.labels().into_iter().collect::<HashMap<_, _>>();
        assert!(matches!(liveness(&labels(here)), Liveness::Kept(why) if why.contains("is alive")));
        let restarted = RunnerIdentity { start: here.start + 1, ..here.clone() };
        assert!(matches!(liveness(&labels(&restarted)), Liveness::Dead(why) if why.contains("another process")));
        let gone = RunnerIdentity { pid: u32::MAX - 1, ..here.clone() };
        assert!(matches!(liveness(&labels(&gone)), Liveness::Dead(why) if why.contains("no longer exists")));
        let elsewhere = RunnerIdentity { host: "another-host".into(), pid: u32::MAX - 1, ..here.clone() };
        assert!(matches!(liveness(&labels(&elsewhere)), Liveness::Kept(why) if why.contains("another host")));
        assert!(matches!(liveness(&HashMap::new()), Liveness::Kept(why) if why.contains("no runner identity")));
    }
}
