//! The command line of `elengtis scan`: the target (as `init` describes one), the roles file,
//! the classes, and what to print.

use std::path::PathBuf;

use elengtis_core::format::seed::Weakness;
use elengtis_core::format::{Diagnostic, LoadError};
use elengtis_core::prove::sequential::StoppingRule;

use super::ScanOptions;
use super::roles::RoleOverrides;
use crate::init::InitError;
use crate::init::cli::TargetArgs;

/// `elengtis scan`: find the attacks a server allows (docs/scan.md).
#[derive(Debug, Clone, clap::Args)]
#[command(group = clap::ArgGroup::new("live_model").args(["model_config", "planner_config"]).multiple(true))]
pub struct ScanArgs {
    /// Directory for scan.json (created if missing).
    #[arg(long, default_value = "scan-out")]
    pub out: PathBuf,
    /// List the inventory and the candidates without writing or running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// The most trials a candidate gets.
    #[arg(long, default_value_t = elengtis_core::prove::sequential::DEFAULT_MAX_TRIALS, value_name = "N")]
    pub max_trials: u32,
    /// The fire rate candidates are judged against: a candidate fires when the 95% Wilson
    /// interval of its fire rate lies above it, and is resisted when it lies below.
    #[arg(long, default_value_t = elengtis_core::prove::sequential::DEFAULT_THRESHOLD, value_name = "P")]
    pub threshold: f64,
    /// Run every candidate to --max-trials instead of stopping once its interval decides.
    #[arg(long)]
    pub fixed: bool,
    /// Prove every candidate that fired (as `elengtis prove` does: both sides, the repeat
    /// filter, rewrites, calibration, the carrier) against the guarded side: the control shim
    /// at the MCP boundary by default (nothing to write), or your guarded build
    /// (--guarded-target).
    #[arg(long)]
    pub prove: bool,
    /// With --prove: the guarded side is this second build of the server (FILE holds one
    /// campaign target, as `prove --guarded-target`).
    #[arg(long, value_name = "FILE", requires = "prove")]
    pub guarded_target: Option<PathBuf>,
    /// With --prove: iterations of the repeat filter (a keep needs at least 5).
    #[arg(long, default_value_t = crate::prove::DEFAULT_ITERATIONS, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub iterations: u32,
    /// Drive the trials with a live model instead of each candidate's script: FILE holds the
    /// campaign's model fields (`model`, and optionally `provider`, `provider_route`,
    /// `generation`, `model_id`), as `prove --model-config`.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// Write each live model request's final answer (the trials' and the planner's) into DIR
    /// as a fixture.
    #[arg(long, value_name = "DIR", conflicts_with = "replay_fixtures", requires = "live_model")]
    pub record_fixtures: Option<PathBuf>,
    /// Answer every live model request (the trials' and the planner's) from the fixtures in
    /// DIR, offline.
    #[arg(long, value_name = "DIR", requires = "live_model")]
    pub replay_fixtures: Option<PathBuf>,
    /// A live model that writes payload variants and user tasks for the paths the library
    /// found (off by default): FILE holds the campaign's model fields, as --model-config. It is
    /// asked once; its request, answer and decision are kept in OUT/planner/. An answer that
    /// does not read, or names anything the inventory does not hold, is rejected with why and
    /// nothing of it runs.
    #[arg(long, value_name = "FILE", conflicts_with = "dry_run")]
    pub planner_config: Option<PathBuf>,
    /// With --planner-config: the most variants the planner is asked for.
    #[arg(long, value_name = "N", default_value_t = super::planner::DEFAULT_VARIANTS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(super::planner::MAX_VARIANTS)),
          requires = "planner_config")]
    pub planner_variants: u32,
    /// Scan a server at a URL (`--target FILE` of transport `streamable_http`): it runs beyond
    /// the trial's own sandbox, so the scope must be named explicitly — the URL itself or its
    /// `host:port` — and is recorded in scan.json.
    #[arg(long, value_name = "SCOPE")]
    pub authorize: Option<String>,
    /// What the agent under test is for ("an email-triage assistant for a support team"): the
    /// candidates' system prompt and tasks say so.
    #[arg(long, value_name = "TEXT")]
    pub purpose: Option<String>,
    /// Trials run at once, over all candidates.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,
    /// Print each tool's roles with the words that put it there.
    #[arg(long)]
    pub explain: bool,
    /// A roles file (`roles: {TOOL: [source|plant|sink|egress, …]}`) that overrides the
    /// heuristics for the tools it names.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,
    /// Only these classes (comma-separated: W2, W3, W4; default all).
    #[arg(long, value_name = "W2,W3,W4", value_delimiter = ',', value_parser = parse_class, num_args = 1.., action = clap::ArgAction::Append)]
    pub class: Vec<Weakness>,
    /// Print scan.json instead of the text.
    #[arg(long)]
    pub json: bool,
    /// The server is this campaign target file (one target: a stdio command or an isolated
    /// container, with its env, volumes and controls), instead of --image or a command.
    #[arg(long = "target", value_name = "FILE", conflicts_with_all = ["image", "command", "rest"])]
    pub target_file: Option<PathBuf>,
    #[command(flatten)]
    pub target: TargetArgs,
}

