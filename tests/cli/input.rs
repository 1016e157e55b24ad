//! Input edges: what `validate` and `run` do with files and directories that are not what
//! they should be — a FIFO or a device named `*.yaml`, a file over the size cap, text that
//! is not UTF-8, several type errors at once, an OS error, an `--out` that cannot be used,
//! a truncated manifest.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use elengtis_tests::{ChildGuard, copy_example, elengtis, elengtis_cmd, scratch, stderr, stdout, write};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Makes `fifo` a named pipe, then runs `elengtis validate FILE` with a deadline (a read of
/// the pipe would block forever).
fn validate_with_fifo(cwd: &std::path::Path, fifo: &std::path::Path, file: &str) -> std::process::Output {
    let made = std::process::Command::new("mkfifo").arg(fifo).status().expect("mkfifo");
    assert!(made.success());
    let child =
        elengtis_cmd(cwd, &["validate", file]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    ChildGuard::new(child).wait_output(Duration::from_secs(20))
}

#[test]
fn validate_refuses_a_fifo_at_once_naming_it() {
    let dir = scratch();
    let fifo = dir.path().join("campaign.yaml");
    // Before, `open` blocked forever waiting for a writer.
    let output = validate_with_fifo(dir.path(), &fifo, "campaign.yaml");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("campaign.yaml: not a regular file but a FIFO (named pipe); expected a regular file"),
        "{err}"
    );

    // A scenario that is a FIFO is one problem of the campaign, named by its path.
    let config = copy_example("support-note", dir.path().join("ex").as_path());
    let scenario = dir.path().join("ex/support-note.yaml");
    std::fs::remove_file(&scenario).expect("remove scenario");
    let output = validate_with_fifo(dir.path(), &scenario, s(&config));
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("{}: not a regular file but a FIFO", scenario.display())),
        "{}",
        stderr(&output)
    );
}

