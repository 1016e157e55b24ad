//! SARIF 2.1.0 of one or more validation reports: one rule per seed, one result per finding.
//!
//! An alert means one thing: **a build you ship lets this attack through.** Code scanning opens
//! an alert when a result appears and closes it ("fixed") when a later analysis of the same
//! category no longer has it, so the log is written from the point of view of the side of the
//! differential that is shipped ([`shipped_side`]):
//!
//! - the **guarded side** when its safeguard is part of what is shipped: the reference twins'
//!   guarded side (what `gate` protects), your guarded build (`--guarded-target`), your
//!   server with its own controls on;
//! - the **vulnerable side** — your `--target` as it is — when the guarded side is only a
//!   stand-in that is not shipped (the control shim, the egress proxy) or there is none.
//!
//! A finding is an alert (level `error`, with a `security-severity`) when the shipped side
//! fired (leaked) in at least one decided run — a repeat iteration or a rewrite; otherwise it
//! is no result at all, so a guard that holds never shows as a problem and a repaired guard
//! closes its alert. With [`SarifOptions::include_undecided`] (`--sarif-include-rejected`)
//! the other findings are written too, as SARIF `kind: pass` (the shipped side decided and
//! held) or `kind: open` (it decided nothing), at level `none` with no `security-severity`.
//! GitHub does not document `kind`, so code-scanning uploads should leave that option off.
//!
//! - the partial fingerprint binds the seed, the weakness locus, which side is shipped and
//!   that side's identity as written (the target id, its image *repository* — not the tag or
//!   the image id, which change with every build — else its command line, and the controls
//!   on), so the same finding keeps its alert across runs and rebuilds, and is one alert from
//!   regression to repair;
//! - locations are lines that exist in the repository the scan ran in, relative to
//!   `%SRCROOT%` ([`SourceLine`]: the gate file's entry, your target file, the seed's
//!   `payload`), given by the caller; without any, the result has a logical location only;
//! - the message says which shipped side let the attack through and how often, then the
//!   verdict, the claim and the differential proof worded for the sides that actually ran
//!   (never "vulnerable build" for a target of your own);
//! - `properties` name the targets (id, image id, runtime, command), the shipped side's tally
//!   and every leg's evidence file (relative to the SARIF file's directory).
//!
//! The output is validated in the tests against the official SARIF 2.1.0 JSON Schema
//! (`core/tests/data/sarif-schema-2.1.0.json`) and GitHub's documented upload rules.

use serde_json::{Map, Value, json};

use super::leg::{EvidenceTier, LegReading, Side};
use super::report::{TargetIdentity, ValidationReport};
use super::verdict::{GuardedLayer, ServerGuard};
use crate::format::seed::Weakness;
use crate::format::sha256_hex;

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
/// The `$schema` written.
pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The partial fingerprint's key.
pub const FINGERPRINT_KEY: &str = "elengtisShippedSide/v3";
/// The base every location is relative to (the repository the scan ran in).
pub const SRCROOT: &str = "%SRCROOT%";

/// The tool that produced the log (`runs[0].tool.driver`).
#[derive(Debug, Clone, Copy)]
pub struct SarifTool<'a> {
    /// The tool's name (`elengtis`).
    pub name: &'a str,
    /// Its version.
    pub version: &'a str,
    /// Where to read about it (an absolute URI).
    pub information_uri: &'a str,
}

/// What the log holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct SarifOptions {
    /// Also write the findings that are not alerts — `kind: pass` (the shipped side held) and
    /// `kind: open` (it decided nothing) — at level `none` without a `security-severity`
    /// (default: left out; they are not alerts).
    pub include_undecided: bool,
}

/// A line of a file in the repository the scan ran in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// The path relative to the repository's root (`%SRCROOT%`), `/`-separated, without `..`.
    pub uri: String,
    /// The line, 1-based.
    pub line: u32,
    /// What is there (`the gate's entry for this finding`, `the attack's payload`).
    pub what: String,
}

/// One finding to write: its report and where it sits in the repository (first: the primary
/// location code scanning shows; at most ten are written).
#[derive(Debug, Clone, Copy)]
pub struct SarifFinding<'a> {
    /// The validation report.
    pub report: &'a ValidationReport,
    /// Its lines in the repository.
    pub locations: &'a [SourceLine],
}

/// What the shipped side of a finding did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shipped {
    /// It fired (leaked) in `fired` of its `decided` runs: an alert.
    LetThrough {
        /// Decided runs that fired.
        fired: u32,
        /// Decided runs (fired or resisted), repeats and rewrites.
        decided: u32,
    },
    /// It resisted every one of its `decided` runs (at least one).
    Held {
        /// Decided runs.
        decided: u32,
    },
    /// None of its runs decided anything.
    Undecided,
}

