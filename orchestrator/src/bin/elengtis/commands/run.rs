//! `elengtis run`: run a campaign, or continue one with --resume.

use std::path::PathBuf;
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::{self, RunEnd, RunReport};
use elengtis_core::format::campaign::{LoopKind, ProviderKind};
use elengtis_core::format::quote::count;
use elengtis_core::load;
use elengtis_core::validate::{LoadOptions, Overrides};
use serde_json::json;

use super::common::{EngineArgs, fixture_mode, partition_arg, print_warnings, run_options};
use crate::output::{errln, out, outln};
use crate::render::{OutputArgs, Terminal};

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The campaign file (required for a new run).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Results directory: new for a run, existing with --resume.
    #[arg(long)]
    out: PathBuf,
    /// Continue the run in --out: skip complete trials, retry the rest.
    #[arg(long, conflicts_with = "resume_or_start")]
    resume: bool,
    /// With --config: resume the run in --out when it holds one of this campaign (and its
    /// scenarios), else start it there — what a retried job runs (a Kubernetes Indexed Job's
    /// index run again, a CI retry). A directory of another campaign, or holding anything but
    /// an earlier try's start, is refused (exit 4).
    #[arg(long)]
    resume_or_start: bool,
    /// Override `trials`.
    #[arg(long)]
    trials: Option<u32>,
    /// Override `step_budget`.
    #[arg(long)]
    step_budget: Option<u32>,
    /// Override `engine` (the agent loop).
    #[arg(long)]
    engine: Option<LoopKind>,
    /// Override `model`.
    #[arg(long)]
    model: Option<String>,
    /// Override `provider.type`: openrouter, openai_compatible or anthropic.
    #[arg(long, value_name = "KIND")]
    provider: Option<ProviderKind>,
    /// Stop the run cleanly before a model request could take the spend over USD dollars
    /// (kept for resumes; a resume's value replaces it). Needs the model's price.
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    budget_usd: Option<f64>,
    /// Add or replace model prices from a JSON file
    /// (`{"MODEL": {"input_per_million": USD, "output_per_million": USD}}`).
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Write each live model request's final answer into DIR as a fixture (keyed by a hash
    /// of provider, model, generation settings, conversation and tools).
    #[arg(long, value_name = "DIR", conflicts_with = "replay_fixtures")]
    record_fixtures: Option<PathBuf>,
    /// Answer every live model request from the fixtures in DIR, offline; a missing,
    /// corrupt or other-version fixture is a provider error naming its key.
    #[arg(long, value_name = "DIR")]
    replay_fixtures: Option<PathBuf>,
    /// Trials run at once (isolated trials are independent; stdio trials too).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Trials whose target is prepared ahead of a free slot: their sandbox (network,
    /// container, MCP handshake) is opened while --jobs others run their sessions, and
    /// teardown runs off the critical path (see docs/performance.md). 0 turns it off.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=64))]
    prepare_ahead: u16,
    /// Run one shard of the trial matrix: `K/N` or `count:K/N` (the i-th trial, 0-based, is
    /// in shard i mod N + 1), `hash:K/N` (by a SHA-256 of the trial id), `index/N` (K =
    /// JOB_COMPLETION_INDEX + 1, a Kubernetes Indexed Job's index). K is 1-based, like
    /// nextest's. A resume keeps the run's shard. Merge the shards with `elengtis merge`.
    #[arg(long, env = "ELENGTIS_PARTITION", value_name = "SPEC")]
    partition: Option<String>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// After the summary, print every trial's line (by default only trials without a
    /// complete attempt get one).
    #[arg(long)]
    verbose: bool,
    #[command(flatten)]
    docker: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) async fn run(args: RunArgs) -> Result<i32, Error> {
    let overrides = Overrides {
        trials: args.trials,
        step_budget: args.step_budget,
        engine: args.engine,
        model: args.model.clone(),
        provider: args.provider,
    };
    if args.resume && (args.config.is_some() || !overrides.is_empty()) {
        return Err(Error::Usage(
            "--resume continues the run exactly as it was started; it takes no --config or overrides".into(),
        ));
    }
    let bundle = match &args.config {
        None if args.resume => None,
        None => {
            let flag = if args.resume_or_start { "--resume-or-start" } else { "a new run" };
            return Err(Error::Usage(format!("{flag} needs --config CAMPAIGN (or --resume to continue --out)")));
        }
        Some(config) => {
            let mut bundle = load::load_campaign(config, &LoadOptions::default())?;
            print_warnings(&bundle.warnings);
            load::apply_overrides(&mut bundle, &overrides)?;
            Some(bundle)
        }
    };
    let plan = match &bundle {
        Some(bundle) if args.resume_or_start => run::resume_or_start(bundle, &args.out)?,
        Some(_) => run::ResumeOrStart::Start,
        None => run::ResumeOrStart::Resume,
    };
    let terminal = Terminal::for_command(&args.output, args.json)?;
    let resuming = plan == run::ResumeOrStart::Resume;
    let terminal = Arc::new(if resuming { terminal.with_resume_plan() } else { terminal });
    let mut options = run_options(args.jobs, args.docker.options(), terminal.clone());
    options.prepare_ahead = args.prepare_ahead.into();
    options.model = model_options(&args)?;
    options.partition = partition_arg(args.partition.as_deref())?;
    let result = match (plan, &bundle) {
        (run::ResumeOrStart::Resume, _) => run::resume(&args.out, &options).await,
        (start, Some(bundle)) => {
            run::start(bundle, &args.out, start == run::ResumeOrStart::StartInPlace, &options).await
        }
        (_, None) => return Err(Error::Usage("a new run needs --config CAMPAIGN".into())),
    };
    terminal.finish();
    Ok(report(&result?, args.json, args.verbose, terminal.quiet()))
}

