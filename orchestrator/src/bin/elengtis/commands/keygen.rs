//! `elengtis keygen`: make an Ed25519 key pair for signing seals.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use crate::output::outln;

#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the private key (the public key goes to FILE.pub).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

pub(crate) fn run(args: KeygenArgs) -> Result<i32, Error> {
    keygen(&args.out)
}

/// `keygen --out FILE`: an Ed25519 pair, FILE and FILE.pub.
fn keygen(out: &Path) -> Result<i32, Error> {
    let mut public = out.as_os_str().to_owned();
    public.push(".pub");
    let public = PathBuf::from(public);
    let key_id = elengtis::results::keys::generate(out, &public).map_err(|e| Error::Usage(e.to_string()))?;
    outln!("wrote {} (private: keep it secret) and {}", out.display(), public.display());
    outln!("key id: {key_id}");
    outln!(
        "sign runs with ELENGTIS_SIGNING_KEY_FILE={}; check them with `elengtis verify --public-key {} DIR`",
        out.display(),
        public.display()
    );
    Ok(exit_codes::SUCCESS)
}
