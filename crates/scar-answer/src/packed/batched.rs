//! Many rows at once: a prompt's activations times a quantized matrix in byte products.
//!
//! Reading a prompt is bound by arithmetic, not by the weights' bytes, and byte products do
//! more per instruction than f32 multiply-adds. For each call, the matrix's weights are
//! unpacked once into panels of 16 output columns, one unsigned byte a weight (a nibble, a
//! nibble and its fifth bit, a `Q6_K` weight's six bits, or a `Q8_0` weight plus 128) with an
//! f32 scale and minimum per column and span of inputs (32, or `Q6_K`'s 16): weight = scale ·
//! byte + minimum, the file's weights. A panel's 4 consecutive inputs for its 16 columns are
//! 64 consecutive bytes. The activations are quantized per block of 32 to signed bytes, as for
//! decoding and as llama.cpp does for its prompts. Each span's byte products sum exactly in
//! integers for 8 rows and 16 columns, and only then turn into f32: scaled by both scales, plus
//! the minimum times the activations' sum over the span. Two kernels read the panels:
//! - AVX-512 VNNI: one `vpdpbusd` a row and group, 64 products into 16 i32 sums;
//! - AVX2: half a panel at a time, `vpmaddubsw` into 16-bit pair sums, as many groups of them
//!   added as stay under 2¹⁵ (8 for nibbles, 4 for 5 bits, 2 for 6) before `vpmaddwd` widens
//!   them to i32. `Q8_0`'s bytes would overflow at once, so its prompts stay on the f32
//!   product there.
//!
//! `Q6_K` spans are unpacked here from the file's super-blocks, which decoding reads as they
//! are. Writing the bytes costs a quarter of the f32 weights that the dequantized
//! product writes, and the tiles read them from the core's caches.

use std::sync::Mutex;

use candle_core::Result;
pub(super) use x86::quantize_row_on;

use super::{BLOCK, Kernel, Layout, PackedRows, SUPER_BLOCK, f16_value, half, quantize_block};

/// Inputs one lane of `vpdpbusd` sums.
const GROUP: usize = 4;
/// Output columns in a panel: one 512-bit register of i32 sums.
const LANES: usize = 16;
/// Rows a tile computes side by side.
const TILE_ROWS: usize = 8;
/// Most rows one task takes: their bytes stay in the core's cache while every panel it
/// computes passes over them.
const TASK_ROWS: usize = 64;
/// Weights a `Q6_K` scale covers.
pub(super) const Q6_K_SPAN: usize = 16;
/// The largest `Q6_K` weight, unsigned: six bits.
const Q6_K_WIDEST: u8 = 63;
/// Bytes of a `Q6_K` super-block: 128 of low nibbles, 64 of high bit pairs, 16 signed 8-bit
/// scales, then its f16 factor.
pub(super) const Q6_K_BLOCK_BYTES: usize =
    SUPER_BLOCK / 2 + SUPER_BLOCK / 4 + SUPER_BLOCK / Q6_K_SPAN + 2;
/// The largest sum of 16-bit pairs AVX2 may add up before widening: `vpmaddwd`'s inputs are
/// signed 16-bit.
const PAIR_SUMS_MOST: usize = i16::MAX as usize;

/// One panel's or one row's bytes and its two f32 values per span, for one task to fill.
type Parts<'a, T> = Mutex<(&'a mut [T], &'a mut [f32], &'a mut [f32])>;

/// Runs `fill(i, values, first, second)` for every `i < count` on candle's pool, with part `i`
/// of each of the three slices, cut `sizes` long. The parts are disjoint, each behind a lock of
/// its own, so that the pool's one shared closure can hand them to its threads.
fn fill_parts<T: Send>(
    (values, first, second): (&mut [T], &mut [f32], &mut [f32]),
    (value_size, first_size, second_size): (usize, usize, usize),
    count: usize,
    fill: impl Fn(usize, &mut [T], &mut [f32], &mut [f32]) + Sync,
) {
    let parts: Vec<Parts<'_, T>> = values
        .chunks_mut(value_size)
        .zip(first.chunks_mut(first_size))
        .zip(second.chunks_mut(second_size))
        .map(|((values, first), second)| Mutex::new((values, first, second)))
        .take(count)
        .collect();
    candle_core::utils::barrier_pool().execute_chunked(count, |range| {
        for index in range {
            let mut part = parts[index]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (values, first, second) = &mut *part;
            fill(index, values, first, second);
        }
    });
}

