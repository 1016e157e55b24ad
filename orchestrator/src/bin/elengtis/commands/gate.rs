//! `elengtis gate`: run (or add to, or re-record) the committed regression of proven findings.

use std::path::PathBuf;
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::SandboxChoice;
use serde_json::json;

use super::common::{EngineArgs, ensure_images, partition_arg};
use crate::output::outln;
use crate::render::{Terminal, interactive};

#[derive(Debug, clap::Args)]
pub(crate) struct GateArgs {
    /// The gate file.
    #[arg(long, value_name = "FILE", default_value = "scenarios/gate/gate.yaml")]
    file: PathBuf,
    /// Append a finding `elengtis scan --prove` proved KEPT to the gate file (created if
    /// missing) instead of running the gate: SEED is its `<scan>/candidates/<id>.seed.yaml`.
    #[arg(long, value_name = "SEED", conflicts_with_all = ["record", "findings"])]
    add: Option<PathBuf>,
    /// Re-record the reference findings' fixtures with the gate file's live model, and lock
    /// each directory whose recording proves KEPT with every leg decided.
    #[arg(long)]
    record: bool,
    /// Only this finding (its seed id; repeat, or list several).
    #[arg(long = "finding", value_name = "SEED_ID", num_args = 1.., action = clap::ArgAction::Append)]
    findings: Vec<String>,
    /// Re-prove one shard of the gate file's findings (`K/N`, `count:K/N`, `hash:K/N`,
    /// `index/N`; as `run --partition`, over the findings in file order, `hash:` by seed id).
    /// A shard with no finding succeeds and says so. Also ELENGTIS_PARTITION.
    #[arg(long, env = "ELENGTIS_PARTITION", value_name = "SPEC")]
    partition: Option<String>,
    /// Serve the live model from this base URL instead of the provider's (recording, custom
    /// findings).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Where the seed catalogue lives (for the kill matrix).
    #[arg(long, value_name = "DIR", default_value = "scenarios/seeds")]
    seeds_dir: PathBuf,
    /// Also write the findings that are not alerts into findings.sarif: `kind: pass` (the
    /// side you ship held) or `kind: open` (it decided nothing), at level `none` without a
    /// security-severity. By default only alerts are written: a side you ship that let the
    /// attack through (docs/prove.md, "SARIF").
    #[arg(long)]
    sarif_include_rejected: bool,
    /// Legs run at once (each leg in its own fresh container).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Results root (a directory per finding). Default: `gate-<UTC time>` in the working
    /// directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    docker: EngineArgs,
}

pub(crate) async fn run(args: GateArgs) -> Result<i32, Error> {
    use elengtis::gate::{self, GateOptions, Status};
    if let Some(seed) = &args.add {
        use elengtis::gate::add::AddError;
        let added = elengtis::gate::add::add(&args.file, seed).map_err(|e| match e {
            e @ AddError::Refused { .. } => Error::Usage(e.to_string()),
            AddError::Load(e) => Error::from(e),
            AddError::Io { what, path, source } => Error::Io { what, path, source },
            AddError::Write(e) => Error::from(e),
        })?;
        if args.json {
            outln!("{}", json!({"file": args.file, "added": added.seed_id, "created": added.created}));
        } else {
            outln!(
                "{} {} to {}:\n{}",
                if added.created { "Created the gate with" } else { "Added" },
                added.seed_id,
                args.file.display(),
                added.entry.trim_end()
            );
        }
        return Ok(exit_codes::SUCCESS);
    }
    let loaded = elengtis_core::format::gate::load_gate(&args.file)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
        PathBuf::from(format!("gate-{stamp}"))
    });
    let partition = partition_arg(args.partition.as_deref())?;
    let catalogue = elengtis::prove::catalogue(&args.seeds_dir);
    let terminal = Arc::new(Terminal::new(interactive() && !args.json));
    let options = GateOptions {
        jobs: args.jobs.into(),
        out: out.clone(),
        sandbox: SandboxChoice::Docker(args.docker.options()),
        events: Arc::new(elengtis::prove::WarnOnce::new(terminal.clone())),
        record: args.record,
        only: args.findings.clone(),
        base_url: args.base_url.clone(),
        partition,
        ..GateOptions::default()
    }
    .from_env();
    // Only the reference twins and container targets need the engine and the bundled images:
    // a shard with no finding to re-prove, or only stdio targets of your own, contacts none.
    let selected = gate::select(&loaded, &options)?.0;
    if selected.iter().any(|f| gate::needs_engine(f, &options)) {
        ensure_images(&args.docker.options()).await?;
    }
    let outcome = gate::run(&loaded, &catalogue, &options).await;
    terminal.finish();
    let outcome = outcome?;
    // Outcomes are in the selection's order (the file's).
    let proven: Vec<_> = selected
        .iter()
        .zip(&outcome.findings)
        .filter_map(|(finding, outcome)| {
            outcome.report.as_ref().map(|r| (r, elengtis::sarif::gate_lines(&loaded, finding)))
        })
        .collect();
    let sarif = out.join("findings.sarif");
    if !proven.is_empty() {
        let sarif_options = elengtis_core::prove::SarifOptions { include_undecided: args.sarif_include_rejected };
        let findings: Vec<_> =
            proven.iter().map(|(report, locations)| elengtis_core::prove::SarifFinding { report, locations }).collect();
        elengtis::prove::outputs::write_sarif(&sarif, &findings, &sarif_options)?;
    }
    let code = match outcome.status {
        Status::Passed | Status::Skipped => exit_codes::SUCCESS,
        Status::NoEvidence => exit_codes::NO_EVIDENCE,
        Status::Rejected => exit_codes::REJECTED,
        Status::NotProven => exit_codes::NOT_PROVEN,
    };
    if args.json {
        outln!(
            "{}",
            json!({"status": outcome.status, "exit_code": code, "recorded": outcome.recorded, "out": out,
                   "sarif": (!proven.is_empty()).then_some(&sarif), "partition": outcome.partition,
                   "findings": outcome.findings})
        );
    } else {
        for f in &outcome.findings {
            outln!("{:<40} {:<9} {}", f.seed, f.kind, f.status.as_str());
            for line in &f.details {
                outln!("    {line}");
            }
        }
        if let Some(shard) = &outcome.partition {
            outln!("{}", shard.line());
            if outcome.findings.is_empty() {
                outln!("nothing to re-prove in this shard");
            }
        }
        let what = if outcome.recorded { "gate --record" } else { "gate" };
        outln!("{what}: {} (exit {code}); results in {}", outcome.status.as_str(), out.display());
    }
    Ok(code)
}
