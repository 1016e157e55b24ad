//! stdio targets: the guard (a target and its children never outlive the runner, recorded
//! leftovers are reaped by resume and gc), the opt-in light sandbox against the hostile
//! server, and preflight's warning for an unconfined target run as root.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use elengtis_tests::{ChildGuard, copy_example, elengtis, elengtis_cmd, scratch, stderr, stdout, wait_until};
use serde_json::{Value, json};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The packaged example with its target's command and arguments (YAML flow list) replaced,
/// and `extra` lines added to the transport.
fn campaign_with(dir: &Path, command: &str, args: &str, extra: &str) -> std::path::PathBuf {
    let config = copy_example("support-note", dir);
    let text = std::fs::read_to_string(&config).expect("read campaign");
    let from = "      command: elengtis-fixture\n      args: [--collector, {runner: collector}, --credential, {runner: canary}, --scenario, support-note]\n";
    assert!(text.contains(from), "the example's target changed:\n{text}");
    let text = text.replacen(from, &format!("      command: {command}\n      args: {args}\n{extra}"), 1);
    std::fs::write(&config, text).expect("write campaign");
    config
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').and_then(|i| stat.get(i + 2..i + 3)).map(|state| state != "Z"))
        .unwrap_or(false)
}

/// The pid in `path`, which the hostile server publishes whole (written aside, renamed).
fn read_pid(path: &Path) -> i32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim().parse().unwrap_or_else(|e| panic!("{}: not a pid ({e}): {text:?}", path.display()))
}

fn kill9(pid: i32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
}

/// The executable process `pid`'s parent runs.
fn parent_exe(pid: i32) -> std::path::PathBuf {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let ppid = stat[stat.rfind(')').expect(")") + 2..].split_whitespace().nth(1).expect("ppid").to_owned();
    std::fs::read_link(format!("/proc/{ppid}/exe")).expect("the parent's executable")
}

