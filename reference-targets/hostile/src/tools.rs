//! The MCP tools of the hostile server. Each result is JSON text; a tool that cannot run at
//! all is a tool error.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::{
    ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerConfig},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::{abuse, probe};

/// The MCP server name.
pub const SERVER_NAME: &str = "elengtis-hostile";
/// The child flag that runs the fork bomb.
pub const FORK_BOMB_FLAG: &str = "--fork-bomb-child";
/// At most this many tasks in one fork bomb (well above any container's pids limit).
pub const FORK_BOMB_CAP: usize = 4096;
/// How long the fork bomb child may run.
const FORK_BOMB_DEADLINE: Duration = Duration::from_secs(30);

/// Arguments of `egress_probe`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EgressArgs {
    /// The probes to run, in parallel.
    pub probes: Vec<probe::Spec>,
}

/// Arguments of `balloon`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BalloonArgs {
    /// Stop at this many MiB (default: never; the OOM killer ends it).
    #[serde(default)]
    pub limit_mib: Option<usize>,
}

/// Arguments of `fill_tmp`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FillArgs {
    /// The directory to fill (default /tmp).
    #[serde(default)]
    pub dir: Option<String>,
    /// Stop at this many MiB (default 1024).
    #[serde(default)]
    pub cap_mib: Option<usize>,
}

/// Arguments of `flood_log`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FloodArgs {
    /// MiB written to stderr (default 64).
    #[serde(default)]
    pub mib: Option<usize>,
    /// Milliseconds to wait after the flood before answering (default 0).
    #[serde(default)]
    pub hold_ms: Option<u64>,
}

/// Arguments of `write_outside_tmp`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// Directories to try (default: /, /etc, /home, the working directory, /data).
    #[serde(default)]
    pub dirs: Option<Vec<String>>,
}

/// A tool outcome: `Ok` is a normal text result, `Err` a tool error.
type ToolOutcome = Result<String, String>;

/// Runs `work` on the blocking pool and encodes its JSON.
async fn blocking(work: impl FnOnce() -> serde_json::Value + Send + 'static) -> ToolOutcome {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Ok(value.to_string()),
        Err(e) => Err(format!("failed to run the tool: {e}")),
    }
}

/// The hostile server.
#[derive(Debug, Clone)]
pub struct HostileServer {
    tool_router: ToolRouter<Self>,
}

impl Default for HostileServer {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_router]
impl HostileServer {
    /// A new server.
    pub fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    #[tool(description = "Try each network destination (tcp, dns, icmp) and report the outcome of each as JSON.")]
    async fn egress_probe(&self, Parameters(EgressArgs { probes }): Parameters<EgressArgs>) -> ToolOutcome {
        let outcomes = tokio::task::spawn_blocking(move || probe::run_all(&probes))
            .await
            .map_err(|e| format!("failed to run the probes: {e}"))?;
        serde_json::to_string(&outcomes).map_err(|e| format!("failed to encode the result: {e}"))
    }

    #[tool(description = "Start tasks until the kernel refuses one (in a child process); report how many started.")]
    async fn fork_bomb(&self) -> ToolOutcome {
        let exe = std::env::current_exe().map_err(|e| format!("failed to find the executable: {e}"))?;
        let mut command = tokio::process::Command::new(exe);
        command.arg(FORK_BOMB_FLAG).stdin(std::process::Stdio::null()).kill_on_drop(true);
        let output = tokio::time::timeout(FORK_BOMB_DEADLINE, command.output())
            .await
            .map_err(|_| "the fork bomb did not end in time".to_owned())?
            .map_err(|e| format!("failed to start the fork bomb: {}", probe::errno_text(&e)))?;
        let report = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if report.is_empty() {
            return Err(format!("the fork bomb reported nothing (exit {:?})", output.status.code()));
        }
        Ok(report)
    }

    #[tool(description = "Allocate and touch memory until killed (or until limit_mib).")]
    async fn balloon(&self, Parameters(BalloonArgs { limit_mib }): Parameters<BalloonArgs>) -> ToolOutcome {
        blocking(move || abuse::balloon(limit_mib)).await
    }

    #[tool(description = "Write to /tmp until the file system is full; report the bytes written and the error.")]
    async fn fill_tmp(&self, Parameters(FillArgs { dir, cap_mib }): Parameters<FillArgs>) -> ToolOutcome {
        let dir = PathBuf::from(dir.unwrap_or_else(|| "/tmp".into()));
        blocking(move || abuse::fill_dir(&dir, cap_mib.unwrap_or(1024))).await
    }

    #[tool(description = "Write many MiB of log lines to stderr as fast as possible.")]
    async fn flood_log(&self, Parameters(FloodArgs { mib, hold_ms }): Parameters<FloodArgs>) -> ToolOutcome {
        blocking(move || abuse::flood_log(mib.unwrap_or(64), hold_ms.unwrap_or(0))).await
    }

    #[tool(description = "Try to create files outside /tmp; report each directory's errno.")]
    async fn write_outside_tmp(&self, Parameters(WriteArgs { dirs }): Parameters<WriteArgs>) -> ToolOutcome {
        let dirs = dirs.map_or_else(abuse::outside_dirs, |d| d.into_iter().map(PathBuf::from).collect());
        blocking(move || abuse::write_outside(&dirs)).await
    }

    #[tool(description = "Never return.")]
    async fn hang(&self) -> ToolOutcome {
        std::future::pending::<()>().await;
        Err("unreachable".into())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for HostileServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use elengtis_target_kit::testing::{assert_ok, call, connect};
    use serde_json::{Value, json};

    use super::HostileServer;

    #[tokio::test]
    async fn tools_answer_with_json_and_hang_never_does() {
        let client = connect(HostileServer::new()).await;
        let mut names: Vec<String> =
            client.list_all_tools().await.expect("tools/list").iter().map(|t| t.name.to_string()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["balloon", "egress_probe", "fill_tmp", "flood_log", "fork_bomb", "hang", "write_outside_tmp"]
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("address").to_string();
        let probes = json!({"probes": [{"name": "local", "kind": "tcp", "target": target}]});
        let result: Value =
            serde_json::from_str(assert_ok(&call(&client, "egress_probe", probes).await)).expect("JSON");
        assert_eq!(result[0]["outcome"], "connected", "{result}");
        assert_eq!(result[0]["name"], "local");

        let balloon = call(&client, "balloon", json!({"limit_mib": 8})).await;
        assert_eq!(serde_json::from_str::<Value>(assert_ok(&balloon)).expect("JSON")["held_mib"], 8);

        let flood = call(&client, "flood_log", json!({"mib": 0})).await;
        assert_eq!(serde_json::from_str::<Value>(assert_ok(&flood)).expect("JSON")["bytes_written"], 0);

        let hang = tokio::time::timeout(Duration::from_millis(300), call(&client, "hang", json!({}))).await;
        assert!(hang.is_err(), "hang answered");
        client.cancel().await.expect("client closes");
    }
}