/// A matrix's weights unpacked for one call: `bytes` at `((p · groups + g) · 16 + l) · 4 + j`
/// is column `16p + l`'s input `4g + j`; `scales` and `minimums` at `(p · spans + s) · 16 + l`
/// for the span of inputs `s · span` onwards. Columns past the matrix have zero weights,
/// scales and minimums.
struct Panels {
    kernel: Kernel,
    /// Inputs a scale and a minimum cover: 32, or 16 for `Q6_K`.
    span: usize,
    /// Groups of inputs whose 16-bit pair sums AVX2 adds up before widening them.
    narrow: usize,
    bytes: Vec<u8>,
    scales: Vec<f32>,
    minimums: Vec<f32>,
    /// Output columns, and inputs.
    outputs: usize,
    columns: usize,
}

/// Rows of activations as signed bytes per block of 32 with the block's scale, and for each
/// span of the weights' the scale times the sum of its bytes (which the weights' minimums
/// multiply). Rows are padded with zeros to whole tiles.
struct Quantized {
    bytes: Vec<i8>,
    scales: Vec<f32>,
    span_sums: Vec<f32>,
    columns: usize,
    span: usize,
}

impl Kernel {
    /// True where it multiplies many rows of weights up to `widest` at once. AVX2's 16-bit
    /// pair sums take weights of 6 bits at most, not `Q8_0`'s bytes (up to 255).
    fn multiplies_rows(self, widest: u8) -> bool {
        self == Self::Avx512Vnni || narrow_groups(widest) > 0
    }

    /// The formats whose prompts it reads in byte products, as a person reads it.
    pub(crate) fn prompt_formats(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "Q8_0, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K and Q6_K",
            Self::Avx2 => "Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K and Q6_K",
        }
    }
}

/// Groups of inputs (a power of two) whose pair sums stay in 16 bits for weights up to
/// `widest` against activations of magnitude 127: 8 for nibbles, 4 for 5 bits, 2 for 6.
fn narrow_groups(widest: u8) -> usize {
    let most = PAIR_SUMS_MOST / (2 * 127 * usize::from(widest).max(1));
    if most == 0 { 0 } else { 1 << most.ilog2() }
}

impl PackedRows {
    /// The largest unsigned weight of its format (see [`Self::unsigned_span`]).
    fn widest(&self) -> u8 {
        match self.layout {
            Layout::Q8_0 { .. } => u8::MAX,
            Layout::Nibbles { .. } => 15,
            Layout::Fives { .. } => 31,
            Layout::Sixes => Q6_K_WIDEST,
        }
    }

    /// True where [`Self::product_rows`] runs: every format on AVX-512 VNNI, all but `Q8_0` on
    /// AVX2.
    pub(crate) fn multiplies_rows(&self) -> bool {
        self.kernel.multiplies_rows(self.widest())
    }

    /// `x · Wᵀ` for `rows` rows of `columns` values each (`x` row after row): `rows · self.rows`
    /// values. Each row's products are the file's weights times its quantized activations, as
    /// [`Self::product`] computes one row's, summed in another order.
    pub(crate) fn product_rows(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        if !self.multiplies_rows() {
            candle_core::bail!("the batched product does not run on this CPU and format");
        }
        let panels = Panels::new(
            self.kernel,
            (self.rows, self.columns),
            self.layout.span(),
            self.widest(),
            |row, span, weights| self.unsigned_span(row, span, weights),
        );
        panels.product(x, rows)
    }

    /// Span `span` of row `row` as unsigned bytes `u` into `weights`; its scale and its
    /// minimum: weight `j` is `scale · u[j] + minimum`.
    fn unsigned_span(&self, row: usize, span: usize, weights: &mut [u8]) -> (f32, f32) {
        // The span's block, where spans are blocks (every layout but `Sixes`).
        let index = row * self.columns / BLOCK + span;
        match &self.layout {
            Layout::Q8_0 { scales } => {
                let signed = &self.weights[index * BLOCK..][..BLOCK];
                for (weight, &q) in weights.iter_mut().zip(signed) {
                    *weight = q ^ 0x80;
                }
                let scale = f16_value(scales[index]);
                (scale, -128.0 * scale)
            }
            Layout::Nibbles { scales } | Layout::Fives { scales, .. } => {
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
                scales.block(index)
            }
            Layout::Sixes => {
                let spans = SUPER_BLOCK / Q6_K_SPAN;
                let block = (row * self.columns / SUPER_BLOCK + span / spans) * Q6_K_BLOCK_BYTES;
                q6_k_span(
                    &self.weights[block..][..Q6_K_BLOCK_BYTES],
                    span % spans,
                    weights,
                )
            }
        }
    }
}

