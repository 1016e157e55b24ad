//! The MCP side shared by every shape: the server info, the tool list and the dispatch of a
//! call to the shape's code.
//!
//! Tools are listed by hand from JSON (the real servers' input schemas), not derived from
//! Rust types, so the schemas keep the real shapes (titles, defaults, `format`, and so on).
//! Failures the model should see are MCP tool errors (`isError: true`, the message as text);
//! only an unknown tool name is a protocol error.

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{fetch::Fetcher, files::Files, git::Git, sqlite::Database};

/// A tool outcome: `Ok` is a normal text result, `Err` a tool error.
pub type ToolOutcome = Result<String, String>;

/// The state of the one shape a process serves.
#[derive(Debug)]
pub enum Shape {
    Sqlite(Database),
    Git(Git),
    Files(Files),
    Fetch(Fetcher),
}

impl Shape {
    /// The real server's name (its `serverInfo.name`).
    fn server_name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Git(_) => "mcp-git",
            Self::Files(_) => "secure-filesystem-server",
            Self::Fetch(_) => "mcp-fetch",
        }
    }

    fn tools(&self) -> Vec<Tool> {
        match self {
            Self::Sqlite(_) => crate::sqlite::tools(),
            Self::Git(_) => crate::git::tools(),
            Self::Files(_) => crate::files::tools(),
            Self::Fetch(_) => crate::fetch::tools(),
        }
    }

    /// Runs tool `name`; `None` when the shape has no such tool.
    async fn call(&self, name: &str, args: JsonObject) -> Option<ToolOutcome> {
        match self {
            Self::Sqlite(db) => db.call(name, args).await,
            Self::Git(git) => git.call(name, args).await,
            Self::Files(files) => files.call(name, args).await,
            Self::Fetch(fetcher) => fetcher.call(name, args).await,
        }
    }
}

/// The server; clones (one per HTTP session) share the shape's state.
#[derive(Debug, Clone)]
pub struct ShapesServer {
    shape: Arc<Shape>,
    tools: Arc<Vec<Tool>>,
}

impl ShapesServer {
    pub fn new(shape: Shape) -> Self {
        let tools = Arc::new(shape.tools());
        Self { shape: Arc::new(shape), tools }
    }
}

impl ServerHandler for ShapesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.shape.server_name(), env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let Some(outcome) = self.shape.call(&name, args).await else {
            return Err(McpError::invalid_params(format!("Unknown tool: {name}"), None));
        };
        let result = match outcome {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => {
                tracing::info!(tool = %name, error = %message, "tool error");
                CallToolResult::error(vec![ContentBlock::text(message)])
            }
        };
        Ok(result.into())
    }
}

/// A tool from its JSON definition (name, description, inputSchema, ...).
pub fn tool(definition: Value) -> Tool {
    serde_json::from_value(definition).expect("the built-in tool definitions are valid")
}

/// The arguments of `tool` as `T`; a mismatch is a tool error naming the field.
pub fn arguments<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, String> {
    serde_json::from_value(Value::Object(args)).map_err(|e| format!("Invalid arguments for {tool}: {e}"))
}

/// Runs `op` on the blocking pool (files, SQLite, the repository format).
pub async fn blocking<T: Send + 'static>(op: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(op).await.map_err(|e| format!("Error: failed to run the operation: {e}"))?
}

#[cfg(test)]
mod tests {
    use super::Shape;

    /// Every built-in definition parses, and its schema is an object schema.
    #[test]
    fn every_tool_definition_is_valid() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let shapes = [
            Shape::Sqlite(crate::sqlite::Database::open(&dir.path().join("t.db")).expect("db")),
            Shape::Git(crate::git::Git::default()),
            Shape::Files(crate::files::Files::open(dir.path()).expect("root")),
            Shape::Fetch(crate::fetch::Fetcher::new("ua".to_owned(), true)),
        ];
        for shape in shapes {
            let tools = shape.tools();
            assert!(!tools.is_empty());
            for tool in tools {
                assert_eq!(tool.input_schema.get("type").and_then(|t| t.as_str()), Some("object"), "{}", tool.name);
                assert!(tool.description.is_some(), "{}", tool.name);
            }
        }
    }
}
