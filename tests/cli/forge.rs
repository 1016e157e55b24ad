//! Results a forger cannot rewrite silently: each attack of issue 28, made as an adversary
//! would on a copy of a real results directory, and what `verify`, `analyze`, `report` and
//! `run --resume` each make of it. They read a directory through one verification, so they
//! agree: a forged directory is refused by all four (or, where its format carries no chain,
//! read by `analyze` and `report` with a note and never verified or resumed). The table in
//! docs/results.md ("What each attack does and what catches it") is written from these cases.

use std::path::{Path, PathBuf};
use std::process::Output;

use elengtis_core::format::sha256_hex;
use elengtis_tests::{copy_tree, elengtis_cmd, read_json, scratch, stderr, stdout, workspace};
use serde_json::Value;

/// The HMAC secret the signed cases use (never written into the results).
pub(crate) const KEY: &str = "0f3c9a8e7d6b5a4938271605f4e3d2c1b0a9f8e7d6c5b4a3";

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `elengtis ARGS` with the environment's signing key set (`key`) or unset.
pub(crate) fn cmd(cwd: &Path, args: &[&str], key: Option<&str>) -> Output {
    let mut command = elengtis_cmd(cwd, args);
    command.env_remove("ELENGTIS_SIGNING_KEY").env_remove("ELENGTIS_SIGNING_KEY_FILE");
    if let Some(key) = key {
        command.env("ELENGTIS_SIGNING_KEY", key);
    }
    command.output().expect("run elengtis")
}

/// A finished support-note run of `trials` trials, signed with [`KEY`] when `signed`.
pub(crate) fn base(dir: &Path, trials: u32, signed: bool) -> PathBuf {
    let out = dir.join(if signed { "signed" } else { "base" });
    let output = cmd(dir, &["example", "--trials", &trials.to_string(), "--out", s(&out)], signed.then_some(KEY));
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    out
}

pub(crate) fn copy(dir: &Path, from: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    copy_tree(from, &to);
    to
}

pub(crate) fn lines(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("runs.jsonl"))
        .expect("read log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

/// Writes rows with their chain recomputed, as a forger who knows the format would.
pub(crate) fn write_rechained(out: &Path, rows: &[Value]) {
    let mut text = String::new();
    let mut previous = String::new();
    for row in rows {
        let mut row = row.clone();
        if row.get("prev_row_sha256").is_some() {
            row["prev_row_sha256"] = sha256_hex(previous.as_bytes()).into();
        }
        previous = serde_json::to_string(&row).expect("json");
        text.push_str(&previous);
        text.push('\n');
    }
    std::fs::write(out.join("runs.jsonl"), text).expect("write log");
}

pub(crate) fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).expect("json") + "\n").expect("write");
}

/// Rewrites evidence and re-pins it in its row (the row's `evidence_sha256`).
pub(crate) fn edit_evidence(out: &Path, rows: &mut [Value], index: usize, edit: impl FnOnce(&mut Value)) {
    let path = out.join(rows[index]["evidence"].as_str().expect("evidence"));
    let mut evidence = read_json(&path);
    edit(&mut evidence);
    let bytes = serde_json::to_vec_pretty(&evidence).expect("json");
    std::fs::write(&path, &bytes).expect("write evidence");
    if rows[index].get("evidence_sha256").is_some() {
        rows[index]["evidence_sha256"] = sha256_hex(&bytes).into();
    }
}

/// Recomputes `seal.json` without a key, as anyone can: what an unsigned seal cannot stop.
/// Moves `relative` out of the results directory `out` (beside it, with `extension`) and leaves
/// a symbolic link to it in its place.
fn link_from_outside(out: &Path, relative: &str, extension: &str) {
    let inside = out.join(relative);
    let outside = out.with_extension(extension);
    std::fs::rename(&inside, &outside).expect("move it out");
    std::os::unix::fs::symlink(&outside, &inside).expect("link it");
}

fn reseal(out: &Path) {
    let path = out.join("seal.json");
    let mut seal = read_json(&path);
    let text = std::fs::read_to_string(out.join("runs.jsonl")).expect("log");
    let last = text.lines().last().unwrap_or_default();
    let manifest = read_json(&out.join("manifest.json"));
    seal["rows"] = text.lines().count().into();
    seal["prev_row_sha256"] = sha256_hex(last.as_bytes()).into();
    seal["recorded_campaign_sha256"] = manifest["configuration"]["recorded_campaign_sha256"].clone();
    let resumes = seal["resumes"].as_u64().unwrap_or(0);
    seal["manifest_sha256"] = elengtis_core::records::seal::manifest_sha256(&manifest, resumes).into();
    seal.as_object_mut().expect("object").remove("signatures");
    write_json(&path, &seal);
}