/// Span `index` (of 16) of a `Q6_K` super-block as unsigned 6-bit weights `q` into `weights`;
/// its scale and minimum: the file's weight is `d · scale[index] · (q − 32)`. The super-block's
/// two halves of 128 weights each take 64 bytes of low nibbles and 32 of high bit pairs:
/// weight `32k + l` of a half (k < 4, l < 32) has its low nibble in byte `l` (k even) or
/// `l + 32` (k odd), low half for k < 2, and its high bits at bit `2k` of byte `l`.
pub(super) fn q6_k_span(block: &[u8], index: usize, weights: &mut [u8]) -> (f32, f32) {
    let (low, rest) = block.split_at(SUPER_BLOCK / 2);
    let (high, rest) = rest.split_at(SUPER_BLOCK / 4);
    let (scales, d) = rest.split_at(SUPER_BLOCK / Q6_K_SPAN);
    let (half_index, within) = (index / 8, index % 8);
    let (k, first) = (within / 2, within % 2 * Q6_K_SPAN);
    let (low, high) = (
        &low[64 * half_index..][..64],
        &high[32 * half_index..][..32],
    );
    for (i, weight) in weights.iter_mut().enumerate() {
        let l = first + i;
        let byte = low[l + 32 * (k % 2)];
        let nibble = if k < 2 { byte & 0x0F } else { byte >> 4 };
        *weight = nibble | (high[l] >> (2 * k) & 3) << 4;
    }
    let scale = half(d) * f32::from(scales[index].cast_signed());
    (scale, -32.0 * scale)
}

impl Panels {
    /// The `outputs × columns` matrix whose span `s` of row `r` `fill(r, s, bytes)` writes as
    /// unsigned bytes up to `widest`, returning its scale and minimum; panels in parallel.
    fn new(
        kernel: Kernel,
        (outputs, columns): (usize, usize),
        span: usize,
        widest: u8,
        fill: impl Fn(usize, usize, &mut [u8]) -> (f32, f32) + Sync,
    ) -> Self {
        let panel_count = outputs.div_ceil(LANES);
        let spans = columns / span;
        let mut panels = Self {
            kernel,
            span,
            narrow: narrow_groups(widest),
            bytes: vec![0; panel_count * columns * LANES],
            scales: vec![0.0; panel_count * spans * LANES],
            minimums: vec![0.0; panel_count * spans * LANES],
            outputs,
            columns,
        };
        let (panel_bytes, panel_scales) = (panels.panel_bytes(), panels.panel_scales());
        fill_parts(
            (&mut panels.bytes, &mut panels.scales, &mut panels.minimums),
            (panel_bytes, panel_scales, panel_scales),
            panel_count,
            |panel, bytes, scales, minimums| {
                let mut span_weights = [0u8; BLOCK];
                let weights = &mut span_weights[..span];
                for lane in 0..LANES.min(outputs - panel * LANES) {
                    for index in 0..spans {
                        let (scale, minimum) = fill(panel * LANES + lane, index, weights);
                        scales[index * LANES + lane] = scale;
                        minimums[index * LANES + lane] = minimum;
                        for (group, four) in weights.chunks_exact(GROUP).enumerate() {
                            let at = ((index * span / GROUP + group) * LANES + lane) * GROUP;
                            bytes[at..at + GROUP].copy_from_slice(four);
                        }
                    }
                }
            },
        );
        panels
    }

    fn panel_bytes(&self) -> usize {
        self.columns * LANES
    }

    fn panel_scales(&self) -> usize {
        self.columns / self.span * LANES
    }

