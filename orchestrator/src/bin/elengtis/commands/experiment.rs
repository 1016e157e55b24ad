//! `elengtis experiment`: plan and run live comparison experiments.

use std::sync::Arc;

use elengtis::error::CommandError as Error;
use elengtis::experiment::ExperimentCommand;
use elengtis::sandbox::docker::runtime::RuntimeArg;

use super::common::{docker_options, run_options};
use crate::render::{Terminal, interactive};

pub(crate) async fn run(command: ExperimentCommand) -> Result<i32, Error> {
    let terminal = Arc::new(Terminal::new(interactive()));
    let options = run_options(1, docker_options(false, &RuntimeArg::default()), terminal.clone());
    let result = elengtis::experiment::command(command, options, &|line| terminal.print(line)).await;
    terminal.finish();
    Ok(result?)
}
