//! The crash-safety matrix for isolated-container trials: the runner is killed with SIGKILL
//! in each phase (network create, container create, start, initialize, mid-exercise, verify,
//! evidence write, row append; `ELENGTIS_CRASHPOINT`, see `orchestrator/src/crashpoint.rs`)
//! and resumed — no lost trial, no duplicate, no torn file, no container, network or volume of
//! the run left — and, in the phases where the trial's objects are alive, `elengtis gc --run`
//! after a crash without resume leaves nothing either.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// Every crashpoint phase, in trial order: the runner's own list, so a phase added there is
// tested here.
use elengtis::crashpoint::CrashPoint;
use elengtis_tests::crash::{check_files_of_killed_run, check_resumed, crash_at_with};
use elengtis_tests::{
    FixtureMcp, bundled_images, docker_or_skip, elengtis, elengtis_cmd, fixture_image, fixture_target, managed_objects,
    managed_objects_of_trial, managed_volumes, rows, scratch, stderr, stdout, support_note_campaign, write,
};

/// Tool calls of one support-note trial under the default `comply` script.
const CALLS: usize = 3;
const TRIALS: usize = 3;

/// Phases in which the crashed trial's network (and later its container and volume) exist.
/// The trials of this stdio campaign need no network, so they run with none (the engine's
/// `none` mode) when resumed; the gc jobs and the `network-create` phase give every trial
/// an internal bridge (`ELENGTIS_TRIAL_NETWORK=always`, what a trial with a sink gets), so
/// both kinds of sandbox are killed in every phase where they hold objects.
const OBJECT_PHASES: &[&str] =
    &["network-create", "container-create", "start", "initialize", "exercise", "verify", "teardown"];

fn campaign() -> String {
    campaign_over(FixtureMcp::Stdio)
}

fn campaign_over(mcp: FixtureMcp) -> String {
    support_note_campaign(TRIALS, &[fixture_target("iso", &fixture_image(), mcp, 10001, &["volumes: [/data]"])])
}

fn trial_ids() -> Vec<String> {
    (0..TRIALS).map(|i| format!("iso--support-note--{i}")).collect()
}

