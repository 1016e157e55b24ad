//! Names a run can write (issue 28, item 7): ids whose result file names would be longer than
//! a file system allows are refused by `validate` (and so by `run`, before anything is
//! created); the longest accepted ids run; and a write the file system refuses at run time
//! (a file name too long for it) exits 6, as a full disk does, with earlier records intact.

use std::path::{Path, PathBuf};

use elengtis_tests::{copy_example, elengtis, scratch, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The support-note example with its target id replaced.
fn with_target_id(dir: &Path, id: &str) -> PathBuf {
    let campaign = copy_example("support-note", dir);
    let text = std::fs::read_to_string(&campaign).expect("read campaign");
    std::fs::write(&campaign, text.replacen("- id: local-demo\n", &format!("- id: {id}\n"), 1)).expect("write");
    campaign
}

/// Trial `<id>--support-note--0`: its longest result file name is
/// `<trial>.<8 characters of the attempt id>.snapshots`, 19 bytes more than the trial id.
const LONGEST_TARGET_ID: usize = 255 - "--support-note--0".len() - ".12345678.snapshots".len();

#[test]
fn the_longest_accepted_id_runs_and_one_more_character_is_refused_before_anything_is_created() {
    let dir = scratch();
    let fits = with_target_id(&dir.path().join("fits"), &"t".repeat(LONGEST_TARGET_ID));
    let out = dir.path().join("fits-out");
    let run = elengtis(dir.path(), &["run", "--config", s(&fits), "--out", s(&out)]);
    assert_eq!(run.status.code(), Some(0), "{}{}", stdout(&run), stderr(&run));
    let verify = elengtis(dir.path(), &["verify", s(&out)]);
    assert_eq!(verify.status.code(), Some(0), "{}{}", stdout(&verify), stderr(&verify));

    for id in ["t".repeat(LONGEST_TARGET_ID + 1), "t".repeat(300)] {
        let campaign = with_target_id(&dir.path().join(format!("over-{}", id.len())), &id);
        let validate = elengtis(dir.path(), &["validate", s(&campaign)]);
        assert_eq!(validate.status.code(), Some(3), "{}{}", stdout(&validate), stderr(&validate));
        let err = stderr(&validate);
        let longest = id.len() + "--support-note--0".len() + ".12345678.snapshots".len();
        assert!(
            err.contains(":8:9: targets[0].id: trial IDs `")
                && err.contains(&format!("make result file names of up to {longest} bytes"))
                && err.contains(&format!("shorten the target or scenario id by {} characters", longest - 255)),
            "{err}"
        );
        assert!(err.len() < 2048, "the id is quoted as an excerpt: {err}");
        let out = dir.path().join(format!("over-{}-out", id.len()));
        let run = elengtis(dir.path(), &["run", "--config", s(&campaign), "--out", s(&out)]);
        assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
        assert!(!out.exists(), "nothing is created for a campaign that cannot run");
    }
}

/// A results directory so deep that its evidence files' paths pass PATH_MAX (4096 bytes)
/// while its manifest's do not: the evidence write fails with ENAMETOOLONG, a write the file
/// system refuses, which is exit 6 (it was 4, "results directory unusable").
#[test]
fn a_file_name_the_file_system_refuses_at_run_time_exits_6_with_earlier_records_intact() {
    let dir = scratch();
    let campaign = copy_example("support-note", &dir.path().join("campaign"));
    // `<out>/manifest.json` and its temporary file fit; `<out>/evidence/.local-demo--support-note--0.json.<pid>.<n>.<16 hex>.tmp` does not.
    const OUT_BYTES: usize = 4030;
    let mut out = dir.path().join("deep");
    while out.as_os_str().len() + 201 < OUT_BYTES {
        out = out.join("d".repeat(200));
    }
    let rest = OUT_BYTES - out.as_os_str().len() - 1;
    out = out.join("e".repeat(rest));
    assert_eq!(out.as_os_str().len(), OUT_BYTES);
    std::fs::create_dir_all(out.parent().expect("parent")).expect("create the deep parent");
    let run = elengtis(dir.path(), &["run", "--config", s(&campaign), "--out", s(&out)]);
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(6), "the documented I/O exit code:\n{err}");
    assert!(err.contains("evidence/local-demo--support-note--0.json") && err.contains("File name too long"), "{err}");
    assert!(out.join("manifest.json").is_file(), "the manifest written before is kept");
}
