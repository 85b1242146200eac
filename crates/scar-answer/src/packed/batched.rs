//! Many rows at once: a prompt's activations times a quantized matrix in byte products.
//!
//! Reading a prompt is bound by arithmetic, not by the weights' bytes, and byte products do
//! more per instruction than f32 multiply-adds. For each call, the matrix's weights are
//! unpacked once into panels of 16 output columns, one unsigned byte a weight (a nibble, a
//! nibble and its fifth bit, or a `Q8_0` weight plus 128) with an f32 scale and minimum per
//! column and block of 32: weight = scale · byte + minimum, the file's weights exactly. A
//! panel's 4 consecutive inputs for its 16 columns are 64 consecutive bytes. The activations
//! are quantized per block of 32 to signed bytes, as for decoding and as llama.cpp does for its
//! prompts. Each block's 32 byte products sum exactly in integers for 8 rows and 16 columns,
//! and only then turn into f32: scaled by both scales, plus the minimum times the activations'
//! block sum. Two kernels read the panels:
//! - AVX-512 VNNI: one `vpdpbusd` a row and group, 64 products into 16 i32 sums;
//! - AVX2: half a panel at a time, `vpmaddubsw` into 16-bit pair sums, four groups of them
//!   added before `vpmaddwd` widens them to i32. Weights of at most 5 bits keep those sums
//!   under 2¹⁵; `Q8_0`'s bytes would not, so its prompts stay on the f32 product there.
//!
//! Writing the bytes costs a quarter of the f32 weights that the dequantized product writes,
//! and the tiles read them from the core's caches.

use std::sync::Mutex;

use candle_core::Result;

use super::{BLOCK, Format, Kernel, PackedRows};

/// Inputs one lane of `vpdpbusd` sums.
const GROUP: usize = 4;
/// Groups in a block.
const GROUPS: usize = BLOCK / GROUP;
/// Output columns in a panel: one 512-bit register of i32 sums.
const LANES: usize = 16;
/// Rows a tile computes side by side.
const TILE_ROWS: usize = 8;
/// Most rows one task takes: their bytes stay in the core's cache while every panel it
/// computes passes over them.
const TASK_ROWS: usize = 64;

/// One panel's or one row's bytes and its two f32 values per block, for one task to fill.
type Parts<'a, T> = Mutex<(&'a mut [T], &'a mut [f32], &'a mut [f32])>;

/// A matrix's weights unpacked for one call: `bytes` at `(((p · blocks + b) · 8 + g) · 16 + l)
/// · 4 + j` is column `16p + l`'s input `32b + 4g + j`; `scales` and `minimums` at
/// `(p · blocks + b) · 16 + l`. Columns past the matrix have zero weights, scales and minimums.
struct Panels {
    kernel: Kernel,
    bytes: Vec<u8>,
    scales: Vec<f32>,
    minimums: Vec<f32>,
    blocks: usize,
}

impl Panels {
    fn panel_bytes(&self) -> usize {
        self.blocks * BLOCK * LANES
    }

    fn panel_scales(&self) -> usize {
        self.blocks * LANES
    }

    /// The sums of `task_rows` rows from `first_row` against the panels in `panel_range`:
    /// row after row, 16 values a panel.
    fn multiply(
        &self,
        activations: &Quantized,
        first_row: usize,
        task_rows: usize,
        panel_range: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let width = panel_range.len() * LANES;
        let mut sums = vec![0f32; task_rows * width];
        for (index, panel) in panel_range.enumerate() {
            let weights = PanelRef {
                bytes: &self.bytes[panel * self.panel_bytes()..][..self.panel_bytes()],
                scales: &self.scales[panel * self.panel_scales()..][..self.panel_scales()],
                minimums: &self.minimums[panel * self.panel_scales()..][..self.panel_scales()],
            };
            for tile_row in (0..task_rows).step_by(TILE_ROWS) {
                let tile = activations.tile(first_row + tile_row);
                let mut tile_sums = [[0f32; LANES]; TILE_ROWS];
                x86::tile(self.kernel, &tile, &weights, &mut tile_sums);
                for (row, values) in tile_sums.iter().enumerate().take(task_rows - tile_row) {
                    let at = (tile_row + row) * width + index * LANES;
                    sums[at..at + LANES].copy_from_slice(values);
                }
            }
        }
        sums
    }
}

/// Rows of activations as signed bytes per block of 32, each block with its scale and its
/// scale times the sum of its bytes (which the weights' minimums multiply). Rows are padded
/// with zeros to whole tiles.
struct Quantized {
    bytes: Vec<i8>,
    scales: Vec<f32>,
    block_sums: Vec<f32>,
    blocks: usize,
}

