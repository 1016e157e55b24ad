//! `elengtis schema`: write the JSON Schemas generated from this build.

use std::path::{Path, PathBuf};

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use crate::output::outln;

#[derive(Debug, clap::Args)]
pub(crate) struct SchemaArgs {
    /// Directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
}

pub(crate) fn run(args: SchemaArgs) -> Result<i32, Error> {
    schema(&args.out)
}

fn schema(out: &Path) -> Result<i32, Error> {
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let scan = elengtis_core::schema::render(&elengtis_core::schema::schema_for::<elengtis::scan::ScanReport>());
    for (name, content) in elengtis_core::schema::schemas().into_iter().chain([("scan.schema.json", scan)]) {
        let path = out.join(name);
        elengtis::results::store::write_atomic(&path, content.as_bytes())?;
        outln!("{}", path.display());
    }
    Ok(exit_codes::SUCCESS)
}
