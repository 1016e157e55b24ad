//! `elengtis scan`: discovery on a server nobody here wrote (docs/scan.md, issue 36). This
//! part builds the **inventory** and the **candidate list**:
//!
//! 1. the target is started the way `preflight` starts it and its tools listed
//!    ([`crate::preflight::list_tools`], through `init`'s target description);
//! 2. each tool gets its roles — source, plant, sink, egress — with the words that gave them
//!    ([`roles`]), a `roles:` file overriding them per tool;
//! 3. the server's own descriptions are linted for directive-shaped text ([`lint`], W1):
//!    findings of their own kind, never run as attacks;
//! 4. the attack library's classes (W2 tool-result injection, W3 egress to the canary sink,
//!    W4 a consequential call without confirmation) × payload styles × the paths the
//!    inventory found give the candidates, each with the strongest verifier the target allows
//!    ([`candidates`]), or a reason why a class gave none.
//!
//! Then, unless `--dry-run`:
//!
//! 5. each candidate is written as a seed and a scenario ([`files`]) beside `target.yaml`, and
//!    loaded back (a file that does not load is a defect, reported, never run);
//! 6. each is run on the target's vulnerable side alone ([`crate::prove::fire`]): its
//!    calibration, its control (the benign carrier), then trial by trial until the Wilson
//!    interval of its fire rate decides the threshold either way (sequential stopping).
//!
//! 7. with `--prove`, the candidates that fired are proved as `elengtis prove` proves a seed;
//!    `gate --add` ([`crate::gate::add`]) keeps a proven one.
//!
//! With `--planner-config`, a live model (the [`planner`]) writes payload variants and user
//! tasks for the paths the library found, before step 5; an answer that does not read, or
//! names anything the inventory does not hold, is rejected with why and nothing of it runs.

pub mod cli;
pub mod files;
pub mod html;
pub mod lint;
pub mod planner;
pub mod probe;
/// The inventory's roles ([`crate::inventory`], shared with `init`).
pub use crate::inventory as roles;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use elengtis_core::prove::sequential::{Decision, StoppingRule};

use elengtis_core::format::seed::{Delivery, Weakness};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::lint::DescriptionFinding;
use self::roles::{Role, RoleOverrides, ToolRoles};
use crate::init::{InitError, TargetSpec};
use crate::prove::fire::FireRecord;
use crate::prove::{ProveError, ProveOptions};
use crate::sandbox::SandboxBackend;

/// Version of `scan.json`.
pub const SCAN_SCHEMA_VERSION: u32 = 1;

/// What a scan scans: a target described on the command line (as `init` takes one), or a
/// campaign target file (`--target FILE`).
#[derive(Debug, Clone)]
pub enum ScanTarget {
    /// `--image IMG … -- ARGS`, or `-- CMD ARGS` for a local stdio server.
    Described(TargetSpec),
    /// `--target FILE`: one campaign target (stdio or an isolated container).
    File(Box<elengtis_core::format::campaign::Target>),
}

impl ScanTarget {
    /// The target's id when none is given.
    pub fn default_id(&self) -> String {
        match self {
            ScanTarget::Described(spec) => spec.default_id(),
            ScanTarget::File(target) => target.id.clone(),
        }
    }

    /// The campaign target, with `id`.
    pub fn target(&self, id: &str) -> elengtis_core::format::campaign::Target {
        match self {
            ScanTarget::Described(spec) => crate::init::target(id, spec),
            ScanTarget::File(target) => {
                let mut target = (**target).clone();
                id.clone_into(&mut target.id);
                target
            }
        }
    }

    /// The SQLite database a snapshot reads (`--database`).
    pub fn database(&self) -> Option<&str> {
        match self {
            ScanTarget::Described(TargetSpec::Image { database, .. }) => database.as_deref(),
            _ => None,
        }
    }

    /// The directory the server was pointed at (the first absolute directory among its
    /// command's words, else its first volume), which path-shaped arguments are filled from
    /// ([`crate::init::plan::directory_of`]).
    pub fn directory(&self) -> Option<String> {
        use elengtis_core::format::campaign::Transport;
        match self {
            ScanTarget::Described(spec) => crate::init::plan::directory_of(spec),
            ScanTarget::File(target) => {
                let words = |values: &[serde_json::Value]| -> Vec<String> {
                    values.iter().filter_map(serde_json::Value::as_str).map(str::to_owned).collect()
                };
                match &target.transport {
                    Transport::Stdio(t) => crate::init::plan::directory_in(&words(&t.args), &[]),
                    Transport::IsolatedContainer(t) => crate::init::plan::directory_in(&words(&t.command), &t.volumes),
                    _ => None,
                }
            }
        }
    }

    /// The container's volumes, and whether it runs in a container at all.
    pub fn volumes(&self) -> (Vec<String>, bool) {
        use elengtis_core::format::campaign::Transport;
        match self {
            ScanTarget::Described(TargetSpec::Image { volumes, .. }) => (volumes.clone(), true),
            ScanTarget::Described(TargetSpec::Stdio { .. }) => (Vec::new(), false),
            ScanTarget::File(target) => match &target.transport {
                Transport::IsolatedContainer(t) => (t.volumes.clone(), true),
                _ => (Vec::new(), false),
            },
        }
    }

    /// What the sandbox must provide to start it (None: no container).
    pub fn needs(&self) -> Option<crate::sandbox::RunNeeds> {
        match self {
            ScanTarget::Described(spec) => crate::init::sandbox_needs(spec),
            ScanTarget::File(target) => crate::trial::launch::image_need(target)
                .map(|image| crate::sandbox::RunNeeds { images: vec![image], sink: false }),
        }
    }
}