    /// `x · Wᵀ` for `rows` rows of `x`: row after row, `outputs` values each.
    fn product(&self, x: &[f32], rows: usize) -> Result<Vec<f32>> {
        if x.len() != rows * self.columns {
            candle_core::bail!(
                "{} values for {rows} rows of a matrix of {} columns",
                x.len(),
                self.columns
            );
        }
        let activations = Quantized::new(x, rows, self.columns, self.span, self.kernel);
        let panel_count = self.outputs.div_ceil(LANES);
        let row_tasks = rows.div_ceil(TASK_ROWS);
        // Enough tasks for every thread, even for a short prompt: split the columns too.
        let threads = candle_core::utils::get_num_threads();
        let column_parts = (4 * threads).div_ceil(row_tasks).clamp(1, panel_count);
        let panels_per_part = panel_count.div_ceil(column_parts);
        let out = Mutex::new(vec![0f32; rows * self.outputs]);
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
                    self.multiply(&activations, first_row, task_rows, first_panel..last_panel);
                let first_column = first_panel * LANES;
                let width = ((last_panel - first_panel) * LANES).min(self.outputs - first_column);
                let mut out = out
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for (row, sums) in sums
                    .chunks_exact((last_panel - first_panel) * LANES)
                    .enumerate()
                {
                    let at = (first_row + row) * self.outputs + first_column;
                    out[at..at + width].copy_from_slice(&sums[..width]);
                }
            }
        });
        Ok(out
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
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
                narrow: self.narrow,
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

impl Quantized {
    fn new(x: &[f32], rows: usize, columns: usize, span: usize, kernel: Kernel) -> Self {
        let (blocks, spans) = (columns / BLOCK, columns / span);
        let padded = rows.div_ceil(TILE_ROWS) * TILE_ROWS;
        let mut quantized = Self {
            bytes: vec![0; padded * columns],
            scales: vec![0.0; padded * blocks],
            span_sums: vec![0.0; padded * spans],
            columns,
            span,
        };
        fill_parts(
            (
                &mut quantized.bytes,
                &mut quantized.scales,
                &mut quantized.span_sums,
            ),
            (columns, blocks, spans),
            rows,
            |row, bytes, scales, sums| {
                let values = &x[row * columns..][..columns];
                quantize_row_on(kernel, values, bytes, scales, sums);
            },
        );
        quantized
    }

    /// The tile of rows from `first`.
    fn tile(&self, first: usize) -> Tile<'_> {
        let (blocks, spans) = (self.columns / BLOCK, self.columns / self.span);
        Tile {
            bytes: &self.bytes[first * self.columns..][..TILE_ROWS * self.columns],
            scales: &self.scales[first * blocks..][..TILE_ROWS * blocks],
            span_sums: &self.span_sums[first * spans..][..TILE_ROWS * spans],
            columns: self.columns,
            span: self.span,
        }
    }
}

/// `TILE_ROWS` rows of quantized activations.
struct Tile<'a> {
    bytes: &'a [i8],
    scales: &'a [f32],
    span_sums: &'a [f32],
    columns: usize,
    span: usize,
}

/// One panel of unpacked weights.
struct PanelRef<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
    minimums: &'a [f32],
    narrow: usize,
}

