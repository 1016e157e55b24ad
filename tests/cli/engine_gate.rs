//! The engine gate against a fake Docker engine (`DOCKER_HOST=unix://…`): a vulnerable
//! engine is refused by every command that starts isolated trials, naming each CVE, the
//! component, the version found and the fixed versions, before anything is created; the
//! override passes it (with one warning); a patched engine passes it silently.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use elengtis_tests::fake_engine::{Behaviour, FakeEngine, debian_bookworm_version, patched_version};
use elengtis_tests::{
    ChildGuard, FixtureMcp, elengtis_cmd, fixture_target, scratch, stderr, support_note_campaign, write,
};

const ALLOW: &str = "ELENGTIS_ALLOW_VULNERABLE_ENGINE";
const UNAVAILABLE: i32 = 5;
const IMAGE: &str = "elengtis/never-present:gate-test";

fn campaign(dir: &Path) {
    write(dir, "support-note.yaml", include_str!("../../scenarios/bench/support-note.yaml"));
    write(
        dir,
        "campaign.yaml",
        &support_note_campaign(1, &[fixture_target("iso", IMAGE, FixtureMcp::Stdio, 10001, &[])]),
    );
}

/// Run `elengtis` against `engine` with `ELENGTIS_ALLOW_VULNERABLE_ENGINE` removed (or set to
/// `allow_env`), bounded in time.
fn run_against(engine: &FakeEngine, dir: &Path, args: &[&str], allow_env: Option<&str>) -> Output {
    let mut cmd = elengtis_cmd(dir, args);
    cmd.env_remove(ALLOW).env_remove("ELENGTIS_RELAY").env("DOCKER_HOST", engine.docker_host());
    if let Some(value) = allow_env {
        cmd.env(ALLOW, value);
    }
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("failed to run elengtis");
    ChildGuard::new(child).wait_output(Duration::from_secs(90))
}

const FINDINGS: [&str; 6] = [
    "CVE-2024-29018 in Docker engine 20.10.24+dfsg1, fixed in 23.0.11, 25.0.5, 26.0.0-rc3: egress from an internal network",
    "CVE-2025-31133 in runc 1.1.5+ds1 (1.1.5+ds1-1+deb12u1), fixed in 1.2.8, 1.3.3, 1.4.0-rc.3: container escape",
    "CVE-2025-52565 in runc 1.1.5+ds1 (1.1.5+ds1-1+deb12u1), fixed in 1.2.8, 1.3.3, 1.4.0-rc.3",
    "CVE-2025-52881 in runc 1.1.5+ds1 (1.1.5+ds1-1+deb12u1), fixed in 1.2.8, 1.3.3, 1.4.0-rc.3",
    "--allow-vulnerable-engine",
    "ELENGTIS_ALLOW_VULNERABLE_ENGINE=1",
];

fn assert_refused(case: &str, out: &Output, engine: &FakeEngine) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
    assert!(err.contains("failed to pass the engine gate"), "{case}: {err}");
    for needle in FINDINGS {
        assert!(err.contains(needle), "{case}: {needle:?} missing from:\n{err}");
    }
    // Debian's runc 1.1.5+ds1-1+deb12u1 carries the fix for CVE-2024-21626.
    assert!(!err.contains("CVE-2024-21626"), "{case}: {err}");
    assert!(!err.contains("WARNING"), "{case}: {err}");
    // Nothing was looked up, created or changed: only ping, version and info were read.
    assert_eq!(engine.other_requests(), Vec::<String>::new(), "{case}");
    assert!(engine.requests().contains(&"GET /version".to_owned()), "{case}: {:?}", engine.requests());
}

/// Past the gate: the next call is the image lookup, which the fake engine answers 404.
fn assert_passed(case: &str, out: &Output, engine: &FakeEngine, warned: bool) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
    assert!(!err.contains("failed to pass the engine gate"), "{case}: {err}");
    assert!(err.contains(&format!("failed to find image `{IMAGE}`")), "{case}: {err}");
    let image_lookup = format!("GET /images/{IMAGE}/json");
    assert_eq!(engine.other_requests(), [image_lookup], "{case}");
    let warnings = err.matches("WARNING: running isolated trials on a Docker engine with known").count();
    assert_eq!(warnings, usize::from(warned), "{case}: {err}");
    if warned {
        assert!(err.contains("(CVE-2024-29018, CVE-2025-31133, CVE-2025-52565, CVE-2025-52881)"), "{case}: {err}");
    }
}

