//! SARIF 2.1.0 of one or more validation reports: one rule per seed, one result per report.
//!
//! Each result carries the differential proof in its message (worded for the guarded side
//! that was used), the claim the verdict earns, a logical location naming the tool the
//! weakness sits in (and a physical one at the seed file when it is known), a stable
//! partial fingerprint, and `properties {verdict, weakness, evidenceTier, kept,
//! guardedTwinLayer, …}`. The output is validated in the tests against the official SARIF
//! 2.1.0 JSON Schema (`core/tests/data/sarif-schema-2.1.0.json`).

use serde_json::{Map, Value, json};

use super::report::ValidationReport;
use super::verdict::{GuardedLayer, Verdict};
use crate::format::seed::Weakness;
use crate::format::sha256_hex;

/// The SARIF version written.
pub const SARIF_VERSION: &str = "2.1.0";
/// The `$schema` written.
pub const SARIF_SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The partial fingerprint's key.
pub const FINGERPRINT_KEY: &str = "elengtisSeedLocus/v1";

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

/// The SARIF level of a verdict: KEPT `error`, STABLE, NOT PROVEN `warning`, REJECTED `note`.
pub fn level(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Kept => "error",
        Verdict::StableNotProven => "warning",
        Verdict::Rejected => "note",
        Verdict::NotTested => "none",
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

/// The result message: the differential proof, the verdict and the claim.
pub fn message(report: &ValidationReport) -> String {
    let v = &report.legs.vulnerable.counts;
    let proof = match (&report.legs.guarded, report.guarded_twin_layer) {
        (Some(g), layer) => {
            let side = match layer {
                Some(GuardedLayer::Boundary) => "the target behind the boundary control",
                Some(GuardedLayer::Network) => "the target behind the network egress proxy",
                Some(GuardedLayer::Server) | None => "the guarded build",
            };
            format!(
                "Differential proof: fired {}/{} on the vulnerable build, resisted {}/{} on {side}",
                v.fires(),
                v.runs,
                g.counts.resisted,
                g.counts.runs
            )
        }
        (None, _) => {
            format!("Reproduction only: fired {}/{} on the vulnerable build; no guarded side", v.fires(), v.runs)
        }
    };
    let rewrites = match &report.metamorphic {
        Some(meta) => format!("metamorphic rewrites held {}/{}", meta.held, meta.total),
        None => "metamorphic stage not run".to_owned(),
    };
    let mut text = format!("{proof}; {} {rewrites}; {}: {}.", report.weakness, report.verdict_label, report.claim);
    if !report.reasons.is_empty() {
        text.push_str(" Reasons: ");
        text.push_str(&report.reasons.join("; "));
        text.push('.');
    }
    text
}

fn rule(report: &ValidationReport) -> Value {
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
        "defaultConfiguration": {"level": "error"},
        "properties": {
            "tags": tags(report),
            "security-severity": security_severity(report.weakness),
            "weakness": report.weakness.as_str(),
            "compliance": report.compliance,
        },
    })
}

