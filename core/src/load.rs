//! Loading: a campaign file and its scenarios read, parsed ([`crate::format`]) and checked
//! ([`crate::validate`]) into a [`Bundle`]; a bundle rebuilt from a results manifest; run-time
//! overrides applied and checked again.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::format::campaign::Campaign;
use crate::format::scenario::Scenario;
use crate::format::yaml::Node;
use crate::format::{
    Bundle, Document, LoadError, Mismatch, canonical_json, check_extension, de, diagnostic_at, parse_document_all,
    parse_document_lenient, quote, read_limited, scenario_files, sha256_hex,
};
use crate::validate::{self, LoadOptions, Overrides};

/// Load a campaign file and its scenarios, and validate everything.
///
/// Every problem is reported at once: a campaign that does not read does not hide its
/// scenarios' problems. When the campaign's only problems are unknown fields (typos), the
/// rest of it is read without them and checked with its scenarios as usual; when it does not
/// read otherwise, each scenario it lists is still read and checked on its own (the checks
/// across files, such as each target's bindings, need a campaign that reads).
pub fn load_campaign(path: &Path, options: &LoadOptions) -> Result<Bundle, LoadError> {
    if let Some(d) = check_extension(path) {
        return Err(LoadError::Invalid(vec![d]));
    }
    let text = read_limited(path)?;
    let sha256 = sha256_hex(text.as_bytes());
    let mut diagnostics = Vec::new();
    let (campaign, tree) = match parse_document_lenient::<Campaign>(path, &text) {
        Ok((campaign, node)) => (Some(campaign), Some(node)),
        // Without a campaign that reads, its tree still lists the scenarios (unless the YAML
        // itself is broken).
        Err(Mismatch { diagnostics: found, lenient, node }) => {
            diagnostics.extend(found);
            (lenient, node)
        }
    };
    let Some(tree) = tree else {
        return Err(LoadError::Invalid(diagnostics));
    };
    let files = campaign.as_ref().map_or_else(|| scenario_files(&tree), |c| c.scenarios.clone());
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut scenarios = Vec::new();
    for (i, rel) in files.iter().enumerate() {
        let scenario_path = base.join(rel);
        let position = validate::position(&tree, &validate::At::root().k("scenarios").i(i));
        if let Some(mut d) = check_extension(&scenario_path) {
            d.file = path.to_owned();
            (d.line, d.column) = position;
            d.path = format!("scenarios[{i}]");
            d.message = format!("scenario file \"{}\" must end in .yaml or .yml", quote::excerpt(rel));
            diagnostics.push(d);
            continue;
        }
        let text = match read_limited(&scenario_path) {
            Ok(text) => text,
            Err(LoadError::Read { source, .. }) => {
                diagnostics.push(diagnostic_at(
                    path,
                    position.0,
                    position.1,
                    format!("scenarios[{i}]"),
                    format!("failed to read scenario {}: {source}", scenario_path.display()),
                ));
                continue;
            }
            Err(LoadError::Invalid(d)) => {
                diagnostics.extend(d);
                continue;
            }
        };
        match parse_document_all::<Scenario>(&scenario_path, &text) {
            Ok((scenario, node)) => {
                let sha256 = sha256_hex(&canonical_json(&scenario));
                scenarios.push(Document { path: scenario_path, value: scenario, node, sha256 });
            }
            Err(d) => diagnostics.extend(d),
        }
    }
    let Some(campaign) = campaign else {
        diagnostics.extend(validate::check_scenarios_alone(&scenarios, options));
        return Err(LoadError::Invalid(diagnostics));
    };
    let campaign = Document { path: path.to_owned(), value: campaign, node: tree, sha256 };
    let mut bundle = Bundle { campaign, scenarios, warnings: Vec::new() };
    match validate::validate(&mut bundle, options) {
        Ok(()) if diagnostics.is_empty() => Ok(bundle),
        Ok(()) => {
            diagnostics.append(&mut bundle.warnings);
            Err(LoadError::Invalid(diagnostics))
        }
        Err(e) => {
            diagnostics.extend(e.diagnostics().iter().cloned());
            Err(LoadError::Invalid(diagnostics))
        }
    }
}

/// Rebuild a bundle from the dumps stored in a results manifest (for resume). Positions
/// refer to the manifest's dumps; environment and rule examples are not rechecked.
pub fn bundle_from_dumps(
    manifest: &Path,
    campaign: &Value,
    scenarios: &[(PathBuf, Value)],
    campaign_sha256: String,
) -> Result<Bundle, LoadError> {
    let node = Node::from_json(campaign);
    let value = de::from_node::<Campaign>(&node).map_err(|e| {
        LoadError::Invalid(vec![diagnostic_at(manifest, 0, 0, format!("campaign.{}", e.path), e.message)])
    })?;
    let campaign = Document { path: manifest.to_owned(), value, node, sha256: campaign_sha256 };
    let mut docs = Vec::new();
    for (i, (path, dump)) in scenarios.iter().enumerate() {
        let node = Node::from_json(dump);
        let value = de::from_node::<Scenario>(&node).map_err(|e| {
            LoadError::Invalid(vec![diagnostic_at(manifest, 0, 0, format!("scenarios[{i}].{}", e.path), e.message)])
        })?;
        let sha256 = sha256_hex(&canonical_json(&value));
        docs.push(Document { path: path.clone(), value, node, sha256 });
    }
    let mut bundle = Bundle { campaign, scenarios: docs, warnings: Vec::new() };
    validate::validate(
        &mut bundle,
        &LoadOptions { max_trials: validate::MAX_TRIALS_OVERRIDE, ..LoadOptions::resume() },
    )?;
    Ok(bundle)
}

/// Apply run-time overrides and validate the result again.
pub fn apply_overrides(bundle: &mut Bundle, overrides: &Overrides) -> Result<(), LoadError> {
    validate::apply_overrides(bundle, overrides)
}
