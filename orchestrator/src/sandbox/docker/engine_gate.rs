//! The engine gate: refuse isolated trials on a Docker engine or runtime with a known
//! container-escape or egress bug, unless the user accepts the risk
//! (`--allow-vulnerable-engine`, or `ELENGTIS_ALLOW_VULNERABLE_ENGINE=1`).
//!
//! [`assess`] is a pure function from the engine's `/version` answer (engine, runc and
//! containerd versions, with the package revision the engine reports as runc's `GitCommit`)
//! to a list of [`Finding`]s. [`check`] reads the answer, applies the decision and, when the
//! risk is accepted, warns once per process; the [`GateReport`] is recorded in the run
//! manifest and in every isolated trial's evidence (`target_execution.engine_gate`).
//!
//! A version that cannot be read is a finding too (status `unknown`): a gate that lets
//! through what it cannot assess is no gate. It refuses like a known bug and is overridden
//! by the same flag. So is a default runtime other than runc (gVisor, crun, Kata): its
//! version is not assessed here.
//!
//! Known bugs (sources checked 2026-11-30; see docs/security.md):
//!
//! | Id | Component | Fixed in | Sources |
//! |---|---|---|---|
//! | CVE-2024-21626 | runc | 1.1.12 | GHSA-xr7r-f8xq-vfvv; runc 1.1.12 CHANGELOG ("Fix CVE-2024-21626"); golang/vulndb#2491 ("runc 1.1.11 and earlier … 1.1.12 includes patches") |
//! | CVE-2025-31133, CVE-2025-52565, CVE-2025-52881 | runc | 1.2.8, 1.3.3, 1.4.0-rc.3 | GHSA-9493-h29p-rfm2, GHSA-qw9x-cqr3-wc7r, GHSA-cgrx-mc8f-2prm; runc 1.2.8 CHANGELOG (2025-11-05); containerd/containerd#12475 (runc 1.3.3); containerd/nerdctl#4582 |
//! | CVE-2024-29018 | engine | 23.0.11, 25.0.5, 26.0.0(-rc3) | GHSA-mq39-4gv4-mvpx; golang/vulndb#2659 (`< 23.0.11`, `>= 25.0.0, < 25.0.5`, `26.0.0-rc3`); Docker 25.0.5 release notes; moby/moby#47589 (25.0), #47593 (23.0). The 24.0 line never got the fix |
//!
//! Known-fixed distribution backports (the engine reports the package revision as runc's
//! `GitCommit`):
//!
//! | Package revision | Fixes | Source |
//! |---|---|---|
//! | runc `1.1.5+ds1-1+deb12u<N>`, N ≥ 1 (Debian 12) | CVE-2024-21626 | Debian changelog of runc 1.1.5+ds1-1+deb12u1 (bookworm-security, 2024-02-02: "CVE-2024-21626: several container breakouts due to internally leaked fds") |
//!
//! Not backported (checked): the 2025 runc CVEs in Debian 12 (the latest bookworm revision is
//! still deb12u1; debian-bugs-rc, Feb 2026, discusses whether a backport is feasible at all),
//! and CVE-2024-29018 in Debian 12's docker.io (`20.10.24+dfsg1-1+deb12u1` fixes only
//! CVE-2024-41110). The engine reports no package revision for itself, so engine backports
//! could not be recognised anyway. containerd is recorded but has no entry: its known bugs
//! of this class concern the CRI plugin, which Docker does not use.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::api::{self as docker, DockerEngine};
use super::runtime::{self, RuntimeFacts};
use crate::sandbox::SandboxError;

/// The environment variable that accepts a vulnerable engine (also `--allow-vulnerable-engine`).
pub const ALLOW_ENV: &str = "ELENGTIS_ALLOW_VULNERABLE_ENGINE";

/// The component a finding concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// The Docker engine (dockerd / moby).
    Engine,
    /// The OCI runtime runc.
    Runc,
    /// The default OCI runtime, when it is not runc.
    Runtime,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Component::Engine => "engine",
            Component::Runc => "runc",
            Component::Runtime => "runtime",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Component::Engine => "Docker engine",
            Component::Runc => "runc",
            Component::Runtime => "runtime",
        }
    }
}

/// Whether a finding is a known bug or a version that could not be assessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The version found is older than every fix of a known bug.
    Vulnerable,
    /// The version could not be read or compared.
    Unknown,
    /// A known bug of a component no container of the run uses (runc's, when every container
    /// runs under another runtime): recorded, never a reason to refuse.
    NotApplicable,
}

