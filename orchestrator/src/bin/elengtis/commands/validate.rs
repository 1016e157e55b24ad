//! `elengtis validate`: check a campaign and its scenarios without contacting anything.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis_core::format;
use elengtis_core::load;
use elengtis_core::validate::LoadOptions;
use serde_json::json;

use super::common::print_warnings;
use crate::output::{errln, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
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
}

pub(crate) fn run(args: ValidateArgs) -> Result<i32, Error> {
    validate(&args.campaign, args.json, args.tools.as_deref())
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
    // A recorded tool list also names the tool nearest a binding's typo.
    match load::load_campaign(path, &LoadOptions { tools: lists.clone(), ..LoadOptions::default() }) {
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