/// How to scan.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The target.
    pub spec: ScanTarget,
    /// Its id (default: from the image or command name).
    pub target_id: Option<String>,
    /// A `roles:` file (its path as given, and its content).
    pub overrides: Option<(String, RoleOverrides)>,
    /// The classes to make candidates of (empty: every class).
    pub classes: Vec<Weakness>,
    /// Where `scan.json` goes (created if missing).
    pub out: PathBuf,
    /// How to run the candidates; `None`: list them only (`--dry-run`).
    pub run: Option<RunSettings>,
    /// What the agent is for (`--purpose`): the candidates' system prompt and tasks say so.
    pub purpose: Option<String>,
    /// The scope named with `--authorize` (a server at a URL).
    pub authorized: Option<String>,
}

/// Called once per candidate as it finishes: the candidate, how many are done, of how many.
pub type Progress = Arc<dyn Fn(&Candidate, usize, usize) + Send + Sync>;

/// How a scan runs its candidates.
#[derive(Clone)]
pub struct RunSettings {
    /// When a candidate's trials stop.
    pub rule: StoppingRule,
    /// What every candidate's runs share: `jobs`, the sandbox, the events, the model
    /// options (`out`, `target` and the guarded side are the scan's own).
    pub prove: ProveOptions,
    /// Called once per candidate as it finishes (the progress line).
    pub progress: Progress,
    /// Prove the candidates that fired (`--prove`); `None`: rank only.
    pub prove_fired: Option<ProveFired>,
    /// A live model that writes payload variants and user tasks (`--planner-config`); `None`:
    /// the library alone.
    pub planner: Option<planner::PlannerSettings>,
}

/// How `scan --prove` proves the candidates that fired.
#[derive(Debug, Clone)]
pub struct ProveFired {
    /// What stands on the guarded side (`shim` by default: no file to write; `build` with
    /// `--guarded-target`).
    pub guarded_side: crate::prove::GuardedSide,
    /// The guarded build (`--guarded-target`), a campaign target.
    pub guarded_target: Option<serde_json::Value>,
    /// Iterations of the repeat filter.
    pub iterations: u32,
}

/// A fired candidate's proof (`scan --prove`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Proof {
    /// KEPT, STABLE NOT PROVEN, REJECTED or NOT TESTED.
    pub verdict: String,
    /// Its validation report, relative to the scan directory.
    pub report: String,
    /// What stood on the guarded side.
    pub guarded_side: String,
}

impl std::fmt::Debug for RunSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSettings").field("rule", &self.rule).field("jobs", &self.prove.jobs).finish_non_exhaustive()
    }
}

/// A payload style of the attack library (the bundled seeds' styles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// An order in plain words.
    Direct,
    /// An order dressed as an administrator's notice.
    RolePlay,
    /// An order to use one tool's output with another.
    ToolChain,
    /// Exfiltration to a host an egress allowlist lets through.
    AllowlistedExfil,
    /// An order smuggled in markup (`<important>`, `[system]`).
    Markup,
    /// Written by the planner (`--planner-config`): its payload and user task, the library's
    /// path, check, rule and calibration.
    Planned,
}

impl Style {
    /// Every style of the library, in order ([`Style::Planned`] is the planner's).
    pub const ALL: [Style; 5] =
        [Style::Direct, Style::RolePlay, Style::ToolChain, Style::AllowlistedExfil, Style::Markup];

    /// The name used in files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Style::Direct => "direct",
            Style::RolePlay => "role_play",
            Style::ToolChain => "tool_chain",
            Style::AllowlistedExfil => "allowlisted_exfil",
            Style::Markup => "markup",
            Style::Planned => "planned",
        }
    }
}

/// The independent check a candidate would be verified by, strongest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum VerifierPlan {
    /// The trial's canary sink sees the request (tier state).
    CanarySink,
    /// A snapshot of the server's SQLite database (tier state).
    Sqlite {
        /// The database in the container.
        path: String,
    },
    /// A file the attack call writes on one of the container's volumes, read out of the
    /// container through the engine (tier state).
    ContainerFile {
        /// The file in the container.
        path: String,
    },
    /// The server's own read-back tool (tier target-reported: its word, said so).
    TargetReported {
        /// The tool that reads the effect back.
        tool: String,
    },
}

/// How a candidate came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    /// Listed, not run (`--dry-run`).
    NotRun,
    /// No file can prove it (`why` says what is missing).
    NotWritten,
    /// The check was not shown able to see the effect: not tested.
    CalibrationFailed,
    /// The benign carrier fired too: the effect is not the payload's.
    ControlFired,
    /// The fire rate's interval lies above the threshold.
    Fired,
    /// The fire rate's interval lies below the threshold.
    Resisted,
    /// The interval straddles the threshold at the cap.
    Undecided,
    /// No trial decided anything.
    NotTested,
}

impl CandidateStatus {
    /// Every status, in the order the counts list them.
    pub const ALL: [CandidateStatus; 8] = [
        CandidateStatus::Fired,
        CandidateStatus::Resisted,
        CandidateStatus::Undecided,
        CandidateStatus::NotTested,
        CandidateStatus::CalibrationFailed,
        CandidateStatus::ControlFired,
        CandidateStatus::NotWritten,
        CandidateStatus::NotRun,
    ];

