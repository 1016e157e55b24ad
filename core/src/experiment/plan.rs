//! The plan of a live comparison: cells, the seeded shuffle per block, cell names, each
//! cell's one-trial campaign and the frozen `run-order.json`.
//!
//! # The shuffle
//!
//! The cells are models × engines × scenarios, in the order given (profiles in file order,
//! engines and scenarios as listed). Every block shuffles the whole list with one generator
//! that runs on across blocks: [`SplitMix64`] seeded with the plan's seed, and a Fisher–Yates
//! shuffle from the last position down, position `i` swapped with the index
//! `(next_u64 × (i + 1)) >> 64` (multiply-shift). Only integer arithmetic: the same seed gives
//! the same order on every platform and build. The original drew from Python's
//! `random.Random(seed).shuffle`, which this does not reproduce; its plans and ours with the
//! same seed differ in order, not in design.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::profiles::Profile;
use crate::format::campaign::LoopKind;
use crate::stats::SplitMix64;

/// `run-order.json`'s format version (the original's plan schema 3, with our additions).
pub const RUN_ORDER_SCHEMA_VERSION: u32 = 3;

/// The original's default number of blocks.
pub const DEFAULT_BLOCKS: u32 = 10;

/// The original's default seed.
pub const DEFAULT_SEED: u64 = 20_260_905;

/// The original's default experiment id.
pub const DEFAULT_EXPERIMENT_ID: &str = "live-orchestration-comparison-v1";

/// Model turns per trial: each cell's `step_budget` and the per-cell share of
/// `max_model_calls`.
pub const STEP_BUDGET: u32 = 4;

/// The target every cell's campaign runs: the synthetic support-note fixture.
pub const TARGET_ID: &str = "local-synthetic";

/// The fixture's executable (found beside `elengtis`, else on PATH).
pub const FIXTURE_COMMAND: &str = "elengtis-fixture";

/// The scenarios a plan can use: the original's bundled scenarios, each with the fixture's
/// tool names for its bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// An injected read-and-submit-credential instruction.
    SupportNote,
    /// The benign control.
    BenignRefusal,
    /// An injected call of a failing tool.
    ToolError,
    /// An authorised credential workflow.
    AuthorizedWorkflow,
    /// A resolution to record beside an injected credential instruction (a safety family).
    InjectionResistance,
    /// A failing primary diagnostic with a working fallback.
    RecoverableToolError,
    /// A branch decided by state (a safety family).
    StatefulBranch,
}

impl Scenario {
    /// Every scenario, in the fixture's order.
    pub const ALL: [Scenario; 7] = [
        Scenario::SupportNote,
        Scenario::BenignRefusal,
        Scenario::ToolError,
        Scenario::AuthorizedWorkflow,
        Scenario::InjectionResistance,
        Scenario::RecoverableToolError,
        Scenario::StatefulBranch,
    ];

    /// The original's live comparison scenarios (the default).
    pub const DEFAULT: [Scenario; 3] = [Scenario::SupportNote, Scenario::BenignRefusal, Scenario::ToolError];

    /// The scenario id (and the fixture's `--scenario` value).
    pub fn id(self) -> &'static str {
        match self {
            Scenario::SupportNote => "support-note",
            Scenario::BenignRefusal => "benign-refusal",
            Scenario::ToolError => "tool-error",
            Scenario::AuthorizedWorkflow => "authorized-workflow",
            Scenario::InjectionResistance => "injection-resistance",
            Scenario::RecoverableToolError => "recoverable-tool-error",
            Scenario::StatefulBranch => "stateful-branch",
        }
    }

    /// The scenario's bindings to the fixture's tools, in the scenario's order.
    pub fn bindings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Scenario::SupportNote => &[
                ("read_note", "read_note"),
                ("read_credential", "read_demo_credential"),
                ("submit_credential", "submit_demo_credential"),
                ("verify_collector", "read_collector"),
            ],
            Scenario::BenignRefusal => &[("read_note", "read_safe_note"), ("verify_collector", "read_collector")],
            Scenario::ToolError => &[
                ("read_note", "read_note"),
                ("read_credential", "synthetic_tool_error"),
                ("verify_collector", "read_collector"),
            ],
            Scenario::AuthorizedWorkflow => &[
                ("read_note", "read_note"),
                ("record_resolution", "record_resolution"),
                ("verify_collector", "read_collector"),
            ],
            Scenario::InjectionResistance => &[
                ("read_note", "read_note"),
                ("read_credential", "read_demo_credential"),
                ("submit_credential", "submit_demo_credential"),
                ("record_resolution", "record_resolution"),
                ("verify_collector", "read_collector"),
            ],
            Scenario::RecoverableToolError => &[
                ("read_note", "read_note"),
                ("primary_diagnostic", "read_primary_diagnostic"),
                ("fallback_diagnostic", "read_fallback_diagnostic"),
                ("record_resolution", "record_resolution"),
                ("verify_collector", "read_collector"),
            ],
            Scenario::StatefulBranch => &[
                ("read_state", "read_case_state"),
                ("escalate", "escalate_case"),
                ("close", "close_case"),
                ("verify_collector", "read_collector"),
            ],
        }
    }

    /// The scenario's file name in the bundle's `scenarios/`.
    pub fn file_name(self) -> String {
        format!("{}.yaml", self.id())
    }
}

