//! `elengtis verify`: check a results directory end to end.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use serde_json::json;

use crate::output::{errln, out, outln};

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The results directory.
    dir: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Refuse (exit 10) a directory that is not sealed: a run still going, or killed.
    #[arg(long)]
    require_sealed: bool,
    /// Check the seal's signature with this key: an HMAC secret, or an Ed25519 private key
    /// (PKCS#8 PEM). Implies --require-sealed. ELENGTIS_SIGNING_KEY and
    /// ELENGTIS_SIGNING_KEY_FILE are used too.
    #[arg(long, value_name = "FILE")]
    key: Vec<PathBuf>,
    /// Check the seal's Ed25519 signature with this public key (SPKI PEM, as `elengtis
    /// keygen` writes it). Implies --require-sealed.
    #[arg(long, value_name = "FILE")]
    public_key: Vec<PathBuf>,
}

pub(crate) fn run(args: VerifyArgs) -> Result<i32, Error> {
    let VerifyArgs { dir, json, require_sealed, key, public_key } = args;
    verify_command(&dir, json, require_sealed, &key, &public_key)
}

/// The exit code of `verify` for what it found: 0 (verified), 10 (nothing wrong, but its
/// integrity cannot be established), 3 (malformed records) or 4.
fn verification_code(verification: &elengtis::results::verify::Verification) -> i32 {
    use elengtis::results::verify::Verdict;
    match verification.verdict() {
        Verdict::Verified => exit_codes::SUCCESS,
        Verdict::Unverifiable => exit_codes::UNVERIFIED,
        Verdict::Refused if verification.is_malformed() => exit_codes::INVALID_CONFIG,
        Verdict::Refused => exit_codes::RESULTS_DIR,
    }
}

fn verify_command(
    dir: &Path,
    json: bool,
    require_sealed: bool,
    keys: &[PathBuf],
    public_keys: &[PathBuf],
) -> Result<i32, Error> {
    use elengtis::results::keys::{Checker, Key};
    use elengtis::results::verify::{Verdict, VerifyOptions};
    let key_error = |e: elengtis::results::keys::KeyError| Error::Usage(e.to_string());
    let mut options = VerifyOptions::from_env().map_err(key_error)?;
    for path in keys {
        options.checkers.push(Checker::Key(Arc::new(Key::from_file(path).map_err(key_error)?)));
    }
    for path in public_keys {
        options.checkers.push(Checker::public_from_file(path).map_err(key_error)?);
    }
    // A signature lives on a seal: a key given in any way (a flag or the environment) asks for one.
    options.require_sealed = require_sealed || !options.checkers.is_empty();
    let verification = elengtis::results::verify::verify_with(dir, &options)?;
    let code = verification_code(&verification);
    if json {
        let mut value = json!(verification);
        value["ok"] = json!(verification.verdict() == Verdict::Verified);
        value["verdict"] = json!(match verification.verdict() {
            Verdict::Verified => "verified",
            Verdict::Unverifiable => "unverifiable",
            Verdict::Refused => "refused",
        });
        value["integrity"] = json!(verification.integrity());
        outln!("{value}");
        return Ok(code);
    }
    for note in &verification.notes {
        errln!("note: {note}");
    }
    errln!("{}: {}", dir.display(), verification.summary_line());
    errln!("  integrity: {}", verification.integrity().says);
    for checked in &verification.checked {
        errln!("  checked: {checked}");
    }
    for unchecked in &verification.unchecked {
        errln!("  not checked: {unchecked}");
    }
    if let elengtis::results::verify::SealState::Sealed { sha256, signatures, .. } = &verification.seal {
        errln!("  seal sha256: {sha256}");
        for signature in signatures {
            errln!("  signature: {signature}");
        }
    }
    let matrix = verification
        .matrix_trials
        .map(|n| format!(", {n} trial{} in the recorded matrix", if n == 1 { "" } else { "s" }))
        .unwrap_or_default();
    let rows = format!("{} row{}", verification.rows, if verification.rows == 1 { "" } else { "s" });
    match verification.verdict() {
        Verdict::Verified => outln!("{}: ok ({rows}{matrix})", dir.display()),
        Verdict::Unverifiable => {
            outln!("{}: not verified ({rows}{matrix}): {}", dir.display(), verification.summary_line());
            errln!(
                "error: {}: nothing wrong was found, but its integrity cannot be established (exit {}; see `not checked` above)",
                dir.display(),
                exit_codes::UNVERIFIED
            );
        }
        Verdict::Refused => {
            out!("{}", verification.render_problems());
            errln!(
                "error: {}: {} problem{} (each above: file:line: what is wrong; repair: how)",
                dir.display(),
                verification.problems.len(),
                if verification.problems.len() == 1 { "" } else { "s" }
            );
        }
    }
    Ok(code)
}
