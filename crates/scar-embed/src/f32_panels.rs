//! `x·Wᵀ` in f32 on CPUs whose widest vectors are AVX2 with FMA: most laptops, where `auto` is
//! f32 and these products are most of the encoder's time.
//!
//! The weights are laid out once, at load, in panels of 16 output columns, each input's 16
//! weights side by side, so a call packs nothing: gemm, which candle calls, packs both operands
//! on every call. A block of 6 rows and one panel keeps its 12 sums of 8 lanes in registers
//! over a slice of up to 384 inputs (24 KiB of the panel, which stays in the core's first-level
//! cache while every block of a task's rows passes over it), reading each row's inputs
//! as broadcasts straight from the rows. The tasks split the rows in blocks and, where there
//! are fewer blocks than threads, the panels too.
//!
//! Each sum runs over the inputs in order, slice after slice, whatever the rows or threads, so
//! a row's floats do not depend on the rows computed with it. They differ from gemm's, which
//! orders its sums otherwise, by rounding alone.
//!
//! The panels can hold the weights in f16 instead (`precision f16`), converted to f32 by F16C
//! as they are loaded: the product reads half the bytes, which is what one question's
//! embedding waits on, while a batch's speed stays the same (docs/PERFORMANCE.md).

// Only x86-64 has the kernel for this product (elsewhere `preferred` is false).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::mem::MaybeUninit;

use candle_core::Tensor;
use rayon::prelude::*;

use crate::kernels::PackedWeight;

/// Output columns in a panel: two AVX registers of f32 sums.
const LANES: usize = 16;
/// Rows a block computes side by side: 12 registers of sums, with two for the panel's weights
/// and one for a broadcast input, of the 16 AVX2 has.
const BLOCK_ROWS: usize = 6;
/// Inputs in a slice: a slice of a panel is 24 KiB, in the 32 KiB first-level caches of the
/// laptop class. Slices of 256 ran MiniLM-L6 slower on a Zen 3, alternated with these.
const SLICE_INPUTS: usize = 384;
/// Rows in a task at most: 12 blocks, whose inputs (72 rows of one slice, 108 KiB) stay in the
/// core's second-level cache while the panels pass. Fewer rows share the threads evenly.
const TASK_ROWS: usize = 12 * BLOCK_ROWS;

/// True where the CPU runs this product: it has AVX2, FMA and F16C.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx2") && has!("fma") && has!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True where this product is the CPU's f32 product: it runs here, and the CPU has no AVX-512
/// for gemm's own kernels, or our kernels are capped below it ([`crate::cpu::MAX_ISA_VARIABLE`]).
pub(crate) fn preferred() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        available()
            && !(std::arch::is_x86_feature_detected!("avx512f")
                && crate::cpu::allows(crate::cpu::Isa::Avx512))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A weight matrix `[outputs, inputs]` laid out in panels for [`Panels::product`], its
/// weights held as `W`: f32, or f16 (half the memory, converted as they are read).
#[derive(Debug)]
pub(crate) struct Panels<W> {
    outputs: usize,
    inputs: usize,
    /// Panel `p`, input `i`, lane `l`: weight `[16p + l, i]` (zero past the matrix), at
    /// `(p · inputs + i) · 16 + l`.
    weights: Vec<W>,
}

/// The weights in f32.
pub(crate) type F32Panels = Panels<f32>;
/// The weights rounded to f16.
pub(crate) type F16Panels = Panels<half::f16>;

/// How a panel holds a weight.
pub(crate) trait PanelWeight: Copy + Default + Send + Sync + 'static {
    /// The product's name in candle's errors.
    const NAME: &'static str;
    /// `value` as the panel holds it (f16: rounded to nearest).
    fn from_f32(value: f32) -> Self;
    /// Eight weights from `at`, in f32.
    ///
    /// # Safety
    /// Eight values from `at` are readable, and the CPU has AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256;
}

