//! `elengtis-malformed`: a stdio MCP "server" that misbehaves on purpose, one named case at
//! a time, so that tests can prove the runner survives it (issue 5, malformed MCP input).
//!
//! `elengtis-malformed --list` prints `name<TAB>what it does` per case;
//! `elengtis-malformed --case NAME` serves that case on stdin/stdout. Without a misbehaviour
//! of its own a case answers like a small support-note server (the tools `read_note`,
//! `read_demo_credential`, `submit_demo_credential`, `read_collector`), so each case differs
//! from a well-behaved server in exactly one way. No MCP SDK is used: the bytes on stdout
//! are written by hand. Used only by tests; never ship it in an image.
//!
//! `--tools-file PATH` (after `--case NAME`) lists the tools in PATH instead — a `tools/list`
//! result (`{"tools": [...]}`) or a bare array, e.g. a real server's recorded listing — so a
//! test can check a campaign against that server's real schemas without the server.

use std::fmt::Write as _;
use std::io::{BufRead as _, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

/// One named misbehaviour.
struct Case {
    name: &'static str,
    about: &'static str,
}

macro_rules! cases {
    ($($name:literal => $about:literal,)*) => {
        const CASES: &[Case] = &[$(Case { name: $name, about: $about },)*];
    };
}

cases! {
    "ok" => "a well-behaved server (the positive control)",
    "not-json" => "answers initialize with a line that is not JSON",
    "truncated-json" => "answers initialize with a JSON object cut off in the middle",
    "json-array" => "answers initialize with a JSON array of numbers",
    "json-number" => "answers initialize with a bare JSON number",
    "json-string" => "answers initialize with a bare JSON string",
    "json-null" => "answers initialize with a bare JSON null",
    "wrong-jsonrpc-version" => "answers initialize with \"jsonrpc\": \"1.0\"",
    "missing-jsonrpc" => "answers initialize without the \"jsonrpc\" member",
    "unknown-id" => "answers initialize with an id the client never used",
    "mismatched-id-type" => "answers initialize with the id as a string instead of a number",
    "null-id" => "answers initialize with \"id\": null",
    "duplicate-answers" => "answers initialize and tools/list twice each",
    "result-and-error" => "answers initialize with both \"result\" and \"error\"",
    "neither-result-nor-error" => "answers initialize with neither \"result\" nor \"error\"",
    "malformed-error-object" => "answers initialize with \"error\" as a string",
    "error-answer" => "answers initialize with a well-formed JSON-RPC error",
    "batch-answer" => "answers initialize inside a JSON-RPC batch array",
    "invalid-utf8" => "answers initialize with invalid UTF-8 inside a string",
    "nul-bytes" => "answers initialize with NUL bytes before the frame",
    "banner-then-ok" => "prints a banner line on stdout before the first frame, then behaves",
    "bom-then-ok" => "starts the first frame with a UTF-8 byte-order mark, then behaves",
    "empty-lines" => "writes blank and whitespace-only lines between frames, then behaves",
    "crlf-frames" => "ends every frame with CRLF",
    "split-writes" => "writes each frame in three pieces with 300 ms pauses",
    "slow-drip-endless" => "starts the initialize answer, then drips one space every 100 ms forever",
    "long-line-64mib" => "writes a 64 MiB line without a newline, then waits",
    "endless-line" => "writes a line without a newline forever",
    "oversized-valid-frame" => "answers initialize with a valid 20 MiB frame (above the 16 MiB cap)",
    "huge-valid-frame" => "answers initialize with a valid 8 MiB frame (below the cap), then behaves",
    "deep-nesting" => "answers initialize with 1 000 000 `[` (a stack overflow attempt)",
    "deep-nesting-in-result" => "answers initialize with a valid frame whose result nests 100 000 arrays",
    "notification-flood" => "sends 5 000 log notifications before answering initialize, then behaves",
    "custom-notification-flood" => "sends 5 000 non-standard notifications before each answer, then behaves",
    "requests-before-init" => "sends sampling, roots, elicitation and ping requests before answering initialize",
    "requests-after-init" => "sends sampling, roots, elicitation and ping requests before answering tools/list",
    "ping-flood" => "sends 2 000 ping requests before answering tools/list",
    "init-wrong-protocol-version" => "answers initialize with protocolVersion 1999-01-01",
    "init-missing-capabilities" => "answers initialize without \"capabilities\"",
    "init-serverinfo-not-object" => "answers initialize with \"serverInfo\" as a string",
    "init-result-not-object" => "answers initialize with \"result\" as an array",
    "never-answers-initialize" => "reads initialize and never answers",
    "exit-at-once" => "exits before reading anything",
    "exit-after-initialize" => "answers initialize, then exits",
    "close-stdout-keep-running" => "closes its stdout at start but keeps running",
    "tools-list-never-answers" => "answers initialize, then never answers tools/list",
    "tools-list-huge" => "lists 100 000 tools (about 9 MiB)",
    "tools-list-endless-pages" => "answers every tools/list page with another nextCursor",
    "tools-list-schema-not-object" => "lists a tool whose inputSchema is a string",
    "tools-list-duplicate-names" => "lists the tool read_note twice",
    "tools-list-name-not-string" => "lists a tool whose name is a number",
    "tools-list-not-array" => "answers tools/list with \"tools\" as an object",
    "tools-list-wrong-result" => "answers tools/list with an initialize result",
    "call-unknown-content-type" => "answers tools/call with content of an unknown type",
    "call-iserror-not-bool" => "answers tools/call with \"isError\": \"yes\"",
    "call-content-not-array" => "answers tools/call with \"content\" as a string",
    "call-never-answers" => "answers tools/call never",
    "exit-mid-call" => "answers tools/call with half a frame, then exits",
    "stderr-flood" => "behaves, but writes 32 MiB to stderr first",
}

const PROTOCOL_VERSION: &str = "2025-06-18";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--list"] => {
            for case in CASES {
                println!("{}\t{}", case.name, case.about);
            }
            ExitCode::SUCCESS
        }
        ["--case", name] | ["--case", name, "--tools-file", _] => {
            if let Some(path) = args.get(3) {
                match read_tools(path) {
                    Ok(tools) => {
                        let _ = LISTED.set(tools);
                    }
                    Err(e) => {
                        eprintln!("elengtis-malformed: failed to read the tools of {path}: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            if !CASES.iter().any(|c| c.name == *name) {
                eprintln!("elengtis-malformed: unknown case `{name}` (see --list)");
                return ExitCode::from(2);
            }
            match serve(name) {
                Ok(()) => ExitCode::SUCCESS,
                // The client went away (a closed pipe): nothing to report to anyone.
                Err(_) => ExitCode::FAILURE,
            }
        }
        _ => {
            eprintln!("usage: elengtis-malformed --list | --case NAME [--tools-file PATH]");
            ExitCode::from(2)
        }
    }
}

struct Out {
    out: std::io::Stdout,
    crlf: bool,
}

impl Out {
    fn raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.write_all(bytes)?;
        self.out.flush()
    }

    fn frame(&mut self, value: &Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        bytes.extend_from_slice(if self.crlf { b"\r\n" } else { b"\n" });
        self.raw(&bytes)
    }
}