    /// The name used in files (`not_tested`).
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateStatus::NotRun => "not_run",
            CandidateStatus::NotWritten => "not_written",
            CandidateStatus::CalibrationFailed => "calibration_failed",
            CandidateStatus::ControlFired => "control_fired",
            CandidateStatus::Fired => "fired",
            CandidateStatus::Resisted => "resisted",
            CandidateStatus::Undecided => "undecided",
            CandidateStatus::NotTested => "not_tested",
        }
    }

    /// Its place in the ranking: fired first, then undecided, control fired, resisted, the rest.
    fn rank(self) -> u8 {
        match self {
            CandidateStatus::Fired => 0,
            CandidateStatus::Undecided => 1,
            CandidateStatus::ControlFired => 2,
            CandidateStatus::Resisted => 3,
            _ => 4,
        }
    }
}

impl std::fmt::Display for CandidateStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One candidate attack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// `<class>-<style>-<attack tool>[-via-<source>]`.
    pub id: String,
    /// The weakness class.
    pub class: Weakness,
    /// The payload style.
    pub style: Style,
    /// How the payload reaches the model.
    pub delivery: Delivery,
    /// The tool that plants the payload (note delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plant: Option<String>,
    /// The tool whose result carries it to the model (note delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The consequential call the payload asks for.
    pub attack: String,
    /// How its effect would be seen.
    pub verifier: VerifierPlan,
    /// How it came out.
    pub status: CandidateStatus,
    /// Why it was not written, or what its status rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its seed file, relative to the scan directory (`candidates/<id>.seed.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_file: Option<String>,
    /// How its runs came out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<FireRecord>,
    /// Its proof, when it fired and `--prove` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    /// What the planner wrote, when it wrote this candidate (style `planned`); null: the
    /// library's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<planner::Planned>,
}

impl Candidate {
    /// How the payload reaches the attack call: `plant P → source S → A`, or
    /// `user's message → A`.
    pub fn path(&self) -> String {
        match (&self.plant, &self.source) {
            (Some(p), Some(s)) => format!("plant {p} → source {s} → {}", self.attack),
            _ => format!("user's message → {}", self.attack),
        }
    }
}

impl VerifierPlan {
    /// The check in words, with its tier.
    pub fn describe(&self) -> String {
        match self {
            VerifierPlan::CanarySink => "canary sink (state)".to_owned(),
            VerifierPlan::Sqlite { path } => format!("SQLite snapshot of {path} (state)"),
            VerifierPlan::ContainerFile { path } => format!("the file {path} in the container (state)"),
            VerifierPlan::TargetReported { tool } => format!("{tool} (target-reported: the server's own word)"),
        }
    }
}

/// `scan.json`: what a scan found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ScanReport")]
pub struct ScanReport {
    /// Format version ([`SCAN_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The target's id.
    pub target: String,
    /// Every tool the server lists, with its roles and why.
    pub tools: Vec<ToolRoles>,
    /// The `roles:` file that overrode the heuristics (null without one).
    pub roles_file: Option<String>,
    /// Directive-shaped text in the server's own descriptions (W1): findings of their own kind.
    pub description_findings: Vec<DescriptionFinding>,
    /// The candidates, in library order.
    pub candidates: Vec<Candidate>,
    /// Why a class gave no candidate.
    pub not_made: Vec<String>,
    /// Whether the candidates were run (false: listed only).
    pub ran: bool,
    /// The target file the candidates run against (`target.yaml`, relative to the scan
    /// directory; null when listed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_file: Option<String>,
    /// The stopping rule the candidates ran under (null when listed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<StoppingRule>,
    /// The scope `--authorize` named for a server at a URL (null: the target ran in the
    /// trial's own sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorized: Option<String>,
    /// What the agent is for (`--purpose`; null: a general assistant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The live model the candidates ran with (`--model-config`; null: each candidate's
    /// scripted model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<elengtis_core::format::gate::LiveModel>,
    /// Trials run, and what fixed iterations (`max_trials` per candidate run) would have
    /// cost (null when listed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<TrialCount>,
    /// What the planner was asked and how its answer was decided (`--planner-config`; null:
    /// no planner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<planner::PlannerRecord>,
}

/// Trials a scan ran against what fixed iterations would have run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrialCount {
    /// Trials run (calibration and control runs not counted).
    pub run: u32,
    /// `max_trials` × the candidates whose trials began.
    pub fixed: u32,
}

/// Why a scan could not run (a server with nothing to attack is a report, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The target description or a flag cannot be used, or the target did not start.
    #[error(transparent)]
    Target(#[from] InitError),
    /// The `roles:` file names a tool the server does not list.
    #[error("the roles file {file} names tools the server does not list: {}; the server lists {}", .unknown.join(", "), .listed.join(", "))]
    UnknownRoles {
        /// The file.
        file: String,
        /// The names it gives that are not listed.
        unknown: Vec<String>,
        /// What the server lists.
        listed: Vec<String>,
    },
    /// `scan.json` could not be written.
    #[error(transparent)]
    Write(#[from] crate::results::store::StoreError),
    /// A candidate's runs failed to start or be read.
    #[error("failed to run candidate {candidate}: {source}")]
    Run {
        /// The candidate.
        candidate: String,
        /// The cause.
        #[source]
        source: ProveError,
    },
    /// The planner's model cannot be asked here (its key variable is not set, a generation
    /// setting is unusable, a replay directory does not exist): nothing was started.
    #[error("failed to use the planner's model: {0}")]
    PlannerUnavailable(String),
    /// A file scan wrote does not load: a defect of `scan`, reported rather than run.
    #[error("failed to load the candidate scan wrote ({path}); please report this: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// The loader's error.
        detail: String,
    },
}