impl PanelWeight for f32 {
    const NAME: &'static str = "f32-panels-product";
    fn from_f32(value: f32) -> Self {
        value
    }
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's promise.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(at) }
    }
}

impl PanelWeight for half::f16 {
    const NAME: &'static str = "f16-panels-product";
    fn from_f32(value: f32) -> Self {
        half::f16::from_f32(value)
    }
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::{_mm_loadu_si128, _mm256_cvtph_ps};
        // SAFETY: the caller's promise; f16 is 16 bits, eight of them 128.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(at.cast())) }
    }
}

impl<W: PanelWeight> Panels<W> {
    /// Lays `weight` (`[outputs, inputs]` f32, as a linear layer stores it) out in panels.
    /// Call only where [`available`] is true.
    pub(crate) fn new(weight: &Tensor) -> candle_core::Result<Self> {
        let (outputs, inputs) = weight.dims2()?;
        let rows = weight.to_vec2::<f32>()?;
        let mut weights = vec![W::default(); outputs.div_ceil(LANES) * inputs * LANES];
        for (output, row) in rows.iter().enumerate() {
            let (panel, lane) = (output / LANES, output % LANES);
            for (input, &value) in row.iter().enumerate() {
                weights[(panel * inputs + input) * LANES + lane] = W::from_f32(value);
            }
        }
        Ok(Self {
            outputs,
            inputs,
            weights,
        })
    }

    /// The product on plain rows; `xs` holds `rows · inputs` values.
    fn product_rows(&self, xs: &[f32], rows: usize) -> Vec<f32> {
        assert_eq!(xs.len(), rows * self.inputs, "checked by the caller");
        let size = rows * self.outputs;
        if self.inputs == 0 {
            return vec![0.0; size];
        }
        let panel_count = self.outputs.div_ceil(LANES);
        let task_rows = crate::kernels::product_task_rows(rows, BLOCK_ROWS, TASK_ROWS);
        let row_tasks = rows.div_ceil(task_rows);
        // Fewer blocks of rows than threads (a query, a short text): the panels are split too.
        let panel_tasks = rayon::current_num_threads()
            .div_ceil(row_tasks.max(1))
            .clamp(1, panel_count.max(1));
        let mut out = Vec::with_capacity(size);
        let sums = Sums {
            at: out.spare_capacity_mut().as_mut_ptr(),
            stride: self.outputs,
        };
        (0..row_tasks * panel_tasks)
            .into_par_iter()
            .for_each(|task| {
                let (row_task, panel_task) = (task / panel_tasks, task % panel_tasks);
                let first_row = row_task * task_rows;
                let row_range = first_row..(first_row + task_rows).min(rows);
                let task_panels = panel_count * panel_task / panel_tasks
                    ..panel_count * (panel_task + 1) / panel_tasks;
                self.task(xs, row_range, task_panels, sums);
            });
        // SAFETY: the tasks cover every row and every panel, so every column of every row, and
        // each writes every value of its rows and panels (`task`).
        #[allow(unsafe_code)]
        unsafe {
            out.set_len(size);
        }
        out
    }

    /// The sums of `rows` of `xs` against the panels of `panels`, written through `sums`: the
    /// first slice of inputs writes every one of them, the later slices add to them.
    fn task(
        &self,
        xs: &[f32],
        rows: std::ops::Range<usize>,
        panels: std::ops::Range<usize>,
        sums: Sums,
    ) {
        let panel_size = self.inputs * LANES;
        for first_input in (0..self.inputs).step_by(SLICE_INPUTS) {
            let slice_inputs = (self.inputs - first_input).min(SLICE_INPUTS);
            for panel in panels.clone() {
                let weights = &self.weights[panel * panel_size..][first_input * LANES..]
                    [..slice_inputs * LANES];
                let columns = (self.outputs - panel * LANES).min(LANES);
                for first_row in rows.clone().step_by(BLOCK_ROWS) {
                    let block_rows = (rows.end - first_row).min(BLOCK_ROWS);
                    let inputs = &xs[first_row * self.inputs + first_input..]
                        [..(block_rows - 1) * self.inputs + slice_inputs];
                    let place = BlockPlace {
                        rows: block_rows,
                        columns,
                        input_stride: self.inputs,
                        sum_stride: self.outputs,
                        add: first_input > 0,
                    };
                    // SAFETY: the block's sums lie in rows `first_row..first_row + block_rows`
                    // and columns `16 · panel..16 · panel + columns` of the product: inside it,
                    // and no other task's (tasks split rows and panels); a slice after the first
                    // reads only sums this task's first slice wrote.
                    #[allow(unsafe_code)]
                    let out = unsafe { sums.block(first_row, panel * LANES) };
                    block(inputs, weights, out, place);
                }
            }
        }
    }
}

