//! With a key, no forgery passes (issue 37): the attacks that still passed once the seal was
//! signed, each made as an adversary would on a copy of a real results directory, and what
//! every command that reads results (`verify`, `analyze`, `report`, `run --resume`, `merge`)
//! makes of it. docs/results.md's table "What each attack does and what catches it" has a row
//! for each case here.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use elengtis_core::format::sha256_hex;
use elengtis_tests::{copy_example, elengtis_cmd, read_json, scratch, stderr, stdout};

const REFUSED: Codes = Codes { verify: 4, analyze: 4, report: 4, resume: 4, says: "" };
const MALFORMED: Codes = Codes { verify: 3, analyze: 3, report: 3, resume: 4, says: "" };
use serde_json::{Value, json};

use crate::forge::{Codes, KEY, base, cmd, copy, edit_evidence, lines, readers, s, shown, write_json, write_rechained};

fn assert_none(failures: &[String]) {
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// The verification of a trial's attempt made to read `failed`: its check, outcome and
/// deciding check, so the evidence agrees with itself and with a row that says so.
fn fail_check(evidence: &mut Value) {
    evidence["verification"]["checks"][0]["passed"] = false.into();
    evidence["verification"]["completed"] = false.into();
    evidence["verification"]["decided_by"][0]["outcome"] = "failed".into();
}

/// Every row's outcome flipped in the row and its evidence, the evidence re-pinned and the
/// chain recomputed: what a forger who knows the format writes. The rows keep the runner's
/// signatures (which no longer match them), or lose them (`strip`).
fn rewrite_every_row(out: &Path, strip: bool) {
    let mut rows = lines(out);
    for index in 0..rows.len() {
        edit_evidence(out, &mut rows, index, fail_check);
        rows[index]["completed"] = false.into();
        rows[index]["proposed_not_completed"] = true.into();
        if let (true, Some(row)) = (strip, rows[index].as_object_mut()) {
            row.remove("signatures");
        }
    }
    write_rechained(out, &rows);
}

/// Appends a "retry" of trial `index` that failed: a new attempt, its own evidence (a copy of
/// the trial's, made to read failed and re-pinned), chained after the last row. An honest
/// runner never writes it: the trial already has a complete attempt.
fn append_forged_retry(out: &Path, index: usize) {
    let mut rows = lines(out);
    let mut retry = rows[index].clone();
    let trial = retry["trial_id"].as_str().expect("trial").to_owned();
    let evidence_name = format!("evidence/{trial}.retry-1.json");
    let mut evidence = read_json(&out.join(retry["evidence"].as_str().expect("evidence")));
    evidence["attempt_id"] = "00000000-0000-4000-8000-000000000001".into();
    fail_check(&mut evidence);
    let bytes = serde_json::to_vec_pretty(&evidence).expect("json");
    std::fs::write(out.join(&evidence_name), &bytes).expect("write evidence");
    retry["attempt_id"] = evidence["attempt_id"].clone();
    retry["evidence"] = evidence_name.into();
    retry["evidence_sha256"] = sha256_hex(&bytes).into();
    retry["completed"] = false.into();
    retry["proposed_not_completed"] = true.into();
    if let Some(object) = retry.as_object_mut() {
        // The runner's signature cannot be made without the key.
        object.remove("signatures");
    }
    rows.push(retry);
    // The rows before stay as they were: only the new one is chained to the last.
    let text = std::fs::read_to_string(out.join("runs.jsonl")).expect("log");
    let last = text.lines().last().expect("a row");
    let index = rows.len() - 1;
    rows[index]["prev_row_sha256"] = sha256_hex(last.as_bytes()).into();
    let line = serde_json::to_string(&rows[index]).expect("json");
    std::fs::write(out.join("runs.jsonl"), format!("{text}{line}\n")).expect("append");
}

/// The Ed25519 private key `elengtis keygen` writes, as `ELENGTIS_SIGNING_KEY` may hold it.
fn ed25519_pem(dir: &Path) -> (String, PathBuf) {
    let key = dir.join("seal.key");
    let made = cmd(dir, &["keygen", "--out", s(&key)], None);
    assert_eq!(made.status.code(), Some(0), "{}", shown(&made));
    (std::fs::read_to_string(&key).expect("key"), dir.join("seal.key.pub"))
}

/// A finished run of `trials` trials signed with `key` (the environment's), in `dir/name`.
fn signed_run(dir: &Path, name: &str, trials: u32, key: &str) -> PathBuf {
    let out = dir.join(name);
    let output = cmd(dir, &["example", "--trials", &trials.to_string(), "--out", s(&out)], Some(key));
    assert_eq!(output.status.code(), Some(0), "{}", shown(&output));
    out
}

/// Case 1: `run --resume` with the key never signs a history its runner did not write.
#[test]
fn resume_never_signs_a_forged_history() {
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 3, true);
    let key = &[("ELENGTIS_SIGNING_KEY", KEY)];
    let mut failures = Vec::new();

    // A forged retry after a complete, signed seal: an honest runner writes no row after a
    // complete seal, nor one without a resume record, nor a retry of a completed trial.
    let retried = copy(d, &signed, "retry-after-seal");
    append_forged_retry(&retried, 1);
    let says = "after a complete seal";
    failures.extend(readers(d, "retry-after-seal", &retried, key, Codes { says, ..REFUSED }));
    // Without a key it is refused too: no honest runner can have written it.
    let unkeyed = copy(d, &signed, "retry-after-seal-no-key");
    append_forged_retry(&unkeyed, 1);
    failures.extend(readers(d, "retry-after-seal-no-key", &unkeyed, &[], Codes { says, ..REFUSED }));

    // Every row rewritten and the seal deleted: rows no key holder's runner wrote.
    let rewritten = copy(d, &signed, "rewritten-unsealed");
    rewrite_every_row(&rewritten, false);
    std::fs::remove_file(rewritten.join("seal.json")).expect("delete the seal");
    let says = "the row was changed after it was signed";
    failures.extend(readers(d, "rewritten-unsealed", &rewritten, key, Codes { says, ..REFUSED }));

    // The same with an Ed25519 pair: the private key signs, the public key checks.
    let (pem, public) = ed25519_pem(d);
    let ed = signed_run(d, "ed25519", 3, &pem);
    let forged = copy(d, &ed, "ed25519-rewritten");
    rewrite_every_row(&forged, true);
    std::fs::remove_file(forged.join("seal.json")).expect("delete the seal");
    let says = "not signed by the ed25519 key";
    failures.extend(readers(
        d,
        "ed25519-rewritten",
        &forged,
        &[("ELENGTIS_SIGNING_KEY", &pem)],
        Codes { says, ..REFUSED },
    ));
    let checked = cmd(d, &["verify", "--public-key", s(&public), s(&forged)], None);
    if checked.status.code() != Some(4) {
        failures.push(format!("ed25519-rewritten: verify --public-key must exit 4: {}", shown(&checked)));
    }

    // An unsigned directory (a run killed before its seal) resumed with a key, and a signed
    // one resumed without: refused, nothing written.
    std::fs::create_dir(d.join("unsigned")).expect("mkdir");
    let unsigned = base(&d.join("unsigned"), 3, false);
    std::fs::remove_file(unsigned.join("seal.json")).expect("delete the seal");
    let resumed = cmd(d, &["run", "--resume", "--out", s(&unsigned)], Some(KEY));
    if resumed.status.code() != Some(4) || !stderr(&resumed).contains("not signed") {
        failures.push(format!("unsigned resumed with a key: must exit 4 naming the key: {}", shown(&resumed)));
    }
    if unsigned.join("seal.json").exists() {
        failures.push("unsigned resumed with a key: a seal was written".into());
    }
    let kept = copy(d, &signed, "signed-without-key");
    let seal = std::fs::read(kept.join("seal.json")).expect("seal");
    let resumed = cmd(d, &["run", "--resume", "--out", s(&kept)], None);
    if resumed.status.code() != Some(4) || !stderr(&resumed).contains("signed by") {
        failures.push(format!("signed resumed without a key: must exit 4 naming the key: {}", shown(&resumed)));
    }
    if std::fs::read(kept.join("seal.json")).expect("seal") != seal {
        failures.push("signed resumed without a key: its signed seal was replaced".into());
    }
    assert_none(&failures);
}

