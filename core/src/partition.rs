//! Deterministic partitions of a frozen list (the trial matrix, a seed catalogue, a gate's
//! findings, an experiment's blocks) into N shards, so that N machines agree on who runs what
//! without talking: which shard an item belongs to is computed from the list alone.
//!
//! Specifications, as `run --partition` takes them (nextest's `--partition` forms):
//!
//! | Spec | Meaning |
//! |---|---|
//! | `K/N`, `count:K/N` | shard K (1-based) of N by position: item `i` (0-based, list order) is in shard `i mod N + 1` (round robin, so every shard gets every target and scenario) |
//! | `hash:K/N` | shard K of N by the item's id: shard `u64(first 8 bytes of SHA-256(id)) mod N + 1` (independent of order: an item keeps its shard when others are added) |
//! | `index/N`, `count:index/N`, `hash:index/N` | K is `JOB_COMPLETION_INDEX + 1`: a Kubernetes Indexed Job's index is 0-based, K is 1-based |
//!
//! Every item is in exactly one shard of a scheme and N; a shard may be empty (N larger than
//! the list).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::format::{canonical_json, sha256_hex};

/// How items are assigned to shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// By position in the frozen list: item `i` is in shard `i mod N + 1`.
    Count,
    /// By a SHA-256 of the item's id.
    Hash,
}

impl Scheme {
    /// The name in a spec and in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Count => "count",
            Scheme::Hash => "hash",
        }
    }
}

/// One shard of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// How items are assigned.
    pub scheme: Scheme,
    /// This shard, 1-based.
    pub shard: u32,
    /// Shards in all.
    pub total: u32,
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.scheme.as_str(), self.shard, self.total)
    }
}

/// Why a partition spec cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// Not of the form `[count:|hash:]K/N`.
    #[error(
        "failed to read the partition `{0}`: expected `K/N`, `count:K/N`, `hash:K/N` or `index/N` (K from JOB_COMPLETION_INDEX), with 1 <= K <= N"
    )]
    Syntax(String),
    /// An unknown scheme before the colon.
    #[error("failed to read the partition `{spec}`: unknown scheme `{scheme}`, expected `count` or `hash`")]
    Scheme {
        /// The spec.
        spec: String,
        /// The scheme given.
        scheme: String,
    },
    /// N is 0.
    #[error("failed to read the partition `{0}`: N (the number of shards) must be at least 1")]
    NoShards(String),
    /// K is 0 or above N.
    #[error(
        "failed to read the partition `{spec}`: shard {shard} is not one of 1..={total} (K is 1-based; a Kubernetes index is 0-based: write `index/{total}`)"
    )]
    OutOfRange {
        /// The spec.
        spec: String,
        /// K.
        shard: u64,
        /// N.
        total: u32,
    },
    /// `index/N` without `JOB_COMPLETION_INDEX`.
    #[error(
        "failed to read the partition `{0}`: `index` takes K from JOB_COMPLETION_INDEX (set by a Kubernetes Indexed Job), which is not set"
    )]
    NoIndex(String),
    /// `JOB_COMPLETION_INDEX` is not a whole number.
    #[error("failed to read the partition `{spec}`: JOB_COMPLETION_INDEX is `{value}`, not a whole number")]
    BadIndex {
        /// The spec.
        spec: String,
        /// The variable's value.
        value: String,
    },
}

/// Parses a partition spec; `job_completion_index` is the value of `JOB_COMPLETION_INDEX`
/// (read only for `index/N`).
///
/// # Errors
///
/// [`PartitionError`] naming what is wrong.
pub fn parse(spec: &str, job_completion_index: Option<&str>) -> Result<Partition, PartitionError> {
    let trimmed = spec.trim();
    let (scheme, rest) = match trimmed.split_once(':') {
        Some(("count", rest)) => (Scheme::Count, rest),
        Some(("hash", rest)) => (Scheme::Hash, rest),
        Some((other, _)) => return Err(PartitionError::Scheme { spec: spec.to_owned(), scheme: other.to_owned() }),
        None => (Scheme::Count, trimmed),
    };
    let Some((k, n)) = rest.split_once('/') else { return Err(PartitionError::Syntax(spec.to_owned())) };
    let total: u32 = n.trim().parse().map_err(|_| PartitionError::Syntax(spec.to_owned()))?;
    if total == 0 {
        return Err(PartitionError::NoShards(spec.to_owned()));
    }
    let shard: u64 = if k.trim() == "index" {
        let value = job_completion_index.ok_or_else(|| PartitionError::NoIndex(spec.to_owned()))?;
        let index: u64 = value
            .trim()
            .parse()
            .map_err(|_| PartitionError::BadIndex { spec: spec.to_owned(), value: value.to_owned() })?;
        index.saturating_add(1)
    } else {
        k.trim().parse().map_err(|_| PartitionError::Syntax(spec.to_owned()))?
    };
    if shard == 0 || shard > u64::from(total) {
        return Err(PartitionError::OutOfRange { spec: spec.to_owned(), shard, total });
    }
    Ok(Partition { scheme, shard: shard as u32, total })
}