/// The side of the differential that is shipped (see the module documentation): the
/// vulnerable side for a target of your own whose guarded side is a stand-in (the control
/// shim, the egress proxy) or absent; the guarded side otherwise.
pub fn shipped_side(report: &ValidationReport) -> Side {
    let stand_in = matches!(report.guarded_twin_layer, Some(GuardedLayer::Boundary | GuardedLayer::Network));
    if report.targets.custom && (stand_in || report.legs.guarded.is_none()) { Side::Vulnerable } else { Side::Guarded }
}

/// What the shipped side did, over its repeat iterations and its rewrites.
pub fn shipped(report: &ValidationReport) -> Shipped {
    let side = shipped_side(report);
    let repeats = match side {
        Side::Vulnerable => Some(&report.legs.vulnerable),
        Side::Guarded => report.legs.guarded.as_ref(),
    };
    let runs = repeats.map(|l| l.runs.as_slice()).unwrap_or_default();
    // A shipped side whose every leak rests on the LLM judge alone is not an alert: the judge
    // never decides a finding alone, and an alert means the build you ship let it through.
    // (One leak any predicate saw makes it one, the judge's then counting as support.)
    if runs.iter().any(|r| r.reading.is_fire())
        && runs.iter().all(|r| !matches!(r.reading, LegReading::Fired { tier } if tier != EvidenceTier::JudgeOnly))
    {
        return Shipped::Undecided;
    }
    let (mut fired, mut decided) = (0u32, 0u32);
    for run in runs {
        fired += u32::from(run.reading.is_fire());
        decided += u32::from(run.reading.is_decided());
    }
    for row in report.metamorphic.iter().flat_map(|m| &m.rows) {
        let label = match side {
            Side::Vulnerable => Some(row.vulnerable.as_str()),
            Side::Guarded => row.guarded.as_deref(),
        };
        fired += u32::from(matches!(label, Some("fired" | "leak")));
        decided += u32::from(matches!(label, Some("fired" | "leak" | "resisted")));
    }
    match (fired, decided) {
        (0, 0) => Shipped::Undecided,
        (0, decided) => Shipped::Held { decided },
        (fired, decided) => Shipped::LetThrough { fired, decided },
    }
}

/// Whether a finding is an alert: the side you ship let the attack through.
pub fn is_alert(report: &ValidationReport) -> bool {
    matches!(shipped(report), Shipped::LetThrough { .. })
}

/// The `security-severity` of a weakness class (GitHub code scanning's 0–10 scale).
pub fn security_severity(weakness: Weakness) -> &'static str {
    match weakness {
        // Indirect injection reaching egress: exfiltration of what the agent can read.
        Weakness::W2 => "8.0",
        Weakness::W1 => "7.5",
        Weakness::W3 => "7.0",
        Weakness::W4 => "6.5",
    }
}

/// The SARIF `kind` and `level` of a finding: an alert is `fail` at `error`; a shipped side
/// that held is `pass`, one that decided nothing `open`, both at `none`.
pub fn kind_and_level(report: &ValidationReport) -> (&'static str, &'static str) {
    match shipped(report) {
        Shipped::LetThrough { .. } => ("fail", "error"),
        Shipped::Held { .. } => ("pass", "none"),
        Shipped::Undecided => ("open", "none"),
    }
}

