//! Recorded model exchanges (`--record-fixtures DIR`) and their keys.
//!
//! A fixture is one request's final answer — the response body as the provider sent it (a
//! JSON document, or the raw event stream), its status, or the failure that ended the request
//! — in `DIR/<key>.json`. The key is the SHA-256 of a canonical JSON document (sorted keys,
//! compact) of the *key material*: the fixture format version, the provider kind, the model,
//! the campaign's generation settings, the conversation and the offered tools (both in the
//! runner's OpenAI shape) and the trial's index (`sample`: trial *k* of a run replays trial
//! *k*'s answers, so a stochastic model's recorded variation is kept).
//!
//! Values that differ per trial by design are *normalised*: the runner's values (canary,
//! trial directory, collector, results directory, attempt id, sink URL and record id) are
//! replaced by placeholders (`{{elengtis:canary}}`, …) in the key material and in the
//! stored request and response, and put back with the replaying trial's values; network
//! addresses with a port (`127.0.0.1:40123`, `localhost:8000`, `[::1]:8080`) read
//! `{{elengtis:address}}` in the key material only. A fresh run of the same campaign so finds
//! its fixtures, and a replayed answer carries that run's canary.

use std::path::{Path, PathBuf};

use elengtis_core::refs::Values;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

/// `format` of every fixture file.
pub const FORMAT: &str = "elengtis-model-fixture";

/// Version of the fixture format and of the key material; a fixture of another version is
/// refused (never reinterpreted).
pub const VERSION: u32 = 1;

/// Runner values normalised in fixtures, longest first when replaced.
const NORMALISED: &[&str] =
    &["canary", "trial_dir", "collector", "evidence_dir", "attempt_id", "sink_url", "sink_requests", "network_gateway"];

/// Whether a run records, replays, or neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FixtureMode {
    /// Live requests, nothing recorded.
    #[default]
    Off,
    /// Live requests, each final answer written into the directory.
    Record(PathBuf),
    /// No requests: answers come from the directory; a miss is a provider error.
    Replay(PathBuf),
}

/// The final outcome of a request, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] when written by this build.
    pub version: u32,
    /// The key (also the file name).
    pub key: String,
    /// What the key hashes (normalised), for a reader comparing a miss with its neighbours.
    pub material: Value,
    /// Provider kind.
    pub provider: String,
    /// Model as sent.
    pub model: String,
    /// The request body as sent (normalised).
    pub request: Value,
    /// HTTP status of the final attempt, when an answer came.
    pub status: Option<u16>,
    /// Its body (normalised): the JSON document, or the text when it is not JSON (streams).
    pub response: Value,
    /// The failure that ended the request, when it failed: the error kind and detail.
    pub error: Option<RecordedFailure>,
    /// When it was recorded (RFC 3339, UTC).
    pub recorded_at: String,
}

/// A request's failure, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedFailure {
    /// [`super::ModelErrorKind`] name.
    pub kind: String,
    /// The error's detail (normalised).
    pub detail: String,
}

/// Why a fixture cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FixtureProblem {
    /// No file for the key.
    #[error("failed to replay: no fixture {key} ({})", .path.display())]
    Missing {
        /// The key.
        key: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file is unreadable, not a fixture, or its key does not match its content.
    #[error("failed to replay: fixture {key} ({}) is corrupt: {detail}", .path.display())]
    Corrupt {
        /// The key.
        key: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The file has another format version.
    #[error(
        "failed to replay: fixture {key} ({}) has format version {found}, this build reads {VERSION}; record the fixtures again",
        .path.display()
    )]
    Version {
        /// The key.
        key: String,
        /// The file.
        path: PathBuf,
        /// Its version.
        found: String,
    },
}

/// Replaces a trial's own values by placeholders, and back.
#[derive(Debug, Clone, Default)]
pub struct Normaliser {
    /// (placeholder, the trial's value), longest value first.
    pairs: Vec<(String, String)>,
}

impl Normaliser {
    /// The normaliser of a trial's runner values.
    pub fn new(values: &Values) -> Self {
        let mut pairs: Vec<(String, String)> = NORMALISED
            .iter()
            .filter_map(|name| match values.runner.get(*name) {
                Some(Value::String(s)) if s.len() >= 4 => Some((format!("{{{{elengtis:{name}}}}}"), s.clone())),
                _ => None,
            })
            .collect();
        pairs.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        Normaliser { pairs }
    }

    /// `text` with the trial's values replaced by placeholders.
    pub fn normalise_str(&self, text: &str) -> String {
        self.pairs.iter().fold(text.to_owned(), |t, (placeholder, actual)| t.replace(actual, placeholder))
    }

