//! Live models driving isolated-container trials: every engine over the OpenAI-compatible and
//! Anthropic wires (against the scripted model server on 127.0.0.1, reached by the runner —
//! the container never sees the model), then replayed offline from the recorded fixtures.

use serde_json::{Value, json};

use elengtis_tests::model_server::ModelServer;
use elengtis_tests::{
    FixtureMcp, bundled_images, docker_or_skip, elengtis_cmd, fixture_image, fixture_target, read_json, rows, scratch,
    stderr, support_note_campaign, workspace, write,
};

fn comply() -> Value {
    let text = std::fs::read_to_string(workspace().join("reference-targets/model-server/scripts/comply.json"))
        .expect("the comply script");
    serde_json::from_str(&text).expect("JSON")
}

/// The row without what differs between a run and its replay.
fn comparable(mut row: Value) -> Value {
    for key in ["run_id", "attempt_id", "duration_ms", "evidence_sha256", "prev_row_sha256"] {
        if let Some(r) = row.as_object_mut() {
            r.remove(key);
        }
    }
    row
}

#[test]
fn every_engine_drives_an_isolated_trial_over_every_wire_and_replays() {
    if !docker_or_skip("every_engine_drives_an_isolated_trial_over_every_wire_and_replays") {
        return;
    }
    bundled_images();
    let dir = scratch();
    let server = ModelServer::start(dir.path(), &comply(), &[]);
    write(dir.path(), "support-note.yaml", crate::SUPPORT_NOTE_NO_CHECKS);
    let target = fixture_target("iso", &fixture_image(), FixtureMcp::Stdio, 10001, &[]);
    let base = support_note_campaign(1, &[target]);
    let mut runs = Vec::new();
    for (wire, provider) in [
        ("openai_compatible", json!({"type": "openai_compatible", "base_url": format!("http://{}/v1", server.addr)})),
        ("anthropic", json!({"type": "anthropic", "base_url": format!("http://{}", server.addr)})),
    ] {
        let text = format!("{base}engine: reference\nmodel: scripted-comply\nprovider: {provider}\n");
        write(dir.path(), &format!("{wire}.yaml"), &text);
        for engine in ["reference", "graph", "create_agent", "langchain"] {
            runs.push((wire, engine));
        }
    }
    for (wire, engine) in &runs {
        let out = format!("{wire}-{engine}");
        let fixtures = format!("fixtures-{wire}-{engine}");
        let args = ["run", "--config", &format!("{wire}.yaml"), "--out", &out, "--engine", engine];
        let recorded = elengtis_cmd(dir.path(), &args)
            .args(["--record-fixtures", &fixtures])
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .output()
            .expect("elengtis");
        assert_eq!(recorded.status.code(), Some(0), "{wire} {engine}: {}", stderr(&recorded));
        let row = rows(&dir.path().join(&out).join("runs.jsonl")).remove(0);
        assert_eq!(
            (row["proposed"].clone(), row["termination"].clone()),
            (json!(true), json!("model_stop")),
            "{row:#}"
        );
        assert_eq!(row["engine"], *engine);
        let evidence = read_json(&dir.path().join(&out).join(row["evidence"].as_str().expect("a file")));
        let execution = &evidence["target_execution"];
        assert_eq!(
            (execution["isolation"].clone(), execution["hardening_asserted"].clone()),
            (json!("isolated_container"), json!(true))
        );
        assert!(
            evidence["exchanges"].as_array().is_some_and(|x| x.len() == 4 && x.iter().all(|e| e["provider"] == *wire)),
            "{wire} {engine}: {:#}",
            evidence["exchanges"]
        );
        // Replayed offline (no key), in a fresh container: the same row.
        let replay_out = format!("{out}-replayed");
        let args = ["run", "--config", &format!("{wire}.yaml"), "--out", &replay_out, "--engine", engine];
        let replayed = elengtis_cmd(dir.path(), &args)
            .args(["--replay-fixtures", &fixtures])
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .expect("elengtis");
        assert_eq!(replayed.status.code(), Some(0), "{wire} {engine} replayed: {}", stderr(&replayed));
        let again = rows(&dir.path().join(&replay_out).join("runs.jsonl")).remove(0);
        assert_eq!(comparable(again), comparable(row), "{wire} {engine}");
    }
    assert_eq!(server.requests().len(), 4 * runs.len(), "every live trial made its four requests; replays none");
}