/// A run's end (`run`, `example`): its summary (or one JSON object), the exit code it means.
pub(super) fn report(report: &RunReport, json: bool, verbose: bool, quiet: bool) -> i32 {
    if let Some(leftovers) = report.leftovers.as_ref().filter(|l| !l.is_empty() && !quiet) {
        errln!(
            "note: removed leftovers of an earlier attempt of this run: {}, {}, {}",
            count(leftovers.containers.len(), "container"),
            count(leftovers.networks.len(), "network"),
            count(leftovers.volumes.len(), "volume")
        );
    }
    if let Some((offset, bytes)) = report.recovered_tail.filter(|_| !quiet) {
        errln!(
            "note: cut a torn final row ({bytes} bytes at offset {offset}) left in runs.jsonl by an interrupted run; that attempt is retried"
        );
    }
    let (code, message) = match &report.end {
        RunEnd::Complete => (exit_codes::SUCCESS, None),
        RunEnd::Incomplete(m) | RunEnd::Stopped(m) => (exit_codes::RUN_INCOMPLETE, Some(m.clone())),
        RunEnd::Interrupted => (
            exit_codes::interrupted(),
            Some(format!(
                "interrupted; the trial in progress was not recorded. Continue with `elengtis run --resume --out {}`",
                report.out.display()
            )),
        ),
    };
    if json {
        outln!(
            "{}",
            json!({
                "out": report.out, "run_id": report.run_id, "attempts": report.attempts_now,
                "end": match &report.end { RunEnd::Complete => "complete", RunEnd::Incomplete(_) => "incomplete", RunEnd::Stopped(_) => "stopped", RunEnd::Interrupted => "interrupted" },
                "message": message, "summary": report.summary, "trials": report.trial_lines.lines().collect::<Vec<_>>(),
            })
        );
    } else {
        out!("{}", report.summary);
        if verbose {
            out!("{}", report.trial_lines);
        }
        outln!("results: {}", report.out.display());
        if let Some(m) = message {
            errln!("error: {m}");
        }
    }
    code
}

/// A dollar amount: a positive, finite number.
fn parse_usd(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!("expected a positive amount of US dollars, found `{text}`")),
    }
}

/// The live-model options of `run`.
fn model_options(args: &RunArgs) -> Result<elengtis::model::ModelOptions, Error> {
    use elengtis::model::pricing::PriceTable;
    let mut prices = PriceTable::builtin();
    if let Some(path) = &args.prices {
        prices.extend_from_file(path).map_err(|e| Error::Usage(e.to_string()))?;
    }
    let fixtures = fixture_mode(args.record_fixtures.as_ref(), args.replay_fixtures.as_ref());
    Ok(elengtis::model::ModelOptions { budget_usd: args.budget_usd, prices, fixtures })
}