/// Case 2: a key variable that is set but empty (a CI secret missing on a fork's pull
/// request), or only whitespace, is an error, never "no key".
#[test]
fn an_empty_or_blank_key_is_an_error() {
    let dir = scratch();
    let d = dir.path();
    let run = base(d, 1, false);
    let blank = d.join("blank.key");
    std::fs::write(&blank, " \n".repeat(20)).expect("write");
    let analysis = d.join("analysis");
    let page = d.join("report.html");
    let commands: Vec<Vec<&str>> = vec![
        vec!["example", "--out", "new-run"],
        vec!["verify", "--require-sealed", s(&run)],
        vec!["analyze", "--input", s(&run), "--out", s(&analysis)],
        vec!["report", "--input", s(&run), "--out", s(&page)],
        vec!["run", "--resume", "--out", s(&run)],
    ];
    let mut failures = Vec::new();
    for (variable, value) in [
        ("ELENGTIS_SIGNING_KEY", ""),
        ("ELENGTIS_SIGNING_KEY", "  \n\t"),
        ("ELENGTIS_SIGNING_KEY_FILE", s(&blank)),
        ("ELENGTIS_SIGNING_KEY_FILE", ""),
    ] {
        for args in &commands {
            let mut command = elengtis_cmd(d, args);
            command.env_remove("ELENGTIS_SIGNING_KEY").env_remove("ELENGTIS_SIGNING_KEY_FILE").env(variable, value);
            let output = command.output().expect("run");
            let named = stderr(&output).contains(variable) && stderr(&output).contains("empty");
            if output.status.code() != Some(2) || !named {
                failures.push(format!(
                    "{variable}={value:?} {args:?}: must exit 2 naming the variable as empty: {}",
                    shown(&output)
                ));
            }
        }
    }
    assert!(!d.join("new-run").exists(), "nothing runs on an empty key");
    assert!(!page.exists() && !analysis.exists(), "nothing is written on an empty key");
    assert_none(&failures);
}