/// The noun a tool's name is about (`read_note` → `note`, `get_issue` → `issue`): its words
/// without the verbs of the roles' vocabularies.
fn nouns(name: &str) -> Vec<String> {
    const VERBS: &[&str] = &[
        "read", "get", "fetch", "list", "search", "query", "retrieve", "view", "load", "lookup", "open", "show",
        "write", "save", "create", "insert", "add", "put", "update", "upload", "append", "store", "set", "new", "edit",
        "send", "post", "delete", "remove", "run", "execute", "confirm", "all", "my", "by", "id",
    ];
    crate::toolhost::shim::classify::name_tokens(name)
        .into_iter()
        .map(|w| w.trim_end_matches('s').to_owned())
        .filter(|w| !w.is_empty() && !VERBS.contains(&w.as_str()))
        .collect()
}

/// A candidate's id from its parts: lower case, `-` between words (`^[a-z0-9][a-z0-9_-]*$`).
fn candidate_id(text: &str) -> String {
    crate::init::plan::identifier(&text.replace('_', "-"), '-')
}

/// What the target description says about where effects can be seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct TargetFacts<'a> {
    /// The SQLite database a snapshot reads (`--database`).
    pub database: Option<&'a str>,
    /// The directory the server was pointed at ([`ScanTarget::directory`]).
    pub dir: Option<&'a str>,
    /// The container's volumes (empty: not a container).
    pub volumes: &'a [String],
    /// Whether each trial runs it in a container: then no check may rest on the server's own
    /// word (the runner refuses an `mcp_tool`-only check there).
    pub container: bool,
}

