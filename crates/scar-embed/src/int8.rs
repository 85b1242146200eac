//! `x·Wᵀ` with the weights and inputs as int8 in blocks of 32 along the inner dimension, each
//! block with its own f32 scale (ggml's `Q8_0`, on both sides), on CPUs with VNNI's byte dot
//! products. A block's 32 products sum exactly in i32; blocks are scaled and summed in f32.
//!
//! Blocks, not one scale per row: with one scale per input row and per weight column, `MiniLM`'s
//! vectors fall to a cosine of 0.998 against f32 (its post-GELU inputs have a few large values
//! that flatten the rest of their row); blocks of 32 keep them above 0.999 (docs/PERFORMANCE.md).
//!
//! The weights are quantised once, at load, into panels of 16 output columns: for each block,
//! 8 groups of 4 consecutive inputs, a group's 16 columns × 4 bytes one 512-bit load. Each call
//! quantises its inputs to unsigned bytes, `q + 128`, because VNNI multiplies unsigned bytes by
//! signed ones; 128 × the block's weight sum, kept beside the weights, takes the offset back off
//! each block's sum. Two kernels read that layout, rows in parallel:
//! - AVX-512 VNNI (`vpdpbusd` on 512 bits): a block of 8 rows and 16 columns;
//! - AVX-VNNI, its 256-bit form on the laptop chips that lack AVX-512 (Intel since Alder Lake,
//!   AMD since Zen 5): a block of 4 rows and 8 columns, half a panel.
//!
//! AVX2 without VNNI has no byte product faster than f32's fused multiply-adds: `vpmaddubsw`
//! saturates, and an exact kernel built on it (each product as `|q|` times the weight with
//! `q`'s sign) ran `MiniLM` at 0.96 × gemm's f32 (docs/PERFORMANCE.md, "Byte products without
//! VNNI"), so int8 is offered only where VNNI is.

// Only x86-64 has kernels for this product (elsewhere `Kernel::best` is `None`).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
// The quantiser is inlined into its AVX2 build.
#![allow(clippy::inline_always)]

use candle_core::Tensor;
use rayon::prelude::*;

use crate::kernels::PackedWeight;

/// Inputs that share one scale.
const BLOCK: usize = 32;
/// Inputs one lane of a byte dot product sums.
const GROUP: usize = 4;
/// Groups in a block.
const GROUPS: usize = BLOCK / GROUP;
/// Output columns in a panel: one 512-bit register of i32 sums.
const LANES: usize = 16;
/// Most rows one task takes, so that its bytes stay in the core's cache while every panel of
/// weights passes over them.
const TASK_ROWS: usize = 64;

/// The product's inner loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `vpdpbusd` on 512 bits.
    Avx512Vnni,
    /// `vpdpbusd` on 256 bits (VEX encoded).
    AvxVnni,
}

impl Kernel {
    /// The fastest kernel this CPU runs, if any.
    pub(crate) fn best() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            // Both kernels quantise their inputs with AVX2 and FMA.
            if !(has!("avx2") && has!("fma")) {
                return None;
            }
            if has!("avx512f")
                && has!("avx512bw")
                && has!("avx512vnni")
                && crate::cpu::allows(crate::cpu::Isa::Avx512)
            {
                return Some(Self::Avx512Vnni);
            }
            if has!("avxvnni") {
                return Some(Self::AvxVnni);
            }
        }
        None
    }

    /// What it runs on, as a person reads it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "AVX-512 VNNI",
            Self::AvxVnni => "AVX-VNNI",
        }
    }

    /// Input rows a block computes side by side.
    fn block_rows(self) -> usize {
        match self {
            Self::Avx512Vnni => 8,
            Self::AvxVnni => 4,
        }
    }
}

/// True where the CPU runs the int8 product.
pub(crate) fn available() -> bool {
    Kernel::best().is_some()
}

