//! Statistics of the analysis: the Wilson score interval, means, and a percentile bootstrap
//! whose resamples are reproducible anywhere.
//!
//! The bootstrap draws from [`SplitMix64`] seeded with the [`fnv1a_64`] hash of a label, so
//! the same differences and the same label give the same interval on every platform and in
//! every build. (The original drew from Python's `random.Random` seeded with a string, which
//! cannot be reproduced outside `CPython`.)

/// Two-sided 95% normal quantile used by [`wilson_95`].
pub const WILSON_Z: f64 = 1.959_963_984_540_054;

/// Number of bootstrap resamples of [`bootstrap_95`].
pub const BOOTSTRAP_SAMPLES: usize = 2000;

/// Index of the lower bootstrap percentile among the sorted resample means.
const BOOTSTRAP_LOW_INDEX: usize = 50;

/// Index of the upper bootstrap percentile among the sorted resample means.
const BOOTSTRAP_HIGH_INDEX: usize = 1949;

/// 95% Wilson score interval for `successes` out of `n`.
///
/// Returns `None` when `n` is 0 (nothing known) or `successes > n` (no valid proportion).
/// The bounds are clamped to [0, 1] and are exactly 0 when `successes == 0` and exactly 1
/// when `successes == n`, where rounding would otherwise leave them a hair off.
#[must_use]
pub fn wilson_95(successes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 || successes > n {
        return None;
    }
    let total = n as f64;
    let proportion = successes as f64 / total;
    let scale = WILSON_Z * WILSON_Z / total;
    let centre = (proportion + scale / 2.0) / (1.0 + scale);
    let margin = WILSON_Z * ((proportion * (1.0 - proportion) + scale / 4.0) / total).sqrt() / (1.0 + scale);
    let low = if successes == 0 { 0.0 } else { (centre - margin).max(0.0) };
    let high = if successes == n { 1.0 } else { (centre + margin).min(1.0) };
    Some((low, high))
}

/// The arithmetic mean; NaN for no values.
#[must_use]
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// FNV-1a, 64-bit.
#[must_use]
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

/// `SplitMix64` (Steele, Lea and Flood; Vigna's reference constants).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index in `0..bound` by multiply-shift (its bias is below bound / 2⁶⁴); `bound`
    /// must be positive.
    pub fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

/// Percentile bootstrap of the mean: [`BOOTSTRAP_SAMPLES`] resamples of `values` (with
/// replacement, same size) drawn by [`SplitMix64`] from `seed`; returns the sorted resample
/// means at indexes 50 and 1949 (both NaN when `values` is empty).
#[must_use]
pub fn bootstrap_95(values: &[f64], seed: u64) -> (f64, f64) {
    let mut rng = SplitMix64::new(seed);
    let count = values.len();
    let mut estimates: Vec<f64> = (0..BOOTSTRAP_SAMPLES)
        .map(|_| {
            let total: f64 = (0..count).map(|_| values[rng.below(count)]).sum();
            total / count as f64
        })
        .collect();
    estimates.sort_by(f64::total_cmp);
    (estimates[BOOTSTRAP_LOW_INDEX], estimates[BOOTSTRAP_HIGH_INDEX])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOLERANCE: f64 = 1e-12;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() < TOLERANCE
    }

    #[test]
    fn wilson_matches_reference_values() {
        // Expectations computed with Python's math module from the same formula.
        let cases = [
            (0, 10, 0.0, 0.277_532_799_862_889_2),
            (5, 10, 0.236_593_090_512_564, 0.763_406_909_487_436_1),
            (10, 10, 0.722_467_200_137_110_7, 1.0),
            (1, 1, 0.206_549_314_377_237_45, 1.0),
            (0, 1, 0.0, 0.793_450_685_622_762_6),
            (3, 7, 0.158_219_855_251_469_75, 0.749_541_635_472_342_8),
            (81, 263, 0.255_288_519_878_274_2, 0.366_209_576_982_800_04),
            (1, 2, 0.094_531_205_734_230_74, 0.905_468_794_265_769_3),
        ];
        for (successes, n, low, high) in cases {
            let (actual_low, actual_high) = wilson_95(successes, n).expect("interval");
            assert!(close(actual_low, low), "{successes}/{n}: {actual_low} vs {low}");
            assert!(close(actual_high, high), "{successes}/{n}: {actual_high} vs {high}");
        }
        assert_eq!(wilson_95(0, 0), None);
        assert_eq!(wilson_95(3, 2), None);
        assert_eq!(wilson_95(10, 10).expect("interval").1.to_bits(), 1.0_f64.to_bits());
        assert_eq!(wilson_95(0, 10).expect("interval").0.to_bits(), 0.0_f64.to_bits());
    }

    #[test]
    fn prng_and_hash_match_reference_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        let mut rng = SplitMix64::new(1_234_567);
        assert_eq!(rng.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(rng.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(rng.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn below_stays_in_bounds_and_reaches_every_index() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [0_u32; 5];
        for _ in 0..1000 {
            seen[rng.below(5)] += 1;
        }
        assert!(seen.iter().all(|&count| count > 150), "{seen:?}");
        assert_eq!(SplitMix64::new(7).below(1), 0);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_mean() {
        let values = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let seed = fnv1a_64(b"m:s:graph:reference:proposed");
        let (low, high) = bootstrap_95(&values, seed);
        assert_eq!(bootstrap_95(&values, seed), (low, high));
        assert!(low <= mean(&values) && mean(&values) <= high, "{low} {high}");
        // A constant sample has a degenerate interval whatever the seed.
        assert_eq!(bootstrap_95(&[0.5; 4], 1), (0.5, 0.5));
        let (empty_low, empty_high) = bootstrap_95(&[], seed);
        assert!(empty_low.is_nan() && empty_high.is_nan());
    }

    #[test]
    fn mean_of_values() {
        assert!(close(mean(&[1.0, 0.0, 1.0]), 2.0 / 3.0));
        assert!(mean(&[]).is_nan());
    }
}
