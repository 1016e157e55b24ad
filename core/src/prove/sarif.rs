//! SARIF 2.1.0 of one or more validation reports: one rule per seed, one result per report.
//!
//! Written for a code-scanning user who trusts what an alert says:
//!
//! - only a finding that was kept (KEPT, or STABLE, NOT PROVEN) is an alert with a
//!   `security-severity`; a REJECTED or NOT TESTED finding is left out, or — with
//!   [`SarifOptions::include_undecided`] (`--sarif-include-rejected`) — written at level `none`
//!   with no `security-severity` on its result or its rule;
//! - the message states the verdict first, then the claim, then the differential proof worded
//!   for the sides that actually ran (never "vulnerable build" for a target of your own);
//! - the partial fingerprint binds the seed, the weakness locus and the target's identity (its
//!   image id, else its command line as written), so the same seed against two targets is two
//!   alerts;
//! - the seed file's location is relative to `%SRCROOT%` (a `uriBaseId`), never the
//!   working directory;
//! - `properties` name the target (id, image id, runtime, command) and link every leg's
//!   evidence file (relative to the SARIF file's directory).
//!
//! The output is validated in the tests against the official SARIF 2.1.0 JSON Schema
//! (`core/tests/data/sarif-schema-2.1.0.json`) and GitHub's documented upload rules.

use serde_json::{Map, Value, json};

use super::report::{TargetIdentity, ValidationReport};
use super::verdict::{GuardedLayer, ServerGuard, Verdict};
use crate::format::seed::Weakness;
use crate::format::sha256_hex;

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
/// The `$schema` written.
pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The partial fingerprint's key.
pub const FINGERPRINT_KEY: &str = "elengtisSeedLocusTarget/v2";
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
    /// Write REJECTED and NOT TESTED findings too, at level `none` without a
    /// `security-severity` (default: left out; they are not alerts).
    pub include_undecided: bool,
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

/// Whether a verdict is an alert: a kept finding (KEPT or STABLE, NOT PROVEN).
pub fn is_alert(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Kept | Verdict::StableNotProven)
}

/// The SARIF level of a verdict: KEPT `error`, STABLE, NOT PROVEN `warning`, REJECTED and
/// NOT TESTED `none` (not a problem that was shown).
pub fn level(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Kept => "error",
        Verdict::StableNotProven => "warning",
        Verdict::Rejected | Verdict::NotTested => "none",
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

/// The result message: the verdict first, the claim, then the differential proof, the
/// rewrites and the reasons.
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
    let mut text = format!("{}: {}. {proof}; {} {rewrites}.", report.verdict_label, report.claim, report.weakness);
    if !report.reasons.is_empty() {
        text.push_str(" Reasons: ");
        text.push_str(&report.reasons.join("; "));
        text.push('.');
    }
    text
}

fn rule(report: &ValidationReport) -> Value {
    let mut properties = json!({
        "tags": tags(report),
        "weakness": report.weakness.as_str(),
        "compliance": report.compliance,
    });
    if is_alert(report.verdict) {
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
        "defaultConfiguration": {"level": level(report.verdict)},
        "properties": properties,
    })
}

/// A location relative to the repository the scan ran in: a relative path with no `..`
/// (an absolute path or one outside the working directory has none).
fn repository_uri(file: &str) -> Option<String> {
    let path = std::path::Path::new(file);
    let relative = path.is_relative()
        && path.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    relative.then(|| path.components().filter_map(|c| c.as_os_str().to_str()).collect::<Vec<_>>().join("/"))
}

/// The fingerprint of a finding: the seed, its locus and the target it was proven against.
pub fn fingerprint(report: &ValidationReport) -> String {
    let target = report.targets.vulnerable.as_ref().map(TargetIdentity::fingerprint).unwrap_or_default();
    sha256_hex(format!("{}|{}|{}|{}|{target}", report.seed, report.weakness, report.tool, report.field).as_bytes())
}

fn legs(report: &ValidationReport) -> Value {
    let side = |runs: &[super::leg::LegRun]| -> Vec<Value> {
        runs.iter()
            .map(|r| {
                json!({
                    "reading": r.reading.label(super::leg::Side::Vulnerable),
                    "evidence": r.evidence.as_ref().map(|e| format!("{}/{e}", report.seed)),
                })
            })
            .collect()
    };
    json!({
        "vulnerable": side(&report.legs.vulnerable.runs),
        "guarded": report.legs.guarded.as_ref().map(|g| side(&g.runs)),
    })
}

