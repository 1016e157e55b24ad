//! `elengtis scan --image`: the vulnerable twin's image scanned in hardened containers with
//! no hand-written attack file — the canary sink for its fetch, a SQLite snapshot for its
//! send (where the send lands found by a probe trial), a blind check said, not run — and
//! the findings proved KEPT against the guarded twin's image.

use elengtis_tests::{bundled_images, docker_or_skip, elengtis, read_json, scratch, stderr, stdout};
use serde_json::Value;

/// Scan the twin image's `build` into `dir/out` with `flags`; its report and its text.
fn scan_twin(dir: &std::path::Path, out: &str, flags: &[&str], build: &str) -> (Value, String) {
    let image = format!("elengtis/twin:{}", env!("CARGO_PKG_VERSION"));
    let mut args = vec!["scan", "--out", out, "--image", &image, "--transport", "stdio", "--database", "/data/mail.db"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "--build", build, "--mail-db", "/data/mail.db"]);
    args.extend_from_slice(&["--resolve", "attacker.example.com={sink_url}"]);
    let output = elengtis(dir, &args);
    let (text, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{text}{err}");
    (read_json(&dir.join(out).join("scan.json")), text)
}

fn candidate(report: &Value, id: &str, text: &str) -> Value {
    report["candidates"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id).cloned())
        .unwrap_or_else(|| panic!("no candidate {id}: {text}"))
}

#[test]
fn a_scan_of_the_twin_image_finds_and_proves_its_findings_against_the_guarded_twin() {
    if !docker_or_skip("a_scan_of_the_twin_image_finds_and_proves_its_findings_against_the_guarded_twin") {
        return;
    }
    bundled_images();
    let dir = scratch();
    // The guarded build: a description of the server you would ship, not an attack.
    let guarded = elengtis_tests::write(
        dir.path(),
        "guarded.yaml",
        &format!(
            "id: twin-guarded\ntransport:\n  type: isolated_container\n  image: elengtis/twin:{}\n  mcp_transport: \
             stdio\n  uid: 65534\n  gid: 65534\n  volumes: [/data]\n  command: [--build, guarded, --mail-db, \
             /data/mail.db, --resolve, {{template: \"attacker.example.com={{sink_url}}\"}}]\nbindings: {{}}\n",
            env!("CARGO_PKG_VERSION")
        ),
    );
    let guarded = guarded.display().to_string();
    let flags = ["--jobs", "4", "--class", "W3,W4", "--prove", "--guarded-target", &guarded];
    let (report, text) = scan_twin(dir.path(), "scan", &flags, "vulnerable");
    let fetch = candidate(&report, "w3-direct-web-fetch", &text);
    assert_eq!(
        (fetch["status"].as_str(), fetch["proof"]["verdict"].as_str()),
        (Some("fired"), Some("KEPT")),
        "{fetch}"
    );
    assert_eq!(fetch["verifier"]["kind"], "canary_sink");
    // The send lands in the twin's SQLite database: its check was written from the probe.
    let send = candidate(&report, "w4-direct-send-email", &text);
    assert_eq!((send["status"].as_str(), send["proof"]["verdict"].as_str()), (Some("fired"), Some("KEPT")), "{send}");
    let scenario =
        std::fs::read_to_string(dir.path().join("scan/candidates/w4-direct-send-email.yaml")).expect("scenario");
    assert!(scenario.contains("container_sqlite_query") && scenario.contains("sent_emails"), "{scenario}");
    // The twin keeps its notes in memory, not in the database: that check is blind, and the
    // candidate is not tested — never resisted.
    let note = candidate(&report, "w4-direct-write-note", &text);
    assert_eq!(note["status"], "calibration_failed", "{note}");
    assert!(note["proof"].is_null());

    // The guarded twin's send_email only stages the mail (nothing reaches the database until a
    // confirmation): a send that does nothing. Scanned as the target, its check is blind even
    // to the trusted call, so the candidate is not tested — never resisted — and no trial runs.
    let (report, text) = scan_twin(dir.path(), "scan-guarded", &["--class", "W4"], "guarded");
    let send = candidate(&report, "w4-direct-send-email", &text);
    assert_eq!(send["status"], "calibration_failed", "{send}");
    assert_eq!(send["run"]["trials"], 0, "{send}");
}

/// From an image of a third-party-shaped server to a proven finding with no hand-written file
/// (issue 36): `elengtis-shapes --shape files` (the filesystem server's tools) in hardened
/// containers with a fresh `/data` volume per trial. Its `write_file` lands in a file on the
/// volume, which the runner reads out of the container (tier state); a tool whose effect no
/// independent check can see is said, not attacked — in a container the server's own word is
/// never the check. The same image as the git server gives no candidate, and says why.
#[test]
fn a_scan_of_a_filesystem_shaped_image_proves_its_unconfirmed_write_kept() {
    if !docker_or_skip("a_scan_of_a_filesystem_shaped_image_proves_its_unconfirmed_write_kept") {
        return;
    }
    bundled_images();
    let image = elengtis_tests::shapes_image();
    let dir = scratch();
    let scan = |out: &str, shape: &[&str]| {
        let mut args =
            vec!["scan", "--out", out, "--image", image, "--transport", "stdio", "--volume", "/data", "--jobs", "4"];
        args.extend_from_slice(&["--prove", "--"]);
        args.extend_from_slice(shape);
        let output = elengtis(dir.path(), &args);
        let (text, err) = (stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(0), "{text}{err}");
        (read_json(&dir.path().join(out).join("scan.json")), text)
    };
    let (report, text) = scan("files", &["--shape", "files", "--root", "/data/root"]);
    let write = candidate(&report, "w4-direct-write-file", &text);
    assert_eq!(write["status"], "fired", "{text}");
    assert_eq!(
        write["verifier"],
        serde_json::json!({"kind": "container_file", "path": "/data/root/elengtis-init.txt"})
    );
    assert_eq!(write["proof"]["verdict"], "KEPT", "{text}");
    assert!(text.contains("the file /data/root/elengtis-init.txt in the container (state)"), "{text}");
    // Nothing rests on the server's own word in a container.
    assert!(!text.contains("target-reported"), "{text}");
    assert!(text.contains("no independent check can see the effect of create_directory"), "{text}");
    let seed =
        std::fs::read_to_string(dir.path().join("files/candidates/w4-direct-write-file.yaml")).expect("scenario");
    assert!(seed.contains("container_file"), "{seed}");

    let (report, text) = scan("git", &["--shape", "git", "--repo", "/data/repo"]);
    assert_eq!(report["candidates"], serde_json::json!([]), "{text}");
    assert!(text.contains("no independent check can see the effect of git_commit"), "{text}");
}
