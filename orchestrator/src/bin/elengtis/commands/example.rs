//! `elengtis example`: run a packaged example.

use std::path::PathBuf;
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::{self, RunError};
use elengtis_core::load;
use elengtis_core::validate::{LoadOptions, Overrides};

use super::common::{EngineArgs, ensure_images, run_options};
use super::run::report;
use crate::output::outln;
use crate::render::{Terminal, interactive};

#[derive(Debug, clap::Args)]
pub(crate) struct ExampleArgs {
    /// Which example (default: support-note; see --list).
    name: Option<String>,
    /// List the examples.
    #[arg(long)]
    list: bool,
    /// Trials per target × scenario.
    #[arg(long)]
    trials: Option<u32>,
    /// Results directory (must not exist).
    #[arg(long, required_unless_present = "list")]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// After the summary, print every trial's line (by default only failures get one).
    #[arg(long)]
    verbose: bool,
    /// Run the example's isolated variant: the target in a hardened container per trial
    /// (needs Docker; builds the images first if they are missing).
    #[arg(long)]
    isolated: bool,
    /// Run the example's negative control instead: the same target, scenario and checks
    /// with a model that declines, so the checks read `completed: false` (see --list).
    #[arg(long)]
    control: bool,
    /// Trials run at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: u16,
    #[command(flatten)]
    docker: EngineArgs,
}

pub(crate) async fn run(args: ExampleArgs) -> Result<i32, Error> {
    use elengtis::examples;
    let ExampleArgs { name, list, trials, out, json, verbose, isolated, control, jobs, docker } = args;
    if list {
        for e in examples::EXAMPLES {
            outln!("{:<22} {}", e.name, e.description);
        }
        return Ok(exit_codes::SUCCESS);
    }
    let name = name.unwrap_or_else(|| examples::EXAMPLES[0].name.to_owned());
    let Some(mut example) = examples::find(&name) else {
        let names: Vec<&str> = examples::EXAMPLES.iter().map(|e| e.name).collect();
        return Err(Error::Usage(format!("unknown example `{name}`; available: {}", names.join(", "))));
    };
    if isolated && !example.isolated {
        let Some(variant) = example.isolated_variant.and_then(examples::find) else {
            return Err(Error::Usage(format!("example `{name}` has no isolated variant")));
        };
        example = variant;
    }
    let (campaign_file, model_script) = example.selected(control).map_err(Error::Usage)?;
    let Some(out) = out else {
        return Err(Error::Usage("--out DIR is required".into()));
    };
    match std::fs::metadata(&out) {
        Ok(meta) if meta.is_dir() => return Err(RunError::Exists(out).into()),
        Ok(_) => return Err(RunError::NotADirectory(out).into()),
        Err(_) => {}
    }
    // A signing key that cannot be used (short, empty) is refused before anything is created.
    elengtis::results::keys::Key::from_env().map_err(RunError::Key)?;
    if example.isolated {
        ensure_images(&docker.options()).await?;
    }
    run::create_results_dir(&out)?;
    // Until the run has started, the directory holds only what this command wrote: a
    // failure removes it so the same command can simply be run again.
    let prepared = async {
        let dir = out.join("example");
        examples::write(example, &dir).map_err(Error::io("write the example into", &out))?;
        let campaign = dir.join(campaign_file);
        // An example with a model script talks to the scripted model server over HTTP.
        let server = match model_script {
            Some(script) => {
                let server =
                    examples::ScriptedModelServer::start(&dir.join(script)).await.map_err(Error::Unavailable)?;
                let text = std::fs::read_to_string(&campaign).map_err(Error::io("read", &campaign))?;
                let text = text.replace(examples::MODEL_SERVER_PLACEHOLDER, &server.addr);
                std::fs::write(&campaign, text).map_err(Error::io("write", &campaign))?;
                Some(server)
            }
            None => None,
        };
        let mut bundle = load::load_campaign(&campaign, &LoadOptions::default())?;
        load::apply_overrides(&mut bundle, &Overrides { trials, ..Overrides::default() })?;
        run::check_runnable(&bundle, &elengtis::model::ModelOptions::default())?;
        Ok::<_, Error>((bundle, server))
    }
    .await;
    let (bundle, _server) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&out);
            return Err(e);
        }
    };
    let terminal = Arc::new(Terminal::new(interactive() && !json));
    let options = run_options(jobs, docker.options(), terminal.clone());
    let result = run::start(&bundle, &out, true, &options).await;
    terminal.finish();
    Ok(report(&result?, json, verbose, false))
}