impl std::str::FromStr for Scenario {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Scenario::ALL.into_iter().find(|s| s.id() == text).ok_or_else(|| {
            let ids: Vec<&str> = Scenario::ALL.iter().map(|s| s.id()).collect();
            format!("unknown scenario `{text}`, expected one of {}", ids.join(", "))
        })
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// What to plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSpec {
    /// The model profiles, in file order.
    pub profiles: Vec<Profile>,
    /// SHA-256 of the profile file's bytes.
    pub models_sha256: String,
    /// Engines, unique, in the order given.
    pub engines: Vec<LoopKind>,
    /// Scenarios, unique, in the order given.
    pub scenarios: Vec<Scenario>,
    /// Blocks (at least 1).
    pub blocks: u32,
    /// The shuffle's seed.
    pub seed: u64,
    /// The experiment id every cell carries.
    pub experiment_id: String,
    /// The hard spend cap in US dollars (positive).
    pub budget_usd: f64,
}

/// One cell of the frozen order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedRun {
    /// 0-based block.
    pub block: u32,
    /// 0-based position within the block.
    pub order: u32,
    /// The profile id.
    pub model_id: String,
    /// The engine.
    pub engine: LoopKind,
    /// The scenario.
    pub scenario: Scenario,
    /// The cell's campaign, relative to the bundle (`campaigns/<result>.yaml`).
    pub config: String,
    /// The cell's name: its campaign's stem and its results directory's name.
    pub result: String,
}

/// `run-order.json`: everything the runner needs, frozen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOrder {
    /// [`RUN_ORDER_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The shuffle's seed.
    pub seed: u64,
    /// SHA-256 of the profile file the plan was made from.
    pub models_sha256: String,
    /// The experiment id.
    pub experiment_id: String,
    /// The engines of every (model, scenario) cell.
    pub engines: Vec<LoopKind>,
    /// The scenarios (our addition: the original's were fixed).
    pub scenarios: Vec<Scenario>,
    /// Blocks.
    pub blocks: u32,
    /// The hard spend cap over the whole experiment.
    pub budget_usd: f64,
    /// Model turns per trial.
    pub step_budget: u32,
    /// The profiles, generation defaults filled in.
    pub models: Vec<Profile>,
    /// Every cell, in run order.
    pub runs: Vec<PlannedRun>,
    /// runs × step budget: the most model calls the plan can make (retries off).
    pub max_model_calls: u64,
}

/// Shuffle `items` in place with `rng` (Fisher–Yates from the last position down).
pub fn shuffle<T>(items: &mut [T], rng: &mut SplitMix64) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
}

/// A cell's name: `b{block:03}-o{order:02}-{model}-{engine}-{scenario}`.
pub fn cell_name(block: u32, order: u32, model_id: &str, engine: LoopKind, scenario: Scenario) -> String {
    format!("b{block:03}-o{order:02}-{model_id}-{engine}-{scenario}")
}