fn parse_class(value: &str) -> Result<Weakness, String> {
    match value.trim().to_ascii_uppercase().as_str() {
        "W2" => Ok(Weakness::W2),
        "W3" => Ok(Weakness::W3),
        "W4" => Ok(Weakness::W4),
        "W1" => Err("W1 is not run as an attack: the server's own descriptions are linted (scan reports them)".into()),
        other => Err(format!("unknown class {other:?}; the classes are W2, W3, W4")),
    }
}

/// Why the flags cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScanArgsError {
    /// A usage error.
    #[error(transparent)]
    Target(#[from] InitError),
    /// The roles file cannot be read or parsed.
    #[error(transparent)]
    Roles(#[from] LoadError),
}

impl ScanArgs {
    /// The scan the flags ask for.
    pub fn options(&self) -> Result<ScanOptions, ScanArgsError> {
        self.rule().check().map_err(|e| InitError::Usage(format!("failed to scan: {e}")))?;
        if let Some(purpose) = &self.purpose {
            super::files::check_purpose(purpose).map_err(|e| InitError::Usage(format!("failed to scan: {e}")))?;
        }
        let overrides = match &self.roles {
            Some(path) => {
                let text = elengtis_core::format::read_limited(path)?;
                let (overrides, _) = elengtis_core::format::parse_document::<RoleOverrides>(path, &text)
                    .map_err(|d: Diagnostic| LoadError::Invalid(vec![d]))?;
                Some((path.display().to_string(), overrides))
            }
            None => None,
        };
        if self.authorize.is_some() && self.target_file.is_none() {
            return Err(InitError::Usage(
                "failed to scan: --authorize names the scope of a server at a URL (--target FILE of transport \
                 streamable_http)"
                    .into(),
            )
            .into());
        }
        Ok(ScanOptions {
            spec: match &self.target_file {
                Some(path) => {
                    let target = elengtis_core::format::gate::load_target(path)?;
                    if let elengtis_core::format::campaign::Transport::Rest(_) = &target.transport {
                        return Err(InitError::Usage(format!(
                            "failed to scan {}: a rest target has no tools to scan (it is a black-box agent behind an \
                             HTTP endpoint: a message in, a reply out); audit it with `elengtis run` and a campaign whose \
                             scenarios check its reply",
                            path.display()
                        ))
                        .into());
                    }
                    if let elengtis_core::format::campaign::Transport::StreamableHttp(http) = &target.transport {
                        authorized(&http.url, self.authorize.as_deref())
                            .map_err(|why| InitError::Usage(format!("failed to scan {}: {why}", path.display())))?;
                    } else if self.authorize.is_some() {
                        return Err(InitError::Usage(
                            "failed to scan: --authorize names the scope of a server at a URL; this target runs in the \
                             trial's own sandbox and needs none"
                                .into(),
                        )
                        .into());
                    }
                    super::ScanTarget::File(Box::new(target))
                }
                None => super::ScanTarget::Described(self.target.spec()?),
            },
            target_id: self.target.id.clone(),
            overrides,
            classes: self.class.clone(),
            out: self.out.clone(),
            run: None,
            purpose: self.purpose.clone(),
            authorized: self.authorize.clone(),
        })
    }

    /// The stopping rule the flags ask for.
    pub fn rule(&self) -> StoppingRule {
        StoppingRule { threshold: self.threshold, max_trials: self.max_trials, sequential: !self.fixed }
    }
}

/// Whether `scope` authorizes scanning the server at `url`: the URL itself, or its
/// `host:port` (the port as written or the scheme's default).
///
/// # Errors
///
/// Why not, naming what `--authorize` must say.
pub fn authorized(url: &str, scope: Option<&str>) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("its URL {url:?} does not parse: {e}"))?;
    let host = parsed.host_str().unwrap_or_default();
    let authority = match parsed.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    match scope {
        None => Err(format!(
            "it is a server at a URL ({url}), beyond the trial's own sandbox: name it explicitly with --authorize \
             {authority}"
        )),
        Some(s) if s.trim_end_matches('/') == url.trim_end_matches('/') || s.eq_ignore_ascii_case(&authority) => Ok(()),
        Some(s) => Err(format!("--authorize {s} does not name this server ({url}); its scope is {authority}")),
    }
}

#[cfg(test)]
mod tests {
    use super::authorized;

    #[test]
    fn a_scope_names_the_url_or_its_host_and_port() {
        let url = "http://127.0.0.1:8931/mcp";
        assert!(authorized(url, Some("127.0.0.1:8931")).is_ok());
        assert!(authorized(url, Some("http://127.0.0.1:8931/mcp/")).is_ok());
        assert!(authorized("https://mcp.example.com/mcp", Some("mcp.example.com:443")).is_ok());
        let err = authorized(url, None).unwrap_err();
        assert!(err.contains("--authorize 127.0.0.1:8931"), "{err}");
        let err = authorized(url, Some("127.0.0.1:9999")).unwrap_err();
        assert!(err.contains("does not name this server"), "{err}");
        assert!(authorized(url, Some("127.0.0.1")).is_err(), "a host alone is not the server's scope");
    }
}