/// Case 3: a key in the environment asks `verify`, `analyze` and `report` for a sealed,
/// signed directory, as `--key` does.
#[test]
fn a_key_in_the_environment_requires_a_sealed_signed_directory() {
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 3, true);
    let key = &[("ELENGTIS_SIGNING_KEY", KEY)];
    let mut failures = Vec::new();
    // The seal deleted, nothing else: unsealed, so not verified; a resume with the key (whose
    // rows are all its runner's) continues it and seals it again.
    let unsealed = copy(d, &signed, "unsealed");
    std::fs::remove_file(unsealed.join("seal.json")).expect("delete the seal");
    let codes = Codes { verify: 10, analyze: 10, report: 10, resume: 0, says: "unsealed" };
    failures.extend(readers(d, "unsealed", &unsealed, key, codes));
    let again = cmd(d, &["verify", s(&unsealed)], Some(KEY));
    if again.status.code() != Some(0) {
        failures.push(format!("unsealed, then resumed with the key: verify must exit 0: {}", shown(&again)));
    }
    // Every row forged and the seal deleted: refused.
    let forged = copy(d, &signed, "forged-unsealed");
    rewrite_every_row(&forged, true);
    std::fs::remove_file(forged.join("seal.json")).expect("delete the seal");
    failures.extend(readers(
        d,
        "forged-unsealed",
        &forged,
        key,
        Codes { says: "not signed by the hmac-sha256 key", ..REFUSED },
    ));
    assert_none(&failures);
}

