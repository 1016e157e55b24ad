//! The egress battery (issue 5): the same network probes run from a real trial container
//! (an `isolated_container` campaign whose script calls the hostile server's `egress_probe`;
//! results read from the recorded trajectory) and from positive-control containers the test
//! creates on an ordinary bridge network. A probe is blocked when nothing answers the trial
//! (on Docker 20.10 an internal network keeps a default route to the bridge, so the host
//! drops forwarded packets: `timeout`, not `unreachable`); the block is proven only when the
//! same probe gets an answer from the control (a listener the test owns, a peer container,
//! an upstream DNS answer). Otherwise the control is recorded as `not_available` with the
//! reason and nothing is claimed. Every probe runs from a stdio-mode trial and from an
//! HTTP-mode trial the runner reaches through its relay (the default; the relay shares the
//! target's network namespace), each with no network (the default for both without a sink)
//! and on a bridge of their own (`ELENGTIS_TRIAL_NETWORK=always`, what a sink brings): no
//! bridge has a host address, so the host's own addresses are blocked from all four. A fifth
//! trial opts out of the relay (`ELENGTIS_RELAY=never`): the runner routes to it, its bridge
//! has a host address, and the host answers it on its own addresses. That exposure of the
//! opt-out, stated in docs/security.md, is asserted as it is, so a change shows up here. A
//! sixth trial has a canary sink and nothing else, so it runs in the sink's network namespace:
//! it must reach the sink on the loopback they share, and nothing else.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;

use elengtis_tests::{
    assert_trials_ran_under_the_test_runtime, bundled_images, docker_api, docker_or_skip, elengtis_cmd,
    managed_objects, read_json, rows, scratch, stderr, stdout, test_runtime, write,
};
use serde_json::{Value, json};

/// An address outside this machine (Cloudflare's resolver), for TCP and ICMP.
const OUTSIDE_V4: &str = "1.1.1.1";
/// The same, over IPv6.
const OUTSIDE_V6: &str = "[2606:4700:4700::1111]:443";
/// The cloud metadata service.
const METADATA: &str = "169.254.169.254:80";
/// Probes of the host itself: blocked from a trial whose bridge has no host address (stdio,
/// relay: the default), reachable from one the runner routes to directly (the
/// `ELENGTIS_RELAY=never` opt-out, documented in docs/security.md).
const HOST_PROBES: [&str; 3] = ["host_gateway_tcp", "host_other_address_tcp", "icmp_host_gateway"];
/// The port the peer container serves MCP on.
const PEER_PORT: u16 = 8000;

/// Docker objects this test created, removed when dropped (also when a test panics).
#[derive(Default)]
struct Objects {
    containers: Vec<String>,
    networks: Vec<String>,
}

impl Objects {
    fn network(&mut self, name: &str, internal: bool) -> (String, String) {
        let body = json!({"Name": name, "Internal": internal, "Labels": {"org.elengtis.test": "egress"}});
        let (status, created) = docker_api("POST", "/networks/create", Some(&body.to_string()));
        assert_eq!(status, 201, "{created}");
        let id = parse(&created)["Id"].as_str().expect("network id").to_owned();
        self.networks.push(id.clone());
        let (_, inspected) = docker_api("GET", &format!("/networks/{id}"), None);
        let gateway = parse(&inspected)["IPAM"]["Config"][0]["Gateway"].as_str().expect("gateway").to_owned();
        (id, gateway)
    }

