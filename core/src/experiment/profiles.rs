//! The model profile file of a live comparison: `models: [{id, model, pricing, generation,
//! provider}]`, read strictly (unknown fields refused), every problem with file, line and
//! column.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::format::campaign::Provider;
use crate::format::yaml::{Node, NodeKind};
use crate::format::{Diagnostic, diagnostic_at, parse_document_all};

/// The original's generation defaults for a profile (`max_tokens`, `timeout` in
/// milliseconds, `max_retries`): bounded output, bounded time, provider retries off.
pub const GENERATION_DEFAULTS: [(&str, i64); 3] = [("max_tokens", 128), ("timeout", 30_000), ("max_retries", 0)];

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Per million input tokens.
    pub input_per_million: f64,
    /// Per million output tokens.
    pub output_per_million: f64,
}

/// One model of the comparison, with its generation defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// A unique lowercase identifier (`[a-z0-9][a-z0-9_-]*`): the cell's `model_id`.
    pub id: String,
    /// The provider's model id (an OpenRouter id unless `provider` says otherwise).
    pub model: String,
    /// Generation settings (the defaults above added where absent).
    #[serde(default)]
    pub generation: Map<String, Value>,
    /// Prices, for the spend cap.
    pub pricing: Pricing,
    /// elengtis addition: the provider serving `model` (absent: OpenRouter, as in the
    /// original).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    models: Vec<Profile>,
}

/// Whether `id` is a lowercase identifier: `[a-z0-9][a-z0-9_-]*`.
pub fn is_identifier(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The node at `models[index].<key>` (or `models[index]` without a key).
fn profile_node<'a>(root: &'a Node, index: usize, key: Option<&str>) -> Option<&'a Node> {
    let NodeKind::Map(entries) = &root.kind else { return None };
    let models = entries.iter().find(|(k, _)| matches!(&k.kind, NodeKind::Str(s) if s == "models"))?;
    let NodeKind::Seq(items) = &models.1.kind else { return None };
    let item = items.get(index)?;
    let Some(key) = key else { return Some(item) };
    let NodeKind::Map(fields) = &item.kind else { return Some(item) };
    Some(fields.iter().find(|(k, _)| matches!(&k.kind, NodeKind::Str(s) if s == key)).map_or(item, |(_, v)| v))
}

/// A positive number (integer or float) in a generation map.
fn positive(value: Option<&Value>) -> bool {
    value.and_then(Value::as_f64).is_some_and(|v| v.is_finite() && v > 0.0)
}