/// A 6-trial support-note campaign, run as shards 1/2 and 2/2 and merged twice.
fn shards_and_merges(d: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let config = copy_example("support-note", &d.join("campaign"));
    let text = std::fs::read_to_string(&config).expect("campaign");
    std::fs::write(&config, text.replacen("trials: 1\n", "trials: 6\n", 1)).expect("write");
    let mut shards = Vec::new();
    for k in ["1/2", "2/2"] {
        let out = d.join(format!("shard-{}", &k[..1]));
        let output = cmd(d, &["run", "--config", s(&config), "--partition", k, "--out", s(&out)], None);
        assert_eq!(output.status.code(), Some(0), "{}", shown(&output));
        shards.push(out);
    }
    let mut merges = Vec::new();
    for name in ["merged-a", "merged-b"] {
        let out = d.join(name);
        let output = cmd(d, &["merge", "--input", s(&shards[0]), "--input", s(&shards[1]), "--out", s(&out)], None);
        assert_eq!(output.status.code(), Some(0), "{}", shown(&output));
        merges.push(out);
    }
    (shards[0].clone(), shards[1].clone(), merges[0].clone(), merges[1].clone())
}

/// Case 4: inputs are told apart by what they hold (campaign, trial, attempt), not by run id:
/// overlapping inputs are refused naming both, unless `--dedupe` is asked for.
#[test]
fn overlapping_inputs_are_refused_unless_deduplicated() {
    let dir = scratch();
    let d = dir.path();
    let (s1, s2, m1, m2) = shards_and_merges(d);
    let copied = copy(d, &s1, "shard-1-copy");
    let mut failures = Vec::new();
    for (name, inputs) in [
        ("merged-and-its-shard", vec![&m1, &s1]),
        ("two-merges", vec![&m1, &m2]),
        ("a-shard-and-its-copy", vec![&s1, &copied]),
    ] {
        let mut analyze = vec!["analyze".to_owned()];
        let mut report = vec!["report".to_owned()];
        for input in &inputs {
            for args in [&mut analyze, &mut report] {
                args.extend(["--input".to_owned(), s(input).to_owned()]);
            }
        }
        let out = d.join(format!("{name}-analysis"));
        analyze.extend(["--out".to_owned(), s(&out).to_owned()]);
        report.extend(["--out".to_owned(), s(&d.join(format!("{name}.html"))).to_owned()]);
        for args in [&analyze, &report] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let output = cmd(d, &args, None);
            let names_both = inputs.iter().all(|input| stderr(&output).contains(s(input)));
            if output.status.code() != Some(2) || !names_both || !stderr(&output).contains("--dedupe") {
                failures.push(format!(
                    "{name}: {} must exit 2 naming both inputs and --dedupe: {}",
                    args[0],
                    shown(&output)
                ));
            }
        }
        if out.join("summary.json").exists() {
            failures.push(format!("{name}: a summary was written"));
        }
    }
    // Asked for explicitly, each trial is counted once: 6, with the intervals of 6.
    let out = d.join("deduplicated");
    let output = cmd(
        d,
        &[
            "analyze",
            "--dedupe",
            "--input",
            s(&m1),
            "--input",
            s(&s1),
            "--input",
            s(&s2),
            "--input",
            s(&m2),
            "--out",
            s(&out),
        ],
        None,
    );
    if output.status.code() == Some(0) {
        let summary = read_json(&out.join("summary.json"));
        let cells = summary["cells"].as_array().expect("cells");
        let trials: u64 = cells.iter().map(|c| c["trials"].as_u64().expect("trials")).sum();
        if trials != 6 {
            failures.push(format!("--dedupe must count 6 trials, counted {trials}: {summary}"));
        }
    } else {
        failures.push(format!("analyze --dedupe must exit 0: {}", shown(&output)));
    }
    let page = d.join("deduplicated.html");
    let output = cmd(d, &["report", "--dedupe", "--input", s(&m1), "--input", s(&s2), "--out", s(&page)], None);
    if output.status.code() != Some(0) || !stdout(&output).contains("6 trials") {
        failures.push(format!("report --dedupe must exit 0 with 6 trials: {}", shown(&output)));
    }
    assert_none(&failures);
}