    /// `text` with placeholders replaced by the trial's values.
    pub fn restore_str(&self, text: &str) -> String {
        self.pairs.iter().fold(text.to_owned(), |t, (placeholder, actual)| t.replace(placeholder, actual))
    }

    /// Every string in `value` normalised.
    pub fn normalise(&self, value: &Value) -> Value {
        map_strings(value, &|s| self.normalise_str(s))
    }

    /// Every string in `value` restored.
    pub fn restore(&self, value: &Value) -> Value {
        map_strings(value, &|s| self.restore_str(s))
    }
}

fn map_strings(value: &Value, f: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(f(s)),
        Value::Array(items) => Value::Array(items.iter().map(|v| map_strings(v, f)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), map_strings(v, f))).collect()),
        other => other.clone(),
    }
}

/// `text` with every `host:port` address replaced (IPv4, `localhost`, bracketed IPv6).
fn without_addresses(text: &str) -> String {
    static PATTERN: std::sync::OnceLock<Option<fancy_regex::Regex>> = std::sync::OnceLock::new();
    let pattern = PATTERN.get_or_init(|| {
        fancy_regex::Regex::new(r"(?:\b\d{1,3}(?:\.\d{1,3}){3}|\blocalhost|\[[0-9A-Fa-f:.]+\]):\d{1,5}\b").ok()
    });
    match pattern {
        Some(re) => re.replace_all(text, "{{elengtis:address}}").into_owned(),
        None => text.to_owned(),
    }
}

/// What one request's key hashes.
#[derive(Debug, Clone, Copy)]
pub struct KeyInputs<'a> {
    /// Provider kind.
    pub provider: &'a str,
    /// Model.
    pub model: &'a str,
    /// The campaign's generation settings (with `route` from `provider_route`).
    pub generation: &'a Map<String, Value>,
    /// The conversation.
    pub messages: &'a [Value],
    /// The offered tools.
    pub tools: &'a [Value],
    /// The trial's index.
    pub sample: u32,
}

/// The normalised key material of a request.
pub fn material(inputs: KeyInputs<'_>, normaliser: &Normaliser) -> Value {
    let raw = json!({
        "version": VERSION,
        "provider": inputs.provider,
        "model": inputs.model,
        "generation": inputs.generation,
        "messages": inputs.messages,
        "tools": inputs.tools,
        "sample": inputs.sample,
    });
    map_strings(&normaliser.normalise(&raw), &without_addresses)
}

/// The key of key material: SHA-256 (hex) of its canonical JSON.
pub fn key(material: &Value) -> String {
    let digest = Sha256::digest(canonical(material).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compact JSON with object keys sorted at every level (the core's canonical form).
pub fn canonical(value: &Value) -> String {
    String::from_utf8_lossy(&elengtis_core::format::canonical_json(value)).into_owned()
}

/// The file of `key` in `dir`.
pub fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.json"))
}

/// Write a fixture atomically (a temporary file renamed into place).
pub fn write(dir: &Path, fixture: &Fixture) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("failed to record fixture {} in {}: {e}", fixture.key, dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let text =
        serde_json::to_string_pretty(fixture).map_err(|e| format!("failed to record fixture {}: {e}", fixture.key))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, (text + "\n").as_bytes()).map_err(fail)?;
    // Fixtures are committed and replayed by other users (the tool image runs as 65534):
    // world-readable, as a checkout would make them; synced before the rename.
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path(dir, &fixture.key)).map_err(|e| fail(e.error))?;
    Ok(())
}

