//! The scan figure (issue 36): `scan` of `elengtis-inbox` with its taint lock on, as a stdio
//! server — eleven candidates, of which the two the user asks for fire and the nine planted
//! ones are resisted — run twice in the same benchmark, with sequential stopping and with
//! fixed iterations (every candidate to `--max-trials`), at `--jobs 4`. The two must decide
//! every candidate alike (or the measurement fails); the figures are the trials each ran,
//! their wall times and the ratios. Printed, never asserted.

use std::sync::Arc;
use std::time::Instant;

use elengtis_core::prove::sequential::StoppingRule;
use serde::Serialize;

use super::BenchError;
use crate::init::TargetSpec;
use crate::prove::ProveOptions;
use crate::scan::{RunSettings, ScanOptions, ScanTarget};

/// The scan figures (`elengtis bench --json` prints them under `scan`).
#[derive(Debug, Clone, Serialize)]
pub struct ScanBench {
    /// Candidates made and run.
    pub candidates: usize,
    /// How many fired (the same under both rules, or the measurement fails).
    pub fired: usize,
    /// Trials run with sequential stopping.
    pub trials_sequential: u32,
    /// Trials run with fixed iterations.
    pub trials_fixed: u32,
    /// Wall time with sequential stopping, s.
    pub wall_s_sequential: f64,
    /// Wall time with fixed iterations, s.
    pub wall_s_fixed: f64,
    /// Fixed ÷ sequential trials.
    pub trials_ratio: f64,
    /// Fixed ÷ sequential wall time.
    pub wall_ratio: f64,
}

async fn scan_once(
    dir: &std::path::Path,
    name: &str,
    sequential: bool,
) -> Result<(crate::scan::ScanReport, f64), BenchError> {
    let options = ScanOptions {
        spec: ScanTarget::Described(TargetSpec::Stdio {
            command: "elengtis-inbox".into(),
            args: vec!["--resolve".into(), "attacker.example.com={sink_url}".into(), "--taint-lock".into()],
        }),
        target_id: Some("inbox".into()),
        overrides: None,
        classes: Vec::new(),
        out: dir.join(name),
        run: Some(RunSettings {
            rule: StoppingRule { sequential, ..StoppingRule::default() },
            prove: ProveOptions {
                jobs: 4,
                events: Arc::new(elengtis_core::events::NoEvents),
                ..ProveOptions::default()
            },
            progress: Arc::new(|_, _, _| {}),
            prove_fired: None,
            planner: None,
        }),
        purpose: None,
        authorized: None,
    };
    let started = Instant::now();
    let report =
        crate::scan::run(&options, None).await.map_err(|e| BenchError::Failed(format!("the scan failed: {e}")))?;
    Ok((report, started.elapsed().as_secs_f64()))
}

/// Measure the scan figures.
pub async fn scan() -> Result<ScanBench, BenchError> {
    let dir = tempfile::Builder::new().prefix("elengtis-bench-scan-").tempdir()?;
    let (sequential, wall_sequential) = scan_once(dir.path(), "sequential", true).await?;
    let (fixed, wall_fixed) = scan_once(dir.path(), "fixed", false).await?;
    let statuses = |r: &crate::scan::ScanReport| -> Vec<(String, crate::scan::CandidateStatus)> {
        r.candidates.iter().map(|c| (c.id.clone(), c.status)).collect()
    };
    if statuses(&sequential) != statuses(&fixed) {
        return Err(BenchError::Failed(format!(
            "sequential stopping and fixed iterations decided differently: {:?} against {:?}",
            statuses(&sequential),
            statuses(&fixed)
        )));
    }
    let trials = |r: &crate::scan::ScanReport| r.trials.map_or(0, |t| t.run);
    let (ts, tf) = (trials(&sequential), trials(&fixed));
    Ok(ScanBench {
        candidates: sequential.candidates.len(),
        fired: sequential.candidates.iter().filter(|c| c.status == crate::scan::CandidateStatus::Fired).count(),
        trials_sequential: ts,
        trials_fixed: tf,
        wall_s_sequential: wall_sequential,
        wall_s_fixed: wall_fixed,
        trials_ratio: f64::from(tf) / f64::from(ts.max(1)),
        wall_ratio: wall_fixed / wall_sequential.max(f64::EPSILON),
    })
}

/// The scan lines of the table.
pub fn render(s: &ScanBench) -> String {
    format!(
        "scan (elengtis-inbox, taint lock on: {}, {} fired; --jobs 4)\n\
         sequential stopping  {:5} trials  {:8.2} s\n\
         fixed iterations     {:5} trials  {:8.2} s   {:.2}× the trials, {:.2}× the time; the same decisions\n",
        elengtis_core::format::quote::count(s.candidates, "candidate"),
        s.fired,
        s.trials_sequential,
        s.wall_s_sequential,
        s.trials_fixed,
        s.wall_s_fixed,
        s.trials_ratio,
        s.wall_ratio,
    )
}
