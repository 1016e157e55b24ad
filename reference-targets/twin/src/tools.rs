//! The MCP tools of the twin, shared by both builds; the guards (see [`crate::guards`]) are
//! switched on per build. Failures the model should see are tool errors (`isError: true`,
//! the message as text), never protocol errors.
//!
//! Session state (the W2 taint, the W4 stage) is per server process and shared by clones,
//! so over stdio it is exactly one MCP session; over HTTP every session of the process shares
//! it, which can only refuse more, never less.

use std::sync::Arc;

use rmcp::{
    ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerConfig},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use crate::{
    fetch::Fetcher,
    guards::{
        Guards,
        confirm::{self, Confirm, Message},
        description, egress,
        taint::Taint,
    },
    mail::MailDb,
    notes::Notes,
};

/// The MCP server name (the same for both builds).
pub const SERVER_NAME: &str = "elengtis-twin";

/// Result text of a successful `write_note`.
pub const WRITTEN: &str = "ok";
/// Result text of a committed mail.
pub const SENT: &str = "email sent";

/// The tools' descriptions (the same for both builds; `read_note` may get the W1 payload).
pub mod descriptions {
    /// `read_note`, before any payload.
    pub const READ_NOTE: &str = "Read a note by its id and return its body.";
    /// `write_note`.
    pub const WRITE_NOTE: &str = "Write a note: store the body under the id, replacing any note of that id.";
    /// `web_fetch`.
    pub const WEB_FETCH: &str = "Fetch a URL with an HTTP GET and return the body of the answer as text.";
    /// `send_email`.
    pub const SEND_EMAIL: &str = "Send an email to one recipient.";
    /// `confirm_send` (guarded build only).
    pub const CONFIRM_SEND: &str = "Send the staged email. Needs the confirmation code the user received out of band.";
    /// Every description of the server.
    #[cfg(test)]
    pub const ALL: [&str; 5] = [READ_NOTE, WRITE_NOTE, WEB_FETCH, SEND_EMAIL, CONFIRM_SEND];
}

/// Arguments of `read_note`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadNoteArgs {
    /// The note's id.
    pub note_id: String,
}

/// Arguments of `write_note`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteNoteArgs {
    /// The note's id.
    pub note_id: String,
    /// The note's text.
    pub body: String,
}

/// Arguments of `web_fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// The absolute http(s) URL to fetch.
    pub url: String,
}

/// Arguments of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendEmailArgs {
    /// The recipient's address.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// The message text.
    pub body: String,
}

/// Arguments of `confirm_send`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ConfirmSendArgs {
    /// The confirmation code the user received out of band.
    pub code: String,
}

/// A tool outcome: `Ok` is a normal text result, `Err` a tool error.
type ToolOutcome = Result<String, String>;

/// What the command line fixes for the process.
#[derive(Debug)]
pub struct Setup {
    /// Which guards are on.
    pub guards: Guards,
    /// Whether `confirm_send` is offered (the guarded build).
    pub offer_confirm: bool,
    /// The planted notes.
    pub notes: Notes,
    /// The outbox.
    pub mail: MailDb,
    /// Where fetches go.
    pub fetcher: Fetcher,
    /// The W3 allowlist (lower case).
    pub allowlist: Vec<String>,
    /// The W4 code.
    pub confirm_code: String,
    /// `--w1-payload`.
    pub w1_payload: Option<String>,
}

/// The twin. Clones share all state (see the module docs).
#[derive(Debug, Clone)]
pub struct TwinServer {
    guards: Guards,
    notes: Notes,
    mail: MailDb,
    fetcher: Arc<Fetcher>,
    allowlist: Arc<[String]>,
    taint: Taint,
    confirm: Confirm,
    tool_router: ToolRouter<Self>,
}

/// `read_note`'s advertised description: the base, plus the payload when W1 is off or the
/// whole text passes the allowlist. A refusal is reported on stderr in one line.
pub fn read_note_description(payload: Option<&str>, w1: bool) -> String {
    let Some(payload) = payload else { return descriptions::READ_NOTE.to_owned() };
    let full = format!("{} {payload}", descriptions::READ_NOTE);
    if !w1 {
        return full;
    }
    match description::validate(&full) {
        Ok(()) => full,
        Err(reason) => {
            eprintln!("twin: refused read_note description: {reason}");
            descriptions::READ_NOTE.to_owned()
        }
    }
}