    /// Creates (not starts) a hostile container on `network`, as an unprivileged user, under
    /// the runtime the trials run under (so the control proves what a probe can reach from it).
    fn container(&mut self, network: &str, cmd: &[&str]) -> String {
        let mut body = json!({
            "Image": hostile(),
            "User": "65534:65534",
            "Cmd": cmd,
            "Tty": true,
            "Labels": {"org.elengtis.test": "egress"},
            "HostConfig": {"NetworkMode": network, "CapDrop": ["ALL"], "ReadonlyRootfs": true},
        });
        if let Some(runtime) = test_runtime() {
            body["HostConfig"]["Runtime"] = json!(runtime);
        }
        let (status, created) = docker_api("POST", "/containers/create", Some(&body.to_string()));
        assert_eq!(status, 201, "{created}");
        let id = parse(&created)["Id"].as_str().expect("container id").to_owned();
        self.containers.push(id.clone());
        id
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        for id in &self.containers {
            let _ = docker_api("DELETE", &format!("/containers/{id}?force=1&v=1"), None);
        }
        for id in &self.networks {
            let _ = docker_api("DELETE", &format!("/networks/{id}"), None);
        }
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn hostile() -> String {
    format!("elengtis/hostile:{}", env!("CARGO_PKG_VERSION"))
}

fn start(id: &str) {
    let (status, body) = docker_api("POST", &format!("/containers/{id}/start"), None);
    assert_eq!(status, 204, "{body}");
}

/// The container's address on `network`.
fn address_on(id: &str, network: &str) -> String {
    let (_, inspected) = docker_api("GET", &format!("/containers/{id}/json"), None);
    let networks = parse(&inspected)["NetworkSettings"]["Networks"].clone();
    let found = networks.as_object().into_iter().flatten().find(|(_, n)| n["NetworkID"] == network);
    found.and_then(|(_, n)| n["IPAddress"].as_str()).expect("container address").to_owned()
}

/// Runs `probe --json SPEC` in a control container on `network` (also joined to `extra`)
/// and returns the outcomes by probe name.
fn control_probes(objects: &mut Objects, network: &str, extra: Option<&str>, specs: &Value) -> BTreeMap<String, Value> {
    let spec = specs.to_string();
    let id = objects.container(network, &["probe", "--json", &spec]);
    if let Some(extra) = extra {
        let body = json!({"Container": id}).to_string();
        let (status, answer) = docker_api("POST", &format!("/networks/{extra}/connect"), Some(&body));
        assert_eq!(status, 200, "{answer}");
    }
    start(&id);
    let (status, waited) = docker_api("POST", &format!("/containers/{id}/wait"), None);
    assert_eq!(status, 200, "{waited}");
    let (_, logs) = docker_api("GET", &format!("/containers/{id}/logs?stdout=1&stderr=1"), None);
    assert_eq!(parse(&waited)["StatusCode"], 0, "the control probe failed: {logs}");
    by_name(&parse(logs.trim()))
}

fn by_name(outcomes: &Value) -> BTreeMap<String, Value> {
    let list = outcomes.as_array().unwrap_or_else(|| panic!("not a list of outcomes: {outcomes}"));
    list.iter().map(|o| (o["name"].as_str().expect("probe name").to_owned(), o.clone())).collect()
}

fn probe(name: &str, kind: &str, target: &str) -> Value {
    json!({"name": name, "kind": kind, "target": target, "timeout_ms": 1500})
}

/// The probes both sides run; `host_addr` is a host address the side is not attached to.
fn specs(listener_port: u16, other_host_addr: &str, peer: &str) -> Value {
    json!([
        probe("outside_tcp", "tcp", &format!("{OUTSIDE_V4}:443")),
        probe("host_gateway_tcp", "tcp", &format!("gateway:{listener_port}")),
        probe("host_other_address_tcp", "tcp", &format!("{other_host_addr}:{listener_port}")),
        probe("dns_embedded_resolver", "dns", "example.com"),
        probe("ipv6_tcp", "tcp", OUTSIDE_V6),
        probe("icmp_outside", "icmp", OUTSIDE_V4),
        probe("icmp_host_gateway", "icmp", "gateway"),
        probe("cloud_metadata_tcp", "tcp", METADATA),
        probe("peer_trial_tcp", "tcp", peer),
    ])
}

const SCENARIO: &str = r#"
schema_version: 1
id: egress
title: The hostile server probes every way out
description: The script calls egress_probe once; the outcomes are read from the trajectory.
bindings: [probe]
exercise:
  system: You run network diagnostics.
  user: Probe the network.
  tools: [{binding: probe}]
proposal_rules: []
verify:
  checks: []
"#;

fn campaign(probes: &Value) -> String {
    format!(
        r#"
schema_version: 1
targets:
  - id: hostile-egress
    transport:
      type: isolated_container
      image: {image}
      mcp_transport: stdio
      uid: 65534
      gid: 65534
    bindings:
      egress: {{probe: egress_probe}}
  - id: hostile-egress-http
    transport:
      type: isolated_container
      image: {image}
      container_port: 8000
      uid: 65534
      gid: 65534
      command: [--transport, streamable-http, --bind, 0.0.0.0, --port, "8000"]
    bindings:
      egress: {{probe: egress_probe}}
scenarios: [egress.yaml]
script:
  steps:
    - calls: [{{tool: {{binding: probe}}, arguments: {{probes: {probes}}}}}]
    - content: Done.
"#,
        image = hostile()
    )
}

/// The probe outcomes of one run, by trial.
struct TrialProbes {
    /// The stdio-mode trial (no sink, no gateway: no network at all, the engine's `none`).
    stdio: BTreeMap<String, Value>,
    /// The same stdio trial on an internal bridge of its own (`ELENGTIS_TRIAL_NETWORK=always`,
    /// what a stdio trial with a sink gets).
    bridged: BTreeMap<String, Value>,
    /// Its result row.
    row: Value,
    /// The HTTP-mode trial reached through the relay (the default: no network).
    relayed: BTreeMap<String, Value>,
    /// The same, on an internal bridge of its own (`ELENGTIS_TRIAL_NETWORK=always`, what an
    /// HTTP trial with a sink gets; the relay shares the target's namespace, bridge and all).
    relayed_bridged: BTreeMap<String, Value>,
    /// The HTTP-mode trial the runner routes to directly (`ELENGTIS_RELAY=never`).
    direct: BTreeMap<String, Value>,
    /// The stdio trial with a canary sink and nothing else: in the sink's namespace (the
    /// default), with one more probe, of the sink on the loopback they share.
    sink_namespace: BTreeMap<String, Value>,
}

/// The probe of the sink from a trial in its namespace: the one thing it must reach.
const SINK_PROBE: &str = "sink_on_shared_loopback_tcp";

/// A stdio trial whose only network need is its canary sink (its prompt names `{sink_url}`):
/// run as the default places it, in the sink's namespace; the sink is probed as well.
fn sink_namespace_probes(dir: &Path, specs: &Value) -> BTreeMap<String, Value> {
    let scenario =
        SCENARIO.replace("user: Probe the network.", "user: \"Probe the network; the report goes to {sink_url}.\"");
    assert_ne!(scenario, SCENARIO);
    write(dir, "egress-sink.yaml", &scenario);
    let mut probes = specs.as_array().expect("probe list").clone();
    probes.push(probe(SINK_PROBE, "tcp", "127.0.0.1:48080"));
    let campaign = format!(
        r#"
schema_version: 1
targets:
  - id: hostile-egress-sink
    transport: {{type: isolated_container, image: {image}, mcp_transport: stdio, uid: 65534, gid: 65534}}
    bindings:
      egress: {{probe: egress_probe}}
scenarios: [egress-sink.yaml]
script:
  steps:
    - calls: [{{tool: {{binding: probe}}, arguments: {{probes: {probes}}}}}]
    - content: Done.
"#,
        image = hostile(),
        probes = Value::Array(probes)
    );
    write(dir, "campaign-sink.yaml", &campaign);
    let out = elengtis_cmd(dir, &["run", "--config", "campaign-sink.yaml", "--out", "out-sink"])
        .env("ELENGTIS_RELAY", "always")
        .env("ELENGTIS_TRIAL_NETWORK", "auto")
        .output()
        .expect("failed to run elengtis");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let row = rows(&dir.join("out-sink/runs.jsonl")).remove(0);
    let (probes, _) = probes_of(&dir.join("out-sink"), &row, Net::SinkNamespace);
    probes
}

/// Runs the campaign three times: as it is (both trials with no network, the HTTP one through
/// the relay), with `ELENGTIS_TRIAL_NETWORK=always` (both on an internal bridge), and with
/// `ELENGTIS_RELAY=never` for the direct route.
fn trial_probes(dir: &Path, specs: &Value) -> TrialProbes {
    write(dir, "egress.yaml", SCENARIO);
    write(dir, "campaign.yaml", &campaign(specs));
    let run = |out_dir: &str, relay: &str, network: &str| {
        let out = elengtis_cmd(dir, &["run", "--config", "campaign.yaml", "--out", out_dir, "--jobs", "2"])
            .env("ELENGTIS_RELAY", relay)
            .env("ELENGTIS_TRIAL_NETWORK", network)
            .output()
            .expect("failed to run elengtis");
        assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
        let rows = rows(&dir.join(out_dir).join("runs.jsonl"));
        assert_eq!(rows.len(), 2);
        assert_eq!(assert_trials_ran_under_the_test_runtime(&dir.join(out_dir)), 2);
        move |target: &str| {
            rows.iter().find(|r| r["target"] == target).cloned().unwrap_or_else(|| panic!("no row for {target}"))
        }
    };
    let default = run("out", "always", "auto");
    let bridges = run("out-bridged", "always", "always");
    let direct = run("out-direct", "never", "auto");
    let (stdio, _) = probes_of(&dir.join("out"), &default("hostile-egress"), Net::None);
    let (bridged, _) =
        probes_of(&dir.join("out-bridged"), &bridges("hostile-egress"), Net::Bridge { host_route: false });
    let (relayed, _) = probes_of(&dir.join("out"), &default("hostile-egress-http"), Net::None);
    let (relayed_bridged, _) =
        probes_of(&dir.join("out-bridged"), &bridges("hostile-egress-http"), Net::Bridge { host_route: false });
    let (direct, _) =
        probes_of(&dir.join("out-direct"), &direct("hostile-egress-http"), Net::Bridge { host_route: true });
    let sink_namespace = sink_namespace_probes(dir, specs);
    TrialProbes { stdio, bridged, row: default("hostile-egress"), relayed, relayed_bridged, direct, sink_namespace }
}

/// The network a trial must have run on.
#[derive(Clone, Copy)]
enum Net {
    /// The engine's `none` mode.
    None,
    /// Its own internal bridge; with a host address only when the runner routes to it.
    Bridge { host_route: bool },
    /// The canary sink's namespace: the sink in the `none` mode, the target joining it.
    SinkNamespace,
}

/// The probe outcomes one trial reported, checking its hardening and network first.
fn probes_of(out: &Path, row: &Value, net: Net) -> (BTreeMap<String, Value>, Value) {
    let row = row.clone();
    assert_eq!(row["evidence_status"], "complete", "{row}");
    let evidence = read_json(&out.join(row["evidence"].as_str().expect("evidence path")));
    let te = &evidence["target_execution"];
    assert_eq!(te["hardening_asserted"], true, "{te}");
    let host_route = match net {
        Net::None => {
            assert_eq!(te["network"]["mode"], "none", "{te}");
            false
        }
        Net::SinkNamespace => {
            assert_eq!(te["network"]["mode"], "sink_namespace", "{te}");
            let sink = te["sink"]["container"]["id"].as_str().expect("the sink's container id");
            assert_eq!(te["network"]["shared_with"]["id"], sink, "{te}");
            let facts = te["hardening"].as_array().expect("target hardening facts");
            let mode = facts.iter().find(|f| f["fact"] == "network_mode").expect("target network_mode fact");
            assert_eq!(mode["observed"], format!("container:{sink}"), "{te}");
            let sink_facts = te["sink"]["hardening"].as_array().expect("sink hardening facts");
            assert!(sink_facts.iter().all(|f| f["ok"] == true), "{te}");
            let sink_mode = sink_facts.iter().find(|f| f["fact"] == "network_mode").expect("sink network_mode fact");
            assert_eq!(sink_mode["observed"], "none", "{te}");
            false
        }
        Net::Bridge { host_route } => {
            assert_eq!(te["network"]["mode"], "internal_bridge", "{te}");
            assert_eq!(te["network"]["internal"], true, "{te}");
            host_route
        }
    };
    // Only a trial the runner routes to directly (streamable HTTP, relay turned off) has a
    // host address on its bridge; the hardening facts assert the engine's answer either way.
    assert_eq!(te["host_address_on_bridge"], host_route, "{te}");
    assert_eq!(te.get("relay").is_some(), !host_route && te["endpoint"].is_string(), "{te}");
    if let Some(relay) = te.get("relay") {
        // The relay: in the target's network namespace, every fact held, one stream that
        // carried the session's connections without an error.
        assert_eq!(relay["network"], "the target's network namespace", "{relay}");
        let facts = relay["hardening"].as_array().expect("relay hardening facts");
        assert!(facts.iter().all(|f| f["ok"] == true), "{relay}");
        let mode = facts.iter().find(|f| f["fact"] == "network_mode").expect("relay network_mode fact");
        let target_id = te["container"]["id"].as_str().expect("target id");
        assert_eq!(mode["observed"], format!("container:{target_id}"), "{relay}");
        assert!(relay["stream"]["connections"].as_u64().is_some_and(|n| n >= 1), "{relay}");
        assert_eq!(relay["stream"]["error"], Value::Null, "{relay}");
    }
    let call = &evidence["trajectory"][0]["calls"][0];
    assert_eq!(call["name"], "egress_probe", "{}", evidence["trajectory"]);
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no probe result: {call}"));
    let run_id = row["run_id"].as_str().expect("run id");
    assert!(managed_objects(run_id).is_empty(), "leftovers: {:?}", managed_objects(run_id));
    (by_name(&parse(text)), row)
}

#[test]
fn egress_from_a_trial_is_blocked_where_the_control_gets_through() {
    if !docker_or_skip("egress_from_a_trial_is_blocked_where_the_control_gets_through") {
        return;
    }
    let started = std::time::Instant::now();
    bundled_images();
    // A host service listening on every interface: the worst case a trial could reach.
    let listener = TcpListener::bind("0.0.0.0:0").expect("host listener");
    let port = listener.local_addr().expect("listener address").port();
    let tag = std::process::id();
    let mut objects = Objects::default();
    let (control_net, control_gateway) = objects.network(&format!("elengtis-test-egress-ctl-{tag}"), false);
    // The peer: a hostile MCP server on an internal network of its own, as another trial is.
    let (peer_net, _) = objects.network(&format!("elengtis-test-egress-peer-{tag}"), true);
    let peer_port = PEER_PORT.to_string();
    let peer =
        objects.container(&peer_net, &["--transport", "streamable-http", "--bind", "0.0.0.0", "--port", &peer_port]);
    start(&peer);
    let peer_addr = format!("{}:{PEER_PORT}", address_on(&peer, &peer_net));

    // The trial side: the other host address is the control network's gateway (the host,
    // on a network the trial is not attached to).
    let dir = scratch();
    let TrialProbes { stdio: trial, bridged, row, relayed, relayed_bridged, direct, sink_namespace } =
        trial_probes(dir.path(), &specs(port, &control_gateway, &peer_addr));
    // The control side: docker0's address is a host address it is not attached to.
    let control = control_probes(&mut objects, &control_net, Some(&peer_net), &specs(port, "172.17.0.1", &peer_addr));
    drop(listener);

    let mut table = Vec::new();
    let mut failures = Vec::new();
    for (name, t) in &trial {
        let c = &control[name];
        let (t_out, c_out) = (t["outcome"].as_str().unwrap_or("?"), c["outcome"].as_str().unwrap_or("?"));
        // Something answered: a handshake, a refusal, an echo reply or a DNS answer.
        let answered = |o: &str| matches!(o, "connected" | "refused" | "resolved" | "nxdomain");
        // The HTTP trial behind the relay is as closed as the stdio one. With no network,
        // 127.0.0.11 is its own loopback (no resolver there): a refusal from its own stack.
        let r_out = relayed[name]["outcome"].as_str().unwrap_or("?");
        let r_target = relayed[name]["target"].as_str().unwrap_or_default();
        let r_own_loopback = r_out == "refused" && (r_target.contains("@127.") || r_target.starts_with("127."));
        if answered(r_out) && !r_own_loopback {
            failures.push(format!("{name}: reached from the relayed HTTP trial ({r_out})"));
        }
        let rb_out = relayed_bridged[name]["outcome"].as_str().unwrap_or("?");
        if answered(rb_out) {
            failures.push(format!("{name}: reached from the relayed HTTP trial on a bridge ({rb_out})"));
        }
        // A stdio trial on a bridge of its own (as with a sink) is as closed as one on none.
        let b_out = bridged[name]["outcome"].as_str().unwrap_or("?");
        if answered(b_out) {
            failures.push(format!("{name}: reached from the bridged stdio trial ({b_out})"));
        }
        // A stdio trial in its sink's namespace is as closed as one on none: the loopback
        // it shares with the sink is all it has (a refusal there is its own stack's).
        let s_out = sink_namespace[name]["outcome"].as_str().unwrap_or("?");
        let s_target = sink_namespace[name]["target"].as_str().unwrap_or_default();
        let s_own_loopback = s_out == "refused" && (s_target.contains("@127.") || s_target.starts_with("127."));
        if answered(s_out) && !s_own_loopback {
            failures.push(format!("{name}: reached from the stdio trial in its sink's namespace ({s_out})"));
        }
        // gVisor's host network mode offers no ICMP datagram sockets: under runsc an ICMP
        // probe cannot run at all, from the trial or from the control (also under runsc).
        // That is recorded as the control's state, never claimed as a block or an exposure.
        let cannot_run = |o: &Value| {
            o["outcome"] == "error"
                && o["detail"].as_str().is_some_and(|d| d.contains("failed to open a datagram ICMP socket"))
        };
        let runtime_lacks_probe = test_runtime().is_some() && cannot_run(c) && cannot_run(&direct[name]);
        if HOST_PROBES.contains(&name.as_str()) && !runtime_lacks_probe {
            // A trial the runner routes to directly (ELENGTIS_RELAY=never) keeps a host
            // address on its bridge, and the host answers it on its own addresses: the
            // exposure docs/security.md states. Asserted as it is, so a change shows up here.
            let d_out = direct[name]["outcome"].as_str().unwrap_or("?");
            if d_out != "connected" {
                failures.push(format!("{name}: expected the documented exposure of an HTTP-direct trial ({d_out})"));
            }
            if c_out != "connected" {
                failures.push(format!("{name}: the control did not reach the host ({c_out})"));
            }
        }
        let (blocked, control_state, claim) = {
            // With no network (the `none` mode) 127.0.0.11 is the container's own loopback:
            // no embedded resolver exists there, and the refusal comes from the container's
            // own stack, not from anything outside it.
            let own_loopback = t_out == "refused"
                && t["target"].as_str().is_some_and(|target| target.contains("@127.") || target.starts_with("127."));
            let blocked = !answered(t_out) || own_loopback;
            let proven = answered(c_out);
            if !blocked {
                failures.push(format!("{name}: reached from the trial ({t_out})"));
            }
            if name == "peer_trial_tcp" && !proven {
                failures.push(format!("{name}: the control did not reach the peer ({c_out})"));
            }
            (blocked, if proven { "proven" } else { "not_available" }, if proven { "blocked" } else { "unproven" })
        };
        let reason = match (control_state, name.as_str()) {
            ("not_available", _) if runtime_lacks_probe => {
                "the runtime offers no ICMP datagram sockets (gVisor's host network mode): the probe cannot run from the control either"
            }
            ("not_available", "ipv6_tcp") => {
                "the engine gives bridge networks no IPv6 (EADDRNOTAVAIL on the control too)"
            }
            ("not_available", "dns_embedded_resolver") => "no upstream DNS answers the control either",
            ("not_available", _) => "nothing answers this destination from an ordinary network either",
            _ => "",
        };
        table.push(json!({
            "probe": name,
            "trial": {"outcome": t_out, "target": t["target"], "detail": t["detail"], "elapsed_ms": t["elapsed_ms"]},
            "trial_stdio_bridged": {"outcome": b_out, "detail": bridged[name]["detail"]},
            "trial_stdio_sink_namespace": {"outcome": s_out, "detail": sink_namespace[name]["detail"]},
            "trial_http_relayed": {"outcome": r_out, "detail": relayed[name]["detail"]},
            "trial_http_relayed_bridged": {"outcome": rb_out, "detail": relayed_bridged[name]["detail"]},
            "trial_http_direct": {"outcome": direct[name]["outcome"], "detail": direct[name]["detail"]},
            "control": {"outcome": c_out, "target": c["target"], "detail": c["detail"], "elapsed_ms": c["elapsed_ms"]},
            "blocked": blocked,
            "control_state": control_state,
            "claim": claim,
            "reason": reason,
        }));
    }
    let artifact = json!({"trial_id": row["trial_id"], "probes": table, "seconds": started.elapsed().as_secs_f32()});
    let pretty = serde_json::to_string_pretty(&artifact).unwrap_or_default();
    write(dir.path(), "out/egress-probes.json", &pretty);
    eprintln!("egress battery (trial vs control):");
    for p in &table {
        eprintln!(
            "  {:<24} trial={:<12} bridged={:<12} relayed={:<12} relayed-bridged={:<12} direct={:<12} control={:<12} control:{:<14} {} {}",
            p["probe"].as_str().unwrap_or("?"),
            p["trial"]["outcome"].as_str().unwrap_or("?"),
            p["trial_stdio_bridged"]["outcome"].as_str().unwrap_or("?"),
            p["trial_http_relayed"]["outcome"].as_str().unwrap_or("?"),
            p["trial_http_relayed_bridged"]["outcome"].as_str().unwrap_or("?"),
            p["trial_http_direct"]["outcome"].as_str().unwrap_or("?"),
            p["control"]["outcome"].as_str().unwrap_or("?"),
            p["control_state"].as_str().unwrap_or("?"),
            p["claim"].as_str().unwrap_or("?"),
            p["reason"].as_str().unwrap_or(""),
        );
    }
    eprintln!("{pretty}");
    assert_eq!(trial.len(), 9, "{trial:?}");
    // The one destination a trial in its sink's namespace reaches: the sink, on 127.0.0.1.
    let sink = &sink_namespace[SINK_PROBE];
    assert_eq!(sink["outcome"], "connected", "the trial must reach its sink on the loopback it shares: {sink}");
    assert!(failures.is_empty(), "{failures:?}\n{pretty}");
}

/// `{runner: network_gateway}` (issue 15): a scenario probes the host side explicitly, at the
/// address the runner reports for the trial network's gateway. Nothing answers there (the
/// bridge has no host address), while the same host listener answers a control container at
/// its own network's gateway; and the address is the one the container's routing table names.
#[test]
fn a_probe_to_the_network_gateway_runner_value_finds_nothing() {
    if !docker_or_skip("a_probe_to_the_network_gateway_runner_value_finds_nothing") {
        return;
    }
    bundled_images();
    let listener = TcpListener::bind("0.0.0.0:0").expect("host listener");
    let port = listener.local_addr().expect("listener address").port();
    let mut objects = Objects::default();
    let (control_net, _) = objects.network(&format!("elengtis-test-gw-ctl-{}", std::process::id()), false);
    let runner_gateway = json!({"runner": "network_gateway"});
    let probes = json!([
        {"name": "runner_gateway_tcp", "kind": "tcp", "target": runner_gateway, "port": port, "timeout_ms": 1500},
        {"name": "runner_gateway_icmp", "kind": "icmp", "target": runner_gateway, "timeout_ms": 1500},
        probe("route_gateway_tcp", "tcp", &format!("gateway:{port}")),
    ]);
    let dir = scratch();
    write(dir.path(), "egress.yaml", SCENARIO);
    let campaign = format!(
        r#"
schema_version: 1
targets:
  - id: hostile-egress
    transport: {{type: isolated_container, image: {image}, mcp_transport: stdio, uid: 65534, gid: 65534}}
    bindings:
      egress: {{probe: egress_probe}}
scenarios: [egress.yaml]
script:
  steps:
    - calls: [{{tool: {{binding: probe}}, arguments: {{probes: {probes}}}}}]
    - content: Done.
"#,
        image = hostile()
    );
    write(dir.path(), "campaign.yaml", &campaign);
    let out = elengtis_cmd(dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"])
        .output()
        .expect("failed to run elengtis");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let row = rows(&dir.path().join("out/runs.jsonl")).remove(0);
    let (trial, _) = probes_of(&dir.path().join("out"), &row, Net::Bridge { host_route: false });
    let evidence = read_json(&dir.path().join("out").join(row["evidence"].as_str().expect("evidence path")));
    let gateway = evidence["target_execution"]["network_gateway"]
        .as_str()
        .unwrap_or_else(|| panic!("the gateway is recorded: {}", evidence["target_execution"]))
        .to_owned();
    assert!(gateway.parse::<std::net::Ipv4Addr>().is_ok(), "{gateway}");
    let sent = &evidence["trajectory"][0]["calls"][0]["arguments"]["probes"];
    assert_eq!(sent[0]["target"], gateway.as_str(), "the runner value reached the call: {sent}");
    assert_eq!(sent[1]["target"], gateway.as_str(), "{sent}");

    let control = control_probes(
        &mut objects,
        &control_net,
        None,
        &json!([probe("control_gateway_tcp", "tcp", &format!("gateway:{port}"))]),
    );
    drop(listener);
    let outcome = |p: &BTreeMap<String, Value>, name: &str| p[name]["outcome"].as_str().unwrap_or("?").to_owned();
    let answered = |o: &str| matches!(o, "connected" | "refused");
    eprintln!("network_gateway {gateway}: trial {trial:?}; control {control:?}");
    assert_eq!(
        trial["runner_gateway_tcp"]["target"], trial["route_gateway_tcp"]["target"],
        "the runner value is the gateway the container's routing table names"
    );
    assert_eq!(trial["runner_gateway_tcp"]["target"], format!("{gateway}:{port}").as_str());
    assert_eq!(outcome(&control, "control_gateway_tcp"), "connected", "the listener answers a control container");
    for name in ["runner_gateway_tcp", "route_gateway_tcp", "runner_gateway_icmp"] {
        let o = outcome(&trial, name);
        assert!(!answered(&o), "{name}: the trial reached its gateway ({o}): {}", trial[name]);
    }
    assert_ne!(outcome(&trial, "runner_gateway_icmp"), "connected", "{}", trial["runner_gateway_icmp"]);
}
