//! The tool as CI runs it: the FROM-scratch `elengtis/elengtis` image with the Docker socket
//! mounted, completing an isolated campaign from inside (stdio inside the trial
//! containers, so the runner needs no route to the internal networks).

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use elengtis_tests::{bundled_images, docker_api, docker_or_skip, rows, scratch, write};
use serde_json::json;

const CAMPAIGN: &str = r#"
schema_version: 1
trials: 2
targets:
  - id: iso-stdio
    transport:
      type: isolated_container
      image: elengtis/fixture:VERSION
      mcp_transport: stdio
      uid: 65534
      gid: 65534
      command: [--collector, /tmp/c.jsonl, --credential, {runner: canary}]
    bindings:
      support-note: {read_note: read_note, read_credential: read_demo_credential, submit_credential: submit_demo_credential}
scenarios: [support-note.yaml]
"#;

#[test]
fn the_tool_image_runs_an_isolated_campaign_through_a_mounted_socket() {
    if !docker_or_skip("the_tool_image_runs_an_isolated_campaign_through_a_mounted_socket") {
        return;
    }
    bundled_images();
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    write(dir.path(), "campaign.yaml", &CAMPAIGN.replace("VERSION", version));
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let socket_gid = std::fs::metadata("/var/run/docker.sock").unwrap().gid();
    let body = json!({
        "Image": format!("elengtis/elengtis:{version}"),
        "User": "65534:65534",
        "Cmd": ["run", "--config", "/work/campaign.yaml", "--out", "/work/out"],
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
    let id = serde_json::from_str::<serde_json::Value>(&created).unwrap()["Id"].as_str().unwrap().to_owned();
    let (status, started) = docker_api("POST", &format!("/containers/{id}/start"), None);
    let (_, waited) = docker_api("POST", &format!("/containers/{id}/wait"), None);
    let (_, logs) = docker_api("GET", &format!("/containers/{id}/logs?stdout=1&stderr=1"), None);
    let _ = docker_api("DELETE", &format!("/containers/{id}?force=1"), None);
    assert_eq!(status, 204, "{started}");
    let code = serde_json::from_str::<serde_json::Value>(&waited).unwrap()["StatusCode"].as_i64();
    let logs = String::from_utf8_lossy(logs.as_bytes()).replace(|c: char| c.is_control() && c != '\n', "");
    assert_eq!(code, Some(0), "the tool container failed:\n{logs}");
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 2, "{logs}");
    assert!(rows.iter().all(|r| r["evidence_status"] == "complete" && r["proposed"] == true), "{rows:?}");
    assert!(logs.contains("proposed: 2/2"), "{logs}");
}
