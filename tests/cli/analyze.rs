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

#[test]
fn analyze_refuses_the_same_run_twice() {
    let dir = scratch();
    let run = run_example(dir.path(), "support-note");
    let out = dir.path().join("analysis");
    let output = elengtis(dir.path(), &["analyze", "--input", s(&run), "--input", s(&run), "--out", s(&out)]);
    assert_ne!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    assert!(stderr(&output).contains("also given"), "{}", stderr(&output));
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
    let args = ["analyze", "--input", s(&example), "--input", s(&mixed), "--input", s(&ours), "--out", s(&out)];
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