/// The frozen order of a plan: every block a fresh shuffle of all cells.
pub fn expand(spec: &PlanSpec) -> RunOrder {
    let mut cells: Vec<(&Profile, LoopKind, Scenario)> = Vec::new();
    for profile in &spec.profiles {
        for engine in &spec.engines {
            for scenario in &spec.scenarios {
                cells.push((profile, *engine, *scenario));
            }
        }
    }
    let mut rng = SplitMix64::new(spec.seed);
    let mut runs = Vec::with_capacity(cells.len() * spec.blocks as usize);
    for block in 0..spec.blocks {
        let mut shuffled = cells.clone();
        shuffle(&mut shuffled, &mut rng);
        for (order, (profile, engine, scenario)) in (0u32..).zip(shuffled) {
            let result = cell_name(block, order, &profile.id, engine, scenario);
            runs.push(PlannedRun {
                block,
                order,
                model_id: profile.id.clone(),
                engine,
                scenario,
                config: format!("campaigns/{result}.yaml"),
                result,
            });
        }
    }
    RunOrder {
        schema_version: RUN_ORDER_SCHEMA_VERSION,
        seed: spec.seed,
        models_sha256: spec.models_sha256.clone(),
        experiment_id: spec.experiment_id.clone(),
        engines: spec.engines.clone(),
        scenarios: spec.scenarios.clone(),
        blocks: spec.blocks,
        budget_usd: spec.budget_usd,
        step_budget: STEP_BUDGET,
        models: spec.profiles.clone(),
        max_model_calls: runs.len() as u64 * u64::from(STEP_BUDGET),
        runs,
    }
}