#[test]
fn validate_refuses_a_device_and_a_file_over_the_cap() {
    let dir = scratch();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).expect("symlink");
    let output = elengtis(dir.path(), &["validate", "zero.yaml"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stderr(&output).contains("zero.yaml: not a regular file but a character device"), "{}", stderr(&output));

    let big = std::fs::File::create(dir.path().join("big.yaml")).expect("create");
    big.set_len(64 * 1024 * 1024).expect("sparse 64 MiB");
    let output = elengtis(dir.path(), &["validate", "--json", "big.yaml"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(report["diagnostics"][0]["file"], "big.yaml");
    assert!(report["diagnostics"][0]["message"].as_str().is_some_and(|m| m.contains("larger than 8 MiB")), "{report}");
}

#[test]
fn validate_reports_every_type_error_with_file_line_and_path() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let campaign = std::fs::read_to_string(&config).expect("read");
    let campaign = campaign.replacen("trials: 1", "trials: many", 1).replacen("step_budget: 4", "step_budget: [4]", 1);
    let campaign = campaign.replacen("engine: reference\n", "engine: reference\nbogus: 1\n", 1);
    std::fs::write(&config, campaign).expect("write");
    let scenario = dir.path().join("support-note.yaml");
    let text = std::fs::read_to_string(&scenario).expect("read scenario");
    std::fs::write(&scenario, format!("{text}unknown_a: 1\nunknown_b: 2\n")).expect("write scenario");

    let output = elengtis(dir.path(), &["validate", s(&config)]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    // The campaign's three problems and, in the same run, the scenario's two.
    assert!(err.contains("failed to load the campaign: 5 problems"), "{err}");
    assert!(
        err.contains(":4:9: trials: expected a whole number from 0 to 4294967295, found the string \"many\""),
        "{err}"
    );
    assert!(
        err.contains(":5:14: step_budget: expected a whole number from 0 to 4294967295, found a sequence"),
        "{err}"
    );
    assert!(err.contains(":7:1: bogus: unknown field `bogus`"), "{err}");
    assert!(
        err.contains("unknown_a: unknown field `unknown_a`") && err.contains("unknown_b: unknown field `unknown_b`"),
        "{err}"
    );

    // Once the campaign reads, both problems of the scenario are reported.
    let campaign = std::fs::read_to_string(&config).expect("read");
    let campaign = campaign.replacen("trials: many", "trials: 1", 1).replacen("step_budget: [4]", "step_budget: 4", 1);
    std::fs::write(&config, campaign.replacen("bogus: 1\n", "", 1)).expect("write");
    let output = elengtis(dir.path(), &["validate", "--json", s(&config)]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("json");
    let paths: Vec<&str> =
        report["diagnostics"].as_array().expect("diagnostics").iter().filter_map(|d| d["path"].as_str()).collect();
    assert_eq!(paths, ["unknown_a", "unknown_b"], "{report}");
    assert!(
        report["diagnostics"]
            .as_array()
            .expect("list")
            .iter()
            .all(|d| d["line"].as_u64() > Some(0)
                && d["file"].as_str().is_some_and(|f| f.ends_with("support-note.yaml")))
    );
}

#[test]
fn encoding_errors_have_a_position_and_name_the_encoding() {
    let dir = scratch();
    let utf16: Vec<u8> =
        [0xFF, 0xFE].into_iter().chain("schema_version: 1\n".encode_utf16().flat_map(u16::to_le_bytes)).collect();
    std::fs::write(dir.path().join("wide.yaml"), &utf16).expect("write");
    let output = elengtis(dir.path(), &["validate", "wide.yaml"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output)
            .contains("wide.yaml:1:1: the file is UTF-16LE (byte order mark FF FE) (at byte offset 0); expected UTF-8"),
        "{}",
        stderr(&output)
    );
    let no_bom: Vec<u8> = "schema_version: 1\n".encode_utf16().flat_map(u16::to_be_bytes).collect();
    std::fs::write(dir.path().join("wide-be.yaml"), &no_bom).expect("write");
    let output = elengtis(dir.path(), &["validate", "wide-be.yaml"]);
    assert!(
        stderr(&output).contains("wide-be.yaml:1:1: the file is UTF-16BE (no byte order mark)"),
        "{}",
        stderr(&output)
    );

    std::fs::write(dir.path().join("latin1.yaml"), b"schema_version: 1\nmodel: caf\xE9\n").expect("write");
    let output = elengtis(dir.path(), &["validate", "latin1.yaml"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("latin1.yaml:2:11: invalid UTF-8 at byte offset 28 (byte 0xE9)"), "{err}");
    // Said once, not "stream did not contain valid UTF-8: stream did not contain valid UTF-8".
    assert!(!err.contains("stream did not contain valid UTF-8"), "{err}");
}

#[test]
fn each_os_error_is_printed_once() {
    let dir = scratch();
    let output = elengtis(dir.path(), &["validate", "missing.yaml"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let err = stderr(&output);
    assert_eq!(err.trim_end(), "error: failed to read missing.yaml: No such file or directory (os error 2)");
    let config = copy_example("support-note", dir.path());
    std::fs::remove_file(dir.path().join("support-note.yaml")).expect("remove");
    for args in [vec!["validate", s(&config)], vec!["run", "--config", s(&config), "--out", "out"]] {
        let output = elengtis(dir.path(), &args);
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
        let err = stderr(&output);
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    }
}

#[test]
fn an_unusable_out_exits_4_and_a_plain_file_is_not_offered_for_resume() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    write(dir.path(), "plain", "not a results directory\n");

    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", "plain"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("plain exists and is not a directory; choose a new --out"), "{err}");
    assert!(!err.contains("--resume"), "a plain file is not a run to resume: {err}");

    // A path under a regular file: exit 4 (was 6), naming the file at fault.
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", "plain/sub/run"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("plain/sub/run cannot be used as the results directory: plain is a file, not a directory"),
        "{err}"
    );

    // The example command too.
    let output = elengtis(dir.path(), &["example", "--out", "plain"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(!stderr(&output).contains("--resume"), "{}", stderr(&output));

    // A read-only parent (only meaningful without root's override of permissions).
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).expect("mkdir");
    let mut perms = std::fs::metadata(&locked).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
    std::fs::set_permissions(&locked, perms).expect("chmod");
    if std::fs::create_dir(locked.join("probe")).is_err() {
        let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", "locked/run"]);
        assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
        assert!(stderr(&output).contains("Permission denied"), "{}", stderr(&output));
    }
}

#[test]
fn a_truncated_manifest_is_reported_as_truncated() {
    let dir = scratch();
    let config = copy_example("support-note", dir.path());
    let output = elengtis(dir.path(), &["run", "--config", s(&config), "--out", "out"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let manifest = dir.path().join("out/manifest.json");
    let text = std::fs::read(&manifest).expect("read manifest");
    std::fs::write(&manifest, &text[..text.len() / 2]).expect("truncate");
    let output = elengtis(dir.path(), &["run", "--resume", "--out", "out"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("manifest.json: it is truncated (malformed: not valid JSON: EOF while parsing"), "{err}");
    assert!(!err.contains("incompatible") && !err.contains("version"), "{err}");
    let output = elengtis(dir.path(), &["verify", "out"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("it is truncated: not valid JSON")
            || stderr(&output).contains("it is truncated: not valid JSON"),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}
