//! The `elengtis` command line: parse flags, call the engine, render its events and
//! results, map the outcome to an exit code. The engine never prints; this binary does.
//! Each command's flags and wiring live in its module under `commands/`.

mod commands;
mod events_file;
mod output;
mod render;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use self::output::errln;

/// Audit MCP servers, and the agents that use them, for prompt-injection weaknesses.
#[derive(Debug, Parser)]
#[command(name = "elengtis", version, about, long_about = None, after_help = "Exit codes: see docs/exit-codes.md (0 success, 1 incomplete run, 2 usage, 3 invalid campaign, 4 results directory, 5 unavailable, 6 I/O, 7 prove: rejected, 8 prove: only stable, not proven, 9 gate: no evidence, 130 interrupted, 141 stdout closed, 143 terminated).")]
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
    Validate(commands::validate::ValidateArgs),
    /// Run a campaign, or continue one with --resume.
    Run(commands::run::RunArgs),
    /// Prove an attack seed against the vulnerable and the guarded reference twin: repeat
    /// filter, metamorphic rewrites, verdict (KEPT / STABLE, NOT PROVEN / REJECTED).
    Prove(commands::prove::ProveArgs),
    /// Which controls of a guarded side carry the security against an attack seed: each
    /// switched off in turn (and with --redundancy on alone) — load-bearing, redundant,
    /// theatre. The reference twin's guards W1–W4, or your --target's declared controls.
    Ablate(commands::ablate::AblateArgs),
    /// Run the committed regression of proven findings (the gate file): reference findings
    /// replayed offline from recorded fixtures, custom ones re-driven live when
    /// ELENGTIS_LIVE_TARGET=1; `--record` re-records the fixtures live.
    Gate(commands::gate::GateArgs),
    /// Start each target as a trial would, list its tools, check the campaign's tool names and
    /// call arguments against them (the tools' inputSchema), tear down.
    Preflight(commands::preflight::PreflightArgs),
    /// Start a server (an image or a stdio command) as preflight does, list its tools and write
    /// a commented campaign, negative control and scenario skeleton that runs as written.
    Init(elengtis::init::cli::InitArgs),
    /// Find the attacks a server allows: its tools' roles, directive-shaped descriptions, and
    /// the candidate attacks (docs/scan.md; `--dry-run` lists them).
    Scan(elengtis::scan::cli::ScanArgs),
    /// Write the JSON Schemas generated from this build: campaign, scenario, seed and
    /// gate.schema.json (the formats), row, evidence, manifest, validation_report and ablation.schema.json
    /// (the results), events.schema.json (a line of an `--events` file).
    Schema(commands::schema::SchemaArgs),
    /// Run a packaged example (no API key, network or Docker needed).
    Example(commands::example::ExampleArgs),
    /// Build or import images for isolated trials, without any registry.
    #[command(subcommand)]
    Images(commands::images::ImagesCommand),
    /// Remove containers, networks and volumes elengtis left behind (never anything else):
    /// only those of runs whose runner is provably gone, unless --run names one.
    Gc(commands::gc::GcArgs),
    /// Measure stdio trials, isolated-container trials and the raw container lifecycle floor
    /// (needs Docker and the bundled images: `elengtis images build`), stdio trial throughput
    /// against the fixture's own start, and the live-model provider path's overhead per
    /// request against the scripted model server (`--stdio-only`, `--provider-only`: no Docker).
    Bench(commands::bench::BenchArgs),
    /// (internal) Relay container's main process: wait until ADDR accepts connections, then
    /// carry the runner's connections to it over stdin/stdout.
    #[command(hide = true, name = "relay-mux")]
    RelayMux(commands::relay_mux::RelayMuxArgs),
    /// Check a results directory end to end: every row in the recorded matrix, attempts
    /// unique, the row chain intact, each evidence file present, unchanged and agreeing with
    /// its row, the manifest consistent with the campaign it records, the seal and its
    /// signature. Says which format it read, what is wrong (where, and how to repair it) and
    /// what it could not check (docs/results.md, "Verify").
    Verify(commands::verify::VerifyArgs),
    /// Merge the shards of one campaign (`run --partition K/N`, one results directory each)
    /// into one results directory that `verify`, `analyze` and `report` read as the whole
    /// run: each shard verified and sealed, of one campaign, matrix and partition scheme, no
    /// trial in two; trials no shard ran are reported not run (exit 1), with the command that
    /// runs them (docs/scale-out.md).
    Merge(commands::merge::MergeArgs),
    /// Make an Ed25519 key pair for signing seals: FILE (the private key, PKCS#8 PEM, mode
    /// 0600) and FILE.pub (the public key). Neither may exist. Sign with
    /// `ELENGTIS_SIGNING_KEY_FILE=FILE`, check with `elengtis verify --public-key FILE.pub`.
    Keygen(commands::keygen::KeygenArgs),
    /// Write one self-contained HTML report (overview with Wilson intervals, every trial's
    /// trajectory and evidence, validation reports) over results directories and `prove`/`gate`
    /// outputs; it opens from file:// and loads nothing (docs/report.md).
    Report(commands::report::ReportArgs),
    /// Summarise result directories: per model × engine × scenario, with Wilson intervals,
    /// and the engine recommendation of a live comparison.
    Analyze(commands::analyze::AnalyzeArgs),
    /// Live comparison experiments: plan a frozen, blocked, randomised bundle; run it under a
    /// spend cap (docs/experiments.md).
    #[command(subcommand)]
    Experiment(elengtis::experiment::ExperimentCommand),
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The stdio guard and its exec stage (`__stdio-guard`, `__stdio-exec`; the runner prefers
    // the small `elengtis-stdio-guard`, which runs the same code) stay single-threaded (no
    // runtime, no logging) and parse only their own command lines (docs/performance.md,
    // "stdio trials at scale").
    if let Some(status) = elengtis_stdio_guard::internal_main(&args) {
        return exit_status(status);
    }
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
            // `--help` and `--version` print on stdout, which may be closed (`| head -1`).
            let printed = e.print();
            if printed.is_err() && !e.use_stderr() {
                return exit(exit_codes::STDOUT_CLOSED);
            }
            return exit(code);
        }
    };
    init_logging(cli.log.as_deref());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: failed to start the async runtime: {e}");
            return exit(exit_codes::IO);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => exit(code),
        Err(error) => {
            errln!("error: {}", elengtis::error::render(&error));
            exit(error.exit_code())
        }
    }
}

