//! The command line of `elengtis init`: flags, and the target description they make.

use std::path::PathBuf;

use super::plan::{ImageTransport, TargetSpec};
use super::{InitError, InitOptions};

/// How the server in an image speaks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    /// stdin/stdout of the container (no port).
    Stdio,
    /// Streamable HTTP on `--port` and `--path` (also spelt `streamable_http`, as in campaigns).
    #[value(alias = "streamable_http")]
    StreamableHttp,
}

/// How to start the server under test: an image in a hardened container per trial, or a local
/// stdio command (shared by `init` and `scan`).
#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// The server is this image, run in a hardened container per trial (needs Docker). The
    /// words after `--` are its command (arguments to its entrypoint).
    #[arg(long, value_name = "IMAGE", conflicts_with = "command")]
    pub image: Option<String>,
    /// How the server in the image speaks MCP (required with --image).
    #[arg(long, value_enum, requires = "image")]
    pub transport: Option<TransportArg>,
    /// The container port of a streamable_http server.
    #[arg(long, requires = "image")]
    pub port: Option<u16>,
    /// The MCP path of a streamable_http server.
    #[arg(long, requires = "image", default_value = "/mcp")]
    pub path: String,
    /// The user id the container runs as (never root).
    #[arg(long, default_value_t = 65534, value_parser = clap::value_parser!(u64).range(1..))]
    pub uid: u64,
    /// The group id the container runs as (never root).
    #[arg(long, default_value_t = 65534, value_parser = clap::value_parser!(u64).range(1..))]
    pub gid: u64,
    /// An SQLite database inside the image (absolute path): the scenario gets a
    /// container_sqlite_query check of it, and its directory a fresh volume per trial
    /// (unless --volume names the volumes).
    #[arg(long, value_name = "PATH", requires = "image")]
    pub database: Option<String>,
    /// A directory in the container that gets a fresh volume per trial (repeatable, or
    /// several after one flag).
    #[arg(long = "volume", value_name = "DIR", requires = "image", num_args = 1.., action = clap::ArgAction::Append)]
    pub volumes: Vec<String>,
    /// The server is this local command speaking MCP over stdio; the words after `--` are
    /// its arguments. Without --command and --image, the words after `--` are the command
    /// and its arguments.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// The target's id (default: from the image or command name).
    #[arg(long)]
    pub id: Option<String>,
    /// Run the container even on a Docker engine or runtime with known container-escape or
    /// egress bugs (see docs/security.md, "Engine gate").
    #[arg(long, env = "ELENGTIS_ALLOW_VULNERABLE_ENGINE", value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_vulnerable_engine: bool,
    #[command(flatten)]
    pub runtime: crate::sandbox::docker::runtime::RuntimeArg,
    /// After `--`: the stdio command and its arguments, or the container's command.
    #[arg(last = true, value_name = "ARGS")]
    pub rest: Vec<String>,
}

/// `elengtis init`: write a campaign skeleton for a server.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// Directory to write campaign.yaml, campaign-control.yaml and SCENARIO.yaml into
    /// (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Overwrite those files if they exist (otherwise init refuses and writes nothing).
    #[arg(long)]
    pub force: bool,
    /// The scenario's id and file name.
    #[arg(long, default_value = "first-call")]
    pub scenario: String,
    #[command(flatten)]
    pub target: TargetArgs,
}

impl InitArgs {
    /// The target description and output the flags ask for.
    pub fn options(&self) -> Result<InitOptions, InitError> {
        Ok(InitOptions {
            spec: self.target.spec()?,
            target_id: self.target.id.clone(),
            scenario_id: self.scenario.clone(),
            out: self.out.clone(),
            force: self.force,
        })
    }
}

impl TargetArgs {
    /// The target the flags describe.
    pub fn spec(&self) -> Result<TargetSpec, InitError> {
        let spec = match (&self.image, &self.command) {
            (Some(image), _) => {
                let transport = match (self.transport, self.port) {
                    (None, _) => {
                        return Err(InitError::Usage(
                            "failed to describe the image target: --transport stdio|streamable_http is required with --image".into(),
                        ));
                    }
                    (Some(TransportArg::Stdio), Some(_)) => {
                        return Err(InitError::Usage(
                            "failed to describe the image target: --port is for --transport streamable_http (a stdio server has no port)".into(),
                        ));
                    }
                    (Some(TransportArg::Stdio), None) => ImageTransport::Stdio,
                    (Some(TransportArg::StreamableHttp), None) => {
                        return Err(InitError::Usage(
                            "failed to describe the image target: --transport streamable_http needs --port (the container port)".into(),
                        ));
                    }
                    (Some(TransportArg::StreamableHttp), Some(port)) => {
                        if !self.path.starts_with('/') {
                            return Err(InitError::Usage(format!(
                                "failed to use --path {:?}: the MCP path must start with /",
                                self.path
                            )));
                        }
                        ImageTransport::StreamableHttp { port, path: self.path.clone() }
                    }
                };
                let volumes = match (&self.database, self.volumes.is_empty()) {
                    (Some(db), true) => vec![database_dir(db)?],
                    (Some(db), false) => {
                        database_dir(db)?;
                        self.volumes.clone()
                    }
                    (None, _) => self.volumes.clone(),
                };
                if let Some(v) = volumes.iter().find(|v| !v.starts_with('/')) {
                    return Err(InitError::Usage(format!("failed to use --volume {v:?}: it must be an absolute path")));
                }
                TargetSpec::Image {
                    image: image.clone(),
                    transport,
                    uid: self.uid,
                    gid: self.gid,
                    command: self.rest.clone(),
                    volumes,
                    database: self.database.clone(),
                    runtime: self.runtime.runtime.clone(),
                }
            }
            (None, Some(command)) => TargetSpec::Stdio { command: command.clone(), args: self.rest.clone() },
            (None, None) => match self.rest.split_first() {
                Some((command, args)) => TargetSpec::Stdio { command: command.clone(), args: args.to_vec() },
                None => {
                    return Err(InitError::Usage(
                        "failed to describe the target: give --image IMAGE --transport stdio|streamable_http, --command CMD, or `-- CMD ARGS...`".into(),
                    ));
                }
            },
        };
        let mut spec = spec;
        if let TargetSpec::Stdio { command, .. } = &mut spec {
            if command.trim().is_empty() {
                return Err(InitError::Usage("failed to describe the stdio target: the command is empty".into()));
            }
            // The campaign lives in --out, and may be run from anywhere.
            if let Ok(cwd) = std::env::current_dir() {
                *command = absolute_command(command, &cwd);
            }
        }
        Ok(spec)
    }
}

