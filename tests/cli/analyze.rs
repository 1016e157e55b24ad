//! `elengtis analyze`: per model × engine × scenario cells with Wilson intervals.

use std::path::Path;

use elengtis_tests::{elengtis, read_json, scratch, stderr, stdout, workspace};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The 95 % Wilson score interval, as the format notes define it.
fn wilson(successes: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let p = successes / n;
    let c = z * z / n;
    let centre = (p + c / 2.0) / (1.0 + c);
    let margin = z * ((p * (1.0 - p) + c / 4.0) / n).sqrt() / (1.0 + c);
    (centre - margin, centre + margin)
}

fn run_example(dir: &Path, name: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    let output = elengtis(dir, &["example", name, "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    out
}

#[test]
fn analyze_two_runs_gives_cells_with_wilson_intervals() {
    let dir = scratch();
    let comply = run_example(dir.path(), "support-note");
    let refuse = run_example(dir.path(), "refusal");
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&comply), "--input", s(&refuse), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(out.join("summary.md").is_file());
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(markdown.contains("support-note"), "{markdown}");

    let summary = read_json(&out.join("summary.json"));
    let cells = summary["cells"].as_array().expect("cells");
    assert!(!cells.is_empty(), "{summary}");
    let trials: u64 = cells.iter().map(|c| c["trials"].as_u64().expect("trials")).sum();
    assert_eq!(trials, 2, "one trial from each run: {summary}");
    let proposed: u64 = cells.iter().map(|c| c["proposed"]["successes"].as_u64().expect("successes")).sum();
    let completed: u64 = cells.iter().map(|c| c["completed"]["successes"].as_u64().expect("successes")).sum();
    assert_eq!((proposed, completed), (1, 1), "comply proposes and completes, refuse does neither: {summary}");
    for cell in cells {
        assert_eq!(cell["scenario"], "support-note");
        assert_eq!(cell["engine"], "reference");
        assert_eq!(cell["complete_trials"], cell["trials"]);
        for metric in ["proposed", "completed", "proposed_not_completed"] {
            let m = &cell[metric];
            let known = m["known"].as_u64().expect("known");
            let successes = m["successes"].as_u64().expect("successes");
            assert_eq!(known, cell["trials"].as_u64().expect("trials"), "{metric}: every trial is known: {cell}");
            assert_eq!(m["unknown"], 0, "{metric}: {cell}");
            #[expect(clippy::cast_precision_loss, reason = "tiny counts")]
            let (lo, hi) = wilson(successes as f64, known as f64);
            let interval = m["wilson_95"].as_array().expect("wilson_95 interval");
            let got: Vec<f64> = interval.iter().map(|v| v.as_f64().expect("bound")).collect();
            assert_eq!(got.len(), 2, "{metric}: {cell}");
            assert!((got[0] - lo).abs() < 1e-9 && (got[1] - hi).abs() < 1e-9, "{metric}: {got:?} vs ({lo}, {hi})");
            assert!(got[0] <= got[1] && got[0] >= 0.0 && got[1] <= 1.0, "{metric}: {got:?}");
        }
    }
}

/// `--input` takes several values after one flag, as `merge --input` does: `analyze` and
/// `report` read both directories exactly as with the flag repeated.
#[test]
fn analyze_and_report_take_several_inputs_after_one_flag() {
    let dir = scratch();
    let comply = run_example(dir.path(), "support-note");
    let refuse = run_example(dir.path(), "refusal");
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&comply), s(&refuse), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let summary = read_json(&out.join("summary.json"));
    let cells = summary["cells"].as_array().expect("cells");
    let trials: u64 = cells.iter().map(|c| c["trials"].as_u64().expect("trials")).sum();
    assert_eq!(trials, 2, "one trial from each run: {summary}");

    let report = dir.path().join("report.html");
    let output = elengtis(dir.path(), &["report", "--input", s(&comply), s(&refuse), "--out", s(&report)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let html = std::fs::read_to_string(&report).expect("report");
    for run in [&comply, &refuse] {
        assert!(html.contains(&format!("data-campaign=\"{}\"", s(run))), "{} not in the report", s(run));
    }
}

/// A plain audit is not a live comparison of engines: its summary.md has no recommendation
/// section (summary.json still carries the field); an experiment's does
/// (tests/cli/experiment.rs). The report's counts read in their number.
#[test]
fn a_plain_audit_has_no_recommendation_and_counts_read_in_their_number() {
    let dir = scratch();
    let run = run_example(dir.path(), "support-note");
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&run), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(!markdown.contains("Recommendation") && !markdown.contains("conformance_required"), "{markdown}");
    assert!(markdown.contains("| scripted | reference | support-note | 1 |"), "{markdown}");
    assert_eq!(read_json(&out.join("summary.json"))["recommendation"]["status"], "conformance_required");

    let report = dir.path().join("report.html");
    let output = elengtis(dir.path(), &["report", "--input", s(&run), "--out", s(&report)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let html = std::fs::read_to_string(&report).expect("report");
    assert!(html.contains("lifecycle records of the 1 trial are rendered"), "the page's script-less note");
    assert!(!html.contains("1 trials"), "a count of one in the plural");
}

#[test]
fn analyze_refuses_the_same_run_twice() {
    let dir = scratch();
    let run = run_example(dir.path(), "support-note");
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&run), "--input", s(&run), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(2), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("overlap: both hold run"), "{}", stderr(&output));
    assert!(!out.join("summary.json").exists(), "no summary is written for a refused analysis");
}

/// Results directories written by the original tool (elengtis 0.1.0), committed under
/// `tests/fixtures/original-0.1.0/`, are analysed together with ours.
#[test]
fn analyze_reads_the_original_tools_results_with_ours() {
    let dir = scratch();
    let ours = run_example(dir.path(), "support-note");
    let original = workspace().join("tests/fixtures/original-0.1.0");
    let (example, mixed) = (original.join("example"), original.join("mixed"));
    let out = dir.path().join("analysis");
    // The original's runs and ours of the same example are different campaigns to the
    // manifests (each tool hashes its own way): counted together, as the original would.
    let args =
        ["analyze", "--pool", "--input", s(&example), "--input", s(&mixed), "--input", s(&ours), "--out", s(&out)];
    let output = elengtis(dir.path(), &args);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));

    let summary = read_json(&out.join("summary.json"));
    let inputs = summary["inputs"].as_array().expect("inputs");
    let attempts: Vec<u64> = inputs.iter().map(|i| i["attempts"].as_u64().expect("attempts")).collect();
    assert_eq!(attempts, [1, 4, 1], "{summary}");
    let cells = summary["cells"].as_array().expect("cells");
    let cell =
        |model: &str| cells.iter().find(|c| c["model_id"] == model).unwrap_or_else(|| panic!("{model}: {summary}"));
    // The original's example and ours: the same scenario, both propose and complete.
    assert_eq!(cell("scripted")["trials"], 2);
    assert_eq!(cell("scripted")["completed"]["successes"], 2);
    // The original's mixed run: a failing submit tool (complete, not completed) and a target
    // that never started (incomplete, its null counters read as no turns).
    let mixed_cell = cell("scripted-comply");
    assert_eq!(mixed_cell["trials"], 4);
    assert_eq!(mixed_cell["complete_trials"], 2);
    assert_eq!(mixed_cell["failure_classes"], serde_json::json!({"infrastructure_error": 2}));
    assert_eq!(mixed_cell["completed"]["successes"], 0);
    assert_eq!(mixed_cell["completed"]["unknown"], 2);
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(
        markdown.contains("| scripted-comply | reference | support-note | 4 | 2 | 0 | infrastructure_error: 2 |"),
        "{markdown}"
    );
}

