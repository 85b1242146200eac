//! `x·Wᵀ` with the weights and inputs rounded to bfloat16 and the sums kept in f32, on CPUs with
//! AVX-512 BF16, and through AMX's tile products where the CPU has them.
//!
//! The weights are rounded once, at load, and laid out in panels of 16 output columns whose
//! lanes hold the pair of inputs multiplied together; each call rounds its inputs to bf16 rows.
//! Two kernels read that layout, rows in parallel:
//! - AMX (`tdpbf16ps`, 16 × 16 sums of 32 products in one instruction): a panel's next 16 pairs
//!   are exactly a weight tile, so a block of 32 rows and 32 columns is four tile products a
//!   step. On CPUs whose `vdpbf16ps` issues on one port it is the only bf16 product faster than
//!   f32's fused multiply-adds.
//! - AVX-512 BF16 (`vdpbf16ps`, 32 products a lane step): a block of 8 rows and 32 columns
//!   (16 accumulators) runs the whole inner dimension at a time.
//!
//! Both store a block's sums where they belong in the product, which nothing fills first:
//! copying them through a block of sums, and zeroing the product beforehand, were 5 to 8% of
//! the encoder's time on `vdpbf16ps`.

use std::mem::MaybeUninit;

use candle_core::Tensor;
use rayon::prelude::*;

use crate::kernels::PackedWeight;

/// Output columns in a panel: one 512-bit register of f32 sums, or one tile's columns.
const LANES: usize = 16;
/// Panels a block computes side by side.
const BLOCK_PANELS: usize = 2;
/// Input rows the vector kernel's block computes side by side.
const BLOCK_ROWS: usize = 8;
/// Input pairs in one tile row: pairs are padded to a multiple of it, so that tiles never read
/// past a row.
const TILE_PAIRS: usize = 16;

/// The product's inner loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// AMX tile products.
    Tiles,
    /// AVX-512 BF16 dot products.
    Vectors,
}

impl Kernel {
    /// The fastest kernel this CPU runs; call only where [`available`] is true.
    fn best() -> Self {
        if tiles_available() {
            Self::Tiles
        } else {
            Self::Vectors
        }
    }

    /// Input rows a block computes side by side.
    fn block_rows(self) -> usize {
        match self {
            Self::Tiles => 2 * LANES,
            Self::Vectors => BLOCK_ROWS,
        }
    }

    /// Most rows one task takes, so that its bf16 inputs stay in the core's cache while every
    /// panel of weights passes over them.
    fn task_rows(self) -> usize {
        match self {
            Self::Tiles => 256,
            Self::Vectors => 64,
        }
    }
}

/// True where the CPU runs the bf16 product.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
            && crate::cpu::allows(crate::cpu::Isa::Avx512)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True where the CPU has AMX's bf16 tile products and the system lets this process use them
/// (Linux hands out the tile state on request).
pub(crate) fn tiles_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            available() && crate::cpu::allows(crate::cpu::Isa::Amx) && x86::request_tiles()
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            false
        }
    })
}

/// A weight matrix `[outputs, inputs]` in bf16, packed for [`Bf16Weights::product`].
#[derive(Debug)]
pub(crate) struct Bf16Weights {
    outputs: usize,
    inputs: usize,
    /// Inputs rounded up to pairs, and pairs to whole tile rows.
    pairs: usize,
    /// Panel `p`, pair `q`, lane `l`, half `h`: weight `[16p + l, 2q + h]` (zero past the
    /// matrix), at `((p · pairs + q) · 16 + l) · 2 + h`.
    panels: Vec<u16>,
}

impl Bf16Weights {
    /// Rounds `weight` (`[outputs, inputs]` f32, as a linear layer stores it) to bf16 panels.
    /// Call only where [`available`] is true.
    pub(crate) fn new(weight: &Tensor) -> candle_core::Result<Self> {
        let (outputs, inputs) = weight.dims2()?;
        let rows = weight.to_vec2::<f32>()?;
        let pairs = inputs.div_ceil(2).next_multiple_of(TILE_PAIRS);
        let panel_count = outputs.div_ceil(LANES * BLOCK_PANELS) * BLOCK_PANELS;
        let mut panels = vec![0u16; panel_count * pairs * LANES * 2];
        for (output, row) in rows.iter().enumerate() {
            let (panel, lane) = (output / LANES, output % LANES);
            for (input, &value) in row.iter().enumerate() {
                let at = ((panel * pairs + input / 2) * LANES + lane) * 2 + input % 2;
                panels[at] = to_bf16(value);
            }
        }
        Ok(Self {
            outputs,
            inputs,
            pairs,
            panels,
        })
    }