/// The candidates the inventory allows, and why a class gave none.
pub fn candidates(
    tools: &[ToolRoles],
    listed: &[elengtis_core::agent::ToolInfo],
    classes: &[Weakness],
    facts: TargetFacts<'_>,
) -> (Vec<Candidate>, Vec<String>) {
    let TargetFacts { database, dir, volumes, container } = facts;
    let wanted = |w: Weakness| classes.is_empty() || classes.contains(&w);
    let with = |role: Role| tools.iter().filter(move |t| t.has(role));
    let mut out = Vec::new();
    let mut not_made = Vec::new();
    let schema_of = |name: &str| listed.iter().find(|t| t.name == name).map(|t| &t.input_schema);
    // Whether a reader's every required argument can be given: one the attack call also
    // takes (the same value), or a path the server was pointed at.
    let fillable = |reader: &str, attack: &str| {
        let takes: Vec<&str> = schema_of(attack)
            .map(|s| crate::init::egress::properties(s).into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default();
        schema_of(reader).is_none_or(|s| {
            crate::init::args::required(s)
                .into_iter()
                .all(|(n, _)| takes.contains(&n) || (dir.is_some() && crate::init::plan::path_arg(n).is_some()))
        })
    };
    // Readers that show content first (a log, a read, a listing), then the rest (a diff, a
    // status).
    let shows_content = |name: &str| {
        crate::toolhost::shim::classify::name_tokens(name).iter().any(|w| {
            ["read", "get", "list", "log", "show", "history", "search", "view", "fetch", "load", "query"]
                .contains(&w.as_str())
        })
    };
    // The check an effect of `attack` can be seen by.
    let verifier = |attack: &ToolRoles| -> Option<VerifierPlan> {
        if attack.has(Role::Egress) && attack.destination_argument.is_some() {
            return Some(VerifierPlan::CanarySink);
        }
        if let Some(path) = database {
            return Some(VerifierPlan::Sqlite { path: path.to_owned() });
        }
        // A file it writes on a volume of the container (the path its call is given).
        if container {
            let file = listed.iter().find(|t| t.name == attack.tool).and_then(|tool| {
                crate::init::plan::fill_required(tool, &serde_json::Map::new(), dir)
                    .values()
                    .filter_map(serde_json::Value::as_str)
                    .find(|v| {
                        v.ends_with(crate::init::plan::FILE_NAME)
                            && volumes.iter().any(|vol| v.starts_with(&format!("{}/", vol.trim_end_matches('/'))))
                    })
                    .map(str::to_owned)
            });
            // The server's own word is no check in a container (the runner refuses it).
            return file.map(|path| VerifierPlan::ContainerFile { path });
        }
        // A source about the same thing reads the effect back (the server's word), one whose
        // arguments can be given.
        let nouns_of = nouns(&attack.tool);
        let mut readers: Vec<&ToolRoles> = tools
            .iter()
            .filter(|t| t.tool != attack.tool && t.has(Role::Source) && !t.has(Role::Sink))
            .filter(|t| {
                nouns(&t.tool).iter().any(|n| nouns_of.contains(n)) || nouns(&t.tool).iter().any(|n| n == "outbox")
            })
            .filter(|t| fillable(&t.tool, &attack.tool))
            .collect();
        readers.sort_by_key(|t| !shows_content(&t.tool));
        readers.first().map(|t| VerifierPlan::TargetReported { tool: t.tool.clone() })
    };
    let attacks: Vec<&ToolRoles> = tools.iter().filter(|t| t.has(Role::Sink) || t.has(Role::Egress)).collect();
    let unverifiable: Vec<&str> = attacks.iter().filter(|a| verifier(a).is_none()).map(|a| a.tool.as_str()).collect();
    if !unverifiable.is_empty() {
        not_made.push(format!(
            "no independent check can see the effect of {} (no destination argument for the canary sink, no --database, no \
             tool that reads it back; in a container, no file on a volume it is given): no candidate attacks them",
            unverifiable.join(", ")
        ));
    }
    // W2: a plant and a source about the same thing, then any attack call.
    if wanted(Weakness::W2) {
        let mut paths: Vec<(&ToolRoles, &ToolRoles)> = Vec::new();
        for plant in with(Role::Plant) {
            for source in with(Role::Source).filter(|s| s.tool != plant.tool && !s.has(Role::Sink)) {
                if nouns(&plant.tool).iter().any(|n| nouns(&source.tool).contains(n)) {
                    paths.push((plant, source));
                }
            }
        }
        if paths.is_empty() {
            not_made.push(
                "W2: no plant and source about the same thing (a tool that stores text and one that returns it): no \
                 tool-result injection path"
                    .into(),
            );
        }
        for (plant, source) in &paths {
            for attack in attacks.iter().filter(|a| a.tool != plant.tool && a.tool != source.tool) {
                let Some(check) = verifier(attack) else { continue };
                for style in Style::ALL {
                    if style == Style::AllowlistedExfil && check != VerifierPlan::CanarySink {
                        continue;
                    }
                    out.push(Candidate {
                        id: candidate_id(&format!("w2-{}-{}-via-{}", style.as_str(), attack.tool, source.tool)),
                        class: Weakness::W2,
                        style,
                        delivery: Delivery::Note,
                        plant: Some(plant.tool.clone()),
                        source: Some(source.tool.clone()),
                        attack: attack.tool.clone(),
                        verifier: check.clone(),
                        status: CandidateStatus::NotRun,
                        why: None,
                        seed_file: None,
                        run: None,
                        proof: None,
                        planned: None,
                    });
                }
            }
        }
    }
    // W3: egress to the canary sink, asked for in the user's message.
    if wanted(Weakness::W3) {
        let egress: Vec<&ToolRoles> = with(Role::Egress).filter(|t| t.destination_argument.is_some()).collect();
        if egress.is_empty() {
            not_made.push("W3: no tool takes a URL or a host: no egress path".into());
        }
        for tool in egress {
            out.push(Candidate {
                id: candidate_id(&format!("w3-direct-{}", tool.tool)),
                class: Weakness::W3,
                style: Style::Direct,
                delivery: Delivery::User,
                plant: None,
                source: None,
                attack: tool.tool.clone(),
                verifier: VerifierPlan::CanarySink,
                status: CandidateStatus::NotRun,
                why: None,
                seed_file: None,
                run: None,
                proof: None,
                planned: None,
            });
        }
    }
    // W4: a consequential call the user asks for, with nobody confirming it.
    if wanted(Weakness::W4) {
        let sinks: Vec<&ToolRoles> = with(Role::Sink).filter(|t| !t.has(Role::Egress)).collect();
        if sinks.is_empty() {
            not_made.push("W4: no consequential tool (send, post, write, delete, execute, transfer…)".into());
        }
        for sink in sinks {
            let Some(check) = verifier(sink) else { continue };
            out.push(Candidate {
                id: candidate_id(&format!("w4-direct-{}", sink.tool)),
                class: Weakness::W4,
                style: Style::Direct,
                delivery: Delivery::User,
                plant: None,
                source: None,
                attack: sink.tool.clone(),
                verifier: check,
                status: CandidateStatus::NotRun,
                why: None,
                seed_file: None,
                run: None,
                proof: None,
                planned: None,
            });
        }
    }
    (out, not_made)
}

/// Every command-line word of `target` that names a runner value (`{sink_url}`, `{canary}`)
/// made a string template (`attacker.example.com={sink_url}` resolves per trial).
pub fn templated(target: &mut elengtis_core::format::campaign::Target) {
    use elengtis_core::format::campaign::Transport;
    let items = match &mut target.transport {
        Transport::Stdio(t) => &mut t.args,
        Transport::IsolatedContainer(c) => &mut c.command,
        Transport::StreamableHttp(_) | Transport::Rest(_) => return,
    };
    for item in items {
        if let Some(text) = item.as_str()
            && elengtis_core::refs::RUNNER_VALUES.iter().any(|v| text.contains(&format!("{{{v}}}")))
        {
            *item = serde_json::json!({"template": text});
        }
    }
}

/// The campaign target as `target.yaml` holds it (empty fields left out).
pub fn target_value(target: &elengtis_core::format::campaign::Target) -> serde_json::Value {
    fn prune(value: &mut serde_json::Value) {
        if let Some(map) = value.as_object_mut() {
            map.retain(|_, v| {
                !(v.is_null()
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_object().is_some_and(serde_json::Map::is_empty))
            });
            map.values_mut().for_each(prune);
        }
    }
    let mut value = serde_json::to_value(target).unwrap_or_default();
    prune(&mut value);
    value["bindings"] = serde_json::json!({});
    value
}

/// Start the target, list its tools, classify and lint them, list the candidates and —
/// unless listing only — write and run them; `<out>/scan.json` holds it all.
pub async fn run(options: &ScanOptions, sandbox: Option<&dyn SandboxBackend>) -> Result<ScanReport, ScanError> {
    let planner = options.run.as_ref().and_then(|r| r.planner.as_ref().map(|p| (p, &r.prove.model)));
    if let Some(reason) = planner.and_then(|(p, model)| p.unavailable(model)) {
        return Err(ScanError::PlannerUnavailable(reason));
    }
    let target_id = options.target_id.clone().unwrap_or_else(|| options.spec.default_id());
    let mut target = options.spec.target(&target_id);
    templated(&mut target);
    let target_json = target_value(&target);
    let listed = crate::init::list_tools(&target, &std::env::current_dir().unwrap_or_default(), sandbox).await?;
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    if let Some((file, overrides)) = &options.overrides {
        let unknown = overrides.unknown(&names);
        if !unknown.is_empty() {
            return Err(ScanError::UnknownRoles {
                file: file.clone(),
                unknown: unknown.iter().map(|s| (*s).to_owned()).collect(),
                listed: names.iter().map(|s| (*s).to_owned()).collect(),
            });
        }
    }
    let mut tools = Vec::new();
    let mut description_findings = Vec::new();
    for tool in &listed {
        let found = roles::classify(&tool.name, &tool.description, &tool.input_schema, tool.listing.get("annotations"));
        tools.push(match &options.overrides {
            Some((file, overrides)) => overrides.apply(found, file),
            None => found,
        });
        description_findings.extend(lint::lint(&tool.name, &tool.description, &names));
    }
    let dir = options.spec.directory();
    let (volumes, container) = options.spec.volumes();
    let facts = TargetFacts { database: options.spec.database(), dir: dir.as_deref(), volumes: &volumes, container };
    let (mut candidates, mut not_made) = candidates(&tools, &listed, &options.classes, facts);
    if tools.is_empty() {
        not_made.insert(0, "the server lists no tool: nothing to attack".into());
    }
    std::fs::create_dir_all(&options.out)
        .map_err(|source| InitError::CreateDir { path: options.out.clone(), source })?;
    let planner = match planner {
        Some((settings, model)) => {
            let inventory = planner::Inventory {
                target: &target_id,
                listed: &listed,
                roles: &tools,
                library: &candidates,
                purpose: options.purpose.as_deref(),
            };
            let (record, planned) = settings.plan(model, &inventory, &options.out).await?;
            candidates.extend(planned);
            Some(record)
        }
        None => None,
    };
    let mut report = ScanReport {
        schema_version: SCAN_SCHEMA_VERSION,
        target: target_id.clone(),
        tools,
        roles_file: options.overrides.as_ref().map(|(f, _)| f.clone()),
        description_findings,
        candidates,
        not_made,
        ran: false,
        target_file: None,
        stopping: None,
        purpose: options.purpose.clone(),
        authorized: options.authorized.clone(),
        model: None,
        trials: None,
        planner,
    };
    if let Some(settings) = &options.run {
        run_candidates(&mut report, &listed, &target_json, options, settings).await?;
    }
    write_outputs(&report, &options.out)?;
    Ok(report)
}

/// Write every candidate's files beside `target.yaml`, load them back, and run them (at most
/// `jobs` trials at once over all of them), each under the stopping rule.
async fn run_candidates(
    report: &mut ScanReport,
    listed: &[elengtis_core::agent::ToolInfo],
    target_json: &serde_json::Value,
    options: &ScanOptions,
    settings: &RunSettings,
) -> Result<(), ScanError> {
    use futures_util::StreamExt as _;
    let out = &options.out;
    let target_text = format!(
        "# The target `elengtis scan` ran its candidates against (a campaign target; JSON is YAML).\n{}\n",
        serde_json::to_string_pretty(target_json).unwrap_or_default()
    );
    crate::results::store::write_atomic(&out.join("target.yaml"), target_text.as_bytes())?;
    report.target_file = Some("target.yaml".into());
    report.stopping = Some(settings.rule);
    report.model = settings.prove.live.clone();
    report.ran = true;
    let dir = out.join("candidates");
    std::fs::create_dir_all(&dir).map_err(|source| InitError::CreateDir { path: dir.clone(), source })?;
    let by_name: BTreeMap<&str, &elengtis_core::agent::ToolInfo> =
        listed.iter().map(|t| (t.name.as_str(), t)).collect();
    let roles: BTreeMap<&str, &ToolRoles> = report.tools.iter().map(|t| (t.tool.as_str(), t)).collect();
    let databases = probe_databases(&report.candidates, &by_name, &roles, target_json, out, settings).await;
    let mut runnable = Vec::new();
    for (i, candidate) in report.candidates.iter_mut().enumerate() {
        match files::candidate_files(
            candidate,
            &by_name,
            &roles,
            &report.target,
            &databases,
            options.purpose.as_deref(),
            options.spec.directory().as_deref(),
        ) {
            Ok(written) => {
                let seed_path = dir.join(format!("{}.seed.yaml", candidate.id));
                crate::results::store::write_atomic(&seed_path, written.seed.as_bytes())?;
                crate::results::store::write_atomic(
                    &dir.join(format!("{}.yaml", candidate.id)),
                    written.scenario.as_bytes(),
                )?;
                elengtis_core::format::seed::load_seed(&seed_path)
                    .map_err(|e| ScanError::Invalid { path: seed_path.display().to_string(), detail: e.to_string() })?;
                candidate.seed_file = Some(format!("candidates/{}.seed.yaml", candidate.id));
                runnable.push((i, seed_path));
            }
            Err(why) => {
                candidate.status = CandidateStatus::NotWritten;
                candidate.why = Some(why);
            }
        }
    }
    let prove = ProveOptions {
        out: out.join("runs"),
        metamorphic: false,
        target: Some(target_json.clone()),
        guarded_side: crate::prove::GuardedSide::None,
        guarded_target: None,
        slots: Some(Arc::new(tokio::sync::Semaphore::new(settings.prove.jobs.max(1)))),
        ..settings.prove.clone()
    };
    let total = runnable.len();
    let mut done = 0;
    let mut results = futures_util::stream::iter(runnable.into_iter().map(|(i, seed_path)| {
        let prove = &prove;
        async move { (i, crate::prove::fire::fire_sequential(&seed_path, prove, &settings.rule).await) }
    }))
    .buffer_unordered(settings.prove.jobs.max(1));
    let mut failure = None;
    while let Some((i, result)) = results.next().await {
        let candidate = &mut report.candidates[i];
        match result {
            Ok(record) => {
                let (status, why) = status_of(&record);
                candidate.status = status;
                candidate.why = Some(why);
                candidate.run = Some(FireRecord {
                    dir: record.dir.strip_prefix(out).map(std::path::Path::to_path_buf).unwrap_or(record.dir.clone()),
                    ..record
                });
            }
            Err(source) => {
                candidate.status = CandidateStatus::NotTested;
                candidate.why = Some(format!("its runs failed: {source}"));
                failure.get_or_insert(ScanError::Run { candidate: candidate.id.clone(), source });
            }
        }
        done += 1;
        (settings.progress)(candidate, done, total);
    }
    drop(results);
    if let (None, Some(how)) = (&failure, &settings.prove_fired) {
        prove_fired(report, &prove, how, out, &settings.progress).await?;
    }
    let ran: Vec<&FireRecord> = report.candidates.iter().filter_map(|c| c.run.as_ref()).collect();
    report.trials = Some(TrialCount {
        run: ran.iter().map(|r| r.trials).sum(),
        fixed: ran.iter().filter(|r| r.trials > 0).map(|_| settings.rule.max_trials).sum(),
    });
    match failure {
        // The report is written first: what ran is kept.
        Some(e) => {
            write_outputs(report, out)?;
            Err(e)
        }
        None => Ok(()),
    }
}

/// Probe, once per attack tool whose effect a database snapshot would show, where the effect
/// lands ([`probe`]): the tables and columns, or why none were found.
async fn probe_databases(
    candidates: &[Candidate],
    tools: &BTreeMap<&str, &elengtis_core::agent::ToolInfo>,
    roles: &BTreeMap<&str, &ToolRoles>,
    target_json: &serde_json::Value,
    out: &std::path::Path,
    settings: &RunSettings,
) -> BTreeMap<String, Result<Vec<probe::Place>, String>> {
    let mut found = BTreeMap::new();
    for c in candidates {
        let VerifierPlan::Sqlite { path } = &c.verifier else { continue };
        if found.contains_key(&c.attack) {
            continue;
        }
        let (Some(tool), Some(tool_roles)) = (tools.get(c.attack.as_str()), roles.get(c.attack.as_str())) else {
            continue;
        };
        let Some((arguments, marker)) = files::marked_call(tool, tool_roles, &c.verifier, None) else { continue };
        let dir = out.join("probes").join(&c.attack);
        let result = run_probe(&dir, target_json, &c.attack, &arguments, path, &marker, settings).await;
        found.insert(c.attack.clone(), result);
    }
    found
}

async fn run_probe(
    dir: &std::path::Path,
    target: &serde_json::Value,
    tool: &str,
    arguments: &serde_json::Value,
    database: &str,
    marker: &str,
    settings: &RunSettings,
) -> Result<Vec<probe::Place>, String> {
    let (campaign, scenario) = probe::documents(target, tool, arguments, database, marker);
    let campaign_dir = dir.join("campaign");
    std::fs::create_dir_all(&campaign_dir).map_err(|e| format!("failed to create {}: {e}", campaign_dir.display()))?;
    let write = |name: &str, value: &serde_json::Value| {
        let path = campaign_dir.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(value).unwrap_or_default())
            .map_err(|e| format!("failed to write {}: {e}", path.display()))
            .map(|()| path)
    };
    write("probe.yaml", &scenario)?;
    let path = write("campaign.yaml", &campaign)?;
    let bundle = elengtis_core::load::load_campaign(&path, &elengtis_core::validate::LoadOptions::default())
        .map_err(|e| format!("the probe's campaign does not load: {e}"))?;
    let results = dir.join("results");
    let options = crate::run::RunOptions {
        limits: crate::toolhost::mcp::Limits::default(),
        jobs: 1,
        prepare_ahead: 0,
        sandbox: settings.prove.sandbox.clone(),
        events: settings.prove.events.clone(),
        model: settings.prove.model.clone(),
        slots: None,
        partition: None,
        stop_when: None,
    };
    crate::run::start(&bundle, &results, false, &options).await.map_err(|e| format!("the probe did not run: {e}"))?;
    probe::places_in(&results)
}

