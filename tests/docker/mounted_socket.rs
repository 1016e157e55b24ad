//! The tool as CI runs it: the FROM-scratch `elengtis/elengtis` image with the Docker socket
//! mounted, completing an isolated campaign from inside (stdio inside the trial
//! containers, so the runner needs no route to the internal networks).

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use elengtis_tests::{
    FixtureMcp, bundled_images, docker_api, docker_or_skip, fixture_image, fixture_target, rows, scratch,
    support_note_campaign, write,
};
use serde_json::json;

fn campaign(mcp: FixtureMcp) -> String {
    support_note_campaign(2, &[fixture_target("iso", &fixture_image(), mcp, 65534, &[])])
}

#[test]
fn the_tool_image_runs_an_isolated_campaign_through_a_mounted_socket() {
    if !docker_or_skip("the_tool_image_runs_an_isolated_campaign_through_a_mounted_socket") {
        return;
    }
    run_in_tool_image(&campaign(FixtureMcp::Stdio), &[]);
}

/// From inside a container the runner has no route to the trial networks: even with
/// `ELENGTIS_RELAY=auto` (direct where the runner can route) streamable HTTP goes through a
/// relay container and a loopback listener.
#[test]
fn the_tool_image_reaches_http_targets_through_the_relay() {
    if !docker_or_skip("the_tool_image_reaches_http_targets_through_the_relay") {
        return;
    }
    let dir = run_in_tool_image(&campaign(FixtureMcp::Http), &["ELENGTIS_RELAY=auto"]);
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    let evidence = elengtis_tests::read_json(&dir.path().join("out").join(rows[0]["evidence"].as_str().unwrap()));
    let relay = &evidence["target_execution"]["relay"];
    assert_eq!(relay["localhost_only"], true, "{}", evidence["target_execution"]);
    assert!(relay["hardening"].as_array().unwrap().iter().all(|f| f["ok"] == true), "{relay}");
}

fn run_in_tool_image(campaign: &str, env: &[&str]) -> tempfile::TempDir {
    bundled_images();
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("test setup");
    let version = env!("CARGO_PKG_VERSION");
    write(dir.path(), "campaign.yaml", campaign);
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let socket_gid = std::fs::metadata("/var/run/docker.sock").expect("test setup").gid();
    let body = json!({
        "Image": format!("elengtis/elengtis:{version}"),
        "User": "65534:65534",
        "Cmd": ["run", "--config", "/work/campaign.yaml", "--out", "/work/out"],
        // This project's CI engine is one the engine gate refuses (docs/security.md).
        "Env": env.iter().copied().chain(["ELENGTIS_ALLOW_VULNERABLE_ENGINE=1"]).collect::<Vec<_>>(),
        "WorkingDir": "/work",
        "Labels": {"org.elengtis.test": "mounted-socket"},
        "HostConfig": {
            "Binds": ["/var/run/docker.sock:/var/run/docker.sock", format!("{}:/work", dir.path().display())],
            "GroupAdd": [socket_gid.to_string()],
            "ReadonlyRootfs": true,
            "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m"},
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges:true"],
        }
    });
    let (status, created) = docker_api("POST", "/containers/create", Some(&body.to_string()));
    assert_eq!(status, 201, "{created}");
    let id = serde_json::from_str::<serde_json::Value>(&created).expect("test setup")["Id"]
        .as_str()
        .expect("test setup")
        .to_owned();
    let (status, started) = docker_api("POST", &format!("/containers/{id}/start"), None);
    let (_, waited) = docker_api("POST", &format!("/containers/{id}/wait"), None);
    let (_, logs) = docker_api("GET", &format!("/containers/{id}/logs?stdout=1&stderr=1"), None);
    let _ = docker_api("DELETE", &format!("/containers/{id}?force=1"), None);
    assert_eq!(status, 204, "{started}");
    let code = serde_json::from_str::<serde_json::Value>(&waited).expect("test setup")["StatusCode"].as_i64();
    let logs = String::from_utf8_lossy(logs.as_bytes()).replace(|c: char| c.is_control() && c != '\n', "");
    assert_eq!(code, Some(0), "the tool container failed:\n{logs}");
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 2, "{logs}");
    assert!(rows.iter().all(|r| r["evidence_status"] == "complete" && r["proposed"] == true), "{rows:?}");
    assert!(logs.contains("proposed: 2/2"), "{logs}");
    dir
}