/// Read the fixture of `key`: missing, corrupt (unreadable, not a fixture, or a key that is
/// not the hash of its material) and other versions are refused, naming the key.
pub fn read(dir: &Path, key: &str) -> Result<Fixture, FixtureProblem> {
    let file = path(dir, key);
    let corrupt = |detail: String| FixtureProblem::Corrupt { key: key.to_owned(), path: file.clone(), detail };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(FixtureProblem::Missing { key: key.to_owned(), path: file });
        }
        Err(e) => return Err(corrupt(e.to_string())),
    };
    let raw: Value = serde_json::from_str(&text).map_err(|e| corrupt(format!("not JSON: {e}")))?;
    if raw["format"] != FORMAT {
        return Err(corrupt(format!("`format` is {}, expected \"{FORMAT}\"", raw["format"])));
    }
    if raw["version"] != VERSION {
        return Err(FixtureProblem::Version { key: key.to_owned(), path: file, found: raw["version"].to_string() });
    }
    let fixture: Fixture = serde_json::from_value(raw).map_err(|e| corrupt(format!("not a fixture: {e}")))?;
    if fixture.key != key || self::key(&fixture.material) != key {
        return Err(corrupt("its key does not match its content".to_owned()));
    }
    Ok(fixture)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(canary: &str, dir: &str) -> Values {
        let mut v = Values::default();
        v.runner.insert("canary".into(), json!(canary));
        v.runner.insert("trial_dir".into(), json!(dir));
        v.runner.insert("collector".into(), json!(format!("{dir}/collector.jsonl")));
        v.runner.insert("trial_id".into(), json!("t--s--0"));
        v
    }

    fn inputs<'a>(messages: &'a [Value], generation: &'a Map<String, Value>) -> KeyInputs<'a> {
        KeyInputs { provider: "openai_compatible", model: "m", generation, messages, tools: &[], sample: 0 }
    }

    #[test]
    fn per_trial_values_and_addresses_do_not_change_the_key() {
        let generation = Map::new();
        let a = Normaliser::new(&values("ELENGTIS-aaaa", "/tmp/elengtis-trial-1"));
        let b = Normaliser::new(&values("ELENGTIS-bbbb", "/tmp/elengtis-trial-2"));
        let m = |canary: &str, dir: &str, port: u16| {
            vec![
                json!({"role": "tool", "content": format!("{canary} in {dir}/collector.jsonl via http://127.0.0.1:{port}/x")}),
            ]
        };
        let ka = key(&material(inputs(&m("ELENGTIS-aaaa", "/tmp/elengtis-trial-1", 40000), &generation), &a));
        let kb = key(&material(inputs(&m("ELENGTIS-bbbb", "/tmp/elengtis-trial-2", 41234), &generation), &b));
        assert_eq!(ka, kb);
        let mat = material(inputs(&m("ELENGTIS-aaaa", "/tmp/elengtis-trial-1", 40000), &generation), &a);
        assert_eq!(
            mat["messages"][0]["content"],
            "{{elengtis:canary}} in {{elengtis:collector}} via http://{{elengtis:address}}/x"
        );
        let other = vec![json!({"role": "tool", "content": "something else"})];
        assert_ne!(ka, key(&material(inputs(&other, &generation), &a)));
        let mut sample = inputs(&other, &generation);
        sample.sample = 1;
        assert_ne!(key(&material(inputs(&other, &generation), &a)), key(&material(sample, &a)));
    }

    #[test]
    fn placeholders_are_restored_with_the_replaying_trials_values() {
        let recorded = Normaliser::new(&values("ELENGTIS-aaaa", "/tmp/d1"));
        let replaying = Normaliser::new(&values("ELENGTIS-bbbb", "/tmp/d2"));
        let body = json!({"arguments": "{\"credential\":\"ELENGTIS-aaaa\"}"});
        let stored = recorded.normalise(&body);
        assert_eq!(stored["arguments"], "{\"credential\":\"{{elengtis:canary}}\"}");
        assert_eq!(replaying.restore(&stored)["arguments"], "{\"credential\":\"ELENGTIS-bbbb\"}");
    }

    #[test]
    fn the_canonical_form_sorts_keys() {
        assert_eq!(
            canonical(&json!({"b": 1, "a": {"d": [1, {"f": 2, "e": 3}], "c": null}})),
            r#"{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}"#
        );
    }

    #[test]
    fn missing_corrupt_and_other_versions_are_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let material = json!({"version": VERSION, "x": 1});
        let k = key(&material);
        assert!(matches!(read(dir.path(), &k), Err(FixtureProblem::Missing { .. })));
        let fixture = Fixture {
            format: FORMAT.into(),
            version: VERSION,
            key: k.clone(),
            material,
            provider: "openai_compatible".into(),
            model: "m".into(),
            request: json!({}),
            status: Some(200),
            response: json!({"ok": true}),
            error: None,
            recorded_at: "2026-01-31T00:00:00Z".into(),
        };
        write(dir.path(), &fixture).unwrap();
        assert_eq!(read(dir.path(), &k).unwrap(), fixture);
        std::fs::write(path(dir.path(), &k), "{\"format\": \"elengtis-model-fixture\", \"vers").unwrap();
        let err = read(dir.path(), &k).unwrap_err();
        assert!(matches!(err, FixtureProblem::Corrupt { .. }) && err.to_string().contains(&k), "{err}");
        let mut other = serde_json::to_value(&fixture).unwrap();
        other["version"] = json!(99);
        std::fs::write(path(dir.path(), &k), other.to_string()).unwrap();
        assert!(matches!(read(dir.path(), &k), Err(FixtureProblem::Version { .. })));
        let mut tampered = serde_json::to_value(&fixture).unwrap();
        tampered["material"]["x"] = json!(2);
        std::fs::write(path(dir.path(), &k), tampered.to_string()).unwrap();
        assert!(read(dir.path(), &k).unwrap_err().to_string().contains("does not match"));
    }
}