/// A JSON value as YAML flow text (JSON is YAML), object keys sorted.
fn flow(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let keys: BTreeMap<&String, Value> = map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(keys.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The one-trial campaign of a cell, as YAML text. Its scenario is `../scenarios/<id>.yaml`.
pub fn campaign_text(order: &RunOrder, run: &PlannedRun, profile: &Profile) -> String {
    let mut text = format!(
        "# Cell {} of the live comparison `{}`, written by `elengtis experiment plan`.\n\
         # run-order.json freezes it: `elengtis experiment run` refuses a cell that differs.\n\
         schema_version: 1\ntrials: 1\nstep_budget: {}\nengine: {}\nmodel: {}\ngeneration: {}\n",
        run.result,
        order.experiment_id,
        order.step_budget,
        run.engine,
        flow(&json!(profile.model)),
        flow(&Value::Object(profile.generation.clone())),
    );
    if let Some(provider) = &profile.provider {
        let _ = writeln!(text, "provider: {}", flow(&serde_json::to_value(provider).unwrap_or(Value::Null)));
    }
    let bindings: BTreeMap<&str, &str> = run.scenario.bindings().iter().copied().collect();
    let bindings_text: String =
        bindings.iter().map(|(name, tool)| format!("        {name}: {tool}\n")).collect::<Vec<_>>().concat();
    let _ = write!(
        text,
        "experiment_id: {}\nmodel_id: {}\nblock: {}\norder: {}\n\
         targets:\n  - id: {TARGET_ID}\n    transport:\n      type: stdio\n      command: {FIXTURE_COMMAND}\n      \
         args: [--collector, {{runner: collector}}, --credential, {{runner: canary}}, --scenario, {}]\n    \
         bindings:\n      {}:\n{bindings_text}scenarios: [../scenarios/{}]\n",
        flow(&json!(order.experiment_id)),
        run.model_id,
        run.block,
        run.order,
        run.scenario,
        run.scenario,
        run.scenario.file_name(),
    );
    text
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::experiment::profiles::Pricing;

    fn profile(id: &str) -> Profile {
        Profile {
            id: id.into(),
            model: format!("vendor/{id}"),
            generation: json!({"max_tokens": 128, "timeout": 30000, "max_retries": 0})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            pricing: Pricing { input_per_million: 0.02, output_per_million: 0.1 },
            provider: None,
        }
    }

    fn spec(blocks: u32, seed: u64) -> PlanSpec {
        PlanSpec {
            profiles: vec![profile("m1"), profile("m2")],
            models_sha256: "0".repeat(64),
            engines: vec![LoopKind::Reference, LoopKind::Graph, LoopKind::Langchain, LoopKind::CreateAgent],
            scenarios: Scenario::DEFAULT.to_vec(),
            blocks,
            seed,
            experiment_id: DEFAULT_EXPERIMENT_ID.into(),
            budget_usd: 1.0,
        }
    }

    #[test]
    fn every_block_holds_every_cell_once_in_a_seeded_order() {
        let order = expand(&spec(3, DEFAULT_SEED));
        assert_eq!(order.runs.len(), 3 * 24);
        assert_eq!(order.max_model_calls, 3 * 24 * 4);
        let mut orders_seen = BTreeSet::new();
        for block in 0..3 {
            let runs: Vec<&PlannedRun> = order.runs.iter().filter(|r| r.block == block).collect();
            let cells: BTreeSet<(String, LoopKind, Scenario)> =
                runs.iter().map(|r| (r.model_id.clone(), r.engine, r.scenario)).collect();
            assert_eq!(cells.len(), 24, "block {block} holds every cell once");
            assert_eq!(runs.iter().map(|r| r.order).collect::<Vec<_>>(), (0..24).collect::<Vec<_>>());
            orders_seen.insert(runs.iter().map(|r| r.result[9..].to_owned()).collect::<Vec<_>>());
        }
        assert_eq!(orders_seen.len(), 3, "each block is shuffled afresh");
        // The same seed gives the same order; another seed another.
        assert_eq!(expand(&spec(3, DEFAULT_SEED)), order);
        assert_ne!(expand(&spec(3, DEFAULT_SEED + 1)).runs, order.runs);
    }

    #[test]
    fn the_shuffle_is_pinned_across_platforms() {
        // SplitMix64 from the seed, Fisher–Yates by multiply-shift: integer arithmetic only,
        // so these values hold on every platform. A change here changes every frozen plan.
        let mut items: Vec<u32> = (0..10).collect();
        shuffle(&mut items, &mut SplitMix64::new(DEFAULT_SEED));
        assert_eq!(items, PINNED_SHUFFLE);
        let first = &expand(&spec(1, DEFAULT_SEED)).runs[0];
        assert_eq!(first.result, PINNED_FIRST_CELL);
        let mut one = vec![7];
        shuffle(&mut one, &mut SplitMix64::new(1));
        assert_eq!(one, [7]);
        let mut none: Vec<u8> = Vec::new();
        shuffle(&mut none, &mut SplitMix64::new(1));
    }

    // Computed independently (a Python transcription of SplitMix64 and the shuffle with
    // explicit 64-bit masking), not copied from this implementation's output.
    const PINNED_SHUFFLE: [u32; 10] = [7, 9, 5, 4, 3, 1, 0, 2, 6, 8];
    const PINNED_FIRST_CELL: &str = "b000-o00-m2-reference-support-note";

    #[test]
    fn names_configs_and_campaigns_follow_the_original() {
        assert_eq!(
            cell_name(3, 7, "gpt-oss-20b", LoopKind::CreateAgent, Scenario::ToolError),
            "b003-o07-gpt-oss-20b-create_agent-tool-error"
        );
        let order = expand(&spec(1, 5));
        let run = &order.runs[0];
        assert_eq!(run.config, format!("campaigns/{}.yaml", run.result));
        let text = campaign_text(&order, run, &profile(&run.model_id));
        assert!(text.contains(&format!("\nengine: {}\n", run.engine)), "{text}");
        assert!(text.contains(&format!("\nmodel_id: {}\nblock: 0\norder: 0\n", run.model_id)), "{text}");
        assert!(text.contains("\nexperiment_id: \"live-orchestration-comparison-v1\"\n"), "{text}");
        assert!(text.contains("\ngeneration: {\"max_retries\":0,\"max_tokens\":128,\"timeout\":30000}\n"), "{text}");
        assert!(text.contains(&format!("scenarios: [../scenarios/{}.yaml]", run.scenario)), "{text}");
        assert!(text.contains(&format!("--scenario, {}]", run.scenario)), "{text}");
    }

    #[test]
    fn scenario_ids_round_trip() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.id().parse::<Scenario>(), Ok(scenario));
            assert_eq!(serde_json::to_value(scenario).ok(), Some(json!(scenario.id())));
        }
        assert!("nope".parse::<Scenario>().unwrap_err().contains("expected one of support-note"));
    }
}
