//! The inputs of an analysis, validated: each run's manifest (through [`AnalysisManifest`]),
//! its rows (as [`Row`]s of their producer's version), one run id per input, attempts of a
//! trial agreeing on engine, scenario and target, and each trial reduced to its final row.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{AnalyzeError, RunInput, SCRIPTED_MODEL_ID};
use crate::records::read::{FieldError, from_value};
use crate::records::{RESULTS_SCHEMA_VERSION, RESULTS_SCHEMA_VERSION_UNCHAINED, Row, original};

/// What analysis reads from a `manifest.json`: the fields this tool's manifest and the
/// original's both have. Anything else in the manifest is ignored here; `resume` reads this
/// tool's manifests whole and strictly ([`crate::records::Manifest`]).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct AnalysisManifest {
    /// The run; every row must carry it.
    pub run_id: String,
    /// Experiment labels; absent or null when the run has none.
    #[serde(default)]
    pub experiment: Option<ExperimentLabels>,
    /// The environment that ran it.
    #[serde(default)]
    pub environment: Option<Map<String, Value>>,
    /// Hashes of what ran: runs of different campaigns are kept apart ([`Self::campaign`]).
    #[serde(default)]
    pub configuration: Option<CampaignHashes>,
    /// A merged directory's shards (`elengtis merge`): their rows carry their own run ids.
    #[serde(default)]
    pub merge: Option<MergedShards>,
}

/// The shards a merged directory records.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct MergedShards {
    /// Each shard, in log order.
    pub shards: Vec<MergedShardId>,
}

/// A shard's run id.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct MergedShardId {
    /// The shard's run id.
    pub run_id: String,
}

/// The campaign hashes a manifest records (this tool's and the original's).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct CampaignHashes {
    /// SHA-256 of the campaign as recorded in the manifest, overrides applied (this tool's
    /// manifests of schema 2).
    #[serde(default)]
    pub recorded_campaign_sha256: Option<String>,
    /// SHA-256 of the campaign file's bytes (both tools).
    #[serde(default)]
    pub campaign_sha256: Option<String>,
}

/// The experiment labels analysis groups and pairs by.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct ExperimentLabels {
    /// The experiment: its runs (one per cell and block) are one design, pooled by analysis.
    #[serde(default)]
    pub id: Option<String>,
    /// Block of a blocked design: rows of runs with a block are compared pairwise.
    #[serde(default)]
    pub block: Option<u64>,
    /// Order within the block (checked, not used).
    #[serde(default)]
    pub order: Option<u64>,
    /// Model label that groups the run's rows (empty counts as unset).
    #[serde(default)]
    pub model_id: Option<String>,
}

/// Who wrote a run, from its whole manifest: the original only when the manifest has the
/// original's whole shape ([`original::is_original_manifest`], the test `verify` applies),
/// never by one key or a version field.
pub fn producer_of(manifest: &Value) -> Producer {
    if original::is_original_manifest(manifest) { Producer::Original } else { Producer::ThisTool }
}

impl AnalysisManifest {
    /// The campaign the run belongs to, as analysis keeps campaigns apart: the experiment
    /// (`experiment <id>`: an experiment's runs are one design, its cells and blocks meant to
    /// be counted together), else the campaign as recorded (`sha256:<hash>`, overrides
    /// applied), else the campaign file (`sha256:<hash>`, the original's manifests and this
    /// tool's of schema 1), else the run itself (`run <id>`: nothing recorded says which
    /// campaign it ran).
    pub fn campaign(&self) -> String {
        if let Some(id) = self.experiment_id() {
            return format!("experiment {id}");
        }
        let hashes = self.configuration.as_ref();
        let hash = hashes
            .and_then(|c| c.recorded_campaign_sha256.as_deref())
            .or_else(|| hashes.and_then(|c| c.campaign_sha256.as_deref()))
            .filter(|h| !h.is_empty());
        match hash {
            Some(hash) => format!("sha256:{hash}"),
            None => format!("run {}", self.run_id),
        }
    }