impl PackedRows {
    /// True where [`Self::product_rows`] runs: every format on AVX-512 VNNI, all but `Q8_0` on
    /// AVX2, whose 16-bit pair sums `Q8_0`'s bytes (up to 255) would overflow.
    pub(crate) fn multiplies_rows(&self) -> bool {
        self.kernel.multiplies_rows(self.format)
    }

    /// `x · Wᵀ` for `rows` rows of `columns` values each (`x` row after row): `rows · self.rows`
    /// values. Each row's products are the file's weights times its quantized activations, as
    /// [`Self::product`] computes one row's, summed in another order.
    pub(crate) fn product_rows(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        if !self.multiplies_rows() {
            candle_core::bail!("the batched product does not run on this CPU and format");
        }
        if x.len() != rows * self.columns {
            candle_core::bail!(
                "{} values for {rows} rows of a matrix of {} columns",
                x.len(),
                self.columns
            );
        }
        let panels = self.panels();
        let activations = Quantized::new(x, rows, self.columns, self.kernel);
        let panel_count = panels.scales.len() / panels.panel_scales();
        let row_tasks = rows.div_ceil(TASK_ROWS);
        // Enough tasks for every thread, even for a short prompt: split the columns too.
        let threads = candle_core::utils::get_num_threads();
        let column_parts = (4 * threads).div_ceil(row_tasks).clamp(1, panel_count);
        let panels_per_part = panel_count.div_ceil(column_parts);
        let out = Mutex::new(vec![0f32; rows * self.rows]);
        candle_core::utils::barrier_pool().execute_chunked(row_tasks * column_parts, |tasks| {
            for task in tasks {
                let first_row = task / column_parts * TASK_ROWS;
                let task_rows = (rows - first_row).min(TASK_ROWS);
                let first_panel = task % column_parts * panels_per_part;
                let last_panel = (first_panel + panels_per_part).min(panel_count);
                if first_panel >= last_panel {
                    continue;
                }
                let sums =
                    panels.multiply(&activations, first_row, task_rows, first_panel..last_panel);
                let first_column = first_panel * LANES;
                let width = ((last_panel - first_panel) * LANES).min(self.rows - first_column);
                let mut out = out
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for (row, sums) in sums
                    .chunks_exact((last_panel - first_panel) * LANES)
                    .enumerate()
                {
                    let at = (first_row + row) * self.rows + first_column;
                    out[at..at + width].copy_from_slice(&sums[..width]);
                }
            }
        });
        Ok(out
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The weights unpacked into panels, the panels in parallel.
    fn panels(&self) -> Panels {
        let blocks = self.columns / BLOCK;
        let panel_count = self.rows.div_ceil(LANES);
        let mut panels = Panels {
            kernel: self.kernel,
            bytes: vec![0; panel_count * blocks * BLOCK * LANES],
            scales: vec![0.0; panel_count * blocks * LANES],
            minimums: vec![0.0; panel_count * blocks * LANES],
            blocks,
        };
        let (panel_bytes, panel_scales) = (panels.panel_bytes(), panels.panel_scales());
        let parts: Vec<Parts<'_, u8>> = panels
            .bytes
            .chunks_mut(panel_bytes)
            .zip(panels.scales.chunks_mut(panel_scales))
            .zip(panels.minimums.chunks_mut(panel_scales))
            .map(|((bytes, scales), minimums)| Mutex::new((bytes, scales, minimums)))
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(panel_count, |range| {
            for panel in range {
                let mut part = parts[panel]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (bytes, scales, minimums) = &mut *part;
                for lane in 0..LANES.min(self.rows - panel * LANES) {
                    let row = panel * LANES + lane;
                    for block in 0..blocks {
                        let (weights, scale, minimum) = self.unsigned_block(row * blocks + block);
                        scales[block * LANES + lane] = scale;
                        minimums[block * LANES + lane] = minimum;
                        for (group, four) in weights.chunks_exact(GROUP).enumerate() {
                            let at = ((block * GROUPS + group) * LANES + lane) * GROUP;
                            bytes[at..at + GROUP].copy_from_slice(four);
                        }
                    }
                }
            }
        });
        drop(parts);
        panels
    }

    /// Block `index` (row after row) as unsigned bytes `u`, its scale and its minimum: weight
    /// `j` is `scale · u[j] + minimum`.
    fn unsigned_block(&self, index: usize) -> ([u8; BLOCK], f32, f32) {
        let scale = self.scales[index];
        let mut weights = [0u8; BLOCK];
        match self.format {
            Format::Q8_0 => {
                let signed = &self.weights[index * BLOCK..][..BLOCK];
                for (weight, &q) in weights.iter_mut().zip(signed) {
                    *weight = q ^ 0x80;
                }
                (weights, scale, -128.0 * scale)
            }
            Format::Nibbles | Format::Fives => {
                let packed = &self.weights[index * BLOCK / 2..][..BLOCK / 2];
                let bits = self.fifth_bits(index);
                for (j, weight) in weights.iter_mut().enumerate() {
                    let byte = packed[j % (BLOCK / 2)];
                    let nibble = if j < BLOCK / 2 {
                        byte & 0x0F
                    } else {
                        byte >> 4
                    };
                    *weight = nibble | u8::from(bits >> j & 1 == 1) << 4;
                }
                (weights, scale, self.minimums[index])
            }
        }
    }
}

impl Quantized {
    fn new(x: &[f32], rows: usize, columns: usize, kernel: Kernel) -> Self {
        let blocks = columns / BLOCK;
        let padded = rows.div_ceil(TILE_ROWS) * TILE_ROWS;
        let mut quantized = Self {
            bytes: vec![0; padded * columns],
            scales: vec![0.0; padded * blocks],
            block_sums: vec![0.0; padded * blocks],
            blocks,
        };
        let parts: Vec<Parts<'_, i8>> = quantized
            .bytes
            .chunks_mut(columns)
            .zip(quantized.scales.chunks_mut(blocks))
            .zip(quantized.block_sums.chunks_mut(blocks))
            .map(|((bytes, scales), sums)| Mutex::new((bytes, scales, sums)))
            .take(rows)
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(rows, |range| {
            for row in range {
                let mut part = parts[row]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (bytes, scales, sums) = &mut *part;
                x86::quantize_row(kernel, &x[row * columns..][..columns], bytes, scales, sums);
            }
        });
        drop(parts);
        quantized
    }

    /// The tile of rows from `first`.
    fn tile(&self, first: usize) -> Tile<'_> {
        let row_bytes = self.blocks * BLOCK;
        Tile {
            bytes: &self.bytes[first * row_bytes..][..TILE_ROWS * row_bytes],
            scales: &self.scales[first * self.blocks..][..TILE_ROWS * self.blocks],
            block_sums: &self.block_sums[first * self.blocks..][..TILE_ROWS * self.blocks],
            blocks: self.blocks,
        }
    }
}

/// `TILE_ROWS` rows of quantized activations.
struct Tile<'a> {
    bytes: &'a [i8],
    scales: &'a [f32],
    block_sums: &'a [f32],
    blocks: usize,
}