/// Case 5: the resume records (their engine-gate findings included) and the spend cap are
/// covered by the seal and the signature.
#[test]
fn resume_records_and_the_spend_cap_are_covered() {
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 2, true);
    // One resume with the key: a resume record, and a new signed seal over it.
    let resumed = cmd(d, &["run", "--resume", "--out", s(&signed)], Some(KEY));
    assert_eq!(resumed.status.code(), Some(0), "{}", shown(&resumed));
    assert_eq!(read_json(&signed.join("manifest.json"))["resumes"].as_array().map(Vec::len), Some(1));
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 3] = [
        ("resume-record-rewritten", |m| {
            m["resumes"][0]["engine_gate"] = json!({"engine": "forged", "findings": []});
            m["resumes"][0]["resumed_at"] = "2020-01-01T00:00:00Z".into();
        }),
        ("resume-record-removed", |m| m["resumes"] = json!([])),
        ("spend-cap-raised", |m| m["budget_usd"] = json!(1000.0)),
    ];
    let mut failures = Vec::new();
    for (name, edit) in edits {
        for (label, key) in [("key", Some(KEY)), ("no-key", None)] {
            let case = copy(d, &signed, &format!("{name}-{label}"));
            let mut manifest = read_json(&case.join("manifest.json"));
            edit(&mut manifest);
            write_json(&case.join("manifest.json"), &manifest);
            let env: Vec<(&str, &str)> = key.map(|k| ("ELENGTIS_SIGNING_KEY", k)).into_iter().collect();
            failures.extend(readers(d, &format!("{name}-{label}"), &case, &env, REFUSED));
        }
    }
    assert_none(&failures);
}

/// Case 6: a key twice in one object, or a number in another form than the runner writes,
/// is refused by every reader: signatures cover the parsed document, so a reader that took
/// the other duplicate (or read the number otherwise) would see values nobody signed.
#[test]
fn duplicate_keys_and_other_number_forms_are_refused_by_every_reader() {
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 3, true);
    let key = &[("ELENGTIS_SIGNING_KEY", KEY)];
    let mut failures = Vec::new();
    // In the signed manifest: the parsed document (last `trials` wins) still matches the seal.
    let manifest = copy(d, &signed, "manifest-trials-twice");
    let text = std::fs::read_to_string(manifest.join("manifest.json")).expect("manifest");
    assert!(text.contains("\"trials\": 3,"));
    let text = text.replacen("\"trials\": 3,", "\"trials\": 8,\n    \"trials\": 3,", 1);
    std::fs::write(manifest.join("manifest.json"), text).expect("write");
    failures.extend(readers(
        d,
        "manifest-trials-twice",
        &manifest,
        key,
        Codes { says: "`trials` appears twice", ..MALFORMED },
    ));
    // In the seal.
    let sealed = copy(d, &signed, "seal-rows-twice");
    let text = std::fs::read_to_string(sealed.join("seal.json")).expect("seal");
    let text = text.replacen("\"rows\": 3,", "\"rows\": 99,\n  \"rows\": 3,", 1);
    std::fs::write(sealed.join("seal.json"), text).expect("write");
    failures.extend(readers(d, "seal-rows-twice", &sealed, key, Codes { says: "`rows` appears twice", ..MALFORMED }));
    // In the last row of a run killed before its seal (nothing but its own signature pins its
    // bytes): a key twice, and a number written in another form than the runner's (the parsed
    // row, and so what its signature covers, unchanged).
    type Respell = fn(&str) -> String;
    let respellings: [(&str, Respell, &str); 2] = [
        (
            "row-completed-twice",
            |row| row.replacen("\"completed\":true", "\"completed\":false,\"completed\":true", 1),
            "`completed` appears twice",
        ),
        (
            "row-duration-respelled",
            |row| {
                let value: Value = serde_json::from_str(row).expect("row");
                let written = serde_json::to_string(&value["duration_ms"]).expect("json");
                row.replacen(&format!("\"duration_ms\":{written}"), &format!("\"duration_ms\":{written}0"), 1)
            },
            "not in the form elengtis writes",
        ),
    ];
    for (name, respell, says) in respellings {
        let case = copy(d, &signed, name);
        std::fs::remove_file(case.join("seal.json")).expect("delete the seal");
        let text = std::fs::read_to_string(case.join("runs.jsonl")).expect("log");
        let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
        let last = rows.len() - 1;
        let respelled = respell(&rows[last]);
        assert_ne!(respelled, rows[last], "{name}");
        rows[last] = respelled;
        std::fs::write(case.join("runs.jsonl"), rows.join("\n") + "\n").expect("write");
        failures.extend(readers(d, name, &case, key, Codes { says, ..MALFORMED }));
    }
    assert_none(&failures);
}

