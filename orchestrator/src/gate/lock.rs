//! The lock file of a fixture directory (`gate.lock.json`): what its fixtures were recorded
//! from. `gate --record` writes it after a KEPT recording; `gate` refuses to replay a
//! directory whose lock is absent, unreadable, of another version, or pins a seed, scenario,
//! iteration count, twin or fixture format other than the ones in use (stale).

use std::path::{Path, PathBuf};

use elengtis_core::format::gate::LiveModel;
use serde::{Deserialize, Serialize};

use crate::model::fixtures;
use crate::results::store;

/// The lock's file name inside a fixture directory.
pub const FILE: &str = "gate.lock.json";
/// `format` of every lock file.
pub const FORMAT: &str = "elengtis-gate-lock";
/// Version of the lock format.
pub const VERSION: u32 = 1;

/// What a fixture directory was recorded from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] when written by this build.
    pub version: u32,
    /// The seed's id.
    pub seed: String,
    /// SHA-256 of the seed file.
    pub seed_sha256: String,
    /// SHA-256 of the seed's scenario file.
    pub scenario_sha256: String,
    /// Iterations of the repeat filter recorded.
    pub iterations: u32,
    /// Whether the metamorphic stage was recorded.
    pub metamorphic: bool,
    /// The model fixture format version ([`fixtures::VERSION`]).
    pub fixture_version: u32,
    /// The reference twin image the recording ran against.
    pub twin: String,
    /// The live model recorded (its base URL and key variable are not part of any key).
    pub model: LiveModel,
    /// The seed's LLM judge recorded, when it declares one: its answers are fixtures in the
    /// same directory, and a changed rubric or judge model needs a new recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<LockedJudge>,
    /// Fixture files written.
    pub fixtures: usize,
    /// The build that recorded them.
    pub recorded_with: String,
    /// When (RFC 3339, UTC).
    pub recorded_at: String,
}

/// The judge a recording asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedJudge {
    /// SHA-256 of the rubric's text.
    pub rubric_sha256: String,
    /// The judge's model (without its base URL).
    pub model: LiveModel,
    /// Calls per run.
    pub k: u32,
}

/// What the lock is checked against.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The seed's id.
    pub seed: &'a str,
    /// SHA-256 of the seed file.
    pub seed_sha256: &'a str,
    /// SHA-256 of the scenario file.
    pub scenario_sha256: &'a str,
    /// The gate's iterations.
    pub iterations: u32,
    /// The twin image in use.
    pub twin: &'a str,
    /// The seed's judge as it would be asked now (`None`: the seed declares none).
    pub judge: Option<&'a LockedJudge>,
}

/// Read the lock of `dir`.
///
/// # Errors
///
/// A message naming the file and what is wrong with it.
pub fn read(dir: &Path) -> Result<Lock, String> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{} is missing: the fixtures were never recorded (or not kept)", path.display()));
        }
        Err(e) => return Err(format!("failed to read {}: {e}", path.display())),
    };
    let raw: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is corrupt: not JSON: {e}", path.display()))?;
    if raw["format"] != FORMAT {
        return Err(format!("{} is corrupt: `format` is {}, expected \"{FORMAT}\"", path.display(), raw["format"]));
    }
    if raw["version"] != VERSION {
        return Err(format!(
            "{} has lock version {}, this build reads {VERSION}: the fixtures come from another version",
            path.display(),
            raw["version"]
        ));
    }
    serde_json::from_value(raw).map_err(|e| format!("{} is corrupt: {e}", path.display()))
}

/// Write `lock` into `dir` (atomically).
///
/// # Errors
///
/// A message naming the file.
pub fn write(dir: &Path, lock: &Lock) -> Result<(), String> {
    let path = dir.join(FILE);
    store::write_json_atomic(&path, lock).map_err(|e| format!("failed to write {}: {e}", path.display()))
}

/// Every way the lock disagrees with what is in use (empty: current).
pub fn stale(lock: &Lock, expected: &Expected<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let differs = |found: &mut Vec<String>, what: &str, recorded: &str, now: &str| {
        if recorded != now {
            found.push(format!("{what} changed since the recording (recorded {recorded}, now {now})"));
        }
    };
    differs(&mut found, "the seed id", &lock.seed, expected.seed);
    differs(&mut found, "the seed file", &short(&lock.seed_sha256), &short(expected.seed_sha256));
    differs(&mut found, "the scenario file", &short(&lock.scenario_sha256), &short(expected.scenario_sha256));
    differs(&mut found, "the iterations", &lock.iterations.to_string(), &expected.iterations.to_string());
    differs(&mut found, "the model fixture format", &lock.fixture_version.to_string(), &fixtures::VERSION.to_string());
    differs(&mut found, "the reference twin", &lock.twin, expected.twin);
    match (&lock.judge, expected.judge) {
        (None, None) => {}
        (Some(_), None) => found.push("the seed no longer declares the LLM judge the recording asked".into()),
        (None, Some(_)) => found.push("the seed declares an LLM judge the recording never asked".into()),
        (Some(recorded), Some(now)) => {
            differs(&mut found, "the judge's rubric", &short(&recorded.rubric_sha256), &short(&now.rubric_sha256));
            if recorded.model != now.model {
                found.push(format!(
                    "the judge's model changed since the recording (recorded {}, now {})",
                    recorded.model.label(),
                    now.model.label()
                ));
            }
            differs(&mut found, "the judge's calls per run (k)", &recorded.k.to_string(), &now.k.to_string());
        }
    }
    found
}

