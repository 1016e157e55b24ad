//! The original Python tool (PyPI `elengtis==0.1.0`) for the differential conformance suite:
//! a virtual environment holding it, and the baseline of documented differences.
//!
//! The environment lives in `<target>/conformance-venv` and is reused when it already holds
//! the right version. It is made with the machine's `python3` (or `$ELENGTIS_PYTHON`) and
//! `pip install --ignore-requires-python elengtis==0.1.0` (the package declares a newer
//! Python than it needs). When it cannot be made, the suite fails under `CI` (the project's
//! rule: CI never skips) and skips with a printed reason elsewhere (for example offline).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The version the suite is pinned to.
pub const VERSION: &str = "0.1.0";

/// A ready virtual environment holding the original tool.
#[derive(Debug, Clone)]
pub struct Original {
    /// The environment's root.
    pub venv: PathBuf,
}

impl Original {
    /// The environment's `bin` directory (holds `python` and the `elengtis` script).
    pub fn bin(&self) -> PathBuf {
        self.venv.join("bin")
    }

    /// Its Python.
    pub fn python(&self) -> PathBuf {
        self.bin().join("python")
    }

    /// `PATH` with the environment's `bin` first: the original's bundled campaign spawns its
    /// fixture as `python -m elengtis.server`, which must find this Python.
    pub fn path_env(&self) -> std::ffi::OsString {
        let mut parts = vec![self.bin()];
        if let Some(path) = std::env::var_os("PATH") {
            parts.extend(std::env::split_paths(&path));
        }
        std::env::join_paths(parts).unwrap_or_default()
    }

    /// A command running the original's CLI.
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(self.bin().join("elengtis"));
        cmd.env("PATH", self.path_env());
        cmd
    }

    /// Where the installed package keeps its bundled examples.
    pub fn examples(&self) -> PathBuf {
        let out = Command::new(self.python())
            .args(["-c", "from importlib.resources import files; print(files('elengtis').joinpath('examples'))"])
            .output()
            .expect("failed to run the original's Python");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }
}

/// `<target>` (the cargo target directory) of this test binary.
pub fn target_root() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // <target>/<profile>/deps/<binary>
    exe.ancestors().nth(3).map(Path::to_path_buf).unwrap_or_else(|| crate::workspace().join("target"))
}

fn installed_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('elengtis'))"])
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn create(venv: &Path) -> Result<(), String> {
    let python = std::env::var("ELENGTIS_PYTHON").unwrap_or_else(|_| "python3".into());
    if venv.exists() {
        std::fs::remove_dir_all(venv).map_err(|e| format!("cannot remove the stale {}: {e}", venv.display()))?;
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    run(Command::new(&python).args(["-m", "venv"]).arg(venv), &format!("`{python} -m venv`"))?;
    run(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--ignore-requires-python",
            &format!("elengtis=={VERSION}"),
        ]),
        &format!("`pip install elengtis=={VERSION}`"),
    )
}

/// The original tool, installed on first use (once per test process).
pub fn original() -> Result<&'static Original, &'static str> {
    static READY: OnceLock<Result<Original, String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            let venv = target_root().join("conformance-venv");
            let python = venv.join("bin").join("python");
            if installed_version(&python).as_deref() != Some(VERSION) {
                create(&venv)?;
            }
            match installed_version(&python) {
                Some(v) if v == VERSION => Ok(Original { venv }),
                other => Err(format!("the environment at {} holds elengtis {other:?}", venv.display())),
            }
        })
        .as_ref()
        .map_err(String::as_str)
}

/// The original tool, or `None` (with the reason printed) when it cannot be installed
/// outside CI. Under `CI` a missing original fails the test.
pub fn require() -> Option<&'static Original> {
    match original() {
        Ok(original) => Some(original),
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("CI is set and the original elengtis {VERSION} cannot be installed: {reason}")
        }
        Err(reason) => {
            report(&format!("SKIPPED: the original elengtis {VERSION} cannot be installed here: {reason}"));
            None
        }
    }
}

