//! Decoding's attention: one new position's queries against every key they see. Through gemm
//! each query head was a product of one row of its own: every head read its key-value head's
//! whole cache again, each score was summed across its vector's lanes alone, and the context was
//! stored back after every value row; attention was about an eighth of decoding Qwen2.5-Coder-0.5B
//! and Gemma 3 270M after a 770-token prompt (docs/PERFORMANCE.md). Here the query heads that
//! share a key-value head go through its cache together, a block of keys or values at a time,
//! so that the block comes from memory once and from the core's cache for the other heads; eight
//! keys' sums are reduced together; a span of the context stays in registers while the block's
//! value rows stream past. Where key-value heads are fewer than threads (Gemma 3 270M has one),
//! each head's keys are split into parts, one a thread, and the parts' softmaxes merged by
//! their log-sums, so that no two threads read the same keys.

// Only x86-64 has the kernel (elsewhere no `OnePosition` is made and the tensors' attention
// decodes), so there the parts only it reads go unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables))]

use std::ops::Range;
use std::sync::Mutex;

use super::{Causal, Strided};

/// Values of one head's context that a step keeps in registers.
const SPAN: usize = 32;
/// Bytes of keys or values a block holds: the core's fastest cache keeps them while every head
/// of the group reads them.
const BLOCK_BYTES: usize = 16 * 1024;
/// Keys a part takes at least, where a head's keys are split across threads.
const MIN_PART_KEYS: usize = 128;

/// The shapes of one position's attention: `heads` queries of `dim` values for each of `batch`
/// items, over `keys` positions of `kv_heads` key-value heads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    pub(super) batch: usize,
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) keys: usize,
    pub(super) dim: usize,
}

/// The kernel for one position, on CPUs that run it.
#[derive(Debug, Clone, Copy)]
pub(super) struct OnePosition(());