fn result(report: &ValidationReport, rule_index: usize) -> Value {
    let mut location = Map::new();
    if let Some(file) = &report.seed_file {
        location
            .insert("physicalLocation".into(), json!({"artifactLocation": {"uri": file}, "region": {"startLine": 1}}));
    }
    location.insert(
        "logicalLocations".into(),
        json!([{
            "name": report.tool,
            "fullyQualifiedName": format!("{}.{}", report.tool, report.field),
            "kind": "function",
        }]),
    );
    let fingerprint =
        sha256_hex(format!("{}|{}|{}|{}", report.seed, report.weakness, report.tool, report.field).as_bytes());
    json!({
        "ruleId": report.seed,
        "ruleIndex": rule_index,
        "level": level(report.verdict),
        "message": {"text": message(report)},
        "locations": [Value::Object(location)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        "properties": {
            "verdict": report.verdict_label,
            "weakness": report.weakness.as_str(),
            "evidenceTier": report.evidence_tier.map(|t| t.as_str()),
            "kept": report.kept,
            "guardedTwinLayer": report.guarded_twin_layer.map(GuardedLayer::as_str),
            "reproducibility": report.reproducibility,
            "claim": report.claim,
            "model": report.model,
            "tags": tags(report),
            "security-severity": security_severity(report.weakness),
        },
    })
}

/// The SARIF 2.1.0 log of `reports`: one run, one rule per distinct seed (first report
/// wins), one result per report.
pub fn sarif_log(reports: &[ValidationReport], tool: &SarifTool<'_>) -> Value {
    let mut rules: Vec<Value> = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    let mut results = Vec::new();
    for report in reports {
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
    use crate::prove::report::tests::{kept, report};

    /// The official SARIF 2.1.0 JSON Schema (see `core/tests/data/README.md`).
    const SARIF_SCHEMA: &str = include_str!("../../tests/data/sarif-schema-2.1.0.json");

    const TOOL: SarifTool<'static> =
        SarifTool { name: "elengtis", version: "0.1.0", information_uri: "https://example.com/elengtis" };

    fn errors(log: &Value) -> Vec<String> {
        let schema: Value = serde_json::from_str(SARIF_SCHEMA).expect("the schema is JSON");
        let validator =
            jsonschema::options().should_validate_formats(true).build(&schema).expect("the schema compiles");
        validator.iter_errors(log).map(|e| format!("{}: {e}", e.instance_path())).collect()
    }

    fn logs() -> Vec<Value> {
        let stable = report(vec![LegReading::Fired { tier: EvidenceTier::Trace }; 5], None);
        let rejected = report(vec![LegReading::Resisted; 5], Some(vec![LegReading::Resisted; 5]));
        vec![sarif_log(&[kept()], &TOOL), sarif_log(&[kept(), stable, rejected], &TOOL), sarif_log(&[], &TOOL)]
    }

    #[test]
    fn the_log_validates_against_the_official_schema() {
        for log in logs() {
            let found = errors(&log);
            assert!(found.is_empty(), "{found:#?}\n{log:#}");
        }
    }

    #[test]
    fn the_schema_check_fails_when_a_required_property_is_removed() {
        let log = sarif_log(&[kept()], &TOOL);
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
    fn a_kept_result_says_its_proof_and_claim() {
        let log = sarif_log(&[kept()], &TOOL);
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
                "Differential proof: fired 5/5 on the vulnerable build, resisted 5/5 on the guarded build; \
                 W2 metamorphic rewrites held 7/7; KEPT: the guarded build's own safeguard — not the model — \
                 stopped the attack."
            ),
            "{text}"
        );
        assert_eq!(result["locations"][0]["logicalLocations"][0]["name"], "read_note");
        assert_eq!(
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "scenarios/seeds/note-forward-direct.seed.yaml"
        );
        assert_eq!(result["partialFingerprints"][FINGERPRINT_KEY].as_str().map(str::len), Some(64));
        let p = &result["properties"];
        assert_eq!(
            (&p["verdict"], &p["weakness"], &p["evidenceTier"], &p["kept"], &p["guardedTwinLayer"]),
            (&json!("KEPT"), &json!("W2"), &json!("state"), &json!(true), &json!("server"))
        );
    }

    #[test]
    fn one_rule_per_seed_and_levels_follow_the_verdict() {
        let log = &logs()[1];
        assert_eq!(log["runs"][0]["tool"]["driver"]["rules"].as_array().map(Vec::len), Some(1));
        let levels: Vec<&str> =
            log["runs"][0]["results"].as_array().unwrap().iter().filter_map(|r| r["level"].as_str()).collect();
        assert_eq!(levels, ["error", "warning", "note"]);
        let stable = log["runs"][0]["results"][1]["message"]["text"].as_str().unwrap();
        assert!(
            stable.starts_with("Reproduction only: fired 5/5 on the vulnerable build; no guarded side"),
            "{stable}"
        );
        let rejected = log["runs"][0]["results"][2]["message"]["text"].as_str().unwrap();
        assert!(rejected.contains("the vulnerable side never fired (0/5 runs)"), "{rejected}");
        assert_eq!(log["runs"][0]["results"][2]["properties"]["evidenceTier"], Value::Null);
    }
}
