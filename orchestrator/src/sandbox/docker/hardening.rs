//! The hardening contract of a trial container: what we ask the engine for, and the pure
//! check of what the engine reports back.
//!
//! The checks read the engine's own inspect answer (`GET /containers/{id}/json`, and the
//! network's), not what we sent: a setting an engine silently ignores, or a daemon
//! default that overrides it, shows up as a mismatch and fails the trial before any
//! scenario action runs. `docs/security.md` states the contract these facts enforce.

use std::collections::HashMap;

use bollard::models::{
    HostConfig, HostConfigCgroupnsModeEnum, HostConfigLogConfig, Mount, MountType, MountVolumeOptions, ResourcesUlimits,
};
use serde::Serialize;
use serde_json::{Value, json};

/// Size of the `/tmp` tmpfs, MiB.
pub const TMPFS_MIB: u64 = 64;
/// Mount options of `/tmp`.
pub fn tmpfs_options() -> String {
    format!("rw,noexec,nosuid,nodev,size={TMPFS_MIB}m")
}
/// Process limit.
pub const PIDS_LIMIT: i64 = 128;
/// Memory limit (equal to the memory+swap limit: no swap), bytes.
pub const MEMORY_BYTES: i64 = 512 * 1024 * 1024;
/// CPU limit, in units of 1e-9 CPUs.
pub const NANO_CPUS: i64 = 1_000_000_000;
/// Open-file limit.
pub const NOFILE: i64 = 1024;
/// Container log cap (json-file driver).
pub const LOG_MAX_SIZE: &str = "1m";

/// The host configuration of every trial container: `volumes` are anonymous volumes (removed
/// with the container), labelled so a sweep finds any that survive; `runtime` is the OCI
/// runtime asked for (`None`: the engine's default).
pub fn host_config(
    network_id: &str,
    volumes: &[String],
    labels: &HashMap<String, String>,
    runtime: Option<&str>,
) -> HostConfig {
    let mounts: Vec<Mount> = volumes
        .iter()
        .map(|target| Mount {
            target: Some(target.clone()),
            typ: Some(MountType::VOLUME),
            read_only: Some(false),
            volume_options: Some(MountVolumeOptions { labels: Some(labels.clone()), ..MountVolumeOptions::default() }),
            ..Mount::default()
        })
        .collect();
    HostConfig {
        mounts: (!mounts.is_empty()).then_some(mounts),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([("/tmp".to_owned(), tmpfs_options())])),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges:true".to_owned()]),
        pids_limit: Some(PIDS_LIMIT),
        memory: Some(MEMORY_BYTES),
        memory_swap: Some(MEMORY_BYTES),
        nano_cpus: Some(NANO_CPUS),
        ulimits: Some(vec![ResourcesUlimits { name: Some("nofile".into()), soft: Some(NOFILE), hard: Some(NOFILE) }]),
        log_config: Some(HostConfigLogConfig {
            typ: Some("json-file".into()),
            config: Some(HashMap::from([
                ("max-size".to_owned(), LOG_MAX_SIZE.to_owned()),
                ("max-file".to_owned(), "1".to_owned()),
            ])),
        }),
        network_mode: Some(network_id.to_owned()),
        privileged: Some(false),
        publish_all_ports: Some(false),
        init: Some(false),
        cgroupns_mode: Some(HostConfigCgroupnsModeEnum::PRIVATE),
        auto_remove: Some(false),
        runtime: runtime.map(str::to_owned),
        ..HostConfig::default()
    }
}

/// One asserted fact: what we required and what the engine reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// Name of the property.
    pub fact: &'static str,
    /// What is required.
    pub expected: Value,
    /// What the engine reported.
    pub observed: Value,
    /// Whether it holds.
    pub ok: bool,
}

/// The engine's network mode with loopback only (a trial that needs no network runs in it).
pub const NO_NETWORK: &str = "none";

