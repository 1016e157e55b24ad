//! `elengtis gate --add SEED`: append a finding `scan --prove` proved KEPT to a gate file
//! (docs/scan.md, "Hand-off"). The seed must be a candidate of a scan directory whose
//! `scan.json` records its proof as KEPT; the finding is appended with the scan's
//! `target.yaml` and the guarded side it was proved against, the file's own text and
//! comments kept. A file that does not exist is created; the result is loaded back before it
//! replaces the old file (a gate that would not load is never written).

use std::path::{Component, Path, PathBuf};

use elengtis_core::format::gate::load_gate;

/// Why a finding could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The seed is not a proven candidate of a scan, or the gate cannot take it.
    #[error("failed to add {seed} to the gate: {why}")]
    Refused {
        /// The seed as given.
        seed: String,
        /// Why.
        why: String,
    },
    /// The gate file does not load (before or after the edit).
    #[error(transparent)]
    Load(#[from] elengtis_core::format::LoadError),
    /// A file could not be read or written.
    #[error("failed to {what} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The gate file could not be replaced.
    #[error(transparent)]
    Write(#[from] crate::results::store::StoreError),
}

/// What was added.
#[derive(Debug, Clone)]
pub struct Added {
    /// The seed's id.
    pub seed_id: String,
    /// The lines appended.
    pub entry: String,
    /// Whether the gate file was created.
    pub created: bool,
}

/// `path` relative to the directory `base` (both made absolute first).
fn relative(path: &Path, base: &Path) -> PathBuf {
    let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (path, base) = (absolute(path), absolute(base));
    let (p, b): (Vec<Component>, Vec<Component>) = (path.components().collect(), base.components().collect());
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// Append the proven candidate `seed` (a `candidates/<id>.seed.yaml` of a scan directory) to
/// the gate file `gate`.
///
/// # Errors
///
/// [`AddError`]: the candidate is not proven KEPT, was proved against a guarded side a gate
/// cannot re-prove, is already in the gate, or a file does not load or cannot be written.
pub fn add(gate: &Path, seed: &Path) -> Result<Added, AddError> {
    let refused = |why: String| AddError::Refused { seed: seed.display().to_string(), why };
    let scan_dir = seed.parent().and_then(Path::parent).ok_or_else(|| {
        refused("it is not a candidate of a scan directory (<scan>/candidates/<id>.seed.yaml)".into())
    })?;
    let scan_json = scan_dir.join("scan.json");
    let text = std::fs::read(&scan_json).map_err(|_| {
        refused(format!("{} is not there: add a candidate of `elengtis scan --prove`", scan_json.display()))
    })?;
    let report: super::super::scan::ScanReport = serde_json::from_slice(&text)
        .map_err(|e| refused(format!("{} does not read as a scan report: {e}", scan_json.display())))?;
    let name = seed.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let candidate = report
        .candidates
        .iter()
        .find(|c| c.seed_file.as_deref() == Some(&format!("candidates/{name}")))
        .ok_or_else(|| refused(format!("{} lists no candidate with this seed file", scan_json.display())))?;
    let proof = candidate.proof.as_ref().ok_or_else(|| {
        refused(format!(
            "candidate {} was not proved (status {}): run `elengtis scan --prove` first",
            candidate.id, candidate.status
        ))
    })?;
    if proof.verdict != "KEPT" {
        return Err(refused(format!(
            "candidate {} was proved {}, not KEPT ({}): only a kept finding belongs in a gate",
            candidate.id, proof.verdict, proof.report
        )));
    }
    let guarded = match proof.guarded_side.as_str() {
        "shim" => "shim",
        "controls" => "controls",
        other => {
            return Err(refused(format!(
                "candidate {} was proved against the guarded side `{other}`; a gate re-proves a target of your own \
                 against the shim or its declared controls only (prove it again with `scan --prove` and no \
                 --guarded-target)",
                candidate.id
            )));
        }
    };
    let target = scan_dir.join(report.target_file.as_deref().unwrap_or("target.yaml"));
    let gate_dir = match gate.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&gate_dir).map_err(|source| AddError::Io {
        what: "create the directory of",
        path: gate.to_path_buf(),
        source,
    })?;
    let seed_rel = relative(seed, &gate_dir);
    let target_rel = relative(&target, &gate_dir);
    let entry = format!(
        "  # {} (elengtis scan --prove: {}; {})\n  - seed: {}\n    target: {}\n    guarded: {guarded}\n",
        candidate.id,
        proof.verdict,
        proof.report,
        crate::init::yaml::scalar(&seed_rel.display().to_string()),
        crate::init::yaml::scalar(&target_rel.display().to_string()),
    );
    let created = !gate.exists();
    // A gate re-drives a finding on your own target with its live model (docs/gate.md).
    let no_model = |what: String| {
        refused(format!(
            "{what}; a gate re-drives a finding on your own target with a live model: scan with --model-config FILE \
             (the model the gate will use), or give the gate a `model:` (docs/gate.md), then add again"
        ))
    };
    let new_text = if created {
        let model = report.model.as_ref().ok_or_else(|| no_model("the scan ran the candidates' scripts".into()))?;
        let model = serde_json::to_value(model).unwrap_or_default();
        format!(
            "# Proven findings re-proven by `elengtis gate` (docs/gate.md); added with `elengtis gate --add`.\n\
             schema_version: 1\n# The live model the scan ran with.\nmodel: {}\nfindings:\n{entry}",
            crate::init::yaml::flow(&model)
        )
    } else {
        let loaded = load_gate(gate)?;
        if loaded.gate.model.is_none() {
            return Err(no_model(format!("{} names no `model`", gate.display())));
        }
        let resolved = std::fs::canonicalize(seed).unwrap_or_else(|_| seed.to_path_buf());
        if loaded.findings.iter().any(|f| std::fs::canonicalize(&f.seed).unwrap_or_else(|_| f.seed.clone()) == resolved)
        {
            return Err(refused(format!("{} already holds this seed", gate.display())));
        }
        let old = std::fs::read_to_string(gate).map_err(|source| AddError::Io {
            what: "read",
            path: gate.to_path_buf(),
            source,
        })?;
        // The findings must be the file's last block, written as a block list, so an entry
        // appended at its end belongs to it.
        let lines: Vec<&str> = old.lines().collect();
        let at = lines
            .iter()
            .rposition(|l| l.starts_with("findings:"))
            .ok_or_else(|| refused(format!("{} has no `findings:` block at the start of a line", gate.display())))?;
        let tail_ok = lines[at].trim_end() == "findings:"
            && lines[at + 1..].iter().all(|l| l.trim().is_empty() || l.starts_with(' ') || l.starts_with('#'));
        if !tail_ok {
            return Err(refused(format!(
                "the `findings:` of {} is not its last block or not a block list; add the entry by hand:\n{entry}",
                gate.display()
            )));
        }
        let mut text = old;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&entry);
        text
    };
    // Checked before it replaces anything: written beside the file and loaded there.
    let probe = gate_dir.join(format!(".{}.add.yaml", gate.file_name().and_then(|n| n.to_str()).unwrap_or("gate")));
    crate::results::store::write_atomic(&probe, new_text.as_bytes())?;
    let checked = load_gate(&probe);
    let _ = std::fs::remove_file(&probe);
    checked?;
    crate::results::store::write_atomic(gate, new_text.as_bytes())?;
    Ok(Added { seed_id: candidate.id.clone(), entry, created })
}
