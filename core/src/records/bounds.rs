//! How large each results file may be. Every reader refuses a larger file from its size on
//! disk, before reading a byte of it (so a sparse file of gigabytes is refused at once and in
//! constant memory), and reads at most this much (a file that grows while it is read is
//! refused too). `runs.jsonl` is read as a stream, a row at a time, each row within
//! [`ROW`]. The bounds are far above what a run writes; each says why.

/// `manifest.json`: the campaign (itself at most 8 MiB as a file) and every scenario as
/// validated, hashes and resume records. A merged directory's also holds each shard's seal.
pub const MANIFEST: u64 = 64 << 20;

/// `seal.json`: a few hashes and one signature per key.
pub const SEAL: u64 = 1 << 20;

/// One evidence file: an attempt's requests, exchanges and tool results. A model's answer is
/// at most 32 MiB and an MCP frame 16 MiB; an attempt holds a few of them.
pub const EVIDENCE: u64 = 512 << 20;

/// One row of `runs.jsonl` (a row is about 1–2 KiB: its tool sequence and errors).
pub const ROW: u64 = 16 << 20;

/// `runs.jsonl` as a whole: about 500,000 rows. Every reader holds the rows it counts; a
/// larger campaign is run in shards (docs/scale-out.md) and each shard read on its own.
pub const LOG: u64 = 1 << 30;

/// A bound in words (`1 GiB`, `512 MiB`).
pub fn describe(bound: u64) -> String {
    match bound {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_read_in_words() {
        assert_eq!(describe(LOG), "1 GiB");
        assert_eq!(describe(EVIDENCE), "512 MiB");
        assert_eq!(describe(SEAL), "1 MiB");
        assert_eq!(describe(64 << 10), "64 KiB");
        assert_eq!(describe(1000), "1000 bytes");
    }
}