/// One panel of unpacked weights.
struct PanelRef<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
    minimums: &'a [f32],
}

/// One row's values quantized per block of 32: the scale maps the largest magnitude to 127,
/// and each value rounds to the nearest step, as for decoding ([`super::Activations`]).
// Inlined into its AVX-512 build.
#[allow(clippy::inline_always)]
#[inline(always)]
fn quantize_row(row: &[f32], bytes: &mut [i8], scales: &mut [f32], block_sums: &mut [f32]) {
    for (((values, bytes), scale), block_sum) in row
        .chunks_exact(BLOCK)
        .zip(bytes.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
        .zip(block_sums.iter_mut())
    {
        let largest = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        *scale = largest / 127.0;
        let inverse = if *scale > 0.0 { 1.0 / *scale } else { 0.0 };
        let mut sum = 0i32;
        for (byte, &v) in bytes.iter_mut().zip(values) {
            *byte = (v * inverse).round() as i8;
            sum += i32::from(*byte);
        }
        *block_sum = *scale * sum as f32;
    }
}

#[allow(unsafe_code)]
mod x86 {
    use super::{BLOCK, GROUP, GROUPS, Kernel, LANES, PanelRef, TILE_ROWS, Tile};

    /// [`super::quantize_row`] compiled for the kernel's instructions: every row of a prompt is
    /// quantized for every matrix, and the portable build's rounding is scalar.
    pub(super) fn quantize_row(
        kernel: Kernel,
        row: &[f32],
        bytes: &mut [i8],
        scales: &mut [f32],
        block_sums: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernel` is made only where the CPU has its instructions.
        unsafe {
            match kernel {
                Kernel::Avx512Vnni => avx512::quantize_row(row, bytes, scales, block_sums),
                Kernel::Avx2 => avx2::quantize_row(row, bytes, scales, block_sums),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = kernel;
            super::quantize_row(row, bytes, scales, block_sums);
        }
    }

    /// The sums of a tile of rows against a panel, into `out[row]`.
    pub(super) fn tile(
        kernel: Kernel,
        tile: &Tile<'_>,
        weights: &PanelRef<'_>,
        out: &mut [[f32; LANES]; TILE_ROWS],
    ) {
        let blocks = tile.blocks;
        assert_eq!(tile.bytes.len(), TILE_ROWS * blocks * BLOCK);
        assert_eq!(tile.scales.len(), TILE_ROWS * blocks);
        assert_eq!(tile.block_sums.len(), TILE_ROWS * blocks);
        assert_eq!(weights.bytes.len(), blocks * BLOCK * LANES);
        assert_eq!(weights.scales.len(), blocks * LANES);
        assert_eq!(weights.minimums.len(), blocks * LANES);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernel` is made only where the CPU has its instructions; the lengths were
        // checked above.
        unsafe {
            match kernel {
                Kernel::Avx512Vnni => avx512::tile(tile, weights, out),
                Kernel::Avx2 => {
                    for half in 0..2 {
                        for first in [0, TILE_ROWS / 2] {
                            avx2::quarter(tile, weights, half, first, out);
                        }
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (kernel, out);
            unreachable!("the batched product runs on x86-64 only")
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod avx512 {
        use std::arch::x86_64::{
            __m512, __m512i, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
            _mm512_loadu_ps, _mm512_loadu_si512, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps,
            _mm512_setzero_ps, _mm512_setzero_si512, _mm512_storeu_ps,
        };

        use super::{BLOCK, GROUP, GROUPS, LANES, PanelRef, TILE_ROWS, Tile};

        #[target_feature(enable = "avx512f,avx512bw")]
        pub(super) fn quantize_row(
            row: &[f32],
            bytes: &mut [i8],
            scales: &mut [f32],
            block_sums: &mut [f32],
        ) {
            super::super::quantize_row(row, bytes, scales, block_sums);
        }

        /// 8 rows × 16 columns: for each block, 8 groups of 4 inputs, each one load of the
        /// panel's bytes and a `vpdpbusd` per row with the row's 4 bytes in every lane; then
        /// the block's i32 sums scaled into the f32 sums.
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        pub(super) unsafe fn tile(
            tile: &Tile<'_>,
            weights: &PanelRef<'_>,
            out: &mut [[f32; LANES]; TILE_ROWS],
        ) {
            let blocks = tile.blocks;
            let row_bytes = blocks * BLOCK;
            let activations = tile.bytes.as_ptr();
            let panel = weights.bytes.as_ptr();
            let mut sums: [__m512; TILE_ROWS] = [_mm512_setzero_ps(); TILE_ROWS];
            for block in 0..blocks {
                let mut dots: [__m512i; TILE_ROWS] = [_mm512_setzero_si512(); TILE_ROWS];
                for group in 0..GROUPS {
                    // SAFETY: the panel holds `blocks` blocks of 8 groups of 16 lanes × 4
                    // bytes, and each row `blocks · 32` bytes (checked by the caller); the
                    // loads are unaligned.
                    unsafe {
                        let column = _mm512_loadu_si512(
                            panel.add((block * GROUPS + group) * LANES * GROUP).cast(),
                        );
                        for (row, dot) in dots.iter_mut().enumerate() {
                            let four = activations
                                .add(row * row_bytes + block * BLOCK + group * GROUP)
                                .cast::<i32>()
                                .read_unaligned();
                            *dot = _mm512_dpbusd_epi32(*dot, column, _mm512_set1_epi32(four));
                        }
                    }
                }
                // SAFETY: as above, for the block's 16 scales and minimums and the rows' block
                // scales and sums.
                unsafe {
                    let scale = _mm512_loadu_ps(weights.scales.as_ptr().add(block * LANES));
                    let minimum = _mm512_loadu_ps(weights.minimums.as_ptr().add(block * LANES));
                    for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                        let at = row * blocks + block;
                        let both =
                            _mm512_mul_ps(scale, _mm512_set1_ps(*tile.scales.get_unchecked(at)));
                        *sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*dot), both, *sum);
                        *sum = _mm512_fmadd_ps(
                            minimum,
                            _mm512_set1_ps(*tile.block_sums.get_unchecked(at)),
                            *sum,
                        );
                    }
                }
            }
            for (out, sum) in out.iter_mut().zip(&sums) {
                // SAFETY: each row of `out` holds 16 f32.
                unsafe { _mm512_storeu_ps(out.as_mut_ptr(), *sum) };
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::{
            __m256, __m256i, _mm256_add_epi16, _mm256_add_epi32, _mm256_cvtepi32_ps,
            _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_madd_epi16,
            _mm256_maddubs_epi16, _mm256_mul_ps, _mm256_set1_epi16, _mm256_set1_epi32,
            _mm256_set1_ps, _mm256_setzero_ps, _mm256_setzero_si256, _mm256_storeu_ps,
        };

        use super::{BLOCK, GROUP, GROUPS, LANES, PanelRef, TILE_ROWS, Tile};

        /// Half a panel's columns.
        const HALF: usize = LANES / 2;
        /// Rows a quarter of the tile takes.
        const ROWS: usize = TILE_ROWS / 2;
        /// Groups whose 16-bit pair sums add up before they widen: a pair sum is at most
        /// 2 · 31 · 127 = 7,874 (weights of at most 5 bits), four of them 31,496, under 2¹⁵.
        const NARROW_GROUPS: usize = 4;

        #[target_feature(enable = "avx2,fma")]
        pub(super) fn quantize_row(
            row: &[f32],
            bytes: &mut [i8],
            scales: &mut [f32],
            block_sums: &mut [f32],
        ) {
            super::super::quantize_row(row, bytes, scales, block_sums);
        }

        /// 4 rows from `first` × the 8 columns of the panel's `half`: for each block, 8 groups
        /// of 4 inputs, each one load of the half panel's bytes and per row a `vpmaddubsw`
        /// (weights unsigned, activations signed) into 16-bit pair sums, widened to i32 every
        /// four groups by `vpmaddwd`; then the block's sums scaled into the f32 sums.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn quarter(
            tile: &Tile<'_>,
            weights: &PanelRef<'_>,
            half: usize,
            first: usize,
            out: &mut [[f32; LANES]; TILE_ROWS],
        ) {
            assert!(half < 2 && first + ROWS <= TILE_ROWS);
            let blocks = tile.blocks;
            let row_bytes = blocks * BLOCK;
            let activations = tile.bytes.as_ptr();
            let panel = weights.bytes.as_ptr();
            let ones = _mm256_set1_epi16(1);
            let mut sums: [__m256; ROWS] = [_mm256_setzero_ps(); ROWS];
            for block in 0..blocks {
                let mut dots: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
                for narrow in (0..GROUPS).step_by(NARROW_GROUPS) {
                    let mut pairs: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
                    for group in narrow..narrow + NARROW_GROUPS {
                        // SAFETY: the panel holds `blocks` blocks of 8 groups of 16 lanes × 4
                        // bytes, of which this reads one half's 8 lanes, and each row `blocks ·
                        // 32` bytes (checked by the caller); the loads are unaligned.
                        unsafe {
                            let column = _mm256_loadu_si256(
                                panel
                                    .add(((block * GROUPS + group) * LANES + half * HALF) * GROUP)
                                    .cast(),
                            );
                            for (row, pair) in pairs.iter_mut().enumerate() {
                                let four = activations
                                    .add((first + row) * row_bytes + block * BLOCK + group * GROUP)
                                    .cast::<i32>()
                                    .read_unaligned();
                                let products =
                                    _mm256_maddubs_epi16(column, _mm256_set1_epi32(four));
                                *pair = _mm256_add_epi16(*pair, products);
                            }
                        }
                    }
                    for (dot, pair) in dots.iter_mut().zip(&pairs) {
                        *dot = _mm256_add_epi32(*dot, _mm256_madd_epi16(*pair, ones));
                    }
                }
                // SAFETY: as above, for the half's 8 scales and minimums and the rows' block
                // scales and sums.
                unsafe {
                    let at = block * LANES + half * HALF;
                    let scale = _mm256_loadu_ps(weights.scales.as_ptr().add(at));
                    let minimum = _mm256_loadu_ps(weights.minimums.as_ptr().add(at));
                    for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                        let at = (first + row) * blocks + block;
                        let both =
                            _mm256_mul_ps(scale, _mm256_set1_ps(*tile.scales.get_unchecked(at)));
                        *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*dot), both, *sum);
                        *sum = _mm256_fmadd_ps(
                            minimum,
                            _mm256_set1_ps(*tile.block_sums.get_unchecked(at)),
                            *sum,
                        );
                    }
                }
            }
            for (row, sum) in sums.iter().enumerate() {
                // SAFETY: each row of `out` holds 16 f32, of which this writes one half.
                unsafe { _mm256_storeu_ps(out[first + row].as_mut_ptr().add(half * HALF), *sum) };
            }
        }
    }
}