/// Case 7: a resume never appends through a hard link (a `cp -al` or `rsync --link-dest`
/// snapshot of a killed run), and `verify` says which files are linked.
#[test]
fn resume_never_writes_through_a_hard_link() {
    let dir = scratch();
    let d = dir.path();
    let killed = base(d, 3, false);
    // What a run killed after its first trial leaves: one row, no seal.
    let text = std::fs::read_to_string(killed.join("runs.jsonl")).expect("log");
    let first = text.lines().next().expect("a row");
    std::fs::write(killed.join("runs.jsonl"), format!("{first}\n")).expect("write");
    std::fs::remove_file(killed.join("seal.json")).expect("delete the seal");
    for evidence in ["evidence/local-demo--support-note--1.json", "evidence/local-demo--support-note--2.json"] {
        std::fs::remove_file(killed.join(evidence)).expect("remove");
    }
    let original = std::fs::read(killed.join("runs.jsonl")).expect("log");
    let snapshot = d.join("snapshot");
    let linked = std::process::Command::new("cp").args(["-al", s(&killed), s(&snapshot)]).status().expect("cp -al");
    assert!(linked.success());
    let checked = cmd(d, &["verify", s(&snapshot)], None);
    assert!(
        shown(&checked).contains("hard link") && shown(&checked).contains("runs.jsonl"),
        "verify must name the linked files: {}",
        shown(&checked)
    );
    let resumed = cmd(d, &["run", "--resume", "--out", s(&snapshot)], None);
    assert_eq!(resumed.status.code(), Some(4), "{}", shown(&resumed));
    assert!(stderr(&resumed).contains("hard link") && stderr(&resumed).contains("copy"), "{}", shown(&resumed));
    assert_eq!(std::fs::read(killed.join("runs.jsonl")).expect("log"), original, "the original gained rows");
    let verified = cmd(d, &["verify", s(&killed)], None);
    assert_eq!(verified.status.code(), Some(0), "the original still verifies: {}", shown(&verified));
    // A copy (not a link) resumes.
    let copied = copy(d, &killed, "copied");
    let resumed = cmd(d, &["run", "--resume", "--out", s(&copied)], None);
    assert_eq!(resumed.status.code(), Some(0), "{}", shown(&resumed));
    assert_eq!(std::fs::read(killed.join("runs.jsonl")).expect("log"), original);
}

/// Peak resident memory (KiB) and wall time of `elengtis ARGS`, measured by `/usr/bin/time`
/// when it is there (else the memory is `None`).
fn measured(dir: &Path, args: &[&str]) -> (Output, Duration, Option<u64>) {
    let time = Path::new("/usr/bin/time");
    let rss_file = dir.join("rss.txt");
    let mut command = if time.exists() {
        let mut command = std::process::Command::new(time);
        command.args(["-f", "%M", "-o", s(&rss_file)]).arg(elengtis_tests::bin("elengtis")).args(args).current_dir(dir);
        command
    } else {
        elengtis_cmd(dir, args)
    };
    command.env_remove("ELENGTIS_SIGNING_KEY").env_remove("ELENGTIS_SIGNING_KEY_FILE");
    let start = Instant::now();
    let output = command.output().expect("run");
    let elapsed = start.elapsed();
    let rss = std::fs::read_to_string(&rss_file).ok().and_then(|t| t.lines().last()?.trim().parse().ok());
    (output, elapsed, rss)
}

