//! CPU kernels for the steps that candle runs as scalar or many-pass code: GELU (erf), the
//! attention softmax, and the bias, residual and layer norm that close each half of a layer;
//! and, for the chat models, the gated feed-forward's activations. A profile of
//! `all-MiniLM-L6-v2` put a fifth of the time in libm's `erff` and `expf` and another tenth in
//! separate passes (with their allocations) for biases, residuals and norms
//! (docs/PERFORMANCE.md). These kernels work in place on f32, rows in parallel, with `exp` and
//! `erf` as polynomials that the compiler vectorises; pulp compiles each loop for the widest
//! SIMD the CPU has (AVX-512, AVX2 or plain SSE), chosen at run time, so no `unsafe` is needed.

// pulp's run-time dispatch needs the kernels inlined into its per-instruction-set functions.
#![allow(clippy::inline_always)]

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, InplaceOp2, InplaceOp3, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Rows one task of a row-wise kernel takes at least, so that narrow rows do not drown in
/// task overhead.
const MIN_TASK_ELEMENTS: usize = 16 * 1024;

/// `x ← x + bias` in place on `[rows, width]` f32, `bias` `[width]`: a product's bias added into
/// the product's own storage, where candle's `broadcast_add` fills a new tensor. The same floats.
pub(crate) fn bias_in_place(xs: &Tensor, bias: &Tensor) -> candle_core::Result<()> {
    xs.inplace_op2(bias, &AddBias { gelu: false })
}

/// `x ← gelu(x + bias)` in place on `[rows, width]` f32, `bias` `[width]`: the intermediate
/// layer's bias and GELU (the exact, erf form BERT uses) in one pass.
pub(crate) fn bias_gelu_in_place(xs: &Tensor, bias: &Tensor) -> candle_core::Result<()> {
    xs.inplace_op2(bias, &AddBias { gelu: true })
}

/// `x ← layer_norm(x + bias + residual)` row by row, in place on `[rows, width]` f32;
/// `params` `[3, width]` holds the bias of the product that made `x`, then the norm's scale and
/// shift.
pub(crate) fn add_norm_in_place(
    xs: &Tensor,
    residual: &Tensor,
    params: &Tensor,
    eps: f32,
) -> candle_core::Result<()> {
    if xs.dims() != residual.dims() {
        candle_core::bail!("residual {:?} for {:?}", residual.dims(), xs.dims());
    }
    xs.inplace_op3(residual, params, &AddNorm { eps })
}

/// Softmax of each row of `rows` (`width` values a row), in place, with an `exp` that
/// vectorises.
pub fn softmax_rows(rows: &mut [f32], width: usize) {
    let arch = crate::cpu::arch();
    for xs in rows.chunks_exact_mut(width.max(1)) {
        arch.dispatch(SoftmaxRow { xs });
    }
}

/// Softmax of `xs` in place, as [`softmax_rows`] takes a row; returns what it divided by as a
/// logarithm, `log Σ exp(x)` over the values given, by which softmaxes of a row's parts merge
/// into the row's.
pub fn softmax_in_place(xs: &mut [f32]) -> f32 {
    crate::cpu::arch().dispatch(SoftmaxRow { xs })
}

/// The activation of a gated feed-forward layer, which multiplies `act(gate)` by `up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `x · σ(x)` (Llama, Qwen, Mistral).
    Silu,
    /// GELU in its tanh form, `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))` (Gemma).
    GeluTanh,
}

/// `gate ← act(gate) · up`, element by element (`up` as long as `gate`), with an `exp` that
/// vectorises. Both activations are `x · σ(k(x))`, since `(1 + tanh(u)) / 2 = σ(2u)`: one
/// division, and no cancellation where `tanh` is near −1.
///
/// # Panics
/// If `up` is not as long as `gate`.
pub fn gate_in_place(gate: &mut [f32], up: &[f32], activation: Gate) {
    assert_eq!(gate.len(), up.len(), "a gate for every value");
    crate::cpu::arch().dispatch(GateValues {
        gate,
        up,
        activation,
    });
}