/// The lines of the engine gate's warning in `err`: its `WARNING:` line and the indented lines
/// after it.
fn gate_warning_lines(err: &str) -> Vec<&str> {
    let mut lines = err.lines().skip_while(|l| !l.starts_with("WARNING: running isolated trials on a Docker engine"));
    let Some(first) = lines.next() else { return Vec::new() };
    std::iter::once(first).chain(lines.take_while(|l| l.starts_with(' '))).collect()
}

/// An engine accepted despite its findings is said once per command, in two lines — what
/// (the findings' ids, the override) and where the full list is (docs/security.md, the run's
/// manifest) — by `init`, `preflight` and `run` alike, and in one line under `run --quiet`.
#[test]
fn the_accepted_engine_warning_is_two_lines_once_per_command_and_one_line_when_quiet() {
    let ids = "(CVE-2024-29018, CVE-2025-31133, CVE-2025-52565, CVE-2025-52881)";
    let cases: [(&str, &[&str], usize); 4] = [
        ("init", &["init", "--out", "skeleton", "--image", IMAGE, "--transport", "stdio"], 2),
        ("preflight", &["preflight", "campaign.yaml"], 2),
        ("run", &["run", "--config", "campaign.yaml", "--out", "out"], 2),
        ("run --quiet", &["run", "--config", "campaign.yaml", "--out", "out", "--quiet"], 1),
    ];
    for (case, args, want) in cases {
        let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
        campaign(dir.path());
        let out = run_against(&engine, dir.path(), args, Some("1"));
        let err = stderr(&out);
        // Past the gate: the fake engine does not have the image.
        assert!(err.contains(&format!("failed to find image `{IMAGE}`")), "{case}: {err}");
        assert_eq!(err.matches("WARNING: running isolated trials").count(), 1, "{case}: said once:\n{err}");
        let lines = gate_warning_lines(&err);
        assert_eq!(lines.len(), want, "{case}: {lines:#?}");
        assert!(lines[0].contains(ids) && lines[0].contains("--allow-vulnerable-engine"), "{case}: {}", lines[0]);
        assert!(!err.contains("fixed in"), "{case}: the details are not printed:\n{err}");
        if want == 2 {
            assert!(
                lines[1].contains("docs/security.md, \"Engine gate\"") && lines[1].contains("manifest.json"),
                "{case}: {}",
                lines[1]
            );
        }
    }
}

/// One command against its own fake engine, run in a thread.
type Case = Box<dyn FnOnce() + Send>;

#[test]
fn a_vulnerable_engine_is_refused_before_anything_is_created_unless_allowed() {
    let cases: Vec<(&str, Case)> = vec![
        (
            "run",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                campaign(dir.path());
                let out = run_against(&engine, dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], None);
                assert_refused("run", &out, &engine);
                assert!(!dir.path().join("out").exists(), "run: the results directory was created");
            }),
        ),
        (
            "preflight",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                campaign(dir.path());
                let out = run_against(&engine, dir.path(), &["preflight", "campaign.yaml"], None);
                assert_refused("preflight", &out, &engine);
            }),
        ),
        (
            "example --isolated",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                let out = run_against(&engine, dir.path(), &["example", "--isolated", "--out", "iso"], None);
                // Refused before the bundled images are built or anything is written.
                assert_refused("example --isolated", &out, &engine);
                assert!(!dir.path().join("iso").exists(), "example: the results directory was created");
            }),
        ),
        (
            "bench",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                let out = run_against(&engine, dir.path(), &["bench", "--short"], None);
                assert_refused("bench", &out, &engine);
            }),
        ),
        (
            "run with ELENGTIS_ALLOW_VULNERABLE_ENGINE=0",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                campaign(dir.path());
                let out =
                    run_against(&engine, dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], Some("0"));
                assert_refused("run with the variable set to 0", &out, &engine);
            }),
        ),
        (
            "run --allow-vulnerable-engine",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                campaign(dir.path());
                let args = ["run", "--config", "campaign.yaml", "--out", "out", "--allow-vulnerable-engine"];
                let out = run_against(&engine, dir.path(), &args, None);
                assert_passed("run --allow-vulnerable-engine", &out, &engine, true);
            }),
        ),
        (
            "preflight with ELENGTIS_ALLOW_VULNERABLE_ENGINE=1",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(debian_bookworm_version())), scratch());
                campaign(dir.path());
                let out = run_against(&engine, dir.path(), &["preflight", "campaign.yaml"], Some("1"));
                assert_passed("preflight with the variable", &out, &engine, true);
            }),
        ),
        (
            "run on a patched engine",
            Box::new(|| {
                let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
                campaign(dir.path());
                let out = run_against(&engine, dir.path(), &["run", "--config", "campaign.yaml", "--out", "out"], None);
                assert_passed("patched engine", &out, &engine, false);
            }),
        ),
    ];
    let handles: Vec<_> = cases.into_iter().map(|(name, case)| (name, std::thread::spawn(case))).collect();
    let failed: Vec<&str> = handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect();
    assert!(failed.is_empty(), "failed cases: {failed:?}");
}

