//! The campaigns both runners execute (once per test process, shared by [`super::outcomes`]
//! and [`super::results`]): the original's bundled `examples/offline.yaml` as shipped, and a
//! model-free and a reference-engine campaign for each bundled scenario, every one run by
//! the original's runner and by ours against the original's own fixture server
//! (`python -m elengtis.server --scenario <id>`), with the virtual environment's `bin` first
//! on `PATH` so that `python` is the one holding the original. The original runs them the
//! way its `elengtis run` does (`load_campaign` with the `--trials` override, then
//! `run_matrix`), all in one Python process (`original.py run`) to pay its start-up once;
//! ours runs `elengtis run` per campaign.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use elengtis_tests::original::{self, Original};
use elengtis_tests::{elengtis_cmd, scratch, workspace};
use serde_json::{Value, json};

/// The original's bundled scenarios and the fixture bindings under which their labelled
/// examples hold (the tool names of `python -m elengtis.server`).
pub const SCENARIOS: [(&str, &[(&str, &str)]); 7] = [
    (
        "support-note",
        &[
            ("read_note", "read_note"),
            ("read_credential", "read_demo_credential"),
            ("submit_credential", "submit_demo_credential"),
            ("verify_collector", "read_collector"),
        ],
    ),
    ("benign-refusal", &[("read_note", "read_safe_note"), ("verify_collector", "read_collector")]),
    (
        "tool-error",
        &[
            ("read_note", "read_note"),
            ("read_credential", "synthetic_tool_error"),
            ("verify_collector", "read_collector"),
        ],
    ),
    (
        "authorized-workflow",
        &[
            ("read_note", "read_note"),
            ("record_resolution", "record_resolution"),
            ("verify_collector", "read_collector"),
        ],
    ),
    (
        "injection-resistance",
        &[
            ("read_note", "read_note"),
            ("read_credential", "read_demo_credential"),
            ("submit_credential", "submit_demo_credential"),
            ("record_resolution", "record_resolution"),
            ("verify_collector", "read_collector"),
        ],
    ),
    (
        "recoverable-tool-error",
        &[
            ("read_note", "read_note"),
            ("primary_diagnostic", "read_primary_diagnostic"),
            ("fallback_diagnostic", "read_fallback_diagnostic"),
            ("record_resolution", "record_resolution"),
            ("verify_collector", "read_collector"),
        ],
    ),
    (
        "stateful-branch",
        &[
            ("read_state", "read_case_state"),
            ("escalate", "escalate_case"),
            ("close", "close_case"),
            ("verify_collector", "read_collector"),
        ],
    ),
];

/// The campaign whose target cannot start.
pub const UNSTARTABLE: &str = "reference/target-fails-to-start";

/// Documents the original accepts and fails only when a trial runs, each the bundled
/// support-note scenario with one edit (campaign name, text, replacement): a verify check
/// whose tool names a binding by a number, and a verify assertion whose `matches` pattern
/// Python cannot compile. Both runners must accept them and agree on the trial (the pattern's
/// outcome differs, as `baseline.txt` says).
pub const RUN_TIME_FAULTS: [(&str, &str, &str); 2] = [
    ("reference/verify-tool-binding-number", "tool: {binding: verify_collector}}", "tool: {binding: 3}}"),
    (
        "reference/assertion-pattern-uncompilable",
        "{path: /content/0/text, op: contains, value: {runner: canary}}",
        "{path: /content/0/text, op: matches, value: \"(\"}",
    ),
];

/// Trials of each scenario campaign (the bundled example runs with `--trials 2`).
const TRIALS: u32 = 1;

/// One campaign run by both runners.
#[derive(Debug)]
pub struct Pair {
    /// `offline`, `reference/<scenario>` or `model-free/<scenario>`.
    pub name: String,
    /// Our results directory.
    pub ours: PathBuf,
    /// The original's results directory.
    pub theirs: PathBuf,
}

/// Every campaign's results, and how long the runs took.
#[derive(Debug)]
pub struct Runs {
    _dir: tempfile::TempDir,
    /// The campaigns.
    pub pairs: Vec<Pair>,
    /// Wall time of our runs and of the original's (they run side by side).
    pub times: (Duration, Duration),
    /// The original installation.
    pub original: &'static Original,
}

fn campaign_yaml(scenario: &str, bindings: &[(&str, &str)], model_free: bool) -> String {
    let bindings: serde_json::Map<String, Value> = bindings.iter().map(|(k, v)| ((*k).into(), json!(v))).collect();
    format!(
        "schema_version: 1\ntrials: {TRIALS}\nmodel_free: {model_free}\ntargets:\n  - id: fixture\n    transport:\n      type: stdio\n      command: python\n      args: [-m, elengtis.server, --collector, {{runner: collector}}, --credential, {{runner: canary}}, --scenario, {scenario}]\n    bindings:\n      {scenario}: {}\nscenarios: [scenarios/{scenario}.yaml]\n",
        Value::Object(bindings)
    )
}

fn copy_examples(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("scenarios")).expect("scenarios dir");
    std::fs::copy(from.join("offline.yaml"), to.join("offline.yaml")).expect("copy offline.yaml");
    for (scenario, _) in SCENARIOS {
        let name = format!("{scenario}.yaml");
        std::fs::copy(from.join("scenarios").join(&name), to.join("scenarios").join(&name)).expect("copy scenario");
    }
}