impl<W: PanelWeight> PackedWeight for Panels<W> {
    const NAME: &'static str = W::NAME;

    fn dims(&self) -> (usize, usize) {
        (self.outputs, self.inputs)
    }

    fn product_of_rows(&self, xs: &[f32], rows: usize) -> candle_core::Result<Vec<f32>> {
        Ok(self.product_rows(xs, rows))
    }
}

/// The product's memory, shared by the tasks, each of which writes rows and columns of its own.
#[derive(Clone, Copy)]
struct Sums {
    at: *mut MaybeUninit<f32>,
    stride: usize,
}

// SAFETY: the tasks write disjoint values through it (see `Panels::task`), and the vector it
// points into outlives them.
#[allow(unsafe_code)]
unsafe impl Send for Sums {}
#[allow(unsafe_code)]
unsafe impl Sync for Sums {}

impl Sums {
    /// Where the sum of `row` and `column` goes.
    ///
    /// # Safety
    /// `row` and `column` must lie in the product, and the values a block writes from there no
    /// other task's.
    #[allow(unsafe_code)]
    unsafe fn block(self, row: usize, column: usize) -> *mut f32 {
        // SAFETY: inside the product's allocation, as the caller promises.
        unsafe { self.at.add(row * self.stride + column).cast() }
    }
}

/// Which of a block's sums exist and how its rows lie: the first `rows` rows and `columns`
/// columns; each row's inputs `input_stride` values after the row before's, its sums
/// `sum_stride` after; `add` for a slice of inputs after the first.
#[derive(Clone, Copy)]
struct BlockPlace {
    rows: usize,
    columns: usize,
    input_stride: usize,
    sum_stride: usize,
    add: bool,
}