/// Rows per parallel task for rows of `width`.
fn rows_per_task(width: usize) -> usize {
    MIN_TASK_ELEMENTS.div_ceil(width.max(1))
}

/// A bias added to every row, and GELU after it where `gelu` says.
struct AddBias {
    gelu: bool,
}

impl InplaceOp2 for AddBias {
    fn name(&self) -> &'static str {
        if self.gelu {
            "bias-gelu-in-place"
        } else {
            "bias-in-place"
        }
    }

    fn cpu_fwd(
        &self,
        storage: &mut CpuStorage,
        layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> candle_core::Result<()> {
        let bias = contiguous(bias, bias_layout, self.name())?;
        let data = contiguous_mut(storage, layout, self.name())?;
        let width = bias.len();
        if width == 0 || data.len() % width != 0 {
            candle_core::bail!("bias of {width} for {} values", data.len());
        }
        let gelu = self.gelu;
        data.par_chunks_mut(width * rows_per_task(width))
            .for_each(|rows| crate::cpu::arch().dispatch(BiasRows { rows, bias, gelu }));
        Ok(())
    }
}

struct AddNorm {
    eps: f32,
}

impl InplaceOp3 for AddNorm {
    fn name(&self) -> &'static str {
        "add-norm-in-place"
    }

    fn cpu_fwd(
        &self,
        storage: &mut CpuStorage,
        layout: &Layout,
        residual: &CpuStorage,
        residual_layout: &Layout,
        params: &CpuStorage,
        params_layout: &Layout,
    ) -> candle_core::Result<()> {
        let residual = contiguous(residual, residual_layout, self.name())?;
        let params = contiguous(params, params_layout, self.name())?;
        let data = contiguous_mut(storage, layout, self.name())?;
        let width = params.len() / 3;
        if width == 0 || params.len() != 3 * width || data.len() % width != 0 {
            candle_core::bail!(
                "norm parameters of {} for {} values",
                params.len(),
                data.len()
            );
        }
        let (bias, rest) = params.split_at(width);
        let (scale, shift) = rest.split_at(width);
        let task = width * rows_per_task(width);
        data.par_chunks_mut(task)
            .zip(residual.par_chunks(task))
            .for_each(|(rows, residual)| {
                crate::cpu::arch().dispatch(AddNormRows {
                    rows,
                    residual,
                    bias,
                    scale,
                    shift,
                    eps: self.eps,
                });
            });
        Ok(())
    }
}

fn contiguous_mut<'a>(
    storage: &'a mut CpuStorage,
    layout: &Layout,
    op: &'static str,
) -> candle_core::Result<&'a mut [f32]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op} needs contiguous tensors");
    };
    match storage {
        CpuStorage::F32(data) => Ok(&mut data[start..end]),
        other => Err(candle_core::Error::UnsupportedDTypeForOp(other.dtype(), op)),
    }
}

/// Rows one task of a packed product takes: enough tasks for every thread even for a short
/// query, whole blocks of `block_rows` each, at most `most_rows` (rounded down to whole blocks).
pub(crate) fn product_task_rows(rows: usize, block_rows: usize, most_rows: usize) -> usize {
    let per_thread = rows.div_ceil(rayon::current_num_threads());
    per_thread
        .div_ceil(block_rows)
        .clamp(1, (most_rows / block_rows).max(1))
        * block_rows
}

/// A linear layer's weight `[outputs, inputs]`, laid out for a CPU product of our own.
pub(crate) trait PackedWeight: Sync + Sized {
    /// The product's name in candle's errors.
    const NAME: &'static str;

    /// `(outputs, inputs)`.
    fn dims(&self) -> (usize, usize);

    /// `xs·Wᵀ` on `rows` plain rows (`xs` holds `rows · inputs` values), on the fastest kernel
    /// this CPU runs: `rows · outputs` values.
    fn product_of_rows(&self, xs: &[f32], rows: usize) -> candle_core::Result<Vec<f32>>;

