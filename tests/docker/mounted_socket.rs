//! The tool as CI runs it: the FROM-scratch `elengtis/elengtis` image with the Docker socket
//! mounted, completing an isolated campaign from inside (stdio inside the trial
//! containers, so the runner needs no route to the internal networks).

use std::fmt::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use elengtis_tests::{
    FixtureMcp, bundled_images, docker_api, docker_api_within, docker_or_skip, fixture_image, fixture_target, rows,
    scratch, support_note_campaign, write,
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
    write(dir.path(), "campaign.yaml", campaign);
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    // Relative paths: the image's working directory is /work.
    let (code, logs) =
        tool_container(&["run", "--config", "campaign.yaml", "--out", "out"], env, true, Some(dir.path()));
    assert_eq!(code, Some(0), "the tool container failed:\n{logs}");
    let rows = rows(&dir.path().join("out/runs.jsonl"));
    assert_eq!(rows.len(), 2, "{logs}");
    assert!(rows.iter().all(|r| r["evidence_status"] == "complete" && r["proposed"] == true), "{rows:?}");
    assert!(logs.contains("proposed: 2/2"), "{logs}");
    dir
}

/// Without the socket's group the tool says who it runs as, who owns the socket, and the
/// `--group-add` that fixes it (instead of a bare "permission denied").
#[test]
fn the_tool_image_without_the_socket_group_names_the_fix() {
    if !docker_or_skip("the_tool_image_without_the_socket_group_names_the_fix") {
        return;
    }
    bundled_images();
    let socket_gid = std::fs::metadata("/var/run/docker.sock").expect("test setup").gid();
    let (code, logs) = tool_container(&["images", "build"], &[], false, None);
    assert_ne!(code, Some(0), "{logs}");
    assert!(logs.contains("permission denied on the socket /var/run/docker.sock"), "{logs}");
    assert!(logs.contains("runs as uid 65534 gid 65534"), "{logs}");
    assert!(logs.contains(&format!("--group-add {socket_gid}")), "{logs}");
}

/// `images build` inside the tool image (no source tree there) imports the bundled images
/// from the static executables the image carries; they are the very executables the host
/// imported, so every image is found unchanged.
#[test]
fn images_build_inside_the_tool_image_uses_its_bundled_executables() {
    if !docker_or_skip("images_build_inside_the_tool_image_uses_its_bundled_executables") {
        return;
    }
    bundled_images();
    let (code, logs) = tool_container(&["images", "build", "--json"], &[], true, None);
    assert_eq!(code, Some(0), "{logs}");
    assert!(logs.contains("importing the bundled images from the static executables in /"), "{logs}");
    let json_line = logs.lines().find(|l| l.contains("\"images\"")).expect("the JSON line");
    let json: serde_json::Value = serde_json::from_str(&json_line[json_line.find('{').expect("JSON")..]).expect("JSON");
    let images = json["images"].as_array().expect("images");
    assert_eq!(images.len(), BUNDLED.len(), "{json}");
    for image in images {
        let reference = image["reference"].as_str().expect("reference");
        let (status, inspected) = docker_api("GET", &format!("/images/{reference}/json"), None);
        assert_eq!(status, 200, "{inspected}");
        let host: serde_json::Value = serde_json::from_str(&inspected).expect("JSON");
        assert_eq!(image["id"], host["Id"], "{reference}");
        assert_eq!(image["unchanged"], true, "{image}");
    }
}

/// A stand-in `cargo` in `dir` that records how it was called (its arguments and RUSTFLAGS, to
/// `dir/cargo.log`) and reports the bundled executables in `built` as its artifacts, as the
/// real static build does, without compiling anything.
fn fake_cargo(dir: &std::path::Path, built: &std::path::Path) -> std::path::PathBuf {
    let log = dir.join("cargo.log");
    let mut fake = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" \"RUSTFLAGS=$RUSTFLAGS\" >> '{}'\necho 'not JSON: cargo also prints other lines'\n",
        log.display()
    );
    // Two units that are not executables, as in a real build: progress counts every unit.
    for name in ["libc", "tokio"] {
        let message =
            json!({"reason": "compiler-artifact", "target": {"kind": ["lib"], "name": name}, "executable": null});
        let _ = writeln!(fake, "echo '{message}'");
    }
    for name in BUNDLED {
        let message = json!({"reason": "compiler-artifact", "target": {"kind": ["bin"], "name": name},
            "executable": built.join(name)});
        let _ = writeln!(fake, "echo '{message}'");
    }
    let cargo = dir.join("cargo");
    std::fs::write(&cargo, fake).expect("test setup");
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).expect("test setup");
    cargo
}

