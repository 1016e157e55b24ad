//! `elengtis prove`: prove an attack seed against a vulnerable and a guarded side.

use std::path::PathBuf;
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::SandboxChoice;
use elengtis_core::format::quote::count;
use serde_json::json;

use super::common::{EngineArgs, ensure_images, fixture_mode, load_model_config, partition_arg, target_file};
use crate::output::{errln, outln};
use crate::render::{OutputArgs, Terminal};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("live_models").args(["model_config", "judge_config"]).multiple(true)))]
pub(crate) struct ProveArgs {
    /// The seed file (`scenarios/seeds/<id>.seed.yaml`).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    seed: Option<PathBuf>,
    /// Prove every `*.seed.yaml` in --seeds-dir.
    #[arg(long)]
    all: bool,
    /// With --all, prove one shard of the catalogue (`K/N`, `count:K/N`, `hash:K/N`,
    /// `index/N`; as `run --partition`, over the seed files in name order): each seed, with
    /// every leg of it, on one shard. With --seed it is ignored (with a note): one seed's legs
    /// are not split. Also ELENGTIS_PARTITION.
    #[arg(long, env = "ELENGTIS_PARTITION", value_name = "SPEC")]
    partition: Option<String>,
    /// Run one shard of every given seed's legs (`K/N`, `count:K/N`, `hash:K/N`, `index/N`):
    /// each campaign of a seed (repeat, metamorphic, calibration) runs shard K of its frozen
    /// trial matrix, and no verdict is decided. Once every shard is back, `--merge-legs`
    /// decides. Not read from ELENGTIS_PARTITION.
    #[arg(long, value_name = "SPEC", conflicts_with = "merge_legs")]
    leg_partition: Option<String>,
    /// Decide the verdicts from leg shards (`--leg-partition`, one --out directory each),
    /// with the seed(s) and flags the shards ran with: each campaign's shards are merged into
    /// --out (as `elengtis merge` does) and its legs read there. No container is started.
    #[arg(long, value_name = "SHARD_OUT", num_args = 1.., action = clap::ArgAction::Append)]
    merge_legs: Vec<PathBuf>,
    /// Where the seed catalogue lives (for --all and the kill matrix).
    #[arg(long, value_name = "DIR", default_value = "scenarios/seeds")]
    seeds_dir: PathBuf,
    /// Iterations of the repeat filter (runs per side). A keep needs at least 5: fewer cap the
    /// verdict at STABLE, NOT PROVEN (every report states the leak rate its runs rule out).
    #[arg(long, default_value_t = elengtis::prove::DEFAULT_ITERATIONS, value_parser = clap::value_parser!(u32).range(1..=100))]
    iterations: u32,
    /// Legs run at once (each leg in its own fresh container): one pool for every leg of
    /// every seed, repeat and metamorphic alike.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    /// Results root (a directory per seed; must not hold that seed's results yet).
    /// Default: `prove-<UTC time>` in the working directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the trust panels.
    #[arg(long)]
    json: bool,
    /// Skip the metamorphic stage (faster): a finding that passes the rest is then at best
    /// STABLE, NOT PROVEN (exit 8), as nothing shows it survives rewrites of its payload;
    /// failures of the repeat filter still REJECT.
    #[arg(long)]
    no_metamorphic: bool,
    /// Stop each seed's repeat legs as soon as no remaining run could change its verdict (a
    /// guarded leak, or a vulnerable side that can no longer reach its fire rate): the verdict
    /// is always the one fixed iterations give; a keep still runs every iteration. The report
    /// says when and why it stopped (docs/prove.md, "Sequential stopping").
    #[arg(long, conflicts_with_all = ["leg_partition", "merge_legs"])]
    sequential: bool,
    /// Remove a guard from the guarded twin (a test build; repeat, or list several): shows
    /// that prove notices a broken guard.
    #[arg(long = "disable-guard", value_name = "W1|W2|W3|W4", value_parser = parse_weakness, num_args = 1.., action = clap::ArgAction::Append)]
    disable_guard: Vec<elengtis_core::format::seed::Weakness>,
    /// What stands on the guarded side: `twin` (the guarded reference twin, a server-layer
    /// guard; the default without --target), `controls` (your --target with every control
    /// its `control_env`/`control_args` declare switched on, the vulnerable side with them
    /// off; the default when it declares any), `build` (a second build of your server:
    /// --guarded-target), `shim` (the vulnerable side behind the control shim at the MCP
    /// boundary, a stand-in; see docs/shim.md), `network` (the vulnerable twin behind an
    /// allowlisting egress proxy on the trial network, a real network control for W3;
    /// docs/security.md) or `none` (reproduction only: STABLE, NOT PROVEN at best).
    #[arg(long, value_name = "twin|controls|build|shim|network|none", value_parser = parse_guarded_side)]
    guarded_side: Option<elengtis::prove::GuardedSide>,
    /// Prove against a target of your own instead of the reference twins: FILE holds one
    /// campaign target (id, transport, bindings, optionally `control_env`/`control_args`);
    /// the seed's scenario plants the payload through its `payload` binding.
    #[arg(long, value_name = "FILE")]
    target: Option<PathBuf>,
    /// The guarded side is a second build of your server (the patched release, the hardened
    /// build): FILE holds one campaign target, as --target's. Implies --guarded-side build.
    #[arg(long, value_name = "FILE", requires = "target")]
    guarded_target: Option<PathBuf>,
    /// Also write the findings that are not alerts into findings.sarif: `kind: pass` (the
    /// side you ship held) or `kind: open` (it decided nothing), at level `none` without a
    /// security-severity. By default only alerts are written: a side you ship that let the
    /// attack through (docs/prove.md, "SARIF").
    #[arg(long)]
    sarif_include_rejected: bool,
    /// Drive the legs with a live model instead of the seed's script: FILE holds the
    /// campaign's model fields (`model`, and optionally `provider`, `provider_route`,
    /// `generation`, `model_id`), as a gate file's `model`.
    #[arg(long, value_name = "FILE")]
    model_config: Option<PathBuf>,
    /// The LLM judge's model for seeds that declare a `judge` (their rubric decides what it
    /// rules on): FILE holds model fields as --model-config's. It wins over the seed's own
    /// `judge.model`. The judge reads each run's recorded transcript, never the live target,
    /// and never keeps a finding alone (docs/prove.md, "The LLM judge").
    #[arg(long, value_name = "FILE")]
    judge_config: Option<PathBuf>,
    /// Write each live model request's final answer (the agent's and the judge's) into DIR as
    /// a fixture.
    #[arg(long, value_name = "DIR", conflicts_with = "replay_fixtures", requires = "live_models")]
    record_fixtures: Option<PathBuf>,
    /// Answer every live model request (the agent's and the judge's) from the fixtures in DIR,
    /// offline.
    #[arg(long, value_name = "DIR", requires = "live_models")]
    replay_fixtures: Option<PathBuf>,
    #[command(flatten)]
    docker: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
}