    /// The experiment the run belongs to (`experiment.id`; empty counts as unset).
    pub fn experiment_id(&self) -> Option<&str> {
        self.experiment.as_ref().and_then(|e| e.id.as_deref()).filter(|id| !id.is_empty())
    }

    fn block(&self) -> Option<u64> {
        self.experiment.as_ref().and_then(|experiment| experiment.block)
    }

    fn model_id(&self) -> Option<&str> {
        self.experiment.as_ref().and_then(|experiment| experiment.model_id.as_deref()).filter(|id| !id.is_empty())
    }
}

/// Who wrote a run, and so which row format its `runs.jsonl` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    /// This tool: rows of [`RESULTS_SCHEMA_VERSION`] (or of
    /// [`RESULTS_SCHEMA_VERSION_UNCHAINED`], written before the hashes).
    ThisTool,
    /// The original 0.1.0: rows of [`original::SCHEMA_VERSION`], upgraded on reading.
    Original,
}

impl Producer {
    fn schema_version(self) -> u64 {
        match self {
            Producer::ThisTool => RESULTS_SCHEMA_VERSION,
            Producer::Original => original::SCHEMA_VERSION,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Producer::ThisTool => "this tool",
            Producer::Original => "the original 0.1.0",
        }
    }
}

/// A campaign as cells are keyed by it: its position among the inputs' campaigns (so that
/// campaigns are shown in the order given) and [`AnalysisManifest::campaign`]; `(0, "")` for
/// every input when they are pooled.
pub(super) type CampaignKey = (usize, String);

/// One validated input.
#[derive(Debug)]
pub(super) struct Run<'a> {
    pub(super) label: &'a str,
    pub(super) manifest: AnalysisManifest,
    /// The campaign its cells belong to.
    pub(super) campaign: CampaignKey,
    /// Every attempt, in order.
    pub(super) rows: Vec<Row>,
    /// Attempt indexes per trial, trials in order of first appearance.
    pub(super) trials: Vec<Vec<usize>>,
    /// The recorded matrix, when the caller gave one.
    pub(super) matrix: Option<&'a [super::PlannedTrial]>,
    /// Trials counted from another input (`--dedupe`): neither their rows nor, when they never
    /// ran, their place in the matrix count here.
    pub(super) excluded: std::collections::BTreeSet<String>,
}

impl<'a> Run<'a> {
    /// Reads and validates one input.
    pub(super) fn read(input: &'a RunInput) -> Result<Self, AnalyzeError> {
        let label = input.label.as_str();
        let manifest: AnalysisManifest = from_value(&input.manifest).map_err(|error| manifest_error(label, error))?;
        let producer = producer_of(&input.manifest);
        let mut rows: Vec<Row> = Vec::with_capacity(input.rows.len());
        let mut trials: Vec<Vec<usize>> = Vec::new();
        let mut trial_index: BTreeMap<String, usize> = BTreeMap::new();
        let planned: Option<std::collections::BTreeSet<&str>> =
            input.matrix.as_ref().map(|m| m.iter().map(|planned| planned.trial_id.as_str()).collect());
        for (offset, value) in input.rows.iter().enumerate() {
            let number = offset + 1;
            let row = read_row(label, number, value, producer)?;
            if let Some(planned) = &planned
                && !planned.contains(row.trial_id.as_str())
            {
                return Err(AnalyzeError::OutsideMatrix {
                    label: label.to_owned(),
                    row: number,
                    trial_id: row.trial_id,
                });
            }
            let of_a_shard = manifest.merge.as_ref().is_some_and(|m| m.shards.iter().any(|s| s.run_id == row.run_id));
            if row.run_id != manifest.run_id && !of_a_shard {
                return Err(AnalyzeError::RunIdMismatch {
                    label: label.to_owned(),
                    row: number,
                    found: row.run_id,
                    expected: manifest.run_id.clone(),
                });
            }
            if let Some(&trial) = trial_index.get(&row.trial_id) {
                let first = &rows[trials[trial][0]];
                let pairs = [
                    ("engine", first.engine.as_str(), row.engine.as_str()),
                    ("scenario", first.scenario.as_str(), row.scenario.as_str()),
                    ("target", first.target.as_str(), row.target.as_str()),
                ];
                for (field, earlier, found) in pairs {
                    if earlier != found {
                        return Err(AnalyzeError::InconsistentTrial {
                            label: label.to_owned(),
                            row: number,
                            trial_id: row.trial_id.clone(),
                            field,
                            found: found.to_owned(),
                            earlier: earlier.to_owned(),
                        });
                    }
                }
                trials[trial].push(rows.len());
            } else {
                trial_index.insert(row.trial_id.clone(), trials.len());
                trials.push(vec![rows.len()]);
            }
            rows.push(row);
        }
        let campaign = (0, manifest.campaign());
        Ok(Run {
            label,
            manifest,
            campaign,
            rows,
            trials,
            matrix: input.matrix.as_deref(),
            excluded: std::collections::BTreeSet::new(),
        })
    }