/// One problem the gate found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The CVE, or `unassessed-<component>` for an unreadable version.
    pub id: String,
    /// Which component.
    pub component: Component,
    /// The version found, as the engine reported it (with the package revision, if any).
    pub found: String,
    /// The first fixed version of each release line.
    pub fixed_in: Vec<String>,
    /// What the bug allows a trial container to do.
    pub allows: String,
    /// Known bug or unknown version.
    pub status: Status,
}

/// The versions the gate looks at, read from the engine's `/version` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeVersions {
    /// Engine version (the `Engine` component, e.g. `20.10.24+dfsg1`).
    pub engine: Option<String>,
    /// runc version (e.g. `1.1.5+ds1`).
    pub runc: Option<String>,
    /// runc's `GitCommit`: a commit, or a distribution package revision (`1.1.5+ds1-1+deb12u1`).
    pub runc_commit: Option<String>,
    /// containerd version (recorded, not assessed).
    pub containerd: Option<String>,
    /// containerd's `GitCommit`.
    pub containerd_commit: Option<String>,
    /// The engine's default OCI runtime (from `/info`), when known.
    pub default_runtime: Option<String>,
    /// The runtimes the run's containers use, with their versions (empty: the engine's
    /// default alone, whose version is known only for runc).
    pub runtimes: Vec<RuntimeFacts>,
}

impl RuntimeVersions {
    /// Read the versions from the engine's `/version` answer (as JSON) and the default
    /// runtime from `/info`.
    pub fn from_version_answer(version: &Value, default_runtime: Option<&str>) -> RuntimeVersions {
        let components = version["Components"].as_array();
        let component = |name: &str| {
            components
                .and_then(|cs| cs.iter().find(|c| c["Name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name))))
        };
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        // Without a `Components` list (engines older than 1.38 API) the top-level version is the
        // engine's; with one, only a component named `Engine` is Docker's (Podman names its own
        // `Podman Engine`, whose versions mean something else).
        let engine = match components {
            Some(_) => component("Engine").and_then(|c| text(&c["Version"])),
            None => text(&version["Version"]),
        };
        RuntimeVersions {
            engine,
            runc: component("runc").and_then(|c| text(&c["Version"])),
            runc_commit: component("runc").and_then(|c| text(&c["Details"]["GitCommit"])),
            containerd: component("containerd").and_then(|c| text(&c["Version"])),
            containerd_commit: component("containerd").and_then(|c| text(&c["Details"]["GitCommit"])),
            default_runtime: default_runtime.filter(|s| !s.is_empty()).map(str::to_owned),
            runtimes: Vec::new(),
        }
    }
}

/// A known bug.
struct Known {
    id: &'static str,
    component: Component,
    /// The first fixed version of each release line, ascending.
    fixed_in: &'static [&'static str],
    allows: &'static str,
}

const KNOWN: &[Known] = &[
    Known {
        id: "CVE-2024-21626",
        component: Component::Runc,
        fixed_in: &["1.1.12"],
        allows: "container escape: a file descriptor runc leaks lets a container process start with its working directory on the host filesystem (\"Leaky Vessels\")",
    },
    Known {
        id: "CVE-2025-31133",
        component: Component::Runc,
        fixed_in: &["1.2.8", "1.3.3", "1.4.0-rc.3"],
        allows: "container escape: replacing /dev/null with a symlink makes runc bind-mount an arbitrary procfs file read-write over a masked path",
    },
    Known {
        id: "CVE-2025-52565",
        component: Component::Runc,
        fixed_in: &["1.2.8", "1.3.3", "1.4.0-rc.3"],
        allows: "container escape: redirecting the /dev/console bind-mount through a symlink gives the container writable procfs files",
    },
    Known {
        id: "CVE-2025-52881",
        component: Component::Runc,
        fixed_in: &["1.2.8", "1.3.3", "1.4.0-rc.3"],
        allows: "container escape or host denial of service: runc's own writes to /proc are redirected to other procfs files, bypassing AppArmor/SELinux",
    },
    Known {
        id: "CVE-2024-29018",
        component: Component::Engine,
        fixed_in: &["23.0.11", "25.0.5", "26.0.0-rc3"],
        allows: "egress from an internal network: the embedded DNS resolver forwards a trial container's queries to the host's resolver on a loopback address, so data can leave through DNS",
    },
];

/// A distribution package revision known to carry fixes.
struct Backport {
    component: Component,
    /// The revision up to the update counter, e.g. `1.1.5+ds1-1+deb12u`.
    revision_prefix: &'static str,
    /// The first update that carries the fixes; later updates carry them too.
    min_update: u32,
    fixes: &'static [&'static str],
}

const BACKPORTS: &[Backport] = &[Backport {
    component: Component::Runc,
    revision_prefix: "1.1.5+ds1-1+deb12u",
    min_update: 1,
    fixes: &["CVE-2024-21626"],
}];

/// A release version: `major.minor.patch`, with an optional pre-release number
/// (`-rc.3`, `-rc3`; other pre-release tags count as 0). Build metadata (`+ds1`, `~ds1`) and
/// distribution revisions (`-0ubuntu1`) are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Option<u64>,
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch)).then(
            match (self.pre, other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(&b),
            },
        )
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (numbers, rest) = text.split_at(end);
    let parts: Vec<&str> = numbers.trim_end_matches('.').split('.').collect();
    if parts.len() < 2 || parts.len() > 3 || numbers.ends_with('.') {
        return None;
    }
    let number = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse::<u64>().ok());
    let (major, minor, patch) = (number(0)?, number(1)?, number(2)?);
    let pre = match rest.chars().next() {
        None | Some('+' | '~') => None,
        Some('-') => {
            let tag = rest[1..].split(['+', '~']).next().unwrap_or_default();
            if tag.starts_with(|c: char| c.is_ascii_digit()) {
                // A distribution revision (`1.1.12-0ubuntu2`): the release itself.
                None
            } else if let Some(n) = tag.strip_prefix("rc") {
                Some(n.trim_start_matches('.').parse::<u64>().ok()?)
            } else if tag.is_empty() {
                return None;
            } else {
                Some(0)
            }
        }
        Some(_) => return None,
    };
    Some(Version { major, minor, patch, pre })
}