fn tags(report: &ValidationReport) -> Vec<String> {
    let mut tags = vec!["security".to_owned(), report.weakness.as_str().to_owned(), report.weakness.name().to_owned()];
    for tag in report.compliance.tags() {
        if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    tags
}

/// How the message names one side of the differential.
fn side_name(report: &ValidationReport, guarded: bool) -> String {
    let named = |t: Option<&TargetIdentity>| t.map(|t| format!("`{}`", t.id)).unwrap_or_default();
    let targets = &report.targets;
    if !targets.custom {
        return match (guarded, report.guarded_twin_layer) {
            (false, _) => "the vulnerable reference twin".into(),
            (true, Some(GuardedLayer::Boundary)) => "the vulnerable twin behind the boundary control shim".into(),
            (true, Some(GuardedLayer::Network)) => "the vulnerable twin behind the network egress proxy".into(),
            (true, _) => "the guarded reference twin".into(),
        };
    }
    let vulnerable = named(targets.vulnerable.as_ref());
    if !guarded {
        return match &report.server_guard {
            Some(ServerGuard::Controls { .. }) => format!("your target {vulnerable} with its controls off"),
            _ => format!("your target {vulnerable}"),
        };
    }
    match (report.guarded_twin_layer, &report.server_guard) {
        (Some(GuardedLayer::Server), Some(ServerGuard::Build)) => {
            format!("your guarded build {}", named(targets.guarded.as_ref()))
        }
        (Some(GuardedLayer::Server), Some(ServerGuard::Controls { controls })) => {
            format!("your target {vulnerable} with its controls on ({})", controls.join(", "))
        }
        (Some(GuardedLayer::Boundary), _) => format!("your target {vulnerable} behind the boundary control shim"),
        (Some(GuardedLayer::Network), _) => format!("your target {vulnerable} behind the network egress proxy"),
        _ => format!("your target {vulnerable}"),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The evidence files of the shipped side's runs that fired, relative to the SARIF file's
/// directory (repeats first, in order).
fn shipped_evidence(report: &ValidationReport) -> Vec<String> {
    let runs = match shipped_side(report) {
        Side::Vulnerable => Some(&report.legs.vulnerable),
        Side::Guarded => report.legs.guarded.as_ref(),
    };
    runs.map(|l| l.runs.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|r| r.reading.is_fire())
        .filter_map(|r| r.evidence.as_ref().map(|e| format!("{}/{e}", report.seed)))
        .collect()
}

/// The result message: what the shipped side did first, then the verdict, the claim, the
/// differential proof, the rewrites and the reasons.
pub fn message(report: &ValidationReport) -> String {
    let v = &report.legs.vulnerable.counts;
    let vulnerable = side_name(report, false);
    let proof = match &report.legs.guarded {
        Some(g) => format!(
            "Differential proof: fired {}/{} on {vulnerable}, resisted {}/{} on {}",
            v.fires(),
            v.runs,
            g.counts.resisted,
            g.counts.runs,
            side_name(report, true)
        ),
        None => format!("Reproduction only: fired {}/{} on {vulnerable}; no guarded side", v.fires(), v.runs),
    };
    let rewrites = match &report.metamorphic {
        Some(meta) => format!("metamorphic rewrites held {}/{}", meta.held, meta.total),
        None => "metamorphic stage not run".to_owned(),
    };
    let shipped_name = capitalized(&side_name(report, shipped_side(report) == Side::Guarded));
    let first = match shipped(report) {
        Shipped::LetThrough { fired, decided } => {
            let evidence = shipped_evidence(report);
            let evidence = evidence.first().map(|e| format!(" (evidence: {e})")).unwrap_or_default();
            format!(
                "{shipped_name}, which is what you ship, lets this attack through: it fired in {fired} of its {decided} decided runs{evidence}."
            )
        }
        Shipped::Held { decided } => format!("{shipped_name} held: it resisted all {decided} of its decided runs."),
        Shipped::Undecided => format!("{shipped_name} decided nothing: none of its runs fired or resisted."),
    };
    let mut text =
        format!("{first} {}: {}. {proof}; {} {rewrites}.", report.verdict_label, report.claim, report.weakness);
    if !report.reasons.is_empty() {
        text.push_str(" Reasons: ");
        text.push_str(&report.reasons.join("; "));
        text.push('.');
    }
    text
}

fn rule(report: &ValidationReport, alert: bool) -> Value {
    let mut properties = json!({
        "tags": tags(report),
        "weakness": report.weakness.as_str(),
        "compliance": report.compliance,
    });
    if alert {
        properties["security-severity"] = json!(security_severity(report.weakness));
    }
    json!({
        "id": report.seed,
        "name": report.weakness.name(),
        "shortDescription": {"text": report.title},
        "fullDescription": {"text": format!(
            "{} ({}): {} delivered via {}; guarded by {}.",
            report.weakness,
            report.weakness.name(),
            report.channel.as_str(),
            report.delivery.as_str(),
            report.guards.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ")
        )},
        "defaultConfiguration": {"level": if alert { "error" } else { "none" }},
        "properties": properties,
    })
}

/// The image repository of a reference: without its tag or digest, which change with every
/// build.
fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    }
}

/// A target as written, for a fingerprint: its id, transport, image repository (else its
/// command line, else its URL) and the controls on. Never the image id or tag.
fn written_identity(target: &TargetIdentity) -> String {
    let server = match (&target.image, &target.url) {
        (Some(image), _) => repository(image).to_owned(),
        (None, _) if !target.command.is_empty() => target.command.join(" "),
        (None, Some(url)) => url.clone(),
        (None, None) => String::new(),
    };
    format!("{}|{}|{server}|{}", target.id, target.transport, target.controls_on.join(","))
}

/// The fingerprint of a finding: the seed, its locus, which side is shipped and that side as
/// written (see [`written_identity`]; the reference twins by their guarded layer). Stable
/// across runs and rebuilds, so one finding is one alert from its regression to its repair.
pub fn fingerprint(report: &ValidationReport) -> String {
    let side = shipped_side(report);
    let identity = if report.targets.custom {
        let target = match side {
            // Your guarded build is a target of its own; your controls are your target's.
            Side::Guarded if report.server_guard == Some(ServerGuard::Build) => report.targets.guarded.as_ref(),
            Side::Guarded => report.targets.guarded.as_ref().or(report.targets.vulnerable.as_ref()),
            Side::Vulnerable => report.targets.vulnerable.as_ref(),
        };
        target.map(written_identity).unwrap_or_default()
    } else {
        format!("reference twin|{}", report.guarded_twin_layer.map(GuardedLayer::as_str).unwrap_or("none"))
    };
    sha256_hex(
        format!("{}|{}|{}|{}|{}|{identity}", report.seed, report.weakness, report.tool, report.field, side.as_str())
            .as_bytes(),
    )
}

fn legs(report: &ValidationReport) -> Value {
    let side = |runs: &[super::leg::LegRun], which: Side| -> Vec<Value> {
        runs.iter()
            .map(|r| {
                json!({
                    "reading": r.reading.label(which),
                    "evidence": r.evidence.as_ref().map(|e| format!("{}/{e}", report.seed)),
                })
            })
            .collect()
    };
    json!({
        "vulnerable": side(&report.legs.vulnerable.runs, Side::Vulnerable),
        "guarded": report.legs.guarded.as_ref().map(|g| side(&g.runs, Side::Guarded)),
    })
}

fn shipped_properties(report: &ValidationReport) -> Value {
    let (outcome, fired, decided) = match shipped(report) {
        Shipped::LetThrough { fired, decided } => ("let_through", fired, decided),
        Shipped::Held { decided } => ("held", 0, decided),
        Shipped::Undecided => ("undecided", 0, 0),
    };
    json!({
        "side": shipped_side(report).as_str(),
        "name": side_name(report, shipped_side(report) == Side::Guarded),
        "outcome": outcome,
        "fired": fired,
        "decided": decided,
        "evidence": shipped_evidence(report),
    })
}

fn result(finding: &SarifFinding<'_>, rule_index: usize) -> Value {
    let report = finding.report;
    let logical = json!([{
        "name": report.tool,
        "fullyQualifiedName": format!("{}.{}", report.tool, report.field),
        "kind": "function",
    }]);
    let mut locations: Vec<Value> = finding
        .locations
        .iter()
        .take(10)
        .map(|l| {
            let mut location = Map::new();
            location.insert(
                "physicalLocation".into(),
                json!({"artifactLocation": {"uri": l.uri, "uriBaseId": SRCROOT}, "region": {"startLine": l.line.max(1)}}),
            );
            location.insert("message".into(), json!({"text": l.what}));
            location.insert("logicalLocations".into(), logical.clone());
            Value::Object(location)
        })
        .collect();
    if locations.is_empty() {
        locations.push(json!({"logicalLocations": logical}));
    }
    let (kind, level) = kind_and_level(report);
    let alert = kind == "fail";
    let mut properties = json!({
        "verdict": report.verdict_label,
        "weakness": report.weakness.as_str(),
        "evidenceTier": report.evidence_tier.map(|t| t.as_str()),
        "kept": report.kept,
        "guardedTwinLayer": report.guarded_twin_layer.map(GuardedLayer::as_str),
        "reproducibility": report.reproducibility,
        "claim": report.claim,
        "model": report.model,
        "tags": tags(report),
        "shipped": shipped_properties(report),
        "targets": report.targets,
        "legs": legs(report),
    });
    if let Some(judge) = &report.judge {
        // The judge's consensus figures: a judge-only tier is never read without them.
        properties["llmJudge"] = json!({
            "model": judge.model, "k": judge.k, "confidenceFloor": judge.confidence_floor,
            "rubricSha256": judge.rubric_sha256, "unavailable": judge.unavailable,
            "vulnerable": judge.vulnerable, "guarded": judge.guarded,
        });
    }
    if alert {
        properties["security-severity"] = json!(security_severity(report.weakness));
    }
    json!({
        "ruleId": report.seed,
        "ruleIndex": rule_index,
        "kind": kind,
        "level": level,
        "message": {"text": message(report)},
        "locations": locations,
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint(report)},
        "properties": properties,
    })
}