/// The network mode prefix of a container in another container's network namespace (the
/// relay, in its target's): `container:<id>`.
pub const SHARED_PREFIX: &str = "container:";

/// Network driver option that keeps the host from taking an address on the trial bridge.
pub const INHIBIT_IPV4: &str = "com.docker.network.bridge.inhibit_ipv4";

/// What a container must look like.
#[derive(Debug, Clone)]
pub struct Expected {
    /// Image id the container must run.
    pub image_id: String,
    /// `uid:gid`.
    pub user: String,
    /// The trial network's id (the container's primary network).
    pub network_id: String,
    /// Further networks the container must be attached to, and no others (the egress proxy:
    /// the sink's network).
    pub also_attached: Vec<String>,
    /// Paths of the anonymous volumes asked for.
    pub volumes: Vec<String>,
    /// Whether the trial network's bridge may hold a host address (the runner routes to the
    /// network: streamable HTTP without a relay). Otherwise the bridge must have none, so the
    /// container cannot reach any address of the host.
    pub host_route: bool,
    /// The OCI runtime the container must run under (the one asked for, or the engine's
    /// default).
    pub runtime: String,
}

fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

fn not_host(v: &Value) -> bool {
    !v.as_str().is_some_and(|s| s == "host" || s.starts_with("container:"))
}