    /// `xs·Wᵀ` for `xs` `[rows, inputs]` f32 on the CPU: `[rows, outputs]` f32.
    fn product(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        xs.apply_op1_no_bwd(&PackedProduct(self))
    }
}

/// [`PackedWeight::product`] as a candle op.
struct PackedProduct<'a, W>(&'a W);

impl<W: PackedWeight> CustomOp1 for PackedProduct<'_, W> {
    fn name(&self) -> &'static str {
        W::NAME
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (outputs, inputs) = self.0.dims();
        let (data, rows) = product_inputs(storage, layout, (outputs, inputs), W::NAME)?;
        let out = self.0.product_of_rows(data, rows)?;
        Ok((CpuStorage::F32(out), Shape::from((rows, outputs))))
    }
}

/// The rows of a linear layer's input `[rows, inputs]` f32, contiguous on the CPU, for a packed
/// product of a `[outputs, inputs]` weight: the values and the row count.
pub(crate) fn product_inputs<'a>(
    storage: &'a CpuStorage,
    layout: &Layout,
    (outputs, inputs): (usize, usize),
    op: &'static str,
) -> candle_core::Result<(&'a [f32], usize)> {
    let (rows, given) = layout.shape().dims2()?;
    if given != inputs {
        candle_core::bail!("{given} inputs for a [{outputs}, {inputs}] weight");
    }
    Ok((contiguous(storage, layout, op)?, rows))
}

pub(crate) fn contiguous<'a>(
    storage: &'a CpuStorage,
    layout: &Layout,
    op: &'static str,
) -> candle_core::Result<&'a [f32]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op} needs contiguous tensors");
    };
    match storage {
        CpuStorage::F32(data) => Ok(&data[start..end]),
        other => Err(candle_core::Error::UnsupportedDTypeForOp(other.dtype(), op)),
    }
}

// pulp compiles `with_simd` once per instruction set and calls the one the CPU supports; the
// loops inside must be inlined into it (hence `inline(always)` down to `exp`) to be vectorised
// with that set. A closure passed to `dispatch` is not reliably inlined, so these are structs.

/// `x + bias`, or `gelu(x + bias)`, over whole rows.
struct BiasRows<'a> {
    rows: &'a mut [f32],
    bias: &'a [f32],
    gelu: bool,
}

impl pulp::WithSimd for BiasRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        // One loop for each case, so that neither branches per value.
        let rows = self.rows.chunks_exact_mut(self.bias.len());
        if self.gelu {
            for row in rows {
                for (x, b) in row.iter_mut().zip(self.bias) {
                    *x = gelu(*x + b);
                }
            }
        } else {
            for row in rows {
                for (x, b) in row.iter_mut().zip(self.bias) {
                    *x += b;
                }
            }
        }
    }
}

/// `act(gate) · up` over a run of values.
struct GateValues<'a> {
    gate: &'a mut [f32],
    up: &'a [f32],
    activation: Gate,
}

impl pulp::WithSimd for GateValues<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        // √(2/π), doubled: σ(2u) for GELU's u.
        const GELU_SCALE: f32 = 2.0 * 0.797_884_6;
        match self.activation {
            Gate::Silu => gate_values(self.gate, self.up, |x| x),
            Gate::GeluTanh => gate_values(self.gate, self.up, |x| {
                GELU_SCALE * (0.044_715 * x * x).mul_add(x, x)
            }),
        }
    }
}

/// `gate ← gate · σ(k(gate)) · up`, one loop for each `k`, so that each vectorises.
#[inline(always)]
fn gate_values(gate: &mut [f32], up: &[f32], k: impl Fn(f32) -> f32) {
    for (x, up) in gate.iter_mut().zip(up) {
        *x = *x / (1.0 + exp(-k(*x))) * up;
    }
}

/// `layer_norm(x + bias + residual)` over whole rows.
struct AddNormRows<'a> {
    rows: &'a mut [f32],
    residual: &'a [f32],
    bias: &'a [f32],
    scale: &'a [f32],
    shift: &'a [f32],
    eps: f32,
}

