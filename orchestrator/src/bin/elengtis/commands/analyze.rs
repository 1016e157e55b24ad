//! `elengtis analyze`: summarise results directories, with the engine recommendation.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use crate::output::{errln, out, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// A results directory (repeat, or list several).
    #[arg(long = "input", required = true, num_args = 1.., action = clap::ArgAction::Append)]
    inputs: Vec<PathBuf>,
    /// Where to write summary.json and summary.md.
    #[arg(long)]
    out: PathBuf,
    /// The recommendation's practical margin in percentage points.
    #[arg(long, default_value_t = elengtis_core::analysis::recommend::DEFAULT_PRACTICAL_MARGIN_PP)]
    practical_margin_pp: f64,
    /// The deterministic conformance suite has passed: apply the recommendation rule
    /// (without it the status is `conformance_required`).
    #[arg(long)]
    conformance_passed: bool,
    /// Count the trials of runs of different campaigns together per model × engine ×
    /// scenario, as the original does. Without it each campaign's cells are shown apart
    /// (an attack run and its negative control are two rows); the runs of one experiment
    /// are one campaign.
    #[arg(long)]
    pool: bool,
    /// Count each trial once when inputs hold the same trials (a merged directory given
    /// with its shards, two merges of the same shards, a copy); without it such inputs
    /// are refused, naming both (docs/results.md, "Inputs that overlap").
    #[arg(long)]
    dedupe: bool,
}

pub(crate) fn run(args: AnalyzeArgs) -> Result<i32, Error> {
    use elengtis_core::analysis::{Campaigns, Overlap};
    let AnalyzeArgs { inputs, out, practical_margin_pp, conformance_passed, pool, dedupe } = args;
    let rule = elengtis_core::analysis::RecommendOptions { practical_margin_pp, conformance_passed };
    let campaigns = if pool { Campaigns::Pooled } else { Campaigns::Apart };
    analyze(&inputs, &out, &rule, campaigns, if dedupe { Overlap::Dedupe } else { Overlap::Refuse })
}

fn analyze(
    inputs: &[PathBuf],
    out: &Path,
    rule: &elengtis_core::analysis::RecommendOptions,
    campaigns: elengtis_core::analysis::Campaigns,
    overlap: elengtis_core::analysis::Overlap,
) -> Result<i32, Error> {
    use elengtis::results::verify::Verdict;
    use elengtis_core::analysis::{self, InputIntegrity, RunInput};
    let mut runs = Vec::new();
    for dir in inputs {
        // Analysis reads only what `verify` accepts (with a key, only what it verifies sealed
        // and signed).
        let verification = elengtis::results::verify::read_verified(dir)?;
        let manifest = match (verification.is_readable(), verification.manifest.clone()) {
            (true, Some(manifest)) => manifest,
            _ if verification.verdict() == Verdict::Unverifiable => {
                let why = verification.integrity().says;
                return Err(elengtis::results::verify::NotSealedForKey { dir: dir.clone(), why }.into());
            }
            _ => {
                return Err(Error::Unverified {
                    dir: dir.clone(),
                    count: verification.problems.len(),
                    problems: verification.render_problems(),
                    malformed: verification.is_malformed(),
                });
            }
        };
        if verification.verdict() == Verdict::Unverifiable {
            errln!(
                "note: {}: {}; analysed for its shape only: its integrity cannot be established",
                dir.display(),
                verification.summary_line()
            );
        }
        let integrity = verification.integrity();
        runs.push(RunInput {
            label: dir.display().to_string(),
            manifest,
            rows: verification.row_values,
            matrix: verification.matrix,
            integrity: Some(InputIntegrity { status: integrity.status.to_owned(), says: integrity.says }),
        });
    }
    let analysis = analysis::analyze_counted(&runs, rule, campaigns, overlap)?;
    if analysis.campaigns > 1 {
        errln!(
            "note: the inputs ran {} different campaigns; their cells are shown apart (`--pool` counts them together)",
            analysis.campaigns
        );
    }
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let json_text = serde_json::to_string_pretty(&analysis.json)
        .map_err(|source| Error::Parse { path: out.join("summary.json"), source })?
        + "\n";
    elengtis::results::store::write_atomic(&out.join("summary.json"), json_text.as_bytes())?;
    elengtis::results::store::write_atomic(&out.join("summary.md"), analysis.markdown.as_bytes())?;
    out!("{}", analysis.markdown);
    outln!("wrote {} and {}", out.join("summary.json").display(), out.join("summary.md").display());
    if analysis.not_run > 0 {
        errln!(
            "error: {} trial{} of the recorded matri{} never ran (counted as not run); finish with `elengtis run --resume --out DIR` (a merged directory: resume or run the shard named by `elengtis merge`, then merge again)",
            analysis.not_run,
            if analysis.not_run == 1 { "" } else { "s" },
            if inputs.len() == 1 { "x" } else { "ces" }
        );
        return Ok(exit_codes::RUN_INCOMPLETE);
    }
    Ok(exit_codes::SUCCESS)
}