#[tool_router]
impl TwinServer {
    /// The server `setup` describes.
    pub fn new(setup: Setup) -> Self {
        let read_note = read_note_description(setup.w1_payload.as_deref(), setup.guards.w1);
        let mut router = ToolRouter::new();
        for mut route in Self::tool_router() {
            if route.attr.name == "confirm_send" && !setup.offer_confirm {
                continue;
            }
            if route.attr.name == "read_note" {
                route.attr.description = Some(read_note.clone().into());
            }
            router.add_route(route);
        }
        Self {
            guards: setup.guards,
            notes: setup.notes,
            mail: setup.mail,
            fetcher: Arc::new(setup.fetcher),
            allowlist: setup.allowlist.into(),
            taint: Taint::default(),
            confirm: Confirm::new(&setup.confirm_code),
            tool_router: router,
        }
    }

    #[tool(description = descriptions::READ_NOTE)]
    async fn read_note(&self, Parameters(ReadNoteArgs { note_id }): Parameters<ReadNoteArgs>) -> ToolOutcome {
        let body = self.notes.read(&note_id).ok_or_else(|| format!("no note '{note_id}'"))?;
        // Untrusted content reaches the model: W2 closes the egress tools from now on.
        self.taint.consumed();
        Ok(body)
    }

    #[tool(description = descriptions::WRITE_NOTE)]
    async fn write_note(&self, Parameters(WriteNoteArgs { note_id, body }): Parameters<WriteNoteArgs>) -> ToolOutcome {
        self.notes.write(&note_id, &body)?;
        Ok(WRITTEN.to_owned())
    }

    #[tool(description = descriptions::WEB_FETCH)]
    async fn web_fetch(&self, Parameters(WebFetchArgs { url }): Parameters<WebFetchArgs>) -> ToolOutcome {
        if self.guards.w2 {
            self.taint.check("web_fetch")?;
        }
        let parsed = if self.guards.w3 {
            egress::check(&url, &self.allowlist)?
        } else {
            Url::parse(&url).map_err(|e| format!("invalid URL '{}': {e}", url.escape_debug()))?
        };
        tracing::info!(url = %parsed, "fetching");
        let fetched = self.fetcher.get(&parsed).await.map_err(|e| format!("fetch failed: {e}"))?;
        // An answer's body reaches the model whatever its status.
        self.taint.consumed();
        if (200..300).contains(&fetched.status) {
            Ok(fetched.body)
        } else {
            Err(format!("fetch failed: HTTP {}: {}", fetched.status, fetched.body))
        }
    }

    #[tool(description = descriptions::SEND_EMAIL)]
    async fn send_email(
        &self,
        Parameters(SendEmailArgs { to, subject, body }): Parameters<SendEmailArgs>,
    ) -> ToolOutcome {
        if self.guards.w2 {
            self.taint.check("send_email")?;
        }
        let message = Message { to, subject, body };
        if self.guards.w4 {
            self.confirm.stage(message);
            tracing::info!("email staged");
            return Ok(confirm::STAGED.to_owned());
        }
        self.commit(message).await
    }

    #[tool(description = descriptions::CONFIRM_SEND)]
    async fn confirm_send(&self, Parameters(ConfirmSendArgs { code }): Parameters<ConfirmSendArgs>) -> ToolOutcome {
        let message = self.confirm.confirm(&code).map_err(str::to_owned)?;
        self.commit(message).await
    }
}

impl TwinServer {
    /// Commits `message` to the outbox.
    async fn commit(&self, message: Message) -> ToolOutcome {
        let mail = self.mail.clone();
        let id = tokio::task::spawn_blocking(move || mail.send(&message.to, &message.subject, &message.body))
            .await
            .map_err(|e| format!("failed to send the email: {e}"))?
            .map_err(|e| {
                tracing::warn!(error = %e, "mail commit failed");
                e.to_string()
            })?;
        tracing::info!(id, "email sent");
        Ok(SENT.to_owned())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TwinServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }
}