impl OnePosition {
    /// The kernel, where the CPU has AVX2 and FMA and a head's values are whole spans.
    pub(super) fn for_this_cpu(dim: usize) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if dim > 0 && dim.is_multiple_of(SPAN) && has!("avx2") && has!("fma") {
                return Some(Self(()));
            }
        }
        None
    }

    /// The attention (batch, heads, 1, dim) of the last position's queries `q` over `k` and
    /// `v`, whose shapes the caller checked against `sizes`.
    pub(super) fn attend(
        self,
        causal: Causal,
        (q, k, v): (&Strided<'_>, &Strided<'_>, &Strided<'_>),
        sizes: Sizes,
    ) -> Vec<f32> {
        let Sizes {
            batch,
            heads,
            kv_heads,
            keys,
            dim,
        } = sizes;
        let group = heads / kv_heads;
        let first_key = causal.first_key(keys - 1);
        let seen = keys - first_key;
        // Where key-value heads are fewer than threads, each head's keys split into parts,
        // so that every thread reads keys of its own; each part's softmax is merged below.
        let threads = candle_core::utils::barrier_pool().n_workers() + 1;
        let parts = threads
            .div_ceil(batch * kv_heads)
            .min(seen.div_ceil(MIN_PART_KEYS))
            .max(1);
        let part_keys = |part: usize| part * seen / parts..(part + 1) * seen / parts;
        // Each task's contexts, softmax within its part, and the log-sums of its parts'
        // exponentials, in task order: (item, key-value head, part).
        let tasks = batch * kv_heads * parts;
        let mut contexts = vec![0f32; tasks * group * dim];
        let mut log_sums = vec![0f32; tasks * group];
        let outputs: Vec<Mutex<(&mut [f32], &mut [f32])>> = contexts
            .chunks_mut(group * dim)
            .zip(log_sums.chunks_mut(group))
            .map(Mutex::new)
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(tasks, |tasks| {
            for task in tasks {
                let (pair, part) = (task / parts, task % parts);
                let (item, kv_head) = (pair / kv_heads, pair % kv_heads);
                let keys = part_keys(part);
                let first = first_key + keys.start;
                let queries = Rows::new(q.rows(item, kv_head * group, 0), q.strides[1], group, dim);
                let key_rows =
                    Rows::new(k.rows(item, kv_head, first), k.strides[2], keys.len(), dim);
                let value_rows =
                    Rows::new(v.rows(item, kv_head, first), v.strides[2], keys.len(), dim);
                let mut output = outputs[task]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (context, log_sums) = &mut *output;
                let mut scores = vec![0f32; group * keys.len()];
                self.scaled_dots(&queries, &key_rows, causal.scale, &mut scores);
                for (row, log_sum) in scores.chunks_exact_mut(keys.len()).zip(log_sums.iter_mut()) {
                    causal.soften(row);
                    *log_sum = scar_embed::softmax_in_place(row);
                }
                self.weighted_sums(&scores, &value_rows, context);
            }
        });
        // Each head's context: its parts' contexts weighted by their shares of the whole
        // row's exponentials, `exp(log_sum)` each over their sum.
        let mut out = vec![0f32; batch * heads * dim];
        for (pair, out) in out.chunks_exact_mut(group * dim).enumerate() {
            for (head, out) in out.chunks_exact_mut(dim).enumerate() {
                let log_sum = |part: usize| log_sums[(pair * parts + part) * group + head];
                let largest = (0..parts).map(log_sum).fold(f32::NEG_INFINITY, f32::max);
                let exponentials: Vec<f32> = (0..parts)
                    .map(|part| (log_sum(part) - largest).exp())
                    .collect();
                let total: f32 = exponentials.iter().sum();
                for (part, exponential) in exponentials.iter().enumerate() {
                    let share = exponential / total;
                    let context = &contexts[((pair * parts + part) * group + head) * dim..][..dim];
                    for (out, value) in out.iter_mut().zip(context) {
                        *out += share * value;
                    }
                }
            }
        }
        out
    }

    /// `scores[i · keys + j] = scale · query i · key j`.
    // `self` is the proof that this CPU runs the kernel.
    #[allow(clippy::unused_self)]
    fn scaled_dots(self, queries: &Rows<'_>, keys: &Rows<'_>, scale: f32, scores: &mut [f32]) {
        assert!(queries.dim == keys.dim && scores.len() == queries.count * keys.count);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Self` is made only where the CPU has AVX2 and FMA and rows are whole spans;
        // the rows' reach was checked by `Rows::new`, the scores' size above.
        #[allow(unsafe_code)]
        unsafe {
            avx2::scaled_dots(queries, keys, scale, scores);
        }
    }

    /// `out[i · dim ..][..dim] = Σ_j weights[i · rows + j] · row j`, for each of the weights'
    /// rows.
    #[allow(clippy::unused_self)]
    fn weighted_sums(self, weights: &[f32], rows: &Rows<'_>, out: &mut [f32]) {
        assert!(
            weights.len() / rows.count * rows.dim == out.len()
                && weights.len().is_multiple_of(rows.count)
        );
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `scaled_dots`.
        #[allow(unsafe_code)]
        unsafe {
            avx2::weighted_sums(weights, rows, out);
        }
    }
}

/// `count` rows of `dim` values, `stride` apart, the last ending inside `values`.
struct Rows<'a> {
    values: &'a [f32],
    stride: usize,
    count: usize,
    dim: usize,
}

impl<'a> Rows<'a> {
    /// # Panics
    /// If there are no rows, or the last one does not end inside `values`.
    fn new(values: &'a [f32], stride: usize, count: usize, dim: usize) -> Self {
        assert!(count > 0 && (count - 1) * stride + dim <= values.len());
        Self {
            values,
            stride,
            count,
            dim,
        }
    }

    /// Rows of the block starting at row `first` (at most `block`).
    fn block(&self, first: usize, block: usize) -> Range<usize> {
        first..(first + block).min(self.count)
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use std::arch::x86_64::{
        __m256, _mm_add_ps, _mm_cvtss_f32, _mm_hadd_ps, _mm256_add_ps, _mm256_castps256_ps128,
        _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_hadd_ps, _mm256_loadu_ps, _mm256_mul_ps,
        _mm256_permute2f128_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };

    use super::{BLOCK_BYTES, Rows, SPAN};

    /// Keys whose sums are reduced together.
    const KEYS: usize = 8;
    const LANES: usize = 8;

    /// See [`super::OnePosition::scaled_dots`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `dim` is a multiple of 8; `scores` holds a score for each
    /// query and key; both row sets were checked by `Rows::new`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn scaled_dots(
        queries: &Rows<'_>,
        keys: &Rows<'_>,
        scale: f32,
        scores: &mut [f32],
    ) {
        let (q, k, dim) = (queries.values.as_ptr(), keys.values.as_ptr(), keys.dim);
        let scales = _mm256_set1_ps(scale);
        let block = (BLOCK_BYTES / (4 * dim)).max(KEYS) / KEYS * KEYS;
        for first in (0..keys.count).step_by(block) {
            let block = keys.block(first, block);
            for i in 0..queries.count {
                let query = q.wrapping_add(i * queries.stride);
                let scores = &mut scores[i * keys.count..][..keys.count];
                let mut j = block.start;
                while j + KEYS <= block.end {
                    let mut sums = [_mm256_setzero_ps(); KEYS];
                    for at in (0..dim).step_by(LANES) {
                        // SAFETY: `at + 8 ≤ dim`; query `i` and keys `j` to `j + 7` are rows.
                        unsafe {
                            let q = _mm256_loadu_ps(query.add(at));
                            for (r, sum) in sums.iter_mut().enumerate() {
                                let key = _mm256_loadu_ps(k.add((j + r) * keys.stride + at));
                                *sum = _mm256_fmadd_ps(q, key, *sum);
                            }
                        }
                    }
                    // SAFETY: `j + 8 ≤ count`, the length of `scores`.
                    unsafe {
                        _mm256_storeu_ps(
                            scores.as_mut_ptr().add(j),
                            _mm256_mul_ps(each_sum(sums), scales),
                        );
                    }
                    j += KEYS;
                }
                for (j, score) in scores[..block.end].iter_mut().enumerate().skip(j) {
                    let mut sum = _mm256_setzero_ps();
                    for at in (0..dim).step_by(LANES) {
                        // SAFETY: as above, for key `j`.
                        unsafe {
                            let key = _mm256_loadu_ps(k.add(j * keys.stride + at));
                            sum = _mm256_fmadd_ps(_mm256_loadu_ps(query.add(at)), key, sum);
                        }
                    }
                    *score = lane_sum(sum) * scale;
                }
            }
        }
    }

    /// See [`super::OnePosition::weighted_sums`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `dim` is whole spans; `weights` holds a weight for each of
    /// `out`'s rows and each of `rows`; `rows` was checked by `Rows::new`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn weighted_sums(weights: &[f32], rows: &Rows<'_>, out: &mut [f32]) {
        const VECTORS: usize = SPAN / LANES;
        let (values, dim) = (rows.values.as_ptr(), rows.dim);
        out.fill(0.0);
        let block = (BLOCK_BYTES / (4 * dim)).max(1);
        for first in (0..rows.count).step_by(block) {
            let block = rows.block(first, block);
            for (weights, out) in weights
                .chunks_exact(rows.count)
                .zip(out.chunks_exact_mut(dim))
            {
                for (span, out) in out.chunks_exact_mut(SPAN).enumerate() {
                    let mut sums = [_mm256_setzero_ps(); VECTORS];
                    for (i, sum) in sums.iter_mut().enumerate() {
                        // SAFETY: `out` is one span, `VECTORS` vectors long.
                        *sum = unsafe { _mm256_loadu_ps(out.as_ptr().add(i * LANES)) };
                    }
                    for j in block.clone() {
                        let weight = _mm256_set1_ps(weights[j]);
                        let row = j * rows.stride + span * SPAN;
                        for (i, sum) in sums.iter_mut().enumerate() {
                            // SAFETY: the span lies inside row `j`'s `dim` values.
                            let value = unsafe { _mm256_loadu_ps(values.add(row + i * LANES)) };
                            *sum = _mm256_fmadd_ps(weight, value, *sum);
                        }
                    }
                    for (i, sum) in sums.into_iter().enumerate() {
                        // SAFETY: as above.
                        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(i * LANES), sum) };
                    }
                }
            }
        }
    }

    /// The eight vectors' lane sums, in their order, in one vector.
    #[target_feature(enable = "avx2")]
    fn each_sum(v: [__m256; KEYS]) -> __m256 {
        // Pairs of lanes, then fours, within each 128-bit half: lanes 0-3 of `fours[0]` are
        // vectors 0-3's low halves' sums, lanes 4-7 their high halves'.
        let pairs = [
            _mm256_hadd_ps(v[0], v[1]),
            _mm256_hadd_ps(v[2], v[3]),
            _mm256_hadd_ps(v[4], v[5]),
            _mm256_hadd_ps(v[6], v[7]),
        ];
        let fours = [
            _mm256_hadd_ps(pairs[0], pairs[1]),
            _mm256_hadd_ps(pairs[2], pairs[3]),
        ];
        _mm256_add_ps(
            _mm256_permute2f128_ps::<0x20>(fours[0], fours[1]),
            _mm256_permute2f128_ps::<0x31>(fours[0], fours[1]),
        )
    }

    /// The sum of a vector's eight lanes.
    #[target_feature(enable = "avx2")]
    fn lane_sum(v: __m256) -> f32 {
        let four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let two = _mm_hadd_ps(four, four);
        _mm_cvtss_f32(_mm_hadd_ps(two, two))
    }
}