const BUNDLED: [&str; 7] = elengtis_tests::BUNDLED_EXECUTABLES;

/// Where `bundled_images` took the executables from: this static test build's own, or the image
/// profile's output of a real static build.
fn built_executables() -> std::path::PathBuf {
    if cfg!(target_feature = "crt-static") {
        elengtis_tests::bin_dir().to_path_buf()
    } else {
        elengtis_tests::bin_dir().parent().expect("target dir").join("x86_64-unknown-linux-gnu/image")
    }
}

/// `images build --source` runs cargo's static build (`--profile image`, the explicit target,
/// `crt-static`, `--quiet` under its own progress) and imports the executables cargo's artifact
/// messages name. Cargo here is a stand-in that records how it was called and reports the
/// executables the bundled images were already imported from, so every image is found
/// unchanged without a second compile of the workspace.
#[test]
fn images_build_from_the_source_tree_imports_what_the_static_build_reports() {
    if !docker_or_skip("images_build_from_the_source_tree_imports_what_the_static_build_reports") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let cargo = fake_cargo(dir.path(), &built_executables());
    let workspace = elengtis_tests::workspace();
    let source = workspace.to_str().expect("UTF-8");
    let out = elengtis_tests::elengtis_cmd(&workspace, &["images", "build", "--source", source, "--json"])
        .env("CARGO", &cargo)
        .output()
        .expect("elengtis");
    assert!(out.status.success(), "{}", elengtis_tests::stderr(&out));
    let called = std::fs::read_to_string(dir.path().join("cargo.log")).expect("the stand-in cargo ran");
    assert!(called.contains("build --locked --quiet --profile image --target x86_64-unknown-linux-gnu"), "{called}");
    assert!(called.contains("-p elengtis-twin"), "{called}");
    assert!(called.contains("RUSTFLAGS=-C target-feature=+crt-static"), "{called}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let images = json["images"].as_array().expect("images");
    assert_eq!(images.len(), BUNDLED.len(), "{json}");
    assert!(images.iter().all(|i| i["unchanged"] == true), "{json}");
}

/// Issue 29, item 1: after the README's build (static by default), the bundled images come from
/// the executables beside `elengtis`, without compiling anything: `cargo` is a stand-in that
/// would record any call.
#[test]
fn images_build_takes_the_static_executables_beside_elengtis_without_compiling() {
    if !docker_or_skip("images_build_takes_the_static_executables_beside_elengtis_without_compiling") {
        return;
    }
    // The test build is static (.cargo/config.toml), as the README's release build is.
    let beside = elengtis_tests::bin_dir();
    if let Err(why) = elengtis::sandbox::docker::images::check_executables(beside) {
        panic!("the test build's executables cannot make the images ({why}); is .cargo/config.toml in effect?");
    }
    bundled_images();
    let dir = scratch();
    let cargo = fake_cargo(dir.path(), &built_executables());
    let out = elengtis_tests::elengtis_cmd(dir.path(), &["images", "build", "--json"])
        .env("CARGO", &cargo)
        .output()
        .expect("elengtis");
    let err = elengtis_tests::stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!dir.path().join("cargo.log").exists(), "images build compiled:\n{err}");
    let beside = beside.display();
    assert!(err.contains(&format!("importing the bundled images from the static executables in {beside}")), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["images"].as_array().expect("images").len(), BUNDLED.len(), "{json}");
}