/// What each of the four commands must do with a forged directory.
#[derive(Debug, Clone, Copy)]
struct Expect {
    /// `verify`'s exit code.
    verify: i32,
    /// `analyze`'s and `report`'s (0: read, with a note when unverifiable).
    readers: i32,
    /// `run --resume`'s.
    resume: i32,
    /// What `verify` says (stdout and stderr).
    says: &'static str,
}

const REFUSED: Expect = Expect { verify: 4, readers: 4, resume: 4, says: "" };
const MALFORMED: Expect = Expect { verify: 3, readers: 3, resume: 4, says: "" };
const UNVERIFIABLE: Expect = Expect { verify: 10, readers: 0, resume: 4, says: "" };
const ACCEPTED: Expect = Expect { verify: 0, readers: 0, resume: 0, says: "" };

/// Runs the four commands on `case` (with the signing key in the environment when `key`) and
/// checks each against `expect`; `resume` last, as it may write. Panics with every mismatch.
fn assert_four(dir: &Path, name: &str, case: &Path, key: Option<&str>, expect: Expect) {
    let failures = four(dir, name, case, key, expect);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// [`assert_four`]'s checks, each mismatch in words.
fn four(dir: &Path, name: &str, case: &Path, key: Option<&str>, expect: Expect) -> Vec<String> {
    let env: Vec<(&str, &str)> = key.map(|k| ("ELENGTIS_SIGNING_KEY", k)).into_iter().collect();
    let codes = Codes {
        verify: expect.verify,
        analyze: expect.readers,
        report: expect.readers,
        resume: expect.resume,
        says: expect.says,
    };
    readers(dir, name, case, &env, codes)
}

/// What each reader must do with a case: exit codes, and a phrase `verify` says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Codes {
    pub(crate) verify: i32,
    pub(crate) analyze: i32,
    pub(crate) report: i32,
    pub(crate) resume: i32,
    pub(crate) says: &'static str,
}

pub(crate) fn shown(output: &Output) -> String {
    format!("exit {:?}: {}{}", output.status.code(), stdout(output), stderr(output))
}

/// Runs `verify`, `analyze`, `report` and `run --resume` (last: it may write) on `case` with
/// `env` (a signing key, or none), and returns each mismatch with `codes` in words (the four
/// of issue 28's cases, every reader of issue 37's). A refused
/// resume must leave the log, the manifest and the seal as they were.
pub(crate) fn readers(dir: &Path, name: &str, case: &Path, env: &[(&str, &str)], codes: Codes) -> Vec<String> {
    let run = |args: &[&str]| {
        let mut command = elengtis_cmd(dir, args);
        command.env_remove("ELENGTIS_SIGNING_KEY").env_remove("ELENGTIS_SIGNING_KEY_FILE");
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().expect("run elengtis")
    };
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(format!("{name}: {what}"));
        }
    };
    let verify = run(&["verify", s(case)]);
    check(verify.status.code() == Some(codes.verify), format!("verify must exit {}: {}", codes.verify, shown(&verify)));
    check(shown(&verify).contains(codes.says), format!("verify must say {:?}: {}", codes.says, shown(&verify)));
    let analysis = dir.join(format!("{name}-analysis"));
    let analyzed = run(&["analyze", "--input", s(case), "--out", s(&analysis)]);
    check(
        analyzed.status.code() == Some(codes.analyze),
        format!("analyze must exit {}: {}", codes.analyze, shown(&analyzed)),
    );
    check(
        analysis.join("summary.json").exists() == (codes.analyze == 0),
        "analyze wrote a summary of what it refused, or none of what it read".into(),
    );
    let page = dir.join(format!("{name}-report.html"));
    let reported = run(&["report", "--input", s(case), "--out", s(&page)]);
    check(
        reported.status.code() == Some(codes.report),
        format!("report must exit {}: {}", codes.report, shown(&reported)),
    );
    if codes.verify == 10 && codes.analyze == 0 {
        for (command, output) in [("analyze", &analyzed), ("report", &reported)] {
            check(
                stderr(output).contains("integrity cannot be established"),
                format!("{command} must say its integrity cannot be established: {}", shown(output)),
            );
        }
    }
    let before: Vec<Option<Vec<u8>>> =
        ["runs.jsonl", "manifest.json", "seal.json"].iter().map(|f| std::fs::read(case.join(f)).ok()).collect();
    let resumed = run(&["run", "--resume", "--out", s(case)]);
    check(
        resumed.status.code() == Some(codes.resume),
        format!("resume must exit {}: {}", codes.resume, shown(&resumed)),
    );
    if codes.resume != 0 {
        let after: Vec<Option<Vec<u8>>> =
            ["runs.jsonl", "manifest.json", "seal.json"].iter().map(|f| std::fs::read(case.join(f)).ok()).collect();
        check(
            before == after,
            "a refused resume must leave runs.jsonl, manifest.json and seal.json as they were".into(),
        );
    }
    failures
}