/// A weight matrix `[outputs, inputs]` in int8 blocks, packed for [`Int8Weights::product`].
#[derive(Debug)]
pub(crate) struct Int8Weights {
    outputs: usize,
    inputs: usize,
    /// Blocks in a row of inputs (the last one padded with zeros).
    blocks: usize,
    /// Panel `p`, block `b`, group `g`, lane `l`, byte `j`: weight `[16p + l, 32b + 4g + j]`
    /// over its block's scale (zero past the matrix), at `(((p · blocks + b) · 8 + g) · 16 + l) · 4 + j`.
    panels: Vec<i8>,
    /// Panel `p`, block `b`, lane `l`: that column's scale for the block, at `(p · blocks + b) · 16 + l`.
    scales: Vec<f32>,
    /// Indexed as `scales`: 128 × the sum of the block's quantised weights, which the inputs'
    /// offset adds to each block's sum.
    offsets: Vec<i32>,
}

impl Int8Weights {
    /// Quantises `weight` (`[outputs, inputs]` f32, as a linear layer stores it) into panels.
    pub(crate) fn new(weight: &Tensor) -> candle_core::Result<Self> {
        let (outputs, inputs) = weight.dims2()?;
        let rows = weight.to_vec2::<f32>()?;
        let blocks = inputs.div_ceil(BLOCK);
        let panel_count = outputs.div_ceil(LANES);
        let mut panels = vec![0i8; panel_count * blocks * BLOCK * LANES];
        let mut scales = vec![0f32; panel_count * blocks * LANES];
        let mut offsets = vec![0i32; scales.len()];
        let mut quantised = [0i8; BLOCK];
        for (output, row) in rows.iter().enumerate() {
            let (panel, lane) = (output / LANES, output % LANES);
            for (block, values) in row.chunks(BLOCK).enumerate() {
                let scale = quantise(values, &mut quantised);
                let at = (panel * blocks + block) * LANES + lane;
                scales[at] = scale;
                offsets[at] = 128 * quantised.iter().map(|&q| i32::from(q)).sum::<i32>();
                for (input, &q) in quantised.iter().enumerate().take(values.len()) {
                    let (group, byte) = (input / GROUP, input % GROUP);
                    let place =
                        (((panel * blocks + block) * GROUPS + group) * LANES + lane) * GROUP + byte;
                    panels[place] = q;
                }
            }
        }
        Ok(Self {
            outputs,
            inputs,
            blocks,
            panels,
            scales,
            offsets,
        })
    }

    /// The product on plain rows; `xs` holds `rows · inputs` values.
    fn product_rows(&self, xs: &[f32], rows: usize, kernel: Kernel) -> Vec<f32> {
        assert_eq!(xs.len(), rows * self.inputs, "checked by the caller");
        let block_rows = kernel.block_rows();
        let padded_rows = rows.div_ceil(block_rows) * block_rows;
        let row_bytes = self.blocks * BLOCK;
        // Padding rows and the padding of the last block quantise zeros: byte 128, scale 0.
        let mut bytes = vec![128u8; padded_rows * row_bytes];
        let mut input_scales = vec![0f32; padded_rows * self.blocks];
        bytes
            .par_chunks_mut(row_bytes)
            .zip(input_scales.par_chunks_mut(self.blocks))
            .zip(xs.par_chunks(self.inputs))
            .for_each(|((bytes, scales), row)| quantise_row_fast(row, bytes, scales));
        let mut out = vec![0f32; rows * self.outputs];
        let task_rows = crate::kernels::product_task_rows(rows, block_rows, TASK_ROWS);
        out.par_chunks_mut(task_rows * self.outputs)
            .enumerate()
            .for_each(|(task, out)| {
                let first = task * task_rows;
                let rows = out.len() / self.outputs;
                let padded = rows.div_ceil(block_rows) * block_rows;
                let inputs = Inputs {
                    bytes: &bytes[first * row_bytes..(first + padded) * row_bytes],
                    scales: &input_scales[first * self.blocks..(first + padded) * self.blocks],
                    blocks: self.blocks,
                };
                self.task(kernel, &inputs, out);
            });
        out
    }