/// Start a run whose stdio target (the hostile server) spawns children and never answers,
/// with `runner` as the `elengtis` executable; check the guard is `guard` and that a SIGKILL
/// of the runner takes the target and its children along, and the log records both ends.
fn sigkilled_runner_takes_its_target_along(runner_exe: &Path, guard: &str) {
    let dir = scratch();
    let pids = dir.path().join("pids");
    std::fs::create_dir(&pids).expect("mkdir");
    // The hostile server starts `sleep` in its group and another in a new session (out of
    // its process group), then never answers `initialize`: the trial waits in the open.
    let config = campaign_with(
        dir.path(),
        &elengtis_tests::bin("elengtis-hostile").display().to_string(),
        &format!("[--spawn-children, '{}', --never-initialize]", s(&pids)),
        "",
    );
    let out = dir.path().join("out");
    // `elengtis_cmd`'s command line and environment, with `runner_exe` as the executable.
    let template = elengtis_cmd(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    let mut command = std::process::Command::new(runner_exe);
    command.args(template.get_args()).current_dir(dir.path());
    for (name, value) in template.get_envs() {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    let mut runner =
        ChildGuard::new(command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start the runner"));
    assert!(wait_until(Duration::from_secs(20), || pids.join("server.pid").exists()), "the target never started");
    let server = read_pid(&pids.join("server.pid"));
    let child = read_pid(&pids.join("child.pid"));
    let escaped = read_pid(&pids.join("escaped.pid"));
    let all = [server, child, escaped];
    assert!(all.iter().all(|p| alive(*p)), "target and children run: {all:?}");
    let guard_exe = parent_exe(server);
    assert_eq!(
        guard_exe.file_name().and_then(|n| n.to_str()),
        Some(guard),
        "the target's guard: {}",
        guard_exe.display()
    );
    let live = out.join("stdio-live");
    let log = live.join("guards.jsonl");
    let lines = || std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>();
    // The guard records the target right after starting it, concurrently with the target's
    // own start: wait for the line.
    assert!(wait_until(Duration::from_secs(5), || lines().len() == 1), "the live target is recorded: {:?}", lines());
    assert!(lines()[0].contains(&format!("\"pid\":{server}")), "the record names the live target: {:?}", lines());

    runner.child().kill().expect("SIGKILL the runner");
    let _ = runner.child().wait();
    let gone = wait_until(Duration::from_secs(10), || all.iter().all(|p| !alive(*p)));
    let survivors: Vec<i32> = all.into_iter().filter(|p| alive(*p)).collect();
    for p in &survivors {
        kill9(*p);
    }
    assert!(gone, "still alive after the runner was SIGKILLed: {survivors:?} (server, child, escaped = {all:?})");
    assert!(
        wait_until(Duration::from_secs(5), || lines().len() == 2 && lines()[1].starts_with("{\"done\":")),
        "the guard records the end once everything is reaped: {:?}",
        lines()
    );
}

#[test]
fn a_sigkilled_runner_takes_its_stdio_target_and_the_targets_children_along() {
    sigkilled_runner_takes_its_target_along(&elengtis_tests::bin("elengtis"), "elengtis-stdio-guard");
}

/// `elengtis` alone (installed without `elengtis-stdio-guard` beside it) runs the guard itself.
#[test]
fn without_the_small_guard_beside_it_elengtis_guards_its_stdio_targets_itself() {
    let dir = scratch();
    let alone = dir.path().join("bin");
    std::fs::create_dir(&alone).expect("mkdir");
    let exe = alone.join("elengtis");
    std::fs::hard_link(elengtis_tests::bin("elengtis"), &exe)
        .or_else(|_| std::fs::copy(elengtis_tests::bin("elengtis"), &exe).map(drop))
        .expect("place elengtis alone");
    sigkilled_runner_takes_its_target_along(&exe, "elengtis");
}

#[test]
fn the_small_guard_refuses_a_command_line_it_cannot_read() {
    let guard = elengtis_tests::bin("elengtis-stdio-guard");
    for (args, wanted) in [
        (&[][..], "usage: elengtis-stdio-guard __stdio-guard"),
        (&["__stdio-guard", "--parent", "1", "--pid", "2", "--", "/bin/true"][..], "unexpected argument `--pid`"),
        (&["__stdio-exec", "--parent", "1"][..], "no `--` before the program"),
    ] {
        let run = std::process::Command::new(&guard).args(args).output().expect("run the guard");
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", stderr(&run));
        assert!(stderr(&run).contains(wanted), "{args:?}: {}", stderr(&run));
    }
}

/// A process group the test starts (`sleep 300`, its own group) recorded as a leftover of a
/// killed guard in `out/stdio-live/`.
fn recorded_leftover(out: &Path) -> std::process::Child {
    let sleeper = std::process::Command::new("sleep").arg("300").process_group(0).spawn().expect("start sleep");
    let pid = i32::try_from(sleeper.id()).expect("pid");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let start: u64 = stat[stat.rfind(')').expect(")") + 1..]
        .split_whitespace()
        .nth(19)
        .expect("starttime")
        .parse()
        .expect("a number");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    let record =
        json!({"boot": boot.trim(), "guard": null, "target": {"pid": pid, "start": start}, "program": "sleep"});
    let live = out.join("stdio-live");
    std::fs::create_dir_all(&live).expect("mkdir");
    std::fs::write(live.join("guard-4194304.json"), record.to_string()).expect("write record");
    sleeper
}

fn ended(child: &mut std::process::Child) -> bool {
    wait_until(Duration::from_secs(10), || child.try_wait().expect("try_wait").is_some())
}

#[test]
fn a_recorded_stdio_leftover_is_reaped_by_resume_and_by_gc() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let out = dir.path().join("out");
    let run = elengtis(dir.path(), &["run", "--config", s(&config), "--out", s(&out)]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    assert!(!out.join("stdio-live").exists(), "a finished run leaves no record of its stdio targets");

    let mut sleeper = recorded_leftover(&out);
    let resume = elengtis(dir.path(), &["run", "--resume", "--out", s(&out)]);
    let reaped = ended(&mut sleeper);
    if !reaped {
        let _ = sleeper.kill();
    }
    assert!(reaped, "resume did not reap the recorded leftover: {}{}", stdout(&resume), stderr(&resume));
    assert!(stderr(&resume).contains("reaped a stdio target"), "{}", stderr(&resume));

    let mut sleeper = recorded_leftover(&out);
    let gc = elengtis(dir.path(), &["gc", "--out", s(&out)]);
    let reaped = ended(&mut sleeper);
    if !reaped {
        let _ = sleeper.kill();
    }
    assert!(reaped, "gc --out did not reap the recorded leftover: {}{}", stdout(&gc), stderr(&gc));
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(stdout(&gc).contains("reaped stdio record"), "{}", stdout(&gc));

    // A live run's records are kept: its lock is held.
    let mut sleeper = recorded_leftover(&out);
    let lock = std::fs::File::open(&out).expect("the results directory");
    lock.try_lock().expect("hold the run's lock");
    let gc = elengtis(dir.path(), &["gc", "--out", s(&out)]);
    assert!(stdout(&gc).contains("kept the stdio targets"), "{}", stdout(&gc));
    assert!(sleeper.try_wait().expect("try_wait").is_none(), "a live run's target was killed");
    drop(lock);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// Run the hostile server's escape probe through `preflight --json`; its report line.
fn escape_report(dir: &Path, spec: &Value, sandbox: &str) -> Value {
    let config = campaign_with(dir, "elengtis-hostile", &format!("['--escape-probe', '{spec}']"), sandbox);
    let output = elengtis(dir, &["preflight", "--json", s(&config)]);
    let report: Value = serde_json::from_str(&stdout(&output)).expect("preflight JSON");
    let close = &report["targets"][0]["execution"]["close"];
    let text = close["stderr"]["text"].as_str().unwrap_or_default();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ELENGTIS-HOSTILE-PROBE "))
        .unwrap_or_else(|| panic!("no probe report: {report:#}"));
    serde_json::from_str(line).expect("probe JSON")
}

fn outcome<'a>(report: &'a Value, list: &str, key: &str, value: &str) -> &'a str {
    report[list]
        .as_array()
        .and_then(|items| items.iter().find(|i| i[key] == value))
        .and_then(|i| i["outcome"].as_str())
        .unwrap_or_else(|| panic!("no {list} entry {value} in {report:#}"))
}

#[test]
fn the_light_sandbox_stops_the_hostile_servers_escapes_that_succeed_without_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let loopback = listener.local_addr().expect("addr").to_string();
    let dir = scratch();
    let outside_dir = scratch();
    let outside = outside_dir.path().join("outside");
    let root = format!("/elengtis-sandbox-probe-{}", std::process::id());
    let writable = dir.path().join("w");
    std::fs::create_dir(&writable).expect("mkdir");
    let inside = writable.join("inside");
    let spec = json!({
        "tcp": [loopback, "169.254.169.254:80"],
        "write": [s(&outside), root, s(&inside)],
    });

    // The control: unconfined, the loopback connect and the write outside succeed.
    let control = escape_report(dir.path(), &spec, "");
    let _ = std::fs::remove_file(&root);
    assert_eq!(outcome(&control, "tcp", "target", &loopback), "connected", "{control:#}");
    assert_eq!(outcome(&control, "write", "path", s(&outside)), "created", "{control:#}");
    std::fs::remove_file(&outside).expect("the control wrote outside");

    let sandbox =
        "      sandbox: {network: none, writable: [w], memory_mb: 1024, max_open_files: 256, cpu_seconds: 30}\n";
    let confined = escape_report(dir.path(), &spec, sandbox);
    for target in [loopback.as_str(), "169.254.169.254:80"] {
        assert_ne!(outcome(&confined, "tcp", "target", target), "connected", "{confined:#}");
    }
    assert_eq!(outcome(&confined, "write", "path", s(&outside)), "failed", "{confined:#}");
    assert_eq!(outcome(&confined, "write", "path", &root), "failed", "{confined:#}");
    assert!(!outside.exists() && !Path::new(&root).exists());
    // The listed path stays writable.
    assert_eq!(outcome(&confined, "write", "path", s(&inside)), "created", "{confined:#}");
    let status = &confined["status"];
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"] {
        assert_eq!(status[cap], "0000000000000000", "{cap} in {confined:#}");
    }
    assert_eq!(status["NoNewPrivs"], "1", "{confined:#}");
}