/// Issue 29, item 1: an `elengtis` without its sibling executables (an installed copy) that has
/// to compile them says so before it starts — what, why (the missing executable), and how long
/// a cold build takes — and the second time how long the last build took; cargo runs `--quiet`
/// under elengtis's own progress. Cargo is a stand-in reporting the already-built executables
/// under a target directory of the test's own (`CARGO_TARGET_DIR`), where the build's duration
/// is recorded.
#[test]
fn a_compile_of_the_images_executables_is_announced_with_its_reason_and_last_duration() {
    if !docker_or_skip("a_compile_of_the_images_executables_is_announced_with_its_reason_and_last_duration") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let target = dir.path().join("target");
    let image_dir = target.join("x86_64-unknown-linux-gnu/image");
    std::fs::create_dir_all(&image_dir).expect("test setup");
    for name in BUNDLED {
        std::os::unix::fs::symlink(built_executables().join(name), image_dir.join(name)).expect("test setup");
    }
    let cargo = fake_cargo(dir.path(), &image_dir);
    // elengtis alone in a directory: its siblings are missing, the source tree it was built from
    // is still there.
    let lonely = dir.path().join("bin");
    std::fs::create_dir(&lonely).expect("test setup");
    let exe = lonely.join("elengtis");
    if std::fs::hard_link(elengtis_tests::bin("elengtis"), &exe).is_err() {
        std::fs::copy(elengtis_tests::bin("elengtis"), &exe).expect("test setup");
    }
    let build = || {
        let out = std::process::Command::new(&exe)
            .args(["images", "build", "--json"])
            .current_dir(dir.path())
            .env("CARGO", &cargo)
            .env("CARGO_TARGET_DIR", &target)
            .env("ELENGTIS_ALLOW_VULNERABLE_ENGINE", "1")
            .output()
            .expect("elengtis");
        let err = elengtis_tests::stderr(&out);
        assert!(out.status.success(), "{err}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert!(json["images"].as_array().expect("images").iter().all(|i| i["unchanged"] == true), "{json}");
        err
    };
    let first = build();
    let missing = format!("beside this executable `{}` is missing", lonely.join("elengtis-fixture").display());
    assert!(first.contains(&missing), "{first}");
    assert!(first.contains("Compiling them now"), "{first}");
    assert!(first.contains(&format!("from the source tree {}", elengtis_tests::workspace().display())), "{first}");
    assert!(first.contains("no such build has run here yet: from cold it takes about"), "{first}");
    assert!(first.contains("compiled the images' executables in"), "{first}");
    let called = std::fs::read_to_string(dir.path().join("cargo.log")).expect("the stand-in cargo ran");
    assert!(called.contains("--quiet"), "{called}");
    // Its duration is recorded beside the executables, and the next compile announces it.
    assert!(image_dir.join("elengtis-static-build.json").is_file());
    let second = build();
    assert!(second.contains("the last such build here took"), "{second}");
    // One unit per bundled executable and the stand-in's two libraries.
    let units = format!("({} units)", BUNDLED.len() + 2);
    assert!(second.contains(&units), "{second}");
}

/// Issue 29, item 5: the README's `docker run` line, run as written in a checkout the invoking
/// user owns (mode 0755, as a clone is): the tool in its image, the Docker socket mounted,
/// creates `results/ci` in the mounted checkout and completes the campaign. Only the engine
/// gate's acceptance is added, as in every test here (this machine's engine is one the gate
/// refuses). Its results belong to the invoking user.
#[test]
fn the_readme_docker_run_line_works_as_written() {
    if !docker_or_skip("the_readme_docker_run_line_works_as_written") {
        return;
    }
    bundled_images();
    let readme = std::fs::read_to_string(elengtis_tests::workspace().join("README.md")).expect("README");
    let start = readme.find("docker run --rm --user").expect("the README's docker run line");
    let end = start + readme[start..].find("\n```").expect("the end of its block");
    let line = &readme[start..end];
    assert!(line.contains("run --config campaign.yaml --out results/ci"), "{line}");
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("test setup");
    write(dir.path(), "campaign.yaml", &campaign(FixtureMcp::Stdio));
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let script = line.replace("docker run --rm", "docker run --rm -e ELENGTIS_ALLOW_VULNERABLE_ENGINE=1");
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .output()
        .expect("bash");
    let logs = format!("{}{}", elengtis_tests::stdout(&out), elengtis_tests::stderr(&out));
    assert!(out.status.success(), "the README's docker run line failed ({:?}):\n{line}\n{logs}", out.status.code());
    let results = dir.path().join("results/ci");
    let rows = rows(&results.join("runs.jsonl"));
    assert_eq!(rows.len(), 2, "{logs}");
    assert!(rows.iter().all(|r| r["evidence_status"] == "complete"), "{rows:?}");
    let owner = std::fs::metadata(dir.path()).expect("test setup").uid();
    assert_eq!(std::fs::metadata(&results).expect("results").uid(), owner, "the results belong to the user");
}

/// Issue 29, item 5: the tool image as its own user (uid 65534) in a checkout it cannot write:
/// exit 4, and the error names the uid, the directory's owner and mode, and the fix, as the
/// socket's error does.
#[test]
fn the_tool_image_that_cannot_create_the_out_dir_names_its_uid_and_the_fix() {
    if !docker_or_skip("the_tool_image_that_cannot_create_the_out_dir_names_its_uid_and_the_fix") {
        return;
    }
    bundled_images();
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("test setup");
    let owner = std::fs::metadata(dir.path()).expect("test setup");
    assert_ne!(owner.uid(), 65534, "the scratch directory must not belong to uid 65534");
    write(dir.path(), "campaign.yaml", &campaign(FixtureMcp::Stdio));
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let (code, logs) =
        tool_container(&["run", "--config", "campaign.yaml", "--out", "results/ci"], &[], true, Some(dir.path()));
    assert_eq!(code, Some(4), "{logs}");
    assert!(logs.contains("Permission denied"), "{logs}");
    assert!(logs.contains("this process runs as uid 65534 gid 65534"), "{logs}");
    assert!(
        logs.contains(&format!("/work is owned by uid {} gid {} with mode 0755", owner.uid(), owner.gid())),
        "{logs}"
    );
    assert!(logs.contains(r#"docker run --user "$(id -u):$(id -g)""#), "{logs}");
}

/// Runs the tool image hardened as the CI recipes do, with the Docker socket mounted (and its
/// group added when `group_add`), `work` bound at /work; returns the exit code and the logs.
fn tool_container(
    cmd: &[&str],
    env: &[&str],
    group_add: bool,
    work: Option<&std::path::Path>,
) -> (Option<i64>, String) {
    let version = env!("CARGO_PKG_VERSION");
    let socket_gid = std::fs::metadata("/var/run/docker.sock").expect("test setup").gid();
    let mut binds = vec!["/var/run/docker.sock:/var/run/docker.sock".to_owned()];
    binds.extend(work.map(|dir| format!("{}:/work", dir.display())));
    let body = json!({
        "Image": format!("elengtis/elengtis:{version}"),
        "User": "65534:65534",
        "Cmd": cmd,
        // This project's CI engine is one the engine gate refuses (docs/security.md).
        "Env": env.iter().copied().chain(["ELENGTIS_ALLOW_VULNERABLE_ENGINE=1"]).collect::<Vec<_>>(),
        "Labels": {"org.elengtis.test": "mounted-socket"},
        "HostConfig": {
            "Binds": binds,
            "GroupAdd": if group_add { vec![socket_gid.to_string()] } else { Vec::new() },
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
    let (_, waited) =
        docker_api_within("POST", &format!("/containers/{id}/wait"), None, std::time::Duration::from_secs(600));
    let (_, logs) = docker_api("GET", &format!("/containers/{id}/logs?stdout=1&stderr=1"), None);
    let _ = docker_api("DELETE", &format!("/containers/{id}?force=1"), None);
    assert_eq!(status, 204, "{started}");
    let code = serde_json::from_str::<serde_json::Value>(&waited).expect("test setup")["StatusCode"].as_i64();
    let logs = String::from_utf8_lossy(logs.as_bytes()).replace(|c: char| c.is_control() && c != '\n', "");
    (code, logs)
}
