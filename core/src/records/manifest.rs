//! `manifest.json`: what a run is — the campaign and scenarios as they were validated (so a
//! resume runs exactly the same thing), their hashes, the experiment labels, the runner's
//! environment, the engine gate's findings and every resume.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::seal::Seal;
use crate::partition::{PartitionRecord, Scheme};

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
    /// Consecutive incomplete attempts on one target that stop that target's trials (the other
    /// targets' go on).
    pub max_consecutive_target_failures: u32,
    /// Every resume of the run, in order.
    pub resumes: Vec<ResumeRecord>,
    /// What the engine gate found (runs with container targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_gate: Option<Value>,
    /// elengtis addition: the spend cap (`--budget-usd`) in US dollars the run started with.
    /// A resume records its own in its resume record ([`ResumeRecord::budget_usd`]), which
    /// then applies ([`Manifest::spend_cap`]); the spend is the sum of the rows'
    /// `usage.budget_charge_usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// elengtis addition: the shard of the trial matrix this run is (`run --partition K/N`);
    /// absent for a run of the whole matrix. `verify`, `analyze` and `run --resume` then take
    /// the shard's trials as the run's matrix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionRecord>,
    /// elengtis addition: the shards this directory was merged from (`elengtis merge`);
    /// absent for a run. Its `runs.jsonl` is each shard's log as it was, one after another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeRecord>,
    /// elengtis addition, absent when the campaign has none: its `rest` targets (black-box
    /// agents behind an HTTP endpoint), each with its endpoint and the campaign's statement of
    /// where it runs and what it may reach. Their trials launch nothing, ask no model and send
    /// no system prompt: the endpoint is the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rest_targets: Vec<RestTargetRecord>,
    /// elengtis addition, absent without a key: the writer's signature over the manifest, one
    /// per key, made each time it writes it (the run's start, each resume, a merge):
    /// [`super::seal::manifest_message`], everything but this field. It authenticates the
    /// resume records and the spend cap before any seal covers them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<super::SealSignature>,
}

impl Manifest {
    /// The spend cap that applies now: the latest resume's that recorded one, else the run's
    /// own (runs resumed by earlier builds changed `budget_usd` in place).
    pub fn spend_cap(&self) -> Option<f64> {
        self.resumes.iter().rev().find_map(|r| r.budget_usd).or(self.budget_usd)
    }
}

/// A `rest` target as the manifest records it (`manifest.json` `rest_targets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestTargetRecord {
    /// The target's id.
    pub target: String,
    /// The endpoint the runner POSTs to (the only address it reaches for this target).
    pub url: String,
    /// Where the endpoint runs and what it may reach, as the campaign states it (`egress`): the
    /// user's statement, not something the runner checked.
    pub egress: String,
    /// Whether the campaign's model is asked in this target's trials: never (the endpoint
    /// answers with its own).
    pub model_asked: bool,
    /// Whether the scenario's system prompt is sent: never (the endpoint has its own).
    pub system_prompt_sent: bool,
    /// elengtis addition, only for an endpoint in a container of the campaign's (`container`):
    /// its image, as the campaign names it (each trial's evidence records the id it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// elengtis addition, only for an endpoint in a container: what the runner enforces of its
    /// egress, beside the user's statement (each trial's evidence asserts it from the engine's
    /// answer, `target_execution.egress_enforced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_enforced: Option<String>,
}

/// What a merged directory records of its shards (`manifest.json` `merge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeRecord {
    /// The shards' partition scheme.
    pub scheme: Scheme,
    /// Shards in all (N).
    pub total: u32,
    /// SHA-256 of the full matrix's trial ids, as every shard records it.
    pub matrix_sha256: String,
    /// The shards merged, in shard order; their logs follow each other in `runs.jsonl` in
    /// this order, each a chain of its own that its seal closes.
    pub shards: Vec<MergedShard>,
    /// Trials of the matrix with no row in any shard when merged.
    pub not_run: u64,
}

/// One shard of a merged directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergedShard {
    /// Its shard number (1-based).
    pub shard: u32,
    /// Its run id (its rows and evidence carry it).
    pub run_id: String,
    /// The directory it was merged from, as given.
    pub source: String,
    /// When it started.
    pub started_at: String,
    /// The runner that started it.
    pub environment: Environment,
    /// Its rows (its segment of `runs.jsonl`).
    pub rows: u64,
    /// Its seal as it was (signatures included): still checkable against its segment.
    pub seal: Seal,
    /// SHA-256 of its seal ([`Seal::sha256`]).
    pub seal_sha256: String,
    /// Its spend cap (`--budget-usd`), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// What its rows were charged (US dollars).
    pub spend_usd: f64,
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
    /// elengtis addition: the spend cap (US dollars) this resume ran under: its
    /// `--budget-usd`, else the one before carried over; absent without a cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}