impl pulp::WithSimd for AddNormRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let width = self.bias.len();
        for (row, residual) in self
            .rows
            .chunks_exact_mut(width)
            .zip(self.residual.chunks_exact(width))
        {
            for ((x, r), b) in row.iter_mut().zip(residual).zip(self.bias) {
                *x += b + r;
            }
            let mean = lane_sum(row, |x| x) / width as f32;
            // Two passes: the variance of centred values, not E[x²] − mean², which cancels.
            let variance = lane_sum(row, |x| (x - mean) * (x - mean)) / width as f32;
            let inverse = (variance + self.eps).sqrt().recip();
            for ((x, scale), shift) in row.iter_mut().zip(self.scale).zip(self.shift) {
                *x = ((*x - mean) * inverse).mul_add(*scale, *shift);
            }
        }
    }
}

/// `Σ f(x)` in 16 lanes of partial sums, so that it vectorises (the compiler keeps the order
/// of float additions, and one accumulator is one long dependency chain).
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut sums = [0.0f32; 16];
    let mut chunks = xs.chunks_exact(16);
    for chunk in &mut chunks {
        for (x, sum) in chunk.iter().zip(&mut sums) {
            *sum += f(*x);
        }
    }
    chunks.remainder().iter().map(|&x| f(x)).sum::<f32>() + sums.iter().sum::<f32>()
}

/// `softmax(xs)` in place, returning `log Σ exp(x)`.
struct SoftmaxRow<'a> {
    xs: &'a mut [f32],
}

impl pulp::WithSimd for SoftmaxRow<'_> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> f32 {
        softmax_row(self.xs)
    }
}

/// `softmax(xs)` in place; returns `log Σ exp(x)`.
#[inline(always)]
fn softmax_row(xs: &mut [f32]) -> f32 {
    let max = xs.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    // Lanes of partial sums, so that the sum vectorises (float addition is not reordered).
    let mut sums = [0.0f32; 16];
    let mut chunks = xs.chunks_exact_mut(16);
    for chunk in &mut chunks {
        for (x, sum) in chunk.iter_mut().zip(&mut sums) {
            *x = exp(*x - max);
            *sum += *x;
        }
    }
    let mut total: f32 = 0.0;
    for x in chunks.into_remainder() {
        *x = exp(*x - max);
        total += *x;
    }
    total += sums.iter().sum::<f32>();
    let inverse = total.recip();
    for x in xs {
        *x *= inverse;
    }
    max + total.ln()
}

/// 1.5 · 2^23: adding and removing it rounds to the nearest integer, and the integer stays in
/// the low bits of the sum, which gives it without a float-to-int conversion (a saturating
/// cast, which the compiler does not vectorise).
const ROUND: f32 = 12_582_912.0;

/// `e^x` to within about 2 ulp for the range softmax and erf need, as arithmetic that
/// vectorises: `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, a degree-6 polynomial for `e^r`, and
/// `2^n` built in the exponent bits.
#[inline(always)]
fn exp(x: f32) -> f32 {
    // Below -87.3 the result is under f32's normal range: flush it to (almost) zero.
    let x = x.clamp(-87.3, 88.3);
    let shifted = x.mul_add(std::f32::consts::LOG2_E, ROUND);
    let n = shifted - ROUND;
    // ln 2 split in two so that n · ln 2 is exact to f32 precision.
    let r = n.mul_add(-0.693_145_75, x);
    let r = n.mul_add(-1.428_606_8e-6, r);
    let p: f32 = 1.0 / 720.0;
    let p = p.mul_add(r, 1.0 / 120.0);
    let p = p.mul_add(r, 1.0 / 24.0);
    let p = p.mul_add(r, 1.0 / 6.0);
    let p = p.mul_add(r, 0.5);
    let p = p.mul_add(r, 1.0);
    let p = p.mul_add(r, 1.0);
    let two_to_n = f32::from_bits(
        shifted
            .to_bits()
            .wrapping_sub(ROUND.to_bits())
            .wrapping_add(127)
            << 23,
    );
    p * two_to_n
}

