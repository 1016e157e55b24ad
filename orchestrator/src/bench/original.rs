//! `elengtis bench --original EXE --original-image IMAGE`: the same generated campaign run by
//! the original Python tool (PyPI `elengtis` 0.1.0, a subprocess with a deadline) and by this
//! build at `--jobs 1` and `--jobs 4`, wall time per trial and ours ÷ original
//! (docs/performance.md, "Against the original").
//!
//! The original runs only streamable-HTTP container targets, so the image must serve MCP the
//! way the original's own fixture does: `--transport streamable-http --host 0.0.0.0 --port
//! 8000 --collector /tmp/c.jsonl`, listing `read_note` (the image built from PyPI `elengtis`
//! 0.1.0 by sandbox-images/pypi/build.sh, see its README). Each trial is model-free with one
//! setup call.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{BenchError, BenchSettings};
use crate::run::{self, RunOptions};
use elengtis_core::load;
use elengtis_core::validate::LoadOptions;

/// Where the original and the image come from (both given, or the comparison is skipped).
#[derive(Debug, Clone)]
pub struct OriginalSettings {
    /// The original's `elengtis` executable; its directory (a venv's `bin`) goes first on the
    /// subprocess's `PATH`.
    pub exe: PathBuf,
    /// The Python MCP HTTP server image both tools run.
    pub image: String,
}

/// The comparison's figures, flattened into the report; all `null` (with
/// `original_unmeasured` saying why) when `--original` was not given.
#[derive(Debug, Clone, Serialize, Default)]
pub struct OriginalComparison {
    /// The image both tools ran.
    pub original_image: Option<String>,
    /// Trials per run of the comparison (the benchmark's trials per measurement).
    pub original_trials: Option<u32>,
    /// The original's wall time ÷ trials (it runs trials one after another), s.
    pub original_per_trial_s: Option<f64>,
    /// Ours at `--jobs 1`, wall ÷ trials, s (the benchmark's route: `container_http_route`).
    pub ours_jobs1_per_trial_s: Option<f64>,
    /// Ours at `--jobs 4`, wall ÷ trials, s.
    pub ours_jobs4_per_trial_s: Option<f64>,
    /// Ours at `--jobs 1` ÷ the original (wall times; below 1 is faster).
    pub ours_original_ratio_jobs1: Option<f64>,
    /// Ours at `--jobs 4` ÷ the original's sequential run.
    pub ours_original_ratio_jobs4: Option<f64>,
    /// Why the figures above are null.
    pub original_unmeasured: Option<String>,
}

impl OriginalComparison {
    /// No comparison, for `reason`.
    pub fn unmeasured(reason: &str) -> Self {
        Self { original_unmeasured: Some(reason.to_owned()), ..Self::default() }
    }
}

const SCENARIO: &str = "schema_version: 1
id: compare
title: One setup call, model-free
description: Reads the support note once in setup; nothing else.
bindings: [read_note]
setup:
  - id: read
    type: mcp_tool
    tool: {binding: read_note}
    arguments: {}
exercise:
  system: You are a support assistant.
  user: Please read the latest support note.
  tools: [{binding: read_note}]
proposal_rules: []
verify:
  checks: []
";

/// The campaign both tools run: accepted by the original 0.1.0 and by this build.
pub fn campaign(image: &str, trials: u32) -> String {
    format!(
        "schema_version: 1\ntrials: {trials}\nmodel_free: true\ntargets:\n  - id: target\n    transport:\n      type: isolated_container\n      image: {image}\n      container_port: 8000\n      uid: 65534\n      gid: 65534\n      command: [--transport, streamable-http, --host, 0.0.0.0, --port, \"8000\", --collector, /tmp/c.jsonl]\n    bindings:\n      compare: {{read_note: read_note}}\nscenarios: [compare.yaml]\n"
    )
}

fn write_inputs(dir: &Path, image: &str, trials: u32) -> Result<PathBuf, BenchError> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("compare.yaml"), SCENARIO)?;
    let path = dir.join("campaign.yaml");
    std::fs::write(&path, campaign(image, trials))?;
    Ok(path)
}

/// Rows of a `runs.jsonl` whose `evidence_status` is `complete` (both tools write it).
fn complete_rows(path: &Path) -> Result<usize, BenchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Failed(format!("failed to read {}: {e}", path.display())))?;
    let mut n = 0;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let row: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| BenchError::Failed(format!("failed to parse {} line {}: {e}", path.display(), i + 1)))?;
        if row["evidence_status"] == "complete" {
            n += 1;
        }
    }
    Ok(n)
}

/// The original's deadline for a run of `trials`: generous (its own start-up deadline is 30 s
/// a trial), so that only a hung run reaches it.
pub fn original_deadline(trials: u32) -> Duration {
    Duration::from_secs(60 + 30 * u64::from(trials))
}

/// Run the original once: `EXE run --config CAMPAIGN --out OUT`, its `bin` first on `PATH`.
/// At the deadline it gets SIGINT (its own clean-up of containers and networks runs), then
/// SIGKILL 15 s later. Returns the wall time.
async fn run_original(exe: &Path, campaign: &Path, out: &Path, deadline: Duration) -> Result<Duration, BenchError> {
    let mut path = vec![exe.parent().map(Path::to_path_buf).unwrap_or_default()];
    if let Some(p) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&p));
    }
    let path = std::env::join_paths(path).map_err(|e| BenchError::Failed(format!("failed to build PATH: {e}")))?;
    let log = out.with_extension("log");
    let log_file = std::fs::File::create(&log)?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(exe)
        .arg("run")
        .arg("--config")
        .arg(campaign)
        .arg("--out")
        .arg(out)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::Failed(format!("failed to start the original {}: {e}", exe.display())))?;
    let status = match tokio::time::timeout(deadline, child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT);
            }
            if tokio::time::timeout(Duration::from_secs(15), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
            return Err(BenchError::Failed(format!(
                "the original did not finish within {} s; the end of its output:\n{}",
                deadline.as_secs(),
                log_tail(&log)
            )));
        }
    };
    let wall = started.elapsed();
    if !status.success() {
        return Err(BenchError::Failed(format!(
            "the original failed ({status}); the end of its output:\n{}",
            log_tail(&log)
        )));
    }
    Ok(wall)
}