/// `elengtis` on this test engine, which the engine gate may refuse (runc before 1.1.12).
/// Write the campaign into a scratch directory and run it until the runner is killed at
/// `crashpoint`: the directory, its results directory and what the crash left.
fn crash_campaign(
    crashpoint: &str,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, std::path::PathBuf, elengtis_tests::crash::Crashed) {
    let dir = scratch();
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    write(dir.path(), "campaign.yaml", &campaign());
    let out = dir.path().join("out");
    let crashed = crash_at_with(
        dir.path(),
        &["run", "--config", "campaign.yaml", "--out", "out"],
        env,
        &out,
        crashpoint,
        Duration::from_secs(180),
    );
    (dir, out, crashed)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The crashpoint that stops the second trial in `phase` (`exercise`: between its first and
/// second tool call).
fn second_trial(phase: &str) -> String {
    if phase == "exercise" { format!("exercise:{}", CALLS + 1) } else { format!("{phase}:2") }
}

/// Kill in `phase` of the second trial, resume, and check everything; returns a report line.
/// The trial network setting of a job (see [`OBJECT_PHASES`]).
fn network_env(phase: &str, gc: bool) -> Vec<(&'static str, &'static str)> {
    let always = gc || phase == "network-create";
    vec![("ELENGTIS_TRIAL_NETWORK", if always { "always" } else { "auto" })]
}

fn crash_and_resume(phase: &str) -> String {
    let _killed = crate::killed_run();
    let crashpoint = second_trial(phase);
    let env = network_env(phase, false);
    let (dir, out, crashed) = crash_campaign(&crashpoint, &env);
    // The first trial's row, recorded by the group-commit thread while the second trial
    // runs: a kill in the second trial's own phases may come before it is durable (that trial
    // was not reported either, and resume runs it); the recording thread's own crashpoints
    // come after it.
    let before = crashed.complete_rows();
    assert!(
        before == 1 || (OBJECT_PHASES.contains(&phase) && before == 0),
        "{crashpoint}: {before} rows: {}",
        crashed.stderr
    );
    assert_eq!(crashed.torn_bytes() > 0, phase == "row-append", "{crashpoint}: torn tail");
    check_files_of_killed_run(&out, phase == "row-append");
    let left = managed_objects(&crashed.run_id);
    let volumes = managed_volumes(&crashed.run_id);
    // The killed trial's objects are still there when it died with them alive. (After its
    // teardown, at its row's append, the next trial may already have started: group commit
    // records a batch while the trials go on, so only the killed trial's own are counted.)
    let own = managed_objects_of_trial(&crashed.run_id, &trial_ids()[1]);
    assert_eq!(!own.is_empty(), OBJECT_PHASES.contains(&phase), "{crashpoint}: objects at the kill: {own:?}");

    let resumed = elengtis_cmd(dir.path(), &["run", "--resume", "--out", s(&out)])
        .envs(env.iter().copied())
        .output()
        .expect("failed to resume");
    let found = check_resumed(&crashed, &resumed, &trial_ids());
    for row in rows(&out.join("runs.jsonl")) {
        assert_eq!(row["tool_calls"], CALLS, "{crashpoint}: the exercise crashpoint assumes {CALLS} calls");
    }
    if !left.is_empty() {
        let note = found.leftovers_note.as_deref().unwrap_or_default();
        assert!(
            note.contains("removed leftovers"),
            "{crashpoint}: resume reports what it removed: {}",
            stderr(&resumed)
        );
    }
    assert_nothing_left(&crashed.run_id, &format!("{crashpoint}: after resume"));
    assert!(stdout(&resumed).contains("proposed: 3/3"), "{}", stdout(&resumed));
    format!(
        "{crashpoint}: killed after {:.1}s; rows before {}, after {}; torn bytes cut {}; orphan evidence {}; at the kill {} objects {left:?} + {} volumes; resume: {}",
        crashed.elapsed.as_secs_f64(),
        found.rows_before,
        found.rows_after,
        found.torn_cut,
        found.orphan_evidence,
        left.len(),
        volumes.len(),
        found.leftovers_note.as_deref().unwrap_or("nothing to remove"),
    )
}

/// Kill in `phase` of the first trial and run `elengtis gc --run <id>` without resuming.
fn crash_and_gc(phase: &str) -> String {
    let _killed = crate::killed_run();
    let crashpoint = format!("{phase}:1");
    let (dir, _, crashed) = crash_campaign(&crashpoint, &network_env(phase, true));
    let left = managed_objects(&crashed.run_id);
    assert!(!left.is_empty(), "{crashpoint}: the killed trial's objects should still exist");
    let gc = elengtis(dir.path(), &["gc", "--run", &crashed.run_id, "--json"]);
    assert_eq!(gc.status.code(), Some(0), "{}{}", stdout(&gc), stderr(&gc));
    let report: serde_json::Value = serde_json::from_str(&stdout(&gc)).expect("gc --json prints JSON");
    let removed = |kind: &str| report[kind].as_array().map_or(0, Vec::len);
    assert_eq!(
        removed("containers") + removed("networks"),
        left.len(),
        "{crashpoint}: gc removed {report}, there were {left:?}"
    );
    assert_nothing_left(&crashed.run_id, &format!("{crashpoint}: after gc"));
    format!(
        "{crashpoint} + gc --run: removed {} containers, {} networks, {} volumes; nothing left",
        removed("containers"),
        removed("networks"),
        removed("volumes")
    )
}

#[test]
fn sigkill_in_every_phase_then_resume_or_gc_leaves_every_trial_once_and_nothing_behind() {
    if !docker_or_skip("sigkill_in_every_phase_then_resume_or_gc_leaves_every_trial_once_and_nothing_behind") {
        return;
    }
    bundled_images();
    let begun = Instant::now();
    let mut pending = jobs();
    pending.reverse();
    let queue = Arc::new(Mutex::new(pending));
    let reports = Arc::new(Mutex::new(Vec::new()));
    // Three runners at a time: the engine, not the runner, is the bottleneck on 2 cores.
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let queue = Arc::clone(&queue);
            let reports = Arc::clone(&reports);
            std::thread::spawn(move || {
                loop {
                    let Some((phase, gc)) = queue.lock().expect("queue").pop() else { break };
                    let result =
                        std::panic::catch_unwind(|| if gc { crash_and_gc(phase) } else { crash_and_resume(phase) });
                    let line = result.unwrap_or_else(|e| {
                        let message = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default();
                        format!("FAILED {phase} (gc: {gc}): {message}")
                    });
                    reports.lock().expect("reports").push(line);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a worker thread panicked");
    }
    let reports = reports.lock().expect("reports").clone();
    for line in &reports {
        eprintln!("{line}");
    }
    eprintln!("container crash matrix: {:?}", begun.elapsed());
    let failed: Vec<&String> = reports.iter().filter(|l| l.starts_with("FAILED")).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(reports.len(), jobs().len());
}

/// Every phase resumed, and the phases with live objects also cleaned by gc.
fn jobs() -> Vec<(&'static str, bool)> {
    let resume = CrashPoint::ALL.iter().map(|p| (p.name(), false));
    resume.chain(OBJECT_PHASES.iter().map(|p| (*p, true))).collect()
}

/// No container, network or volume of the run is left.
fn assert_nothing_left(run_id: &str, context: &str) {
    assert!(managed_objects(run_id).is_empty(), "{context}: left: {:?}", managed_objects(run_id));
    assert!(managed_volumes(run_id).is_empty(), "{context}: volumes left: {:?}", managed_volumes(run_id));
}

/// Sandboxes prepared ahead (`--prepare-ahead`): the runner is killed while one trial's
/// session runs and the next trial's sandbox is already up (`initialize:2`), and while a
/// finished trial tears down off the critical path beside the next one's session
/// (`teardown:1`). Objects of more than one trial can be alive at the kill; resume (which
/// sweeps them first) or `elengtis gc --run` leaves every trial once and nothing behind.
#[test]
fn a_kill_with_sandboxes_prepared_ahead_leaves_every_trial_once_and_nothing_behind() {
    if !docker_or_skip("a_kill_with_sandboxes_prepared_ahead_leaves_every_trial_once_and_nothing_behind") {
        return;
    }
    bundled_images();
    for (crashpoint, network, gc) in
        [("initialize:2", "auto", false), ("teardown:1", "always", false), ("initialize:2", "always", true)]
    {
        let _killed = crate::killed_run();
        let dir = scratch();
        write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
        write(dir.path(), "campaign.yaml", &campaign());
        let out = dir.path().join("out");
        let env = [("ELENGTIS_TRIAL_NETWORK", network)];
        let args = ["run", "--config", "campaign.yaml", "--out", "out", "--jobs", "1", "--prepare-ahead", "1"];
        let crashed = crash_at_with(dir.path(), &args, &env, &out, crashpoint, Duration::from_secs(180));
        let left = managed_objects(&crashed.run_id);
        assert!(!left.is_empty(), "{crashpoint}: the trials' sandboxes should be alive at the kill");
        if gc {
            let gc = elengtis(dir.path(), &["gc", "--run", &crashed.run_id]);
            assert_eq!(gc.status.code(), Some(0), "{}{}", stdout(&gc), stderr(&gc));
            assert_nothing_left(&crashed.run_id, &format!("{crashpoint} (prepared ahead): after gc"));
            eprintln!(
                "{crashpoint} (prepared ahead, {network}) + gc: {} objects at the kill, nothing left",
                left.len()
            );
            continue;
        }
        let resumed = elengtis_cmd(dir.path(), &["run", "--resume", "--out", s(&out), "--prepare-ahead", "1"])
            .envs(env)
            .output()
            .expect("failed to resume");
        let found = check_resumed(&crashed, &resumed, &trial_ids());
        assert_eq!(found.rows_after, TRIALS, "{crashpoint}");
        assert_nothing_left(&crashed.run_id, &format!("{crashpoint} (prepared ahead): after resume"));
        eprintln!(
            "{crashpoint} (prepared ahead, {network}): {} objects at the kill {left:?}; rows before {}, after {}",
            left.len(),
            found.rows_before,
            found.rows_after
        );
    }
}

/// The relayed streamable-HTTP route (the default for an HTTP target): the relay container
/// joins the target's network namespace and carries the session over one attach stream, and
/// neither has a network (no sink). The runner is killed with the relay just created beside
/// a created target (`container-create:2`), with both running before the handshake
/// (`start:2`), and while the stream carries the second trial's session (`exercise`); resume
/// or `elengtis gc --run` leaves every trial once and nothing behind — no relay container.
#[test]
fn a_kill_on_the_relayed_http_route_leaves_every_trial_once_and_nothing_behind() {
    if !docker_or_skip("a_kill_on_the_relayed_http_route_leaves_every_trial_once_and_nothing_behind") {
        return;
    }
    bundled_images();
    let exercise = format!("exercise:{}", CALLS + 1);
    for (crashpoint, gc) in [("container-create:2", true), ("start:2", false), (exercise.as_str(), false)] {
        let _killed = crate::killed_run();
        let dir = scratch();
        write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
        write(dir.path(), "campaign.yaml", &campaign_over(FixtureMcp::Http));
        let out = dir.path().join("out");
        let args = ["run", "--config", "campaign.yaml", "--out", "out"];
        let env = [("ELENGTIS_RELAY", "always"), ("ELENGTIS_TRIAL_NETWORK", "auto")];
        let crashed = crash_at_with(dir.path(), &args, &env, &out, crashpoint, Duration::from_secs(180));
        let left = managed_objects(&crashed.run_id);
        // The target and its relay (no network: the relay shares the target's namespace).
        assert_eq!(left.len(), 2, "{crashpoint}: objects at the kill: {left:?}");
        if gc {
            let gc = elengtis(dir.path(), &["gc", "--run", &crashed.run_id]);
            assert_eq!(gc.status.code(), Some(0), "{}{}", stdout(&gc), stderr(&gc));
            assert_nothing_left(&crashed.run_id, &format!("{crashpoint} (relayed HTTP): after gc"));
            eprintln!("{crashpoint} (relayed HTTP) + gc: {left:?} at the kill, nothing left");
            continue;
        }
        let resumed = elengtis_cmd(dir.path(), &["run", "--resume", "--out", s(&out)])
            .envs(env)
            .output()
            .expect("failed to resume");
        let found = check_resumed(&crashed, &resumed, &trial_ids());
        assert_eq!(found.rows_after, TRIALS, "{crashpoint}");
        assert!(stdout(&resumed).contains("proposed: 3/3"), "{}", stdout(&resumed));
        for row in rows(&out.join("runs.jsonl")) {
            let evidence = elengtis_tests::read_json(&out.join(row["evidence"].as_str().expect("evidence path")));
            let te = &evidence["target_execution"];
            assert_eq!(te["network"]["mode"], "none", "{crashpoint}: {te}");
            assert_eq!(te["relay"]["stream"]["error"], serde_json::Value::Null, "{crashpoint}: {te}");
        }
        assert_nothing_left(&crashed.run_id, &format!("{crashpoint} (relayed HTTP): after resume"));
        eprintln!(
            "{crashpoint} (relayed HTTP): {left:?} at the kill; rows before {}, after {}",
            found.rows_before, found.rows_after
        );
    }
}
