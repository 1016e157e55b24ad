//! Property tests ("fuzzing" in CI, issue 5) over what an untrusted server or a user's file
//! can feed the runner:
//!
//! - arbitrary bytes and mutated JSON-RPC frames through the bounded frame reader
//!   (`toolhost::mcp::FrameGuard`) and then rmcp's own line decoding: no panic, nothing longer than
//!   one frame handed on, every over-long line reported, rmcp's decoder ends;
//! - mutated packaged campaign and scenario files through the loaders: no panic, and every
//!   error names its file and, for a file that does not parse, the line.
//!
//! Case counts keep the whole file well under 30 s in a debug build.

use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use elengtis::toolhost::mcp::{FrameGuard, Limits};
use elengtis_core::format::campaign::Campaign;
use elengtis_core::format::scenario::Scenario;
use elengtis_core::format::{LoadError, parse_document, parse_document_all};
use elengtis_core::load::load_campaign;
use elengtis_core::validate::LoadOptions;
use proptest::prelude::*;
use rmcp::transport::Transport as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};

const FRAME_BYTES: usize = 512;

fn limits() -> Limits {
    Limits { frame_bytes: FRAME_BYTES, frame_values: 64, ..Limits::default() }
}

/// Hands out its bytes at most `chunk` at a time, so frames split across reads.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let n = this.chunk.min(buf.remaining()).min(this.data.len() - this.at);
        buf.put_slice(&this.data[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Valid frames a server sends, as mutation seeds.
fn seed_frames() -> Vec<u8> {
    let frames = [
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_note","inputSchema":{"type":"object"}}]}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":"s-1","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}"#,
    ];
    frames.join("\n").into_bytes()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Repeat(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (
            any::<usize>(),
            proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'\n'), Just(b'{'), Just(b'[')], 0..16)
        )
            .prop_map(|(i, bytes)| Mutation::Insert(i, bytes)),
        (any::<usize>(), 1usize..200, 1usize..8).prop_map(|(i, n, times)| Mutation::Repeat(i, n, times)),
    ]
}

fn mutate(mut data: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = data.len().max(1);
        match m {
            Mutation::Flip(i, b) => {
                if !data.is_empty() {
                    data[i % len] = *b;
                }
            }
            Mutation::Delete(i, n) => {
                let start = (i % len).min(data.len());
                let end = (start + n).min(data.len());
                data.drain(start..end);
            }
            Mutation::Insert(i, bytes) => {
                let at = (i % len).min(data.len());
                data.splice(at..at, bytes.iter().copied());
            }
            Mutation::Repeat(i, n, times) => {
                let start = (i % len).min(data.len());
                let end = (start + n).min(data.len());
                let piece = data[start..end].to_vec();
                for _ in 0..*times {
                    data.splice(end..end, piece.iter().copied());
                }
            }
        }
    }
    data
}

/// Through the guard alone: what it hands on is a prefix of the input, every line of it is
/// within the limit, and an over-long line in the input is always reported.
fn check_guard(input: &[u8], chunk: usize) -> Result<(), TestCaseError> {
    let rt = runtime();
    let mut guard = FrameGuard::new(Chunked { data: input.to_vec(), at: 0, chunk }, &limits());
    let mut out = Vec::new();
    let mut buf = [0u8; 97];
    let ended_with_error = rt.block_on(async {
        loop {
            match guard.read(&mut buf).await {
                Ok(0) => break false,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => break true,
            }
        }
    });
    prop_assert!(input.starts_with(&out), "the guard handed on bytes that were not sent");
    prop_assert_eq!(ended_with_error, guard.problem().is_some());
    if guard.problem().is_none() {
        prop_assert_eq!(&out[..], input, "an accepted stream is handed on whole");
    }
    for line in out.split(|b| *b == b'\n') {
        prop_assert!(line.len() <= FRAME_BYTES, "a {} byte line was handed on", line.len());
    }
    if input.split(|b| *b == b'\n').any(|line| line.len() > FRAME_BYTES) {
        let problem = guard.problem().unwrap_or_default().to_owned();
        prop_assert!(!problem.is_empty(), "an over-long line was not reported");
    }
    Ok(())
}

