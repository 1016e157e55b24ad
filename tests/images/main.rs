//! Bundled images by content (issue 38, item 4): the images carry the content hash of the
//! executables they were made from, and every command that uses them compares it with the
//! executables beside the running `elengtis`, re-importing when they differ and saying so.
//!
//! A test binary of its own: it changes the bundled images of the shared engine on purpose
//! (and changes them back), which the Docker tests running in parallel in another binary must
//! not see half-way. `cargo test` runs test binaries one after the other.

use std::path::Path;

use elengtis_tests::{
    FixtureMcp, bin_dir, bundled_images, docker_api, docker_or_skip, fixture_image, fixture_target, scratch, stderr,
    stdout, support_note_campaign, write,
};

const BUNDLED: [&str; 7] = elengtis_tests::BUNDLED_EXECUTABLES;

fn sha256(path: &Path) -> String {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(std::fs::read(path).expect("read")).iter().map(|b| format!("{b:02x}")).collect()
}

/// The executables a bundled image records it was made from.
fn recorded(reference: &str) -> serde_json::Value {
    let (status, body) = docker_api("GET", &format!("/images/{reference}/json"), None);
    assert_eq!(status, 200, "{body}");
    let image: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let label = image["Config"]["Labels"]["org.elengtis.executables"].as_str().expect("the executables label");
    serde_json::from_str(label).expect("the label is JSON")
}

/// Run `exe` with `args` in `dir` as a user would (the engine gate accepts this machine's engine).
fn run(exe: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    let output = std::process::Command::new(exe)
        .current_dir(dir)
        .args(args)
        .env("ELENGTIS_ALLOW_VULNERABLE_ENGINE", "1")
        .env_remove("ELENGTIS_RUNTIME")
        .env_remove("ELENGTIS_RELAY")
        .output()
        .expect("run elengtis");
    assert_eq!(output.status.code(), Some(0), "{} {args:?}:\n{}{}", exe.display(), stdout(&output), stderr(&output));
    output
}

/// A rebuilt elengtis whose fixture changed re-imports the images on first use (`example
/// --isolated`), saying which executable differs, and its trial runs the new fixture; the next
/// command finds them current and imports nothing. Then the test's own build, run again on an
/// isolated campaign (`run`), finds them made from other executables than its own and
/// re-imports them back, saying so in the run's warnings.
#[test]
fn a_rebuilt_elengtis_with_a_changed_fixture_reimports_its_images_on_first_use() {
    if !docker_or_skip("a_rebuilt_elengtis_with_a_changed_fixture_reimports_its_images_on_first_use") {
        return;
    }
    bundled_images();
    let tag = env!("CARGO_PKG_VERSION");
    let dir = scratch();
    // "The rebuild": the same executables, the fixture with other bytes (a trailer an ELF
    // loader ignores, so it behaves the same).
    let rebuilt = dir.path().join("rebuilt");
    std::fs::create_dir(&rebuilt).expect("mkdir");
    for name in BUNDLED.iter().chain(&["elengtis-stdio-guard"]) {
        std::fs::copy(bin_dir().join(name), rebuilt.join(name)).expect("copy an executable");
    }
    let fixture = rebuilt.join("elengtis-fixture");
    let mut bytes = std::fs::read(&fixture).expect("read");
    bytes.extend_from_slice(b"\0elengtis test: a rebuilt fixture\0");
    std::fs::write(&fixture, bytes).expect("write");
    assert_ne!(recorded(&fixture_image())["elengtis-fixture"]["sha256"], sha256(&fixture).as_str());

    let started = std::time::Instant::now();
    let output = run(&rebuilt.join("elengtis"), dir.path(), &["example", "--isolated", "--out", "first"]);
    eprintln!("first use of the rebuilt elengtis (re-import and one trial): {:.1} s", started.elapsed().as_secs_f64());
    let err = stderr(&output);
    assert!(stdout(&output).contains("completed: 1/1"), "{}", stdout(&output));
    assert!(
        err.contains(&format!(
            "the bundled images in the Docker engine were made from other executables than those beside this elengtis (elengtis/fixture:{tag}: `elengtis-fixture` differs"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("importing them from the static executables beside this one, in {}", rebuilt.display())),
        "{err}"
    );
    assert!(err.contains(&format!("imported elengtis/fixture:{tag}")), "{err}");
    assert_eq!(recorded(&fixture_image())["elengtis-fixture"]["sha256"], sha256(&fixture).as_str());
    assert_eq!(recorded(&format!("elengtis/elengtis:{tag}"))["elengtis-fixture"]["sha256"], sha256(&fixture).as_str());

    let output = run(&rebuilt.join("elengtis"), dir.path(), &["example", "--isolated", "--out", "again"]);
    assert!(!stderr(&output).contains("made from other executables"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("imported"), "{}", stderr(&output));

    // The test's own build, on an isolated campaign: it re-imports its own, and says so.
    write(dir.path(), "support-note.yaml", include_str!("../../scenarios/bench/support-note.yaml"));
    let campaign = support_note_campaign(1, &[fixture_target("iso", &fixture_image(), FixtureMcp::Stdio, 10001, &[])]);
    write(dir.path(), "campaign.yaml", &campaign);
    let started = std::time::Instant::now();
    let output = run(&bin_dir().join("elengtis"), dir.path(), &["run", "--config", "campaign.yaml", "--out", "back"]);
    eprintln!("first use of the test's build (re-import and one trial): {:.1} s", started.elapsed().as_secs_f64());
    let err = stderr(&output);
    assert!(err.contains("made from other executables than those beside this elengtis"), "{err}");
    assert!(err.contains(&format!("from {}", bin_dir().display())), "{err}");
    assert_eq!(
        recorded(&fixture_image())["elengtis-fixture"]["sha256"],
        sha256(&bin_dir().join("elengtis-fixture")).as_str()
    );
}