/// The network facts of a container in the `none` mode: that mode, attached to the engine's
/// `none` network alone (whose driver is `null`: no interface but loopback).
fn network_none(inspect: &Value, network: &Value, fact: &mut impl FnMut(&'static str, Value, &Value, bool)) {
    let hc = &inspect["HostConfig"];
    fact("network_mode", json!(NO_NETWORK), &hc["NetworkMode"], hc["NetworkMode"] == NO_NETWORK);
    let networks = &inspect["NetworkSettings"]["Networks"];
    let attached: Vec<&String> = networks.as_object().map(|m| m.keys().collect()).unwrap_or_default();
    let only_none = attached == [NO_NETWORK]
        && network["Id"].as_str().is_some_and(|id| !id.is_empty() && networks[NO_NETWORK]["NetworkID"] == id);
    fact("attached_networks", json!([NO_NETWORK]), &json!(attached), only_none);
    fact("network_driver", json!("null"), &network["Driver"], network["Driver"] == "null");
}

/// Check a container's inspect answer and its network's against the contract.
pub fn check(inspect: &Value, network: &Value, expected: &Expected) -> Vec<Fact> {
    let hc = &inspect["HostConfig"];
    let mut facts = Vec::new();
    let mut fact = |fact: &'static str, expected: Value, observed: &Value, ok: bool| {
        facts.push(Fact { fact, expected, observed: observed.clone(), ok });
    };
    fact("image_id", json!(expected.image_id), &inspect["Image"], inspect["Image"] == expected.image_id.as_str());
    fact("runtime", json!(expected.runtime), &hc["Runtime"], hc["Runtime"] == expected.runtime.as_str());
    let user = &inspect["Config"]["User"];
    let non_root = user.as_str().is_some_and(|u| u == expected.user && !u.starts_with("0:") && u != "0" && u != "root");
    fact("user", json!(expected.user), user, non_root);
    fact("read_only_root", json!(true), &hc["ReadonlyRootfs"], hc["ReadonlyRootfs"] == true);
    let tmpfs = &hc["Tmpfs"];
    let tmp_ok = tmpfs.as_object().is_some_and(|m| m.len() == 1)
        && tmpfs["/tmp"].as_str().is_some_and(|o| {
            let opts: Vec<&str> = o.split(',').collect();
            opts.contains(&"noexec") && opts.contains(&"nosuid") && opts.iter().any(|x| x.starts_with("size="))
        });
    fact("tmpfs", json!({"/tmp": tmpfs_options()}), tmpfs, tmp_ok);
    fact("cap_drop", json!(["ALL"]), &hc["CapDrop"], hc["CapDrop"] == json!(["ALL"]));
    fact("cap_add", json!([]), &hc["CapAdd"], empty(&hc["CapAdd"]));
    fact("privileged", json!(false), &hc["Privileged"], hc["Privileged"] == false);
    let secopt = &hc["SecurityOpt"];
    let opts: Vec<&str> = secopt.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    fact(
        "no_new_privileges",
        json!("no-new-privileges:true"),
        secopt,
        opts.iter().any(|o| *o == "no-new-privileges:true" || *o == "no-new-privileges"),
    );
    let seccomp_kept = !opts.iter().any(|o| o.starts_with("seccomp") && o.ends_with("unconfined"))
        && !opts.iter().any(|o| o.starts_with("apparmor") && o.ends_with("unconfined"));
    fact("default_seccomp_and_apparmor", json!("no unconfined override"), secopt, seccomp_kept);
    fact("pids_limit", json!(PIDS_LIMIT), &hc["PidsLimit"], hc["PidsLimit"] == PIDS_LIMIT);
    fact("memory", json!(MEMORY_BYTES), &hc["Memory"], hc["Memory"] == MEMORY_BYTES);
    fact("memory_swap", json!(MEMORY_BYTES), &hc["MemorySwap"], hc["MemorySwap"] == MEMORY_BYTES);
    fact("nano_cpus", json!(NANO_CPUS), &hc["NanoCpus"], hc["NanoCpus"] == NANO_CPUS);
    fact("oom_kill_disable", json!(false), &hc["OomKillDisable"], hc["OomKillDisable"] != true);
    let nofile =
        hc["Ulimits"].as_array().and_then(|u| u.iter().find(|l| l["Name"] == "nofile")).cloned().unwrap_or(Value::Null);
    fact(
        "nofile",
        json!({"Name": "nofile", "Soft": NOFILE, "Hard": NOFILE}),
        &nofile,
        nofile["Soft"] == NOFILE && nofile["Hard"] == NOFILE,
    );
    if expected.network_id == NO_NETWORK {
        network_none(inspect, network, &mut fact);
    } else if expected.network_id.starts_with(SHARED_PREFIX) {
        // The relay: exactly its target's namespace, and no network of its own (it adds no
        // interface, route or address to what the target has; the target's facts assert that).
        let mode = &hc["NetworkMode"];
        fact("network_mode", json!(expected.network_id), mode, mode == expected.network_id.as_str());
        let networks = &inspect["NetworkSettings"]["Networks"];
        let attached: Vec<&String> = networks.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        fact("attached_networks", json!([]), &json!(attached), attached.is_empty());
    } else {
        let net_ok = hc["NetworkMode"] == expected.network_id.as_str();
        fact("network_mode", json!(expected.network_id), &hc["NetworkMode"], net_ok);
        let attached: Vec<&String> =
            inspect["NetworkSettings"]["Networks"].as_object().map(|m| m.keys().collect()).unwrap_or_default();
        let mut wanted: Vec<&str> = std::iter::once(expected.network_id.as_str())
            .chain(expected.also_attached.iter().map(String::as_str))
            .collect();
        wanted.sort_unstable();
        let mut found: Vec<&str> = inspect["NetworkSettings"]["Networks"]
            .as_object()
            .map(|m| m.values().map(|n| n["NetworkID"].as_str().unwrap_or_default()).collect())
            .unwrap_or_default();
        found.sort_unstable();
        let only_ours = found == wanted;
        fact("attached_networks", json!(wanted), &json!(attached), only_ours);
        fact("network_internal", json!(true), &network["Internal"], network["Internal"] == true);
        let inhibit = &network["Options"][INHIBIT_IPV4];
        if expected.host_route {
            fact("bridge_host_address", json!("allowed (the runner routes to the network)"), inhibit, true);
        } else {
            fact("bridge_host_address", json!({INHIBIT_IPV4: "true"}), inhibit, inhibit == "true");
        }
    }
    for (name, key) in
        [("pid_mode", "PidMode"), ("ipc_mode", "IpcMode"), ("uts_mode", "UTSMode"), ("userns_mode", "UsernsMode")]
    {
        fact(name, json!("not host"), &hc[key], not_host(&hc[key]));
    }
    fact("cgroupns_mode", json!("not host"), &hc["CgroupnsMode"], not_host(&hc["CgroupnsMode"]));
    fact("binds", json!([]), &hc["Binds"], empty(&hc["Binds"]));
    let mounts = &inspect["Mounts"];
    let mounts_ok = mounts.as_array().is_none_or(|a| {
        a.len() == expected.volumes.len()
            && a.iter().all(|m| {
                m["Type"] == "volume"
                    && m["Destination"].as_str().is_some_and(|d| expected.volumes.iter().any(|v| v == d))
                    && !m["Source"].as_str().unwrap_or_default().contains("docker.sock")
            })
    });
    fact("host_mounts", json!({"anonymous_volumes": expected.volumes}), mounts, mounts_ok);
    let sock = inspect.to_string().contains("docker.sock");
    fact("docker_socket", json!(false), &json!(sock), !sock);
    fact("devices", json!([]), &hc["Devices"], empty(&hc["Devices"]));
    fact("device_requests", json!([]), &hc["DeviceRequests"], empty(&hc["DeviceRequests"]));
    fact(
        "published_ports",
        json!({}),
        &hc["PortBindings"],
        empty(&hc["PortBindings"]) && hc["PublishAllPorts"] != true,
    );
    let log_ok = hc["LogConfig"]["Type"] == "json-file" && hc["LogConfig"]["Config"]["max-size"] == LOG_MAX_SIZE;
    fact("log_cap", json!({"Type": "json-file", "max-size": LOG_MAX_SIZE}), &hc["LogConfig"], log_ok);
    facts
}

