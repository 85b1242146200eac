//! Weight matrices laid out for decoding. One token's activations times a weight matrix is the
//! product decoding spends its time in, and candle's x86 kernels take each block of 32 weights
//! through AVX2's two-step byte products (`Q8_0`) or through scalar code (`Q4_1`). Here a
//! matrix's quantized weights are stored row after row with the block scales apart, so that
//! two blocks load at once, and AVX-512 VNNI's `vpdpbusd` multiplies and sums 64 byte pairs in
//! one instruction; the activations are quantized to bytes per block of 32, as llama.cpp
//! quantizes them. Rows are split across candle's own worker threads, which run the rest of the
//! model (a second pool would compete with them for the cores).
//!
//! Used where the CPU has AVX-512 VNNI and rows are whole pairs of blocks; the rest stays on
//! candle's kernels.

use std::sync::atomic::{AtomicU32, Ordering};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Result, Tensor};

/// Weights of one block, in both formats.
const BLOCK: usize = 32;
/// Weights of the two blocks one step of the product takes.
const PAIR: usize = 2 * BLOCK;
/// Bytes of a `Q8_0` block in a GGUF file: its f16 scale, then its 32 signed weights.
pub(crate) const Q8_0_BLOCK_BYTES: usize = 2 + BLOCK;

/// How the weights of a matrix are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// A signed byte per weight; weight = scale · byte.
    Q8_0,
    /// A nibble per weight, block `b`'s 16 bytes holding weights 0-15 in their low halves and
    /// 16-31 in their high halves; weight = scale · nibble + minimum.
    Q4_1,
}

impl Format {
    /// Bytes that hold `weights` weights, scales apart.
    fn weight_bytes(self, weights: usize) -> usize {
        match self {
            Self::Q8_0 => weights,
            Self::Q4_1 => weights / 2,
        }
    }
}

/// A quantized matrix (rows × columns, applied as `x · Wᵀ`) in the layout of our product.
pub(crate) struct PackedRows {
    format: Format,
    /// The quantized weights, row after row.
    weights: Vec<u8>,
    /// One scale per block.
    scales: Vec<f32>,
    /// One minimum per block (`Q4_1`; empty for `Q8_0`).
    minimums: Vec<f32>,
    rows: usize,
    columns: usize,
}

/// True when the CPU runs our product (AVX-512 VNNI with the byte operations of AVX-512 BW).
pub(crate) fn available() -> bool {
    vnni::available()
}

impl PackedRows {
    /// `tensor` laid out for our product, or `None` where it cannot run: neither `Q8_0` nor
    /// `Q4_1`, not on the CPU, rows that are not whole pairs of blocks, a CPU without AVX-512
    /// VNNI, or a `Q8_0` weight of −128 (which llama.cpp never writes, and whose sign the
    /// product could not turn).
    pub(crate) fn from_tensor(tensor: &QTensor) -> Result<Option<Self>> {
        let &[rows, columns] = tensor.shape().dims() else {
            return Ok(None);
        };
        let format = match tensor.dtype() {
            GgmlDType::Q8_0 => Format::Q8_0,
            GgmlDType::Q4_1 => Format::Q4_1,
            _ => return Ok(None),
        };
        if !columns.is_multiple_of(PAIR) || !tensor.device().is_cpu() || !available() {
            return Ok(None);
        }
        let data = tensor.data()?;
        let blocks = rows * columns / BLOCK;
        let mut packed = Self {
            format,
            weights: Vec::with_capacity(rows * columns),
            scales: Vec::with_capacity(blocks),
            minimums: Vec::new(),
            rows,
            columns,
        };
        let half = |bytes: &[u8]| half::f16::from_le_bytes([bytes[0], bytes[1]]).to_f32();
        match format {
            // The f16 scale, then 32 signed bytes.
            Format::Q8_0 => {
                for block in data.chunks_exact(Q8_0_BLOCK_BYTES) {
                    packed.scales.push(half(block));
                    packed.weights.extend_from_slice(&block[2..]);
                }
                if packed.weights.contains(&i8::MIN.cast_unsigned()) {
                    return Ok(None);
                }
            }
            // The f16 scale and minimum, then 16 bytes of nibbles.
            Format::Q4_1 => {
                packed.minimums.reserve(blocks);
                for block in data.chunks_exact(4 + BLOCK / 2) {
                    packed.scales.push(half(block));
                    packed.minimums.push(half(&block[2..]));
                    packed.weights.extend_from_slice(&block[4..]);
                }
            }
        }
        Ok(Some(packed))
    }

