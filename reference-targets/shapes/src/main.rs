//! `elengtis-shapes`: stand-ins for four popular third-party MCP servers, one per start
//! (`--shape`): `sqlite` (PyPI `mcp-server-sqlite`), `git` (`mcp-server-git`), `files`
//! (`@modelcontextprotocol/server-filesystem`) and `fetch` (`mcp-server-fetch`).
//!
//! Each shape offers the real server's tool names, argument names and input schemas (the
//! real servers' JSON, copied) with similar descriptions and result texts, and really does
//! what it says, on a small scale: rows go into an SQLite file, commits into a tiny
//! repository format of its own under `<repo>/.git/`, files under `--root`, and a fetch is a
//! real HTTP GET. Nothing is random, so the same calls give the same results. `elengtis init`
//! is tested against these shapes.
//!
//! This file only parses flags, prepares the shape's state and starts the chosen transport
//! (from `elengtis-target-kit`); logs go to stderr because stdout is the MCP channel in
//! stdio mode.

mod fetch;
mod files;
mod git;
mod server;
mod sqlite;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, ValueEnum};
use elengtis_target_kit::TransportArgs;

use crate::server::{Shape, ShapesServer};

/// Which third-party server the process stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ShapeName {
    /// `mcp-server-sqlite`: SQL on one database file (`--db-path`).
    Sqlite,
    /// `mcp-server-git`: status, add, commit, log, branches and show on repository paths.
    Git,
    /// `@modelcontextprotocol/server-filesystem`: files under one allowed directory (`--root`).
    Files,
    /// `mcp-server-fetch`: HTTP GET of a URL, honouring the site's robots.txt.
    Fetch,
}

/// Stand-ins for popular third-party MCP servers (elengtis reference target).
#[derive(Debug, Parser)]
#[command(name = "elengtis-shapes", version, about)]
struct Args {
    /// Which server to stand in for.
    #[arg(long, value_enum)]
    shape: ShapeName,

    /// sqlite: the database file (created empty, with its parent directories, if missing).
    #[arg(long, value_name = "PATH")]
    db_path: Option<PathBuf>,

    /// git: a directory created (if missing) and initialised as a repository at start.
    #[arg(long, visible_alias = "repository", value_name = "DIR")]
    repo: Option<PathBuf>,

    /// files: the one allowed directory (created if missing).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,

    /// fetch: do not request robots.txt before a fetch.
    #[arg(long)]
    ignore_robots_txt: bool,

    /// fetch: the User-Agent of every request.
    #[arg(long, value_name = "TEXT", default_value = fetch::DEFAULT_USER_AGENT)]
    user_agent: String,

    // `--transport`, `--port`, `--bind`, `--path` (shared with the other reference servers).
    #[command(flatten)]
    serve: TransportArgs,
}

impl Args {
    /// The flags that belong to another shape than the chosen one, by name.
    fn misplaced(&self) -> Vec<&'static str> {
        let mut found = Vec::new();
        if self.db_path.is_some() && self.shape != ShapeName::Sqlite {
            found.push("--db-path (sqlite)");
        }
        if self.repo.is_some() && self.shape != ShapeName::Git {
            found.push("--repo (git)");
        }
        if self.root.is_some() && self.shape != ShapeName::Files {
            found.push("--root (files)");
        }
        if self.ignore_robots_txt && self.shape != ShapeName::Fetch {
            found.push("--ignore-robots-txt (fetch)");
        }
        found
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let usage =
        |message: String| -> ! { Args::command().error(clap::error::ErrorKind::ArgumentConflict, message).exit() };
    let misplaced = args.misplaced();
    if !misplaced.is_empty() {
        usage(format!("--shape {:?} does not take {}", args.shape, misplaced.join(", ")));
    }
    match args.shape {
        ShapeName::Sqlite if args.db_path.is_none() => usage("--shape sqlite needs --db-path PATH".to_owned()),
        ShapeName::Files if args.root.is_none() => usage("--shape files needs --root DIR".to_owned()),
        _ => {}
    }
    // The kit logs the transports' events (e.g. the listening address) under its own target.
    elengtis_target_kit::init_logging("warn,elengtis_shapes=info,elengtis_target_kit=info");
    elengtis_target_kit::run_main_for(args.serve.transport, run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let shape = match args.shape {
        ShapeName::Sqlite => {
            let path = args.db_path.context("--db-path is required")?;
            let db = sqlite::Database::open(&path)
                .with_context(|| format!("failed to use the database {}", path.display()))?;
            Shape::Sqlite(db)
        }
        ShapeName::Git => {
            if let Some(dir) = &args.repo {
                git::init_at_start(dir).with_context(|| format!("failed to use the repository {}", dir.display()))?;
            }
            Shape::Git(git::Git::default())
        }
        ShapeName::Files => {
            let root = args.root.context("--root is required")?;
            let files = files::Files::open(&root)
                .with_context(|| format!("failed to use the allowed directory {}", root.display()))?;
            Shape::Files(files)
        }
        ShapeName::Fetch => Shape::Fetch(fetch::Fetcher::new(args.user_agent, !args.ignore_robots_txt)),
    };
    let server = ShapesServer::new(shape);
    tracing::info!(shape = ?args.shape, transport = ?args.serve.transport, "starting elengtis-shapes");
    elengtis_target_kit::serve(server, args.serve).await
}
