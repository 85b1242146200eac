//! The paired bootstrap and the paired effect size, with a small deterministic generator.

use serde::{Deserialize, Serialize};

/// The `splitmix64` generator (Steele, Lea and Flood, 2014): 64 bits of state, full period,
/// good enough for resampling and reproducible on every platform.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by the multiply-high method (bias below `n / 2⁶⁴`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// The default seed of evaluation runs.
pub const DEFAULT_SEED: u64 = 0x5CA2_2026;

/// What a paired bootstrap found; [`paired_bootstrap`] defines each value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedBootstrap {
    /// Pairs.
    pub n: usize,
    /// Resamples.
    pub resamples: usize,
    /// Mean of the candidate's values.
    pub mean_candidate: f64,
    /// Mean of the baseline's values.
    pub mean_baseline: f64,
    /// Mean of candidate − baseline.
    pub mean_diff: f64,
    /// Relative change of the mean, `mean_diff / mean_baseline` (`None` when the baseline's
    /// mean is 0).
    pub relative_diff: Option<f64>,
    /// 2.5th percentile of the resampled mean differences.
    pub ci_low: f64,
    /// 97.5th percentile of the resampled mean differences.
    pub ci_high: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Cohen's d for paired data; `None` when undefined.
    pub cohens_d: Option<f64>,
}

/// Bootstraps the mean of `candidate − baseline` over paired values; `None` when there are no
/// pairs or the slices differ in length.
///
/// For paired per-test values `a` (the candidate) and `b` (the baseline), the differences
/// `d = a − b` are resampled with replacement `B` times; each resample's mean is one draw of
/// the mean difference.
/// - Interval: the 2.5th and 97.5th percentiles of the resampled means (percentile method;
///   the `q`-th percentile is the sorted draw at index `round(q·(B − 1))`).
/// - p-value (two-sided): with `c` the resamples whose mean lies on the other side of 0 from
///   the observed mean or on 0, `p = min(1, 2·(c + 1)/(B + 1))`; the `+1`s keep a finite run
///   from claiming `p = 0`, so the smallest reportable value is `2/(B + 1)`. An observed mean of
///   exactly 0 has `p = 1`.
/// - Cohen's d for paired data (`d_z`): mean of `d` / sample standard deviation of `d` (`n − 1`);
///   `None` when `n < 2` or every difference is the same (the ratio is undefined or infinite).
#[must_use]
pub fn paired_bootstrap(
    candidate: &[f64],
    baseline: &[f64],
    resamples: usize,
    seed: u64,
) -> Option<PairedBootstrap> {
    let n = candidate.len();
    if n == 0 || baseline.len() != n || resamples == 0 {
        return None;
    }
    let diffs: Vec<f64> = candidate.iter().zip(baseline).map(|(a, b)| a - b).collect();
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let mean_diff = mean(&diffs);
    let mut rng = SplitMix64::new(seed);
    let mut draws: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| diffs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    draws.sort_by(f64::total_cmp);
    let percentile = |q: f64| draws[(q * (resamples - 1) as f64).round() as usize];
    let p_value = if mean_diff == 0.0 {
        1.0
    } else {
        let other_side = draws
            .iter()
            .filter(|&&m| if mean_diff > 0.0 { m <= 0.0 } else { m >= 0.0 })
            .count();
        (2.0 * (other_side + 1) as f64 / (resamples + 1) as f64).min(1.0)
    };
    let mean_baseline = mean(baseline);
    Some(PairedBootstrap {
        n,
        resamples,
        mean_candidate: mean(candidate),
        mean_baseline,
        mean_diff,
        relative_diff: (mean_baseline != 0.0).then(|| mean_diff / mean_baseline),
        ci_low: percentile(0.025),
        ci_high: percentile(0.975),
        p_value,
        cohens_d: cohens_d(&diffs),
    })
}

/// Mean / sample standard deviation of paired differences; `None` for fewer than 2 or a zero
/// deviation.
#[must_use]
pub fn cohens_d(diffs: &[f64]) -> Option<f64> {
    let n = diffs.len();
    if n < 2 {
        return None;
    }
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let variance = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = variance.sqrt();
    // Differences that are all equal can leave a rounding residue instead of an exact 0.
    (sd > 1e-12 * mean.abs().max(1.0)).then(|| mean / sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // First outputs of the reference C implementation seeded with 0.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut rng = SplitMix64::new(7);
        assert!((0..1000).all(|_| rng.below(3) < 3));
    }

    #[test]
    fn the_same_seed_gives_the_same_result() {
        let a = [0.1, 0.5, 0.2, 0.9, 0.4];
        let b = [0.0, 0.6, 0.1, 0.7, 0.4];
        assert_eq!(
            paired_bootstrap(&a, &b, 500, 3),
            paired_bootstrap(&a, &b, 500, 3)
        );
        assert_eq!(paired_bootstrap(&[], &[], 500, 3), None);
        assert_eq!(paired_bootstrap(&a, &b[..4], 500, 3), None);
    }
}