/// Case 8: every results file is read with a bound: a sparse 3 GiB `seal.json`, manifest, log
/// or evidence file is refused at once, in little memory, by every reader.
#[test]
fn oversized_results_files_are_refused_at_once_in_little_memory() {
    const SIZE: u64 = 3 << 30;
    let dir = scratch();
    let d = dir.path();
    let run = base(d, 2, false);
    let mut failures = Vec::new();
    for file in ["seal.json", "manifest.json", "runs.jsonl", "evidence/local-demo--support-note--1.json"] {
        let name = file.replace('/', "-");
        let case = copy(d, &run, &name);
        std::fs::OpenOptions::new().write(true).open(case.join(file)).expect("open").set_len(SIZE).expect("sparse");
        let analysis = d.join(format!("{name}-analysis"));
        let page = d.join(format!("{name}.html"));
        for (args, code) in [
            (vec!["verify", s(&case)], 3),
            (vec!["analyze", "--input", s(&case), "--out", s(&analysis)], 3),
            (vec!["report", "--input", s(&case), "--out", s(&page)], 3),
            (vec!["run", "--resume", "--out", s(&case)], 4),
        ] {
            let (output, elapsed, rss) = measured(d, &args);
            let what = format!("{file}: {}", args[0]);
            if output.status.code() != Some(code) || !shown(&output).contains("larger than") {
                failures.push(format!(
                    "{what}: must exit {code} saying the file is larger than its bound: {}",
                    shown(&output)
                ));
            }
            if elapsed > Duration::from_secs(1) {
                failures.push(format!("{what}: took {elapsed:?}, more than a second"));
            }
            if let Some(kib) = rss.filter(|kib| *kib > 100 * 1024) {
                failures.push(format!("{what}: peak RSS {kib} KiB, more than 100 MB"));
            }
        }
    }
    assert_none(&failures);
}

/// Case 9: `report` says in a banner on its page what it read (verified and signed by which
/// key, verified unsigned, unsealed, legacy unverified, refused), and `analyze` writes it
/// into `summary.md` and `summary.json`.
#[test]
fn readers_say_what_they_read() {
    let dir = scratch();
    let d = dir.path();
    let signed = base(d, 2, true);
    let unsigned = base(d, 2, false);
    let unsealed = copy(d, &unsigned, "unsealed");
    std::fs::remove_file(unsealed.join("seal.json")).expect("delete the seal");
    let legacy = copy(d, &elengtis_tests::workspace().join("tests/fixtures/original-0.1.0/example"), "legacy");
    let key_id = read_json(&signed.join("seal.json"))["signatures"][0]["key_id"].as_str().expect("key id").to_owned();
    let mut failures = Vec::new();
    for (name, input, key, status, detail) in [
        ("signed", &signed, Some(KEY), "verified, signed", key_id.as_str()),
        ("signed-unchecked", &signed, None, "signature not checked", key_id.as_str()),
        ("unsigned", &unsigned, None, "verified, unsigned", "anyone can recompute"),
        ("unsealed", &unsealed, None, "unsealed", "killed"),
        ("legacy", &legacy, None, "legacy, unverified", "original elengtis 0.1.0"),
    ] {
        let page = d.join(format!("{name}.html"));
        let output = cmd(d, &["report", "--input", s(input), "--out", s(&page)], key);
        let html = std::fs::read_to_string(&page).unwrap_or_default();
        let banner = html.split("<div class=\"integrity").nth(1).unwrap_or_default();
        if output.status.code() != Some(0) || !banner.contains(status) || !banner.contains(detail) {
            failures
                .push(format!("{name}: the report's banner must say {status:?} and {detail:?}: {}", shown(&output)));
        }
        let out = d.join(format!("{name}-analysis"));
        let output = cmd(d, &["analyze", "--input", s(input), "--out", s(&out)], key);
        let markdown = std::fs::read_to_string(out.join("summary.md")).unwrap_or_default();
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap_or_default();
        if output.status.code() != Some(0)
            || !markdown.contains(status)
            || !summary.contains(status)
            || !summary.contains(detail)
        {
            failures.push(format!(
                "{name}: summary.md and summary.json must say {status:?}: {}\n{markdown}",
                shown(&output)
            ));
        }
    }
    // A refused directory: the page says so, and shows nothing of it.
    let forged = copy(d, &unsigned, "forged");
    let mut rows = lines(&forged);
    rows[0]["completed"] = false.into();
    write_rechained(&forged, &rows);
    let page = d.join("forged.html");
    let output = cmd(d, &["report", "--input", s(&forged), "--out", s(&page)], None);
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    if output.status.code() != Some(4) || !html.contains("refused") || html.contains("trial-index") {
        failures.push(format!(
            "forged: the report must exit 4 with a page that says refused and shows no trial: {}",
            shown(&output)
        ));
    }
    assert_none(&failures);
}

