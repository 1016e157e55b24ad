//! The gate file (`gate/gate.yaml`): the committed regression that `elengtis gate` runs.
//!
//! Each finding is an attack seed and how its gate re-drives it:
//! - `fixtures: DIR` — against the bundled reference twins, answered offline from the model
//!   exchanges recorded in DIR (`elengtis gate --record` writes them, with a lock file that
//!   pins what they were recorded from);
//! - `target: FILE` — against a target of your own (one campaign target in FILE), re-driven
//!   live with the file's `model`, only when `ELENGTIS_LIVE_TARGET=1` says so.
//!
//! Parsed like every input (unknown fields are errors with file, line, column and field
//! path); paths are relative to the gate file.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::campaign::{Provider, Target};
use super::path::Path as FieldPath;
use super::yaml::Node;
use super::{Diagnostic, LoadError, Severity, check_extension, diagnostic_at, parse_document_all, read_limited};

/// Iterations of the repeat filter under `gate` when the file gives none (the seed's 3).
pub const DEFAULT_GATE_ITERATIONS: u32 = 3;

/// The gate file.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Gate")]
pub struct GateFile {
    /// Format version; must be 1.
    #[schemars(range(min = 1, max = 1))]
    #[serde(deserialize_with = "super::schema_version")]
    pub schema_version: u32,
    /// Iterations of the repeat filter per side (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub iterations: Option<u32>,
    /// The live model: what `gate --record` records fixtures with, and what re-drives
    /// `target` findings. Replays take the model from each fixture directory's lock file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<LiveModel>,
    /// The findings (at least one).
    #[schemars(length(min = 1))]
    pub findings: Vec<GateFinding>,
}

/// A live model, with the campaign's fields of the same names.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveModel {
    /// The provider's model name.
    pub model: String,
    /// The provider (default OpenRouter), as a campaign's `provider`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// Provider route (OpenRouter), as a campaign's `provider_route`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_route: Option<String>,
    /// Generation settings, as a campaign's `generation`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub generation: Map<String, Value>,
    /// Model label in results, as a campaign's `model_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

impl LiveModel {
    /// `provider/model` (`openrouter/…` when no provider is named), as reports name it.
    pub fn label(&self) -> String {
        let provider = self.provider.as_ref().map_or("openrouter", |p| p.kind.as_str());
        format!("{provider}/{}", self.model)
    }

    /// The campaign fields this model sets.
    pub fn campaign_fields(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

/// What stands on the guarded side of a `target` finding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CustomGuard {
    /// The target behind the control shim of the seed's class (a stand-in at the MCP
    /// boundary).
    #[default]
    Shim,
    /// None: the gate shows reproduction only (at best STABLE, NOT PROVEN).
    None,
    /// The target's own controls (its `control_env` and `control_args`, which the target file
    /// must declare): every one off on the vulnerable side, every one on on the guarded side —
    /// the server you ship, with its own guards, as `prove --target` with declared controls.
    Controls,
}

/// One finding of the gate.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateFinding {
    /// The seed file.
    pub seed: String,
    /// Reference twins, replayed offline: the directory of recorded model exchanges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixtures: Option<String>,
    /// A target of your own, re-driven live (opt-in): a file holding one campaign target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The guarded side of a `target` finding (default `shim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarded: Option<CustomGuard>,
}

/// How a loaded finding runs.
#[derive(Debug, Clone)]
pub enum FindingKind {
    /// Replayed offline against the reference twins from this fixture directory.
    Reference {
        /// The fixture directory (resolved).
        fixtures: PathBuf,
    },
    /// Re-driven live against this target.
    Custom {
        /// The target file (resolved).
        path: PathBuf,
        /// The target.
        target: Box<Target>,
        /// The guarded side.
        guarded: CustomGuard,
    },
}

/// One finding, paths resolved.
#[derive(Debug, Clone)]
pub struct LoadedFinding {
    /// The seed file (resolved).
    pub seed: PathBuf,
    /// The line of the gate file where the finding's entry starts (1-based; 0 when unknown).
    pub line: usize,
    /// How it runs.
    pub kind: FindingKind,
}