/// Whether `found` carries the fix, given the first fixed version of each release line: the
/// fix of its own line (same major.minor), or a line newer than every fixed one.
fn is_fixed(found: Version, fixed_in: &[Version]) -> bool {
    if let Some(line) = fixed_in.iter().find(|f| (f.major, f.minor) == (found.major, found.minor)) {
        return found >= *line;
    }
    fixed_in.iter().all(|f| found > *f)
}

fn backported(component: Component, revision: Option<&str>, id: &str) -> bool {
    let Some(revision) = revision else { return false };
    BACKPORTS.iter().any(|b| {
        b.component == component
            && b.fixes.contains(&id)
            && revision
                .strip_prefix(b.revision_prefix)
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= b.min_update)
    })
}

fn unassessed(component: Component, found: Option<&str>, why: &str) -> Finding {
    Finding {
        id: format!("unassessed-{}", component.name()),
        component,
        found: found.unwrap_or("(not reported)").to_owned(),
        fixed_in: Vec::new(),
        allows: format!("unknown: {why}, so known container-escape or egress bugs cannot be ruled out"),
        status: Status::Unknown,
    }
}

/// Every known bug (or unassessable version) of the engine and runtime. Pure.
pub fn assess(versions: &RuntimeVersions, today: Date) -> Vec<Finding> {
    let mut findings = Vec::new();
    let default = || RuntimeFacts {
        name: versions.default_runtime.clone().unwrap_or_else(|| "runc".to_owned()),
        engine_default: true,
        path: None,
        args: Vec::new(),
        version: None,
        version_source: "not read".to_owned(),
        differences: Vec::new(),
    };
    let used: Vec<RuntimeFacts> =
        if versions.runtimes.is_empty() { vec![default()] } else { versions.runtimes.clone() };
    let uses_runc = used.iter().any(|r| r.name == "runc");
    for r in used.iter().filter(|r| r.name != "runc") {
        findings.extend(assess_other_runtime(r, today));
    }
    let others = used.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ");
    for (component, version, revision) in [
        (Component::Engine, versions.engine.as_deref(), None),
        (Component::Runc, versions.runc.as_deref(), versions.runc_commit.as_deref()),
    ] {
        let applies = component != Component::Runc || uses_runc;
        let Some(parsed) = version.and_then(parse_version) else {
            if !applies {
                continue;
            }
            let why = if version.is_some() {
                "its version could not be parsed"
            } else {
                "the engine did not report its version"
            };
            findings.push(unassessed(component, version, why));
            continue;
        };
        let found = match revision {
            Some(r) if r != version.unwrap_or_default() => format!("{} ({r})", version.unwrap_or_default()),
            _ => version.unwrap_or_default().to_owned(),
        };
        for known in KNOWN.iter().filter(|k| k.component == component) {
            let fixed: Vec<Version> = known.fixed_in.iter().filter_map(|f| parse_version(f)).collect();
            if is_fixed(parsed, &fixed) || backported(component, revision, known.id) {
                continue;
            }
            let (status, allows) = if applies {
                (Status::Vulnerable, known.allows.to_owned())
            } else {
                (
                    Status::NotApplicable,
                    format!(
                        "not applicable: every container of this run runs under {others}, not runc ({})",
                        known.allows
                    ),
                )
            };
            findings.push(Finding {
                id: known.id.to_owned(),
                component,
                found: found.clone(),
                fixed_in: known.fixed_in.iter().map(|f| (*f).to_owned()).collect(),
                allows,
                status,
            });
        }
    }
    findings
}