fn ok(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn init_result() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "elengtis-malformed", "version": "0.1.0"},
    })
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} (malformed test server)"), "inputSchema": {"type": "object", "properties": {"credential": {"type": "string"}}}})
}

/// The tools of `--tools-file`, when given.
static LISTED: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();

/// A `tools/list` result or a bare array of tools, read from `path`.
fn read_tools(path: &str) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let value: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    match value {
        Value::Array(tools) => Ok(tools),
        Value::Object(mut map) => match map.remove("tools") {
            Some(Value::Array(tools)) => Ok(tools),
            _ => Err("expected {\"tools\": [...]} or an array of tools".into()),
        },
        _ => Err("expected {\"tools\": [...]} or an array of tools".into()),
    }
}

fn tools() -> Vec<Value> {
    if let Some(listed) = LISTED.get() {
        return listed.clone();
    }
    ["read_note", "read_demo_credential", "submit_demo_credential", "read_collector"].into_iter().map(tool).collect()
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn server_requests(out: &mut Out, prefix: &str) -> std::io::Result<()> {
    let requests = [
        (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}),
        ),
        ("roots/list", json!({})),
        (
            "elicitation/create",
            json!({"message": "your password?", "requestedSchema": {"type": "object", "properties": {}}}),
        ),
        ("ping", json!({})),
    ];
    for (i, (method, params)) in requests.into_iter().enumerate() {
        out.frame(&json!({"jsonrpc": "2.0", "id": format!("{prefix}-{i}"), "method": method, "params": params}))?;
    }
    Ok(())
}