    /// The trial id of each entry of [`Run::trials`].
    pub(super) fn trial_id(&self, trial: usize) -> &str {
        self.trials[trial].first().map_or("", |&row| self.rows[row].trial_id.as_str())
    }

    /// Trials with rows that count here (not counted from another input).
    pub(super) fn counted_trials(&self) -> usize {
        (0..self.trials.len()).filter(|&t| !self.excluded.contains(self.trial_id(t))).count()
    }

    /// The cell of each trial of the recorded matrix that has no row, in matrix order.
    pub(super) fn not_run(&self) -> Vec<super::cells::CellKey> {
        self.not_run_trials().into_iter().map(|(key, _)| key).collect()
    }

    /// Each trial of the recorded matrix that has no row, with its cell, in matrix order.
    pub(super) fn not_run_trials(&self) -> Vec<(super::cells::CellKey, &'a super::PlannedTrial)> {
        let Some(matrix) = self.matrix else { return Vec::new() };
        let ran: std::collections::BTreeSet<&str> = self.rows.iter().map(|row| row.trial_id.as_str()).collect();
        matrix
            .iter()
            .filter(|planned| !ran.contains(planned.trial_id.as_str()) && !self.excluded.contains(&planned.trial_id))
            .map(|planned| {
                let model_id = self
                    .manifest
                    .model_id()
                    .or_else(|| planned.model_id.as_deref().filter(|id| !id.is_empty()))
                    .unwrap_or(SCRIPTED_MODEL_ID)
                    .to_owned();
                ((self.campaign.clone(), model_id, planned.engine.clone(), planned.scenario.clone()), planned)
            })
            .collect()
    }

    /// Each trial reduced to its final row, in order of first appearance.
    pub(super) fn final_trials(&self) -> Vec<FinalTrial<'_>> {
        let mut finals = Vec::with_capacity(self.trials.len());
        for indexes in &self.trials {
            if indexes.first().is_some_and(|&row| self.excluded.contains(&self.rows[row].trial_id)) {
                continue;
            }
            let attempts: Vec<&Row> = indexes.iter().map(|&index| &self.rows[index]).collect();
            let Some(final_index) =
                indexes.iter().rev().find(|&&index| self.rows[index].is_complete()).or_else(|| indexes.last()).copied()
            else {
                continue;
            };
            let row = &self.rows[final_index];
            let mut usage = UsageTotals::default();
            for attempt in &attempts {
                usage.add(&UsageTotals::of(attempt));
            }
            let model_id = self
                .manifest
                .model_id()
                .or_else(|| row.model_id.as_deref().filter(|id| !id.is_empty()))
                .or_else(|| row.model.as_deref().filter(|model| !model.is_empty()))
                .unwrap_or(SCRIPTED_MODEL_ID)
                .to_owned();
            finals.push(FinalTrial {
                campaign: self.campaign.clone(),
                row,
                indexes,
                final_index,
                model_id,
                block: self.manifest.block(),
                attempts: attempts.len() as u64,
                usage,
            });
        }
        finals
    }
}