    /// `x · Wᵀ` for one row `x` of `columns` values.
    pub(crate) fn product(&self, x: &[f32]) -> Result<Vec<f32>> {
        if x.len() != self.columns {
            candle_core::bail!(
                "a row of {} values for a matrix of {} columns",
                x.len(),
                self.columns
            );
        }
        let activations = Activations::quantize(x, self.format);
        let blocks = self.columns / BLOCK;
        let row_bytes = self.format.weight_bytes(self.columns);
        // Each row's result is written once, by whichever thread takes the row: as bits, so
        // that the threads share the output without locks.
        let out: Vec<AtomicU32> = (0..self.rows).map(|_| AtomicU32::new(0)).collect();
        candle_core::utils::barrier_pool().execute_chunked(self.rows, |rows| {
            for row in rows {
                let weights = &self.weights[row * row_bytes..(row + 1) * row_bytes];
                let scales = &self.scales[row * blocks..(row + 1) * blocks];
                let mut value = vnni::row(self.format, weights, scales, &activations);
                if self.format == Format::Q4_1 {
                    let minimums = &self.minimums[row * blocks..(row + 1) * blocks];
                    value += minimums
                        .iter()
                        .zip(&activations.block_sums)
                        .map(|(m, s)| m * s)
                        .sum::<f32>();
                }
                out[row].store(value.to_bits(), Ordering::Relaxed);
            }
        });
        Ok(out
            .into_iter()
            .map(|bits| f32::from_bits(bits.into_inner()))
            .collect())
    }

    /// The weights as an f32 matrix (rows, columns), for products of many rows at once.
    pub(crate) fn dequantize(&self, device: &Device) -> Result<Tensor> {
        let mut values = Vec::with_capacity(self.rows * self.columns);
        match self.format {
            Format::Q8_0 => {
                for (block, &scale) in self.weights.chunks_exact(BLOCK).zip(&self.scales) {
                    values.extend(block.iter().map(|&q| f32::from(q.cast_signed()) * scale));
                }
            }
            Format::Q4_1 => {
                let blocks = self.weights.chunks_exact(BLOCK / 2);
                for ((block, &scale), &minimum) in blocks.zip(&self.scales).zip(&self.minimums) {
                    let weight = |nibble: u8| f32::from(nibble) * scale + minimum;
                    values.extend(block.iter().map(|&q| weight(q & 0x0F)));
                    values.extend(block.iter().map(|&q| weight(q >> 4)));
                }
            }
        }
        Tensor::from_vec(values, (self.rows, self.columns), device)
    }
}

/// One row of activations quantized per block of 32: a scale (the largest magnitude over 127)
/// and rounded signed bytes, laid out as the weights' format needs them.
struct Activations {
    /// `Q8_0`: the bytes' magnitudes, as `vpdpbusd` wants one side unsigned (the weights'
    /// signs are turned by `negative`). `Q4_1`: the signed bytes, each pair of blocks in the
    /// order of the weights' nibbles once split (block A's 0-15, B's 0-15, A's 16-31, B's 16-31).
    bytes: Vec<u8>,
    /// `Q8_0`: bit `i` of word `p` is set when value `64·p + i` is negative.
    negative: Vec<u64>,
    scales: Vec<f32>,
    /// `Q4_1`: each block's scale times the sum of its bytes, which the weights' minimums
    /// multiply.
    block_sums: Vec<f32>,
}

