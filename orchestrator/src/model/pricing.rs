//! Prices of hosted models, for spend estimates and costs a provider does not report.
//!
//! A price is US dollars per million input and output tokens, the original's
//! `input_per_million` / `output_per_million`. A small table is built in (list prices as
//! published by the vendors and OpenRouter; check them before relying on a cap), and
//! `--prices FILE` adds or replaces entries from a JSON object of the same shape:
//!
//! ```json
//! {"my-org/my-model": {"input_per_million": 0.5, "output_per_million": 1.5}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input (prompt) tokens.
    pub input_per_million: f64,
    /// Per million output (completion) tokens.
    pub output_per_million: f64,
}

impl Price {
    /// The cost of `input` and `output` tokens.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
        let (input, output) = (input as f64, output as f64);
        (input * self.input_per_million + output * self.output_per_million) / 1_000_000.0
    }
}

/// Built-in prices: (model ids, input, output) in USD per million tokens. OpenRouter ids
/// and the vendors' own ids share an entry.
const BUILTIN: &[(&[&str], f64, f64)] = &[
    (&["openai/gpt-5", "gpt-5"], 1.25, 10.0),
    (&["openai/gpt-5-mini", "gpt-5-mini"], 0.25, 2.0),
    (&["openai/gpt-5-nano", "gpt-5-nano"], 0.05, 0.40),
    (&["openai/gpt-4.1", "gpt-4.1"], 2.0, 8.0),
    (&["openai/gpt-4.1-mini", "gpt-4.1-mini"], 0.40, 1.60),
    (&["openai/gpt-4.1-nano", "gpt-4.1-nano"], 0.10, 0.40),
    (&["openai/gpt-4o", "gpt-4o"], 2.50, 10.0),
    (&["openai/gpt-4o-mini", "gpt-4o-mini"], 0.15, 0.60),
    (&["openai/o4-mini", "o4-mini"], 1.10, 4.40),
    (&["anthropic/claude-opus-4.1", "claude-opus-4-1"], 15.0, 75.0),
    (&["anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"], 3.0, 15.0),
    (&["anthropic/claude-sonnet-4", "claude-sonnet-4-0", "claude-sonnet-4-20250514"], 3.0, 15.0),
    (&["anthropic/claude-haiku-4.5", "claude-haiku-4-5"], 1.0, 5.0),
    (&["anthropic/claude-3.5-haiku", "claude-3-5-haiku-latest"], 0.80, 4.0),
    (&["google/gemini-2.5-pro"], 1.25, 10.0),
    (&["google/gemini-2.5-flash"], 0.30, 2.50),
];

/// Why a price file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The file cannot be read.
    #[error("failed to read the price file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a price table.
    #[error(
        "failed to read the price file {}: {source}; expected {{\"MODEL\": {{\"input_per_million\": USD, \"output_per_million\": USD}}}}",
        .path.display()
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// A price is negative or not a number.
    #[error("failed to read the price file {}: the price of `{model}` must be finite and not negative", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The model.
        model: String,
    },
}

/// Model id → price.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    entries: BTreeMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        PriceTable::builtin()
    }
}

impl PriceTable {
    /// The built-in table.
    pub fn builtin() -> Self {
        let mut entries = BTreeMap::new();
        for (ids, input, output) in BUILTIN {
            for id in *ids {
                entries.insert((*id).to_owned(), Price { input_per_million: *input, output_per_million: *output });
            }
        }
        PriceTable { entries }
    }

    /// Add (or replace) the prices of a JSON file.
    pub fn extend_from_file(&mut self, path: &Path) -> Result<(), PriceError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| PriceError::Read { path: path.to_owned(), source })?;
        let table: BTreeMap<String, Price> =
            serde_json::from_str(&text).map_err(|source| PriceError::Parse { path: path.to_owned(), source })?;
        for (model, price) in table {
            let valid = |x: f64| x.is_finite() && x >= 0.0;
            if !valid(price.input_per_million) || !valid(price.output_per_million) {
                return Err(PriceError::Invalid { path: path.to_owned(), model });
            }
            self.entries.insert(model, price);
        }
        Ok(())
    }

    /// Add (or replace) the price of `model` (an experiment's profile prices).
    pub fn insert(&mut self, model: &str, price: Price) {
        self.entries.insert(model.to_owned(), price);
    }

    /// The price of `model`: its exact id, else the id without a `vendor/` prefix.
    pub fn get(&self, model: &str) -> Option<Price> {
        self.entries.get(model).or_else(|| model.split_once('/').and_then(|(_, bare)| self.entries.get(bare))).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prices_are_found_by_either_id() {
        let table = PriceTable::builtin();
        let mini = table.get("openai/gpt-5-mini").unwrap();
        assert_eq!(table.get("gpt-5-mini"), Some(mini));
        assert_eq!(table.get("someone/gpt-5-mini"), Some(mini));
        assert_eq!(table.get("unknown-model"), None);
        assert!((mini.cost(1_000_000, 1_000_000) - 2.25).abs() < 1e-12);
    }

    #[test]
    fn a_file_extends_the_table_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prices.json");
        std::fs::write(&path, r#"{"local/llama": {"input_per_million": 0, "output_per_million": 0.5}}"#).unwrap();
        let mut table = PriceTable::builtin();
        table.extend_from_file(&path).unwrap();
        assert_eq!(table.get("local/llama").unwrap().output_per_million, 0.5);
        std::fs::write(&path, r#"{"m": {"input_per_million": -1, "output_per_million": 0}}"#).unwrap();
        assert!(matches!(table.extend_from_file(&path), Err(PriceError::Invalid { .. })));
        std::fs::write(&path, r#"{"m": {"input": 1}}"#).unwrap();
        let err = table.extend_from_file(&path).unwrap_err().to_string();
        assert!(err.starts_with("failed to read the price file"), "{err}");
    }
}