/// Through the guard and rmcp's line transport: decoding ends, with at most one message per
/// line sent.
fn check_rmcp(input: &[u8], chunk: usize) -> Result<(), TestCaseError> {
    let rt = runtime();
    let guard = FrameGuard::new(Chunked { data: input.to_vec(), at: 0, chunk }, &limits());
    let mut transport =
        rmcp::transport::async_rw::AsyncRwTransport::<rmcp::RoleClient, _, _>::new_client(guard, tokio::io::sink());
    let lines = input.split(|b| *b == b'\n').count();
    let received = rt.block_on(async {
        let mut received = 0;
        while transport.receive().await.is_some() {
            received += 1;
        }
        received
    });
    prop_assert!(received <= lines, "{received} messages from {lines} lines");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_through_the_frame_guard(input in proptest::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..200) {
        check_guard(&input, chunk)?;
        check_rmcp(&input, chunk)?;
    }

    #[test]
    fn mutated_frames_through_the_frame_guard(mutations in proptest::collection::vec(mutation(), 0..6), chunk in 1usize..300) {
        let input = mutate(seed_frames(), &mutations);
        check_guard(&input, chunk)?;
        check_rmcp(&input, chunk)?;
    }

    #[test]
    fn deeply_nested_and_wide_frames_are_bounded(depth in 0usize..2000, width in 0usize..400) {
        let mut input = Vec::new();
        input.extend(std::iter::repeat_n(b'[', depth));
        input.extend(std::iter::repeat_n(b']', depth));
        input.push(b'\n');
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"result":{"tools":["#);
        for i in 0..width {
            if i > 0 {
                input.push(b',');
            }
            input.extend_from_slice(b"1");
        }
        input.extend_from_slice(b"]}}\n");
        check_guard(&input, 64)?;
        check_rmcp(&input, 64)?;
    }
}

/// The packaged campaign and scenario files, as mutation seeds.
fn packaged(kind: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/examples");
    let mut files = Vec::new();
    for example in std::fs::read_dir(&root).expect("list examples").flatten() {
        for file in std::fs::read_dir(example.path()).expect("list example").flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && name.starts_with("campaign") == (kind == "campaign") {
                let text = std::fs::read_to_string(file.path()).expect("read example");
                files.push((format!("{}/{name}", example.file_name().to_string_lossy()), text));
            }
        }
    }
    files.sort();
    files
}

fn text_mutation() -> impl Strategy<Value = Mutation> {
    let fragment = prop_oneof![
        Just(b": ".to_vec()),
        Just(b"\n- ".to_vec()),
        Just(b"&a ".to_vec()),
        Just(b"*a".to_vec()),
        Just(b"{".to_vec()),
        Just(b"[".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\t".to_vec()),
        Just(b"!!binary ".to_vec()),
        Just(b"<<: *a\n".to_vec()),
        Just(b"{env: X}".to_vec()),
        Just(b"---\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 1..8),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0usize..40).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), fragment).prop_map(|(i, bytes)| Mutation::Insert(i, bytes)),
        (any::<usize>(), 1usize..80, 1usize..4).prop_map(|(i, n, times)| Mutation::Repeat(i, n, times)),
    ]
}

/// A parse error names the file and a line; reporting every problem starts with the first
/// and names the file and a line in each.
fn check_parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<(), TestCaseError> {
    let first = parse_document::<T>(path, text).err();
    if let Some(d) = &first {
        prop_assert_eq!(&d.file, path);
        prop_assert!(d.line >= 1, "no line in `{}`", d);
        prop_assert!(d.to_string().starts_with(&format!("{}:{}:", path.display(), d.line)), "{}", d);
    }
    let all = parse_document_all::<T>(path, text).err();
    prop_assert_eq!(first.as_ref(), all.as_ref().and_then(|all| all.first()));
    for d in all.iter().flatten() {
        prop_assert_eq!(&d.file, path);
        prop_assert!(d.line >= 1, "no line in `{}`", d);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_campaigns_load_or_name_file_and_line(
        pick in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(text_mutation(), 1..5),
    ) {
        let campaigns = packaged("campaign");
        let (name, text) = &campaigns[pick.index(campaigns.len())];
        let mutated = String::from_utf8_lossy(&mutate(text.clone().into_bytes(), &mutations)).into_owned();
        let dir = tempfile::tempdir().expect("temp dir");
        let example = name.split('/').next().unwrap_or_default();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/examples").join(example);
        for file in std::fs::read_dir(&source).expect("list").flatten() {
            std::fs::copy(file.path(), dir.path().join(file.file_name())).expect("copy");
        }
        let path = dir.path().join("campaign.yaml");
        std::fs::write(&path, &mutated).expect("write");
        check_parse::<Campaign>(&path, &mutated)?;
        match load_campaign(&path, &LoadOptions::default()) {
            Ok(_) => {}
            Err(LoadError::Read { path: read, .. }) => prop_assert!(read.starts_with(dir.path())),
            Err(LoadError::Invalid(diagnostics)) => {
                prop_assert!(!diagnostics.is_empty());
                for d in &diagnostics {
                    prop_assert!(d.file.starts_with(dir.path()), "{}", d);
                    prop_assert!(d.to_string().starts_with(&d.file.display().to_string()), "{}", d);
                }
            }
        }
    }

    #[test]
    fn mutated_scenarios_parse_or_name_file_and_line(
        pick in any::<prop::sample::Index>(),
        mutations in proptest::collection::vec(text_mutation(), 1..5),
    ) {
        let scenarios = packaged("scenario");
        let (_, text) = &scenarios[pick.index(scenarios.len())];
        let mutated = String::from_utf8_lossy(&mutate(text.clone().into_bytes(), &mutations)).into_owned();
        check_parse::<Scenario>(Path::new("scenario.yaml"), &mutated)?;
    }

    #[test]
    fn arbitrary_text_as_a_campaign_or_scenario(text in "[ -~\n\t]{0,400}") {
        check_parse::<Campaign>(Path::new("campaign.yaml"), &text)?;
        check_parse::<Scenario>(Path::new("scenario.yaml"), &text)?;
    }
}
