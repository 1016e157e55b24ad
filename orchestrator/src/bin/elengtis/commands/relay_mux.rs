//! `elengtis relay-mux` (internal): the relay container's main process.

use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::sandbox::docker;

use crate::output::errln;

#[derive(Debug, clap::Args)]
pub(crate) struct RelayMuxArgs {
    /// `ip:port` of the target (in the target's network namespace: `127.0.0.1:PORT`).
    addr: std::net::SocketAddr,
    /// How long the target may take to accept connections, seconds.
    #[arg(long, default_value_t = 30)]
    probe_seconds: u64,
}

pub(crate) async fn run(args: RelayMuxArgs) -> Result<i32, Error> {
    let RelayMuxArgs { addr, probe_seconds } = args;
    match docker::relay::mux::run(addr, std::time::Duration::from_secs(probe_seconds)).await {
        Ok(()) => Ok(exit_codes::SUCCESS),
        Err(e) => {
            errln!("elengtis relay-mux: {e}");
            Ok(exit_codes::RUN_INCOMPLETE)
        }
    }
}