/// The cells of `summary.json` as (campaign label, proposed successes/known).
fn proposed_by_campaign(summary: &serde_json::Value) -> Vec<(String, String)> {
    let labels = summary["campaigns"].as_array().expect("campaigns");
    summary["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|cell| {
            let label = labels
                .iter()
                .find(|c| c["campaign"] == cell["campaign"])
                .map_or("<pooled>".to_owned(), |c| c["label"].as_str().expect("label").to_owned());
            (label, format!("{}/{}", cell["proposed"]["successes"], cell["proposed"]["known"]))
        })
        .collect()
}

/// An attack run and its own negative control (issue 29, item 3): analysed together they are
/// two rows, `proposed 3/3` and `0/1`, never one `proposed 3/4`; `--pool` counts them together.
#[test]
fn an_attack_run_and_its_control_are_shown_apart_unless_pooled() {
    let dir = scratch();
    let attack = dir.path().join("results");
    let control = dir.path().join("results-control");
    for (out, extra) in [(&attack, &["--trials", "3"][..]), (&control, &["--control"][..])] {
        let mut args = vec!["example", "support-note", "--out", s(out)];
        args.extend(extra);
        let output = elengtis(dir.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    }
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&attack), "--input", s(&control), "--out", s(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("the inputs ran 2 different campaigns"), "{}", stderr(&output));
    let summary = read_json(&out.join("summary.json"));
    let mut shown = proposed_by_campaign(&summary);
    shown.sort();
    assert_eq!(shown, [(s(&attack).to_owned(), "3/3".to_owned()), (s(&control).to_owned(), "0/1".to_owned())]);
    assert_eq!(summary["pooled"], false);
    let markdown = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(markdown.contains("| Campaign | Model | Engine | Scenario |"), "{markdown}");
    assert!(markdown.contains(&format!("| {} | scripted | reference | support-note | 3 |", s(&attack))), "{markdown}");
    assert!(markdown.contains(&format!("| {} | scripted | reference | support-note | 1 |", s(&control))), "{markdown}");
    // The report shows them apart too.
    let report = dir.path().join("report.html");
    let made = elengtis(dir.path(), &["report", "--input", s(&attack), "--input", s(&control), "--out", s(&report)]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let html = std::fs::read_to_string(&report).expect("report");
    for dir in [&attack, &control] {
        assert!(html.contains(&format!("data-campaign=\"{}\"", s(dir))), "{} not named in the report", s(dir));
    }

    // --pool: the original's way, one row.
    let pooled = dir.path().join("pooled");
    let output = elengtis(
        dir.path(),
        &["analyze", "--pool", "--input", s(&attack), "--input", s(&control), "--out", s(&pooled)],
    );
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let summary = read_json(&pooled.join("summary.json"));
    assert_eq!(proposed_by_campaign(&summary), [("<pooled>".to_owned(), "3/4".to_owned())]);
    assert_eq!(summary["pooled"], true);

    // Two runs of one campaign are one campaign: counted together without --pool.
    let again = dir.path().join("results-again");
    let output = elengtis(
        dir.path(),
        &["run", "--config", s(&attack.join("example/campaign.yaml")), "--out", s(&again), "--trials", "3"],
    );
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let both = dir.path().join("both");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&attack), "--input", s(&again), "--out", s(&both)]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let summary = read_json(&both.join("summary.json"));
    assert_eq!(summary["cells"].as_array().map(Vec::len), Some(1), "{summary}");
    assert_eq!(summary["cells"][0]["proposed"]["successes"], 6, "{summary}");
}

