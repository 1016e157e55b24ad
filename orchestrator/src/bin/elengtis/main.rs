//! The `elengtis` command line: parse flags, call the engine, render its events and
//! results, map the outcome to an exit code. The engine never prints; this binary does.

mod events_file;
mod render;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::run::{self, RunEnd, RunError, RunOptions, RunReport, SandboxChoice};
use elengtis::sandbox::docker::runtime::RuntimeArg;
use elengtis::sandbox::docker::{self as docker, DockerOptions, RelayMode, TrialNetwork};
use elengtis_core::format::campaign::{LoopKind, ProviderKind};
use elengtis_core::format::{self};
use elengtis_core::load;
use elengtis_core::validate::{LoadOptions, Overrides};
use serde_json::json;

use self::render::{OutputArgs, Terminal, interactive};

/// Audit MCP servers, and the agents that use them, for prompt-injection weaknesses.
#[derive(Debug, Parser)]
#[command(name = "elengtis", version, about, long_about = None, after_help = "Exit codes: see docs/exit-codes.md (0 success, 1 incomplete run, 2 usage, 3 invalid campaign, 4 results directory, 5 unavailable, 6 I/O, 7 prove: rejected, 8 prove: only stable, not proven, 130 interrupted).")]
struct Cli {
    /// Log filter for diagnostics on stderr (e.g. `info`, `elengtis=debug`, `warn,rmcp=warn`
    /// for the MCP library's own messages); also ELENGTIS_LOG. Default: `warn,rmcp=off`.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a campaign and its scenarios without contacting anything; print the trial ids.
    Validate {
        /// The campaign file (.yaml or .yml).
        campaign: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Also check the campaign's tool names and call arguments against a recorded tool
        /// list: the output of `elengtis preflight --json` (per target), a tools/list result or
        /// a trial's evidence file (`{"tools": [...]}`), or a JSON array of tools.
        #[arg(long, value_name = "FILE")]
        tools: Option<PathBuf>,
    },
    /// Run a campaign, or continue one with --resume.
    Run(RunArgs),
    /// Prove an attack seed against the vulnerable and the guarded reference twin: repeat
    /// filter, metamorphic rewrites, verdict (KEPT / STABLE, NOT PROVEN / REJECTED).
    Prove(ProveArgs),
    /// Run the committed regression of proven findings (the gate file): reference findings
    /// replayed offline from recorded fixtures, custom ones re-driven live when
    /// ELENGTIS_LIVE_TARGET=1; `--record` re-records the fixtures live.
    Gate(GateArgs),
    /// Start each target as a trial would, list its tools, check the campaign's tool names and
    /// call arguments against them (the tools' inputSchema), tear down.
    Preflight {
        /// The campaign file.
        campaign: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Run isolated trials even on a Docker engine or runtime with known container-escape
        /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
        #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
        allow_vulnerable_engine: bool,
        #[command(flatten)]
        runtime: RuntimeArg,
    },
    /// Start a server (an image or a stdio command) as preflight does, list its tools and write
    /// a commented campaign, negative control and scenario skeleton that runs as written.
    Init(elengtis::init::cli::InitArgs),
    /// Write the JSON Schemas generated from this build: campaign, scenario, seed and
    /// gate.schema.json (the formats), row, evidence, manifest and validation_report.schema.json
    /// (the results), events.schema.json (a line of an `--events` file).
    Schema {
        /// Directory to write into (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Run a packaged example (no API key, network or Docker needed).
    Example {
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
        /// Run isolated trials even on a Docker engine or runtime with known container-escape
        /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
        #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
        allow_vulnerable_engine: bool,
        #[command(flatten)]
        runtime: RuntimeArg,
    },
    /// Build or import images for isolated trials, without any registry.
    #[command(subcommand)]
    Images(ImagesCommand),
    /// Remove containers, networks and volumes elengtis left behind (never anything else):
    /// only those of runs whose runner is provably gone, unless --run names one.
    Gc {
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
    },
    /// Measure stdio trials, isolated-container trials and the raw container lifecycle floor
    /// (needs Docker and the bundled images: `elengtis images build`), and the live-model
    /// provider path's overhead per request against the scripted model server.
    Bench {
        /// Trials per measurement.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        trials: u32,
        /// A quick run (3 trials per measurement), e.g. to check the benchmark works in CI.
        #[arg(long)]
        short: bool,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Run isolated trials even on a Docker engine or runtime with known container-escape
        /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
        #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
        allow_vulnerable_engine: bool,
        #[command(flatten)]
        runtime: RuntimeArg,
        /// Measure only the live-model provider path against the scripted model server
        /// (no Docker needed).
        #[arg(long)]
        provider_only: bool,
        /// Also run one model-free campaign on --original-image with the original Python tool
        /// (its `elengtis` executable, e.g. a venv's `bin/elengtis` from PyPI elengtis 0.1.0)
        /// and with this build at --jobs 1 and --jobs 4, and report ours ÷ original.
        #[arg(long, value_name = "EXE", requires = "original_image", conflicts_with = "provider_only")]
        original: Option<PathBuf>,
        /// The Python MCP HTTP server image for --original (see sandbox-images/pypi/README.md).
        #[arg(long, value_name = "IMAGE", requires = "original")]
        original_image: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// (internal) The guard between the runner and a stdio target.
    #[command(hide = true, name = "__stdio-guard")]
    StdioGuard(elengtis::toolhost::mcp::GuardArgs),
    /// (internal) A stdio target's exec stage: parent-death signal, light sandbox, exec.
    #[command(hide = true, name = "__stdio-exec")]
    StdioExec(elengtis::toolhost::mcp::ExecArgs),
    /// (internal) Relay container's main process: wait until ADDR accepts connections, then
    /// carry the runner's connections to it over stdin/stdout.
    #[command(hide = true, name = "relay-mux")]
    RelayMux {
        /// `ip:port` of the target (in the target's network namespace: `127.0.0.1:PORT`).
        addr: std::net::SocketAddr,
        /// How long the target may take to accept connections, seconds.
        #[arg(long, default_value_t = 30)]
        probe_seconds: u64,
    },
    /// Check a results directory end to end: every row in the recorded matrix, attempts
    /// unique, the row chain intact, each evidence file present and unchanged, the manifest
    /// consistent with the campaign it records. Says what is wrong, where, and how to repair it.
    Verify {
        /// The results directory.
        dir: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write one self-contained HTML report (overview with Wilson intervals, every trial's
    /// trajectory and evidence, validation reports) over results directories and `prove`/`gate`
    /// outputs; it opens from file:// and loads nothing (docs/report.md).
    Report {
        /// A results directory, or a directory holding validation_report.json files, e.g. a
        /// `prove --out` directory (repeatable).
        #[arg(long = "input", required = true)]
        inputs: Vec<PathBuf>,
        /// The HTML file to write (replaced atomically).
        #[arg(long)]
        out: PathBuf,
    },
    /// Summarise result directories: per model × engine × scenario, with Wilson intervals,
    /// and the engine recommendation of a live comparison.
    Analyze {
        /// A results directory (repeatable).
        #[arg(long = "input", required = true)]
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
    },
    /// Live comparison experiments: plan a frozen, blocked, randomised bundle; run it under a
    /// spend cap (docs/experiments.md).
    #[command(subcommand)]
    Experiment(elengtis::experiment::ExperimentCommand),
}

#[derive(Debug, Subcommand)]
enum ImagesCommand {
    /// Build the bundled images (the reference targets, the elengtis tool) and import them
    /// through the Docker API: from the static executables beside this one when they are all
    /// there (the release build, the tool image), else from a static compile of the source
    /// tree this binary was built from.
    Build {
        /// Compile the executables from this elengtis source tree (a static build of its own).
        #[arg(long, conflicts_with = "binaries")]
        source: Option<PathBuf>,
        /// Import the static executables already in DIR instead of building them (every
        /// bundled one must be there and static, e.g. a test build made with the static flags;
        /// see docs/performance.md).
        #[arg(long, value_name = "DIR")]
        binaries: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Import a root filesystem tarball as a non-root image (see sandbox-images/pypi/).
    Import {
        /// The tarball (uncompressed, or compressed as the engine accepts).
        #[arg(long)]
        rootfs: PathBuf,
        /// Image reference to create (`repo:tag`).
        #[arg(long)]
        tag: String,
        /// `uid:gid` the image runs as (never root; default 65534:65534).
        #[arg(long)]
        user: Option<String>,
        /// Entrypoint as a JSON array, e.g. `["/opt/venv/bin/python","-m","server"]`.
        #[arg(long)]
        entrypoint: Option<String>,
        /// Default arguments as a JSON array.
        #[arg(long)]
        cmd: Option<String>,
        /// A label `KEY=VALUE` (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The campaign file (required for a new run).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Results directory: new for a run, existing with --resume.
    #[arg(long)]
    out: PathBuf,
    /// Continue the run in --out: skip complete trials, retry the rest.
    #[arg(long)]
    resume: bool,
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
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// After the summary, print every trial's line (by default only trials without a
    /// complete attempt get one).
    #[arg(long)]
    verbose: bool,
    /// Run isolated trials even on a Docker engine or runtime with known container-escape
    /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
    #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
    allow_vulnerable_engine: bool,
    #[command(flatten)]
    runtime: RuntimeArg,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
struct ProveArgs {
    /// The seed file (`scenarios/seeds/<id>.seed.yaml`).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    seed: Option<PathBuf>,
    /// Prove every `*.seed.yaml` in --seeds-dir.
    #[arg(long)]
    all: bool,
    /// Where the seed catalogue lives (for --all and the kill matrix).
    #[arg(long, value_name = "DIR", default_value = "scenarios/seeds")]
    seeds_dir: PathBuf,
    /// Iterations of the repeat filter (runs per side).
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
    /// Remove a guard from the guarded twin (a test build; repeatable): shows that prove
    /// notices a broken guard.
    #[arg(long = "disable-guard", value_name = "W1|W2|W3|W4", value_parser = parse_weakness)]
    disable_guard: Vec<elengtis_core::format::seed::Weakness>,
    /// What stands on the guarded side: `twin` (the guarded reference twin, a server-layer
    /// guard), `shim` (the vulnerable side behind the control shim at the MCP boundary, a
    /// stand-in; see docs/shim.md), `network` (the vulnerable twin behind an allowlisting
    /// egress proxy on the trial network, a real network control for W3; docs/security.md) or
    /// `none` (reproduction only: STABLE, NOT PROVEN at best).
    #[arg(long, value_name = "twin|shim|network|none", default_value = "twin", value_parser = parse_guarded_side)]
    guarded_side: elengtis::prove::GuardedSide,
    /// Prove against a target of your own instead of the reference twins: FILE holds one
    /// campaign target (id, transport, bindings); the seed's scenario plants the payload
    /// through its `payload` binding. Use with --guarded-side shim or none.
    #[arg(long, value_name = "FILE")]
    target: Option<PathBuf>,
    /// Drive the legs with a live model instead of the seed's script: FILE holds the
    /// campaign's model fields (`model`, and optionally `provider`, `provider_route`,
    /// `generation`, `model_id`), as a gate file's `model`.
    #[arg(long, value_name = "FILE")]
    model_config: Option<PathBuf>,
    /// Write each live model request's final answer into DIR as a fixture.
    #[arg(long, value_name = "DIR", conflicts_with = "replay_fixtures", requires = "model_config")]
    record_fixtures: Option<PathBuf>,
    /// Answer every live model request from the fixtures in DIR, offline.
    #[arg(long, value_name = "DIR", requires = "model_config")]
    replay_fixtures: Option<PathBuf>,
    /// Run isolated trials even on a Docker engine or runtime with known container-escape
    /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
    #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
    allow_vulnerable_engine: bool,
    #[command(flatten)]
    runtime: RuntimeArg,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
struct GateArgs {
    /// The gate file.
    #[arg(long, value_name = "FILE", default_value = "scenarios/gate/gate.yaml")]
    file: PathBuf,
    /// Re-record the reference findings' fixtures with the gate file's live model, and lock
    /// each directory whose recording proves KEPT with every leg decided.
    #[arg(long)]
    record: bool,
    /// Only this finding (its seed id; repeatable).
    #[arg(long = "finding", value_name = "SEED_ID")]
    findings: Vec<String>,
    /// Serve the live model from this base URL instead of the provider's (recording, custom
    /// findings).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Where the seed catalogue lives (for the kill matrix).
    #[arg(long, value_name = "DIR", default_value = "scenarios/seeds")]
    seeds_dir: PathBuf,
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
    /// Run isolated trials even on a Docker engine or runtime with known container-escape
    /// or egress bugs; the findings are recorded (see docs/security.md, "Engine gate").
    #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
    allow_vulnerable_engine: bool,
    #[command(flatten)]
    runtime: RuntimeArg,
}

fn parse_guarded_side(value: &str) -> Result<elengtis::prove::GuardedSide, String> {
    match value {
        "twin" => Ok(elengtis::prove::GuardedSide::Twin),
        "shim" => Ok(elengtis::prove::GuardedSide::Shim),
        "network" => Ok(elengtis::prove::GuardedSide::Network),
        "none" => Ok(elengtis::prove::GuardedSide::None),
        other => Err(format!("expected twin, shim, network or none, got {other:?}")),
    }
}

fn parse_weakness(value: &str) -> Result<elengtis_core::format::seed::Weakness, String> {
    elengtis_core::format::seed::Weakness::ALL
        .into_iter()
        .find(|w| w.as_str().eq_ignore_ascii_case(value))
        .ok_or_else(|| format!("expected W1, W2, W3 or W4, got {value:?}"))
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The original CLI's form `elengtis --config … --out …` means `run`.
    let args = if args.get(1).is_some_and(|a| {
        a.to_string_lossy().starts_with('-') && !matches!(a.to_str(), Some("-h" | "--help" | "-V" | "--version"))
    }) {
        let mut with_run = vec![args[0].clone(), "run".into()];
        with_run.extend(args[1..].iter().cloned());
        with_run
    } else {
        args
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit_codes::USAGE } else { exit_codes::SUCCESS };
            let _ = e.print();
            return exit(code);
        }
    };
    // The guard and the exec stage stay single-threaded (no runtime, no logging): the exec
    // stage may create a user namespace, which needs exactly one thread.
    match &cli.command {
        Command::StdioGuard(args) => return exit_status(elengtis::toolhost::mcp::guard_main(args)),
        Command::StdioExec(args) => return exit_status(elengtis::toolhost::mcp::exec_main(args)),
        _ => {}
    }
    init_logging(cli.log.as_deref());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return exit(exit_codes::IO);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => exit(code),
        Err(error) => {
            eprintln!("error: {}", elengtis::error::render(&error));
            exit(error.exit_code())
        }
    }
}

/// The guard's exit: the target's status, 0..=255.
fn exit_status(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The default log filter: warnings, without the MCP library's own messages (a hostile
/// target makes it log errors for failures that reach the trial's errors anyway).
const DEFAULT_LOG: &str = "warn,rmcp=off";

fn init_logging(filter: Option<&str>) {
    let wanted = filter.map(str::to_owned).or_else(|| std::env::var("ELENGTIS_LOG").ok());
    let filter = match wanted.as_deref().map(tracing_subscriber::EnvFilter::try_new) {
        None => tracing_subscriber::EnvFilter::new(DEFAULT_LOG),
        Some(Ok(filter)) => filter,
        Some(Err(e)) => {
            eprintln!(
                "warning: failed to parse the log filter `{}` (--log or ELENGTIS_LOG): {e}; using `{DEFAULT_LOG}`",
                wanted.as_deref().unwrap_or_default()
            );
            tracing_subscriber::EnvFilter::new(DEFAULT_LOG)
        }
    };
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(render::LogWriter).with_target(false).try_init();
}

async fn dispatch(command: Command) -> Result<i32, Error> {
    match command {
        Command::Validate { campaign, json, tools } => validate(&campaign, json, tools.as_deref()),
        Command::Run(args) => run_command(args).await,
        Command::Prove(args) => prove_command(args).await,
        Command::Gate(args) => gate_command(args).await,
        Command::Preflight { campaign, json, allow_vulnerable_engine, runtime } => {
            preflight(&campaign, json, docker_options(allow_vulnerable_engine, &runtime)).await
        }
        Command::Init(args) => init_command(args).await,
        Command::Schema { out } => schema(&out),
        Command::Example {
            name,
            list,
            trials,
            out,
            json,
            verbose,
            isolated,
            control,
            jobs,
            allow_vulnerable_engine,
            runtime,
        } => {
            let flags = ExampleFlags { json, verbose, isolated, control, allow_vulnerable_engine, runtime };
            example(name, list, trials, out, flags, jobs).await
        }
        Command::Analyze { inputs, out, practical_margin_pp, conformance_passed } => {
            let rule = elengtis_core::analysis::RecommendOptions { practical_margin_pp, conformance_passed };
            analyze(&inputs, &out, &rule)
        }
        Command::Experiment(command) => {
            let terminal = Arc::new(Terminal::new(interactive()));
            let options = run_options(1, docker_options(false, &RuntimeArg::default()), terminal.clone());
            let result = elengtis::experiment::command(command, options, &|line| terminal.print(line)).await;
            terminal.finish();
            Ok(result?)
        }
        Command::Report { inputs, out } => report::run(&inputs, &out),
        Command::Verify { dir, json } => verify_command(&dir, json),
        Command::Gc { out: Some(out), json, .. } => gc_stdio(&out, json),
        Command::Gc { run, json, out: None } => gc(run.as_deref(), json).await,
        Command::Images(command) => images(command).await,
        Command::Bench { trials, short, json, allow_vulnerable_engine, provider_only: true, .. } => {
            let trials = if short { 3 } else { trials };
            let report = elengtis::bench::provider(elengtis::bench::provider_requests(trials)).await?;
            if json {
                println!("{}", json!(report));
            } else {
                print!("{}", elengtis::bench::render_provider(&report));
            }
            let _ = allow_vulnerable_engine;
            Ok(exit_codes::SUCCESS)
        }
        Command::Bench {
            trials,
            short,
            json,
            allow_vulnerable_engine,
            runtime,
            provider_only: false,
            output,
            original,
            original_image,
        } => {
            let original = match (original, original_image) {
                (Some(exe), Some(image)) => Some(bench_original(exe, image)?),
                _ => None,
            };
            let engine = docker::api::connect().await?;
            if let Some(warning) = docker::engine_gate::check(&engine, allow_vulnerable_engine, &[]).await?.warning() {
                eprintln!("WARNING: {warning}");
            }
            let trials = if short { 3 } else { trials };
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let settings = elengtis::bench::BenchSettings {
                docker: docker_options(allow_vulnerable_engine, &runtime),
                events: terminal.clone(),
                original,
            };
            let report = elengtis::bench::run(trials, &settings).await;
            terminal.finish();
            let report = report?;
            if json {
                println!("{}", json!(report));
            } else {
                print!("{}", elengtis::bench::render(&report));
            }
            Ok(exit_codes::SUCCESS)
        }
        // Dispatched in `main` before the runtime starts.
        Command::StdioGuard(_) | Command::StdioExec(_) => Ok(exit_codes::USAGE),
        Command::RelayMux { addr, probe_seconds } => {
            match docker::relay::mux::run(addr, std::time::Duration::from_secs(probe_seconds)).await {
                Ok(()) => Ok(exit_codes::SUCCESS),
                Err(e) => {
                    eprintln!("elengtis relay-mux: {e}");
                    Ok(exit_codes::RUN_INCOMPLETE)
                }
            }
        }
    }
}

fn print_warnings(warnings: &[format::Diagnostic]) {
    for w in warnings {
        eprintln!("{w}");
    }
}

fn validate(path: &Path, json: bool, tools: Option<&Path>) -> Result<i32, Error> {
    let lists = match tools.map(elengtis_core::toolargs::read_tool_lists).transpose() {
        Ok(lists) => lists,
        Err(e) if json => {
            println!(
                "{}",
                json!({"valid": false, "trials": [], "diagnostics": e.diagnostics(), "error": e.to_string()})
            );
            return Ok(exit_codes::INVALID_CONFIG);
        }
        Err(e) => {
            for d in e.diagnostics() {
                eprintln!("{d}");
            }
            return Ok(exit_codes::INVALID_CONFIG);
        }
    };
    match load::load_campaign(path, &LoadOptions::default()) {
        Ok(bundle) => {
            let trials: Vec<String> = elengtis_core::matrix::expand(&bundle).into_iter().map(|t| t.trial_id).collect();
            // With a recorded tool list: the same checks as preflight, per target.
            let mut findings = Vec::new();
            let mut unchecked = Vec::new();
            if let Some(lists) = &lists {
                for target in &bundle.campaign.value.targets {
                    match lists.for_target(&target.id) {
                        Some(tools) => findings.extend(elengtis_core::toolargs::check(&bundle, target, tools)),
                        None => unchecked.push(target.id.clone()),
                    }
                }
            }
            let errors = findings.iter().filter(|f| f.severity == format::Severity::Error).count();
            let valid = errors == 0;
            if json {
                let mut out = json!({"valid": valid, "trials": trials, "diagnostics": bundle.warnings});
                if lists.is_some() {
                    out["tool_findings"] = json!(findings);
                    out["tools_unchecked"] = json!(unchecked);
                }
                println!("{out}");
            } else {
                print_warnings(&bundle.warnings);
                for finding in &findings {
                    eprintln!("{finding}");
                }
                for id in &unchecked {
                    eprintln!(
                        "note: {} has no tool list for target {id}; its tool calls were not checked",
                        tools.map(|p| p.display().to_string()).unwrap_or_default()
                    );
                }
                if !valid {
                    eprintln!(
                        "error: {errors} problem{} with the tools the campaign calls or their arguments",
                        if errors == 1 { "" } else { "s" }
                    );
                    return Ok(exit_codes::INVALID_CONFIG);
                }
                for id in &trials {
                    println!("{id}");
                }
            }
            Ok(if valid { exit_codes::SUCCESS } else { exit_codes::INVALID_CONFIG })
        }
        Err(e) if json => {
            println!(
                "{}",
                json!({"valid": false, "trials": [], "diagnostics": e.diagnostics(), "error": e.to_string()})
            );
            Ok(exit_codes::INVALID_CONFIG)
        }
        Err(e) => Err(e.into()),
    }
}

fn report(report: &RunReport, json: bool, verbose: bool, quiet: bool) -> i32 {
    if let Some(leftovers) = report.leftovers.as_ref().filter(|l| !l.is_empty() && !quiet) {
        eprintln!(
            "note: removed leftovers of an earlier attempt of this run: {} containers, {} networks, {} volumes",
            leftovers.containers.len(),
            leftovers.networks.len(),
            leftovers.volumes.len()
        );
    }
    if let Some((offset, bytes)) = report.recovered_tail.filter(|_| !quiet) {
        eprintln!(
            "note: cut a torn final row ({bytes} bytes at offset {offset}) left in runs.jsonl by an interrupted run; that attempt is retried"
        );
    }
    let (code, message) = match &report.end {
        RunEnd::Complete => (exit_codes::SUCCESS, None),
        RunEnd::Incomplete(m) | RunEnd::Stopped(m) => (exit_codes::RUN_INCOMPLETE, Some(m.clone())),
        RunEnd::Interrupted => (
            exit_codes::INTERRUPTED,
            Some(format!(
                "interrupted; the trial in progress was not recorded. Continue with `elengtis run --resume --out {}`",
                report.out.display()
            )),
        ),
    };
    if json {
        println!(
            "{}",
            json!({
                "out": report.out, "run_id": report.run_id, "attempts": report.attempts_now,
                "end": match &report.end { RunEnd::Complete => "complete", RunEnd::Incomplete(_) => "incomplete", RunEnd::Stopped(_) => "stopped", RunEnd::Interrupted => "interrupted" },
                "message": message, "summary": report.summary, "trials": report.trial_lines.lines().collect::<Vec<_>>(),
            })
        );
    } else {
        print!("{}", report.summary);
        if verbose {
            print!("{}", report.trial_lines);
        }
        println!("results: {}", report.out.display());
        if let Some(m) = message {
            eprintln!("error: {m}");
        }
    }
    code
}

async fn run_command(args: RunArgs) -> Result<i32, Error> {
    let overrides = Overrides {
        trials: args.trials,
        step_budget: args.step_budget,
        engine: args.engine,
        model: args.model.clone(),
        provider: args.provider,
    };
    let terminal = Arc::new(Terminal::for_command(&args.output, args.json)?);
    let mut options =
        run_options(args.jobs, docker_options(args.allow_vulnerable_engine, &args.runtime), terminal.clone());
    options.prepare_ahead = args.prepare_ahead.into();
    options.model = model_options(&args)?;
    let result = if args.resume {
        if args.config.is_some() || !overrides.is_empty() {
            return Err(Error::Usage(
                "--resume continues the run exactly as it was started; it takes no --config or overrides".into(),
            ));
        }
        run::resume(&args.out, &options).await
    } else {
        let Some(config) = args.config else {
            return Err(Error::Usage("a new run needs --config CAMPAIGN (or --resume to continue --out)".into()));
        };
        let mut bundle = load::load_campaign(&config, &LoadOptions::default())?;
        print_warnings(&bundle.warnings);
        load::apply_overrides(&mut bundle, &overrides)?;
        run::start(&bundle, &args.out, false, &options).await
    };
    terminal.finish();
    Ok(report(&result?, args.json, args.verbose, terminal.quiet()))
}

async fn prove_command(args: ProveArgs) -> Result<i32, Error> {
    use elengtis::prove::{self, ProveOptions};
    use elengtis_core::prove::render_panel;
    let seeds = match (&args.seed, args.all) {
        (Some(seed), false) => vec![seed.clone()],
        (None, true) => prove::seeds_in(&args.seeds_dir)?,
        _ => return Err(Error::Usage("give --seed FILE or --all".into())),
    };
    if args.guarded_side != prove::GuardedSide::Twin && !args.disable_guard.is_empty() {
        return Err(Error::Usage(
            "--disable-guard removes a guard of the guarded twin; it applies to --guarded-side twin only".into(),
        ));
    }
    let target = match &args.target {
        None => None,
        Some(_) if matches!(args.guarded_side, prove::GuardedSide::Twin | prove::GuardedSide::Network) => {
            return Err(Error::Usage(
                "--target proves your own target: choose its guarded side with --guarded-side shim or none".into(),
            ));
        }
        Some(path) => {
            let target = elengtis_core::format::gate::load_target(path)?;
            Some(serde_json::to_value(target).map_err(|e| Error::Usage(format!("failed to read the target: {e}")))?)
        }
    };
    let live = match &args.model_config {
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
    ensure_images(args.allow_vulnerable_engine).await?;
    let catalogue = prove::catalogue(&args.seeds_dir);
    let terminal = Arc::new(Terminal::for_command(&args.output, args.json)?);
    let options = ProveOptions {
        iterations: args.iterations,
        jobs: args.jobs.into(),
        out: out.clone(),
        metamorphic: !args.no_metamorphic,
        disabled: args.disable_guard.clone(),
        sandbox: SandboxChoice::Docker(docker_options(args.allow_vulnerable_engine, &args.runtime)),
        events: Arc::new(prove::WarnOnce::new(terminal.clone())),
        thresholds: Default::default(),
        guarded_side: args.guarded_side,
        live,
        model: model_options,
        target,
    };
    // Every leg of every seed draws from one pool of --jobs slots; each seed's panel is
    // printed as soon as it (and every seed before it) is done.
    let result = prove::prove_seeds(&seeds, &catalogue, &options, |p| {
        if !args.json {
            let note = p.guarded_note.as_ref().map(|n| format!("{n}\n")).unwrap_or_default();
            terminal.print(&format!("{}\n{note}report: {}\n", render_panel(&p.report), p.report_path.display()));
        }
    })
    .await;
    terminal.finish();
    let proven = result?;
    let reports: Vec<_> = proven.iter().map(|p| p.report.clone()).collect();
    let sarif = out.join("findings.sarif");
    prove::outputs::write_sarif(&sarif, &reports)?;
    let verdict = prove::overall(&reports);
    let code = prove::exit_code(&reports);
    if args.json {
        println!(
            "{}",
            json!({
                "out": out, "sarif": sarif, "verdict": verdict.label(), "exit_code": code,
                "reports": reports,
                "guarded_notes": proven.iter().map(|p| p.guarded_note.clone()).collect::<Vec<_>>(),
            })
        );
    } else {
        for p in &proven {
            println!("{:<40} {}", p.report.seed, p.report.verdict_label);
        }
        println!("sarif: {}", sarif.display());
    }
    Ok(code)
}

/// A model file: the campaign's model fields (as a gate file's `model`), strictly parsed.
fn load_model_config(path: &Path) -> Result<elengtis_core::format::gate::LiveModel, Error> {
    use elengtis_core::format::{LoadError, parse_document_all};
    let text = elengtis_core::format::read_limited(path)?;
    parse_document_all::<elengtis_core::format::gate::LiveModel>(path, &text)
        .map(|(model, _)| model)
        .map_err(|d| Error::Load(LoadError::Invalid(d)))
}

async fn gate_command(args: GateArgs) -> Result<i32, Error> {
    use elengtis::gate::{self, GateOptions, Status};
    let loaded = elengtis_core::format::gate::load_gate(&args.file)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
        PathBuf::from(format!("gate-{stamp}"))
    });
    ensure_images(args.allow_vulnerable_engine).await?;
    let catalogue = elengtis::prove::catalogue(&args.seeds_dir);
    let terminal = Arc::new(Terminal::new(interactive() && !args.json));
    let options = GateOptions {
        jobs: args.jobs.into(),
        out: out.clone(),
        sandbox: SandboxChoice::Docker(docker_options(args.allow_vulnerable_engine, &args.runtime)),
        events: Arc::new(elengtis::prove::WarnOnce::new(terminal.clone())),
        record: args.record,
        only: args.findings.clone(),
        base_url: args.base_url.clone(),
        ..GateOptions::default()
    }
    .from_env();
    let outcome = gate::run(&loaded, &catalogue, &options).await;
    terminal.finish();
    let outcome = outcome?;
    let reports: Vec<_> = outcome.findings.iter().filter_map(|f| f.report.clone()).collect();
    let sarif = out.join("findings.sarif");
    if !reports.is_empty() {
        elengtis::prove::outputs::write_sarif(&sarif, &reports)?;
    }
    let code = match outcome.status {
        Status::Passed | Status::Skipped => exit_codes::SUCCESS,
        Status::NoEvidence => exit_codes::NO_EVIDENCE,
        Status::Rejected => exit_codes::REJECTED,
        Status::NotProven => exit_codes::NOT_PROVEN,
    };
    if args.json {
        println!(
            "{}",
            json!({"status": outcome.status, "exit_code": code, "recorded": outcome.recorded, "out": out,
                   "sarif": (!reports.is_empty()).then_some(&sarif), "findings": outcome.findings})
        );
    } else {
        for f in &outcome.findings {
            println!("{:<40} {:<9} {}", f.seed, f.kind, f.status.as_str());
            for line in &f.details {
                println!("    {line}");
            }
        }
        let what = if outcome.recorded { "gate --record" } else { "gate" };
        println!("{what}: {} (exit {code}); results in {}", outcome.status.as_str(), out.display());
    }
    Ok(code)
}

async fn preflight(path: &Path, json: bool, docker: DockerOptions) -> Result<i32, Error> {
    let bundle = load::load_campaign(path, &LoadOptions::default())?;
    print_warnings(&bundle.warnings);
    let choice = SandboxChoice::Docker(docker);
    let sandbox = run::prepare_sandbox(&bundle, &choice, &Terminal::new(false)).await?;
    let checks =
        elengtis::preflight::run(&bundle, elengtis::toolhost::mcp::Limits::default(), sandbox.as_deref()).await;
    let ok = checks.iter().all(|c| c.ok);
    if json {
        println!("{}", json!({"ok": ok, "targets": checks}));
    } else {
        for check in &checks {
            if let Some(w) = &check.warning {
                eprintln!("WARNING: {w}");
            }
            // The target's line, then its findings (file:line:column: argument of tool: error).
            print!("{}", check.render());
        }
    }
    Ok(if ok { exit_codes::SUCCESS } else { exit_codes::RUN_INCOMPLETE })
}

async fn init_command(args: elengtis::init::cli::InitArgs) -> Result<i32, Error> {
    let options = args.options()?;
    let sandbox = match elengtis::init::sandbox_needs(&options.spec) {
        Some(needs) => Some(
            docker::DockerBackend::prepare(
                &docker_options(args.allow_vulnerable_engine, &args.runtime),
                &needs,
                &Terminal::new(false),
            )
            .await?,
        ),
        None => None,
    };
    let sandbox = sandbox.as_ref().map(|s| s as &dyn elengtis::sandbox::SandboxBackend);
    let written = elengtis::init::run(&options, sandbox).await?;
    for warning in &written.warnings {
        eprintln!("WARNING: {warning}");
    }
    print!("{}", written.summary());
    Ok(exit_codes::SUCCESS)
}

fn schema(out: &Path) -> Result<i32, Error> {
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    for (name, content) in elengtis_core::schema::schemas() {
        let path = out.join(name);
        elengtis::results::store::write_atomic(&path, content.as_bytes())?;
        println!("{}", path.display());
    }
    Ok(exit_codes::SUCCESS)
}

/// The switches of `elengtis example`.
#[derive(Debug, Clone)]
struct ExampleFlags {
    json: bool,
    verbose: bool,
    isolated: bool,
    control: bool,
    allow_vulnerable_engine: bool,
    runtime: RuntimeArg,
}

async fn example(
    name: Option<String>,
    list: bool,
    trials: Option<u32>,
    out: Option<PathBuf>,
    flags: ExampleFlags,
    jobs: u16,
) -> Result<i32, Error> {
    use elengtis::examples;
    let ExampleFlags { json, verbose, isolated, control, allow_vulnerable_engine, runtime } = flags;
    if list {
        for e in examples::EXAMPLES {
            println!("{:<22} {}", e.name, e.description);
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
    if example.isolated {
        ensure_images(allow_vulnerable_engine).await?;
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
    let options = run_options(jobs, docker_options(allow_vulnerable_engine, &runtime), terminal.clone());
    let result = run::start(&bundle, &out, true, &options).await;
    terminal.finish();
    Ok(report(&result?, json, verbose, false))
}

/// Pass the engine gate, then make sure the bundled images exist, making them when they do
/// not: imported from the static executables beside this one (seconds), else compiled from the
/// source tree (minutes, announced with progress), else an error saying what is needed.
async fn ensure_images(allow_vulnerable_engine: bool) -> Result<(), Error> {
    let engine = docker::api::connect().await?;
    // An engine accepted despite findings is reported by the run that follows.
    docker::engine_gate::check(&engine, allow_vulnerable_engine, &[]).await?;
    docker::images::ensure_bundled(&engine, &docker::images::Notify::stderr(interactive())).await?;
    Ok(())
}

async fn images(command: ImagesCommand) -> Result<i32, Error> {
    use elengtis::sandbox::docker::images;
    // What the images are made from is settled before the engine is asked anything: a wrong
    // `--binaries` directory is reported without a Docker engine.
    match command {
        ImagesCommand::Build { source, binaries, json } => {
            let from = match (binaries, source) {
                (Some(dir), _) => images::BinarySource::Prebuilt(images::prebuilt_in(&dir)?),
                (None, Some(source)) => images::BinarySource::Build { source, reason: None },
                (None, None) => images::default_source()?,
            };
            let engine = docker::api::connect().await?;
            if let images::BinarySource::Prebuilt(dir) = &from {
                eprintln!("importing the bundled images from the static executables in {}", dir.display());
            }
            let dir = from.binaries(&images::Notify::stderr(interactive())).await?;
            let built = images::build_bundled(&engine, &dir, &images::Notify::silent()).await?;
            if json {
                println!("{}", json!({"images": built}));
            } else {
                for image in &built {
                    let unchanged = if image.unchanged { ", unchanged" } else { "" };
                    println!("{} {} ({:.1} MB{unchanged})", image.reference, image.id, image.size as f64 / 1e6);
                }
            }
            Ok(exit_codes::SUCCESS)
        }
        ImagesCommand::Import { rootfs, tag, user, entrypoint, cmd, labels } => {
            let engine = docker::api::connect().await?;
            let parse_list = |flag: &str, text: Option<String>| -> Result<Option<Vec<String>>, Error> {
                text.map(|t| {
                    serde_json::from_str::<Vec<String>>(&t)
                        .map_err(|e| Error::Usage(format!("{flag} must be a JSON array of strings: {e}")))
                })
                .transpose()
            };
            let entrypoint = parse_list("--entrypoint", entrypoint)?;
            let cmd = parse_list("--cmd", cmd)?;
            let mut pairs = Vec::new();
            for label in labels {
                let Some((k, v)) = label.split_once('=') else {
                    return Err(Error::Usage(format!("--label must be KEY=VALUE, found `{label}`")));
                };
                pairs.push((k.to_owned(), v.to_owned()));
            }
            let id = images::import_rootfs_file(
                &engine,
                &rootfs,
                &tag,
                user.as_deref(),
                entrypoint,
                cmd,
                &pairs,
                images::IMPORT_DEADLINE,
            )
            .await?;
            println!("{tag} {id}");
            Ok(exit_codes::SUCCESS)
        }
    }
}

async fn gc(run: Option<&str>, json: bool) -> Result<i32, Error> {
    let engine = docker::api::connect().await?;
    let report = docker::gc::sweep(&engine, run).await?;
    if json {
        println!("{}", json!(report));
    } else {
        for (kind, names) in
            [("container", &report.containers), ("network", &report.networks), ("volume", &report.volumes)]
        {
            for name in names {
                println!("removed {kind} {name}");
            }
        }
        for e in &report.errors {
            eprintln!("error: {e}");
        }
        for kept in &report.kept {
            let run = kept.strip_prefix("run ").and_then(|k| k.split(':').next()).unwrap_or("ID");
            println!("{kept}; remove them anyway with `elengtis gc --run {run}`");
        }
        if report.is_empty() && report.kept.is_empty() {
            println!("nothing to remove");
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
                    println!("{}", json!({"stdio": [], "kept": [message]}));
                } else {
                    println!("{message}");
                }
                return Ok(exit_codes::SUCCESS);
            }
        }
    };
    if json {
        println!("{}", json!({"stdio": reaped, "kept": []}));
    } else if reaped.is_empty() {
        println!("nothing to remove");
    } else {
        for r in &reaped {
            println!("reaped stdio record {}: {}", r.record, r.detail);
        }
    }
    Ok(exit_codes::SUCCESS)
}

/// The exit code of `verify` for what it found: 0, 3 (malformed records) or 4.
fn verification_code(verification: &elengtis::results::verify::Verification) -> i32 {
    if verification.is_ok() {
        exit_codes::SUCCESS
    } else if verification.is_malformed() {
        exit_codes::INVALID_CONFIG
    } else {
        exit_codes::RESULTS_DIR
    }
}

fn verify_command(dir: &Path, json: bool) -> Result<i32, Error> {
    let verification = elengtis::results::verify::verify(dir)?;
    let code = verification_code(&verification);
    if json {
        let mut value = json!(verification);
        value["ok"] = json!(verification.is_ok());
        println!("{value}");
        return Ok(code);
    }
    for note in &verification.notes {
        eprintln!("note: {note}");
    }
    if verification.is_ok() {
        let matrix =
            verification.matrix_trials.map(|n| format!(", {n} trials in the recorded matrix")).unwrap_or_default();
        println!("{}: ok ({} rows{matrix})", dir.display(), verification.rows);
    } else {
        print!("{}", verification.render_problems());
        eprintln!(
            "error: {}: {} problem{} (each above: file:line: what is wrong; repair: how)",
            dir.display(),
            verification.problems.len(),
            if verification.problems.len() == 1 { "" } else { "s" }
        );
    }
    Ok(code)
}

fn analyze(inputs: &[PathBuf], out: &Path, rule: &elengtis_core::analysis::RecommendOptions) -> Result<i32, Error> {
    use elengtis_core::analysis::{self, RunInput};
    let mut runs = Vec::new();
    for dir in inputs {
        // Analysis reads only what `verify` accepts.
        let verification = elengtis::results::verify::verify(dir)?;
        let manifest = match verification.manifest {
            Some(manifest) if verification.problems.is_empty() => manifest,
            _ => {
                return Err(Error::Unverified {
                    dir: dir.clone(),
                    count: verification.problems.len(),
                    problems: verification.render_problems(),
                    malformed: verification.is_malformed(),
                });
            }
        };
        runs.push(RunInput {
            label: dir.display().to_string(),
            manifest,
            rows: verification.row_values,
            matrix: verification.matrix,
        });
    }
    let analysis = analysis::analyze_with(&runs, rule)?;
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let json_text = serde_json::to_string_pretty(&analysis.json)
        .map_err(|source| Error::Parse { path: out.join("summary.json"), source })?
        + "\n";
    elengtis::results::store::write_atomic(&out.join("summary.json"), json_text.as_bytes())?;
    elengtis::results::store::write_atomic(&out.join("summary.md"), analysis.markdown.as_bytes())?;
    print!("{}", analysis.markdown);
    println!("wrote {} and {}", out.join("summary.json").display(), out.join("summary.md").display());
    if analysis.not_run > 0 {
        eprintln!(
            "error: {} trial{} of the recorded matri{} never ran (counted as not run); finish with `elengtis run --resume --out DIR`",
            analysis.not_run,
            if analysis.not_run == 1 { "" } else { "s" },
            if inputs.len() == 1 { "x" } else { "ces" }
        );
        return Ok(exit_codes::RUN_INCOMPLETE);
    }
    Ok(exit_codes::SUCCESS)
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

/// `--record-fixtures DIR` / `--replay-fixtures DIR` (clap makes them exclusive).
fn fixture_mode(record: Option<&PathBuf>, replay: Option<&PathBuf>) -> elengtis::model::fixtures::FixtureMode {
    use elengtis::model::fixtures::FixtureMode;
    match (record, replay) {
        (Some(dir), _) => FixtureMode::Record(dir.clone()),
        (None, Some(dir)) => FixtureMode::Replay(dir.clone()),
        (None, None) => FixtureMode::Off,
    }
}

/// How runs use Docker: the engine gate as the flag says, the relay as `ELENGTIS_RELAY` says.
fn docker_options(allow_vulnerable_engine: bool, runtime: &RuntimeArg) -> DockerOptions {
    DockerOptions {
        allow_vulnerable_engine,
        relay: RelayMode::from_env(),
        network: TrialNetwork::from_env(),
        runtime: runtime.runtime.clone(),
    }
}

fn run_options(jobs: u16, docker: DockerOptions, events: Arc<Terminal>) -> RunOptions {
    RunOptions { jobs: jobs.into(), sandbox: SandboxChoice::Docker(docker), events, ..RunOptions::default() }
}

/// `bench --original EXE --original-image IMAGE`, checked before Docker is reached: EXE must
/// be an executable file (the original's `elengtis`), IMAGE a plausible reference.
fn bench_original(exe: PathBuf, image: String) -> Result<elengtis::bench::original::OriginalSettings, Error> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&exe) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {}
        Ok(_) => {
            return Err(Error::Usage(format!("--original {} is not an executable file", exe.display())));
        }
        Err(e) => return Err(Error::Usage(format!("failed to read --original {}: {e}", exe.display()))),
    }
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!("--original-image must be an image reference, got `{image}`")));
    }
    Ok(elengtis::bench::original::OriginalSettings { exe, image })
}