/// The SARIF 2.1.0 log of `findings`: one run, one rule per distinct seed written (the first
/// written finding's text; `security-severity` when any of its results is an alert), one
/// result per alert — and per other finding with [`SarifOptions::include_undecided`].
pub fn sarif_log(findings: &[SarifFinding<'_>], tool: &SarifTool<'_>, options: &SarifOptions) -> Value {
    let written: Vec<&SarifFinding<'_>> =
        findings.iter().filter(|f| options.include_undecided || is_alert(f.report)).collect();
    let mut ids: Vec<&str> = Vec::new();
    let mut results = Vec::new();
    for finding in &written {
        let index = match ids.iter().position(|id| *id == finding.report.seed) {
            Some(index) => index,
            None => {
                ids.push(&finding.report.seed);
                ids.len() - 1
            }
        };
        results.push(result(finding, index));
    }
    let rules: Vec<Value> = ids
        .iter()
        .filter_map(|id| {
            let first = written.iter().find(|f| f.report.seed == *id)?;
            let alert = written.iter().any(|f| f.report.seed == *id && is_alert(f.report));
            Some(rule(first.report, alert))
        })
        .collect();
    json!({
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": tool.name,
                "version": tool.version,
                "informationUri": tool.information_uri,
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prove::leg::{EvidenceTier, LegReading};
    use crate::prove::report::Targets;
    use crate::prove::report::tests::{kept, report};
    use crate::prove::verdict::Verdict;

    /// The official SARIF 2.1.0 JSON Schema (see `core/tests/data/README.md`).
    const SARIF_SCHEMA: &str = include_str!("../../tests/data/sarif-schema-2.1.0.json");

    const TOOL: SarifTool<'static> =
        SarifTool { name: "elengtis", version: "0.1.0", information_uri: "https://example.com/elengtis" };

    const ALL: SarifOptions = SarifOptions { include_undecided: true };

    const FIRED: LegReading = LegReading::Fired { tier: EvidenceTier::State };

    fn errors(log: &Value) -> Vec<String> {
        let schema: Value = serde_json::from_str(SARIF_SCHEMA).expect("the schema is JSON");
        let validator =
            jsonschema::options().should_validate_formats(true).build(&schema).expect("the schema compiles");
        validator.iter_errors(log).map(|e| format!("{}: {e}", e.instance_path())).collect()
    }

    fn renamed(mut r: ValidationReport, seed: &str) -> ValidationReport {
        r.seed = seed.to_owned();
        r
    }

    /// Each run's evidence file, as prove records it (relative to the report's directory).
    fn with_evidence(mut r: ValidationReport) -> ValidationReport {
        for (side, legs) in [("vulnerable", Some(&mut r.legs.vulnerable)), ("guarded", r.legs.guarded.as_mut())] {
            for (i, run) in legs.into_iter().flat_map(|l| l.runs.iter_mut()).enumerate() {
                run.evidence = Some(format!("repeat/results/evidence/{side}--{i}.json"));
            }
        }
        r
    }

    /// The guarded reference twin leaked in two of five runs: a regression.
    fn regressed() -> ValidationReport {
        with_evidence(report(
            vec![FIRED; 5],
            Some(vec![LegReading::Resisted, FIRED, LegReading::Resisted, FIRED, LegReading::Resisted]),
        ))
    }

    fn lines() -> Vec<SourceLine> {
        vec![
            SourceLine {
                uri: "scenarios/gate/gate.yaml".into(),
                line: 24,
                what: "the gate's entry for this finding".into(),
            },
            SourceLine {
                uri: "scenarios/seeds/note-forward-direct.seed.yaml".into(),
                line: 7,
                what: "the attack's payload".into(),
            },
        ]
    }

    fn log_of(reports: &[ValidationReport], options: &SarifOptions) -> Value {
        let lines = lines();
        let findings: Vec<SarifFinding<'_>> =
            reports.iter().map(|r| SarifFinding { report: r, locations: &lines }).collect();
        sarif_log(&findings, &TOOL, options)
    }

    fn results(log: &Value) -> Vec<Value> {
        log["runs"][0]["results"].as_array().cloned().unwrap_or_default()
    }

    /// A held guard, a regression, a finding whose sides never fired (REJECTED: the attack
    /// stopped landing) and one that decided nothing, each its own seed.
    fn four() -> Vec<ValidationReport> {
        let rejected = renamed(report(vec![LegReading::Resisted; 5], Some(vec![LegReading::Resisted; 5])), "rejected");
        let nt = LegReading::NotTested { why: "never read".into() };
        let mut untested = renamed(report(vec![nt.clone(); 5], Some(vec![nt; 5])), "untested");
        untested.metamorphic = None;
        assert_eq!([rejected.verdict, untested.verdict], [Verdict::Rejected, Verdict::NotTested]);
        vec![kept(), renamed(regressed(), "regressed"), rejected, untested]
    }

    fn logs() -> Vec<Value> {
        vec![
            log_of(&[regressed()], &SarifOptions::default()),
            log_of(&four(), &SarifOptions::default()),
            log_of(&four(), &ALL),
            sarif_log(&[SarifFinding { report: &regressed(), locations: &[] }], &TOOL, &ALL),
            log_of(&[], &ALL),
        ]
    }

    #[test]
    fn the_log_validates_against_the_official_schema() {
        for log in logs() {
            let found = errors(&log);
            assert!(found.is_empty(), "{found:#?}\n{log:#}");
        }
    }

    /// GitHub's documented rules for uploaded SARIF ("SARIF support for code scanning"): a
    /// result's `ruleId` names a rule of the run and its `message.text` is set; at most ten
    /// locations, each a path relative to the repository (`uriBaseId` `%SRCROOT%`) with a
    /// `region.startLine`; `security-severity` a number from 0.0 to 10.0 given as a string,
    /// only with the `security` tag; partial fingerprints are strings; levels are SARIF's four
    /// (and `none` whenever `kind` is not `fail`, as SARIF §3.27.9 requires).
    #[test]
    fn the_log_follows_githubs_upload_rules() {
        for log in logs() {
            let run = &log["runs"][0];
            let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
            let ids: Vec<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
            let severity_ok = |holder: &Value| match holder["properties"]["security-severity"].as_str() {
                None => holder["properties"].get("security-severity").is_none(),
                Some(text) => {
                    let tagged =
                        holder["properties"]["tags"].as_array().is_some_and(|t| t.contains(&json!("security")));
                    text.parse::<f64>().is_ok_and(|v| (0.0..=10.0).contains(&v)) && tagged
                }
            };
            for rule in rules {
                assert!(severity_ok(rule), "{rule}");
            }
            for result in run["results"].as_array().expect("results") {
                assert!(ids.contains(&result["ruleId"].as_str().unwrap_or_default()), "{result}");
                assert!(result["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
                let level = result["level"].as_str().unwrap_or_default();
                assert!(["none", "note", "warning", "error"].contains(&level));
                assert!(result["kind"] == "fail" || level == "none", "{result}");
                assert!(severity_ok(result), "{result}");
                let locations = result["locations"].as_array().expect("locations");
                assert!(!locations.is_empty() && locations.len() <= 10);
                for l in locations.iter().filter(|l| l.get("physicalLocation").is_some()) {
                    let physical = &l["physicalLocation"];
                    let uri = physical["artifactLocation"]["uri"].as_str().expect("a uri");
                    assert!(
                        !uri.starts_with('/') && !uri.contains("://") && !uri.split('/').any(|p| p == ".."),
                        "{uri}"
                    );
                    assert_eq!(physical["artifactLocation"]["uriBaseId"], SRCROOT);
                    assert!(physical["region"]["startLine"].as_u64().is_some_and(|l| l >= 1));
                }
                for value in result["partialFingerprints"].as_object().expect("fingerprints").values() {
                    assert!(value.is_string());
                }
            }
        }
    }

    #[test]
    fn the_schema_check_fails_when_a_required_property_is_removed() {
        let log = log_of(&[regressed()], &SarifOptions::default());
        assert!(errors(&log).is_empty());
        // The driver's name, a result's message and the log's version are required.
        for pointer in ["/runs/0/tool/driver", "/runs/0/results/0", ""] {
            let key = match pointer {
                "/runs/0/tool/driver" => "name",
                "/runs/0/results/0" => "message",
                _ => "version",
            };
            let mut broken = log.clone();
            let removed = broken.pointer_mut(pointer).and_then(Value::as_object_mut).and_then(|o| o.remove(key));
            assert!(removed.is_some(), "{pointer}/{key} was present");
            let found = errors(&broken);
            assert!(!found.is_empty(), "removing {pointer}/{key} must make the log invalid");
        }
        // And a value of the wrong kind: a level SARIF does not define.
        let mut broken = log.clone();
        broken["runs"][0]["results"][0]["level"] = json!("critical");
        assert!(!errors(&broken).is_empty());
    }

    /// The case: a gate that passes (every guard holds) is no alert at all, and a
    /// guard that regresses is one — the other way round from code scanning's "fixed".
    #[test]
    fn a_guard_that_holds_is_no_alert_and_a_regressed_guard_is_one_with_its_evidence() {
        let held = log_of(&[kept()], &SarifOptions::default());
        assert!(results(&held).is_empty(), "{held:#}");
        assert!(held["runs"][0]["tool"]["driver"]["rules"].as_array().is_some_and(Vec::is_empty));

        let log = log_of(&[regressed()], &SarifOptions::default());
        let rule = &log["runs"][0]["tool"]["driver"]["rules"][0];
        assert_eq!(rule["id"], "note-forward-direct");
        assert_eq!(rule["properties"]["security-severity"], "8.0");
        assert_eq!(rule["defaultConfiguration"]["level"], "error");
        let tags: Vec<&str> = rule["properties"]["tags"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(tags, ["security", "W2", "indirect-injection-via-untrusted-content", "LLM01", "ASI01", "AML.T0051"]);
        let result = &results(&log)[0];
        assert_eq!((&result["kind"], &result["level"]), (&json!("fail"), &json!("error")));
        assert_eq!(result["properties"]["verdict"], "REJECTED");
        let text = result["message"]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "The guarded reference twin, which is what you ship, lets this attack through: it fired in 2 of its \
                 12 decided runs (evidence: note-forward-direct/repeat/results/evidence/guarded--1.json). REJECTED:"
            ),
            "{text}"
        );
        assert!(text.contains("Differential proof: fired 5/5 on the vulnerable reference twin, resisted 3/5 on the guarded reference twin"), "{text}");
        let shipped = &result["properties"]["shipped"];
        assert_eq!(
            (&shipped["side"], &shipped["outcome"], &shipped["fired"]),
            (&json!("guarded"), &json!("let_through"), &json!(2))
        );
        assert_eq!(
            shipped["evidence"],
            json!([
                "note-forward-direct/repeat/results/evidence/guarded--1.json",
                "note-forward-direct/repeat/results/evidence/guarded--3.json"
            ])
        );
        // The lines given, in order, each relative to %SRCROOT% with what is there.
        let locations = result["locations"].as_array().unwrap();
        assert_eq!(locations.len(), 2);
        let artifact = &locations[0]["physicalLocation"]["artifactLocation"];
        assert_eq!(
            (&artifact["uri"], &artifact["uriBaseId"]),
            (&json!("scenarios/gate/gate.yaml"), &json!("%SRCROOT%"))
        );
        assert_eq!(locations[0]["physicalLocation"]["region"]["startLine"], 24);
        assert_eq!(locations[1]["message"]["text"], "the attack's payload");
        assert_eq!(locations[1]["logicalLocations"][0]["name"], "read_note");
        assert_eq!(result["partialFingerprints"][FINGERPRINT_KEY].as_str().map(str::len), Some(64));
        assert_eq!(result["properties"]["security-severity"], "8.0");
    }

    #[test]
    fn findings_that_are_not_alerts_are_left_out_or_written_as_pass_and_open_without_severity() {
        let log = log_of(&four(), &SarifOptions::default());
        let ids: Vec<Value> = results(&log).iter().map(|r| r["ruleId"].clone()).collect();
        assert_eq!(ids, [json!("regressed")], "only the regression: {log:#}");
        let log = log_of(&four(), &ALL);
        let kinds: Vec<(String, String)> = results(&log)
            .iter()
            .map(|r| (r["kind"].as_str().unwrap().to_owned(), r["level"].as_str().unwrap().to_owned()))
            .collect();
        let expected = [("pass", "none"), ("fail", "error"), ("pass", "none"), ("open", "none")];
        assert_eq!(kinds, expected.map(|(k, l)| (k.to_owned(), l.to_owned())));
        let rules = log["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
        for i in [0, 2, 3] {
            assert!(results(&log)[i]["properties"].get("security-severity").is_none());
            assert!(rules[i]["properties"].get("security-severity").is_none(), "{}", rules[i]);
            assert_eq!(rules[i]["defaultConfiguration"]["level"], "none");
        }
        let held = results(&log)[0]["message"]["text"].as_str().unwrap().to_owned();
        assert!(
            held.starts_with("The guarded reference twin held: it resisted all 12 of its decided runs. KEPT:"),
            "{held}"
        );
        let open = results(&log)[3]["message"]["text"].as_str().unwrap().to_owned();
        assert!(open.starts_with("The guarded reference twin decided nothing"), "{open}");
        assert!(open.contains("NOT TESTED: no claim"), "{open}");
    }

    fn custom(
        layer: Option<GuardedLayer>,
        guard: Option<ServerGuard>,
        vulnerable: Vec<LegReading>,
        guarded: Option<Vec<LegReading>>,
    ) -> ValidationReport {
        let mut r = report(vulnerable, guarded);
        r.guarded_twin_layer = layer.filter(|_| r.legs.guarded.is_some());
        r.server_guard = guard;
        let target = |id: &str, image: Option<&str>, image_id: Option<&str>, command: &[&str], controls: &[&str]| {
            TargetIdentity {
                id: id.into(),
                transport: if image.is_some() { "isolated_container".into() } else { "stdio".into() },
                image: image.map(str::to_owned),
                image_id: image_id.map(str::to_owned),
                command: command.iter().map(|s| (*s).to_owned()).collect(),
                controls_on: controls.iter().map(|s| (*s).to_owned()).collect(),
                ..TargetIdentity::default()
            }
        };
        r.targets = Targets {
            custom: true,
            vulnerable: Some(target("inbox", None, None, &["elengtis-inbox"], &[])),
            guarded: match &r.server_guard {
                Some(ServerGuard::Build) => Some(target("inbox-v2", Some("me/inbox:2.1"), Some("sha256:aa"), &[], &[])),
                Some(ServerGuard::Controls { .. }) => {
                    Some(target("inbox", None, None, &["elengtis-inbox"], &["allowlist"]))
                }
                _ => None,
            },
        };
        with_evidence(r)
    }

    /// `prove` alerts on the side you ship: your `--target` when its guard is the shim or
    /// none and the attack lands; never on a guarded build or controls that resisted.
    #[test]
    fn your_target_is_the_shipped_side_behind_a_stand_in_and_a_guarded_build_that_resisted_is_never_an_alert() {
        let controls = Some(ServerGuard::Controls { controls: vec!["allowlist".into()] });
        let shim = custom(Some(GuardedLayer::Boundary), None, vec![FIRED; 5], Some(vec![LegReading::Resisted; 5]));
        assert_eq!(shipped_side(&shim), Side::Vulnerable);
        let text = message(&shim);
        assert!(
            text.starts_with("Your target `inbox`, which is what you ship, lets this attack through: it fired in 12 of its 12 decided runs"),
            "{text}"
        );
        assert!(text.contains("resisted 5/5 on your target `inbox` behind the boundary control shim"), "{text}");
        assert!(!text.contains("vulnerable build") && !text.contains("reference twin"), "{text}");
        let none = custom(None, None, vec![FIRED; 5], None);
        assert_eq!((shipped_side(&none), is_alert(&none)), (Side::Vulnerable, true));
        let mut resisting = custom(
            Some(GuardedLayer::Boundary),
            None,
            vec![LegReading::Resisted; 5],
            Some(vec![LegReading::Resisted; 5]),
        );
        resisting.metamorphic = None;
        assert!(!is_alert(&resisting), "your target resisted: nothing to alert");
        assert_eq!(shipped(&resisting), Shipped::Held { decided: 5 });

        for guard in [Some(ServerGuard::Build), controls.clone()] {
            let held =
                custom(Some(GuardedLayer::Server), guard.clone(), vec![FIRED; 5], Some(vec![LegReading::Resisted; 5]));
            assert_eq!(shipped_side(&held), Side::Guarded);
            assert!(!is_alert(&held), "{guard:?}: a guarded side that resisted is never an alert");
            let leaked = custom(
                Some(GuardedLayer::Server),
                guard.clone(),
                vec![FIRED; 5],
                Some(vec![
                    FIRED,
                    LegReading::Resisted,
                    LegReading::Resisted,
                    LegReading::Resisted,
                    LegReading::Resisted,
                ]),
            );
            assert!(is_alert(&leaked), "{guard:?}");
            let text = message(&leaked);
            let named = if guard == Some(ServerGuard::Build) {
                "Your guarded build `inbox-v2`"
            } else {
                "Your target `inbox` with its controls on (allowlist)"
            };
            assert!(
                text.starts_with(&format!(
                    "{named}, which is what you ship, lets this attack through: it fired in 1 of"
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn one_finding_keeps_its_fingerprint_from_regression_to_repair_and_across_rebuilds() {
        // Reference twins: held and regressed are the same finding.
        assert_eq!(fingerprint(&kept()), fingerprint(&regressed()));
        let build = Some(ServerGuard::Build);
        let held =
            custom(Some(GuardedLayer::Server), build.clone(), vec![FIRED; 5], Some(vec![LegReading::Resisted; 5]));
        let leaked = custom(Some(GuardedLayer::Server), build.clone(), vec![FIRED; 5], Some(vec![FIRED; 5]));
        assert_eq!(fingerprint(&held), fingerprint(&leaked));
        // A rebuild: another image id and tag of the same repository.
        let mut rebuilt = leaked.clone();
        if let Some(g) = rebuilt.targets.guarded.as_mut() {
            g.image = Some("me/inbox:2.2".into());
            g.image_id = Some("sha256:bb".into());
        }
        assert_eq!(fingerprint(&rebuilt), fingerprint(&leaked));
        // Another seed, another guarded build, another shipped side, another control set: other alerts.
        let mut other_repo = leaked.clone();
        if let Some(g) = other_repo.targets.guarded.as_mut() {
            g.image = Some("me/other:2.1".into());
        }
        let controls = Some(ServerGuard::Controls { controls: vec!["allowlist".into()] });
        let prints = [
            fingerprint(&leaked),
            fingerprint(&renamed(leaked.clone(), "other-seed")),
            fingerprint(&other_repo),
            fingerprint(&custom(Some(GuardedLayer::Server), controls, vec![FIRED; 5], Some(vec![FIRED; 5]))),
            fingerprint(&custom(
                Some(GuardedLayer::Boundary),
                None,
                vec![FIRED; 5],
                Some(vec![LegReading::Resisted; 5]),
            )),
            fingerprint(&kept()),
        ];
        for (i, a) in prints.iter().enumerate() {
            for b in &prints[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(repository("me/inbox:2.1"), "me/inbox");
        assert_eq!(repository("localhost:5000/me/inbox"), "localhost:5000/me/inbox");
        assert_eq!(repository("me/inbox@sha256:00"), "me/inbox");
    }

    #[test]
    fn without_lines_in_the_repository_a_result_has_a_logical_location_only() {
        let r = regressed();
        let log = sarif_log(&[SarifFinding { report: &r, locations: &[] }], &TOOL, &SarifOptions::default());
        let location = &log["runs"][0]["results"][0]["locations"][0];
        assert!(location.get("physicalLocation").is_none(), "{location}");
        assert_eq!(location["logicalLocations"][0]["name"], "read_note");
    }
}