#[test]
fn a_fresh_run_is_sealed_and_verifies() {
    let dir = scratch();
    let out = base(dir.path(), 3, false);
    let seal = read_json(&out.join("seal.json"));
    assert_eq!((seal["rows"].as_u64(), seal["status"].as_str()), (Some(3), Some("complete")), "{seal}");
    let output = cmd(dir.path(), &["verify", "--require-sealed", s(&out)], None);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("read as elengtis results, schema 2 (hash-chained); sealed (complete)"));
    assert!(stderr(&output).contains("not checked: authenticity: the seal is not signed"), "{}", stderr(&output));
    let json: Value =
        serde_json::from_str(&stdout(&cmd(dir.path(), &["verify", "--json", s(&out)], None))).expect("JSON");
    assert_eq!((json["ok"].as_bool(), json["format"].as_str()), (Some(true), Some("chained")), "{json}");
    assert_eq!(json["seal"]["state"], "sealed", "{json}");
}

#[test]
fn each_attack_is_refused_by_all_four_commands() {
    let dir = scratch();
    let d = dir.path();
    let base = base(d, 3, false);
    type Attack = fn(&Path);
    let cases: Vec<(&str, Attack, Expect)> = vec![
        // 1. Declaring another format switches nothing off.
        (
            "environment-python",
            |out| {
                let mut manifest = read_json(&out.join("manifest.json"));
                manifest["environment"]["python"] = "3.12.1".into();
                write_json(&out.join("manifest.json"), &manifest);
            },
            Expect { says: "unknown field `environment.python`", ..MALFORMED },
        ),
        (
            "version-1-with-hashes",
            |out| {
                let mut manifest = read_json(&out.join("manifest.json"));
                manifest["schema_version"] = 1.into();
                write_json(&out.join("manifest.json"), &manifest);
                let rows: Vec<Value> = lines(out)
                    .into_iter()
                    .map(|mut r| {
                        r["schema_version"] = 1.into();
                        r
                    })
                    .collect();
                write_rechained(out, &rows);
            },
            Expect { says: "recorded_campaign_sha256`, which schema 1 never had", ..MALFORMED },
        ),
        (
            "version-1-flipped-reordered",
            |out| {
                // Hashes stripped, rows reordered, an outcome flipped in a row and its evidence.
                let mut manifest = read_json(&out.join("manifest.json"));
                manifest["schema_version"] = 1.into();
                manifest["configuration"].as_object_mut().expect("object").remove("recorded_campaign_sha256");
                write_json(&out.join("manifest.json"), &manifest);
                let mut rows: Vec<Value> = lines(out);
                for row in &mut rows {
                    row["schema_version"] = 1.into();
                    let object = row.as_object_mut().expect("object");
                    object.remove("prev_row_sha256");
                    object.remove("evidence_sha256");
                }
                rows.swap(0, 2);
                rows[1]["completed"] = false.into();
                write_rechained(out, &rows);
                std::fs::remove_file(out.join("seal.json")).expect("no seal in schema 1");
            },
            Expect { says: "the row's `completed` is false but its evidence", ..REFUSED },
        ),
        // 2. A row's outcome is checked against its own evidence.
        (
            "completed-flipped-rechained",
            |out| {
                let mut rows = lines(out);
                rows[1]["completed"] = false.into();
                write_rechained(out, &rows);
                reseal(out);
            },
            Expect { says: "runs.jsonl:2: the row's `completed` is false but its evidence", ..REFUSED },
        ),
        (
            "tool-sequence-edited-rechained",
            |out| {
                let mut rows = lines(out);
                rows[0]["tool_sequence"] = serde_json::json!(["read_note"]);
                rows[0]["tool_calls"] = 1.into();
                write_rechained(out, &rows);
                reseal(out);
            },
            Expect { says: "the row's `tool_calls` is 1 but its evidence", ..REFUSED },
        ),
        (
            "evidence-summary-flipped",
            |out| {
                let mut rows = lines(out);
                edit_evidence(out, &mut rows, 0, |e| e["verification"]["completed"] = false.into());
                rows[0]["completed"] = false.into();
                write_rechained(out, &rows);
                reseal(out);
            },
            Expect { says: "verification.completed is false but its checks make it true", ..REFUSED },
        ),
        // 3. The seal anchors the rows, the campaign and the manifest.
        (
            "outcome-flipped-everywhere-seal-kept",
            |out| {
                // Row, evidence (check, outcome) and every hash recomputed; the seal left as it was.
                let mut rows = lines(out);
                edit_evidence(out, &mut rows, 2, |e| {
                    e["verification"]["checks"][0]["passed"] = false.into();
                    e["verification"]["completed"] = false.into();
                    e["verification"]["decided_by"][0]["outcome"] = "failed".into();
                });
                rows[2]["completed"] = false.into();
                rows[2]["proposed_not_completed"] = true.into();
                write_rechained(out, &rows);
            },
            Expect { says: "seal.json: the seal's `prev_row_sha256` is not the hash of row 3", ..REFUSED },
        ),
        (
            "trials-6-to-8-seal-kept",
            |out| {
                let mut manifest = read_json(&out.join("manifest.json"));
                manifest["campaign"]["trials"] = 8.into();
                // The pin recomputed, as `verify` computes it (the campaign's canonical JSON).
                manifest["configuration"]["recorded_campaign_sha256"] =
                    sha256_hex(&elengtis_core::format::canonical_json(&manifest["campaign"])).into();
                write_json(&out.join("manifest.json"), &manifest);
            },
            Expect { says: "the seal pins another campaign", ..REFUSED },
        ),
        (
            "last-row-removed",
            |out| {
                let rows = lines(out);
                write_rechained(out, &rows[..2]);
            },
            Expect { says: "the seal counts 3 rows but runs.jsonl has 2", ..REFUSED },
        ),
        // 5. Links are refused, never followed.
        (
            "log-linked-outside",
            |out| link_from_outside(out, "runs.jsonl", "outside.jsonl"),
            Expect { says: "runs.jsonl: it is a symbolic link", ..REFUSED },
        ),
        (
            "evidence-linked-outside",
            |out| link_from_outside(out, "evidence/local-demo--support-note--1.json", "outside.json"),
            Expect { says: "evidence/local-demo--support-note--1.json: it is a symbolic link", ..REFUSED },
        ),
        (
            "evidence-dir-linked-outside",
            |out| link_from_outside(out, "evidence", "outside-evidence"),
            Expect { says: "evidence/ is a symbolic link", ..REFUSED },
        ),
    ];
    let mut failures = Vec::new();
    for (name, attack, expect) in cases {
        let case = copy(d, &base, name);
        attack(&case);
        failures.extend(four(d, name, &case, None, expect));
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    // The linked-out log was never appended to.
    let outside = d.join("log-linked-outside.outside.jsonl");
    assert_eq!(std::fs::read(&outside).expect("outside log"), std::fs::read(base.join("runs.jsonl")).expect("log"));
}

#[test]
fn without_a_key_a_thorough_forger_is_not_caught_with_one_they_are() {
    // What an unsigned seal cannot stop: every hash and the seal recomputed. A signature can.
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 3, true);
    let seal = read_json(&signed.join("seal.json"));
    assert_eq!(seal["signatures"][0]["algorithm"], "hmac-sha256", "{seal}");
    for file in ["manifest.json", "runs.jsonl", "seal.json", "summary.txt"] {
        let text = std::fs::read_to_string(signed.join(file)).expect("read");
        assert!(!text.contains(KEY), "the key must never be written ({file})");
    }
    assert_four(d, "signed", &copy(d, &signed, "signed-copy"), Some(KEY), ACCEPTED);
    let forge = |out: &Path| {
        let mut rows = lines(out);
        edit_evidence(out, &mut rows, 2, |e| {
            e["verification"]["checks"][0]["passed"] = false.into();
            e["verification"]["completed"] = false.into();
            e["verification"]["decided_by"][0]["outcome"] = "failed".into();
        });
        rows[2]["completed"] = false.into();
        rows[2]["proposed_not_completed"] = true.into();
        write_rechained(out, &rows);
        reseal(out);
    };
    let unkeyed = copy(d, &signed, "forged-no-key");
    forge(&unkeyed);
    // Without a key, the forgery holds: the documented limit of an unsigned seal.
    let output = cmd(d, &["verify", s(&unkeyed)], None);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let keyed = copy(d, &signed, "forged-key");
    forge(&keyed);
    assert_four(d, "forged-key", &keyed, Some(KEY), Expect { says: "is not signed by the hmac-sha256 key", ..REFUSED });
    // `verify --key FILE` says the same, and so does a wrong key.
    let key_file = d.join("key");
    std::fs::write(&key_file, KEY).expect("write key");
    let output = cmd(d, &["verify", "--key", s(&key_file), s(&keyed)], None);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    let other = d.join("other-key");
    std::fs::write(&other, "another secret of at least thirty-two bytes").expect("write key");
    let output = cmd(d, &["verify", "--key", s(&other), s(&signed)], None);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    // Removing the seal leaves an unsealed directory, which a key (or --require-sealed) refuses.
    let unsealed = copy(d, &signed, "unsealed");
    std::fs::remove_file(unsealed.join("seal.json")).expect("remove the seal");
    for args in [vec!["verify", "--require-sealed", s(&unsealed)], vec!["verify", "--key", s(&key_file), s(&unsealed)]]
    {
        let output = cmd(d, &args, None);
        assert_eq!(output.status.code(), Some(10), "{args:?}: {}{}", stdout(&output), stderr(&output));
        assert!(stdout(&output).contains("unsealed"), "{}", stdout(&output));
    }
}

