//! The tar reader against what a hostile container can put at a path, and the response the
//! check's assertions see.

use serde_json::{Value, json};
use tar::EntryType::{self, Block, Char, Directory, Fifo, Link, Regular, Symlink};

use super::{
    DirEntry, Fetched, FileError, FileLimits, Found, Needs, check_path, keep, read_archive, response, sha256_hex,
};

/// Appends one entry whose name is written into the header as raw bytes (so names a
/// well-behaved builder refuses, like `../x` or `/etc/passwd`, can be made).
fn raw_entry(builder: &mut tar::Builder<Vec<u8>>, name: &[u8], kind: EntryType, data: &[u8]) {
    let mut header = tar::Header::new_gnu();
    header.as_gnu_mut().expect("gnu header").name[..name.len()].copy_from_slice(name);
    header.set_entry_type(kind);
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    if kind == Symlink || kind == Link {
        header.set_link_name("/etc/passwd").expect("link name");
    }
    header.set_cksum();
    builder.append(&header, data).expect("append");
}

/// Entries of a test archive: name, type, content.
type Entries<'a> = &'a [(&'a str, EntryType, &'a [u8])];

fn archive(entries: Entries<'_>) -> Fetched {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, data) in entries {
        raw_entry(&mut builder, name.as_bytes(), *kind, data);
    }
    Fetched::Tar(builder.into_inner().expect("finish"))
}

fn limits() -> FileLimits {
    FileLimits { max_file_bytes: 1024, max_entries: 3, max_archive_bytes: 64 * 1024 }
}

fn file(path: &str, fetched: &Fetched) -> Result<Found, FileError> {
    read_archive(path, fetched, false, &limits())
}

fn listing(path: &str, fetched: &Fetched) -> Result<Found, FileError> {
    read_archive(path, fetched, true, &limits())
}

#[test]
fn a_regular_file_is_read() {
    let tar = archive(&[("HEAD.json", Regular, b"{\"message\": \"hi\"}")]);
    assert_eq!(file("/data/repo/HEAD.json", &tar).expect("file"), Found::File(b"{\"message\": \"hi\"}".to_vec()));
    assert_eq!(file("/data/x", &archive(&[("x", Regular, b"")])).expect("empty"), Found::File(Vec::new()));
    assert_eq!(file("/data/x", &Fetched::Missing).expect("missing"), Found::Missing);
}

#[test]
fn pax_headers_are_understood() {
    let mut builder = tar::Builder::new(Vec::new());
    builder.append_pax_extensions([("mtime", b"1700000000.5".as_slice())]).expect("pax");
    raw_entry(&mut builder, b"log", Regular, b"line\n");
    let tar = Fetched::Tar(builder.into_inner().expect("finish"));
    assert_eq!(file("/data/log", &tar).expect("file"), Found::File(b"line\n".to_vec()));
}

#[test]
fn links_directories_and_devices_are_refused_as_files() {
    for (kind, what) in [
        (Symlink, "a symbolic link"),
        (Link, "a hard link"),
        (Directory, "a directory"),
        (Char, "a device"),
        (Block, "a device"),
        (Fifo, "a FIFO"),
    ] {
        let error = file("/data/leak.txt", &archive(&[("leak.txt", kind, b"")])).expect_err(what);
        assert_eq!(error.kind_name(), "not_a_regular_file", "{error}");
        assert!(error.to_string().starts_with(&format!("failed to read /data/leak.txt: it is {what}; ")), "{error}");
    }
    let dir = file("/data/repo", &archive(&[("repo/", Directory, b"")])).expect_err("directory");
    assert!(dir.to_string().contains("set `list: true` to list a directory"), "{dir}");
}