/// Reads row `number` of a run written by `producer`.
fn read_row(label: &str, number: usize, value: &Value, producer: Producer) -> Result<Row, AnalyzeError> {
    let expected = producer.schema_version();
    // This tool's rows of schema 1 (before the hashes) read as rows of schema 2 without them.
    let older = (producer == Producer::ThisTool).then_some(RESULTS_SCHEMA_VERSION_UNCHAINED);
    if let Some(found) = value.get("schema_version").and_then(Value::as_u64)
        && found != expected
        && older != Some(found)
    {
        return Err(AnalyzeError::UnsupportedVersion {
            label: label.to_owned(),
            row: number,
            found,
            expected,
            producer: producer.name(),
        });
    }
    let read = match producer {
        Producer::ThisTool => from_value(value),
        Producer::Original => original::read_row(value),
    };
    read.map_err(|error| row_error(label, number, error))
}

fn row_error(label: &str, row: usize, error: FieldError) -> AnalyzeError {
    let label = label.to_owned();
    match error {
        FieldError::NotObject => AnalyzeError::RowNotObject { label, row },
        FieldError::Missing { field } => AnalyzeError::MissingField { label, row, field },
        FieldError::Unknown { field } => AnalyzeError::UnknownField { label, row, field },
        FieldError::Invalid { field, expected } => AnalyzeError::WrongType { label, row, field, expected },
    }
}

fn manifest_error(label: &str, error: FieldError) -> AnalyzeError {
    let label = label.to_owned();
    match error {
        // A manifest that is not an object has no run id.
        FieldError::NotObject => AnalyzeError::ManifestMissingField { label, field: "run_id".to_owned() },
        FieldError::Missing { field } => AnalyzeError::ManifestMissingField { label, field },
        // The view ignores fields it does not read, so this does not happen; say it plainly if it does.
        FieldError::Unknown { field } => {
            AnalyzeError::ManifestWrongType { label, field, expected: "absent".to_owned() }
        }
        FieldError::Invalid { field, expected } => AnalyzeError::ManifestWrongType { label, field, expected },
    }
}

/// Token and cost totals over a set of attempts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UsageTotals {
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) total_tokens: u64,
    /// Sum over attempts with a known cost.
    cost_usd: f64,
    known_costs: u64,
    pub(super) unknown_costs: u64,
}

impl UsageTotals {
    /// One attempt's usage.
    fn of(row: &Row) -> Self {
        let usage = &row.usage;
        UsageTotals {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
            cost_usd: usage.cost_usd.unwrap_or(0.0),
            known_costs: u64::from(usage.cost_usd.is_some()),
            unknown_costs: u64::from(usage.cost_usd.is_none()),
        }
    }

    pub(super) fn add(&mut self, other: &Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost_usd += other.cost_usd;
        self.known_costs = self.known_costs.saturating_add(other.known_costs);
        self.unknown_costs = self.unknown_costs.saturating_add(other.unknown_costs);
    }

    /// The summed cost, or `None` when no attempt reported one.
    pub(super) fn cost(&self) -> Option<f64> {
        (self.known_costs > 0).then_some(self.cost_usd)
    }
}

/// A trial reduced to its final row.
#[derive(Debug)]
pub(super) struct FinalTrial<'a> {
    /// The campaign of its run.
    pub(super) campaign: CampaignKey,
    pub(super) row: &'a Row,
    /// Indexes of the trial's attempts in the input's rows, in order.
    pub(super) indexes: &'a [usize],
    /// Index of the final row in the input's rows.
    pub(super) final_index: usize,
    pub(super) model_id: String,
    pub(super) block: Option<u64>,
    pub(super) attempts: u64,
    /// Usage over all attempts of the trial.
    pub(super) usage: UsageTotals,
}

impl FinalTrial<'_> {
    /// The row's boolean outcomes, in [`super::RATE_METRICS`] order.
    pub(super) fn outcomes(&self) -> [Option<bool>; 6] {
        let row = self.row;
        [
            row.proposed,
            row.completed,
            row.proposed_not_completed,
            row.safety_pass,
            row.safe_completed,
            row.recovery_succeeded,
        ]
    }

    /// The row's counts, in [`super::MEAN_METRICS`] order.
    pub(super) fn counts(&self) -> [Option<u64>; 3] {
        let row = self.row;
        [Some(row.model_turns.into()), Some(row.tool_calls.into()), row.steps_to_propose.map(u64::from)]
    }
}
