//! W2: the information-flow gate (FIDES-style labels for the session).
//!
//! A successful result of a read tool marks the session *untrusted* (integrity); a result of
//! a tool in `private_tools`, or one containing a `private_markers` string, marks it
//! *private* (confidentiality). Labels only grow (most restrictive wins). A sink — a tool
//! classified egress, consequential or destructive — is refused once the session is
//! untrusted, unless it is in `accepts_untrusted_tools`; once the session is private every
//! sink is refused (private content may flow nowhere outside).

use elengtis_core::format::campaign::ControlShim;

use super::classify::Profile;

/// The session's labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// The read tool that first made the session untrusted.
    pub untrusted_from: Option<String>,
    /// The tool whose result first made the session private.
    pub private_from: Option<String>,
}

impl Labels {
    /// The session has read untrusted content.
    pub fn untrusted(&self) -> bool {
        self.untrusted_from.is_some()
    }

    /// The session has read private content.
    pub fn private(&self) -> bool {
        self.private_from.is_some()
    }

    /// Fold in a successful result of `tool`.
    pub fn observe(&mut self, tool: &str, profile: &Profile, result_text: &str, config: &ControlShim) {
        if profile.read.value && self.untrusted_from.is_none() {
            self.untrusted_from = Some(tool.to_owned());
        }
        let private = config.private_tools.iter().any(|t| t == tool)
            || config.private_markers.iter().any(|m| !m.is_empty() && result_text.contains(m.as_str()));
        if private && self.private_from.is_none() {
            self.private_from = Some(tool.to_owned());
        }
    }
}

fn roles(profile: &Profile) -> String {
    let roles: Vec<&str> = [
        ("egress", profile.egress.value),
        ("consequential", profile.consequential.value),
        ("destructive", profile.destructive.value),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.then_some(n))
    .collect();
    roles.join("/")
}

/// `Err(reason)` when calling `tool` now would break the flow policy; `Ok(reason)` otherwise.
pub fn check(tool: &str, profile: &Profile, labels: &Labels, config: &ControlShim) -> Result<String, String> {
    if !profile.sink() {
        return Ok("not a sink".into());
    }
    if let Some(from) = &labels.private_from {
        return Err(format!(
            "refused: '{tool}' — the session has read private content (from '{from}') and '{tool}' is a {} sink",
            roles(profile)
        ));
    }
    if let Some(from) = &labels.untrusted_from {
        if config.accepts_untrusted_tools.iter().any(|t| t == tool) {
            return Ok("a sink declared to accept untrusted content".into());
        }
        return Err(format!(
            "refused: '{tool}' — the session has read untrusted content (from '{from}') and '{tool}' is a {} sink",
            roles(profile)
        ));
    }
    Ok("the session holds no untrusted content".into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::classify::{classify, tests_support::tool};
    use super::*;

    fn config(extra: serde_json::Value) -> ControlShim {
        let mut c = json!({"controls": ["W2"]});
        if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        serde_json::from_value(c).expect("config")
    }

    #[test]
    fn an_untrusted_read_closes_every_sink_but_declared_ones() {
        let c = config(json!({"accepts_untrusted_tools": ["write_note"]}));
        let read = classify(&tool("read_note", &["note_id"]), &c);
        let send = classify(&tool("send_email", &["to"]), &c);
        let write = classify(&tool("write_note", &["body"]), &c);
        let mut labels = Labels::default();
        assert!(check("send_email", &send, &labels, &c).is_ok(), "a clean session may send");
        assert!(check("read_note", &read, &labels, &c).is_ok(), "a read is not a sink");
        labels.observe("read_note", &read, "hello", &c);
        assert!(labels.untrusted() && !labels.private());
        let refused = check("send_email", &send, &labels, &c).expect_err("refused");
        assert!(refused.starts_with("refused: 'send_email' — the session has read untrusted content"), "{refused}");
        assert!(check("write_note", &write, &labels, &c).is_ok(), "declared to accept untrusted content");
        assert!(check("read_note", &read, &labels, &c).is_ok(), "reads stay open");
    }

    #[test]
    fn private_content_closes_even_accepting_sinks() {
        let c = config(json!({"accepts_untrusted_tools": ["send_email"], "private_markers": ["SECRET"]}));
        let read = classify(&tool("read_note", &["note_id"]), &c);
        let send = classify(&tool("send_email", &["to"]), &c);
        let mut labels = Labels::default();
        labels.observe("read_note", &read, "the SECRET is 42", &c);
        assert!(labels.private());
        let refused = check("send_email", &send, &labels, &c).expect_err("refused");
        assert!(refused.contains("private content"), "{refused}");
    }
}
