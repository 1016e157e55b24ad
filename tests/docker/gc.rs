//! `elengtis gc` on a shared engine: a plain `gc` removes only the objects of runs whose
//! runner is provably gone; a live run's containers survive it until its runner dies (or
//! `gc --run ID` names it).

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use elengtis_tests::crash::crash_at;
use elengtis_tests::{
    ChildGuard, FixtureMcp, bundled_images, docker_api, docker_or_skip, elengtis, elengtis_cmd, fixture_image,
    fixture_target, managed_objects, read_json, scratch, stderr, stdout, support_note_campaign, write,
};

/// A one-trial isolated campaign in a fresh directory.
fn campaign_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = scratch();
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let target = fixture_target("iso", &fixture_image(), FixtureMcp::Stdio, 10001, &["volumes: [/data]"]);
    write(dir.path(), "campaign.yaml", &support_note_campaign(1, &[target]));
    let out = dir.path().join("out");
    (dir, out)
}

/// Start a run that stops (alive, blocked) at `crashpoint` with its trial's objects in
/// the engine; returns the runner and its run id.
fn live_run(dir: &Path, out: &Path, crashpoint: &str) -> (ChildGuard, String) {
    let mut runner = ChildGuard::new(
        elengtis_cmd(dir, &["run", "--config", "campaign.yaml", "--out", "out"])
            .env("ELENGTIS_CRASHPOINT", crashpoint)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("failed to start elengtis"),
    );
    let pipe = runner.child().stderr.take().expect("stderr is piped");
    let (lines, receive) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let wanted = format!("elengtis crashpoint reached: {crashpoint}");
    let mut text = String::new();
    loop {
        match receive.recv_timeout(Duration::from_secs(180)) {
            Ok(line) if line == wanted => break,
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
            }
            Err(_) => panic!("the live run did not reach {crashpoint}; stderr:\n{text}"),
        }
    }
    let run_id = read_json(&out.join("manifest.json"))["run_id"].as_str().expect("run_id").to_owned();
    (runner, run_id)
}

#[test]
fn plain_gc_removes_a_dead_runs_containers_and_keeps_a_live_runs() {
    if !docker_or_skip("plain_gc_removes_a_dead_runs_containers_and_keeps_a_live_runs") {
        return;
    }
    // This test's plain gc would also remove the runs other tests killed and still inspect.
    let _sweep = crate::sweep();
    // The runner is what is under test here, not the images: build them only when missing.
    let (status, _) = docker_api("GET", &format!("/images/{}/json", fixture_image()), None);
    if status != 200 {
        bundled_images();
    }
    // A dead run: its runner SIGKILLed with the trial's network, container and volume alive.
    let (dead_dir, dead_out) = campaign_dir();
    let dead = crash_at(
        dead_dir.path(),
        &["run", "--config", "campaign.yaml", "--out", "out"],
        &dead_out,
        "initialize",
        Duration::from_secs(180),
    );
    assert!(!managed_objects(&dead.run_id).is_empty(), "the killed run left its objects");
    // A live run, in the same phase, its runner still there.
    let (live_dir, live_out) = campaign_dir();
    let (mut live_runner, live_run_id) = live_run(live_dir.path(), &live_out, "initialize");
    let live_objects = managed_objects(&live_run_id);
    assert!(live_objects.iter().any(|name| name.starts_with('/')), "the live run has a container: {live_objects:?}");

    let gc = elengtis(dead_dir.path(), &["gc", "--json"]);
    assert_eq!(gc.status.code(), Some(0), "{}{}", stdout(&gc), stderr(&gc));
    let report: serde_json::Value = serde_json::from_str(&stdout(&gc)).expect("gc --json prints JSON");
    assert!(managed_objects(&dead.run_id).is_empty(), "the dead run's objects are removed: {report}");
    assert_eq!(managed_objects(&live_run_id), live_objects, "the live run's objects survive a plain gc: {report}");
    let kept = report["kept"].as_array().expect("kept");
    assert!(
        kept.iter().any(|k| k.as_str().is_some_and(|k| k.contains(&live_run_id) && k.contains("is alive"))),
        "gc says which live run it kept and why: {report}"
    );
    let text = elengtis(dead_dir.path(), &["gc"]);
    assert!(stdout(&text).contains(&format!("elengtis gc --run {live_run_id}")), "{}", stdout(&text));

    // Once its runner is gone, the run is dead and a plain gc removes it too.
    let _ = live_runner.child().kill();
    let _ = live_runner.child().wait();
    let gc = elengtis(live_dir.path(), &["gc", "--json"]);
    assert_eq!(gc.status.code(), Some(0), "{}{}", stdout(&gc), stderr(&gc));
    assert!(managed_objects(&live_run_id).is_empty(), "{}", stdout(&gc));
}