fn parse_guarded_side(value: &str) -> Result<elengtis::prove::GuardedSide, String> {
    match value {
        "twin" => Ok(elengtis::prove::GuardedSide::Twin),
        "shim" => Ok(elengtis::prove::GuardedSide::Shim),
        "network" => Ok(elengtis::prove::GuardedSide::Network),
        "none" => Ok(elengtis::prove::GuardedSide::None),
        "build" => Ok(elengtis::prove::GuardedSide::Build),
        "controls" => Ok(elengtis::prove::GuardedSide::Controls),
        other => Err(format!("expected twin, controls, build, shim, network or none, got {other:?}")),
    }
}

fn parse_weakness(value: &str) -> Result<elengtis_core::format::seed::Weakness, String> {
    elengtis_core::format::seed::Weakness::ALL
        .into_iter()
        .find(|w| w.as_str().eq_ignore_ascii_case(value))
        .ok_or_else(|| format!("expected W1, W2, W3 or W4, got {value:?}"))
}

pub(crate) async fn run(args: ProveArgs) -> Result<i32, Error> {
    use elengtis::prove::{self, ProveOptions};
    use elengtis_core::prove::render_panel;
    let seeds = match (&args.seed, args.all) {
        (Some(seed), false) => vec![seed.clone()],
        (None, true) => prove::seeds_in(&args.seeds_dir)?,
        _ => return Err(Error::Usage("give --seed FILE or --all".into())),
    };
    let legs_split = args.leg_partition.is_some() || !args.merge_legs.is_empty();
    if let (Some(spec), true) = (&args.partition, legs_split) {
        errln!(
            "note: --partition {spec} (or ELENGTIS_PARTITION) is not applied with --leg-partition or --merge-legs: \
             every given seed's legs are split instead"
        );
    } else if let (Some(spec), false) = (&args.partition, args.all) {
        errln!(
            "note: --partition {spec} (or ELENGTIS_PARTITION) shards the catalogue of --all; --seed proves its one \
             seed whole, every leg on this machine (to split its legs: --leg-partition, then --merge-legs)"
        );
    }
    let (seeds, shard) = match partition_arg(args.partition.as_deref().filter(|_| args.all && !legs_split))? {
        None => (seeds, None),
        Some(partition) => {
            let (selected, record) = prove::shard_seeds(&seeds, partition);
            errln!("note: shard {partition}: {} of {}", selected.len(), count(seeds.len(), "seed"));
            if selected.is_empty() {
                // A shard with nothing to do succeeds (as nextest's), and says so; no engine
                // is contacted and no directory is created.
                if args.json {
                    outln!(
                        "{}",
                        json!({"out": null, "sarif": null, "verdict": null, "exit_code": exit_codes::SUCCESS,
                               "partition": record, "reports": [], "guarded_notes": []})
                    );
                } else {
                    outln!("{}: nothing to prove", record.line());
                }
                return Ok(exit_codes::SUCCESS);
            }
            (selected, Some(record))
        }
    };
    let (target, guarded_target, guarded_side) = own_targets(&args)?;
    if guarded_side != prove::GuardedSide::Twin && !args.disable_guard.is_empty() {
        return Err(Error::Usage(
            "--disable-guard removes a guard of the guarded twin; it applies to --guarded-side twin only".into(),
        ));
    }
    let live = match &args.model_config {
        None => None,
        Some(path) => Some(load_model_config(path)?),
    };
    let judge = match &args.judge_config {
        None => None,
        Some(path) => Some(load_model_config(path)?),
    };
    let model_options = elengtis::model::ModelOptions {
        fixtures: fixture_mode(args.record_fixtures.as_ref(), args.replay_fixtures.as_ref()),
        ..Default::default()
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
        PathBuf::from(format!("prove-{stamp}"))
    });
    // The bundled images (twins, canary sink, relay) serve the twins and container targets; a
    // prove of your own stdio server needs no container engine at all.
    let in_container =
        |t: &Option<serde_json::Value>| t.as_ref().is_some_and(|t| t["transport"]["type"] == "isolated_container");
    let merging = !args.merge_legs.is_empty();
    if !merging && (target.is_none() || in_container(&target) || in_container(&guarded_target)) {
        ensure_images(&args.docker.options()).await?;
    }
    let catalogue = prove::catalogue(&args.seeds_dir);
    let terminal = Arc::new(Terminal::for_command(&args.output, args.json)?);
    let options = ProveOptions {
        iterations: args.iterations,
        jobs: args.jobs.into(),
        out: out.clone(),
        metamorphic: !args.no_metamorphic,
        disabled: args.disable_guard.clone(),
        sandbox: SandboxChoice::Docker(args.docker.options()),
        events: Arc::new(prove::WarnOnce::new(terminal.clone())),
        thresholds: Default::default(),
        guarded_side,
        live,
        model: model_options,
        target,
        guarded_target,
        partition: shard.clone(),
        slots: None,
        sequential: args.sequential,
        judge,
    };
    if let Some(spec) = args.leg_partition.as_deref() {
        let Some(partition) = partition_arg(Some(spec))? else { return Ok(exit_codes::SUCCESS) };
        let result = prove::run_leg_shard(&seeds, &options, partition).await;
        terminal.finish();
        let shards = result?;
        if args.json {
            let seeds: Vec<_> =
                shards.iter().map(|s| json!({"seed": s.seed, "dir": s.dir, "legs": s.legs, "of": s.of})).collect();
            outln!("{}", json!({"out": out, "leg_partition": partition.to_string(), "seeds": seeds}));
        } else {
            for s in &shards {
                outln!("{:<40} legs shard {partition}: {} of {}", s.seed, s.legs, count(s.of, "leg"));
            }
            outln!(
                "no verdict yet: once every shard is back, `elengtis prove --merge-legs SHARD_OUT... --out DIR` with \
                 the same seed(s) and flags"
            );
        }
        return Ok(exit_codes::SUCCESS);
    }
    let print = |p: &prove::Proven| {
        if !args.json {
            let note = p.guarded_note.as_ref().map(|n| format!("{n}\n")).unwrap_or_default();
            terminal.print(&format!("{}\n{note}report: {}\n", render_panel(&p.report), p.report_path.display()));
        }
    };
    let result = if merging {
        let merge = elengtis::merge::MergeOptions::from_env(false).map_err(elengtis::run::RunError::Key)?;
        prove::merge_leg_shards(&seeds, &args.merge_legs, &catalogue, &options, &merge, print).await
    } else {
        // Every leg of every seed draws from one pool of --jobs slots; each seed's panel is
        // printed as soon as it (and every seed before it) is done.
        prove::prove_seeds(&seeds, &catalogue, &options, print).await
    };
    terminal.finish();
    let proven = result?;
    let reports: Vec<_> = proven.iter().map(|p| p.report.clone()).collect();
    let sarif = out.join("findings.sarif");
    let sarif_options = elengtis_core::prove::SarifOptions { include_undecided: args.sarif_include_rejected };
    let lines: Vec<_> = reports
        .iter()
        .map(|r| elengtis::sarif::prove_lines(r, args.target.as_deref(), args.guarded_target.as_deref()))
        .collect();
    let findings: Vec<_> = reports
        .iter()
        .zip(&lines)
        .map(|(report, locations)| elengtis_core::prove::SarifFinding { report, locations })
        .collect();
    prove::outputs::write_sarif(&sarif, &findings, &sarif_options)?;
    let verdict = prove::overall(&reports);
    let code = prove::exit_code(&reports);
    if args.json {
        outln!(
            "{}",
            json!({
                "out": out, "sarif": sarif, "verdict": verdict.label(), "exit_code": code,
                "partition": shard, "reports": reports,
                "guarded_notes": proven.iter().map(|p| p.guarded_note.clone()).collect::<Vec<_>>(),
            })
        );
    } else {
        for p in &proven {
            outln!("{:<40} {}", p.report.seed, p.report.verdict_label);
        }
        if let Some(shard) = &shard {
            outln!("{}", shard.line());
        }
        outln!("sarif: {}", sarif.display());
    }
    Ok(code)
}

