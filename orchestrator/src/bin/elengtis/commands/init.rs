//! `elengtis init`: write a campaign skeleton from a server's tools.

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;

use super::common::target_sandbox;
use crate::output::{errln, out};

pub(crate) async fn run(args: elengtis::init::cli::InitArgs) -> Result<i32, Error> {
    let options = args.options()?;
    let sandbox = target_sandbox(elengtis::init::sandbox_needs(&options.spec), &args.target).await?;
    let sandbox = sandbox.as_ref().map(|s| s as &dyn elengtis::sandbox::SandboxBackend);
    let written = elengtis::init::run(&options, sandbox).await?;
    for warning in &written.warnings {
        errln!("WARNING: {warning}");
    }
    out!("{}", written.summary());
    Ok(exit_codes::SUCCESS)
}