/// A calendar day (UTC), for the age of a runtime release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    /// Days since 1970-01-01.
    days: i64,
}

impl Date {
    /// The day `y-m-d`, when it exists.
    pub fn from_ymd(y: i64, m: u32, d: u32) -> Option<Date> {
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let max = *month_days.get(usize::try_from(m).ok()?.checked_sub(1)?)?;
        if d == 0 || d > max {
            return None;
        }
        // Days from civil (proleptic Gregorian), after H. Hinnant's algorithm.
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (i64::from(m) + 9) % 12;
        let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Some(Date { days: era * 146_097 + doe - 719_468 })
    }

    /// Today (UTC).
    pub fn today() -> Date {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Date { days: secs.div_euclid(86_400) }
    }

    /// Whole days from `earlier` to `self`.
    pub fn days_since(self, earlier: Date) -> i64 {
        self.days - earlier.days
    }
}

/// The release day a gVisor version names (`0.0~20221219.0` in Debian, `release-20240212.0`
/// upstream): the first run of exactly eight digits that is a valid date.
pub fn runsc_release_date(version: &str) -> Option<Date> {
    version.split(|c: char| !c.is_ascii_digit()).filter(|run| run.len() == 8).find_map(|run| {
        let y = run[..4].parse::<i64>().ok()?;
        let m = run[4..6].parse::<u32>().ok()?;
        let d = run[6..].parse::<u32>().ok()?;
        Date::from_ymd(y, m, d)
    })
}

/// How old a gVisor release may be before the gate cannot vouch for it: gVisor ships its
/// security fixes in dated releases and publishes no advisory list with fixed-in versions
/// this gate could compare, so age is the only measure it has.
pub const RUNSC_MAX_AGE_DAYS: i64 = 365;

/// The findings of a runtime other than runc: gVisor's by the age of its release (no advisory
/// of its own is known to this gate: docs/security.md, "Runtimes"), any other as unassessed.
fn assess_other_runtime(r: &RuntimeFacts, today: Date) -> Vec<Finding> {
    let found = match &r.version {
        Some(v) => format!("{} {v}", r.name),
        None => r.name.clone(),
    };
    if r.name != runtime::RUNSC {
        let why = if r.engine_default {
            format!("the engine's default runtime is {} and this gate knows no versions of it", r.name)
        } else {
            format!("this gate knows no versions of the runtime {}", r.name)
        };
        return vec![unassessed(Component::Runtime, Some(&found), &why)];
    }
    let Some(version) = &r.version else {
        return vec![unassessed(
            Component::Runtime,
            Some(&found),
            &format!("gVisor's version could not be read ({})", r.version_source),
        )];
    };
    let Some(released) = runsc_release_date(version) else {
        return vec![unassessed(Component::Runtime, Some(&found), "gVisor's version names no release date")];
    };
    let age = today.days_since(released);
    if age <= RUNSC_MAX_AGE_DAYS {
        return Vec::new();
    }
    vec![Finding {
        id: "stale-runsc".to_owned(),
        component: Component::Runtime,
        found,
        fixed_in: Vec::new(),
        allows: format!(
            "unknown: this gVisor release is {age} days old (more than {RUNSC_MAX_AGE_DAYS}); gVisor ships security fixes in dated releases without an advisory list this gate could compare, so sandbox escapes fixed since cannot be ruled out"
        ),
        status: Status::Unknown,
    }]
}