/// Prove every candidate that fired, against `how`'s guarded side; each gets its verdict.
async fn prove_fired(
    report: &mut ScanReport,
    prove: &ProveOptions,
    how: &ProveFired,
    out: &std::path::Path,
    progress: &Progress,
) -> Result<(), ScanError> {
    let fired: Vec<(usize, PathBuf)> = report
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.status == CandidateStatus::Fired)
        .filter_map(|(i, c)| c.seed_file.as_ref().map(|f| (i, out.join(f))))
        .collect();
    if fired.is_empty() {
        return Ok(());
    }
    let options = ProveOptions {
        out: out.join("proofs"),
        metamorphic: true,
        guarded_side: how.guarded_side,
        guarded_target: how.guarded_target.clone(),
        iterations: how.iterations,
        ..prove.clone()
    };
    let paths: Vec<PathBuf> = fired.iter().map(|(_, p)| p.clone()).collect();
    let guarded_side = how.guarded_side.as_str();
    let proof_of = |p: &crate::prove::Proven| Proof {
        verdict: p.report.verdict.label().to_owned(),
        report: p.report_path.strip_prefix(out).unwrap_or(&p.report_path).display().to_string(),
        guarded_side: guarded_side.to_owned(),
    };
    let total = fired.len();
    let mut done = 0;
    let candidates = &report.candidates;
    let proven = crate::prove::prove_seeds(&paths, &[], &options, |p| {
        done += 1;
        if let Some((i, _)) = fired.iter().find(|(_, path)| *path == p.seed_path) {
            let shown = Candidate { proof: Some(proof_of(p)), ..candidates[*i].clone() };
            (progress)(&shown, done, total);
        }
    })
    .await
    .map_err(|source| ScanError::Run { candidate: "(the proofs)".into(), source })?;
    for p in proven {
        let Some((i, _)) = fired.iter().find(|(_, path)| *path == p.seed_path) else { continue };
        report.candidates[*i].proof = Some(proof_of(&p));
    }
    Ok(())
}