impl Activations {
    fn quantize(x: &[f32], format: Format) -> Self {
        let blocks = x.len() / BLOCK;
        let mut quantized = vec![0i8; x.len()];
        let mut scales = Vec::with_capacity(blocks);
        for (block, out) in x.chunks_exact(BLOCK).zip(quantized.chunks_exact_mut(BLOCK)) {
            let largest = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let scale = largest / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            scales.push(scale);
            for (q, &v) in out.iter_mut().zip(block) {
                *q = (v * inverse).round() as i8;
            }
        }
        let mut activations = Self {
            bytes: Vec::with_capacity(x.len()),
            negative: Vec::new(),
            scales,
            block_sums: Vec::new(),
        };
        match format {
            Format::Q8_0 => {
                activations.negative = vec![0; x.len() / PAIR];
                for (i, &q) in quantized.iter().enumerate() {
                    activations.bytes.push(q.unsigned_abs());
                    if q < 0 {
                        activations.negative[i / PAIR] |= 1 << (i % PAIR);
                    }
                }
            }
            Format::Q4_1 => {
                for pair in quantized.chunks_exact(PAIR) {
                    let (a, b) = pair.split_at(BLOCK);
                    for half in [&a[..16], &b[..16], &a[16..], &b[16..]] {
                        activations
                            .bytes
                            .extend(half.iter().map(|q| q.cast_unsigned()));
                    }
                }
                activations.block_sums = quantized
                    .chunks_exact(BLOCK)
                    .zip(&activations.scales)
                    .map(|(block, scale)| scale * block.iter().map(|&q| f32::from(q)).sum::<f32>())
                    .collect();
            }
        }
        activations
    }
}

mod vnni {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::{
        __m512, __m512i, _mm256_and_si256, _mm256_loadu_si256, _mm256_set1_epi8, _mm256_srli_epi16,
        _mm512_castsi256_si512, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
        _mm512_inserti64x4, _mm512_loadu_si512, _mm512_mask_blend_ps, _mm512_mask_sub_epi8,
        _mm512_reduce_add_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_setzero_si512,
    };

    use super::{Activations, BLOCK, Format, PAIR};

    pub(super) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// One row's product with the activations, the weights' scales included (for `Q4_1`,
    /// not its minimums).
    pub(super) fn row(format: Format, weights: &[u8], scales: &[f32], x: &Activations) -> f32 {
        // The activations hold a byte per weight in both formats.
        assert_eq!(
            weights.len(),
            format.weight_bytes(x.bytes.len()),
            "checked by `product`"
        );
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `PackedRows` exists only where `available()` said the CPU has these
            // features.
            #[allow(unsafe_code)]
            unsafe {
                match format {
                    Format::Q8_0 => q8_0_row_avx512(weights, scales, x),
                    Format::Q4_1 => q4_1_row_avx512(weights, scales, x),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (format, weights, scales, x);
            unreachable!("PackedRows is built only where `available()` is true")
        }
    }

    /// 64 bytes at `at` of `bytes`, which holds at least `at + 64`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn load(bytes: &[u8], at: usize) -> __m512i {
        assert!(at + PAIR <= bytes.len());
        // SAFETY: in bounds, as just checked; the load is unaligned.
        #[allow(unsafe_code)]
        unsafe {
            _mm512_loadu_si512(bytes.as_ptr().add(at).cast())
        }
    }