/// `prove`'s own targets and guarded side: the twins unless --target; with --target, a
/// second build (--guarded-target), the target's declared controls, the shim or none.
type OwnTargets = (Option<serde_json::Value>, Option<serde_json::Value>, elengtis::prove::GuardedSide);

fn own_targets(args: &ProveArgs) -> Result<OwnTargets, Error> {
    use elengtis::prove::{GuardedSide, declared_controls};
    let Some(path) = &args.target else {
        return match args.guarded_side.unwrap_or(GuardedSide::Twin) {
            side @ (GuardedSide::Build | GuardedSide::Controls) => {
                Err(Error::Usage(format!("--guarded-side {} needs --target (your own server)", side.as_str())))
            }
            side => Ok((None, None, side)),
        };
    };
    let target = target_file(path)?;
    let declared = declared_controls(&target);
    let side = match (&args.guarded_target, args.guarded_side) {
        (Some(_), None | Some(GuardedSide::Build)) => GuardedSide::Build,
        (Some(_), Some(other)) => {
            return Err(Error::Usage(format!(
                "--guarded-target is the guarded side; it cannot be combined with --guarded-side {}",
                other.as_str()
            )));
        }
        (None, Some(GuardedSide::Build)) => {
            return Err(Error::Usage("--guarded-side build needs --guarded-target FILE".into()));
        }
        (None, Some(GuardedSide::Controls)) if declared.is_empty() => {
            return Err(Error::Usage(format!(
                "--guarded-side controls: {} declares no control (add `control_env: {{NAME: {{VARIABLE: value}}}}` \
                 or `control_args`)",
                path.display()
            )));
        }
        (None, Some(side @ (GuardedSide::Twin | GuardedSide::Network))) => {
            return Err(Error::Usage(format!(
                "--guarded-side {} stands for the reference twins; with --target choose controls, build \
                 (--guarded-target), shim or none",
                side.as_str()
            )));
        }
        (None, Some(side)) => side,
        (None, None) if !declared.is_empty() => GuardedSide::Controls,
        (None, None) => {
            return Err(Error::Usage(format!(
                "--target proves your own server: give its guarded side — --guarded-target FILE (a second build), \
                 `control_env` in {} (its own controls), or --guarded-side shim or none",
                path.display()
            )));
        }
    };
    let guarded = args.guarded_target.as_deref().map(target_file).transpose()?;
    Ok((Some(target), guarded, side))
}