/// What the gate decided, recorded in the manifest and every isolated trial's evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GateReport {
    /// The run goes ahead despite findings because the user accepted the risk.
    pub allowed_vulnerable: bool,
    /// What was found (empty: nothing known).
    pub findings: Vec<Finding>,
    /// The versions assessed.
    pub versions: RuntimeVersions,
}

/// The refusal (or warning) text: one line per finding.
pub fn describe(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings.iter().filter(|f| f.status != Status::NotApplicable) {
        let fixed = if f.fixed_in.is_empty() { String::new() } else { format!(", fixed in {}", f.fixed_in.join(", ")) };
        let _ = write!(out, "\n  - {} in {} {}{fixed}: {}", f.id, f.component.label(), f.found, f.allows);
    }
    out
}

/// Decide from the versions: `Ok` when nothing was found or the risk is accepted; otherwise
/// the refusal naming each finding. Pure.
pub fn decide(versions: RuntimeVersions, allow_vulnerable: bool, today: Date) -> Result<GateReport, SandboxError> {
    let findings = assess(&versions, today);
    let blocking = findings.iter().any(|f| f.status != Status::NotApplicable);
    if blocking && !allow_vulnerable {
        return Err(SandboxError::VulnerableEngine(format!(
            "the Docker engine or its runtime has known container-escape or egress bugs (or versions that cannot be assessed):{}\nUpgrade them, or accept the risk with --allow-vulnerable-engine (or {ALLOW_ENV}=1); the findings are then recorded in the run manifest and in every trial's evidence",
            describe(&findings)
        )));
    }
    Ok(GateReport { allowed_vulnerable: blocking, findings, versions })
}

/// Read the engine's version answer and decide. Runs before any container is created.
/// `runtimes` are those the run's containers use ([`runtime::facts`]); empty: the engine's
/// default alone (read here).
pub async fn check(
    engine: &DockerEngine,
    allow_vulnerable: bool,
    runtimes: &[RuntimeFacts],
) -> Result<GateReport, SandboxError> {
    let answer = docker::call("read the engine version", docker::CALL_DEADLINE, engine.docker.version()).await?;
    let answer = serde_json::to_value(&answer).unwrap_or(Value::Null);
    let mut versions = RuntimeVersions::from_version_answer(&answer, engine.facts.default_runtime.as_deref());
    versions.runtimes = if runtimes.is_empty() {
        vec![runtime::facts(None, &engine.facts.runtimes, &engine.facts).await]
    } else {
        runtimes.to_vec()
    };
    decide(versions, allow_vulnerable, Date::today())
}