/// The failed facts, as messages.
pub fn failures(facts: &[Fact]) -> Vec<String> {
    facts
        .iter()
        .filter(|f| !f.ok)
        .map(|f| format!("{}: expected {}, engine reports {}", f.fact, f.expected, f.observed))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> (Value, Value, Expected) {
        let inspect = json!({
            "Image": "sha256:abc",
            "Config": {"User": "10001:10001"},
            "HostConfig": {
                "ReadonlyRootfs": true, "Tmpfs": {"/tmp": tmpfs_options()}, "CapDrop": ["ALL"], "CapAdd": null,
                "Privileged": false, "SecurityOpt": ["no-new-privileges:true"], "PidsLimit": PIDS_LIMIT,
                "Memory": MEMORY_BYTES, "MemorySwap": MEMORY_BYTES, "NanoCpus": NANO_CPUS, "OomKillDisable": false,
                "Ulimits": [{"Name": "nofile", "Soft": NOFILE, "Hard": NOFILE}],
                "NetworkMode": "net1", "PidMode": "", "IpcMode": "private", "UTSMode": "", "UsernsMode": "",
                "CgroupnsMode": "host", "Binds": null, "Devices": [], "DeviceRequests": null, "PortBindings": {},
                "PublishAllPorts": false, "LogConfig": {"Type": "json-file", "Config": {"max-size": "1m", "max-file": "1"}},
                "Runtime": "runc"
            },
            "Mounts": [],
            "NetworkSettings": {"Networks": {"elengtis-x": {"NetworkID": "net1"}}}
        });
        (
            inspect,
            json!({"Internal": true, "Options": {INHIBIT_IPV4: "true"}}),
            Expected {
                image_id: "sha256:abc".into(),
                user: "10001:10001".into(),
                network_id: "net1".into(),
                also_attached: Vec::new(),
                volumes: Vec::new(),
                host_route: false,
                runtime: "runc".into(),
            },
        )
    }

    #[test]
    fn a_conforming_container_passes_except_a_host_cgroup_namespace() {
        let (inspect, network, expected) = good();
        let failed = failures(&check(&inspect, &network, &expected));
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].starts_with("cgroupns_mode"));
    }

    /// A trial without a network: the `none` mode, attached to the engine's `none` network
    /// alone. Anything else (a bridge attached too, another mode, a driver that is not
    /// `null`) fails the contract.
    #[test]
    fn a_networkless_container_passes_only_in_the_none_mode_alone() {
        let none = || {
            let (mut inspect, _, mut expected) = good();
            inspect["HostConfig"]["CgroupnsMode"] = json!("private");
            inspect["HostConfig"]["NetworkMode"] = json!("none");
            inspect["NetworkSettings"]["Networks"] = json!({"none": {"NetworkID": "n0"}});
            expected.network_id = NO_NETWORK.into();
            (inspect, json!({"Id": "n0", "Name": "none", "Driver": "null", "Internal": false}), expected)
        };
        let (inspect, network, expected) = none();
        assert_eq!(failures(&check(&inspect, &network, &expected)), Vec::<String>::new());
        type Weaken = Box<dyn Fn(&mut Value, &mut Value)>;
        let weakenings: Vec<(&str, Weaken)> = vec![
            ("network_mode", Box::new(|i, _| i["HostConfig"]["NetworkMode"] = json!("bridge"))),
            (
                "attached_networks",
                Box::new(|i, _| i["NetworkSettings"]["Networks"]["bridge"] = json!({"NetworkID": "b"})),
            ),
            (
                "attached_networks",
                Box::new(|i, _| i["NetworkSettings"]["Networks"]["none"]["NetworkID"] = json!("other")),
            ),
            ("network_driver", Box::new(|_, n| n["Driver"] = json!("bridge"))),
        ];
        for (name, weaken) in weakenings {
            let (mut inspect, mut network, expected) = none();
            weaken(&mut inspect, &mut network);
            let failed = failures(&check(&inspect, &network, &expected));
            assert!(failed.iter().any(|f| f.starts_with(name)), "{name}: {failed:?}");
        }
    }

    /// The relay: in exactly its target's network namespace, with no network of its own.
    /// Another container's namespace, the host's, or an interface of its own fails.
    #[test]
    fn a_relay_passes_only_in_its_targets_namespace_with_nothing_of_its_own() {
        let relay = || {
            let (mut inspect, _, mut expected) = good();
            inspect["HostConfig"]["CgroupnsMode"] = json!("private");
            inspect["HostConfig"]["NetworkMode"] = json!("container:target1");
            inspect["NetworkSettings"]["Networks"] = json!({});
            expected.network_id = format!("{SHARED_PREFIX}target1");
            (inspect, expected)
        };
        let (inspect, expected) = relay();
        assert_eq!(failures(&check(&inspect, &Value::Null, &expected)), Vec::<String>::new());
        type Weaken = Box<dyn Fn(&mut Value)>;
        let weakenings: Vec<(&str, Weaken)> = vec![
            ("network_mode", Box::new(|i| i["HostConfig"]["NetworkMode"] = json!("container:other"))),
            ("network_mode", Box::new(|i| i["HostConfig"]["NetworkMode"] = json!("host"))),
            ("network_mode", Box::new(|i| i["HostConfig"]["NetworkMode"] = json!("bridge"))),
            (
                "attached_networks",
                Box::new(|i| i["NetworkSettings"]["Networks"] = json!({"bridge": {"NetworkID": "b"}})),
            ),
        ];
        for (name, weaken) in weakenings {
            let (mut inspect, expected) = relay();
            weaken(&mut inspect);
            let failed = failures(&check(&inspect, &Value::Null, &expected));
            assert!(failed.iter().any(|f| f.starts_with(name)), "{name}: {failed:?}");
        }
    }

    #[test]
    fn a_container_on_two_networks_passes_only_when_both_are_expected() {
        let (mut inspect, network, mut expected) = good();
        inspect["HostConfig"]["CgroupnsMode"] = json!("private");
        inspect["NetworkSettings"]["Networks"]["elengtis-x-sink"] = json!({"NetworkID": "net2"});
        let failed = failures(&check(&inspect, &network, &expected));
        assert!(failed.iter().any(|f| f.starts_with("attached_networks")), "{failed:?}");
        expected.also_attached = vec!["net2".into()];
        assert!(failures(&check(&inspect, &network, &expected)).is_empty());
        expected.also_attached = vec!["net3".into()];
        assert!(!failures(&check(&inspect, &network, &expected)).is_empty());
    }

    #[test]
    fn every_weakening_is_caught() {
        type Weaken = Box<dyn Fn(&mut Value, &mut Value)>;
        let cases: Vec<(&str, Weaken)> = vec![
            ("read_only_root", Box::new(|i, _| i["HostConfig"]["ReadonlyRootfs"] = json!(false))),
            ("cap_drop", Box::new(|i, _| i["HostConfig"]["CapDrop"] = json!([]))),
            ("cap_add", Box::new(|i, _| i["HostConfig"]["CapAdd"] = json!(["NET_RAW"]))),
            ("privileged", Box::new(|i, _| i["HostConfig"]["Privileged"] = json!(true))),
            ("no_new_privileges", Box::new(|i, _| i["HostConfig"]["SecurityOpt"] = json!([]))),
            (
                "default_seccomp_and_apparmor",
                Box::new(|i, _| {
                    i["HostConfig"]["SecurityOpt"] = json!(["no-new-privileges:true", "seccomp=unconfined"])
                }),
            ),
            ("pids_limit", Box::new(|i, _| i["HostConfig"]["PidsLimit"] = json!(null))),
            ("memory_swap", Box::new(|i, _| i["HostConfig"]["MemorySwap"] = json!(-1))),
            ("user", Box::new(|i, _| i["Config"]["User"] = json!("0:0"))),
            ("image_id", Box::new(|i, _| i["Image"] = json!("sha256:other"))),
            ("network_internal", Box::new(|_, n| n["Internal"] = json!(false))),
            ("bridge_host_address", Box::new(|_, n| n["Options"] = json!({}))),
            ("pid_mode", Box::new(|i, _| i["HostConfig"]["PidMode"] = json!("host"))),
            ("binds", Box::new(|i, _| i["HostConfig"]["Binds"] = json!(["/:/host"]))),
            ("host_mounts", Box::new(|i, _| i["Mounts"] = json!([{"Type": "bind", "Source": "/etc"}]))),
            (
                "docker_socket",
                Box::new(|i, _| i["Mounts"] = json!([{"Type": "bind", "Source": "/var/run/docker.sock"}])),
            ),
            ("tmpfs", Box::new(|i, _| i["HostConfig"]["Tmpfs"] = json!({"/tmp": "rw"}))),
            ("devices", Box::new(|i, _| i["HostConfig"]["Devices"] = json!([{"PathOnHost": "/dev/kvm"}]))),
            (
                "published_ports",
                Box::new(|i, _| i["HostConfig"]["PortBindings"] = json!({"80/tcp": [{"HostPort": "80"}]})),
            ),
            (
                "attached_networks",
                Box::new(|i, _| i["NetworkSettings"]["Networks"]["bridge"] = json!({"NetworkID": "b"})),
            ),
            ("log_cap", Box::new(|i, _| i["HostConfig"]["LogConfig"]["Config"] = json!({}))),
            ("runtime", Box::new(|i, _| i["HostConfig"]["Runtime"] = json!("runsc"))),
            ("runtime", Box::new(|i, _| i["HostConfig"]["Runtime"] = json!(null))),
        ];
        for (name, weaken) in cases {
            let (mut inspect, mut network, expected) = good();
            inspect["HostConfig"]["CgroupnsMode"] = json!("private");
            weaken(&mut inspect, &mut network);
            let failed = failures(&check(&inspect, &network, &expected));
            assert!(failed.iter().any(|f| f.starts_with(name)), "{name} not caught: {failed:?}");
        }
    }
}
