//! The command line of `elengtis scan`: the target (as `init` describes one), the roles file,
//! the classes, and what to print.

use std::path::PathBuf;

use elengtis_core::format::seed::Weakness;
use elengtis_core::format::{Diagnostic, LoadError};

use super::ScanOptions;
use super::roles::RoleOverrides;
use crate::init::InitError;
use crate::init::cli::TargetArgs;

/// `elengtis scan`: find the attacks a server allows (docs/scan.md).
#[derive(Debug, Clone, clap::Args)]
pub struct ScanArgs {
    /// Directory for scan.json (created if missing).
    #[arg(long, default_value = "scan-out")]
    pub out: PathBuf,
    /// List the inventory and the candidates without running anything (running candidates is
    /// not built yet, so this is required).
    #[arg(long)]
    pub dry_run: bool,
    /// Print each tool's roles with the words that put it there.
    #[arg(long)]
    pub explain: bool,
    /// A roles file (`roles: {TOOL: [source|plant|sink|egress, …]}`) that overrides the
    /// heuristics for the tools it names.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,
    /// Only these classes (comma-separated: W2, W3, W4; default all).
    #[arg(long, value_name = "W2,W3,W4", value_delimiter = ',', value_parser = parse_class)]
    pub class: Vec<Weakness>,
    /// Print scan.json instead of the text.
    #[arg(long)]
    pub json: bool,
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
        if !self.dry_run {
            return Err(InitError::Usage(
                "failed to scan: running the candidates is not built yet; pass --dry-run to list the inventory and the \
                 candidates (docs/scan.md)"
                    .into(),
            )
            .into());
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
        Ok(ScanOptions {
            spec: self.target.spec()?,
            target_id: self.target.id.clone(),
            overrides,
            classes: self.class.clone(),
            out: self.out.clone(),
        })
    }
}