/// A relative command path (`./server`, `bin/server`) made absolute against `cwd`, so that the
/// campaign written elsewhere still finds it; a bare name (looked up in `PATH`) or an absolute
/// path stays as it is.
pub fn absolute_command(command: &str, cwd: &std::path::Path) -> String {
    let path = std::path::Path::new(command);
    if path.is_absolute() || !command.contains('/') {
        return command.to_owned();
    }
    let joined = cwd.join(path);
    // `./server` → `/cwd/server`, not `/cwd/./server`.
    let normal: PathBuf = joined.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect();
    normal.display().to_string()
}

/// The directory of an absolute database path, which gets the volume (`/data/notes.db` →
/// `/data`).
fn database_dir(path: &str) -> Result<String, InitError> {
    let parent = std::path::Path::new(path).parent().map(|p| p.display().to_string()).unwrap_or_default();
    if !path.starts_with('/') || path.ends_with('/') || parent.is_empty() || parent == "/" {
        return Err(InitError::Usage(format!(
            "failed to use --database {path:?}: it must be an absolute file path below a directory (such as /data/app.db), whose directory gets a fresh volume per trial"
        )));
    }
    Ok(parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: InitArgs,
    }

    fn parse(words: &[&str]) -> Result<InitOptions, String> {
        let mut argv = vec!["init"];
        argv.extend_from_slice(words);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.args.options().map_err(|e| e.to_string())
    }

    #[test]
    fn stdio_targets_from_the_words_after_the_separator_or_command() {
        let o = parse(&["--out", "d", "--", "elengtis-notes", "--db", "/tmp/n.db"]).unwrap();
        assert_eq!(
            o.spec,
            TargetSpec::Stdio { command: "elengtis-notes".into(), args: vec!["--db".into(), "/tmp/n.db".into()] }
        );
        let o = parse(&["--out", "d", "--command", "srv", "--", "-v"]).unwrap();
        assert_eq!(o.spec, TargetSpec::Stdio { command: "srv".into(), args: vec!["-v".into()] });
        assert!(parse(&["--out", "d"]).unwrap_err().contains("--image IMAGE"));
    }

    #[test]
    fn relative_commands_become_absolute_and_bare_names_stay() {
        let cwd = std::path::Path::new("/work/here");
        assert_eq!(absolute_command("./server.py", cwd), "/work/here/server.py");
        assert_eq!(absolute_command("bin/srv", cwd), "/work/here/bin/srv");
        assert_eq!(absolute_command("elengtis-notes", cwd), "elengtis-notes");
        assert_eq!(absolute_command("/usr/bin/srv", cwd), "/usr/bin/srv");
    }

    #[test]
    fn image_targets_need_a_transport_and_a_database_brings_its_volume() {
        let o = parse(&[
            "--out",
            "d",
            "--image",
            "elengtis/notes:0.1.0",
            "--transport",
            "stdio",
            "--database",
            "/data/notes.db",
        ])
        .unwrap();
        let TargetSpec::Image { volumes, database, transport, .. } = o.spec else { panic!("not an image") };
        assert_eq!(volumes, ["/data"]);
        assert_eq!(database.as_deref(), Some("/data/notes.db"));
        assert_eq!(transport, ImageTransport::Stdio);
        assert!(parse(&["--out", "d", "--image", "x"]).unwrap_err().contains("--transport"));
        assert!(
            parse(&["--out", "d", "--image", "x", "--transport", "streamable-http"]).unwrap_err().contains("--port")
        );
        let o = parse(&["--out", "d", "--image", "x", "--transport", "streamable_http", "--port", "8000"]).unwrap();
        assert!(matches!(
            o.spec,
            TargetSpec::Image { transport: ImageTransport::StreamableHttp { port: 8000, .. }, .. }
        ));
        assert!(
            parse(&["--out", "d", "--image", "x", "--transport", "stdio", "--database", "notes.db"])
                .unwrap_err()
                .contains("absolute")
        );
        assert!(parse(&["--out", "d", "--database", "/data/x.db", "--", "cmd"]).is_err());
    }
}