/// `scan.json` and `scan.html` into `out`.
fn write_outputs(report: &ScanReport, out: &std::path::Path) -> Result<(), ScanError> {
    let json = serde_json::to_string_pretty(report).unwrap_or_default() + "\n";
    crate::results::store::write_atomic(&out.join("scan.json"), json.as_bytes())?;
    crate::results::store::write_atomic(&out.join("scan.html"), html::page(report).as_bytes())?;
    Ok(())
}

/// A candidate's status from its runs, and what it rests on.
fn status_of(record: &FireRecord) -> (CandidateStatus, String) {
    if record.calibration != elengtis_core::prove::CalibrationStatus::Passed && record.decision.is_none() {
        return (
            CandidateStatus::CalibrationFailed,
            format!(
                "not tested: the check was not shown able to see the effect ({}): {}",
                record.calibration.as_str(),
                record.calibration_detail
            ),
        );
    }
    if record.control_fired == Some(true) {
        return (
            CandidateStatus::ControlFired,
            "the benign carrier (the markers without the instruction) fired too: the effect is not the payload's"
                .into(),
        );
    }
    match record.decision {
        Some(Decision::Above) => (CandidateStatus::Fired, record.stopped.clone()),
        Some(Decision::Below) => (CandidateStatus::Resisted, record.stopped.clone()),
        Some(Decision::Undecided) if record.decided > 0 => (CandidateStatus::Undecided, record.stopped.clone()),
        _ => (
            CandidateStatus::NotTested,
            format!("no trial decided anything: {}", record.undecided.first().map_or("no trial ran", String::as_str)),
        ),
    }
}