/// A runtime the engine does not list (`--runtime`, `ELENGTIS_RUNTIME` or the campaign's
/// `runtime:`) is refused before anything is looked up or created, naming the runtimes the
/// engine lists and the registration recipe; a malformed name is a usage error (flag) or an
/// invalid campaign (field), found before the engine is contacted.
#[test]
fn an_unlisted_runtime_is_refused_with_the_registration_recipe() {
    let refused = |case: &str, out: &Output, engine: &FakeEngine, dir: &Path| {
        let err = stderr(out);
        assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
        assert!(err.contains("does not list the runtime `runsc` (it lists `runc`)"), "{case}: {err}");
        assert!(err.contains("daemon.json") && err.contains("--network=host") && err.contains("HUP"), "{case}: {err}");
        assert_eq!(engine.other_requests(), Vec::<String>::new(), "{case}");
        assert!(!dir.join("out").exists(), "{case}: no results directory");
    };
    let args = ["run", "--config", "campaign.yaml", "--out", "out"];
    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    campaign(dir.path());
    let flag: Vec<&str> = args.iter().copied().chain(["--runtime", "runsc"]).collect();
    refused("--runtime", &run_against(&engine, dir.path(), &flag, None), &engine, dir.path());

    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    campaign(dir.path());
    let mut cmd = elengtis_cmd(dir.path(), &args);
    cmd.env_remove(ALLOW).env("DOCKER_HOST", engine.docker_host()).env("ELENGTIS_RUNTIME", "runsc");
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("failed to run elengtis");
    refused("ELENGTIS_RUNTIME", &ChildGuard::new(child).wait_output(Duration::from_secs(90)), &engine, dir.path());

    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    campaign(dir.path());
    let text = std::fs::read_to_string(dir.path().join("campaign.yaml")).expect("campaign");
    let with_field = text.replacen("type: isolated_container", "type: isolated_container\n      runtime: runsc", 1);
    assert_ne!(with_field, text, "the campaign names an isolated_container target");
    write(dir.path(), "campaign.yaml", &with_field);
    refused("runtime: runsc", &run_against(&engine, dir.path(), &args, None), &engine, dir.path());

    // Malformed names never reach the engine.
    let (engine, dir) = (FakeEngine::start(Behaviour::Answer(patched_version())), scratch());
    campaign(dir.path());
    let bad: Vec<&str> = args.iter().copied().chain(["--runtime", "run sc;"]).collect();
    let out = run_against(&engine, dir.path(), &bad, None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("expected the name of a runtime registered with the engine"), "{}", stderr(&out));
    write(dir.path(), "campaign.yaml", &with_field.replace("runtime: runsc", "runtime: \"../runsc\""));
    let out = run_against(&engine, dir.path(), &args, None);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("runtime"), "{}", stderr(&out));
    assert!(engine.requests().is_empty(), "{:?}", engine.requests());
}