impl GateReport {
    /// The warning a user must see before trials run on an engine accepted despite findings:
    /// two lines, what (the findings' ids) and where the full list is (the documentation's
    /// table, the run's manifest and evidence). Under `--quiet` the first line alone is shown.
    pub fn warning(&self) -> Option<String> {
        self.allowed_vulnerable.then(|| {
            let ids: Vec<&str> =
                self.findings.iter().filter(|f| f.status != Status::NotApplicable).map(|f| f.id.as_str()).collect();
            format!(
                "running isolated trials on a Docker engine with known container-escape or egress bugs ({}), as accepted with --allow-vulnerable-engine ({ALLOW_ENV})\n  the full list (versions found, fixed versions, what each allows): docs/security.md, \"Engine gate\"; a run records it in manifest.json and in every trial's evidence (engine_gate)",
                ids.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn today() -> Date {
        Date::from_ymd(2026, 12, 2).expect("a date")
    }

    fn versions(engine: &str, runc: &str, runc_commit: &str) -> RuntimeVersions {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        RuntimeVersions {
            engine: some(engine),
            runc: some(runc),
            runc_commit: some(runc_commit),
            containerd: Some("1.7.27".into()),
            containerd_commit: None,
            default_runtime: Some("runc".into()),
            runtimes: Vec::new(),
        }
    }

    fn ids(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.id.as_str()).collect()
    }

    const RUNC_2025: [&str; 3] = ["CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"];

    #[test]
    fn parses_real_world_version_strings() {
        let v = |s: &str| parse_version(s).map(|v| (v.major, v.minor, v.patch, v.pre));
        assert_eq!(v("20.10.24+dfsg1"), Some((20, 10, 24, None)));
        assert_eq!(v("1.1.5+ds1"), Some((1, 1, 5, None)));
        assert_eq!(v("1.6.20~ds1"), Some((1, 6, 20, None)));
        assert_eq!(v("v1.1.12"), Some((1, 1, 12, None)));
        assert_eq!(v("1.4.0-rc.3"), Some((1, 4, 0, Some(3))));
        assert_eq!(v("26.0.0-rc3"), Some((26, 0, 0, Some(3))));
        assert_eq!(v("27.0.0-beta.1"), Some((27, 0, 0, Some(0))));
        assert_eq!(v("1.1.12-0ubuntu2~22.04.1"), Some((1, 1, 12, None)));
        assert_eq!(v("24.0"), Some((24, 0, 0, None)));
        for bad in ["", "dev", "master", "1", "1.", "1..2", "abc.def", "1.2.3x", "1.2.3-", "1.2.3.4"] {
            assert_eq!(v(bad), None, "{bad:?} must not parse");
        }
        assert!(parse_version("1.4.0-rc.2") < parse_version("1.4.0-rc.3"));
        assert!(parse_version("1.4.0-rc.3") < parse_version("1.4.0"));
    }

    #[test]
    fn this_machine_debian_bookworm_is_refused_for_dns_egress_and_the_2025_runc_escapes() {
        // The real /version answer of Debian 12's docker.io on this machine.
        let answer = json!({
            "Components": [
                {"Name": "Engine", "Version": "20.10.24+dfsg1", "Details": {"ApiVersion": "1.41", "GitCommit": "5d6db84"}},
                {"Name": "containerd", "Version": "1.6.20~ds1", "Details": {"GitCommit": "1.6.20~ds1-1+deb12u3"}},
                {"Name": "runc", "Version": "1.1.5+ds1", "Details": {"GitCommit": "1.1.5+ds1-1+deb12u1"}},
                {"Name": "docker-init", "Version": "0.19.0", "Details": {"GitCommit": ""}}
            ],
            "Version": "20.10.24+dfsg1", "ApiVersion": "1.41"
        });
        let versions = RuntimeVersions::from_version_answer(&answer, Some("runc"));
        assert_eq!(versions.runc_commit.as_deref(), Some("1.1.5+ds1-1+deb12u1"));
        assert_eq!(versions.containerd.as_deref(), Some("1.6.20~ds1"));
        let findings = assess(&versions, today());
        // CVE-2024-21626 is fixed by Debian's backport; the 2025 runc bugs and the engine's DNS
        // forwarding are not.
        assert_eq!(ids(&findings), [&["CVE-2024-29018"], RUNC_2025.as_slice()].concat());
        let runc = &findings[1];
        assert_eq!(runc.component, Component::Runc);
        assert_eq!(runc.found, "1.1.5+ds1 (1.1.5+ds1-1+deb12u1)");
        assert_eq!(runc.fixed_in, ["1.2.8", "1.3.3", "1.4.0-rc.3"]);
        assert_eq!(findings[0].found, "20.10.24+dfsg1");
        assert_eq!(findings[0].component, Component::Engine);
        let refusal = decide(versions.clone(), false, today()).expect_err("refused").to_string();
        for needle in [
            "CVE-2024-29018 in Docker engine 20.10.24+dfsg1, fixed in 23.0.11, 25.0.5, 26.0.0-rc3",
            "CVE-2025-31133 in runc 1.1.5+ds1 (1.1.5+ds1-1+deb12u1), fixed in 1.2.8, 1.3.3, 1.4.0-rc.3",
            "--allow-vulnerable-engine",
        ] {
            assert!(refusal.contains(needle), "{needle:?} missing from: {refusal}");
        }
        let allowed = decide(versions, true, today()).expect("allowed");
        assert!(allowed.allowed_vulnerable);
        assert_eq!(allowed.findings.len(), 4);
    }

    #[test]
    fn debian_runc_without_the_backport_revision_is_vulnerable_to_leaky_vessels() {
        for commit in ["", "1.1.5+ds1-1", "v1.1.5-0-gf19387a", "1.1.5+ds1-1+deb12u0"] {
            let findings = assess(&versions("28.2.2", "1.1.5+ds1", commit), today());
            assert_eq!(ids(&findings), [&["CVE-2024-21626"], RUNC_2025.as_slice()].concat(), "commit {commit:?}");
        }
        // A later Debian update of the same package keeps the fix.
        let findings = assess(&versions("28.2.2", "1.1.5+ds1", "1.1.5+ds1-1+deb12u2"), today());
        assert_eq!(ids(&findings), RUNC_2025);
    }

    #[test]
    fn runc_fix_lines() {
        assert_eq!(
            ids(&assess(&versions("28.2.2", "1.1.11", "v1.1.11-0-g4bccb38"), today())),
            [&["CVE-2024-21626"], RUNC_2025.as_slice()].concat()
        );
        assert_eq!(ids(&assess(&versions("28.2.2", "1.1.12", "v1.1.12-0-g51d5e94"), today())), RUNC_2025);
        assert_eq!(ids(&assess(&versions("28.2.2", "1.2.5", "v1.2.5-0-g59923ef"), today())), RUNC_2025);
        assert_eq!(ids(&assess(&versions("28.2.2", "1.2.7", ""), today())), RUNC_2025);
        assert_eq!(ids(&assess(&versions("28.2.2", "1.3.2", ""), today())), RUNC_2025);
        assert_eq!(ids(&assess(&versions("28.2.2", "1.4.0-rc.2", ""), today())), RUNC_2025);
        for fixed in ["1.2.8", "1.2.9", "1.3.3", "1.3.4", "1.4.0-rc.3", "1.4.0", "1.5.1"] {
            assert_eq!(assess(&versions("28.2.2", fixed, ""), today()), [], "runc {fixed}");
        }
    }

    #[test]
    fn engine_fix_lines_for_internal_network_dns() {
        let engine = |v: &str| {
            ids(&assess(&versions(v, "1.3.3", ""), today())).into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        for vulnerable in ["20.10.24+dfsg1", "23.0.10", "24.0.7", "24.0.9", "25.0.4", "26.0.0-rc2"] {
            assert_eq!(engine(vulnerable), ["CVE-2024-29018"], "engine {vulnerable}");
        }
        for fixed in ["23.0.11", "23.0.15", "25.0.5", "26.0.0-rc3", "26.0.0", "26.1.4", "27.5.1", "28.2.2", "29.1.1"] {
            assert!(engine(fixed).is_empty(), "engine {fixed}");
        }
    }

    #[test]
    fn docker_ce_releases_as_shipped() {
        // Docker CE 24.0.7 shipped with runc 1.1.10; 26.1.4 with 1.1.12; 28.2.2 with 1.2.5.
        assert_eq!(
            ids(&assess(&versions("24.0.7", "1.1.10", "v1.1.10-0-g18a0cb0"), today())),
            [&["CVE-2024-29018", "CVE-2024-21626"], RUNC_2025.as_slice()].concat()
        );
        assert_eq!(ids(&assess(&versions("26.1.4", "1.1.12", "v1.1.12-0-g51d5e94"), today())), RUNC_2025);
        assert_eq!(ids(&assess(&versions("28.2.2", "1.3.3", "v1.3.3-0-gd842d771"), today())), Vec::<&str>::new());
        assert!(
            decide(versions("28.2.2", "1.3.3", ""), false, today())
                .is_ok_and(|r| !r.allowed_vulnerable && r.findings.is_empty())
        );
    }

    #[test]
    fn unknown_versions_refuse_unless_allowed() {
        for (engine, runc) in [("", "1.3.3"), ("dev", "1.3.3"), ("28.2.2", ""), ("28.2.2", "unknown")] {
            let findings = assess(&versions(engine, runc, ""), today());
            assert_eq!(findings.len(), 1, "{engine:?} {runc:?}: {findings:?}");
            assert_eq!(findings[0].status, Status::Unknown);
            assert!(findings[0].id.starts_with("unassessed-"));
            assert!(decide(versions(engine, runc, ""), false, today()).is_err());
            assert!(decide(versions(engine, runc, ""), true, today()).is_ok_and(|r| r.allowed_vulnerable));
        }
        // Podman's compatible API names its component differently: not assessed as Docker.
        let podman = json!({"Components": [{"Name": "Podman Engine", "Version": "4.9.3"}], "Version": "4.9.3"});
        let findings = assess(&RuntimeVersions::from_version_answer(&podman, Some("crun")), today());
        assert_eq!(ids(&findings), ["unassessed-runtime", "unassessed-engine"]);
    }

    #[test]
    fn a_default_runtime_other_than_runc_is_not_assessed() {
        let mut v = versions("28.2.2", "1.1.5", "");
        v.default_runtime = Some("runsc".into());
        let findings: Vec<Finding> =
            assess(&v, today()).into_iter().filter(|f| f.status != Status::NotApplicable).collect();
        assert_eq!(ids(&findings), ["unassessed-runtime"]);
        assert_eq!(findings[0].found, "runsc");
    }

    fn runsc(version: Option<&str>) -> RuntimeFacts {
        RuntimeFacts {
            name: "runsc".into(),
            engine_default: false,
            path: Some("/usr/bin/runsc".into()),
            args: vec!["--network=host".into()],
            version: version.map(str::to_owned),
            version_source: "test".into(),
            differences: Vec::new(),
        }
    }

    fn runc() -> RuntimeFacts {
        RuntimeFacts { name: "runc".into(), engine_default: true, ..runsc(Some("1.1.5+ds1")) }
    }

    /// This machine's runc (the 2025 escapes) under a run whose every container runs under a
    /// recent gVisor: the runc findings are recorded as not applicable and nothing refuses;
    /// a run that also uses runc is refused as before.
    #[test]
    fn runc_bugs_do_not_apply_to_a_run_entirely_under_runsc() {
        let mut v = versions("28.2.2", "1.1.5+ds1", "1.1.5+ds1-1+deb12u1");
        v.runtimes = vec![runsc(Some("release-20261102.0"))];
        let report = decide(v.clone(), false, today()).expect("nothing applicable refuses");
        assert!(!report.allowed_vulnerable);
        assert_eq!(ids(&report.findings), RUNC_2025);
        assert!(report.findings.iter().all(|f| f.status == Status::NotApplicable));
        assert!(report.findings[0].allows.starts_with("not applicable: every container of this run runs under runsc"));
        assert_eq!(report.warning(), None);

        v.runtimes.push(runc());
        let refusal = decide(v, false, today()).expect_err("runc is used too").to_string();
        for id in RUNC_2025 {
            assert!(refusal.contains(id), "{refusal}");
        }
    }

    /// The engine's own bug (DNS egress) applies whatever the runtime.
    #[test]
    fn engine_bugs_apply_under_runsc_too() {
        let mut v = versions("20.10.24+dfsg1", "1.1.5+ds1", "1.1.5+ds1-1+deb12u1");
        v.runtimes = vec![runsc(Some("release-20261102.0"))];
        let refusal = decide(v, false, today()).expect_err("engine bug").to_string();
        assert!(refusal.contains("CVE-2024-29018"), "{refusal}");
        assert!(!refusal.contains("CVE-2025-31133"), "runc's are not applicable: {refusal}");
    }

    /// Debian 12's runsc (2022-12-19) is older than a year: it cannot be vouched for, and an
    /// unreadable version cannot either; a release of the last year passes.
    #[test]
    fn a_stale_or_unreadable_gvisor_is_unknown() {
        let mut v = versions("28.2.2", "1.3.3", "");
        v.runtimes = vec![runsc(Some("0.0~20221219.0"))];
        let findings = assess(&v, today());
        assert_eq!(ids(&findings), ["stale-runsc"]);
        assert_eq!(findings[0].status, Status::Unknown);
        assert!(findings[0].allows.contains("1444 days old"), "{}", findings[0].allows);
        assert!(decide(v.clone(), false, today()).is_err());
        assert!(decide(v.clone(), true, today()).is_ok_and(|r| r.allowed_vulnerable));

        v.runtimes = vec![runsc(None)];
        assert_eq!(ids(&assess(&v, today())), ["unassessed-runtime"]);
        v.runtimes = vec![runsc(Some("dev"))];
        assert_eq!(ids(&assess(&v, today())), ["unassessed-runtime"]);
        v.runtimes = vec![runsc(Some("release-20260101.0"))];
        assert_eq!(ids(&assess(&v, today())), Vec::<&str>::new());
        v.runtimes = vec![RuntimeFacts { name: "kata".into(), ..runsc(Some("3.2.0")) }];
        assert_eq!(ids(&assess(&v, today())), ["unassessed-runtime"]);
    }

    #[test]
    fn gvisor_release_dates() {
        let d = |y, m, dd| Date::from_ymd(y, m, dd);
        assert_eq!(runsc_release_date("0.0~20221219.0"), d(2022, 12, 19));
        assert_eq!(runsc_release_date("release-20240212.0"), d(2024, 2, 12));
        assert_eq!(runsc_release_date("20241399"), None);
        assert_eq!(runsc_release_date("1.2.3"), None);
        assert_eq!(d(2024, 2, 30), None);
        assert_eq!(d(1970, 1, 1).map(|x| x.days), Some(0));
        assert_eq!(today().days_since(d(2025, 12, 2).expect("date")), 365);
        assert_eq!(today().days_since(d(2024, 12, 2).expect("date")), 730, "2024 is a leap year, 2025 not");
    }
}