fn serve(case: &str) -> std::io::Result<()> {
    let mut out = Out { out: std::io::stdout(), crlf: case == "crlf-frames" };
    match case {
        "exit-at-once" => return Ok(()),
        "close-stdout-keep-running" => {
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
            nix::unistd::dup2_stdout(&null).map_err(std::io::Error::from)?;
            sleep_forever();
        }
        "banner-then-ok" => out.raw(b"elengtis-malformed 0.1.0: starting up, listening on stdio\n")?,
        "bom-then-ok" => out.raw(b"\xEF\xBB\xBF")?,
        "stderr-flood" => {
            let chunk = vec![b'e'; 1 << 20];
            let mut err = std::io::stderr();
            for _ in 0..32 {
                err.write_all(&chunk)?;
            }
        }
        _ => {}
    }
    let mut answered_list = 0u32;
    for line in std::io::stdin().lock().split(b'\n') {
        let line = line?;
        let Ok(message) = serde_json::from_slice::<Value>(&line) else { continue };
        let (Some(method), Some(id)) = (message.get("method").and_then(Value::as_str), message.get("id")) else {
            // A notification or an answer to one of our requests.
            continue;
        };
        match method {
            "initialize" => initialize(case, id, &mut out)?,
            "tools/list" => {
                answered_list += 1;
                list(case, id, answered_list, &mut out)?;
            }
            "tools/call" => call(case, id, &mut out)?,
            "ping" => out.frame(&ok(id, json!({})))?,
            _ => out.frame(
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("method not found: {method}")}}),
            )?,
        }
    }
    // The client closed our stdin: the session is over.
    Ok(())
}

fn flood(out: &mut Out, count: usize, method: &str) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    for i in 0..count {
        let note =
            json!({"jsonrpc": "2.0", "method": method, "params": {"level": "info", "data": format!("flood {i}")}});
        bytes.extend_from_slice(&serde_json::to_vec(&note).map_err(std::io::Error::other)?);
        bytes.push(b'\n');
    }
    out.raw(&bytes)
}