    /// `products` (16 lanes of sums of four byte products) scaled lane by lane, the lanes in
    /// `second` by the second block's scales, the others by the first's, and added to `sum`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn add_scaled(sum: __m512, products: __m512i, second: u16, scales: [f32; 2]) -> __m512 {
        let scale =
            _mm512_mask_blend_ps(second, _mm512_set1_ps(scales[0]), _mm512_set1_ps(scales[1]));
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), scale, sum)
    }

    /// Two blocks a step: the weights whose activation is negative change sign, so that the
    /// activations' magnitudes (unsigned) times the weights (signed) sum, four products to a
    /// lane, in one `vpdpbusd`; lanes 0-7 hold the first block, 8-15 the second.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn q8_0_row_avx512(weights: &[u8], scales: &[f32], x: &Activations) -> f32 {
        let mut sum = _mm512_setzero_ps();
        for pair in 0..weights.len() / PAIR {
            let at = pair * PAIR;
            let w = load(weights, at);
            let signed = _mm512_mask_sub_epi8(w, x.negative[pair], _mm512_setzero_si512(), w);
            let products = _mm512_dpbusd_epi32(_mm512_setzero_si512(), load(&x.bytes, at), signed);
            let (a, b) = (2 * pair, 2 * pair + 1);
            sum = add_scaled(
                sum,
                products,
                0xFF00,
                [scales[a] * x.scales[a], scales[b] * x.scales[b]],
            );
        }
        _mm512_reduce_add_ps(sum)
    }

    /// Two blocks a step: 32 bytes of nibbles split into the 64 weights (unsigned, 0-15), times
    /// the activations (signed) in the same order, in one `vpdpbusd`; lanes 0-3 and 8-11 hold
    /// the first block, 4-7 and 12-15 the second.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn q4_1_row_avx512(weights: &[u8], scales: &[f32], x: &Activations) -> f32 {
        let low_nibbles = _mm256_set1_epi8(0x0F);
        let mut sum = _mm512_setzero_ps();
        for pair in 0..weights.len() / BLOCK {
            let at = pair * BLOCK;
            assert!(at + BLOCK <= weights.len());
            // SAFETY: in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            let packed = unsafe { _mm256_loadu_si256(weights.as_ptr().add(at).cast()) };
            let low = _mm256_and_si256(packed, low_nibbles);
            let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
            let nibbles = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
            let products =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, load(&x.bytes, 2 * at));
            let (a, b) = (2 * pair, 2 * pair + 1);
            sum = add_scaled(
                sum,
                products,
                0xF0F0,
                [scales[a] * x.scales[a], scales[b] * x.scales[b]],
            );
        }
        _mm512_reduce_add_ps(sum)
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Module;
    use candle_core::quantized::QMatMul;

    use super::*;

    fn random(rows: usize, columns: usize, seed: u64) -> Tensor {
        let mut next = scar_test_support::uniform_stream(seed);
        let values: Vec<f32> = (0..rows * columns).map(|_| next() * 2.0 - 1.0).collect();
        Tensor::from_vec(values, (rows, columns), &Device::Cpu).unwrap()
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    #[test]
    fn our_products_equal_candles_quantized_products() {
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_1] {
            let weights = QTensor::quantize(&random(200, 640, 7), dtype).unwrap();
            let Some(packed) = PackedRows::from_tensor(&weights).unwrap() else {
                // A CPU without AVX-512 VNNI keeps candle's kernels; nothing to compare.
                assert!(!available());
                return;
            };
            let x = random(1, 640, 11);
            let ours = packed.product(&values(&x)).unwrap();
            let candle = values(&QMatMul::from_qtensor(weights).unwrap().forward(&x).unwrap());
            // Both quantize the activations to the same bytes and sum exact integer products;
            // candle keeps their block scales (and, for Q4_1, the block sums) in f16, we in f32.
            for (a, b) in ours.iter().zip(&candle) {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs().max(1.0),
                    "{dtype:?}: {a} against {b}"
                );
            }
            assert!(packed.product(&[0.0; 64]).is_err());
        }
    }

    #[test]
    fn dequantized_rows_are_candles() {
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q4_1] {
            let weights = QTensor::quantize(&random(3, 128, 5), dtype).unwrap();
            let Some(packed) = PackedRows::from_tensor(&weights).unwrap() else {
                return;
            };
            let ours = packed.dequantize(&Device::Cpu).unwrap();
            let candle = weights.dequantize(&Device::Cpu).unwrap();
            assert_eq!(values(&ours), values(&candle), "{dtype:?}");
        }
    }

    #[test]
    fn other_formats_and_rows_that_are_not_whole_pairs_of_blocks_stay_on_candle() {
        let odd = QTensor::quantize(&random(4, 96, 3), GgmlDType::Q8_0).unwrap();
        assert!(PackedRows::from_tensor(&odd).unwrap().is_none());
        let other = QTensor::quantize(&random(4, 256, 3), GgmlDType::Q4K).unwrap();
        assert!(PackedRows::from_tensor(&other).unwrap().is_none());
    }
}