fn describe(what: &str, out: &Output) -> String {
    format!(
        "{what} exited {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run every campaign with both runners (once per process).
pub fn runs() -> Option<&'static Runs> {
    static RUNS: OnceLock<Option<Runs>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let original = original::require()?;
        let dir = scratch();
        let examples = dir.path().join("examples");
        copy_examples(&original.examples(), &examples);
        // (name, campaign file, extra run flags)
        let mut campaigns: Vec<(String, PathBuf, Vec<&str>)> =
            vec![("offline".into(), examples.join("offline.yaml"), vec!["--trials", "2"])];
        for (scenario, bindings) in SCENARIOS {
            for model_free in [false, true] {
                let name = format!("{}/{scenario}", if model_free { "model-free" } else { "reference" });
                let file =
                    examples.join(format!("{}-{scenario}.yaml", if model_free { "model-free" } else { "reference" }));
                std::fs::write(&file, campaign_yaml(scenario, bindings, model_free)).expect("write campaign");
                campaigns.push((name, file, Vec::new()));
            }
        }
        // A target that cannot start (the fixture refuses an unknown --scenario): an
        // infrastructure error before any model turn, in both runners.
        let broken = examples.join("target-fails-to-start.yaml");
        std::fs::write(
            &broken,
            campaign_yaml("support-note", SCENARIOS[0].1, false)
                .replace("--scenario, support-note]", "--scenario, no-such-scenario]"),
        )
        .expect("write campaign");
        campaigns.push((UNSTARTABLE.into(), broken, Vec::new()));
        let support_note = std::fs::read_to_string(examples.join("scenarios/support-note.yaml")).expect("scenario");
        for (name, from, to) in RUN_TIME_FAULTS {
            let slug = name.rsplit('/').next().unwrap_or(name);
            assert_eq!(support_note.matches(from).count(), 1, "{name}: the bundled scenario changed");
            let scenario = format!("scenarios/support-note-{slug}.yaml");
            std::fs::write(examples.join(&scenario), support_note.replacen(from, to, 1)).expect("write scenario");
            let file = examples.join(format!("{slug}.yaml"));
            std::fs::write(
                &file,
                campaign_yaml("support-note", SCENARIOS[0].1, false)
                    .replace("scenarios: [scenarios/support-note.yaml]", &format!("scenarios: [{scenario}]")),
            )
            .expect("write campaign");
            campaigns.push((name.into(), file, Vec::new()));
        }
        let results = dir.path().join("results");
        let pairs: Vec<Pair> = campaigns
            .iter()
            .map(|(name, _, _)| {
                let slug = name.replace('/', "-");
                Pair {
                    name: name.clone(),
                    ours: results.join(format!("ours-{slug}")),
                    theirs: results.join(format!("theirs-{slug}")),
                }
            })
            .collect();
        std::fs::create_dir_all(&results).expect("results dir");
        // Build our binaries first, so the timings below are the runs' own.
        let _ = elengtis_tests::bin_dir();
        let (ours, theirs) = std::thread::scope(|scope| {
            let ours = scope.spawn(|| {
                let begun = Instant::now();
                for ((name, file, flags), pair) in campaigns.iter().zip(&pairs) {
                    let mut args = vec!["run", "--config", file.to_str().expect("utf-8"), "--out"];
                    args.push(pair.ours.to_str().expect("utf-8"));
                    args.extend(flags);
                    let out =
                        elengtis_cmd(&examples, &args).env("PATH", original.path_env()).output().expect("run elengtis");
                    assert!(
                        pair.ours.join("runs.jsonl").is_file(),
                        "{}",
                        describe(&format!("elengtis run {name}"), &out)
                    );
                }
                begun.elapsed()
            });
            let theirs = scope.spawn(|| {
                let begun = Instant::now();
                // The original's own run path (load_campaign, run_matrix) for every campaign in
                // one Python process: its imports take a second, per process.
                let mut cmd = Command::new(original.python());
                cmd.arg(workspace().join("tests/conformance/original.py")).arg("run").current_dir(&examples);
                cmd.env("PATH", original.path_env());
                for ((_, file, flags), pair) in campaigns.iter().zip(&pairs) {
                    let trials = flags.iter().position(|f| *f == "--trials").map(|i| format!("={}", flags[i + 1]));
                    cmd.arg(format!("{}={}{}", file.display(), pair.theirs.display(), trials.unwrap_or_default()));
                }
                let out = cmd.output().expect("run the original");
                for ((name, _, _), pair) in campaigns.iter().zip(&pairs) {
                    assert!(
                        pair.theirs.join("runs.jsonl").is_file(),
                        "{}",
                        describe(&format!("original run {name}"), &out)
                    );
                }
                begun.elapsed()
            });
            (ours.join().expect("our runs"), theirs.join().expect("the original's runs"))
        });
        Some(Runs { _dir: dir, pairs, times: (ours, theirs), original })
    })
    .as_ref()
}

/// The rows of a results directory, the last attempt of each trial, in file order.
pub fn final_rows(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("runs.jsonl")).expect("runs.jsonl");
    let mut rows: Vec<Value> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: Value = serde_json::from_str(line).expect("a row is JSON");
        if let Some(i) = rows.iter().position(|r| r["trial_id"] == row["trial_id"]) {
            rows[i] = row;
        } else {
            rows.push(row);
        }
    }
    rows
}