#[test]
fn a_sandbox_that_cannot_be_applied_fails_the_target_instead_of_running_it_unconfined() {
    let dir = scratch();
    let config = campaign_with(dir.path(), "elengtis-hostile", "[]", "      sandbox: {writable: [does-not-exist]}\n");
    let output = elengtis(dir.path(), &["preflight", s(&config)]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("failed to confine stdio target `local-demo`") && text.contains("does-not-exist"), "{text}");
}

#[test]
fn preflight_warns_when_an_unconfined_stdio_target_will_run_as_root() {
    let root = nix::unistd::geteuid().is_root();
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let text_out = elengtis(dir.path(), &["preflight", s(&config)]);
    let json_out = elengtis(dir.path(), &["preflight", "--json", s(&config)]);
    let report: Value = serde_json::from_str(&stdout(&json_out)).expect("preflight JSON");
    let warning = report["targets"][0]["warning"].as_str().unwrap_or_default().to_owned();
    let expected = "local-demo is an unconfined stdio target and will run as root (uid 0)";
    if root {
        assert!(stderr(&text_out).contains(&format!("WARNING: {expected}")), "{}", stderr(&text_out));
        assert!(warning.starts_with(expected), "{report:#}");
    } else {
        // Not root here: no warning is the honest outcome.
        assert!(!stderr(&text_out).contains("will run as root"), "{}", stderr(&text_out));
        assert!(warning.is_empty(), "{report:#}");
    }
    // With the sandbox, no warning either way.
    let sandboxed = campaign_with(
        dir.path(),
        "elengtis-fixture",
        "[--collector, {runner: collector}, --credential, {runner: canary}, --scenario, support-note]",
        "      sandbox: {}\n",
    );
    let output = elengtis(dir.path(), &["preflight", s(&sandboxed)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(!stderr(&output).contains("will run as root"), "{}", stderr(&output));
}