/// The judge of `seed` as a lock pins it (its model without the base URL), when it declares
/// one with a model.
pub fn judge_of(seed: &elengtis_core::format::seed::Seed) -> Option<LockedJudge> {
    let judge = seed.judge.as_ref()?;
    let mut model = judge.model.clone()?;
    if let Some(provider) = model.provider.as_mut() {
        provider.base_url = None;
    }
    Some(LockedJudge {
        rubric_sha256: elengtis_core::format::sha256_hex(judge.rubric.as_bytes()),
        model,
        k: judge.calls(),
    })
}

fn short(hash: &str) -> String {
    format!("sha256 {}", hash.get(..12).unwrap_or(hash))
}

/// The fixture files of `dir` (every `*.json` but the lock), sorted.
///
/// # Errors
///
/// A message naming the directory.
pub fn fixture_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("failed to list {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.file_name().is_some_and(|n| n != FILE))
        .collect();
    files.sort();
    Ok(files)
}

/// Check every fixture file of `dir` before a replay: each must read as a fixture of this
/// version whose key matches its content, and there must be as many as the lock counted.
pub fn check_files(dir: &Path, lock: &Lock) -> Vec<String> {
    let files = match fixture_files(dir) {
        Ok(files) => files,
        Err(e) => return vec![e],
    };
    let mut found = Vec::new();
    if files.len() < lock.fixtures {
        found.push(format!(
            "{} holds {} fixtures, the recording wrote {}: {} missing",
            dir.display(),
            files.len(),
            lock.fixtures,
            lock.fixtures - files.len()
        ));
    }
    for file in files {
        let Some(key) = file.file_stem().and_then(|s| s.to_str()) else { continue };
        if let Err(problem) = fixtures::read(dir, key) {
            found.push(problem.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> Lock {
        Lock {
            format: FORMAT.into(),
            version: VERSION,
            seed: "s".into(),
            seed_sha256: "a".repeat(64),
            scenario_sha256: "b".repeat(64),
            iterations: 3,
            metamorphic: true,
            fixture_version: fixtures::VERSION,
            twin: "elengtis/twin:1".into(),
            model: LiveModel {
                model: "m".into(),
                provider: None,
                provider_route: None,
                generation: Default::default(),
                model_id: None,
            },
            judge: None,
            fixtures: 0,
            recorded_with: "elengtis test".into(),
            recorded_at: "2026-12-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn a_lock_round_trips_and_names_each_stale_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), &lock()).expect("write");
        let read_back = read(dir.path()).expect("read");
        assert_eq!(read_back, lock());
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let current = Expected {
            seed: "s",
            seed_sha256: &a,
            scenario_sha256: &b,
            iterations: 3,
            twin: "elengtis/twin:1",
            judge: None,
        };
        assert!(stale(&read_back, &current).is_empty());
        let c = "c".repeat(64);
        let edited = Expected { seed_sha256: &c, iterations: 5, twin: "elengtis/twin:2", ..current };
        let found = stale(&read_back, &edited).join("\n");
        for what in ["the seed file", "the iterations", "the reference twin"] {
            assert!(found.contains(what), "{what} not in {found}");
        }
        // The judge: a changed rubric and a changed model are each named.
        let judge = LockedJudge { rubric_sha256: "d".repeat(64), model: lock().model, k: 3 };
        let judged = Lock { judge: Some(judge.clone()), ..lock() };
        assert!(stale(&judged, &Expected { judge: Some(&judge), ..current }).is_empty());
        let rubric = LockedJudge { rubric_sha256: "e".repeat(64), ..judge.clone() };
        let found = stale(&judged, &Expected { judge: Some(&rubric), ..current }).join("\n");
        assert!(found.contains("the judge's rubric changed since the recording"), "{found}");
        let model = LockedJudge { model: LiveModel { model: "judge-2".into(), ..lock().model }, ..judge.clone() };
        let found = stale(&judged, &Expected { judge: Some(&model), ..current }).join("\n");
        assert!(
            found.contains(
                "the judge's model changed since the recording (recorded openrouter/m, now openrouter/judge-2)"
            ),
            "{found}"
        );
        let found = stale(&judged, &current).join("\n");
        assert!(found.contains("no longer declares the LLM judge"), "{found}");
    }

    #[test]
    fn missing_corrupt_and_other_version_locks_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read(dir.path()).expect_err("missing").contains("never recorded"));
        std::fs::write(dir.path().join(FILE), "{").expect("write");
        assert!(read(dir.path()).expect_err("corrupt").contains("not JSON"));
        let mut value = serde_json::to_value(lock()).expect("json");
        value["version"] = 99.into();
        std::fs::write(dir.path().join(FILE), value.to_string()).expect("write");
        assert!(read(dir.path()).expect_err("version").contains("lock version 99"));
    }

    #[test]
    fn fixture_files_are_checked_one_by_one_and_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("0123.json"), "not json").expect("write");
        let mut counted = lock();
        counted.fixtures = 3;
        let found = check_files(dir.path(), &counted).join("\n");
        assert!(found.contains("2 missing"), "{found}");
        assert!(found.contains("0123") && found.contains("corrupt"), "{found}");
    }
}