    /// The product on plain rows; `xs` holds `rows · inputs` values.
    fn product_rows(&self, xs: &[f32], rows: usize, kernel: Kernel) -> Vec<f32> {
        assert_eq!(xs.len(), rows * self.inputs, "checked by the caller");
        let block_rows = kernel.block_rows();
        let padded_rows = rows.div_ceil(block_rows) * block_rows;
        let mut inputs = vec![0u16; padded_rows * self.pairs * 2];
        inputs
            .par_chunks_mut(self.pairs * 2)
            .zip(xs.par_chunks(self.inputs))
            .for_each(|(rounded, row)| round_row(row, rounded));
        // Every value is written once by a kernel, so nothing fills the memory first.
        let mut out = Vec::with_capacity(rows * self.outputs);
        let task_rows = crate::kernels::product_task_rows(rows, block_rows, kernel.task_rows());
        out.spare_capacity_mut()[..rows * self.outputs]
            .par_chunks_mut(task_rows * self.outputs)
            .enumerate()
            .for_each(|(task, out)| {
                let first = task * task_rows;
                let blocks = (out.len() / self.outputs).div_ceil(block_rows);
                let row_inputs = self.pairs * 2;
                let inputs = &inputs[first * row_inputs..][..blocks * block_rows * row_inputs];
                match kernel {
                    Kernel::Tiles => self.tiles_task(inputs, out),
                    Kernel::Vectors => self.vectors_task(inputs, out),
                }
            });
        // SAFETY: the tasks cover every row, and both kernels write every column of every row
        // they are given (each block's columns, over every block of panels).
        #[allow(unsafe_code)]
        unsafe {
            out.set_len(rows * self.outputs);
        }
        out
    }

    /// One task's rows through AMX: `inputs` (bf16, whole blocks of 32 rows) into `out`
    /// (`[rows, outputs]`, the rows that exist), every value written.
    fn tiles_task(&self, inputs: &[u16], out: &mut [MaybeUninit<f32>]) {
        assert!(tiles_available(), "chosen only where the CPU has the tiles");
        let block_rows = Kernel::Tiles.block_rows();
        assert!(inputs.len().is_multiple_of(block_rows * self.pairs * 2));
        assert!(self.pairs.is_multiple_of(TILE_PAIRS));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the tiles are available (asserted), so the CPU has AMX and this process holds
        // the tile state; `inputs` holds whole blocks of rows of `pairs` pairs, a multiple of
        // the tile's 16 (asserted), and the panels come in pairs of whole panels of `pairs`
        // pairs each, so no tile reads past either slice.
        #[allow(unsafe_code)]
        unsafe {
            x86::tiles_task(inputs, &self.panels, self.pairs, out, self.outputs);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = out;
            unreachable!("the tiles exist only on x86-64")
        }
    }

    /// One task's rows through `vdpbf16ps`: `inputs` (bf16, whole blocks) into `out`
    /// (`[rows, outputs]`, the rows that exist), every value written.
    fn vectors_task(&self, inputs: &[u16], out: &mut [MaybeUninit<f32>]) {
        let rows = out.len() / self.outputs;
        let row_inputs = self.pairs * 2;
        let panel_size = self.pairs * LANES * 2;
        let panel_count = self.panels.len() / panel_size;
        for first_panel in (0..panel_count).step_by(BLOCK_PANELS) {
            let weights =
                &self.panels[first_panel * panel_size..(first_panel + BLOCK_PANELS) * panel_size];
            let first_column = first_panel * LANES;
            let columns = (self.outputs - first_column).min(LANES * BLOCK_PANELS);
            for first_row in (0..rows).step_by(BLOCK_ROWS) {
                let block_inputs =
                    &inputs[first_row * row_inputs..(first_row + BLOCK_ROWS) * row_inputs];
                let place = BlockPlace {
                    rows: (rows - first_row).min(BLOCK_ROWS),
                    columns,
                    stride: self.outputs,
                };
                let at = first_row * self.outputs + first_column;
                block(block_inputs, weights, self.pairs, &mut out[at..], place);
            }
        }
    }
}

