//! `elengtis ablate`: which controls of a guarded side carry the security against a seed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::SandboxChoice;
use serde_json::json;

use super::common::{EngineArgs, ensure_images, target_file};
use crate::output::{out, outln};
use crate::render::{OutputArgs, Terminal};

#[derive(Debug, clap::Args)]
pub(crate) struct AblateArgs {
    /// The seed file (`scenarios/seeds/<id>.seed.yaml`).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    seed: Option<PathBuf>,
    /// Ablate against every `*.seed.yaml` in --seeds-dir (the matrix: seeds × controls).
    #[arg(long)]
    all: bool,
    /// Where the seed catalogue lives (for --all).
    #[arg(long, value_name = "DIR", default_value = "scenarios/seeds")]
    seeds_dir: PathBuf,
    /// Your own target (FILE holds one campaign target whose `control_env`/`control_args`
    /// declare its controls); without it, the reference twin's guards W1–W4.
    #[arg(long, value_name = "FILE")]
    target: Option<PathBuf>,
    /// Also run each control on alone, to tell a redundant control (stops the attack alone,
    /// not needed next to the others) from theatre (does not stop it).
    #[arg(long)]
    redundancy: bool,
    /// Runs per configuration.
    #[arg(long, default_value_t = elengtis_core::prove::filter::GATE_ITERATIONS, value_parser = clap::value_parser!(u32).range(1..=100))]
    iterations: u32,
    /// Legs run at once (one pool for every configuration of every seed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Results root (a directory per seed). Default: `ablate-<UTC time>`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the matrix.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    docker: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(crate) async fn run(args: AblateArgs) -> Result<i32, Error> {
    use elengtis::prove::{self, ProveOptions};
    use elengtis_core::prove::ablation::render_matrix;
    let seeds = match (&args.seed, args.all) {
        (Some(seed), false) => vec![seed.clone()],
        (None, true) => prove::seeds_in(&args.seeds_dir)?,
        _ => return Err(Error::Usage("give --seed FILE or --all".into())),
    };
    let target = args.target.as_deref().map(target_file).transpose()?;
    if let Some(t) = &target
        && prove::declared_controls(t).is_empty()
    {
        return Err(Error::Usage(format!(
            "{} declares no control to ablate: add `control_env: {{NAME: {{VARIABLE: value}}}}` or `control_args`",
            args.target.as_deref().unwrap_or(Path::new("")).display()
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
        PathBuf::from(format!("ablate-{stamp}"))
    });
    if target.as_ref().is_none_or(|t| t["transport"]["type"] == "isolated_container") {
        ensure_images(&args.docker.options()).await?;
    }
    let terminal = Arc::new(Terminal::for_command(&args.output, args.json)?);
    let options = ProveOptions {
        iterations: args.iterations,
        jobs: args.jobs.into(),
        out: out.clone(),
        metamorphic: false,
        sandbox: SandboxChoice::Docker(args.docker.options()),
        events: Arc::new(prove::WarnOnce::new(terminal.clone())),
        target,
        ..ProveOptions::default()
    };
    let result = prove::ablate::ablate_seeds(&seeds, &options, args.redundancy, |a| {
        if !args.json {
            terminal.print(&format!("{}: {}\n", a.report.seed, a.report_path.display()));
        }
    })
    .await;
    terminal.finish();
    let ablated = result?;
    let reports: Vec<_> = ablated.iter().map(|a| a.report.clone()).collect();
    let code = if reports.iter().all(elengtis_core::prove::ablation::AblationReport::decided) {
        exit_codes::SUCCESS
    } else {
        exit_codes::NO_EVIDENCE
    };
    if args.json {
        outln!("{}", json!({"out": out, "exit_code": code, "reports": reports}));
    } else {
        outln!("ablation of {}", reports.first().map_or("", |r| r.subject.as_str()));
        out!("{}", render_matrix(&reports));
        for r in &reports {
            for row in r.controls.iter().filter(|row| row.role == elengtis_core::prove::ablation::Role::NotTested) {
                outln!("{} / {}: not tested: {}", r.seed, row.control, row.why);
            }
        }
    }
    Ok(code)
}