/// A candidate's place in the ranking: fired first, then undecided, control fired, resisted
/// and the rest; within a status, by the interval's lower bound, highest first.
pub fn rank(c: &Candidate) -> (u8, std::cmp::Reverse<u64>) {
    let status = c.status.rank();
    // The bound in millionths: a total order without floats.
    let low = c.run.as_ref().map_or(0.0, |r| r.interval[0]);
    (status, std::cmp::Reverse((low.clamp(0.0, 1.0) * 1e6) as u64))
}

/// `fired 2, resisted 9, undecided 0, …`: how many candidates ended in each status.
pub fn status_counts(report: &ScanReport) -> String {
    let parts: Vec<String> = CandidateStatus::ALL
        .iter()
        .filter(|s| **s != CandidateStatus::NotRun)
        .map(|status| {
            let count = report.candidates.iter().filter(|c| c.status == *status).count();
            format!("{} {count}", status.as_str().replace('_', " "))
        })
        .collect();
    parts.join(", ")
}

/// The text a scan prints: each tool's roles (with the words that gave them, `explain`), the
/// description findings, the candidates and why a class gave none.
pub fn render(report: &ScanReport, explain: bool) -> String {
    let mut out = String::new();
    let _ =
        writeln!(out, "{} lists {}.", report.target, elengtis_core::format::quote::count(report.tools.len(), "tool"));
    for tool in &report.tools {
        let roles: Vec<&str> = tool.roles.iter().map(|r| r.as_str()).collect();
        let _ = writeln!(
            out,
            "  {}: {}",
            tool.tool,
            if roles.is_empty() { "no role".to_owned() } else { roles.join(", ") }
        );
        if explain {
            for role in &tool.roles {
                let words: Vec<String> = tool
                    .reasons
                    .iter()
                    .filter(|r| r.role == *role)
                    .map(|r| {
                        format!(
                            "{} `{}`",
                            serde_json::to_value(r.found)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default(),
                            r.word
                        )
                    })
                    .collect();
                let _ = writeln!(out, "    {}: {}", role.as_str(), words.join(", "));
            }
        }
    }
    if report.description_findings.is_empty() {
        out.push_str("Descriptions: no directive-shaped text.\n");
    } else {
        let _ =
            writeln!(out, "Descriptions with directive-shaped text (W1, the server's own words; not run as attacks):");
        for f in &report.description_findings {
            let _ = writeln!(out, "  {} [{}]: {}", f.tool, f.kind.as_str(), f.excerpt);
        }
    }
    if report.ran {
        let _ = writeln!(out, "Candidates: {} — {}.", report.candidates.len(), status_counts(report));
    } else {
        let _ = writeln!(out, "Candidates: {} (listed, not run).", report.candidates.len());
    }
    // Ranked: fired first, by the interval's lower bound.
    let mut ranked: Vec<&Candidate> = report.candidates.iter().collect();
    ranked.sort_by_key(|c| rank(c));
    for c in ranked {
        let (path, check) = (c.path(), c.verifier.describe());
        if report.ran {
            let _ = writeln!(
                out,
                "  {:<19} {} ({} {}): {path}; verified by {check}",
                c.status,
                c.id,
                c.class,
                c.style.as_str()
            );
            if let Some(why) = &c.why {
                let _ = writeln!(out, "                      {why}");
            }
            if let Some(proof) = &c.proof {
                let _ = writeln!(
                    out,
                    "                      proved against the guarded side ({}): {} — {}",
                    proof.guarded_side, proof.verdict, proof.report
                );
            }
        } else {
            let _ = writeln!(out, "  {} ({} {}): {path}; verified by {check}", c.id, c.class, c.style.as_str());
        }
    }
    if let Some(t) = report.trials {
        let _ = writeln!(out, "Trials: {} run; fixed iterations would have run {}.", t.run, t.fixed);
    }
    if let Some(p) = &report.planner {
        out.push_str(&p.describe());
    }
    for why in &report.not_made {
        let _ = writeln!(out, "  none: {why}");
    }
    out
}