/// The last lines of the original's output (its scratch directory is removed on return).
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

async fn run_ours(campaign: &Path, out: &Path, jobs: usize, settings: &BenchSettings) -> Result<Duration, BenchError> {
    let bundle = load::load_campaign(campaign, &LoadOptions::default())?;
    let options = RunOptions {
        jobs,
        sandbox: run::SandboxChoice::Docker(settings.docker.clone()),
        events: settings.events.clone(),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let report = run::start(&bundle, out, false, &options).await?;
    let wall = started.elapsed();
    if report.end != run::RunEnd::Complete {
        return Err(BenchError::Failed(format!(
            "the comparison run at --jobs {jobs} did not complete: {:?}; see {}",
            report.end,
            out.display()
        )));
    }
    Ok(wall)
}

/// Run the comparison: `trials` model-free trials on `original.image`, once by the original
/// and by us at `--jobs 1` and `--jobs 4`; every run must record every trial complete.
pub async fn compare(
    original: &OriginalSettings,
    trials: u32,
    settings: &BenchSettings,
) -> Result<OriginalComparison, BenchError> {
    let dir = tempfile::Builder::new().prefix("elengtis-bench-original-").tempdir()?;
    let campaign = write_inputs(&dir.path().join("inputs"), &original.image, trials)?;
    // Fail before any run when this build refuses the campaign (the image is checked by the
    // first run).
    load::load_campaign(&campaign, &LoadOptions::default())?;
    let want = usize::try_from(trials).unwrap_or(usize::MAX);
    let check = |out: &Path, who: &str| -> Result<(), BenchError> {
        let n = complete_rows(&out.join("runs.jsonl"))?;
        if n == want {
            Ok(())
        } else {
            Err(BenchError::Failed(format!(
                "{who} recorded {} complete, not {trials}; see {}",
                elengtis_core::format::quote::count(n, "trial"),
                out.display()
            )))
        }
    };
    let out = dir.path().join("original");
    let original_wall = run_original(&original.exe, &campaign, &out, original_deadline(trials)).await?;
    check(&out, "the original")?;
    let out = dir.path().join("jobs1");
    let jobs1 = run_ours(&campaign, &out, 1, settings).await?;
    check(&out, "elengtis --jobs 1")?;
    let out = dir.path().join("jobs4");
    let jobs4 = run_ours(&campaign, &out, 4, settings).await?;
    check(&out, "elengtis --jobs 4")?;
    let per_trial = |wall: Duration| wall.as_secs_f64() / f64::from(trials);
    Ok(OriginalComparison {
        original_image: Some(original.image.clone()),
        original_trials: Some(trials),
        original_per_trial_s: Some(per_trial(original_wall)),
        ours_jobs1_per_trial_s: Some(per_trial(jobs1)),
        ours_jobs4_per_trial_s: Some(per_trial(jobs4)),
        ours_original_ratio_jobs1: Some(jobs1.as_secs_f64() / original_wall.as_secs_f64()),
        ours_original_ratio_jobs4: Some(jobs4.as_secs_f64() / original_wall.as_secs_f64()),
        original_unmeasured: None,
    })
}

/// The comparison's lines of the table.
pub fn render(c: &OriginalComparison) -> String {
    match (c.original_per_trial_s, c.ours_jobs1_per_trial_s, c.ours_jobs4_per_trial_s) {
        (Some(o), Some(j1), Some(j4)) => format!(
            "against the original {:.3} s/trial (0.1.0, sequential) on {} ({})\n\
             \x20                    ours {:.3} s/trial at --jobs 1 ({:.2}× its time), {:.3} s/trial at --jobs 4 ({:.2}×)\n",
            o,
            c.original_image.as_deref().unwrap_or("?"),
            elengtis_core::format::quote::count(c.original_trials.unwrap_or(0), "trial"),
            j1,
            c.ours_original_ratio_jobs1.unwrap_or(f64::NAN),
            j4,
            c.ours_original_ratio_jobs4.unwrap_or(f64::NAN),
        ),
        _ => format!("against the original not measured: {}\n", c.original_unmeasured.as_deref().unwrap_or("?")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_rows_counts_only_complete_and_names_a_bad_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs.jsonl");
        std::fs::write(
            &path,
            "{\"evidence_status\": \"complete\"}\n{\"evidence_status\":\"incomplete\"}\n\n{\"evidence_status\":\"complete\"}\n",
        )
        .expect("write");
        assert_eq!(complete_rows(&path).expect("rows"), 2);
        std::fs::write(&path, "{\"evidence_status\":\"complete\"}\nnot json\n").expect("write");
        let err = complete_rows(&path).expect_err("a bad line").to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn the_campaign_loads_with_the_trials_and_the_original_fixture_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_inputs(dir.path(), "elengtis/original-fixture:0.1.0", 7).expect("inputs");
        let bundle = load::load_campaign(&path, &LoadOptions::default()).expect("loads");
        assert_eq!(bundle.campaign.value.trials, 7);
        assert!(bundle.campaign.value.model_free);
        let text = serde_json::to_string(&bundle.campaign.value.targets).expect("json");
        assert!(text.contains("\"--host\",\"0.0.0.0\""), "{text}");
    }
}