/// The shard (1-based) of `total` that the item at `position` with `id` belongs to.
pub fn shard_of(scheme: Scheme, total: u32, position: usize, id: &str) -> u32 {
    let total = u64::from(total.max(1));
    let slot = match scheme {
        Scheme::Count => position as u64 % total,
        Scheme::Hash => {
            let digest = sha256_hex(id.as_bytes());
            u64::from_str_radix(&digest[..16], 16).unwrap_or(0) % total
        }
    };
    slot as u32 + 1
}

impl Partition {
    /// Whether the item at `position` with `id` is in this shard.
    pub fn contains(&self, position: usize, id: &str) -> bool {
        shard_of(self.scheme, self.total, position, id) == self.shard
    }

    /// The items of a frozen list in this shard, in list order.
    pub fn select<'a, T>(&self, items: &'a [T], id: impl Fn(&T) -> &str) -> Vec<&'a T> {
        items.iter().enumerate().filter(|(i, item)| self.contains(*i, id(item))).map(|(_, item)| item).collect()
    }
}

/// SHA-256 of the canonical JSON of a frozen list's ids, in order: the full matrix a shard
/// was cut from (shards of one campaign agree on it).
pub fn list_sha256<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let ids: Vec<&str> = ids.collect();
    sha256_hex(&canonical_json(&ids))
}

/// What a shard's manifest records of its partition (`manifest.json` `partition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PartitionRecord {
    /// How trials were assigned: `count` (position) or `hash` (trial id).
    pub scheme: Scheme,
    /// This shard, 1-based.
    pub shard: u32,
    /// Shards in all.
    pub total: u32,
    /// SHA-256 of the full matrix's trial ids ([`list_sha256`]), every shard's.
    pub matrix_sha256: String,
    /// Trials in the full matrix.
    pub matrix_trials: u64,
    /// Trials in this shard.
    pub shard_trials: u64,
}

impl PartitionRecord {
    /// The partition it records.
    pub fn partition(&self) -> Partition {
        Partition { scheme: self.scheme, shard: self.shard, total: self.total }
    }
}

/// What a shard of a frozen list other than a trial matrix records of its partition: a seed
/// catalogue (`prove --all --partition`: the seed files' names, in name order) or a gate's
/// findings (`gate --partition`: their seed ids, in file order). Every shard of one list
/// records the same `list_sha256` and `list_items`; their `items` together are the list,
/// each item once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListShard {
    /// How items were assigned: `count` (position) or `hash` (the item's id).
    pub scheme: Scheme,
    /// This shard, 1-based.
    pub shard: u32,
    /// Shards in all.
    pub total: u32,
    /// What the list is: `seeds` or `findings`.
    pub list: String,
    /// SHA-256 of the whole list's ids, in order ([`list_sha256`]).
    pub list_sha256: String,
    /// Items in the whole list.
    pub list_items: u64,
    /// This shard's items (their ids), in list order; empty when N exceeds the list.
    pub items: Vec<String>,
}

impl ListShard {
    /// The partition it records.
    pub fn partition(&self) -> Partition {
        Partition { scheme: self.scheme, shard: self.shard, total: self.total }
    }

    /// One line for people: `shard count:2/3 of 4 findings: 1 (w2-…)`.
    pub fn line(&self) -> String {
        let items = if self.items.is_empty() { "none".to_owned() } else { self.items.join(", ") };
        format!(
            "shard {} of {} {} (list sha256 {}): {} in this shard: {items}",
            self.partition(),
            self.list_items,
            self.list,
            self.list_sha256.get(..12).unwrap_or(&self.list_sha256),
            self.items.len(),
        )
    }
}