/// The guard's exit: the target's status, 0..=255.
fn exit_status(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1))
}

/// The process's exit: `code`, unless stdout failed ([`output::exit`]).
fn exit(code: i32) -> ExitCode {
    output::exit(code)
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
            errln!(
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
        Command::Validate(args) => commands::validate::run(args),
        Command::Run(args) => commands::run::run(args).await,
        Command::Prove(args) => commands::prove::run(args).await,
        Command::Ablate(args) => commands::ablate::run(args).await,
        Command::Gate(args) => commands::gate::run(args).await,
        Command::Preflight(args) => commands::preflight::run(args).await,
        Command::Init(args) => commands::init::run(args).await,
        Command::Scan(args) => commands::scan::run(args).await,
        Command::Schema(args) => commands::schema::run(args),
        Command::Example(args) => commands::example::run(args).await,
        Command::Analyze(args) => commands::analyze::run(args),
        Command::Experiment(command) => commands::experiment::run(command).await,
        Command::Report(args) => commands::report::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Keygen(args) => commands::keygen::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Gc(args) => commands::gc::run(args).await,
        Command::Images(command) => commands::images::run(command).await,
        Command::Bench(args) => commands::bench::run(args).await,
        Command::RelayMux(args) => commands::relay_mux::run(args).await,
    }
}