    /// One task's rows, `inputs` whole blocks of rows, into `out` (`[rows, outputs]`, the rows
    /// that exist).
    fn task(&self, kernel: Kernel, inputs: &Inputs<'_>, out: &mut [f32]) {
        let rows = out.len() / self.outputs;
        let block_rows = kernel.block_rows();
        let columns_per_step = match kernel {
            Kernel::Avx512Vnni => LANES,
            Kernel::AvxVnni => LANES / 2,
        };
        let panel_bytes = self.blocks * BLOCK * LANES;
        let panel_scales = self.blocks * LANES;
        for first_column in (0..self.outputs).step_by(columns_per_step) {
            let panel = first_column / LANES;
            let weights = Panel {
                bytes: &self.panels[panel * panel_bytes..][..panel_bytes],
                scales: &self.scales[panel * panel_scales..][..panel_scales],
                offsets: &self.offsets[panel * panel_scales..][..panel_scales],
                half: (first_column % LANES) / (LANES / 2),
            };
            let columns = (self.outputs - first_column).min(columns_per_step);
            for first_row in (0..rows).step_by(block_rows) {
                let block = inputs.rows(first_row, block_rows);
                let mut sums = [[0f32; LANES]; 8];
                kernel_block(kernel, &block, &weights, &mut sums);
                for (r, sums) in sums
                    .iter()
                    .enumerate()
                    .take((rows - first_row).min(block_rows))
                {
                    let at = (first_row + r) * self.outputs + first_column;
                    out[at..at + columns].copy_from_slice(&sums[..columns]);
                }
            }
        }
    }
}

/// Quantised input rows: `bytes` (`q + 128`, `blocks · 32` a row) and one scale per row and block.
struct Inputs<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
    blocks: usize,
}

impl<'a> Inputs<'a> {
    /// `count` rows from `first`.
    fn rows(&self, first: usize, count: usize) -> Inputs<'a> {
        let row_bytes = self.blocks * BLOCK;
        Inputs {
            bytes: &self.bytes[first * row_bytes..(first + count) * row_bytes],
            scales: &self.scales[first * self.blocks..(first + count) * self.blocks],
            blocks: self.blocks,
        }
    }
}

/// One panel of weights (`blocks` blocks of 16 columns) and, for the 256-bit kernel, which
/// half of its columns a step reads.
struct Panel<'a> {
    bytes: &'a [i8],
    scales: &'a [f32],
    offsets: &'a [i32],
    half: usize,
}