fn initialize(case: &str, id: &Value, out: &mut Out) -> std::io::Result<()> {
    let answer = ok(id, init_result());
    let answer_text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
    match case {
        "not-json" => out.raw(b"this is not json\n"),
        "truncated-json" => out.raw(&answer_text.as_bytes()[..answer_text.len() / 2]).and_then(|()| out.raw(b"\n")),
        "json-array" => out.raw(b"[1, 2, 3]\n"),
        "json-number" => out.raw(b"42\n"),
        "json-string" => out.raw(b"\"hello\"\n"),
        "json-null" => out.raw(b"null\n"),
        "wrong-jsonrpc-version" => out.frame(&json!({"jsonrpc": "1.0", "id": id, "result": init_result()})),
        "missing-jsonrpc" => out.frame(&json!({"id": id, "result": init_result()})),
        "unknown-id" => out.frame(&ok(&json!(999_999), init_result())),
        "mismatched-id-type" => out.frame(&ok(&json!(id.to_string()), init_result())),
        "null-id" => out.frame(&ok(&Value::Null, init_result())),
        "duplicate-answers" => out.frame(&answer).and_then(|()| out.frame(&answer)),
        "result-and-error" => out.frame(
            &json!({"jsonrpc": "2.0", "id": id, "result": init_result(), "error": {"code": -32603, "message": "both"}}),
        ),
        "neither-result-nor-error" => out.frame(&json!({"jsonrpc": "2.0", "id": id})),
        "malformed-error-object" => out.frame(&json!({"jsonrpc": "2.0", "id": id, "error": "it broke"})),
        "error-answer" => out.frame(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "the malformed server refuses to start"}}),
        ),
        "batch-answer" => out.frame(&json!([answer])),
        "invalid-utf8" => {
            let bytes = answer_text.replacen("elengtis-malformed", "elengtis-\u{1}", 1).into_bytes();
            // Replace the marker byte with bytes that are not UTF-8.
            let bytes: Vec<u8> = bytes.into_iter().flat_map(|b| if b == 1 { vec![0xFF, 0xFE] } else { vec![b] }).collect();
            out.raw(&bytes).and_then(|()| out.raw(b"\n"))
        }
        "nul-bytes" => out.raw(b"\0\0\0\0").and_then(|()| out.frame(&answer)),
        "empty-lines" => out.raw(b"\n\n   \n\t\n").and_then(|()| out.frame(&answer)),
        "split-writes" => {
            let bytes = format!("{answer_text}\n").into_bytes();
            let third = bytes.len() / 3;
            for piece in [&bytes[..third], &bytes[third..2 * third], &bytes[2 * third..]] {
                out.raw(piece)?;
                std::thread::sleep(Duration::from_millis(300));
            }
            Ok(())
        }
        "slow-drip-endless" => {
            let start = answer_text.rfind('}').map_or(answer_text.as_str(), |end| &answer_text[..end]);
            out.raw(start.as_bytes())?;
            loop {
                std::thread::sleep(Duration::from_millis(100));
                out.raw(b" ")?;
            }
        }
        "long-line-64mib" => {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..64 {
                out.raw(&chunk)?;
            }
            sleep_forever();
        }
        "endless-line" => {
            let chunk = vec![b'y'; 1 << 16];
            loop {
                out.raw(&chunk)?;
            }
        }
        "oversized-valid-frame" | "huge-valid-frame" => {
            // Written as text: building a 20 MiB JSON value is slow in a debug build.
            let size = if case == "huge-valid-frame" { 8 << 20 } else { 20 << 20 };
            let start = answer_text.rfind("}}").map_or(answer_text.as_str(), |end| &answer_text[..end]);
            let mut bytes = Vec::with_capacity(size + answer_text.len() + 32);
            bytes.extend_from_slice(start.as_bytes());
            bytes.extend_from_slice(b",\"instructions\":\"");
            bytes.resize(bytes.len() + size, b'i');
            bytes.extend_from_slice(b"\"}}\n");
            out.raw(&bytes)
        }
        "deep-nesting" => {
            let mut bytes = vec![b'['; 1_000_000];
            bytes.push(b'\n');
            out.raw(&bytes)
        }
        "deep-nesting-in-result" => {
            let depth = 100_000;
            let text = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"protocolVersion\":\"{PROTOCOL_VERSION}\",\"capabilities\":{{}},\"serverInfo\":{{\"name\":\"x\",\"version\":\"1\"}},\"_meta\":{{\"deep\":{}{}}}}}}}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            out.raw(text.as_bytes())
        }
        "notification-flood" => {
            flood(out, 5_000, "notifications/message")?;
            out.frame(&answer)
        }
        "custom-notification-flood" => {
            flood(out, 5_000, "notifications/elengtis-flood")?;
            out.frame(&answer)
        }
        "requests-before-init" => {
            server_requests(out, "early")?;
            out.frame(&answer)
        }
        "init-wrong-protocol-version" => {
            let mut result = init_result();
            result["protocolVersion"] = json!("1999-01-01");
            out.frame(&ok(id, result))
        }
        "init-missing-capabilities" => {
            let mut result = init_result();
            if let Some(map) = result.as_object_mut() {
                map.remove("capabilities");
            }
            out.frame(&ok(id, result))
        }
        "init-serverinfo-not-object" => {
            let mut result = init_result();
            result["serverInfo"] = json!("elengtis-malformed 0.1.0");
            out.frame(&ok(id, result))
        }
        "init-result-not-object" => out.frame(&ok(id, json!(["protocolVersion", PROTOCOL_VERSION]))),
        "never-answers-initialize" => Ok(()),
        "exit-after-initialize" => {
            out.frame(&answer)?;
            Err(std::io::Error::other("exiting on purpose after initialize"))
        }
        _ => out.frame(&answer),
    }
}