/// Print a line of the suite's report where CI shows it: straight to stderr, past the test
/// harness's output capture (the counts are the point of the suite, not only its failures).
pub fn report(line: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// The committed list of documented differences: case name → reason (the reason is the
/// `## id: text` heading the name is listed under).
#[derive(Debug, Default)]
pub struct Baseline {
    /// Case name → (reason id, reason text).
    pub entries: BTreeMap<String, (String, String)>,
}

impl Baseline {
    /// Parse `tests/conformance/baseline.txt`.
    pub fn load() -> Baseline {
        let path = crate::workspace().join("tests/conformance/baseline.txt");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut entries = BTreeMap::new();
        let mut reason: Option<(String, String)> = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if let Some(heading) = line.strip_prefix("## ") {
                let (id, why) = heading
                    .split_once(": ")
                    .unwrap_or_else(|| panic!("{}:{}: a reason reads `## id: why`", path.display(), n + 1));
                reason = Some((id.to_owned(), why.to_owned()));
            } else if line.starts_with('#') || line.trim().is_empty() {
                continue;
            } else {
                let Some(reason) = &reason else {
                    panic!("{}:{}: `{line}` is listed before any `## reason`", path.display(), n + 1)
                };
                let previous = entries.insert(line.trim().to_owned(), reason.clone());
                assert!(previous.is_none(), "{}:{}: `{line}` is listed twice", path.display(), n + 1);
            }
        }
        Baseline { entries }
    }

    /// Names listed under `prefix` (for example `validate/`).
    pub fn names_under(&self, prefix: &str) -> BTreeSet<&str> {
        self.entries.keys().filter(|k| k.starts_with(prefix)).map(String::as_str).collect()
    }
}

/// The result of comparing one suite against the baseline.
#[derive(Debug, Default)]
pub struct Verdicts {
    /// Cases where both tools agree.
    pub agreements: usize,
    /// Disagreements listed in the baseline: name → reason id.
    pub documented: BTreeMap<String, String>,
    /// Disagreements not listed (each fails the suite), with details.
    pub unexplained: Vec<String>,
    /// Baseline entries that now agree (each fails the suite: remove them).
    pub stale: Vec<String>,
}

impl Verdicts {
    /// Record one case.
    pub fn record(&mut self, baseline: &Baseline, name: &str, agree: bool, detail: impl FnOnce() -> String) {
        match (agree, baseline.entries.get(name)) {
            (true, None) => self.agreements += 1,
            (true, Some(_)) => {
                self.agreements += 1;
                self.stale.push(name.to_owned());
            }
            (false, Some((id, _))) => {
                self.documented.insert(name.to_owned(), id.clone());
            }
            (false, None) => self.unexplained.push(format!("{name}: {}", detail())),
        }
    }

    /// Fail when anything is unexplained or stale; listed names that no case produced are
    /// stale too.
    pub fn assert_clean(&self, baseline: &Baseline, prefix: &str, seen: &BTreeSet<String>) {
        let mut stale = self.stale.clone();
        stale.extend(baseline.names_under(prefix).into_iter().filter(|n| !seen.contains(*n)).map(str::to_owned));
        let mut parts = Vec::new();
        if !self.unexplained.is_empty() {
            parts.push(format!(
                "{} unexplained disagreement(s) with the original (fix them, or list them with a reason in tests/conformance/baseline.txt):\n  {}",
                self.unexplained.len(),
                self.unexplained.join("\n  ")
            ));
        }
        if !stale.is_empty() {
            parts.push(format!(
                "{} stale baseline entr(ies) now agree or no longer exist; remove them from tests/conformance/baseline.txt:\n  {}",
                stale.len(),
                stale.join("\n  ")
            ));
        }
        let message = parts.join("\n");
        assert!(message.is_empty(), "{message}");
    }
}