#[test]
fn an_ed25519_pair_from_keygen_signs_and_checks_runs() {
    let dir = scratch();
    let d = dir.path();
    let key = d.join("seal.key");
    let made = cmd(d, &["keygen", "--out", s(&key)], None);
    assert_eq!(made.status.code(), Some(0), "{}{}", stdout(&made), stderr(&made));
    let public = d.join("seal.key.pub");
    let out = d.join("run");
    let mut run = elengtis_cmd(d, &["example", "--trials", "2", "--out", s(&out)]);
    run.env_remove("ELENGTIS_SIGNING_KEY").env("ELENGTIS_SIGNING_KEY_FILE", &key);
    let output = run.output().expect("run");
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let output = cmd(d, &["verify", "--public-key", s(&public), s(&out)], None);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("signature: ed25519 by key"), "{}", stderr(&output));
    assert!(stderr(&output).contains(": valid"), "{}", stderr(&output));
    // The same directory re-sealed by someone without the private key.
    reseal(&out);
    let output = cmd(d, &["verify", "--public-key", s(&public), s(&out)], None);
    assert_eq!(output.status.code(), Some(4), "{}{}", stdout(&output), stderr(&output));
    // keygen never overwrites.
    assert_eq!(cmd(d, &["keygen", "--out", s(&key)], None).status.code(), Some(2));
}

