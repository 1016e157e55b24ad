//! `elengtis images`: build or import the images of isolated trials.

use std::path::PathBuf;

use clap::Subcommand;
use elengtis::error::CommandError as Error;
use elengtis::exit_codes;
use elengtis::sandbox::docker;
use serde_json::json;

use crate::output::{errln, outln};
use crate::render::interactive;

#[derive(Debug, Subcommand)]
pub(crate) enum ImagesCommand {
    /// Build the bundled images (the reference targets, the elengtis tool) and import them
    /// through the Docker API: from the static executables beside this one when they are all
    /// there (the release build, the tool image), else from a static compile of the source
    /// tree this binary was built from.
    Build {
        /// Compile the executables from this elengtis source tree (a static build of its own).
        #[arg(long, conflicts_with = "binaries")]
        source: Option<PathBuf>,
        /// Import the static executables already in DIR instead of building them (every
        /// bundled one must be there and static, e.g. a test build made with the static flags;
        /// see docs/performance.md).
        #[arg(long, value_name = "DIR")]
        binaries: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Import a root filesystem tarball as a non-root image (see sandbox-images/pypi/).
    Import {
        /// The tarball (uncompressed, or compressed as the engine accepts).
        #[arg(long)]
        rootfs: PathBuf,
        /// Image reference to create (`repo:tag`).
        #[arg(long)]
        tag: String,
        /// `uid:gid` the image runs as (never root; default 65534:65534).
        #[arg(long)]
        user: Option<String>,
        /// Entrypoint as a JSON array, e.g. `["/opt/venv/bin/python","-m","server"]`.
        #[arg(long)]
        entrypoint: Option<String>,
        /// Default arguments as a JSON array.
        #[arg(long)]
        cmd: Option<String>,
        /// A label `KEY=VALUE` (repeat, or list several).
        #[arg(long = "label", num_args = 1.., action = clap::ArgAction::Append)]
        labels: Vec<String>,
    },
}

pub(crate) async fn run(command: ImagesCommand) -> Result<i32, Error> {
    use elengtis::sandbox::docker::images;
    // What the images are made from is settled before the engine is asked anything: a wrong
    // `--binaries` directory is reported without a Docker engine.
    match command {
        ImagesCommand::Build { source, binaries, json } => {
            let from = match (binaries, source) {
                (Some(dir), _) => images::BinarySource::Prebuilt(images::prebuilt_in(&dir)?),
                (None, Some(source)) => images::BinarySource::Build { source, reason: None },
                (None, None) => images::default_source()?,
            };
            let engine = docker::api::connect().await?;
            if let images::BinarySource::Prebuilt(dir) = &from {
                errln!("importing the bundled images from the static executables in {}", dir.display());
            }
            let dir = from.binaries(&images::Notify::stderr(interactive())).await?;
            let built = images::build_bundled(&engine, &dir, &images::Notify::silent()).await?;
            if json {
                outln!("{}", json!({"images": built}));
            } else {
                for image in &built {
                    let unchanged = if image.unchanged { ", unchanged" } else { "" };
                    outln!("{} {} ({:.1} MB{unchanged})", image.reference, image.id, image.size as f64 / 1e6);
                }
            }
            Ok(exit_codes::SUCCESS)
        }
        ImagesCommand::Import { rootfs, tag, user, entrypoint, cmd, labels } => {
            let engine = docker::api::connect().await?;
            let parse_list = |flag: &str, text: Option<String>| -> Result<Option<Vec<String>>, Error> {
                text.map(|t| {
                    serde_json::from_str::<Vec<String>>(&t)
                        .map_err(|e| Error::Usage(format!("{flag} must be a JSON array of strings: {e}")))
                })
                .transpose()
            };
            let entrypoint = parse_list("--entrypoint", entrypoint)?;
            let cmd = parse_list("--cmd", cmd)?;
            let mut pairs = Vec::new();
            for label in labels {
                let Some((k, v)) = label.split_once('=') else {
                    return Err(Error::Usage(format!("--label must be KEY=VALUE, found `{label}`")));
                };
                pairs.push((k.to_owned(), v.to_owned()));
            }
            let id = images::import_rootfs_file(
                &engine,
                &rootfs,
                &tag,
                user.as_deref(),
                entrypoint,
                cmd,
                &pairs,
                images::IMPORT_DEADLINE,
            )
            .await?;
            outln!("{tag} {id}");
            Ok(exit_codes::SUCCESS)
        }
    }
}
