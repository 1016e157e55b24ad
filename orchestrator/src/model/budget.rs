//! The spend cap (`--budget-usd`), the original's conservative guard.
//!
//! Before each request a reservation is taken: the request's serialised size (messages and
//! tools as compact JSON with sorted keys, non-ASCII counted as Python's `\uXXXX` escapes)
//! charged as input tokens — one character can be one token — plus the request's output cap
//! (`max_tokens`, else `max_completion_tokens`, else 0) as output tokens, at the model's
//! price. When committed + reserved + this estimate would exceed the cap, the request is not
//! sent and the cap is *tripped*: the run stops cleanly. After the request the reservation is
//! settled with the cost the provider reported, else the reported tokens at the price, else
//! the reservation itself (an unknown cost, counted) — also when the request failed.
//!
//! One budget serves a whole run (every trial, every job); a resumed run starts from the
//! charges its rows already carry (`usage.budget_charge_usd`).

use std::sync::Mutex;

use serde_json::Value;

use super::pricing::Price;

/// The run's spend cap and what has been committed against it.
#[derive(Debug)]
pub struct Budget {
    limit: f64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    committed: f64,
    reserved: f64,
    unknown_costs: u64,
    tripped: Option<String>,
}

/// A reservation taken before a request, settled after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reservation(pub f64);

impl Budget {
    /// A cap of `limit` dollars with `committed` already spent (a resumed run's charges).
    pub fn new(limit: f64, committed: f64) -> Self {
        Budget { limit, state: Mutex::new(State { committed: committed.max(0.0), ..State::default() }) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cap.
    pub fn limit(&self) -> f64 {
        self.limit
    }

    /// Dollars committed so far (settled charges).
    pub fn committed(&self) -> f64 {
        self.state().committed
    }

    /// Reserve `estimate` for the next request, or trip the cap (and say why) when it could
    /// be exceeded.
    pub fn reserve(&self, estimate: f64) -> Result<Reservation, String> {
        let mut state = self.state();
        let would = state.committed + state.reserved + estimate;
        if would > self.limit + 1e-12 {
            let reason = format!(
                "failed to send the next request: the spend cap of ${:.6} would be exceeded (committed ${:.6}, in flight ${:.6}, this request up to ${:.6})",
                self.limit, state.committed, state.reserved, estimate
            );
            state.tripped.get_or_insert_with(|| reason.clone());
            return Err(reason);
        }
        state.reserved += estimate;
        Ok(Reservation(estimate))
    }

    /// Settle a reservation with the request's cost (None: unknown, the reservation is
    /// charged); returns the charge.
    pub fn settle(&self, reservation: Reservation, cost: Option<f64>) -> f64 {
        let mut state = self.state();
        state.reserved = (state.reserved - reservation.0).max(0.0);
        let charge = match cost {
            Some(cost) if cost.is_finite() => cost.max(0.0),
            _ => {
                state.unknown_costs += 1;
                reservation.0
            }
        };
        state.committed += charge;
        charge
    }

    /// Why the cap stopped a request, once it has.
    pub fn tripped(&self) -> Option<String> {
        self.state().tripped.clone()
    }
}

/// The original's conservative estimate of a request: its serialised size as input tokens
/// plus `output_cap` output tokens, at `price`.
pub fn estimate(messages: &[Value], tools: &[Value], output_cap: u64, price: Price) -> f64 {
    let payload = serde_json::json!({"messages": messages, "tools": tools});
    let chars = python_json_len(&super::fixtures::canonical(&payload));
    price.cost(chars, output_cap)
}

/// Length of `text` as Python's `json.dumps` (ASCII-only output) would write it.
fn python_json_len(text: &str) -> u64 {
    text.chars()
        .map(|c| {
            if c.is_ascii() {
                1
            } else if u32::from(c) > 0xFFFF {
                12
            } else {
                6
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PRICE: Price = Price { input_per_million: 1_000_000.0, output_per_million: 1_000_000.0 };

    #[test]
    fn the_estimate_is_the_serialised_size_plus_the_output_cap() {
        // {"messages":[],"tools":[]} is 26 characters.
        assert_eq!(estimate(&[], &[], 0, PRICE), 26.0);
        assert_eq!(estimate(&[], &[], 10, PRICE), 36.0);
        // "é" is written as \u00e9 by Python's json.dumps.
        assert_eq!(estimate(&[json!("é")], &[], 0, PRICE), 26.0 + 8.0);
    }

    #[test]
    fn reservations_trip_the_cap_and_settle_with_the_cost() {
        let budget = Budget::new(1.0, 0.25);
        let r = budget.reserve(0.5).unwrap();
        assert!(budget.reserve(0.5).is_err(), "0.25 committed + 0.5 in flight + 0.5 > 1");
        assert!(budget.tripped().unwrap().contains("spend cap of $1.000000"));
        assert_eq!(budget.settle(r, Some(0.1)), 0.1);
        assert!((budget.committed() - 0.35).abs() < 1e-12);
        let r = budget.reserve(0.2).unwrap();
        assert_eq!(budget.settle(r, None), 0.2, "an unknown cost charges the reservation");
        assert!((budget.committed() - 0.55).abs() < 1e-12);
    }
}
