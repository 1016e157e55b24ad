//! The light sandbox of a stdio target, applied by the exec stage (`__stdio-exec`)
//! to itself just before it execs the target, so everything is inherited by the target and
//! its children: an empty network namespace, rlimits, no-new-privileges, Landlock (writes
//! only under the scratch directory and the listed paths; TCP bind/connect and abstract
//! unix sockets and signals outside the domain denied where the kernel's ABI has them), an
//! empty capability bounding set and cleared capability sets.
//!
//! Every requested confinement is applied or the exec stage fails with the missing feature
//! named: the target never runs unconfined by accident.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The sandbox as the exec stage gets it (JSON in `--confine`): paths resolved, the scratch
/// directory known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confinement {
    /// The target's network: an empty namespace (`false`: the runner's).
    pub no_network: bool,
    /// Writable paths (absolute), besides `scratch`.
    pub writable: Vec<PathBuf>,
    /// The fresh per-trial directory: the target's cwd, `HOME` and `TMPDIR`.
    pub scratch: PathBuf,
    /// `RLIMIT_AS` in MiB.
    pub memory_mb: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: Option<u64>,
    /// `RLIMIT_CPU` in seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_FSIZE` in MiB.
    pub max_file_mb: Option<u64>,
}

/// The prefix of the exec stage's error line on stderr (the runner turns it into the
/// trial's error).
pub const FAILURE_PREFIX: &str = "elengtis stdio sandbox: ";

/// Exit status of an exec stage that could not confine (or start) the target.
pub const FAILURE_STATUS: i32 = 125;

/// Device files every target may write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Apply `c` to this (single-threaded) process. The error names what could not be applied.
#[cfg(target_os = "linux")]
pub fn apply(c: &Confinement) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};

    const MIB: u64 = 1024 * 1024;
    // 1. The network namespace first: as non-root it comes with a user namespace, whose
    //    capabilities the later steps need (dropping the bounding set).
    if c.no_network {
        new_network_namespace()?;
    }
    // 2. Resource limits (lowering needs no privilege).
    let limits = [
        (Resource::RLIMIT_CORE, Some(0), "RLIMIT_CORE"),
        (Resource::RLIMIT_AS, c.memory_mb.map(|m| m.saturating_mul(MIB)), "RLIMIT_AS"),
        (Resource::RLIMIT_NOFILE, c.max_open_files, "RLIMIT_NOFILE"),
        (Resource::RLIMIT_CPU, c.cpu_seconds, "RLIMIT_CPU"),
        (Resource::RLIMIT_FSIZE, c.max_file_mb.map(|m| m.saturating_mul(MIB)), "RLIMIT_FSIZE"),
    ];
    for (resource, value, name) in limits {
        if let Some(value) = value {
            setrlimit(resource, value, value).map_err(|e| format!("failed to set {name}: {e}"))?;
        }
    }
    // 3. No new privileges (also what lets an unprivileged process use Landlock).
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("failed to set no-new-privileges: {e}"))?;
    // 4. Landlock.
    landlock_rules(c)?;
    // 5. Capabilities: the bounding set (needs CAP_SETPCAP: root, or the user namespace),
    //    then every other set.
    drop_capabilities()?;
    Ok(())
}

/// Not Linux: nothing can be applied, so nothing runs.
#[cfg(not(target_os = "linux"))]
pub fn apply(_c: &Confinement) -> Result<(), String> {
    Err("the stdio sandbox needs Linux (network namespaces, Landlock, capabilities)".into())
}

#[cfg(target_os = "linux")]
fn new_network_namespace() -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return unshare(CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("failed to create an empty network namespace (unshare CLONE_NEWNET: {e})"));
    }
    let gid = nix::unistd::getegid();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).map_err(|e| {
        format!(
            "failed to create an empty network namespace as uid {uid} (unshare CLONE_NEWUSER|CLONE_NEWNET: {e}); \
             unprivileged user namespaces are disabled on this host (user.max_user_namespaces, \
             kernel.unprivileged_userns_clone, or an AppArmor restriction)"
        )
    })?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("failed to write {file} for the user namespace: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

#[cfg(target_os = "linux")]
fn landlock_rules(c: &Confinement) -> Result<(), String> {
    use landlock::{
        ABI, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
        Scope, path_beneath_rules,
    };
    let missing = |e: landlock::RulesetError| {
        format!("failed to apply Landlock (kernel feature Landlock, ABI 3 or later needed): {e}")
    };
    // Writes are handled at the ABI this build knows; the base (ABI 3: writes, truncation,
    // cross-directory links) is a hard requirement, newer rights are taken where present.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_write(ABI::V3))
        .map_err(missing)?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_write(ABI::V6))
        .map_err(missing)?;
    if c.no_network {
        // Belt and braces over the empty namespace, where the ABI has it (4 and later).
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(missing)?;
    }
    // Abstract unix sockets and signals outside the sandbox (ABI 6 and later).
    ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal).map_err(missing)?;
    let mut writable: Vec<PathBuf> = vec![c.scratch.clone()];
    writable.extend(c.writable.iter().cloned());
    for path in &writable {
        if !path.exists() {
            return Err(format!("writable path {} does not exist", path.display()));
        }
    }
    let created = ruleset.create().map_err(missing)?;
    let status = created
        .add_rules(path_beneath_rules(&writable, AccessFs::from_write(ABI::V6)))
        .and_then(|r| r.add_rules(path_beneath_rules(DEVICES, AccessFs::from_write(ABI::V6))))
        .map_err(|e| format!("failed to add a Landlock rule: {e}"))?
        .restrict_self()
        .map_err(missing)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("failed to apply Landlock: the kernel does not enforce it (Landlock not enabled: add `landlock` to the `lsm=` boot parameter)".into());
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn drop_capabilities() -> Result<(), String> {
    use caps::{CapSet, Capability};
    let can_drop_bounding = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false);
    if can_drop_bounding {
        caps::clear(None, CapSet::Bounding).map_err(|e| format!("failed to empty the capability bounding set: {e}"))?;
    } else if !caps::read(None, CapSet::Permitted).is_ok_and(|s| s.is_empty()) {
        return Err(
            "failed to empty the capability bounding set: the process has capabilities but not CAP_SETPCAP".into()
        );
    }
    // Without CAP_SETPCAP and with no permitted capabilities, the bounding set cannot be
    // emptied but also cannot be used: no-new-privileges keeps set-user-ID and file
    // capabilities from granting anything at exec.
    for set in [CapSet::Ambient, CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(|e| format!("failed to clear the {set:?} capability set: {e}"))?;
    }
    Ok(())
}
