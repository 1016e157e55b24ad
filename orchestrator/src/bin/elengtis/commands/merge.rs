//! `elengtis merge`: merge the shards of one campaign into one results directory.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis_core::format::quote::count;
use serde_json::json;

use crate::output::{errln, out, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// A shard's results directory (repeat, or list several).
    #[arg(long = "input", value_name = "SHARD", required = true, num_args = 1.., action = clap::ArgAction::Append)]
    inputs: Vec<PathBuf>,
    /// The merged results directory (must not exist).
    #[arg(long)]
    out: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: MergeArgs) -> Result<i32, Error> {
    merge_command(&args.inputs, &args.out, args.json)
}

fn merge_command(inputs: &[PathBuf], out: &Path, json: bool) -> Result<i32, Error> {
    use elengtis::merge::{self, MergeOptions};
    let mut options = MergeOptions::from_env(false).map_err(elengtis::run::RunError::Key)?;
    // A key given asks for sealed shards signed by it.
    options.verify.require_sealed = !options.keys.is_empty();
    let started = std::time::Instant::now();
    let report = merge::merge(inputs, out, &options)?;
    let code = if report.gaps.is_empty() { exit_codes::SUCCESS } else { exit_codes::RUN_INCOMPLETE };
    let gap_command = |gap: &merge::Gap| match &gap.dir {
        Some(dir) => format!(
            "elengtis run --resume --partition {}:{}/{} --out {}",
            report.scheme.as_str(),
            gap.shard,
            report.total,
            dir.display()
        ),
        None => format!(
            "elengtis run --config {} --partition {}:{}/{} --out SHARD_DIR",
            report.campaign_path,
            report.scheme.as_str(),
            gap.shard,
            report.total
        ),
    };
    if json {
        outln!(
            "{}",
            json!({
                "out": report.out, "run_id": report.run_id, "scheme": report.scheme.as_str(), "total": report.total,
                "trials": report.trials, "rows": report.rows,
                "status": report.status, "seal_sha256": report.seal_sha256,
                "spend_usd": report.spend_usd(), "budget_usd": report.budget_usd(),
                "shards": report.shards.iter().map(|s| json!({
                    "dir": s.dir, "shard": s.shard, "run_id": s.run_id, "rows": s.rows, "status": s.status,
                    "seal_sha256": s.seal_sha256, "spend_usd": s.spend_usd, "budget_usd": s.budget_usd,
                })).collect::<Vec<_>>(),
                "gaps": report.gaps.iter().map(|g| json!({
                    "shard": g.shard, "dir": g.dir, "not_run": g.not_run, "incomplete": g.incomplete, "command": gap_command(g),
                })).collect::<Vec<_>>(),
                "not_run": report.gaps.iter().map(|g| g.not_run.len()).sum::<usize>(),
                "elapsed_ms": started.elapsed().as_millis() as u64,
            })
        );
        return Ok(code);
    }
    outln!(
        "merged {} of {} ({}): {}, {}",
        report.shards.len(),
        count(report.total, "shard"),
        report.scheme.as_str(),
        count(report.trials, "trial"),
        count(report.rows, "row")
    );
    for s in &report.shards {
        outln!(
            "  shard {}/{}: {} (run {}), {}, sealed {}, seal sha256 {}",
            s.shard,
            report.total,
            s.dir.display(),
            s.run_id,
            count(s.rows, "row"),
            serde_json::to_value(s.status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            s.seal_sha256
        );
    }
    if report.shards.iter().any(|s| s.budget_usd.is_some() || s.spend_usd > 0.0) {
        match report.budget_usd() {
            Some(cap) => outln!("spend: ${:.6} across shards, of caps totalling ${cap:.6}", report.spend_usd()),
            None => outln!("spend: ${:.6} across shards", report.spend_usd()),
        }
    }
    out!("{}", report.summary);
    outln!("results: {} (sealed, seal sha256 {})", report.out.display(), report.seal_sha256);
    for gap in &report.gaps {
        let (not_run, incomplete) = (gap.not_run.len(), gap.incomplete.len());
        let what = match &gap.dir {
            None => format!("shard {}/{} was not given: {} not run", gap.shard, report.total, count(not_run, "trial")),
            Some(dir) => format!(
                "shard {}/{} ({}): {} not run, {incomplete} without a complete attempt",
                gap.shard,
                report.total,
                dir.display(),
                count(not_run, "trial")
            ),
        };
        errln!("error: {what}; fill the gap with `{}`, then merge again", gap_command(gap));
    }
    Ok(code)
}