impl PackedWeight for Bf16Weights {
    const NAME: &'static str = "bf16-product";

    fn dims(&self) -> (usize, usize) {
        (self.outputs, self.inputs)
    }

    fn product_of_rows(&self, xs: &[f32], rows: usize) -> candle_core::Result<Vec<f32>> {
        Ok(self.product_rows(xs, rows, Kernel::best()))
    }
}

/// `x` rounded to the nearest bf16 (ties to even); NaN stays NaN.
fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

/// `from` rounded to bf16 into the start of `to`.
fn round_row(from: &[f32], to: &mut [u16]) {
    let to = &mut to[..from.len()];
    #[cfg(target_arch = "x86_64")]
    {
        let whole = from.len() / (2 * LANES) * (2 * LANES);
        x86::round(&from[..whole], &mut to[..whole]);
        for (to, &from) in to[whole..].iter_mut().zip(&from[whole..]) {
            *to = to_bf16(from);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (to, &from) in to.iter_mut().zip(from) {
        *to = to_bf16(from);
    }
}

/// Which of a block's sums exist, and where they go: the first `rows` rows and `columns`
/// columns, each row `stride` values after the one before.
#[derive(Clone, Copy)]
struct BlockPlace {
    rows: usize,
    columns: usize,
    stride: usize,
}

/// Sums of 8 rows of `inputs` (bf16, `pairs · 2` a row) against 32 columns of `weights` (two
/// panels), written into `out` as `place` says: straight from the registers, with no block
/// of sums in between.
fn block(
    inputs: &[u16],
    weights: &[u16],
    pairs: usize,
    out: &mut [MaybeUninit<f32>],
    place: BlockPlace,
) {
    assert_eq!(inputs.len(), BLOCK_ROWS * pairs * 2);
    assert_eq!(weights.len(), BLOCK_PANELS * pairs * LANES * 2);
    assert!((1..=BLOCK_ROWS).contains(&place.rows));
    assert!(place.columns <= LANES * BLOCK_PANELS);
    assert!((place.rows - 1) * place.stride + place.columns <= out.len());
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `Bf16Weights` is built only where `available()` said the CPU has these
        // features; the slices' lengths and the sums' place in `out` were checked above.
        #[allow(unsafe_code)]
        unsafe {
            x86::block(inputs, weights, pairs, out, place);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (inputs, weights, pairs, out, place);
        unreachable!("Bf16Weights is built only where `available()` is true")
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m512bh, __m512i, _mm512_cvtne2ps_pbh, _mm512_dpbf16_ps, _mm512_loadu_ps,
        _mm512_loadu_si512, _mm512_mask_storeu_ps, _mm512_set1_epi32, _mm512_setzero_ps,
        _mm512_storeu_si512,
    };
    use std::mem::MaybeUninit;

    use std::arch::asm;

    use super::{BLOCK_PANELS, BLOCK_ROWS, BlockPlace, LANES, TILE_PAIRS};

    /// See [`super::block`]; the caller checked the lengths and the sums' place in `out`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[allow(unsafe_code)]
    pub(super) unsafe fn block(
        inputs: &[u16],
        weights: &[u16],
        pairs: usize,
        out: &mut [MaybeUninit<f32>],
        place: BlockPlace,
    ) {
        let mut sums = [[_mm512_setzero_ps(); BLOCK_PANELS]; BLOCK_ROWS];
        // Read with `read_unaligned` only.
        #[allow(clippy::cast_ptr_alignment)]
        let inputs = inputs.as_ptr().cast::<u32>();
        let weights = weights.as_ptr();
        for pair in 0..pairs {
            // SAFETY: `pair < pairs`, and the caller checked that both slices hold every pair
            // of every row and panel; the loads are unaligned.
            let columns: [__m512bh; BLOCK_PANELS] = std::array::from_fn(|panel| unsafe {
                as_bh(_mm512_loadu_si512(
                    weights.add((panel * pairs + pair) * LANES * 2).cast(),
                ))
            });
            for (row, sums) in sums.iter_mut().enumerate() {
                // SAFETY: as above; a pair of bf16 is read as one (unaligned) u32.
                let both = unsafe { inputs.add(row * pairs + pair).read_unaligned() };
                let row_pair = as_bh(_mm512_set1_epi32(both.cast_signed()));
                for (sum, &column) in sums.iter_mut().zip(&columns) {
                    *sum = _mm512_dpbf16_ps(*sum, row_pair, column);
                }
            }
        }
        let out = out.as_mut_ptr().cast::<f32>();
        for (row, sums) in sums.iter().enumerate().take(place.rows) {
            for (panel, sum) in sums.iter().enumerate() {
                let lanes = place.columns.saturating_sub(panel * LANES).min(LANES);
                if lanes == 0 {
                    continue;
                }
                let mask = u16::try_from((1u32 << lanes) - 1).expect("at most 16 lanes");
                // SAFETY: the caller checked that `out` holds `place.columns` values from the
                // start of each of `place.rows` rows; the mask writes this panel's share alone.
                unsafe {
                    _mm512_mask_storeu_ps(out.add(row * place.stride + panel * LANES), mask, *sum);
                }
            }
        }
    }

    /// Checks CPUID for AMX's tiles and bf16 products, then asks Linux for the tile state
    /// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, granted to the whole process);
    /// true when all three hold.
    #[cfg(target_os = "linux")]
    pub(super) fn request_tiles() -> bool {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        let leaf = std::arch::x86_64::__cpuid_count(7, 0);
        let (amx_bf16, amx_tile) = (leaf.edx & (1 << 22) != 0, leaf.edx & (1 << 24) != 0);
        // SAFETY: a system call with integer arguments only; an old kernel answers EINVAL.
        #[allow(unsafe_code)]
        let granted = || unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            ) == 0
        };
        amx_bf16 && amx_tile && granted()
    }

    /// The tiles' shapes (palette 1): tmm0-1 hold 16 input rows of 16 pairs, tmm2-3 16 pairs of
    /// 16 weight columns, tmm4-7 16 × 16 sums; every tile 16 rows of 64 bytes.
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    static TILE_CONFIG: TileConfig = {
        let mut bytes = [0u8; 64];
        bytes[0] = 1;
        let mut tile = 0;
        while tile < 8 {
            bytes[16 + 2 * tile] = 64;
            bytes[48 + tile] = 16;
            tile += 1;
        }
        TileConfig(bytes)
    };

    /// One task's rows through AMX (see `Bf16Weights::tiles_task`): `inputs` holds whole blocks
    /// of 32 rows of `pairs` pairs of bf16, `panels` pairs of whole panels of `pairs` pairs,
    /// `out` the rows that exist, `outputs` wide.
    ///
    /// # Safety
    /// The CPU must have AMX-TILE and AMX-BF16 and this process the tile state; `pairs` must be
    /// a multiple of 16 and the slices as described.
    #[allow(unsafe_code)]
    pub(super) unsafe fn tiles_task(
        inputs: &[u16],
        panels: &[u16],
        pairs: usize,
        out: &mut [MaybeUninit<f32>],
        outputs: usize,
    ) {
        const ROWS: usize = 2 * LANES;
        let rows = out.len() / outputs;
        let row_bytes = pairs * 4;
        let panel_size = pairs * LANES * 2;
        let panel_count = panels.len() / panel_size;
        let mut sums = [[0f32; 2 * LANES]; ROWS];
        // SAFETY: the caller vouches for the CPU and the tile state; the configuration is a
        // valid palette-1 description of eight 16 × 64-byte tiles.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) &raw const TILE_CONFIG, options(nostack, readonly));
        }
        for first_panel in (0..panel_count).step_by(BLOCK_PANELS) {
            let first_column = first_panel * LANES;
            let columns = (outputs - first_column).min(LANES * BLOCK_PANELS);
            let left = panels[first_panel * panel_size..].as_ptr();
            let right = panels[(first_panel + 1) * panel_size..].as_ptr();
            for first_row in (0..rows).step_by(ROWS) {
                let upper = inputs[first_row * pairs * 2..].as_ptr();
                let lower = inputs[(first_row + LANES) * pairs * 2..].as_ptr();
                // SAFETY: the tiles are configured; zeroing touches no memory.
                unsafe {
                    asm!(
                        "tilezero tmm4",
                        "tilezero tmm5",
                        "tilezero tmm6",
                        "tilezero tmm7",
                        options(nostack, nomem)
                    );
                }
                for pair in (0..pairs).step_by(TILE_PAIRS) {
                    // SAFETY: `inputs` holds the 32 rows from `first_row` (whole blocks), each
                    // `pairs` pairs long, so the two input tiles (16 rows of the 16 pairs from
                    // `pair`, a multiple of 16 below `pairs`) lie inside it; the two weight tiles
                    // are the next 16 pairs of two whole panels.
                    unsafe {
                        asm!(
                            "tileloadd tmm0, [{upper} + {row_bytes}*1]",
                            "tileloadd tmm1, [{lower} + {row_bytes}*1]",
                            "tileloadd tmm2, [{left} + {tile_row}*1]",
                            "tileloadd tmm3, [{right} + {tile_row}*1]",
                            "tdpbf16ps tmm4, tmm0, tmm2",
                            "tdpbf16ps tmm5, tmm0, tmm3",
                            "tdpbf16ps tmm6, tmm1, tmm2",
                            "tdpbf16ps tmm7, tmm1, tmm3",
                            upper = in(reg) upper.add(pair * 2),
                            lower = in(reg) lower.add(pair * 2),
                            left = in(reg) left.add(pair * LANES * 2),
                            right = in(reg) right.add(pair * LANES * 2),
                            row_bytes = in(reg) row_bytes,
                            tile_row = in(reg) LANES * 4,
                            options(nostack, readonly),
                        );
                    }
                }
                // A whole block of 32 rows and 32 columns goes straight into `out`; the last,
                // partial ones through `sums`.
                let whole = rows - first_row >= ROWS && columns == 2 * LANES;
                let (top, stride) = if whole {
                    let at = first_row * outputs + first_column;
                    (out[at..].as_mut_ptr().cast::<f32>(), outputs)
                } else {
                    (sums.as_mut_ptr().cast::<f32>(), 2 * LANES)
                };
                // SAFETY: `top` starts 32 rows of 32 f32, each `stride` values after the one
                // before: the block's place in `out` (its rows and columns exist, as `whole`
                // says) or `sums`. Each tile stores 16 rows of 16 f32 into one quarter of them.
                unsafe {
                    asm!(
                        "tilestored [{top_left} + {stride}*1], tmm4",
                        "tilestored [{top_right} + {stride}*1], tmm5",
                        "tilestored [{bottom_left} + {stride}*1], tmm6",
                        "tilestored [{bottom_right} + {stride}*1], tmm7",
                        top_left = in(reg) top,
                        top_right = in(reg) top.add(LANES),
                        bottom_left = in(reg) top.add(LANES * stride),
                        bottom_right = in(reg) top.add(LANES * stride + LANES),
                        stride = in(reg) stride * 4,
                        options(nostack),
                    );
                }
                if !whole {
                    for (r, sums) in sums.iter().enumerate().take(rows - first_row) {
                        let at = (first_row + r) * outputs + first_column;
                        for (to, &sum) in out[at..at + columns].iter_mut().zip(sums) {
                            to.write(sum);
                        }
                    }
                }
            }
        }
        // SAFETY: gives the tile state back; touches no memory.
        unsafe {
            asm!("tilerelease", options(nostack, nomem));
        }
    }

    /// `from` (a multiple of 32 values) rounded to bf16 into `to` (as long), 32 at a time.
    pub(super) fn round(from: &[f32], to: &mut [u16]) {
        assert_eq!(from.len(), to.len());
        assert!(from.len().is_multiple_of(2 * LANES));
        assert!(super::available(), "checked when the weights were packed");
        // SAFETY: the CPU has the features, as just checked.
        #[allow(unsafe_code)]
        unsafe {
            round_avx512(from, to);
        }
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    fn round_avx512(from: &[f32], to: &mut [u16]) {
        for (from, to) in from
            .chunks_exact(2 * LANES)
            .zip(to.chunks_exact_mut(2 * LANES))
        {
            // SAFETY: each chunk holds 32 values; the loads and the store are unaligned.
            #[allow(unsafe_code)]
            unsafe {
                let low = _mm512_loadu_ps(from.as_ptr());
                let high = _mm512_loadu_ps(from.as_ptr().add(LANES));
                let rounded = _mm512_cvtne2ps_pbh(high, low);
                _mm512_storeu_si512(to.as_mut_ptr().cast(), as_bits(rounded));
            }
        }
    }

    /// The same 512 bits, as 32 bf16.
    #[target_feature(enable = "avx512f")]
    fn as_bh(bits: __m512i) -> __m512bh {
        // SAFETY: both types are 512 bits of plain data, every pattern valid.
        #[allow(unsafe_code)]
        unsafe {
            std::mem::transmute::<__m512i, __m512bh>(bits)
        }
    }

    /// The same 512 bits, as an integer vector.
    #[target_feature(enable = "avx512f")]
    fn as_bits(values: __m512bh) -> __m512i {
        // SAFETY: as for `as_bh`.
        #[allow(unsafe_code)]
        unsafe {
            std::mem::transmute::<__m512bh, __m512i>(values)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use candle_core::{Device, Tensor};

    use super::{Bf16Weights, Kernel, available, tiles_available, to_bf16};
    use crate::kernels::tests::spread_values;

    fn from_bf16(bits: u16) -> f32 {
        f32::from_bits(u32::from(bits) << 16)
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(from_bf16(to_bf16(1.0)).to_bits(), 1f32.to_bits());
        // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: ties go to the even, 1.
        assert_eq!(
            from_bf16(to_bf16(1.0 + 2f32.powi(-8))).to_bits(),
            1f32.to_bits()
        );
        // Just above halfway rounds up.
        let above = f32::from_bits((1.0f32 + 2f32.powi(-8)).to_bits() + 1);
        assert_eq!(
            from_bf16(to_bf16(above)).to_bits(),
            (1.0f32 + 2f32.powi(-7)).to_bits()
        );
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(-3.5)).to_bits(), (-3.5f32).to_bits());
    }

    /// Against the same product in f64 of the bf16-rounded values, for shapes with partial
    /// panels, blocks, tiles and pairs, through every kernel this CPU runs.
    #[test]
    fn product_matches_the_rounded_values() -> candle_core::Result<()> {
        // Straight to stderr: the test harness hides what a passing test prints with eprintln!
        // unless run with --nocapture, and a skip should be seen.
        let mut stderr = std::io::stderr();
        if !available() {
            let _ = writeln!(
                stderr,
                "bf16::tests::product_matches_the_rounded_values skipped: this CPU has no \
                 AVX-512 BF16"
            );
            return Ok(());
        }
        let mut kernels = vec![Kernel::Vectors];
        if tiles_available() {
            kernels.push(Kernel::Tiles);
        } else {
            let _ = writeln!(
                stderr,
                "bf16::tests::product_matches_the_rounded_values did not check AMX tiles: this \
                 CPU or system has none"
            );
        }
        for (kernel, (rows, inputs, outputs)) in kernels.into_iter().flat_map(|kernel| {
            [
                (1, 1, 1),
                (3, 7, 5),
                (13, 64, 33),
                (70, 129, 50),
                (9, 384, 1536),
                (300, 1024, 96),
            ]
            .map(|shape| (kernel, shape))
        }) {
            let xs = spread_values(rows * inputs, 101);
            let ws = spread_values(outputs * inputs, 97);
            let weight = Tensor::from_vec(ws.clone(), (outputs, inputs), &Device::Cpu)?;
            let packed = Bf16Weights::new(&weight)?;
            let got = packed.product_rows(&xs, rows, kernel);
            let got: Vec<&[f32]> = got.chunks_exact(outputs).collect();
            for r in 0..rows {
                for o in 0..outputs {
                    let want: f64 = (0..inputs)
                        .map(|i| {
                            f64::from(from_bf16(to_bf16(xs[r * inputs + i])))
                                * f64::from(from_bf16(to_bf16(ws[o * inputs + i])))
                        })
                        .sum();
                    let diff = (f64::from(got[r][o]) - want).abs();
                    assert!(
                        diff < 1e-4 * (1.0 + want.abs()),
                        "{kernel:?} [{r}, {o}] of {rows}×{inputs}×{outputs}: {} against {want}",
                        got[r][o]
                    );
                }
            }
        }
        Ok(())
    }
}