#[test]
fn other_names_second_entries_and_traversal_are_refused() {
    let cases: [(Entries<'_>, &str); 5] = [
        (&[("shadow", Regular, b"a")], "it holds `shadow`, not `leak.txt`"),
        (&[("../leak.txt", Regular, b"a")], "it holds `../leak.txt`, not `leak.txt`"),
        (&[("/etc/leak.txt", Regular, b"a")], "it holds `/etc/leak.txt`, not `leak.txt`"),
        (&[("leak.txt", Regular, b"a"), ("leak.txt", Regular, b"b")], "the archive holds more than one entry"),
        (&[], "the archive holds no file"),
    ];
    for (entries, detail) in cases {
        let error = file("/data/leak.txt", &archive(entries)).expect_err(detail);
        assert_eq!(error, FileError::UnsafeArchive { path: "/data/leak.txt".into(), detail: detail.into() });
        assert_eq!(error.kind_name(), "unsafe_archive");
    }
    let garbage = file("/data/leak.txt", &Fetched::Tar(b"not a tar at all, just some bytes".to_vec()));
    assert!(matches!(garbage, Err(FileError::BadArchive { .. }) | Err(FileError::UnsafeArchive { .. })), "{garbage:?}");
}

#[test]
fn oversized_files_and_archives_are_refused() {
    let at_cap = archive(&[("big", Regular, &[7; 1024])]);
    assert_eq!(file("/data/big", &at_cap).expect("at the cap"), Found::File(vec![7; 1024]));
    let over = archive(&[("big", Regular, &[7; 1025])]);
    let error = file("/data/big", &over).expect_err("over the cap");
    assert_eq!(error.kind_name(), "too_large");
    assert_eq!(error.to_string(), "failed to read /data/big: the file is 1025 bytes, larger than the 1024-byte cap");
    let streamed = file("/data/big", &Fetched::OverCap { cap: 1024 + super::TAR_OVERHEAD }).expect_err("over cap");
    assert_eq!(streamed.to_string(), "failed to read /data/big: the file is larger than the 1024-byte cap");
    let dir = listing("/data/repo", &Fetched::OverCap { cap: 65536 }).expect_err("listing over cap");
    assert_eq!(dir.kind_name(), "too_large");
    assert!(dir.to_string().contains("65536-byte cap"), "{dir}");
    assert_eq!(limits().archive_cap(false), 1024 + super::TAR_OVERHEAD);
    assert_eq!(limits().archive_cap(true), 64 * 1024);
}

#[test]
fn a_listing_keeps_names_sizes_and_types_only() {
    let tar = archive(&[
        ("repo/", Directory, b""),
        ("repo/b.txt", Regular, b"hello"),
        ("repo/objects/", Directory, b""),
        ("repo/latest", Symlink, b""),
    ]);
    let Found::Listing(entries) = listing("/data/repo", &tar).expect("listing") else { panic!("not a listing") };
    assert_eq!(
        entries,
        [
            DirEntry { name: "b.txt".into(), kind: "file", size: 5 },
            DirEntry { name: "latest".into(), kind: "symlink", size: 0 },
            DirEntry { name: "objects".into(), kind: "directory", size: 0 },
        ]
    );
    let doc = response("/data/repo", &Found::Listing(entries), Needs::default()).expect("response");
    assert_eq!(doc["count"], 3);
    assert_eq!(doc["entries"][0], json!({"name": "b.txt", "type": "file", "size": 5}));
    assert!(!doc.to_string().contains("hello") && !doc.to_string().contains("passwd"), "{doc}");
}

#[test]
fn a_listing_with_too_many_entries_is_refused() {
    let mut entries: Vec<(String, EntryType, &[u8])> = vec![("repo/".into(), Directory, b"")];
    entries.extend((0..4).map(|i| (format!("repo/{i}"), Regular, b"x".as_slice())));
    let refs: Vec<(&str, EntryType, &[u8])> = entries.iter().map(|(n, k, d)| (n.as_str(), *k, *d)).collect();
    let error = listing("/data/repo", &archive(&refs)).expect_err("4 > 3");
    assert_eq!(error, FileError::TooManyEntries { path: "/data/repo".into(), max: 3 });
    assert_eq!(error.to_string(), "failed to list /data/repo: it has more than 3 entries");
}

#[test]
fn a_listing_refuses_entries_outside_the_directory() {
    for (bad, needle) in [
        ("repo/../etc/passwd", "has an empty, `.` or `..` component"),
        ("repo/a/../../x", "has an empty, `.` or `..` component"),
        ("repo//x", "has an empty, `.` or `..` component"),
        ("other/x", "lies outside `repo/`"),
        ("/etc/passwd", "lies outside `repo/`"),
        ("repox", "lies outside `repo/`"),
    ] {
        let error = listing("/data/repo", &archive(&[("repo/", Directory, b""), (bad, Regular, b"")])).expect_err(bad);
        assert_eq!(error.kind_name(), "unsafe_archive", "{bad}: {error}");
        assert!(error.to_string().contains(needle), "{bad}: {error}");
    }
    let not_dir = listing("/data/repo", &archive(&[("repo", Regular, b"x")])).expect_err("a file");
    assert_eq!(
        not_dir.to_string(),
        "failed to list /data/repo: it is a regular file, not a directory (drop `list: true` to read a file)"
    );
    let link = listing("/data/repo", &archive(&[("repo", Symlink, b"")])).expect_err("a link");
    assert_eq!(link.kind_name(), "not_a_directory");
    let renamed = listing("/data/repo", &archive(&[("etc/", Directory, b"")])).expect_err("renamed");
    assert_eq!(renamed.kind_name(), "unsafe_archive");
}

#[test]
fn paths_must_be_plain_and_absolute() {
    assert_eq!(check_path("/data/repo/HEAD.json").expect("ok"), "HEAD.json");
    assert_eq!(check_path("/x").expect("ok"), "x");
    for bad in ["data/x", "/data/", "/data//x", "/data/../etc/passwd", "/./x", "/", "", "/a\0b"] {
        let error = check_path(bad).expect_err(bad);
        assert_eq!(error.kind_name(), "bad_path");
        assert!(error.to_string().starts_with(&format!("failed to accept the path `{bad}`: it ")), "{error}");
    }
}

#[test]
fn the_response_carries_the_content_its_hash_and_the_parsed_json_when_asked() {
    let bytes = br#"{"message": "backup CANARY-1", "files": ["leak.txt"]}"#;
    let found = Found::File(bytes.to_vec());
    let plain = response("/data/repo/HEAD.json", &found, Needs::default()).expect("response");
    assert_eq!(plain["exists"], true);
    assert_eq!(plain["type"], "file");
    assert_eq!(plain["size"], bytes.len());
    assert_eq!(plain["sha256"], sha256_hex(bytes));
    assert_eq!(plain["text"], std::str::from_utf8(bytes).expect("utf-8"));
    assert!(plain.get("json").is_none(), "parsed only when something points into it: {plain}");
    let needs = Needs::from_pointers(["/json/message", "/sha256"]);
    assert_eq!(needs, Needs { exists: false, json: true });
    let parsed = response("/data/repo/HEAD.json", &found, needs).expect("response");
    assert_eq!(parsed["json"]["files"][0], "leak.txt");
    // The well-known SHA-256 of "abc".
    assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

#[test]
fn binary_content_is_kept_as_hex() {
    let doc = response("/data/blob", &Found::File(vec![0xff, 0x00, 0x10]), Needs::default()).expect("response");
    assert_eq!(doc["text"], Value::Null);
    assert_eq!(doc["content_hex"], "ff0010");
}

#[test]
fn absence_is_an_answer_only_when_asserted() {
    let error = response("/data/repo/leak.txt", &Found::Missing, Needs::default()).expect_err("missing");
    assert_eq!(error.kind_name(), "missing");
    assert_eq!(
        error.to_string(),
        "failed to read /data/repo/leak.txt: there is no file at /data/repo/leak.txt in the container (to check that it is absent, assert on `/exists`)"
    );
    let needs = Needs::from_pointers(["/exists", "/text"]);
    let doc = response("/data/repo/leak.txt", &Found::Missing, needs).expect("absent");
    assert_eq!(doc, json!({"path": "/data/repo/leak.txt", "exists": false}));
}

#[test]
fn a_pointer_into_a_file_that_is_not_json_is_an_error() {
    let needs = Needs::from_pointers(["/json"]);
    let error = response("/data/notes.txt", &Found::File(b"not json".to_vec()), needs).expect_err("not json");
    assert_eq!(error.kind_name(), "not_json");
    assert!(error.to_string().starts_with("failed to parse /data/notes.txt as JSON"), "{error}");
    assert_eq!(Needs::from_pointers(["/jsonish", "/text", "", "exists"]), Needs::default());
}

#[test]
fn the_kept_copy_is_written_once() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let kept = keep(&dir.path().join("check"), "leak.txt", b"secret").expect("kept");
    assert_eq!(std::fs::read(&kept).expect("read"), b"secret");
    let again = keep(&dir.path().join("check"), "leak.txt", b"other").expect_err("exists");
    assert_eq!(again.kind_name(), "io");
}