/// `erf(x)` with absolute error under 2·10⁻⁷ (Abramowitz and Stegun 7.1.26, error 1.5·10⁻⁷,
/// plus rounding).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let magnitude = x.abs();
    let t = 1.0 / 0.327_591_1f32.mul_add(magnitude, 1.0);
    let poly = 1.061_405_4f32;
    let poly = poly.mul_add(t, -1.453_152_1);
    let poly = poly.mul_add(t, 1.421_413_7);
    let poly = poly.mul_add(t, -0.284_496_73);
    let poly = poly.mul_add(t, 0.254_829_6);
    (1.0 - poly * t * exp(-magnitude * magnitude)).copysign(x)
}

/// GELU as BERT defines it: `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
pub(crate) mod tests {
    use candle_core::{D, Device};

    use super::*;

    /// `n` values in [-0.5, 0.5), `i · 7919 mod scale` over `scale`: inputs and weights for the
    /// packed products' tests, the same on every machine, with no run of equal values.
    pub(crate) fn spread_values(n: usize, scale: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (i * 7919 % scale) as f32 / scale as f32 - 0.5)
            .collect()
    }

    pub(crate) fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar()
            .unwrap()
    }

    /// Values from -8 to 8 with every kind of fraction, and the extremes.
    fn samples() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..40_001)
            .map(|i| (i as f32 - 20_000.0) / 2_500.0)
            .collect();
        xs.extend([-100.0, -30.0, 30.0, 100.0, 0.0, -0.0, 1e-20, -1e-20]);
        xs
    }

    #[test]
    fn exp_matches_the_standard_library() {
        for x in samples()
            .into_iter()
            .chain((-87..88).map(|i| i as f32 + 0.37))
        {
            let expected = x.exp();
            let got = exp(x);
            if expected < f32::MIN_POSITIVE {
                assert!(got < 1e-37, "exp({x}) = {got}");
            } else if expected.is_infinite() {
                // Clamped: softmax and erf only ever ask for exp of x ≤ 0.
                assert!(got > 1e38, "exp({x}) = {got}");
            } else {
                assert!(
                    ((got - expected) / expected).abs() < 5e-7,
                    "exp({x}) = {got}, expected {expected}"
                );
            }
        }
    }

    /// Both gates against their definitions in f64 (GELU through `tanh` itself), each value
    /// times a factor of `up`.
    #[test]
    fn gates_match_their_definitions() {
        let xs = samples();
        let up: Vec<f32> = (0..xs.len()).map(|i| [1.0, -0.5, 3.0][i % 3]).collect();
        for activation in [Gate::Silu, Gate::GeluTanh] {
            let mut ours = xs.clone();
            gate_in_place(&mut ours, &up, activation);
            for ((&x, &up), &got) in xs.iter().zip(&up).zip(&ours) {
                let x64 = f64::from(x);
                let act = match activation {
                    Gate::Silu => x64 / (1.0 + (-x64).exp()),
                    Gate::GeluTanh => {
                        let u =
                            (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044_715 * x64.powi(3));
                        0.5 * x64 * (1.0 + u.tanh())
                    }
                };
                let expected = act * f64::from(up);
                assert!(
                    (f64::from(got) - expected).abs() <= 1e-6 * expected.abs().max(1.0),
                    "{activation:?}({x}) · {up} = {got}, expected {expected}"
                );
            }
        }
    }

    #[test]
    fn bias_gelu_matches_candles_scalar_path() {
        let width = 7;
        let xs = samples();
        let rows = xs.len() / width;
        let tensor = Tensor::new(&xs[..rows * width], &Device::Cpu)
            .unwrap()
            .reshape((rows, width))
            .unwrap();
        let bias = Tensor::new(&[0.5f32, -0.25, 0.0, 1.0, -2.0, 0.125, 3.0], &Device::Cpu).unwrap();
        let expected: Vec<Vec<f32>> = tensor
            .broadcast_add(&bias)
            .unwrap()
            .gelu_erf()
            .unwrap()
            .to_vec2()
            .unwrap();
        // A copy, so that the in-place kernel writes into its own storage.
        let ours = tensor.copy().unwrap();
        bias_gelu_in_place(&ours, &bias).unwrap();
        let ours: Vec<Vec<f32>> = ours.to_vec2().unwrap();
        for (a, b) in ours.iter().flatten().zip(expected.iter().flatten()) {
            assert!((a - b).abs() <= 3e-7 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn bias_in_place_equals_candles_broadcast_add_to_the_bit() {
        let (rows, width) = (1_000, 37);
        let device = &Device::Cpu;
        let xs = Tensor::randn(0f32, 3.0, (rows, width), device).unwrap();
        let bias = Tensor::randn(0f32, 1.0, width, device).unwrap();
        let expected: Vec<Vec<f32>> = xs.broadcast_add(&bias).unwrap().to_vec2().unwrap();
        let ours = xs.copy().unwrap();
        bias_in_place(&ours, &bias).unwrap();
        assert_eq!(ours.to_vec2::<f32>().unwrap(), expected);
        let wrong = Tensor::zeros(width + 1, candle_core::DType::F32, device).unwrap();
        assert!(
            bias_in_place(&ours, &wrong).is_err(),
            "a bias as wide as the rows"
        );
    }

    #[test]
    fn add_norm_matches_candles_layer_norm_of_the_sum() {
        let (rows, width) = (33, 384);
        let device = &Device::Cpu;
        let xs = Tensor::randn(0f32, 3.0, (rows, width), device).unwrap();
        let residual = Tensor::randn(1f32, 2.0, (rows, width), device).unwrap();
        let bias = Tensor::randn(0f32, 1.0, width, device).unwrap();
        let scale = Tensor::randn(1f32, 0.1, width, device).unwrap();
        let shift = Tensor::randn(0f32, 0.1, width, device).unwrap();
        let eps = 1e-12;
        let norm = candle_nn::LayerNorm::new(scale.clone(), shift.clone(), eps);
        let sum = (xs.broadcast_add(&bias).unwrap() + &residual).unwrap();
        let expected = candle_core::Module::forward(&norm, &sum).unwrap();
        let params = Tensor::stack(&[bias, scale, shift], 0).unwrap();
        let ours = xs.copy().unwrap();
        add_norm_in_place(&ours, &residual, &params, eps as f32).unwrap();
        let difference = max_difference(&ours, &expected);
        assert!(difference < 2e-5, "{difference}");
        assert!(add_norm_in_place(&xs, &residual.narrow(0, 0, 5).unwrap(), &params, 1e-5).is_err());
    }

    #[test]
    fn softmax_rows_match_candles_softmax() {
        let (rows, width) = (7, 37);
        let scores =
            (Tensor::randn(0f32, 4.0, (rows, width), &Device::Cpu).unwrap() * 3.0).unwrap();
        let expected = candle_nn::ops::softmax(&scores, D::Minus1).unwrap();
        let mut ours = scores.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        softmax_rows(&mut ours, width);
        let ours = Tensor::from_vec(ours, (rows, width), &Device::Cpu).unwrap();
        let difference = max_difference(&ours, &expected);
        assert!(difference < 1e-6, "{difference}");
    }

    #[test]
    fn a_softmax_returns_its_log_sum_of_exponentials() {
        let xs: Vec<f32> = samples().into_iter().map(|x| x * 3.0 + 40.0).collect();
        let exact = {
            let max = xs
                .iter()
                .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
            max + xs
                .iter()
                .map(|&x| (f64::from(x) - max).exp())
                .sum::<f64>()
                .ln()
        };
        let mut rows = xs.clone();
        softmax_rows(&mut rows, xs.len());
        let mut ours = xs.clone();
        let log_sum = softmax_in_place(&mut ours);
        assert_eq!(ours, rows);
        assert!(
            (f64::from(log_sum) - exact).abs() < 1e-5 * exact.abs(),
            "{log_sum} against {exact}"
        );
    }
}
