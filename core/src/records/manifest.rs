//! `manifest.json`: what a run is — the campaign and scenarios as they were validated (so a
//! resume runs exactly the same thing), their hashes, the experiment labels, the runner's
//! environment, the engine gate's findings and every resume.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A run's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Format version of rows and evidence (`RESULTS_SCHEMA_VERSION` of the build that wrote it).
    pub schema_version: u64,
    /// Version of the metric definitions (`METRICS_VERSION` of the build that wrote it).
    pub metrics_version: u64,
    /// The run.
    pub run_id: String,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// The campaign file as given.
    pub campaign_path: String,
    /// The campaign as validated (with overrides applied), in the campaign format.
    pub campaign: Value,
    /// The scenarios as validated, in campaign order.
    pub scenarios: Vec<ScenarioDump>,
    /// Hashes of what ran.
    pub configuration: Configuration,
    /// Experiment labels carried into analysis.
    pub experiment: Experiment,
    /// The runner that started the run.
    pub environment: Environment,
    /// Consecutive incomplete attempts on one target that stop the run.
    pub max_consecutive_target_failures: u32,
    /// Every resume of the run, in order.
    pub resumes: Vec<ResumeRecord>,
    /// What the engine gate found (runs with container targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_gate: Option<Value>,
    /// elengtis addition: the spend cap (`--budget-usd`) in US dollars, carried into resumes
    /// (a resume's `--budget-usd` replaces it). The spend is the sum of the rows'
    /// `usage.budget_charge_usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// One scenario as validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDump {
    /// The file it was read from.
    pub path: String,
    /// SHA-256 of its canonical JSON dump.
    pub sha256: String,
    /// The scenario, in the scenario format.
    pub dump: Value,
}

/// Hashes of what ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    /// SHA-256 of the campaign file's bytes.
    pub campaign_sha256: String,
    /// Scenario id → SHA-256 of its canonical JSON dump.
    pub scenario_sha256: BTreeMap<String, String>,
    /// SHA-256 of the canonical JSON of the campaign as recorded in `campaign` (schema 2;
    /// absent in manifests of schema 1): pins what a resume runs and what the matrix is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_campaign_sha256: Option<String>,
}

/// Experiment labels (from the campaign).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Experiment id.
    pub id: Option<String>,
    /// Block of a blocked design.
    pub block: Option<u64>,
    /// Order within the block.
    pub order: Option<u64>,
    /// Model label for analysis.
    pub model_id: Option<String>,
    /// Generation settings.
    pub generation: Map<String, Value>,
}

/// The runner's environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// This tool's version.
    pub elengtis_version: String,
    /// The MCP SDK's version.
    pub rmcp_version: String,
    /// Operating system.
    pub os: String,
    /// CPU architecture.
    pub arch: String,
    /// The source revision the binary was built from, when known.
    pub code_revision: Option<String>,
}

/// One resume of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRecord {
    /// When (RFC 3339, UTC).
    pub resumed_at: String,
    /// The runner that resumed it.
    pub environment: Environment,
    /// What the engine gate found then.
    #[serde(default)]
    pub engine_gate: Option<Value>,
}