/// A loaded gate file.
#[derive(Debug, Clone)]
pub struct LoadedGate {
    /// The file.
    pub path: PathBuf,
    /// The file as written.
    pub gate: GateFile,
    /// The findings, paths resolved relative to the file.
    pub findings: Vec<LoadedFinding>,
}

impl LoadedGate {
    /// Iterations of the repeat filter.
    pub fn iterations(&self) -> u32 {
        self.gate.iterations.unwrap_or(DEFAULT_GATE_ITERATIONS)
    }
}

/// Read, parse and check a gate file and the target files it names.
///
/// # Errors
///
/// [`LoadError::Read`] when the file cannot be read; [`LoadError::Invalid`] with every
/// problem found (file, line, column, field path) otherwise.
pub fn load_gate(path: &Path) -> Result<LoadedGate, LoadError> {
    if let Some(d) = check_extension(path) {
        return Err(LoadError::Invalid(vec![d]));
    }
    let text = read_limited(path)?;
    let (gate, node) = parse_document_all::<GateFile>(path, &text).map_err(LoadError::Invalid)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut problems = Vec::new();
    let at = |field: &FieldPath| {
        let mut at = field.clone();
        loop {
            if let Some(n) = node.find(&at) {
                break n.mark;
            }
            if at.0.pop().is_none() {
                break node.mark;
            }
        }
    };
    let mut push = |field: FieldPath, message: String| {
        let mark = at(&field);
        problems.push(diagnostic_at(path, mark.line, mark.column, field.to_string(), message));
    };
    let root = FieldPath::root();
    if gate.schema_version != 1 {
        push(root.key("schema_version"), format!("must be 1, not {}", gate.schema_version));
    }
    if gate.iterations.is_some_and(|n| !(1..=100).contains(&n)) {
        push(root.key("iterations"), "must be between 1 and 100".into());
    }
    if gate.findings.is_empty() {
        push(root.key("findings"), "must list at least one finding".into());
    }
    let mut findings = Vec::new();
    let mut target_problems = Vec::new();
    for (i, finding) in gate.findings.iter().enumerate() {
        let here = root.key("findings").index(i);
        let seed = base.join(&finding.seed);
        if !seed.is_file() {
            push(here.key("seed"), format!("seed file {} does not exist", seed.display()));
        }
        let kind = match (&finding.fixtures, &finding.target) {
            (Some(fixtures), None) => {
                if finding.guarded.is_some() {
                    push(here.key("guarded"), "only a `target` finding chooses its guarded side".into());
                }
                Some(FindingKind::Reference { fixtures: base.join(fixtures) })
            }
            (None, Some(target)) => {
                let target_path = base.join(target);
                match load_target(&target_path) {
                    Ok(t)
                        if finding.guarded == Some(CustomGuard::Controls)
                            && t.control_env.is_empty()
                            && t.control_args.is_empty() =>
                    {
                        push(
                            here.key("guarded"),
                            format!(
                                "`controls` needs the target's own controls, and {} declares none (`control_env` or `control_args`)",
                                target_path.display()
                            ),
                        );
                        None
                    }
                    Ok(t) => Some(FindingKind::Custom {
                        path: target_path,
                        target: Box::new(t),
                        guarded: finding.guarded.unwrap_or_default(),
                    }),
                    Err(LoadError::Invalid(found)) => {
                        target_problems.extend(found);
                        None
                    }
                    Err(e) => {
                        push(here.key("target"), e.to_string());
                        None
                    }
                }
            }
            (Some(_), Some(_)) => {
                push(here.clone(), "give `fixtures` (reference twins, replayed) or `target` (live), not both".into());
                None
            }
            (None, None) => {
                push(here.clone(), "needs `fixtures` (reference twins, replayed) or `target` (live)".into());
                None
            }
        };
        if let Some(kind) = kind {
            let line = node.find(&here).map_or(0, |n| n.mark.line);
            findings.push(LoadedFinding { seed, line, kind });
        }
    }
    if gate.model.is_none() && gate.findings.iter().any(|f| f.target.is_some()) {
        push(root.key("model"), "a `target` finding is re-driven live and needs the gate's `model`".into());
    }
    problems.extend(target_problems);
    if problems.iter().any(|d: &Diagnostic| d.severity == Severity::Error) {
        return Err(LoadError::Invalid(problems));
    }
    Ok(LoadedGate { path: path.to_owned(), gate, findings })
}

