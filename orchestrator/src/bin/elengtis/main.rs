//! The `elengtis` command line: parse flags, call the engine, render its events and
//! results, map the outcome to an exit code. The engine never prints; this binary does.

mod events_file;
mod output;
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

use self::output::{errln, out, outln};
use self::render::{OutputArgs, Terminal, interactive};

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
    /// Which controls of a guarded side carry the security against an attack seed: each
    /// switched off in turn (and with --redundancy on alone) — load-bearing, redundant,
    /// theatre. The reference twin's guards W1–W4, or your --target's declared controls.
    Ablate(AblateArgs),
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
    /// Find the attacks a server allows: its tools' roles, directive-shaped descriptions, and
    /// the candidate attacks (docs/scan.md; `--dry-run` lists them).
    Scan(elengtis::scan::cli::ScanArgs),
    /// Write the JSON Schemas generated from this build: campaign, scenario, seed and
    /// gate.schema.json (the formats), row, evidence, manifest, validation_report and ablation.schema.json
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
    /// (needs Docker and the bundled images: `elengtis images build`), stdio trial throughput
    /// against the fixture's own start, and the live-model provider path's overhead per
    /// request against the scripted model server (`--stdio-only`, `--provider-only`: no Docker).
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
        /// Measure only stdio trial throughput at --jobs 1 and --jobs 4, against the fixture's
        /// own start measured in the same run (no Docker needed).
        #[arg(long, conflicts_with_all = ["provider_only", "original"])]
        stdio_only: bool,
        /// Measure only one finding's prove (the bundled seed w4-send-email-via-note-injection,
        /// 29 legs and its calibration on both sides) at --jobs 4 and --jobs 1, against the legs' raw
        /// container lifecycle and a bridge per leg, measured in the same run.
        #[arg(long, conflicts_with_all = ["provider_only", "stdio_only", "original"])]
        prove_only: bool,
        /// Trials per stdio throughput measurement (--short: 30).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        stdio_trials: u32,
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
    /// unique, the row chain intact, each evidence file present, unchanged and agreeing with
    /// its row, the manifest consistent with the campaign it records, the seal and its
    /// signature. Says which format it read, what is wrong (where, and how to repair it) and
    /// what it could not check (docs/results.md, "Verify").
    Verify {
        /// The results directory.
        dir: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Refuse (exit 10) a directory that is not sealed: a run still going, or killed.
        #[arg(long)]
        require_sealed: bool,
        /// Check the seal's signature with this key: an HMAC secret, or an Ed25519 private key
        /// (PKCS#8 PEM). Implies --require-sealed. ELENGTIS_SIGNING_KEY and
        /// ELENGTIS_SIGNING_KEY_FILE are used too.
        #[arg(long, value_name = "FILE")]
        key: Vec<PathBuf>,
        /// Check the seal's Ed25519 signature with this public key (SPKI PEM, as `elengtis
        /// keygen` writes it). Implies --require-sealed.
        #[arg(long, value_name = "FILE")]
        public_key: Vec<PathBuf>,
    },
    /// Merge the shards of one campaign (`run --partition K/N`, one results directory each)
    /// into one results directory that `verify`, `analyze` and `report` read as the whole
    /// run: each shard verified and sealed, of one campaign, matrix and partition scheme, no
    /// trial in two; trials no shard ran are reported not run (exit 1), with the command that
    /// runs them (docs/scale-out.md).
    Merge {
        /// A shard's results directory (repeat, or list several).
        #[arg(long = "input", value_name = "SHARD", required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// The merged results directory (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make an Ed25519 key pair for signing seals: FILE (the private key, PKCS#8 PEM, mode
    /// 0600) and FILE.pub (the public key). Neither may exist. Sign with
    /// `ELENGTIS_SIGNING_KEY_FILE=FILE`, check with `elengtis verify --public-key FILE.pub`.
    Keygen {
        /// Where to write the private key (the public key goes to FILE.pub).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
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
        /// Count each trial once when inputs hold the same trials (a merged directory given
        /// with its shards, two merges of the same shards, a copy); without it such inputs
        /// are refused (docs/results.md, "Inputs that overlap").
        #[arg(long)]
        dedupe: bool,
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
    #[arg(long, value_name = "SHARD_OUT", num_args = 1..)]
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
    /// Remove a guard from the guarded twin (a test build; repeatable): shows that prove
    /// notices a broken guard.
    #[arg(long = "disable-guard", value_name = "W1|W2|W3|W4", value_parser = parse_weakness)]
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
struct AblateArgs {
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
    /// Append a finding `elengtis scan --prove` proved KEPT to the gate file (created if
    /// missing) instead of running the gate: SEED is its `<scan>/candidates/<id>.seed.yaml`.
    #[arg(long, value_name = "SEED", conflicts_with_all = ["record", "findings"])]
    add: Option<PathBuf>,
    /// Re-record the reference findings' fixtures with the gate file's live model, and lock
    /// each directory whose recording proves KEPT with every leg decided.
    #[arg(long)]
    record: bool,
    /// Only this finding (its seed id; repeatable).
    #[arg(long = "finding", value_name = "SEED_ID")]
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
        Command::Validate { campaign, json, tools } => validate(&campaign, json, tools.as_deref()),
        Command::Run(args) => run_command(args).await,
        Command::Prove(args) => prove_command(args).await,
        Command::Ablate(args) => ablate_command(args).await,
        Command::Gate(args) => gate_command(args).await,
        Command::Preflight { campaign, json, allow_vulnerable_engine, runtime } => {
            preflight(&campaign, json, docker_options(allow_vulnerable_engine, &runtime)).await
        }
        Command::Init(args) => init_command(args).await,
        Command::Scan(args) => scan_command(args).await,
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
        Command::Analyze { inputs, out, practical_margin_pp, conformance_passed, pool, dedupe } => {
            use elengtis_core::analysis::{Campaigns, Overlap};
            let rule = elengtis_core::analysis::RecommendOptions { practical_margin_pp, conformance_passed };
            let campaigns = if pool { Campaigns::Pooled } else { Campaigns::Apart };
            analyze(&inputs, &out, &rule, campaigns, if dedupe { Overlap::Dedupe } else { Overlap::Refuse })
        }
        Command::Experiment(command) => {
            let terminal = Arc::new(Terminal::new(interactive()));
            let options = run_options(1, docker_options(false, &RuntimeArg::default()), terminal.clone());
            let result = elengtis::experiment::command(command, options, &|line| terminal.print(line)).await;
            terminal.finish();
            Ok(result?)
        }
        Command::Report { inputs, out, dedupe } => report::run(&inputs, &out, dedupe),
        Command::Verify { dir, json, require_sealed, key, public_key } => {
            verify_command(&dir, json, require_sealed, &key, &public_key)
        }
        Command::Keygen { out } => keygen(&out),
        Command::Merge { inputs, out, json } => merge_command(&inputs, &out, json),
        Command::Gc { out: Some(out), json, .. } => gc_stdio(&out, json),
        Command::Gc { run, json, out: None } => gc(run.as_deref(), json).await,
        Command::Images(command) => images(command).await,
        Command::Bench { trials, short, json, allow_vulnerable_engine, provider_only: true, .. } => {
            let trials = if short { 3 } else { trials };
            let report = elengtis::bench::provider(elengtis::bench::provider_requests(trials)).await?;
            if json {
                outln!("{}", json!(report));
            } else {
                out!("{}", elengtis::bench::render_provider(&report));
            }
            let _ = allow_vulnerable_engine;
            Ok(exit_codes::SUCCESS)
        }
        Command::Bench { short, json, stdio_only: true, stdio_trials, output, .. } => {
            let stdio_trials = if short { 30 } else { stdio_trials };
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let report = elengtis::bench::stdio(stdio_trials, terminal.clone()).await;
            print_bench(&terminal, json, report, elengtis::bench::render_stdio)
        }
        Command::Bench { json, allow_vulnerable_engine, runtime, prove_only: true, output, .. } => {
            ensure_images(&docker_options(allow_vulnerable_engine, &runtime)).await?;
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let settings = elengtis::bench::BenchSettings {
                docker: docker_options(allow_vulnerable_engine, &runtime),
                events: terminal.clone(),
                original: None,
            };
            let report = elengtis::bench::prove::prove(&settings).await;
            print_bench(&terminal, json, report, elengtis::bench::prove::render)
        }
        Command::Bench {
            trials,
            short,
            json,
            allow_vulnerable_engine,
            runtime,
            provider_only: false,
            stdio_only: false,
            prove_only: false,
            stdio_trials,
            output,
            original,
            original_image,
        } => {
            let original = match (original, original_image) {
                (Some(exe), Some(image)) => Some(bench_original(exe, image)?),
                _ => None,
            };
            let engine = docker::api::connect().await?;
            docker::check_runtime(&engine, runtime.runtime.as_deref())?;
            if let Some(warning) = docker::engine_gate::check(&engine, allow_vulnerable_engine, &[]).await?.warning() {
                errln!("WARNING: {warning}");
            }
            let trials = if short { 3 } else { trials };
            let terminal = Arc::new(Terminal::for_command(&output, json)?);
            let settings = elengtis::bench::BenchSettings {
                docker: docker_options(allow_vulnerable_engine, &runtime),
                events: terminal.clone(),
                original,
            };
            let stdio_trials = if short { 30 } else { stdio_trials };
            let report = elengtis::bench::run(trials, stdio_trials, &settings).await;
            print_bench(&terminal, json, report, elengtis::bench::render)
        }
        Command::RelayMux { addr, probe_seconds } => {
            match docker::relay::mux::run(addr, std::time::Duration::from_secs(probe_seconds)).await {
                Ok(()) => Ok(exit_codes::SUCCESS),
                Err(e) => {
                    errln!("elengtis relay-mux: {e}");
                    Ok(exit_codes::RUN_INCOMPLETE)
                }
            }
        }
    }
}

fn print_warnings(warnings: &[format::Diagnostic]) {
    for w in warnings {
        errln!("{w}");
    }
}

fn validate(path: &Path, json: bool, tools: Option<&Path>) -> Result<i32, Error> {
    let lists = match tools.map(elengtis_core::toolargs::read_tool_lists).transpose() {
        Ok(lists) => lists,
        Err(e) if json => {
            outln!("{}", json!({"valid": false, "trials": [], "diagnostics": e.diagnostics(), "error": e.to_string()}));
            return Ok(exit_codes::INVALID_CONFIG);
        }
        Err(e) => {
            for d in e.diagnostics() {
                errln!("{d}");
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
                outln!("{out}");
            } else {
                print_warnings(&bundle.warnings);
                for finding in &findings {
                    errln!("{finding}");
                }
                for id in &unchecked {
                    errln!(
                        "note: {} has no tool list for target {id}; its tool calls were not checked",
                        tools.map(|p| p.display().to_string()).unwrap_or_default()
                    );
                }
                if !valid {
                    errln!(
                        "error: {errors} problem{} with the tools the campaign calls or their arguments",
                        if errors == 1 { "" } else { "s" }
                    );
                    return Ok(exit_codes::INVALID_CONFIG);
                }
                for id in &trials {
                    outln!("{id}");
                }
            }
            Ok(if valid { exit_codes::SUCCESS } else { exit_codes::INVALID_CONFIG })
        }
        Err(e) if json => {
            outln!("{}", json!({"valid": false, "trials": [], "diagnostics": e.diagnostics(), "error": e.to_string()}));
            Ok(exit_codes::INVALID_CONFIG)
        }
        Err(e) => Err(e.into()),
    }
}

fn report(report: &RunReport, json: bool, verbose: bool, quiet: bool) -> i32 {
    if let Some(leftovers) = report.leftovers.as_ref().filter(|l| !l.is_empty() && !quiet) {
        errln!(
            "note: removed leftovers of an earlier attempt of this run: {} containers, {} networks, {} volumes",
            leftovers.containers.len(),
            leftovers.networks.len(),
            leftovers.volumes.len()
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

async fn run_command(args: RunArgs) -> Result<i32, Error> {
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
    let mut options =
        run_options(args.jobs, docker_options(args.allow_vulnerable_engine, &args.runtime), terminal.clone());
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

/// `--partition SPEC` (or `ELENGTIS_PARTITION`), with K from `JOB_COMPLETION_INDEX` for
/// `index/N`.
fn partition_arg(spec: Option<&str>) -> Result<Option<elengtis_core::partition::Partition>, Error> {
    let Some(spec) = spec else { return Ok(None) };
    let index = std::env::var("JOB_COMPLETION_INDEX").ok();
    elengtis_core::partition::parse(spec, index.as_deref()).map(Some).map_err(|e| Error::Usage(e.to_string()))
}

fn merge_command(inputs: &[PathBuf], out: &Path, json: bool) -> Result<i32, Error> {
    use elengtis::merge::{self, MergeOptions};
    let keys: Vec<Arc<elengtis::results::keys::Key>> = elengtis::results::keys::Key::from_env()
        .map_err(elengtis::run::RunError::Key)?
        .into_iter()
        .map(Arc::new)
        .collect();
    // A key given asks for sealed shards signed by it.
    let verify = elengtis::results::verify::VerifyOptions {
        checkers: keys.iter().map(|k| elengtis::results::keys::Checker::Key(Arc::clone(k))).collect(),
        require_sealed: !keys.is_empty(),
    };
    let started = std::time::Instant::now();
    let report = merge::merge(inputs, out, &MergeOptions { verify, keys })?;
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
        "merged {} of {} shards ({}): {} trials, {} rows",
        report.shards.len(),
        report.total,
        report.scheme.as_str(),
        report.trials,
        report.rows
    );
    for s in &report.shards {
        outln!(
            "  shard {}/{}: {} (run {}), {} rows, sealed {}, seal sha256 {}",
            s.shard,
            report.total,
            s.dir.display(),
            s.run_id,
            s.rows,
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
            None => format!("shard {}/{} was not given: {not_run} trials not run", gap.shard, report.total),
            Some(dir) => format!(
                "shard {}/{} ({}): {not_run} trials not run, {incomplete} without a complete attempt",
                gap.shard,
                report.total,
                dir.display()
            ),
        };
        errln!("error: {what}; fill the gap with `{}`, then merge again", gap_command(gap));
    }
    Ok(code)
}

async fn prove_command(args: ProveArgs) -> Result<i32, Error> {
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
            errln!("note: shard {partition}: {} of {} seeds", selected.len(), seeds.len());
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
        ensure_images(&docker_options(args.allow_vulnerable_engine, &args.runtime)).await?;
    }
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
        guarded_side,
        live,
        model: model_options,
        target,
        guarded_target,
        partition: shard.clone(),
        slots: None,
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
                outln!("{:<40} legs shard {partition}: {} of {} legs", s.seed, s.legs, s.of);
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
        let keys: Vec<Arc<elengtis::results::keys::Key>> = elengtis::results::keys::Key::from_env()
            .map_err(elengtis::run::RunError::Key)?
            .into_iter()
            .map(Arc::new)
            .collect();
        let verify = elengtis::results::verify::VerifyOptions {
            checkers: keys.iter().map(|k| elengtis::results::keys::Checker::Key(Arc::clone(k))).collect(),
            require_sealed: false,
        };
        let merge = elengtis::merge::MergeOptions { verify, keys };
        prove::merge_leg_shards(&seeds, &args.merge_legs, &catalogue, &options, &merge, print)
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

async fn ablate_command(args: AblateArgs) -> Result<i32, Error> {
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
        ensure_images(&docker_options(args.allow_vulnerable_engine, &args.runtime)).await?;
    }
    let terminal = Arc::new(Terminal::for_command(&args.output, args.json)?);
    let options = ProveOptions {
        iterations: args.iterations,
        jobs: args.jobs.into(),
        out: out.clone(),
        metamorphic: false,
        sandbox: SandboxChoice::Docker(docker_options(args.allow_vulnerable_engine, &args.runtime)),
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

/// A target file (`--target`, `--guarded-target`) as a campaign target.
fn target_file(path: &Path) -> Result<serde_json::Value, Error> {
    let target = elengtis_core::format::gate::load_target(path)?;
    serde_json::to_value(target).map_err(|e| Error::Usage(format!("failed to read the target {}: {e}", path.display())))
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
        sandbox: SandboxChoice::Docker(docker_options(args.allow_vulnerable_engine, &args.runtime)),
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
        ensure_images(&docker_options(args.allow_vulnerable_engine, &args.runtime)).await?;
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

async fn preflight(path: &Path, json: bool, docker: DockerOptions) -> Result<i32, Error> {
    let bundle = load::load_campaign(path, &LoadOptions::default())?;
    print_warnings(&bundle.warnings);
    let choice = SandboxChoice::Docker(docker);
    let sandbox = run::prepare_sandbox(&bundle, &choice, &Terminal::new(false)).await?;
    let checks =
        elengtis::preflight::run(&bundle, elengtis::toolhost::mcp::Limits::default(), sandbox.as_deref()).await;
    let mut ok = checks.iter().all(|c| c.ok);
    // The scenarios' `calibrate` actions: can each check see a real effect? Only on targets
    // that passed: a calibration of a server that does not start says nothing more.
    let calibrations = if ok {
        let scratch = tempfile::Builder::new()
            .prefix("elengtis-calibration-")
            .tempdir()
            .map_err(|e| Error::Usage(format!("failed to create a scratch directory for the calibration: {e}")))?;
        let options = run::RunOptions {
            sandbox: sandbox.clone().map_or(choice, SandboxChoice::Prepared),
            jobs: 2,
            ..run::RunOptions::default()
        };
        elengtis::calibrate::run(&bundle, &scratch.path().join("results"), &options).await?
    } else {
        Vec::new()
    };
    ok &= calibrations.iter().all(elengtis::calibrate::Calibrated::ok);
    if json {
        outln!("{}", json!({"ok": ok, "targets": checks, "calibrations": calibrations}));
    } else {
        for check in &checks {
            if let Some(w) = &check.warning {
                errln!("WARNING: {w}");
            }
            // The target's line, then its findings (file:line:column: argument of tool: error).
            out!("{}", check.render());
        }
        for calibration in &calibrations {
            outln!("{}", calibration.line());
        }
    }
    Ok(if ok { exit_codes::SUCCESS } else { exit_codes::RUN_INCOMPLETE })
}

async fn init_command(args: elengtis::init::cli::InitArgs) -> Result<i32, Error> {
    let options = args.options()?;
    let sandbox = target_sandbox(elengtis::init::sandbox_needs(&options.spec), &args.target).await?;
    let sandbox = sandbox.as_ref().map(|s| s as &dyn elengtis::sandbox::SandboxBackend);
    let written = elengtis::init::run(&options, sandbox).await?;
    for warning in &written.warnings {
        errln!("WARNING: {warning}");
    }
    out!("{}", written.summary());
    Ok(exit_codes::SUCCESS)
}

/// The Docker sandbox a described target needs (`init`, `scan`); none for a stdio command.
/// The sandbox `init` and `scan` start their target in to list its tools (None: a stdio target).
async fn target_sandbox(
    needs: Option<elengtis::sandbox::RunNeeds>,
    target: &elengtis::init::cli::TargetArgs,
) -> Result<Option<docker::DockerBackend>, Error> {
    match needs {
        Some(needs) => Ok(Some(
            docker::DockerBackend::prepare(
                &docker_options(target.allow_vulnerable_engine, &target.runtime),
                &needs,
                &Terminal::new(false),
            )
            .await?,
        )),
        None => Ok(None),
    }
}

async fn scan_command(args: elengtis::scan::cli::ScanArgs) -> Result<i32, Error> {
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
                ..elengtis::prove::ProveOptions::default()
            },
            prove_fired,
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
        e @ ScanError::Invalid { .. } => Error::Unavailable(e.to_string()),
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

fn schema(out: &Path) -> Result<i32, Error> {
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let scan = elengtis_core::schema::render(&elengtis_core::schema::schema_for::<elengtis::scan::ScanReport>());
    for (name, content) in elengtis_core::schema::schemas().into_iter().chain([("scan.schema.json", scan)]) {
        let path = out.join(name);
        elengtis::results::store::write_atomic(&path, content.as_bytes())?;
        outln!("{}", path.display());
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
        ensure_images(&docker_options(allow_vulnerable_engine, &runtime)).await?;
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

/// Check the runtime the command's containers run under (`--runtime`, else the engine's
/// default: listed, and registered so that it runs the trial layout), pass the engine gate,
/// then make sure the bundled images exist and are made from the executables beside this one,
/// (re)making them when they are not: imported from those executables (seconds), else compiled
/// from the source tree (minutes, announced with progress), else an error saying what is
/// needed. A campaign's own `runtime:` is checked by the run, also before any trial.
async fn ensure_images(options: &DockerOptions) -> Result<(), Error> {
    let engine = docker::api::connect().await?;
    docker::check_runtime(&engine, options.runtime.as_deref())?;
    // An engine accepted despite findings is reported by the run that follows.
    docker::engine_gate::check(&engine, options.allow_vulnerable_engine, &[]).await?;
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
                errln!("importing the bundled images from the static executables in {}", dir.display());
            }
            let dir = from.binaries(&images::Notify::stderr(interactive())).await?;
            let built = images::build_bundled(&engine, &dir, &images::Notify::silent()).await?;
            if json {
                outln!("{}", json!({"images": built}));
            } else {
                for image in &built {
                    let unchanged = if image.unchanged { ", unchanged" } else { "" };
                    outln!("{} {} ({:.1} MB{unchanged})", image.reference, image.id, image.size as f64 / 1e6);
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
            outln!("{tag} {id}");
            Ok(exit_codes::SUCCESS)
        }
    }
}

async fn gc(run: Option<&str>, json: bool) -> Result<i32, Error> {
    let engine = docker::api::connect().await?;
    let report = docker::gc::sweep(&engine, run).await?;
    if json {
        outln!("{}", json!(report));
    } else {
        for (kind, names) in
            [("container", &report.containers), ("network", &report.networks), ("volume", &report.volumes)]
        {
            for name in names {
                outln!("removed {kind} {name}");
            }
        }
        for e in &report.errors {
            errln!("error: {e}");
        }
        for kept in &report.kept {
            let run = kept.strip_prefix("run ").and_then(|k| k.split(':').next()).unwrap_or("ID");
            outln!("{kept}; remove them anyway with `elengtis gc --run {run}`");
        }
        if report.is_empty() && report.kept.is_empty() {
            outln!("nothing to remove");
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
                    outln!("{}", json!({"stdio": [], "kept": [message]}));
                } else {
                    outln!("{message}");
                }
                return Ok(exit_codes::SUCCESS);
            }
        }
    };
    if json {
        outln!("{}", json!({"stdio": reaped, "kept": []}));
    } else if reaped.is_empty() {
        outln!("nothing to remove");
    } else {
        for r in &reaped {
            outln!("reaped stdio record {}: {}", r.record, r.detail);
        }
    }
    Ok(exit_codes::SUCCESS)
}

/// The exit code of `verify` for what it found: 0 (verified), 10 (nothing wrong, but its
/// integrity cannot be established), 3 (malformed records) or 4.
fn verification_code(verification: &elengtis::results::verify::Verification) -> i32 {
    use elengtis::results::verify::Verdict;
    match verification.verdict() {
        Verdict::Verified => exit_codes::SUCCESS,
        Verdict::Unverifiable => exit_codes::UNVERIFIED,
        Verdict::Refused if verification.is_malformed() => exit_codes::INVALID_CONFIG,
        Verdict::Refused => exit_codes::RESULTS_DIR,
    }
}

fn verify_command(
    dir: &Path,
    json: bool,
    require_sealed: bool,
    keys: &[PathBuf],
    public_keys: &[PathBuf],
) -> Result<i32, Error> {
    use elengtis::results::keys::{Checker, Key};
    use elengtis::results::verify::{Verdict, VerifyOptions};
    let key_error = |e: elengtis::results::keys::KeyError| Error::Usage(e.to_string());
    let mut options = VerifyOptions::from_env().map_err(key_error)?;
    for path in keys {
        options.checkers.push(Checker::Key(Arc::new(Key::from_file(path).map_err(key_error)?)));
    }
    for path in public_keys {
        options.checkers.push(Checker::public_from_file(path).map_err(key_error)?);
    }
    // A signature lives on a seal: a key given in any way (a flag or the environment) asks for one.
    options.require_sealed = require_sealed || !options.checkers.is_empty();
    let verification = elengtis::results::verify::verify_with(dir, &options)?;
    let code = verification_code(&verification);
    if json {
        let mut value = json!(verification);
        value["ok"] = json!(verification.verdict() == Verdict::Verified);
        value["verdict"] = json!(match verification.verdict() {
            Verdict::Verified => "verified",
            Verdict::Unverifiable => "unverifiable",
            Verdict::Refused => "refused",
        });
        value["integrity"] = json!(verification.integrity());
        outln!("{value}");
        return Ok(code);
    }
    for note in &verification.notes {
        errln!("note: {note}");
    }
    errln!("{}: {}", dir.display(), verification.summary_line());
    errln!("  integrity: {}", verification.integrity().says);
    for checked in &verification.checked {
        errln!("  checked: {checked}");
    }
    for unchecked in &verification.unchecked {
        errln!("  not checked: {unchecked}");
    }
    if let elengtis::results::verify::SealState::Sealed { sha256, signatures, .. } = &verification.seal {
        errln!("  seal sha256: {sha256}");
        for signature in signatures {
            errln!("  signature: {signature}");
        }
    }
    let matrix = verification
        .matrix_trials
        .map(|n| format!(", {n} trial{} in the recorded matrix", if n == 1 { "" } else { "s" }))
        .unwrap_or_default();
    let rows = format!("{} row{}", verification.rows, if verification.rows == 1 { "" } else { "s" });
    match verification.verdict() {
        Verdict::Verified => outln!("{}: ok ({rows}{matrix})", dir.display()),
        Verdict::Unverifiable => {
            outln!("{}: not verified ({rows}{matrix}): {}", dir.display(), verification.summary_line());
            errln!(
                "error: {}: nothing wrong was found, but its integrity cannot be established (exit {}; see `not checked` above)",
                dir.display(),
                exit_codes::UNVERIFIED
            );
        }
        Verdict::Refused => {
            out!("{}", verification.render_problems());
            errln!(
                "error: {}: {} problem{} (each above: file:line: what is wrong; repair: how)",
                dir.display(),
                verification.problems.len(),
                if verification.problems.len() == 1 { "" } else { "s" }
            );
        }
    }
    Ok(code)
}

/// `keygen --out FILE`: an Ed25519 pair, FILE and FILE.pub.
fn keygen(out: &Path) -> Result<i32, Error> {
    let mut public = out.as_os_str().to_owned();
    public.push(".pub");
    let public = PathBuf::from(public);
    let key_id = elengtis::results::keys::generate(out, &public).map_err(|e| Error::Usage(e.to_string()))?;
    outln!("wrote {} (private: keep it secret) and {}", out.display(), public.display());
    outln!("key id: {key_id}");
    outln!(
        "sign runs with ELENGTIS_SIGNING_KEY_FILE={}; check them with `elengtis verify --public-key {} DIR`",
        out.display(),
        public.display()
    );
    Ok(exit_codes::SUCCESS)
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

/// A benchmark's end: its progress display closed, then its report as one JSON object or as
/// the rendered table.
fn print_bench<T: serde::Serialize>(
    terminal: &Terminal,
    json: bool,
    report: Result<T, elengtis::bench::BenchError>,
    render: impl Fn(&T) -> String,
) -> Result<i32, Error> {
    terminal.finish();
    let report = report?;
    if json {
        outln!("{}", json!(report));
    } else {
        out!("{}", render(&report));
    }
    Ok(exit_codes::SUCCESS)
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