fn result(report: &ValidationReport, rule_index: usize) -> Value {
    let mut location = Map::new();
    if let Some(uri) = report.seed_file.as_deref().and_then(repository_uri) {
        location.insert(
            "physicalLocation".into(),
            json!({"artifactLocation": {"uri": uri, "uriBaseId": SRCROOT}, "region": {"startLine": 1}}),
        );
    }
    location.insert(
        "logicalLocations".into(),
        json!([{
            "name": report.tool,
            "fullyQualifiedName": format!("{}.{}", report.tool, report.field),
            "kind": "function",
        }]),
    );
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
        "targets": report.targets,
        "legs": legs(report),
    });
    if is_alert(report.verdict) {
        properties["security-severity"] = json!(security_severity(report.weakness));
    }
    json!({
        "ruleId": report.seed,
        "ruleIndex": rule_index,
        "level": level(report.verdict),
        "message": {"text": message(report)},
        "locations": [Value::Object(location)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint(report)},
        "properties": properties,
    })
}

/// The SARIF 2.1.0 log of `reports`: one run, one rule per distinct seed (first written
/// report wins), one result per written report; REJECTED and NOT TESTED findings only with
/// [`SarifOptions::include_undecided`].
pub fn sarif_log(reports: &[ValidationReport], tool: &SarifTool<'_>, options: &SarifOptions) -> Value {
    let mut rules: Vec<Value> = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    let mut results = Vec::new();
    for report in reports.iter().filter(|r| options.include_undecided || is_alert(r.verdict)) {
        let index = match ids.iter().position(|id| *id == report.seed) {
            Some(index) => index,
            None => {
                ids.push(&report.seed);
                rules.push(rule(report));
                ids.len() - 1
            }
        };
        results.push(result(report, index));
    }
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

    /// The official SARIF 2.1.0 JSON Schema (see `core/tests/data/README.md`).
    const SARIF_SCHEMA: &str = include_str!("../../tests/data/sarif-schema-2.1.0.json");

    const TOOL: SarifTool<'static> =
        SarifTool { name: "elengtis", version: "0.1.0", information_uri: "https://example.com/elengtis" };

    const ALL: SarifOptions = SarifOptions { include_undecided: true };

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

    /// KEPT, STABLE, NOT PROVEN, REJECTED (decided resists) and NOT TESTED (nothing decided),
    /// each its own seed.
    fn four() -> Vec<ValidationReport> {
        let stable = renamed(report(vec![LegReading::Fired { tier: EvidenceTier::Trace }; 5], None), "stable");
        let rejected = renamed(report(vec![LegReading::Resisted; 5], Some(vec![LegReading::Resisted; 5])), "rejected");
        let nt = LegReading::NotTested { why: "never read".into() };
        let untested = renamed(report(vec![nt.clone(); 5], Some(vec![nt; 5])), "untested");
        assert_eq!(
            [stable.verdict, rejected.verdict, untested.verdict],
            [Verdict::StableNotProven, Verdict::Rejected, Verdict::NotTested]
        );
        vec![kept(), stable, rejected, untested]
    }

    fn logs() -> Vec<Value> {
        vec![
            sarif_log(&[kept()], &TOOL, &SarifOptions::default()),
            sarif_log(&four(), &TOOL, &SarifOptions::default()),
            sarif_log(&four(), &TOOL, &ALL),
            sarif_log(&[], &TOOL, &ALL),
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
    /// only with the `security` tag; partial fingerprints are strings; levels are SARIF's four.
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
                assert!(["none", "note", "warning", "error"].contains(&result["level"].as_str().unwrap_or_default()));
                assert!(severity_ok(result), "{result}");
                let locations = result["locations"].as_array().expect("locations");
                assert!(!locations.is_empty() && locations.len() <= 10);
                for l in locations {
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
        let log = sarif_log(&[kept()], &TOOL, &SarifOptions::default());
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

    #[test]
    fn a_kept_result_states_its_verdict_and_claim_first_then_its_proof() {
        let log = sarif_log(&[kept()], &TOOL, &SarifOptions::default());
        let driver = &log["runs"][0]["tool"]["driver"];
        assert_eq!(driver["name"], "elengtis");
        assert_eq!(driver["informationUri"], "https://example.com/elengtis");
        let rule = &driver["rules"][0];
        assert_eq!(rule["id"], "note-forward-direct");
        assert_eq!(rule["properties"]["security-severity"], "8.0");
        let tags: Vec<&str> = rule["properties"]["tags"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(tags, ["security", "W2", "indirect-injection-via-untrusted-content", "LLM01", "ASI01", "AML.T0051"]);
        let result = &log["runs"][0]["results"][0];
        assert_eq!(result["ruleId"], "note-forward-direct");
        assert_eq!(result["level"], "error");
        let text = result["message"]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "KEPT: the guarded build's own safeguard — not the model — stopped the attack. Differential proof: \
                 fired 5/5 on the vulnerable reference twin, resisted 5/5 on the guarded reference twin; W2 \
                 metamorphic rewrites held 7/7."
            ),
            "{text}"
        );
        assert_eq!(result["locations"][0]["logicalLocations"][0]["name"], "read_note");
        let artifact = &result["locations"][0]["physicalLocation"]["artifactLocation"];
        assert_eq!(artifact["uri"], "scenarios/seeds/note-forward-direct.seed.yaml");
        assert_eq!(artifact["uriBaseId"], "%SRCROOT%");
        assert_eq!(result["partialFingerprints"][FINGERPRINT_KEY].as_str().map(str::len), Some(64));
        let p = &result["properties"];
        assert_eq!(
            (&p["verdict"], &p["weakness"], &p["evidenceTier"], &p["kept"], &p["guardedTwinLayer"]),
            (&json!("KEPT"), &json!("W2"), &json!("state"), &json!(true), &json!("server"))
        );
        assert_eq!(p["security-severity"], "8.0");
    }

    #[test]
    fn rejected_and_not_tested_findings_are_left_out_or_carry_no_severity() {
        // By default only alerts: the kept and the stable finding.
        let log = sarif_log(&four(), &TOOL, &SarifOptions::default());
        let results = log["runs"][0]["results"].as_array().unwrap();
        let levels: Vec<&str> = results.iter().filter_map(|r| r["level"].as_str()).collect();
        assert_eq!(levels, ["error", "warning"]);
        let rules = log["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        // With --sarif-include-rejected: written at level none, no security-severity anywhere.
        let log = sarif_log(&four(), &TOOL, &ALL);
        let results = log["runs"][0]["results"].as_array().unwrap();
        let levels: Vec<&str> = results.iter().filter_map(|r| r["level"].as_str()).collect();
        assert_eq!(levels, ["error", "warning", "none", "none"]);
        let rules = log["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
        for i in [2, 3] {
            assert!(results[i]["properties"].get("security-severity").is_none(), "{}", results[i]);
            assert!(rules[i]["properties"].get("security-severity").is_none(), "{}", rules[i]);
            assert_eq!(rules[i]["defaultConfiguration"]["level"], "none");
        }
        let rejected = results[2]["message"]["text"].as_str().unwrap();
        assert!(rejected.starts_with("REJECTED: no claim"), "{rejected}");
        assert!(rejected.contains("the vulnerable side never fired (0/5 runs)"), "{rejected}");
        assert!(results[3]["message"]["text"].as_str().unwrap().starts_with("NOT TESTED: no claim"));
        assert_eq!(results[2]["properties"]["evidenceTier"], Value::Null);
    }

    fn custom(image_id: Option<&str>, command: &[&str]) -> ValidationReport {
        let mut r = kept();
        r.server_guard = Some(ServerGuard::Controls { controls: vec!["allowlist".into()] });
        r.targets = Targets {
            custom: true,
            vulnerable: Some(TargetIdentity {
                id: "inbox".into(),
                transport: "stdio".into(),
                image_id: image_id.map(str::to_owned),
                command: command.iter().map(|s| (*s).to_owned()).collect(),
                ..TargetIdentity::default()
            }),
            guarded: None,
        };
        r
    }

    #[test]
    fn a_custom_target_is_named_as_yours_and_fingerprints_differ_across_targets() {
        let r = custom(None, &["elengtis-inbox"]);
        let text = message(&r);
        assert!(!text.contains("vulnerable build") && !text.contains("reference twin"), "{text}");
        assert!(text.contains("fired 5/5 on your target `inbox` with its controls off"), "{text}");
        assert!(text.contains("resisted 5/5 on your target `inbox` with its controls on (allowlist)"), "{text}");
        let log = sarif_log(std::slice::from_ref(&r), &TOOL, &SarifOptions::default());
        assert_eq!(log["runs"][0]["results"][0]["properties"]["targets"]["vulnerable"]["id"], "inbox");
        // The same seed against another command, another image, or the twins: another alert.
        let prints = [
            fingerprint(&r),
            fingerprint(&custom(None, &["other-server"])),
            fingerprint(&custom(Some("sha256:1"), &[])),
            fingerprint(&custom(Some("sha256:2"), &[])),
            fingerprint(&kept()),
        ];
        for (i, a) in prints.iter().enumerate() {
            for b in &prints[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The same target again: the same alert.
        assert_eq!(fingerprint(&r), fingerprint(&custom(None, &["elengtis-inbox"])));
    }

    #[test]
    fn a_seed_outside_the_repository_gets_no_physical_location() {
        for file in ["/tmp/x.seed.yaml", "../elsewhere/x.seed.yaml"] {
            let mut r = kept();
            r.seed_file = Some(file.into());
            let log = sarif_log(&[r], &TOOL, &SarifOptions::default());
            let location = &log["runs"][0]["results"][0]["locations"][0];
            assert!(location.get("physicalLocation").is_none(), "{location}");
            assert_eq!(location["logicalLocations"][0]["name"], "read_note");
        }
    }
}