#[test]
fn results_without_a_chain_are_read_never_verified() {
    let dir = scratch();
    let d = dir.path();
    // The original 0.1.0's results: read by analyze and report, not verified, not resumed.
    let original = copy(d, &workspace().join("tests/fixtures/original-0.1.0/example"), "original");
    assert_four(
        d,
        "original",
        &original,
        None,
        Expect { says: "results of the original elengtis 0.1.0", ..UNVERIFIABLE },
    );
    let output = cmd(d, &["verify", s(&original)], None);
    assert!(stderr(&output).contains("not checked: integrity"), "{}", stderr(&output));
    // This tool's schema 1, as a forger would make it from a run of ours: readable, unverified.
    let base = base(d, 2, false);
    let v1 = copy(d, &base, "v1");
    let mut manifest = read_json(&v1.join("manifest.json"));
    manifest["schema_version"] = 1.into();
    manifest["configuration"].as_object_mut().expect("object").remove("recorded_campaign_sha256");
    write_json(&v1.join("manifest.json"), &manifest);
    let mut rows = lines(&v1);
    for row in &mut rows {
        row["schema_version"] = 1.into();
        let object = row.as_object_mut().expect("object");
        object.remove("prev_row_sha256");
        object.remove("evidence_sha256");
    }
    for (index, row) in rows.clone().iter().enumerate() {
        edit_evidence(&v1, &mut rows, index, |e| e["schema_version"] = 1.into());
        let _ = row;
    }
    write_rechained(&v1, &rows);
    std::fs::remove_file(v1.join("seal.json")).expect("no seal in schema 1");
    assert_four(d, "v1", &v1, None, Expect { says: "schema 1 (written before the hashes: no chain)", ..UNVERIFIABLE });
}
