//! `elengtis gc`: remove what elengtis left behind (Docker objects, or a dead run's stdio targets).

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::sandbox::docker;
use serde_json::json;

use crate::output::{errln, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct GcArgs {
    /// Remove every object of this run id, even if its runner is alive.
    #[arg(long)]
    run: Option<String>,
    /// Instead of Docker objects: kill the stdio targets a killed run recorded in this
    /// results directory (`stdio-live/`), unless the run is still live (holds its lock).
    #[arg(long, conflicts_with = "run")]
    out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: GcArgs) -> Result<i32, Error> {
    match args {
        GcArgs { out: Some(out), json, .. } => gc_stdio(&out, json),
        GcArgs { run, json, out: None } => gc(run.as_deref(), json).await,
    }
}

async fn gc(run: Option<&str>, json: bool) -> Result<i32, Error> {
    let engine = docker::api::connect().await?;
    let report = docker::gc::sweep(&engine, run).await?;
    if json {
        outln!("{}", json!(report));
    } else {
        for (kind, names) in
            [("container", &report.containers), ("network", &report.networks), ("volume", &report.volumes)]
        {
            for name in names {
                outln!("removed {kind} {name}");
            }
        }
        for e in &report.errors {
            errln!("error: {e}");
        }
        for kept in &report.kept {
            let run = kept.strip_prefix("run ").and_then(|k| k.split(':').next()).unwrap_or("ID");
            outln!("{kept}; remove them anyway with `elengtis gc --run {run}`");
        }
        if report.is_empty() && report.kept.is_empty() {
            outln!("nothing to remove");
        }
    }
    Ok(if report.errors.is_empty() { exit_codes::SUCCESS } else { exit_codes::RUN_INCOMPLETE })
}

/// `gc --out DIR`: reap the stdio leftovers a dead run recorded.
fn gc_stdio(out: &Path, json: bool) -> Result<i32, Error> {
    let reaped = if !out.join(elengtis::toolhost::mcp::LIVE_DIR).is_dir() {
        Vec::new()
    } else {
        match elengtis::results::store::DirLock::acquire(out) {
            Ok(_lock) => elengtis::toolhost::mcp::reap_stdio_leftovers(out),
            Err(e) => {
                let message = format!("kept the stdio targets of {}: {e}", out.display());
                if json {
                    outln!("{}", json!({"stdio": [], "kept": [message]}));
                } else {
                    outln!("{message}");
                }
                return Ok(exit_codes::SUCCESS);
            }
        }
    };
    if json {
        outln!("{}", json!({"stdio": reaped, "kept": []}));
    } else if reaped.is_empty() {
        outln!("nothing to remove");
    } else {
        for r in &reaped {
            outln!("reaped stdio record {}: {}", r.record, r.detail);
        }
    }
    Ok(exit_codes::SUCCESS)
}