/// Read a target file: one campaign target.
///
/// # Errors
///
/// As [`load_gate`].
pub fn load_target(path: &Path) -> Result<Target, LoadError> {
    if let Some(d) = check_extension(path) {
        return Err(LoadError::Invalid(vec![d]));
    }
    let text = read_limited(path)?;
    let (target, _node): (Target, Node) = parse_document_all(path, &text).map_err(LoadError::Invalid)?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    fn messages(e: LoadError) -> Vec<String> {
        match e {
            LoadError::Invalid(found) => found.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        }
    }

    #[test]
    fn findings_resolve_relative_to_the_file_and_default_to_three_iterations() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "a.seed.yaml", "x: 1\n");
        let path = write(
            dir.path(),
            "gate.yaml",
            "schema_version: 1\nfindings:\n  - {seed: a.seed.yaml, fixtures: fixtures/a}\n",
        );
        let gate = load_gate(&path).expect("valid");
        assert_eq!(gate.iterations(), 3);
        assert_eq!(gate.findings[0].seed, dir.path().join("a.seed.yaml"));
        assert!(
            matches!(&gate.findings[0].kind, FindingKind::Reference { fixtures } if *fixtures == dir.path().join("fixtures/a"))
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(
            dir.path(),
            "gate.yaml",
            "schema_version: 1\niterations: 0\nfindings:\n  - {seed: missing.seed.yaml}\n  - {seed: b, fixtures: f, target: t.yaml}\n  - {seed: c, target: t.yaml}\n",
        );
        let found = messages(load_gate(&path).expect_err("invalid")).join("\n");
        for expected in [
            "iterations: must be between 1 and 100",
            "findings[0].seed: seed file",
            "findings[0]: needs `fixtures`",
            "findings[1]: give `fixtures`",
            "findings[2].target",
        ] {
            assert!(found.contains(expected), "{expected:?} not in:\n{found}");
        }
        let path = write(dir.path(), "typo.yaml", "schema_version: 1\nfindings: []\nmodle: x\n");
        let found = messages(load_gate(&path).expect_err("invalid")).join("\n");
        assert!(found.contains("typo.yaml:3") && found.contains("modle"), "{found}");
    }

    #[test]
    fn a_target_finding_needs_a_model_and_a_valid_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "s.seed.yaml", "x: 1\n");
        write(dir.path(), "t.yaml", "id: mine\ntransport: {type: stdio, command: my-server}\nbindings: {}\nbogus: 1\n");
        let path =
            write(dir.path(), "gate.yaml", "schema_version: 1\nfindings:\n  - {seed: s.seed.yaml, target: t.yaml}\n");
        let found = messages(load_gate(&path).expect_err("invalid")).join("\n");
        assert!(found.contains("t.yaml:4") && found.contains("bogus"), "{found}");
        assert!(found.contains("model: a `target` finding"), "{found}");
        write(dir.path(), "t.yaml", "id: mine\ntransport: {type: stdio, command: my-server}\nbindings: {}\n");
        let path = write(
            dir.path(),
            "gate.yaml",
            "schema_version: 1\nmodel: {model: m, provider: {type: openai_compatible, base_url: 'http://127.0.0.1:1/v1'}}\nfindings:\n  - {seed: s.seed.yaml, target: t.yaml, guarded: none}\n",
        );
        let gate = load_gate(&path).expect("valid");
        assert!(matches!(&gate.findings[0].kind, FindingKind::Custom { guarded: CustomGuard::None, .. }));
        let fields = gate.gate.model.expect("model").campaign_fields();
        assert_eq!(fields["model"], "m");
        assert_eq!(fields["provider"]["type"], "openai_compatible");
    }
}