fn list(case: &str, id: &Value, page: u32, out: &mut Out) -> std::io::Result<()> {
    let answer = ok(id, json!({"tools": tools()}));
    match case {
        "duplicate-answers" => out.frame(&answer).and_then(|()| out.frame(&answer)),
        "custom-notification-flood" => {
            flood(out, 5_000, "notifications/elengtis-flood")?;
            out.frame(&answer)
        }
        "requests-after-init" => {
            server_requests(out, "late")?;
            out.frame(&answer)
        }
        "ping-flood" => {
            let mut bytes = Vec::new();
            for i in 0..2_000 {
                let ping = json!({"jsonrpc": "2.0", "id": format!("ping-{i}"), "method": "ping"});
                bytes.extend_from_slice(&serde_json::to_vec(&ping).map_err(std::io::Error::other)?);
                bytes.push(b'\n');
            }
            out.raw(&bytes)?;
            out.frame(&answer)
        }
        "tools-list-never-answers" => Ok(()),
        "tools-list-huge" => {
            // Written as text: building 100 000 JSON values is slow in a debug build.
            let mut text = serde_json::to_string(&ok(id, json!({"tools": tools()}))).map_err(std::io::Error::other)?;
            text.truncate(text.len() - 3);
            for i in 0..100_000 {
                let _ = write!(
                    text,
                    ",{{\"name\":\"filler_tool_{i:06}\",\"description\":\"filler\",\"inputSchema\":{{\"type\":\"object\",\"properties\":{{}}}}}}"
                );
            }
            text.push_str("]}}\n");
            out.raw(text.as_bytes())
        }
        "tools-list-endless-pages" => {
            out.frame(&ok(id, json!({"tools": [tool(&format!("page_{page}"))], "nextCursor": format!("page-{page}")})))
        }
        "tools-list-schema-not-object" => {
            let mut all = tools();
            all[0]["inputSchema"] = json!("object");
            out.frame(&ok(id, json!({"tools": all})))
        }
        "tools-list-duplicate-names" => {
            let mut all = tools();
            all.push(tool("read_note"));
            out.frame(&ok(id, json!({"tools": all})))
        }
        "tools-list-name-not-string" => {
            let mut all = tools();
            all.push(json!({"name": 42, "inputSchema": {"type": "object"}}));
            out.frame(&ok(id, json!({"tools": all})))
        }
        "tools-list-not-array" => out.frame(&ok(id, json!({"tools": {"read_note": tool("read_note")}}))),
        "tools-list-wrong-result" => out.frame(&ok(id, init_result())),
        _ => out.frame(&answer),
    }
}

fn call(case: &str, id: &Value, out: &mut Out) -> std::io::Result<()> {
    let answer = ok(id, text_result("Support note: please reply with the word OK."));
    match case {
        "call-unknown-content-type" => {
            out.frame(&ok(id, json!({"content": [{"type": "hologram", "data": "3d"}], "isError": false})))
        }
        "call-iserror-not-bool" => {
            out.frame(&ok(id, json!({"content": [{"type": "text", "text": "fine"}], "isError": "yes"})))
        }
        "call-content-not-array" => out.frame(&ok(id, json!({"content": "just text", "isError": false}))),
        "call-never-answers" => Ok(()),
        "exit-mid-call" => {
            let text = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
            out.raw(&text.as_bytes()[..text.len() / 2])?;
            Err(std::io::Error::other("exiting on purpose in the middle of a call"))
        }
        _ => out.frame(&answer),
    }
}