/// Read a profile file: every problem, each with its position.
///
/// Beyond the shape: at least one profile; ids unique lowercase identifiers; a non-empty
/// `model`; prices finite and not negative; `generation` bounded as the runner requires
/// (after the defaults: `max_retries` 0, a positive `timeout`, a positive `max_tokens` or
/// `max_completion_tokens`).
///
/// # Errors
///
/// Every problem found, as diagnostics naming `file:line:column` and the field path.
pub fn parse(file: &Path, text: &str) -> Result<Vec<Profile>, Vec<Diagnostic>> {
    let (document, root) = parse_document_all::<ProfileFile>(file, text)?;
    let mut problems = Vec::new();
    let mut problem = |index: usize, key: Option<&str>, message: String| {
        let mark = profile_node(&root, index, key).map_or(root.mark, |node| node.mark);
        let path = match key {
            Some(key) => format!("models[{index}].{key}"),
            None => format!("models[{index}]"),
        };
        problems.push(diagnostic_at(file, mark.line, mark.column, path, message));
    };
    if document.models.is_empty() {
        let mark = root.mark;
        return Err(vec![diagnostic_at(
            file,
            mark.line,
            mark.column,
            "models".into(),
            "at least one model profile is required".into(),
        )]);
    }
    let mut seen = BTreeSet::new();
    let mut profiles = Vec::with_capacity(document.models.len());
    for (index, mut profile) in document.models.into_iter().enumerate() {
        if !is_identifier(&profile.id) {
            problem(
                index,
                Some("id"),
                format!(
                    "`{}` is not a lowercase identifier: expected a lowercase letter or digit, then lowercase letters, digits, `_` or `-`",
                    profile.id
                ),
            );
        } else if !seen.insert(profile.id.clone()) {
            problem(index, Some("id"), format!("`{}` is the id of an earlier profile; ids must be unique", profile.id));
        }
        if profile.model.trim().is_empty() {
            problem(index, Some("model"), "expected a model identifier, found an empty string".into());
        }
        let Pricing { input_per_million, output_per_million } = profile.pricing;
        for (name, price) in [("input_per_million", input_per_million), ("output_per_million", output_per_million)] {
            if !price.is_finite() || price < 0.0 {
                problem(index, Some("pricing"), format!("{name} must be a finite, non-negative number, found {price}"));
            }
        }
        for (key, default) in GENERATION_DEFAULTS {
            profile.generation.entry(key.to_owned()).or_insert_with(|| json!(default));
        }
        let generation = &profile.generation;
        if generation.get("max_retries").and_then(Value::as_f64) != Some(0.0) {
            problem(
                index,
                Some("generation"),
                format!(
                    "max_retries must be 0 (provider retries are off in a live comparison), found {}",
                    generation.get("max_retries").map_or_else(String::new, Value::to_string)
                ),
            );
        }
        if !positive(generation.get("timeout")) {
            problem(index, Some("generation"), "timeout must be a positive number of milliseconds".into());
        }
        if !positive(generation.get("max_tokens")) && !positive(generation.get("max_completion_tokens")) {
            problem(index, Some("generation"), "max_tokens (or max_completion_tokens) must be positive".into());
        }
        profiles.push(profile);
    }
    if problems.is_empty() { Ok(profiles) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(Path::new("models.yaml"), text).expect_err("refused").iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_profile_gets_the_original_generation_defaults() {
        let text = "models:\n  - id: small\n    model: openai/gpt-oss-20b\n    pricing: {input_per_million: 0.02, output_per_million: 0.1}\n";
        let profiles = parse(Path::new("models.yaml"), text).expect("valid");
        assert_eq!(profiles.len(), 1);
        assert_eq!(
            profiles[0].generation,
            json!({"max_tokens": 128, "timeout": 30000, "max_retries": 0}).as_object().cloned().unwrap_or_default()
        );
        // Given values are kept.
        let text = "models:\n  - id: small\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0}\n    generation: {temperature: 0, max_tokens: 64}\n";
        let profiles = parse(Path::new("models.yaml"), text).expect("valid");
        assert_eq!(profiles[0].generation["max_tokens"], 64);
        assert_eq!(profiles[0].generation["temperature"], 0);
    }

    #[test]
    fn unknown_fields_are_refused_at_their_line() {
        let text = "models:\n  - id: small\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0}\n    temprature: 0\n";
        let errors = errors(text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("models.yaml:5:5: models[0].temprature: unknown field `temprature`"),
            "{errors:?}"
        );
        let errors = self::errors("models: []\nextra: 1\n");
        assert!(errors[0].starts_with("models.yaml:2:1: extra: unknown field `extra`"), "{errors:?}");
        let errors = self::errors(
            "models:\n  - id: a\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0, currency: usd}\n",
        );
        assert!(errors[0].contains("models.yaml:4:") && errors[0].contains("unknown field `currency`"), "{errors:?}");
    }

    #[test]
    fn ids_must_be_unique_lowercase_identifiers() {
        let text = "models:\n  - id: Big\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0}\n  - id: ok\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0}\n  - id: ok\n    model: m\n    pricing: {input_per_million: 0, output_per_million: 0}\n";
        let errors = errors(text);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("models.yaml:2:9: models[0].id: `Big` is not a lowercase identifier"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("models.yaml:8:9: models[2].id: `ok` is the id of an earlier profile"),
            "{errors:?}"
        );
        for good in ["a", "0", "gpt-oss-20b", "deepseek_v4"] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in ["", "-a", "_a", "A", "a.b", "a b", "é"] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn unbounded_generation_negative_prices_and_no_profiles_are_refused() {
        let text = "models:\n  - id: a\n    model: ''\n    pricing: {input_per_million: -1, output_per_million: 0}\n    generation: {max_retries: 2, timeout: 0, max_tokens: 0}\n";
        let errors = errors(text);
        let joined = errors.join("\n");
        assert_eq!(errors.len(), 5, "{joined}");
        assert!(joined.contains("models.yaml:3:12: models[0].model: expected a model identifier"), "{joined}");
        assert!(joined.contains("models.yaml:4:14: models[0].pricing: input_per_million must be"), "{joined}");
        assert!(joined.contains("models.yaml:5:17: models[0].generation: max_retries must be 0"), "{joined}");
        assert!(joined.contains("timeout must be a positive"), "{joined}");
        assert!(joined.contains("max_tokens (or max_completion_tokens) must be positive"), "{joined}");
        assert!(self::errors("models: []\n")[0].contains("at least one model profile is required"));
        assert!(self::errors("models: [{id: a}]\n")[0].contains("missing field `model`"));
    }

    #[test]
    fn a_provider_can_serve_a_profile() {
        let text = "models:\n  - id: local\n    model: qwen\n    pricing: {input_per_million: 0, output_per_million: 0}\n    provider: {type: openai_compatible, base_url: 'http://127.0.0.1:1/v1'}\n";
        let profiles = parse(Path::new("models.yaml"), text).expect("valid");
        assert_eq!(profiles[0].provider.as_ref().and_then(|p| p.base_url.as_deref()), Some("http://127.0.0.1:1/v1"));
        assert!(self::errors(&text.replace("openai_compatible", "gopher"))[0].contains("models[0].provider.type"));
    }
}