/// The sums of one block of rows against one step of columns, into `sums[row][..columns]`.
fn kernel_block(
    kernel: Kernel,
    inputs: &Inputs<'_>,
    weights: &Panel<'_>,
    sums: &mut [[f32; LANES]; 8],
) {
    let rows = kernel.block_rows();
    assert_eq!(inputs.bytes.len(), rows * inputs.blocks * BLOCK);
    assert_eq!(inputs.scales.len(), rows * inputs.blocks);
    assert_eq!(weights.bytes.len(), inputs.blocks * BLOCK * LANES);
    assert_eq!(weights.scales.len(), inputs.blocks * LANES);
    assert_eq!(weights.offsets.len(), inputs.blocks * LANES);
    assert!(weights.half < 2);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the kernel came from `Kernel::best`, so the CPU has its features; the lengths
    // were checked above.
    #[allow(unsafe_code)]
    unsafe {
        match kernel {
            Kernel::Avx512Vnni => x86::block_512(inputs, weights, sums),
            Kernel::AvxVnni => x86::block_256(inputs, weights, sums),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = sums;
        unreachable!("the int8 kernels exist only on x86-64")
    }
}

impl PackedWeight for Int8Weights {
    const NAME: &'static str = "int8-product";

    fn dims(&self) -> (usize, usize) {
        (self.outputs, self.inputs)
    }

    fn product_of_rows(&self, xs: &[f32], rows: usize) -> candle_core::Result<Vec<f32>> {
        let Some(kernel) = Kernel::best() else {
            candle_core::bail!("this CPU has no VNNI byte products for the int8 product");
        };
        Ok(self.product_rows(xs, rows, kernel))
    }
}

/// `values` (at most a block) as int8 over the returned scale, into the start of `to` and
/// zeros after: the scale maps the largest magnitude to 127, and each value rounds to the
/// nearest step (ties to even, the vector units' rounding).
#[inline(always)]
fn quantise(values: &[f32], to: &mut [i8; BLOCK]) -> f32 {
    let largest = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    to.fill(0);
    if largest == 0.0 || !largest.is_finite() {
        return 0.0;
    }
    let scale = largest / 127.0;
    let inverse = 127.0 / largest;
    for (q, &v) in to.iter_mut().zip(values) {
        *q = (v * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// [`quantise_row`] compiled for AVX2 and FMA, which both kernels' CPUs have: the inputs are
/// quantised on every call, and the portable build's scalar rounding cost as much as the product.
fn quantise_row_fast(row: &[f32], bytes: &mut [u8], scales: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        assert!(
            available(),
            "the int8 product runs only where a kernel exists"
        );
        // SAFETY: every kernel requires AVX2 and FMA (`Kernel::best`), as just asserted.
        #[allow(unsafe_code)]
        unsafe {
            x86::quantise_row(row, bytes, scales);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    quantise_row(row, bytes, scales);
}

/// One row of inputs into its bytes (`q + 128`) and block scales.
#[inline(always)]
fn quantise_row(row: &[f32], bytes: &mut [u8], scales: &mut [f32]) {
    let mut quantised = [0i8; BLOCK];
    for ((values, bytes), scale) in row
        .chunks(BLOCK)
        .zip(bytes.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
    {
        *scale = quantise(values, &mut quantised);
        for (byte, &q) in bytes.iter_mut().zip(&quantised) {
            *byte = (i16::from(q) + 128) as u8;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256, __m256i, __m512, __m512i, _mm256_cvtepi32_ps, _mm256_dpbusd_avx_epi32,
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_mul_ps, _mm256_set1_epi32,
        _mm256_set1_ps, _mm256_setzero_ps, _mm256_setzero_si256, _mm256_storeu_ps,
        _mm256_sub_epi32, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
        _mm512_loadu_ps, _mm512_loadu_si512, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps,
        _mm512_setzero_ps, _mm512_setzero_si512, _mm512_storeu_ps, _mm512_sub_epi32,
    };

    use super::{BLOCK, GROUP, GROUPS, Inputs, LANES, Panel};

    /// [`super::quantise_row`] for AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn quantise_row(row: &[f32], bytes: &mut [u8], scales: &mut [f32]) {
        super::quantise_row(row, bytes, scales);
    }

    /// 8 rows × 16 columns through 512-bit `vpdpbusd`; the caller checked the lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn block_512(
        inputs: &Inputs<'_>,
        weights: &Panel<'_>,
        out: &mut [[f32; LANES]; 8],
    ) {
        const ROWS: usize = 8;
        let blocks = inputs.blocks;
        let row_bytes = blocks * BLOCK;
        let bytes = inputs.bytes.as_ptr();
        let panel = weights.bytes.as_ptr();
        let mut sums: [__m512; ROWS] = [_mm512_setzero_ps(); ROWS];
        for block in 0..blocks {
            let mut dots: [__m512i; ROWS] = [_mm512_setzero_si512(); ROWS];
            for group in 0..GROUPS {
                // SAFETY: the panel holds `blocks` blocks of 8 groups of 16 lanes × 4 bytes,
                // and every row `blocks · 32` bytes (checked by the caller); loads unaligned.
                unsafe {
                    let column = _mm512_loadu_si512(
                        panel.add((block * GROUPS + group) * LANES * GROUP).cast(),
                    );
                    for (row, dot) in dots.iter_mut().enumerate() {
                        let four = bytes
                            .add(row * row_bytes + block * BLOCK + group * GROUP)
                            .cast::<i32>()
                            .read_unaligned();
                        *dot = _mm512_dpbusd_epi32(*dot, _mm512_set1_epi32(four), column);
                    }
                }
            }
            // SAFETY: as above, for the block's 16 scales and offsets.
            unsafe {
                let offset = _mm512_loadu_si512(weights.offsets.as_ptr().add(block * LANES).cast());
                let scale = _mm512_loadu_ps(weights.scales.as_ptr().add(block * LANES));
                for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                    let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(*dot, offset));
                    let both = _mm512_mul_ps(
                        scale,
                        _mm512_set1_ps(*inputs.scales.get_unchecked(row * blocks + block)),
                    );
                    *sum = _mm512_fmadd_ps(exact, both, *sum);
                }
            }
        }
        for (out, sum) in out.iter_mut().zip(&sums) {
            // SAFETY: each row of `out` holds 16 f32.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), *sum) };
        }
    }

    /// 4 rows × 8 columns (half a panel) through 256-bit `vpdpbusd`; the caller checked the
    /// lengths.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn block_256(
        inputs: &Inputs<'_>,
        weights: &Panel<'_>,
        out: &mut [[f32; LANES]; 8],
    ) {
        const ROWS: usize = 4;
        const HALF: usize = LANES / 2;
        let blocks = inputs.blocks;
        let row_bytes = blocks * BLOCK;
        let bytes = inputs.bytes.as_ptr();
        let lanes = weights.half * HALF;
        let panel = weights.bytes.as_ptr();
        let mut sums: [__m256; ROWS] = [_mm256_setzero_ps(); ROWS];
        for block in 0..blocks {
            let mut dots: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
            for group in 0..GROUPS {
                // SAFETY: as in `block_512`; the half's 8 lanes lie inside the group's 16.
                unsafe {
                    let column = _mm256_loadu_si256(
                        panel
                            .add(((block * GROUPS + group) * LANES + lanes) * GROUP)
                            .cast(),
                    );
                    for (row, dot) in dots.iter_mut().enumerate() {
                        let four = bytes
                            .add(row * row_bytes + block * BLOCK + group * GROUP)
                            .cast::<i32>()
                            .read_unaligned();
                        *dot = _mm256_dpbusd_avx_epi32(*dot, _mm256_set1_epi32(four), column);
                    }
                }
            }
            // SAFETY: as above, for the half's 8 scales and offsets.
            unsafe {
                let at = block * LANES + lanes;
                let offset = _mm256_loadu_si256(weights.offsets.as_ptr().add(at).cast());
                let scale = _mm256_loadu_ps(weights.scales.as_ptr().add(at));
                for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                    let exact = _mm256_cvtepi32_ps(_mm256_sub_epi32(*dot, offset));
                    let both = _mm256_mul_ps(
                        scale,
                        _mm256_set1_ps(*inputs.scales.get_unchecked(row * blocks + block)),
                    );
                    *sum = _mm256_fmadd_ps(exact, both, *sum);
                }
            }
        }
        for (out, sum) in out.iter_mut().zip(&sums) {
            // SAFETY: each row of `out` holds 16 f32, of which the first 8 are written.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), *sum) };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use candle_core::{Device, Tensor};

    use super::{BLOCK, Int8Weights, Kernel, quantise};
    use crate::kernels::tests::spread_values;

    /// Every kernel this CPU runs (the 512-bit one implies the CPU may also run the 256-bit one).
    fn kernels() -> Vec<Kernel> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let mut kernels = Vec::new();
            if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
                kernels.push(Kernel::Avx512Vnni);
            }
            if has!("avx2") && has!("fma") && has!("avxvnni") {
                kernels.push(Kernel::AvxVnni);
            }
            kernels
        }
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }

    /// Rows of `width` values as the product sees them: quantised block by block, scaled back.
    fn dequantised(values: &[f32], width: usize) -> Vec<f64> {
        values
            .chunks(width)
            .flat_map(|row| row.chunks(BLOCK))
            .flat_map(|block| {
                let mut q = [0i8; BLOCK];
                let scale = quantise(block, &mut q);
                q.into_iter()
                    .take(block.len())
                    .map(move |q| f64::from(q) * f64::from(scale))
            })
            .collect()
    }

    #[test]
    fn quantising_keeps_each_value_within_half_a_step() {
        let values: Vec<f32> = (0..40).map(|i| (i as f32 - 17.3) * 0.37).collect();
        for (block, back) in values
            .chunks(BLOCK)
            .zip(dequantised(&values, 40).chunks(BLOCK))
        {
            let step = f64::from(block.iter().fold(0f32, |m, v| m.max(v.abs()))) / 127.0;
            for (&v, &b) in block.iter().zip(back) {
                assert!(
                    (f64::from(v) - b).abs() <= step / 2.0 + 1e-9,
                    "{v} came back as {b}"
                );
            }
        }
        let mut q = [1i8; BLOCK];
        assert_eq!(quantise(&[0.0; 3], &mut q).to_bits(), 0);
        assert_eq!(q, [0; BLOCK]);
    }

    /// Against the same product in f64 of the quantised values (the kernels' arithmetic is exact
    /// within a block), and against the f32 product within the quantisation's error, for shapes
    /// with partial panels, halves, row blocks and scale blocks.
    #[test]
    fn product_matches_the_quantised_values() -> candle_core::Result<()> {
        let kernels = kernels();
        // Straight to stderr: the test harness hides what a passing test prints with eprintln!
        // unless run with --nocapture, and a skip should be seen.
        let mut stderr = std::io::stderr();
        if kernels.is_empty() {
            let _ = writeln!(
                stderr,
                "int8::tests::product_matches_the_quantised_values skipped: this CPU has neither \
                 AVX-512 VNNI nor AVX-VNNI"
            );
            return Ok(());
        }
        if let [only] = kernels[..] {
            let _ = writeln!(
                stderr,
                "int8::tests::product_matches_the_quantised_values checked the {only:?} kernel \
                 only: this CPU has one of AVX-512 VNNI and AVX-VNNI"
            );
        }
        for kernel in kernels {
            for (rows, inputs, outputs) in [
                (1, 1, 1),
                (3, 7, 5),
                (13, 64, 33),
                (70, 129, 50),
                (9, 384, 1536),
                (130, 1536, 24),
            ] {
                let xs = spread_values(rows * inputs, 101);
                let ws = spread_values(outputs * inputs, 97);
                let weight = Tensor::from_vec(ws.clone(), (outputs, inputs), &Device::Cpu)?;
                let got = Int8Weights::new(&weight)?.product_rows(&xs, rows, kernel);
                let (qx, qw) = (dequantised(&xs, inputs), dequantised(&ws, inputs));
                for r in 0..rows {
                    for o in 0..outputs {
                        let x = r * inputs..(r + 1) * inputs;
                        let w = o * inputs..(o + 1) * inputs;
                        let want: f64 = qx[x.clone()]
                            .iter()
                            .zip(&qw[w.clone()])
                            .map(|(a, b)| a * b)
                            .sum();
                        let exact: f64 = xs[x]
                            .iter()
                            .zip(&ws[w])
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum();
                        let got = f64::from(got[r * outputs + o]);
                        assert!(
                            (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                            "{kernel:?} [{r}, {o}] of {rows}×{inputs}×{outputs}: {got} against {want}"
                        );
                        // Each product's error is below a step of either side: 1/254 of 0.5.
                        let bound = inputs as f64 * 0.5 * 0.5 / 127.0;
                        assert!(
                            (got - exact).abs() < bound,
                            "{kernel:?} [{r}, {o}]: {got} against the f32 product {exact}"
                        );
                    }
                }
            }
        }
        Ok(())
    }
}