/// `merge` reads each shard as every reader does: with the key it requires them sealed and
/// signed, and the strict reader, the bounds and the empty-key refusal hold for it too.
#[test]
fn merge_reads_its_shards_as_every_reader_does() {
    let dir = scratch();
    let d = dir.path();
    let config = copy_example("support-note", &d.join("campaign"));
    let text = std::fs::read_to_string(&config).expect("campaign");
    std::fs::write(&config, text.replacen("trials: 1\n", "trials: 4\n", 1)).expect("write");
    let mut shards = Vec::new();
    for k in ["1/2", "2/2"] {
        let out = d.join(format!("shard-{}", &k[..1]));
        let output = cmd(d, &["run", "--config", s(&config), "--partition", k, "--out", s(&out)], Some(KEY));
        assert_eq!(output.status.code(), Some(0), "{}", shown(&output));
        shards.push(out);
    }
    let merge = |first: &Path, name: &str, key: Option<&str>| {
        cmd(d, &["merge", "--input", s(first), "--input", s(&shards[1]), "--out", s(&d.join(name))], key)
    };
    let mut failures = Vec::new();
    let mut expect = |name: &str, output: Output, code: i32, says: &str| {
        if output.status.code() != Some(code) || !shown(&output).contains(says) {
            failures.push(format!("{name}: merge must exit {code} saying {says:?}: {}", shown(&output)));
        }
    };
    expect("signed", merge(&shards[0], "merged", Some(KEY)), 0, "");
    let checked = cmd(d, &["verify", s(&d.join("merged"))], Some(KEY));
    expect("the merged directory, verified with the key", checked, 0, "verified, signed by hmac-sha256 key");
    let unsealed = copy(d, &shards[0], "shard-1-unsealed");
    std::fs::remove_file(unsealed.join("seal.json")).expect("delete the seal");
    expect("unsealed", merge(&unsealed, "m-unsealed", Some(KEY)), 10, "is not sealed");
    let twice = copy(d, &shards[0], "shard-1-twice");
    let seal = std::fs::read_to_string(twice.join("seal.json")).expect("seal");
    assert!(seal.contains("\"rows\":"));
    std::fs::write(twice.join("seal.json"), seal.replacen("\"rows\":", "\"rows\": 9,\n  \"rows\":", 1)).expect("write");
    expect("a key twice", merge(&twice, "m-twice", Some(KEY)), 3, "`rows` appears twice");
    let large = copy(d, &shards[0], "shard-1-large");
    std::fs::OpenOptions::new()
        .write(true)
        .open(large.join("seal.json"))
        .expect("open")
        .set_len(3 << 30)
        .expect("sparse");
    expect("3 GiB", merge(&large, "m-large", None), 3, "larger than");
    expect("an empty key", merge(&shards[0], "m-empty", Some("")), 2, "empty");
    for name in ["m-unsealed", "m-twice", "m-large", "m-empty"] {
        if d.join(name).exists() {
            failures.push(format!("{name}: written"));
        }
    }
    assert_none(&failures);
}