/// gVisor registered the default way (no `--network=host`: its own network stack, under which
/// every trial fails at start) is refused before anything is looked up or created, with the
/// registration that works, by every command that starts trials — `run` (flag and campaign
/// field), `prove`, `gate`, `bench`, `example --isolated` — and as the engine's default
/// runtime too; registered with `--network=host` it passes the check (the next call is the
/// image lookup).
#[test]
fn gvisor_registered_without_host_networking_is_refused_before_any_trial_with_the_fix() {
    let info = |default: &str, runsc: serde_json::Value| {
        serde_json::json!({"ID": "fake", "OperatingSystem": "fake engine", "DefaultRuntime": default,
                           "Runtimes": {"runc": {"path": "runc"}, "runsc": runsc}, "SecurityOptions": []})
    };
    let default_registration = serde_json::json!({"path": "/usr/bin/runsc"});
    let seed = elengtis_tests::workspace().join("scenarios/seeds/w2-note-body-direct.seed.yaml");
    let gate_file = elengtis_tests::workspace().join("scenarios/gate/gate.yaml");
    let seeds = elengtis_tests::workspace().join("scenarios/seeds");
    let (seed, gate_file, seeds) = (seed.to_str().unwrap(), gate_file.to_str().unwrap(), seeds.to_str().unwrap());
    let with_field = |dir: &Path| {
        campaign(dir);
        let text = std::fs::read_to_string(dir.join("campaign.yaml")).expect("campaign");
        write(
            dir,
            "campaign.yaml",
            &text.replacen("type: isolated_container", "type: isolated_container\n      runtime: runsc", 1),
        );
    };
    let run = ["run", "--config", "campaign.yaml", "--out", "out"];
    let cases: Vec<(&str, Vec<&str>, bool, &str)> = vec![
        ("run --runtime runsc", [&run[..], &["--runtime", "runsc"]].concat(), false, "runc"),
        ("run, runtime: runsc in the campaign", run.to_vec(), true, "runc"),
        ("run, runsc the engine's default", run.to_vec(), false, "runsc"),
        ("prove", vec!["prove", "--seed", seed, "--out", "out", "--runtime", "runsc"], false, "runc"),
        (
            "gate",
            vec!["gate", "--file", gate_file, "--seeds-dir", seeds, "--out", "out", "--runtime", "runsc"],
            false,
            "runc",
        ),
        ("bench", vec!["bench", "--short", "--runtime", "runsc"], false, "runc"),
        ("example --isolated", vec!["example", "--isolated", "--out", "out", "--runtime", "runsc"], false, "runc"),
        (
            "example --isolated, runsc the engine's default",
            vec!["example", "--isolated", "--out", "out"],
            false,
            "runsc",
        ),
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|(case, args, field, default)| {
            let (engine, dir) = (
                FakeEngine::start_with_info(
                    Behaviour::Answer(patched_version()),
                    info(default, default_registration.clone()),
                ),
                scratch(),
            );
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            std::thread::spawn(move || {
                if field {
                    with_field(dir.path())
                } else {
                    campaign(dir.path())
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = run_against(&engine, dir.path(), &args, None);
                let err = stderr(&out);
                assert_eq!(out.status.code(), Some(UNAVAILABLE), "{case}: {err}");
                assert!(
                    err.contains("runs the runtime `runsc` (gVisor, /usr/bin/runsc) with no runtimeArgs"),
                    "{case}: {err}"
                );
                assert!(err.contains("cannot run with network enabled in root network namespace"), "{case}: {err}");
                assert!(
                    err.contains(r#""runtimeArgs": ["--network=host"]"#) && err.contains("kill -HUP"),
                    "{case}: {err}"
                );
                assert_eq!(engine.other_requests(), Vec::<String>::new(), "{case}: nothing looked up or created");
                assert!(!dir.path().join("out").exists(), "{case}: no results directory");
            })
        })
        .collect();
    let failed: Vec<usize> =
        handles.into_iter().enumerate().filter_map(|(i, h)| h.join().is_err().then_some(i)).collect();
    assert!(failed.is_empty(), "failed cases (by index): {failed:?}");

    // Registered the documented way: past the check, to the image lookup.
    let engine = FakeEngine::start_with_info(
        Behaviour::Answer(patched_version()),
        info("runc", serde_json::json!({"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]})),
    );
    let dir = scratch();
    campaign(dir.path());
    // (gVisor's version cannot be read here, which the engine gate reports: accepted.)
    let out = run_against(&engine, dir.path(), &[&run[..], &["--runtime", "runsc"]].concat(), Some("1"));
    let err = stderr(&out);
    assert!(!err.contains("cannot run with network enabled"), "{err}");
    assert!(err.contains(&format!("failed to find image `{IMAGE}`")), "{err}");
    assert_eq!(engine.other_requests(), [format!("GET /images/{IMAGE}/json")]);
}
