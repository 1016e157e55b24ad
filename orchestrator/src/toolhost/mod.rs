//! Tool hosts: where a trial's tools live. An agent loop lists and calls tools through the
//! [`ToolHost`] interface only; trusted actions (`mcp_tool` setup, verify and cleanup steps)
//! use the same interface. The MCP session ([`mcp::Session`]) is one implementation; the
//! control shim at the MCP boundary ([`shim::ShimHost`]) wraps another host and is a second.

pub mod mcp;
pub mod shim;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use elengtis_core::agent::ToolInfo;

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The tool reported an error (`isError`): a result, not a failure of the call.
    pub is_error: bool,
    /// The text a model sees: the text blocks joined, prefixed `ERROR: ` for an error.
    pub text: String,
    /// The whole result as recorded in evidence.
    pub record: Value,
}

/// A tool call or listing that did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ToolHostError {
    /// A short classification (`timeout`, `protocol`, `closed`, …).
    pub kind: &'static str,
    /// What happened, reading "failed to …".
    pub detail: String,
}

/// Lists and calls a trial's tools. Every call has a deadline (the implementation's).
#[async_trait]
pub trait ToolHost: Send + Sync + std::fmt::Debug {
    /// Every tool the host offers.
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolHostError>;
    /// Call one tool.
    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolHostError>;
}

#[async_trait]
impl<T: ToolHost + ?Sized> ToolHost for &T {
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolHostError> {
        (**self).list_tools().await
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolHostError> {
        (**self).call_tool(name, arguments).await
    }
}

#[async_trait]
impl ToolHost for mcp::Session {
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, ToolHostError> {
        let tools = mcp::Session::list_tools(self).await.map_err(host_error)?;
        Ok(tools.iter().map(mcp::tool_info).collect())
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, ToolHostError> {
        let result = mcp::Session::call_tool(self, name, arguments).await.map_err(host_error)?;
        Ok(ToolOutput {
            is_error: result.is_error == Some(true),
            text: mcp::result_text(&result),
            record: mcp::result_json(&result),
        })
    }
}

fn host_error(e: mcp::TargetError) -> ToolHostError {
    ToolHostError { kind: e.kind(), detail: e.to_string() }
}
