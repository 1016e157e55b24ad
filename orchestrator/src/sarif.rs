//! Where a finding sits in the repository a scan runs in, for `findings.sarif`
//! ([`elengtis_core::prove::sarif`]): lines that exist, relative to `%SRCROOT%` — the
//! working directory, which is the checkout's root in CI (the recipes under docs/ci run the
//! tool there; a file outside it gets no line, only the logical location).
//!
//! - a gate's finding: the gate file's entry for it, the seed's `payload`, and for a target of
//!   your own the target file's `id`;
//! - a prove: your target file's `id` (and your guarded build's, when it is the side you ship),
//!   then the seed's `payload`.

use std::path::{Component, Path};

use elengtis_core::format::gate::{FindingKind, LoadedFinding, LoadedGate};
use elengtis_core::format::yaml::{Node, NodeKind};
use elengtis_core::prove::sarif::shipped_side;
use elengtis_core::prove::{ServerGuard, Side, SourceLine, ValidationReport};

/// `path` relative to the working directory, `/`-separated, when it is inside it (symbolic
/// links resolved on both sides); `None` otherwise (outside the repository, or unreadable).
pub fn repository_uri(path: &Path) -> Option<String> {
    let root = std::fs::canonicalize(std::env::current_dir().ok()?).ok()?;
    let file = std::fs::canonicalize(path).ok()?;
    let relative = file.strip_prefix(&root).ok()?;
    let parts: Option<Vec<&str>> = relative
        .components()
        .map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    parts.filter(|p| !p.is_empty()).map(|p| p.join("/"))
}

/// The line where the top-level key `key` of the YAML file at `path` is written.
fn key_line(path: &Path, key: &str) -> Option<u32> {
    let text = elengtis_core::format::read_limited(path).ok()?;
    let root: Node = elengtis_core::format::yaml::parse(&text).ok()?;
    let NodeKind::Map(entries) = &root.kind else { return None };
    let (k, _) = entries.iter().find(|(k, _)| k.as_str() == Some(key))?;
    u32::try_from(k.mark.line).ok().filter(|l| *l >= 1)
}

/// `path` at `line`, saying `what` is there, when the file is in the repository and the line
/// is known.
fn at(path: &Path, line: Option<u32>, what: &str) -> Option<SourceLine> {
    Some(SourceLine { uri: repository_uri(path)?, line: line?, what: what.to_owned() })
}

/// The seed's `payload` line.
pub fn seed_payload(seed: &Path) -> Option<SourceLine> {
    at(seed, key_line(seed, "payload"), "the attack's payload (the seed)")
}

/// A target file's `id` line.
pub fn target_file(path: &Path, what: &str) -> Option<SourceLine> {
    at(path, key_line(path, "id"), what)
}

/// The gate file's entry for a finding, at its line.
pub fn gate_entry(gate: &Path, line: usize) -> Option<SourceLine> {
    at(gate, u32::try_from(line).ok().filter(|l| *l >= 1), "the gate's entry for this finding")
}

/// The lines of a prove's finding: the target file of the side you ship (your guarded build's
/// when that is the shipped side, else your `--target`'s), then the seed's `payload`.
pub fn prove_lines(report: &ValidationReport, target: Option<&Path>, guarded_target: Option<&Path>) -> Vec<SourceLine> {
    let shipped_build = shipped_side(report) == Side::Guarded && report.server_guard == Some(ServerGuard::Build);
    let shipped = if shipped_build {
        guarded_target.and_then(|g| target_file(g, "your guarded build (the side you ship)"))
    } else {
        target.and_then(|t| target_file(t, "your target (the side you ship)"))
    };
    let seed = report.seed_file.as_deref().and_then(|s| seed_payload(Path::new(s)));
    [shipped, seed].into_iter().flatten().collect()
}

/// The lines of a gate's finding: the gate file's entry for it, the seed's `payload`, and your
/// target file's `id` for a custom finding.
pub fn gate_lines(gate: &LoadedGate, finding: &LoadedFinding) -> Vec<SourceLine> {
    let target = match &finding.kind {
        FindingKind::Custom { path, .. } => target_file(path, "your target"),
        FindingKind::Reference { .. } => None,
    };
    [gate_entry(&gate.path, finding.line), seed_payload(&finding.seed), target].into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_line_is_the_line_the_key_is_written_on() {
        let dir = tempfile::tempdir().expect("dir");
        let seed = dir.path().join("x.seed.yaml");
        std::fs::write(&seed, "# comment\nschema_version: 1\nid: x\n\npayload: |\n  two\n  lines\nmarkers: [a]\n")
            .expect("write");
        assert_eq!(key_line(&seed, "payload"), Some(5));
        assert_eq!(key_line(&seed, "id"), Some(3));
        assert_eq!(key_line(&seed, "missing"), None);
        std::fs::write(&seed, "[not, a, mapping]").expect("write");
        assert_eq!(key_line(&seed, "id"), None);
        assert_eq!(key_line(&dir.path().join("absent.yaml"), "id"), None);
    }

    #[test]
    fn only_files_inside_the_working_directory_have_a_repository_uri() {
        let cwd = std::env::current_dir().expect("cwd");
        let file = cwd.join("Cargo.toml");
        assert_eq!(repository_uri(&file).as_deref(), Some("Cargo.toml"));
        assert_eq!(repository_uri(Path::new("src/../Cargo.toml")).as_deref(), Some("Cargo.toml"));
        assert_eq!(repository_uri(Path::new("/")), None);
        assert_eq!(repository_uri(Path::new("does-not-exist.yaml")), None);
    }
}