/// One row's values quantized per block of 32, for prompts and for decoding
/// ([`super::Activations`]): the scale maps the largest magnitude to 127, and each value rounds
/// to the nearest step; and each span's share of a block, the scale times the sum of its bytes
/// (`sums` as many as the row has spans).
// Inlined into its builds for each kernel's instructions.
#[allow(clippy::inline_always)]
#[inline(always)]
fn quantize_row(row: &[f32], bytes: &mut [i8], scales: &mut [f32], sums: &mut [f32]) {
    let spans_per_block = sums.len() / scales.len();
    for (((values, bytes), scale), sums) in row
        .chunks_exact(BLOCK)
        .zip(bytes.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
        .zip(sums.chunks_exact_mut(spans_per_block))
    {
        *scale = quantize_block(values, bytes);
        for (span, sum) in bytes.chunks_exact(BLOCK / spans_per_block).zip(sums) {
            *sum = *scale * span.iter().map(|&q| i32::from(q)).sum::<i32>() as f32;
        }
    }
}

#[allow(unsafe_code)]
mod x86 {
    use super::{BLOCK, GROUP, Kernel, LANES, PanelRef, Q6_K_SPAN, TILE_ROWS, Tile};

    /// [`super::quantize_row`] compiled for the kernel's instructions: every row of a prompt is
    /// quantized for every matrix, decoding's row for every matrix a token, and the portable
    /// build's rounding is scalar.
    pub(in crate::packed) fn quantize_row_on(
        kernel: Kernel,
        row: &[f32],
        bytes: &mut [i8],
        scales: &mut [f32],
        sums: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernel` is made only where the CPU has its instructions.
        unsafe {
            match kernel {
                Kernel::Avx512Vnni => avx512::quantize_row(row, bytes, scales, sums),
                Kernel::Avx2 => avx2::quantize_row(row, bytes, scales, sums),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = kernel;
            super::quantize_row(row, bytes, scales, sums);
        }
    }

    /// The sums of a tile of rows against a panel, into `out[row]`.
    pub(super) fn tile(
        kernel: Kernel,
        tile: &Tile<'_>,
        weights: &PanelRef<'_>,
        out: &mut [[f32; LANES]; TILE_ROWS],
    ) {
        let (columns, span) = (tile.columns, tile.span);
        assert!(span == BLOCK || span == Q6_K_SPAN);
        assert_eq!(tile.bytes.len(), TILE_ROWS * columns);
        assert_eq!(tile.scales.len(), TILE_ROWS * columns / BLOCK);
        assert_eq!(tile.span_sums.len(), TILE_ROWS * columns / span);
        assert_eq!(weights.bytes.len(), columns * LANES);
        assert_eq!(weights.scales.len(), columns / span * LANES);
        assert_eq!(weights.minimums.len(), columns / span * LANES);
        assert!(kernel == Kernel::Avx512Vnni || (span / GROUP).is_multiple_of(weights.narrow));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Kernel` is made only where the CPU has its instructions; the lengths were
        // checked above.
        unsafe {
            match (kernel, span) {
                (Kernel::Avx512Vnni, BLOCK) => avx512::tile::<BLOCK>(tile, weights, out),
                (Kernel::Avx512Vnni, _) => avx512::tile::<Q6_K_SPAN>(tile, weights, out),
                (Kernel::Avx2, _) => {
                    for half in 0..2 {
                        for first in [0, TILE_ROWS / 2] {
                            if span == BLOCK {
                                avx2::quarter::<BLOCK>(tile, weights, half, first, out);
                            } else {
                                avx2::quarter::<Q6_K_SPAN>(tile, weights, half, first, out);
                            }
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

        use super::{BLOCK, GROUP, LANES, PanelRef, TILE_ROWS, Tile};

        #[target_feature(enable = "avx512f,avx512bw")]
        pub(super) fn quantize_row(
            row: &[f32],
            bytes: &mut [i8],
            scales: &mut [f32],
            sums: &mut [f32],
        ) {
            super::super::quantize_row(row, bytes, scales, sums);
        }

        /// 8 rows × 16 columns: for each span of `SPAN` inputs, its groups of 4, each one load
        /// of the panel's bytes and a `vpdpbusd` per row with the row's 4 bytes in every lane;
        /// then the span's i32 sums scaled into the f32 sums.
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        pub(super) unsafe fn tile<const SPAN: usize>(
            tile: &Tile<'_>,
            weights: &PanelRef<'_>,
            out: &mut [[f32; LANES]; TILE_ROWS],
        ) {
            let columns = tile.columns;
            let (blocks, spans) = (columns / BLOCK, columns / SPAN);
            let activations = tile.bytes.as_ptr();
            let panel = weights.bytes.as_ptr();
            let mut sums: [__m512; TILE_ROWS] = [_mm512_setzero_ps(); TILE_ROWS];
            for span in 0..spans {
                let mut dots: [__m512i; TILE_ROWS] = [_mm512_setzero_si512(); TILE_ROWS];
                for group in span * SPAN / GROUP..(span + 1) * SPAN / GROUP {
                    // SAFETY: the panel holds `columns / 4` groups of 16 lanes × 4 bytes, and
                    // each row `columns` bytes (checked by the caller); the loads are
                    // unaligned.
                    unsafe {
                        let column = _mm512_loadu_si512(panel.add(group * LANES * GROUP).cast());
                        for (row, dot) in dots.iter_mut().enumerate() {
                            let four = activations
                                .add(row * columns + group * GROUP)
                                .cast::<i32>()
                                .read_unaligned();
                            *dot = _mm512_dpbusd_epi32(*dot, column, _mm512_set1_epi32(four));
                        }
                    }
                }
                // SAFETY: as above, for the span's 16 scales and minimums, the rows' block
                // scales and their span sums.
                unsafe {
                    let scale = _mm512_loadu_ps(weights.scales.as_ptr().add(span * LANES));
                    let minimum = _mm512_loadu_ps(weights.minimums.as_ptr().add(span * LANES));
                    for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                        let block = row * blocks + span * SPAN / BLOCK;
                        let both =
                            _mm512_mul_ps(scale, _mm512_set1_ps(*tile.scales.get_unchecked(block)));
                        *sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*dot), both, *sum);
                        let span_sum = *tile.span_sums.get_unchecked(row * spans + span);
                        *sum = _mm512_fmadd_ps(minimum, _mm512_set1_ps(span_sum), *sum);
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

        use super::{BLOCK, GROUP, LANES, PanelRef, TILE_ROWS, Tile};

        /// Half a panel's columns.
        const HALF: usize = LANES / 2;
        /// Rows a quarter of the tile takes.
        const ROWS: usize = TILE_ROWS / 2;

        #[target_feature(enable = "avx2,fma")]
        pub(super) fn quantize_row(
            row: &[f32],
            bytes: &mut [i8],
            scales: &mut [f32],
            sums: &mut [f32],
        ) {
            super::super::quantize_row(row, bytes, scales, sums);
        }

        /// 4 rows from `first` × the 8 columns of the panel's `half`: for each span of `SPAN`
        /// inputs, its groups of 4, each one load of the half panel's bytes and per row a
        /// `vpmaddubsw` (weights unsigned, activations signed) into 16-bit pair sums, widened
        /// to i32 by `vpmaddwd` every `weights.narrow` groups (before they could overflow);
        /// then the span's sums scaled into the f32 sums.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn quarter<const SPAN: usize>(
            tile: &Tile<'_>,
            weights: &PanelRef<'_>,
            half: usize,
            first: usize,
            out: &mut [[f32; LANES]; TILE_ROWS],
        ) {
            assert!(half < 2 && first + ROWS <= TILE_ROWS && weights.narrow > 0);
            let columns = tile.columns;
            let (blocks, spans) = (columns / BLOCK, columns / SPAN);
            let activations = tile.bytes.as_ptr();
            let panel = weights.bytes.as_ptr();
            let ones = _mm256_set1_epi16(1);
            let mut sums: [__m256; ROWS] = [_mm256_setzero_ps(); ROWS];
            for span in 0..spans {
                let mut dots: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
                let groups = span * SPAN / GROUP..(span + 1) * SPAN / GROUP;
                for narrow in groups.step_by(weights.narrow) {
                    let mut pairs: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
                    for group in narrow..narrow + weights.narrow {
                        // SAFETY: the panel holds `columns / 4` groups of 16 lanes × 4 bytes,
                        // of which this reads one half's 8 lanes, and each row `columns` bytes
                        // (checked by the caller); the loads are unaligned.
                        unsafe {
                            let column = _mm256_loadu_si256(
                                panel.add((group * LANES + half * HALF) * GROUP).cast(),
                            );
                            for (row, pair) in pairs.iter_mut().enumerate() {
                                let four = activations
                                    .add((first + row) * columns + group * GROUP)
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
                // SAFETY: as above, for the half's 8 scales and minimums, the rows' block
                // scales and their span sums.
                unsafe {
                    let at = span * LANES + half * HALF;
                    let scale = _mm256_loadu_ps(weights.scales.as_ptr().add(at));
                    let minimum = _mm256_loadu_ps(weights.minimums.as_ptr().add(at));
                    for (row, (sum, dot)) in sums.iter_mut().zip(&dots).enumerate() {
                        let block = (first + row) * blocks + span * SPAN / BLOCK;
                        let both =
                            _mm256_mul_ps(scale, _mm256_set1_ps(*tile.scales.get_unchecked(block)));
                        *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*dot), both, *sum);
                        let span_sum = *tile.span_sums.get_unchecked((first + row) * spans + span);
                        *sum = _mm256_fmadd_ps(minimum, _mm256_set1_ps(span_sum), *sum);
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
