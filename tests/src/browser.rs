//! Headless Chromium for the report's browser tests: find it (failing in CI, skipping with a
//! reason elsewhere), dump the DOM after the page's scripts ran, take a screenshot, and read
//! elements' attributes out of the serialized DOM.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::ChildGuard;

/// How long one Chromium invocation may take.
const DEADLINE: Duration = Duration::from_secs(120);

/// The Chromium executable: `ELENGTIS_CHROMIUM` when set, else the first of `chromium`,
/// `chromium-browser`, `google-chrome` on `PATH`. Without one, the test fails when `CI` is set
/// (the browser tests must run in CI; `.ci/run` installs Debian's `chromium`) and is skipped
/// with a printed reason otherwise.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("ELENGTIS_CHROMIUM").map(PathBuf::from).filter(|p| p.is_file()).or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| ["chromium", "chromium-browser", "google-chrome"].map(|name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    });
    if found.is_some() {
        return found;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no Chromium (chromium, chromium-browser or google-chrome on PATH, or ELENGTIS_CHROMIUM), and CI is set: the browser tests must run in CI (Debian: apt-get install chromium)"
    );
    eprintln!(
        "skipping {test}: no Chromium on PATH (install Debian's chromium, or set ELENGTIS_CHROMIUM; set CI to make this a failure)"
    );
    None
}

/// A headless Chromium command with a profile of its own (so parallel tests do not share one).
fn headless(chromium: &Path, profile: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .stdin(Stdio::null());
    cmd
}

/// Runs Chromium with its output in files under `profile` (a large DOM would fill a pipe
/// nobody reads while waiting), within the deadline; returns stdout.
fn run(mut cmd: Command, profile: &Path) -> Vec<u8> {
    let stdout_path = profile.join("stdout");
    let stderr_path = profile.join("stderr");
    cmd.stdout(std::fs::File::create(&stdout_path).expect("failed to create chromium's stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("failed to create chromium's stderr file"));
    let child = ChildGuard::new(cmd.spawn().expect("failed to start chromium"));
    let out = child.wait_output(DEADLINE);
    assert!(
        out.status.success(),
        "chromium failed ({:?}):\n{}",
        out.status,
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    std::fs::read(&stdout_path).expect("failed to read chromium's output")
}

/// The DOM of `url` after its scripts ran (`--dump-dom`), with `extra` flags, and the wall
/// time Chromium took.
pub fn dump_dom(chromium: &Path, url: &str, extra: &[&str]) -> (String, Duration) {
    let profile = crate::scratch();
    let mut cmd = headless(chromium, profile.path(), extra);
    cmd.arg("--dump-dom").arg(url);
    let start = std::time::Instant::now();
    let out = run(cmd, profile.path());
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

/// A PNG of `url` at 1280 × `height` into `png`.
pub fn screenshot(chromium: &Path, url: &str, png: &Path, height: u32) {
    let profile = crate::scratch();
    if let Some(parent) = png.parent() {
        std::fs::create_dir_all(parent).expect("failed to create the screenshot's directory");
    }
    let mut cmd = headless(chromium, profile.path(), &[]);
    cmd.arg(format!("--screenshot={}", png.display())).arg(format!("--window-size=1280,{height}")).arg(url);
    run(cmd, profile.path());
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG"), "{} is not a PNG", png.display());
}

/// `file://` URL of a local path.
pub fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The attributes of every start tag in `html` that has attribute `name` (in serialized HTML:
/// double-quoted values), unescaped.
pub fn tags_with(html: &str, name: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let needle = format!(" {name}=\"");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = html[from..].find(&needle) {
        let at = from + at;
        let start = html[..at].rfind('<').expect("an attribute inside a tag");
        let end = at + html[at..].find('>').expect("the tag ends");
        found.push(attributes(&html[start..end]));
        from = end;
    }
    found
}

fn attributes(tag: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut rest = tag;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].rsplit([' ', '<']).next().unwrap_or_default().to_owned();
        let value_start = eq + 2;
        let value_end = value_start + rest[value_start..].find('"').expect("a closing quote");
        out.insert(name, unescape(&rest[value_start..value_end]));
        rest = &rest[value_end + 1..];
    }
    out
}

/// HTML character references the serializer and the report write.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}
