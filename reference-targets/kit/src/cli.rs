//! The transport flags every reference server takes, to `#[command(flatten)]` into its
//! command line, and [`serve`], which starts the transport they choose.

use std::net::IpAddr;

use clap::{Args, ValueEnum};
use rmcp::ServerHandler;

use crate::serve::{HttpOptions, run_http, run_stdio};

/// How a server talks MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// JSON-RPC lines on stdin/stdout.
    Stdio,
    /// MCP Streamable HTTP on `--bind`:`--port` under `--path`.
    StreamableHttp,
}

/// `--transport`, and where streamable HTTP listens.
#[derive(Debug, Clone, Args)]
pub struct TransportArgs {
    /// MCP transport.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,

    /// TCP port for streamable-http (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,

    /// Numeric address for streamable-http; any non-loopback address also turns off the
    /// Host-header (DNS-rebinding) check.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: IpAddr,

    /// URL path of the streamable-http endpoint.
    #[arg(long, default_value = "/mcp")]
    pub path: String,
}

/// Serves `server` over the transport `args` choose until it ends (stdin closes, or a
/// shutdown signal arrives); see [`run_stdio`] and [`run_http`].
pub async fn serve<S: ServerHandler + Clone>(server: S, args: TransportArgs) -> anyhow::Result<()> {
    match args.transport {
        Transport::Stdio => run_stdio(server).await,
        Transport::StreamableHttp => {
            let options = HttpOptions { bind: args.bind, port: args.port, path: args.path };
            run_http(server, &options).await
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Transport, TransportArgs};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        serve: TransportArgs,
    }

    #[test]
    fn defaults_are_stdio_and_loopback_port_8000() {
        let cli = Cli::try_parse_from(["server"]).expect("no flags needed");
        assert_eq!(cli.serve.transport, Transport::Stdio);
        assert_eq!((cli.serve.bind.to_string().as_str(), cli.serve.port), ("127.0.0.1", 8000));
        assert_eq!(cli.serve.path, "/mcp");
    }

    #[test]
    fn http_flags_parse() {
        let cli = Cli::try_parse_from([
            "server",
            "--transport",
            "streamable-http",
            "--bind",
            "0.0.0.0",
            "--port",
            "0",
            "--path",
            "/",
        ])
        .expect("valid flags");
        assert_eq!(cli.serve.transport, Transport::StreamableHttp);
        assert_eq!((cli.serve.bind.to_string().as_str(), cli.serve.port), ("0.0.0.0", 0));
        assert_eq!(cli.serve.path, "/");
        assert!(Cli::try_parse_from(["server", "--bind", "localhost"]).is_err(), "names are not resolved");
    }
}
