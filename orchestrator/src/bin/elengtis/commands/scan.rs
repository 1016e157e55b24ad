//! `elengtis scan`: find the attacks a server allows, optionally run and prove them.

use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::SandboxChoice;

use super::common::{docker_options, ensure_images, fixture_mode, load_model_config, target_file, target_sandbox};
use crate::output::{out, outln};
use crate::render::Terminal;

pub(crate) async fn run(args: elengtis::scan::cli::ScanArgs) -> Result<i32, Error> {
    use elengtis::scan::ScanError;
    use elengtis::scan::cli::ScanArgsError;
    let mut options = args.options().map_err(|e| match e {
        ScanArgsError::Target(e) => Error::from(e),
        ScanArgsError::Roles(e) => Error::from(e),
    })?;
    let sandbox = target_sandbox(options.spec.needs(), &args.target).await?;
    let sandbox = sandbox.as_ref().map(|s| s as &dyn elengtis::sandbox::SandboxBackend);
    let terminal = Arc::new(Terminal::new(false));
    if !args.dry_run {
        let progress_terminal = terminal.clone();
        let json = args.json;
        let docker = docker_options(args.target.allow_vulnerable_engine, &args.target.runtime);
        if sandbox.is_some() {
            // The canary sink and the relay serve container trials.
            ensure_images(&docker).await?;
        }
        let prove_fired = match (args.prove, &args.guarded_target) {
            (false, _) => None,
            (true, Some(path)) => Some(elengtis::scan::ProveFired {
                guarded_side: elengtis::prove::GuardedSide::Build,
                guarded_target: Some(target_file(path)?),
                iterations: args.iterations,
            }),
            (true, None) => {
                // A target file that declares its own controls is proved against them switched
                // on (as `prove --target` does); otherwise against the shim.
                let declared = match &options.spec {
                    elengtis::scan::ScanTarget::File(t) => {
                        serde_json::to_value(t).map(|t| elengtis::prove::declared_controls(&t)).unwrap_or_default()
                    }
                    elengtis::scan::ScanTarget::Described(_) => Vec::new(),
                };
                Some(elengtis::scan::ProveFired {
                    guarded_side: if declared.is_empty() {
                        elengtis::prove::GuardedSide::Shim
                    } else {
                        elengtis::prove::GuardedSide::Controls
                    },
                    guarded_target: None,
                    iterations: args.iterations,
                })
            }
        };
        let live = match &args.model_config {
            None => None,
            Some(path) => Some(load_model_config(path)?),
        };
        let planner = match &args.planner_config {
            None => None,
            Some(path) => Some(elengtis::scan::planner::PlannerSettings {
                model: load_model_config(path)?,
                variants: args.planner_variants,
            }),
        };
        options.run = Some(elengtis::scan::RunSettings {
            rule: args.rule(),
            prove: elengtis::prove::ProveOptions {
                jobs: args.jobs.into(),
                sandbox: SandboxChoice::Docker(docker),
                events: Arc::new(elengtis::prove::WarnOnce::new(terminal.clone())),
                live,
                model: elengtis::model::ModelOptions {
                    fixtures: fixture_mode(args.record_fixtures.as_ref(), args.replay_fixtures.as_ref()),
                    ..Default::default()
                },
                // The proofs stop their repeat legs once a verdict is settled, as the scan's
                // trials stop once their interval decides (not with --fixed).
                sequential: !args.fixed,
                ..elengtis::prove::ProveOptions::default()
            },
            prove_fired,
            planner,
            progress: Arc::new(move |c: &elengtis::scan::Candidate, done: usize, total: usize| {
                if !json {
                    match &c.proof {
                        Some(proof) => {
                            progress_terminal.print(&format!("[{done}/{total}] {}: proved {}", c.id, proof.verdict))
                        }
                        None => progress_terminal.print(&format!("[{done}/{total}] {}: {}", c.id, c.status)),
                    }
                }
            }),
        });
    }
    let result = elengtis::scan::run(&options, sandbox).await;
    terminal.finish();
    let report = result.map_err(|e| match e {
        ScanError::Target(e) => Error::from(e),
        ScanError::Write(e) => Error::from(e),
        ScanError::Run { candidate, source } => {
            terminal.print(&format!("failed to run candidate {candidate} (scan.json keeps what ran)"));
            Error::from(source)
        }
        e @ (ScanError::Invalid { .. } | ScanError::PlannerUnavailable(_)) => Error::Unavailable(e.to_string()),
        ScanError::UnknownRoles { file, unknown, listed } => {
            Error::from(elengtis_core::format::LoadError::Invalid(vec![elengtis_core::format::Diagnostic {
                severity: elengtis_core::format::Severity::Error,
                file: file.into(),
                line: 0,
                column: 0,
                path: "roles".into(),
                message: format!(
                    "names tools the server does not list: {}; the server lists {}",
                    unknown.join(", "),
                    listed.join(", ")
                ),
            }]))
        }
    })?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        out!("{}", elengtis::scan::render(&report, args.explain));
        outln!("Wrote {} and scan.html", options.out.join("scan.json").display());
    }
    Ok(exit_codes::SUCCESS)
}