/// The lines `init` prints, run as printed, end with an analysis that shows the attack and
/// its control apart.
#[test]
fn the_analysis_init_prints_shows_the_attack_and_its_control_apart() {
    let dir = scratch();
    let db = dir.path().join("notes.db");
    let skeleton = dir.path().join("audit");
    let init = elengtis(dir.path(), &["init", "--out", s(&skeleton), "--", "elengtis-notes", "--db", s(&db)]);
    assert_eq!(init.status.code(), Some(0), "{}{}", stdout(&init), stderr(&init));
    let text = stdout(&init);
    let next: Vec<&str> = text.split("Next:\n").nth(1).expect("a Next: section").lines().collect();
    assert!(next.iter().any(|l| l.trim_start().starts_with("elengtis analyze")), "{text}");
    for line in next {
        let command = line.split("   #").next().unwrap_or_default().trim();
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let output = elengtis(dir.path(), &words);
        assert_eq!(output.status.code(), Some(0), "{command}: {}{}", stdout(&output), stderr(&output));
    }
    let summary = read_json(&skeleton.join("analysis/summary.json"));
    let mut shown = proposed_by_campaign(&summary);
    shown.sort();
    let results = |name: &str| s(&skeleton.join(name)).to_owned();
    assert_eq!(shown, [(results("results"), "1/1".to_owned()), (results("results-control"), "0/1".to_owned())]);
}