/// The sums of up to 6 rows of `inputs` (one slice of each row) against one panel's slice of
/// `weights` (`16` a step), written, or added where `place.add`, at `out`, a row of the product
/// apart for each row.
fn block<W: PanelWeight>(inputs: &[f32], weights: &[W], out: *mut f32, place: BlockPlace) {
    let steps = weights.len() / LANES;
    assert!((1..=BLOCK_ROWS).contains(&place.rows));
    assert!((1..=LANES).contains(&place.columns));
    assert!(steps > 0 && weights.len() == steps * LANES);
    assert!(inputs.len() >= (place.rows - 1) * place.input_stride + steps);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `Panels` are built only where `available()` said the CPU has AVX2, FMA and F16C;
        // the slices' lengths were checked above, and the caller gave `out` room for the
        // block's sums.
        #[allow(unsafe_code)]
        unsafe {
            x86::block(inputs, weights, out, place);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (inputs, weights, out, place);
        unreachable!("Panels are built only where `available()` is true")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps,
        _mm256_setzero_ps, _mm256_storeu_ps,
    };

    use super::{BLOCK_ROWS, BlockPlace, LANES, PanelWeight};

    /// See [`super::block`]; the caller checked the lengths and gave `out` room for the sums.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn block<W: PanelWeight>(
        inputs: &[f32],
        weights: &[W],
        out: *mut f32,
        place: BlockPlace,
    ) {
        let steps = weights.len() / LANES;
        // Rows past the block's read the first row again, so the loop keeps one shape; their
        // sums are not stored.
        let rows: [*const f32; BLOCK_ROWS] = std::array::from_fn(|row| {
            let row = if row < place.rows { row } else { 0 };
            // SAFETY: the caller checked that `inputs` holds `steps` values from the start of
            // each of the block's rows.
            unsafe { inputs.as_ptr().add(row * place.input_stride) }
        });
        let mut sums = [[_mm256_setzero_ps(); 2]; BLOCK_ROWS];
        let mut weight = weights.as_ptr();
        for step in 0..steps {
            // SAFETY: `step < steps`: inside `weights` (16 a step) and each row's inputs.
            let (low, high) = unsafe { (W::load8(weight), W::load8(weight.add(8))) };
            // SAFETY: as above.
            weight = unsafe { weight.add(LANES) };
            for (sums, row) in sums.iter_mut().zip(&rows) {
                // SAFETY: as above.
                let input = unsafe { _mm256_broadcast_ss(&*row.add(step)) };
                sums[0] = _mm256_fmadd_ps(input, low, sums[0]);
                sums[1] = _mm256_fmadd_ps(input, high, sums[1]);
            }
        }
        for (row, sums) in sums.iter().enumerate().take(place.rows) {
            // SAFETY: the caller gave room for `place.columns` sums at the start of each of the
            // block's rows, and the CPU has AVX2 and FMA (this function's own features).
            unsafe { store(sums, out.add(row * place.sum_stride), place) };
        }
    }

    /// One row's 16 sums at `at`, of which `place.columns` exist; added to what is there where
    /// `place.add`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[allow(unsafe_code)]
    unsafe fn store(sums: &[__m256; 2], at: *mut f32, place: BlockPlace) {
        if place.columns == LANES {
            for (half, &sum) in sums.iter().enumerate() {
                // SAFETY: 16 values from `at` are the block's (the caller's promise).
                unsafe {
                    let at = at.add(8 * half);
                    let sum = if place.add {
                        _mm256_add_ps(_mm256_loadu_ps(at), sum)
                    } else {
                        sum
                    };
                    _mm256_storeu_ps(at, sum);
                }
            }
            return;
        }
        let mut row = [0.0; LANES];
        // SAFETY: `row` holds 16 values.
        unsafe {
            _mm256_storeu_ps(row.as_mut_ptr(), sums[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(8), sums[1]);
        }
        for (column, &sum) in row.iter().enumerate().take(place.columns) {
            // SAFETY: `place.columns` values from `at` are the block's.
            unsafe {
                let at = at.add(column);
                *at = if place.add { *at + sum } else { sum };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use candle_core::{Device, Tensor};

    use super::{F32Panels, PanelWeight, Panels, available};
    use crate::kernels::PackedWeight as _;
    use crate::kernels::tests::spread_values;

    /// False, said on stderr, where the CPU lacks AVX2, FMA or F16C: the harness hides what a
    /// passing test prints with eprintln! unless run with --nocapture, and a skip should be seen.
    fn runs_here(test: &str) -> bool {
        if !available() {
            let _ = writeln!(
                std::io::stderr(),
                "f32_panels::tests::{test} skipped: this CPU has no AVX2, FMA and F16C"
            );
        }
        available()
    }

    /// Against the product in f64, for shapes with partial blocks, panels and slices of
    /// inputs, rows enough for several tasks, and rows too few for one a thread.
    #[test]
    fn products_match_f64_sums() -> candle_core::Result<()> {
        if !runs_here("products_match_f64_sums") {
            return Ok(());
        }
        matches_f64_sums::<f32>(|w| w)?;
        // f16 weights: the sums of the weights as rounded, each rounded to nearest.
        matches_f64_sums::<half::f16>(|w| half::f16::from_f32(w).to_f32())
    }

    /// [`products_match_f64_sums`] for weights held as `W`, which hold `w` as `rounded(w)`.
    fn matches_f64_sums<W: PanelWeight>(rounded: fn(f32) -> f32) -> candle_core::Result<()> {
        for (rows, inputs, outputs) in [
            (1, 1, 1),
            (3, 7, 5),
            (13, 64, 33),
            (70, 129, 50),
            (9, 384, 1536),
            (151, 1536, 384),
            (5, 1000, 20),
        ] {
            let xs = spread_values(rows * inputs, 101);
            let ws = spread_values(outputs * inputs, 97);
            let weight = Tensor::from_vec(ws.clone(), (outputs, inputs), &Device::Cpu)?;
            let got = Panels::<W>::new(&weight)?.product_rows(&xs, rows);
            let ws: Vec<f32> = ws.into_iter().map(rounded).collect();
            assert_eq!(got.len(), rows * outputs);
            for (row, sums) in got.chunks_exact(outputs).enumerate() {
                for (output, &sum) in sums.iter().enumerate() {
                    let want: f64 = (0..inputs)
                        .map(|i| {
                            f64::from(xs[row * inputs + i]) * f64::from(ws[output * inputs + i])
                        })
                        .sum();
                    let scale: f64 = (0..inputs)
                        .map(|i| {
                            (f64::from(xs[row * inputs + i]) * f64::from(ws[output * inputs + i]))
                                .abs()
                        })
                        .sum();
                    assert!(
                        (f64::from(sum) - want).abs() <= 1e-6 * scale.max(1.0),
                        "[{rows}, {inputs}] x [{outputs}, {inputs}]ᵀ at ({row}, {output}): {sum} for {want}"
                    );
                }
            }
        }
        Ok(())
    }

    /// A row's floats are the same whichever rows, and how many, are computed with it.
    #[test]
    fn rows_do_not_depend_on_their_batch() -> candle_core::Result<()> {
        if !runs_here("rows_do_not_depend_on_their_batch") {
            return Ok(());
        }
        independent_of_the_batch::<f32>()?;
        independent_of_the_batch::<half::f16>()
    }

    fn independent_of_the_batch<W: PanelWeight>() -> candle_core::Result<()> {
        let (rows, inputs, outputs) = (100, 800, 72);
        let xs = spread_values(rows * inputs, 101);
        let weight = Tensor::from_vec(
            spread_values(outputs * inputs, 97),
            (outputs, inputs),
            &Device::Cpu,
        )?;
        let panels = Panels::<W>::new(&weight)?;
        let whole = panels.product_rows(&xs, rows);
        for (first, count) in [(0, 1), (37, 1), (5, 7), (61, 39)] {
            let part = panels.product_rows(&xs[first * inputs..][..count * inputs], count);
            assert_eq!(part, whole[first * outputs..][..count * outputs]);
        }
        Ok(())
    }

    #[test]
    fn no_rows_or_no_inputs_give_zeros() -> candle_core::Result<()> {
        if !runs_here("no_rows_or_no_inputs_give_zeros") {
            return Ok(());
        }
        let weight = Tensor::zeros((4, 0), candle_core::DType::F32, &Device::Cpu)?;
        let xs = Tensor::zeros((2, 0), candle_core::DType::F32, &Device::Cpu)?;
        let panels = F32Panels::new(&weight)?;
        assert_eq!(panels.product(&xs)?.to_vec2::<f32>()?, [[0f32; 4]; 2]);
        let weight = Tensor::zeros((4, 3), candle_core::DType::F32, &Device::Cpu)?;
        let none = Tensor::zeros((0, 3), candle_core::DType::F32, &Device::Cpu)?;
        assert_eq!(F32Panels::new(&weight)?.product(&none)?.dims(), [0, 4]);
        let wrong = Tensor::zeros((2, 5), candle_core::DType::F32, &Device::Cpu)?;
        assert!(F32Panels::new(&weight)?.product(&wrong).is_err());
        Ok(())
    }
}