impl Partition {
    /// The shard of a frozen list of ids (`list` names what they are): which positions are
    /// in it, and the record of it.
    pub fn shard_list(&self, list: &str, ids: &[String]) -> (Vec<usize>, ListShard) {
        let positions: Vec<usize> = (0..ids.len()).filter(|&i| self.contains(i, &ids[i])).collect();
        let record = ListShard {
            scheme: self.scheme,
            shard: self.shard,
            total: self.total,
            list: list.to_owned(),
            list_sha256: list_sha256(ids.iter().map(String::as_str)),
            list_items: ids.len() as u64,
            items: positions.iter().map(|&i| ids[i].clone()).collect(),
        };
        (positions, record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_nextest_writes_them_with_k_one_based() {
        let p = |s: &str| parse(s, None);
        assert_eq!(p("2/4"), Ok(Partition { scheme: Scheme::Count, shard: 2, total: 4 }));
        assert_eq!(p("count:4/4"), Ok(Partition { scheme: Scheme::Count, shard: 4, total: 4 }));
        assert_eq!(p("hash:1/3"), Ok(Partition { scheme: Scheme::Hash, shard: 1, total: 3 }));
        assert_eq!(parse("index/4", Some("0")), Ok(Partition { scheme: Scheme::Count, shard: 1, total: 4 }));
        assert_eq!(parse("hash:index/4", Some("3")), Ok(Partition { scheme: Scheme::Hash, shard: 4, total: 4 }));
        assert!(matches!(p("0/4"), Err(PartitionError::OutOfRange { shard: 0, .. })));
        assert!(matches!(p("5/4"), Err(PartitionError::OutOfRange { shard: 5, .. })));
        assert!(matches!(p("1/0"), Err(PartitionError::NoShards(_))));
        assert!(matches!(p("index/4"), Err(PartitionError::NoIndex(_))));
        assert!(matches!(parse("index/4", Some("4")), Err(PartitionError::OutOfRange { shard: 5, .. })));
        assert!(matches!(parse("index/4", Some("x")), Err(PartitionError::BadIndex { .. })));
        assert!(matches!(p("slice:1/4"), Err(PartitionError::Scheme { .. })));
        for bad in ["", "1", "a/4", "1/b", "1/4/5", "-1/4"] {
            assert!(matches!(p(bad), Err(PartitionError::Syntax(_))), "{bad}");
        }
    }

    #[test]
    fn every_item_is_in_exactly_one_shard_for_every_n() {
        let ids: Vec<String> = (0..257).map(|i| format!("t--s--{i}")).collect();
        for scheme in [Scheme::Count, Scheme::Hash] {
            for total in 1..=40u32 {
                let mut seen = vec![0u32; ids.len()];
                for shard in 1..=total {
                    let partition = Partition { scheme, shard, total };
                    for (i, id) in ids.iter().enumerate() {
                        if partition.contains(i, id) {
                            seen[i] += 1;
                        }
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "{scheme:?} N={total}: {seen:?}");
            }
        }
    }

    #[test]
    fn the_shards_of_a_list_record_one_list_and_cover_it_once() {
        let ids: Vec<String> = (0..5).map(|i| format!("seed-{i}")).collect();
        for scheme in [Scheme::Count, Scheme::Hash] {
            let records: Vec<ListShard> =
                (1..=3).map(|shard| Partition { scheme, shard, total: 3 }.shard_list("seeds", &ids).1).collect();
            let mut all: Vec<String> = records.iter().flat_map(|r| r.items.clone()).collect();
            all.sort();
            assert_eq!(all, ids, "{scheme:?}");
            assert!(records.iter().all(|r| r.list_sha256 == records[0].list_sha256 && r.list_items == 5));
        }
        let (positions, empty) = Partition { scheme: Scheme::Count, shard: 7, total: 7 }.shard_list("seeds", &ids);
        assert!(positions.is_empty() && empty.items.is_empty());
        assert!(empty.line().contains("0 in this shard: none"), "{}", empty.line());
    }

    #[test]
    fn count_balances_and_hash_ignores_order() {
        let ids: Vec<String> = (0..200).map(|i| format!("t--s--{i}")).collect();
        for shard in 1..=4 {
            let p = Partition { scheme: Scheme::Count, shard, total: 4 };
            assert_eq!(p.select(&ids, String::as_str).len(), 50);
        }
        // hash: the same id, anywhere in the list, in the same shard.
        let p = Partition { scheme: Scheme::Hash, shard: 2, total: 4 };
        let mut reversed = ids.clone();
        reversed.reverse();
        let mut a: Vec<&String> = p.select(&ids, String::as_str);
        let mut b: Vec<&String> = p.select(&reversed, String::as_str);
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert!(!a.is_empty() && a.len() < 200);
    }
}
