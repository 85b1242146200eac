//! Weight matrices laid out for decoding. One token's activations times a weight matrix is the
//! product decoding spends its time in. Here a matrix's quantized weights are stored row after
//! row with the block scales apart, so that two blocks load at once, and the activations are
//! quantized to bytes per block of 32, as llama.cpp quantizes them; a block's byte products sum
//! exactly in integers. Two kernels read that layout, chosen at run time:
//! - AVX-512 VNNI: one `vpdpbusd` multiplies and sums 64 byte pairs;
//! - AVX2 (every x86-64 laptop of the last decade): `vpmaddubsw` then `vpmaddwd` on 32 pairs at
//!   a time. The first pairs an unsigned byte with a signed one and saturates at 16 bits, which
//!   these operands never reach: activations' magnitudes (at most 127) against weights of −127
//!   to 127, or nibbles (at most 31 with a fifth bit) against activations, whose pair sums a
//!   step adds two of before widening. Its nibble loop takes two pairs of blocks a step, their
//!   four scales converted at once, and finds the fifth bits laid out so that one shift a lane
//!   places them ([`Kernel::lay_out_fifths`]).
//!
//! Formats: `Q8_0`; nibbles with a scale and a minimum per block of 32, which hold `Q4_1` as
//! stored, `Q4_0` (its minimum is −8 × its scale) and `Q4_K` (each 32-weight sub-block's 6-bit
//! scale and minimum times the super-block's f16 factors, exact in f32); and nibbles with a
//! fifth bit each, which hold `Q5_1` as stored, `Q5_0` (its minimum is −16 × its scale) and
//! `Q5_K` (scales and minimums as `Q4_K`'s); and `Q6_K`'s super-blocks as the file holds them,
//! read by the AVX2 loop on both kernels: the file's weights exactly, in every case. Decoding
//! streams every weight once a token, so the scales keep the file's widths too: its f16 scales
//! (and `Q4_1`'s and `Q5_1`'s f16 minimums; `Q4_0`'s and `Q5_0`'s are a multiple of the scale),
//! or a K-quant's 6-bit scales and minimums a byte each with its super-block's factors. A step
//! reads the file's bytes (8 more a super-block for `Q4_K` and `Q5_K`, 4 to 6%), where f32 scales
//! read up to a third more (`Q4_0`, `Q4_K`). Rows are split across candle's own worker
//! threads, which run the rest of the model (a second pool would compete with them for the
//! cores); each kernel loops over its share of rows itself.
//!
//! Used where the CPU has AVX2 (or AVX-512 VNNI) and rows are whole pairs of blocks; the rest
//! stays on candle's kernels. Prompts go through byte products too, many rows at once
//! (`batched.rs`).

// Only x86-64 has kernels that read these layouts (elsewhere `Kernel::best` is `None` and
// candle's kernels decode), so there the parts only those kernels read go unused.
#![cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, unused_imports, unused_macros)
)]

mod batched;

use std::sync::atomic::AtomicU32;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Result, Tensor};

/// Weights of one block, in every format.
const BLOCK: usize = 32;
/// Weights of the two blocks one step of the product takes.
const PAIR: usize = 2 * BLOCK;
/// Bytes of a `Q8_0` block in a GGUF file: its f16 scale, then its 32 signed weights.
pub(crate) const Q8_0_BLOCK_BYTES: usize = 2 + BLOCK;
/// Weights of a K-quant super-block.
const SUPER_BLOCK: usize = 256;
/// Bytes of a `Q4_K` super-block: f16 scale and minimum factors, 12 bytes of 6-bit sub-block
/// scales and minimums, then 128 bytes of nibbles.
const Q4_K_BLOCK_BYTES: usize = 4 + 12 + SUPER_BLOCK / 2;
/// Bytes of a `Q5_K` super-block: `Q4_K`'s, with 32 bytes of fifth bits before the nibbles.
const Q5_K_BLOCK_BYTES: usize = Q4_K_BLOCK_BYTES + SUPER_BLOCK / 8;
/// Bytes of a `Q5_0` block: its f16 scale, the fifth bits of its 32 weights, their nibbles.
pub(crate) const Q5_0_BLOCK_BYTES: usize = 2 + 4 + BLOCK / 2;
/// Bytes of a `Q5_1` block: `Q5_0`'s with an f16 minimum after the scale.
const Q5_1_BLOCK_BYTES: usize = Q5_0_BLOCK_BYTES + 2;

/// The instructions our products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `vpdpbusd` on 512 bits.
    Avx512Vnni,
    /// `vpmaddubsw` and `vpmaddwd` on 256 bits.
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs, if any.
    pub(crate) fn best() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            // Both kernels read the f16 scales with F16C and sum the minimums' products with
            // AVX2 and FMA; every CPU with AVX2 has F16C.
            if !(has!("avx2") && has!("fma") && has!("f16c")) {
                return None;
            }
            if has!("avx512f")
                && has!("avx512bw")
                && has!("avx512vnni")
                && scar_embed::cpu::allows(scar_embed::cpu::Isa::Avx512)
            {
                Some(Self::Avx512Vnni)
            } else {
                Some(Self::Avx2)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// Every kernel this CPU runs, the fastest first.
    #[cfg(test)]
    fn all_here() -> Vec<Self> {
        let mut kernels: Vec<Self> = Self::best().into_iter().collect();
        if kernels == [Self::Avx512Vnni] {
            // `best` checked AVX2, FMA and F16C before it chose AVX-512.
            kernels.push(Self::Avx2);
        }
        kernels
    }

    /// A pair's fifth bits as this kernel reads them, from [`fifths_of_pair`]'s word. AVX-512
    /// takes that word as it is, a mask with bit `i` for byte `i` of the split nibbles (the low
    /// nibbles' 32 bytes, then the high ones'). AVX2 reads them in eight lanes of 8 bytes,
    /// lane `l` holding bytes `8l` to `8l + 7`; its word is transposed so that byte `j` holds
    /// the bit of byte `j` of every lane, the high nibbles' lanes in bits 0-3 and the low ones'
    /// in bits 4-7, and one shift a lane puts each bit in the 16s' place of its byte
    /// (`avx2::pair_products`).
    fn lay_out_fifths(self, word: u64) -> u64 {
        match self {
            Self::Avx512Vnni => word,
            Self::Avx2 => transpose_bits(word.rotate_left(32)),
        }
    }

    /// The inverse of [`Self::lay_out_fifths`].
    fn read_fifths(self, word: u64) -> u64 {
        match self {
            Self::Avx512Vnni => word,
            Self::Avx2 => transpose_bits(word).rotate_left(32),
        }
    }

    /// What it runs on, as a person reads it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Avx512Vnni => "AVX-512 VNNI",
            Self::Avx2 => "AVX2",
        }
    }
}

/// True for a matrix shape our product reads: rows of whole pairs of blocks.
pub(crate) fn takes_shape(dims: &[usize]) -> bool {
    matches!(dims, [_, columns] if columns.is_multiple_of(PAIR))
}

/// What a matrix keeps beside its weights' bytes, by how they are stored. Each format's scales
/// are in the widths the file holds them in: decoding reads them once a token with the weights.
enum Layout {
    /// A signed byte per weight; weight = scale · byte, with the file's f16 scale per block.
    Q8_0 { scales: Vec<u16> },
    /// A nibble per weight, block `b`'s 16 bytes holding weights 0-15 in their low halves and
    /// 16-31 in their high halves; weight = scale · nibble + minimum.
    Nibbles { scales: Scales },
    /// `Nibbles` with a fifth bit above each nibble; weight = scale · (nibble + 16 · bit) +
    /// minimum. `fifths`: each pair of blocks' fifth bits, one word, in the order the kernels
    /// split the pair's nibbles (block A's weights 0-15, B's 0-15, A's 16-31, B's 16-31) and
    /// laid out for the kernel ([`Kernel::lay_out_fifths`]).
    Fives { scales: Scales, fifths: Vec<u64> },
    /// `Q6_K`'s super-blocks as the file holds them, scales and all (see
    /// [`batched::q6_k_span`]): weight = d · scale · (six bits − 32), a signed 8-bit scale per
    /// span of 16 weights.
    Sixes,
}

impl Layout {
    /// Inputs a scale and a minimum cover.
    fn span(&self) -> usize {
        match self {
            Self::Sixes => batched::Q6_K_SPAN,
            _ => BLOCK,
        }
    }
}

/// A quantized matrix (rows × columns, applied as `x · Wᵀ`) in the layout of our product.
pub(crate) struct PackedRows {
    kernel: Kernel,
    /// The quantized weights, row after row.
    weights: Vec<u8>,
    layout: Layout,
    rows: usize,
    columns: usize,
}

impl PackedRows {
    /// `tensor` laid out for our product, or `None` where it cannot run: not `Q8_0`, `Q4_0`,
    /// `Q4_1`, `Q4_K`, `Q5_0`, `Q5_1`, `Q5_K` or `Q6_K`, not on the CPU, rows that are not
    /// whole pairs of blocks, a CPU without AVX2, FMA and F16C, or a `Q8_0` weight of −128
    /// (which llama.cpp never writes, and whose sign the product could not turn).
    pub(crate) fn from_tensor(tensor: &QTensor) -> Result<Option<Self>> {
        match Kernel::best() {
            Some(kernel) => Self::for_kernel(tensor, kernel),
            None => Ok(None),
        }
    }

    /// [`Self::from_tensor`] for one of the kernels that [`Kernel::best`] or
    /// `Kernel::all_here` (tests) gave.
    fn for_kernel(tensor: &QTensor, kernel: Kernel) -> Result<Option<Self>> {
        let &[rows, columns] = tensor.shape().dims() else {
            return Ok(None);
        };
        if !takes_shape(tensor.shape().dims()) || !tensor.device().is_cpu() {
            return Ok(None);
        }
        let dtype = tensor.dtype();
        let data = tensor.data()?;
        let weight_bytes = match dtype {
            GgmlDType::Q8_0 => rows * columns,
            GgmlDType::Q6K => data.len(),
            _ => rows * columns / 2,
        };
        let mut weights = Vec::with_capacity(weight_bytes);
        let layout = match dtype {
            // The f16 scale, then 32 signed bytes.
            GgmlDType::Q8_0 => {
                let scales = halves_then_weights(&data, Q8_0_BLOCK_BYTES, 1, &mut weights);
                if weights.contains(&i8::MIN.cast_unsigned()) {
                    return Ok(None);
                }
                Layout::Q8_0 { scales }
            }
            // The f16 scale, then 16 bytes of nibbles that stand for nibble − 8.
            GgmlDType::Q4_0 => Layout::Nibbles {
                scales: Scales::Halves {
                    scales: halves_then_weights(&data, 2 + BLOCK / 2, 1, &mut weights),
                    minimum_factor: -8.0,
                },
            },
            // The f16 scale and minimum, then 16 bytes of nibbles.
            GgmlDType::Q4_1 => Layout::Nibbles {
                scales: Scales::HalfPairs(halves_then_weights(
                    &data,
                    4 + BLOCK / 2,
                    2,
                    &mut weights,
                )),
            },
            GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
                q5_layout(&data, dtype == GgmlDType::Q5_1, kernel, &mut weights)
            }
            // A super-block's 64-weight chunks hold one sub-block in their 32 bytes' low
            // nibbles and the next in their high ones; each sub-block's weight is
            // `d · scale · nibble − dmin · minimum`, with a 6-bit scale and minimum.
            GgmlDType::Q4K => {
                for block in data.chunks_exact(Q4_K_BLOCK_BYTES) {
                    for bytes in block[16..].chunks_exact(BLOCK) {
                        push_k_chunk(&mut weights, bytes);
                    }
                }
                Layout::Nibbles {
                    scales: k_quant_scales(&data, Q4_K_BLOCK_BYTES),
                }
            }
            GgmlDType::Q5K => q5_k_layout(&data, kernel, &mut weights),
            GgmlDType::Q6K => {
                weights.extend_from_slice(&data);
                Layout::Sixes
            }
            _ => return Ok(None),
        };
        Ok(Some(Self {
            kernel,
            weights,
            layout,
            rows,
            columns,
        }))
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
        let activations = Activations::quantize(x, &self.layout, self.kernel);
        // Each row's result is written once, by whichever thread takes the row: as bits, so
        // that the threads share the output without locks.
        let out: Vec<AtomicU32> = (0..self.rows).map(|_| AtomicU32::new(0)).collect();
        candle_core::utils::barrier_pool().execute_chunked(self.rows, |rows| {
            x86::rows(self, rows, &activations, &out);
        });
        Ok(out
            .into_iter()
            .map(|bits| f32::from_bits(bits.into_inner()))
            .collect())
    }

    /// Row `row`'s weights' bytes.
    #[inline]
    fn row_bytes(&self, row: usize) -> &[u8] {
        let row_bytes = self.weights.len() / self.rows;
        &self.weights[row * row_bytes..(row + 1) * row_bytes]
    }

    /// The weights as an f32 matrix (rows, columns), for products of many rows at once.
    pub(crate) fn dequantize(&self, device: &Device) -> Result<Tensor> {
        let mut values = Vec::with_capacity(self.rows * self.columns);
        match &self.layout {
            Layout::Q8_0 { scales } => {
                for (block, &scale) in self.weights.chunks_exact(BLOCK).zip(scales) {
                    let scale = f16_value(scale);
                    values.extend(block.iter().map(|&q| f32::from(q.cast_signed()) * scale));
                }
            }
            Layout::Nibbles { scales } | Layout::Fives { scales, .. } => {
                for (index, block) in self.weights.chunks_exact(BLOCK / 2).enumerate() {
                    let (scale, minimum) = scales.block(index);
                    let bits = self.fifth_bits(index);
                    let weight = |nibble: u8, j: usize| {
                        let fifth = u8::from(bits >> j & 1 == 1) << 4;
                        f32::from(nibble | fifth) * scale + minimum
                    };
                    values.extend(block.iter().enumerate().map(|(j, &q)| weight(q & 0x0F, j)));
                    values.extend(
                        block
                            .iter()
                            .enumerate()
                            .map(|(j, &q)| weight(q >> 4, j + 16)),
                    );
                }
            }
            Layout::Sixes => {
                let mut unpacked = [0u8; batched::Q6_K_SPAN];
                for block in self.weights.chunks_exact(batched::Q6_K_BLOCK_BYTES) {
                    for span in 0..SUPER_BLOCK / batched::Q6_K_SPAN {
                        let (scale, _) = batched::q6_k_span(block, span, &mut unpacked);
                        // As candle and llama.cpp write it: the scale times the signed weight.
                        values.extend(unpacked.iter().map(|&q| scale * (f32::from(q) - 32.0)));
                    }
                }
            }
        }
        Tensor::from_vec(values, (self.rows, self.columns), device)
    }
}

impl PackedRows {
    /// Bytes the product reads for the whole matrix: weights, fifth bits and scales.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        let scale_bytes = |scales: &Scales| match scales {
            Scales::Halves { scales, .. } => 2 * scales.len(),
            Scales::HalfPairs(values) => 2 * values.len(),
            Scales::SuperBlocks { units, factors } => 2 * units.len() + 8 * factors.len(),
        };
        let beside = match &self.layout {
            Layout::Q8_0 { scales } => 2 * scales.len(),
            Layout::Nibbles { scales } => scale_bytes(scales),
            Layout::Fives { scales, fifths } => scale_bytes(scales) + 8 * fifths.len(),
            Layout::Sixes => 0,
        };
        self.weights.len() + beside
    }

    /// Block `index`'s fifth bits, bit `j` for weight `j` (none for other layouts than `Fives`).
    fn fifth_bits(&self, index: usize) -> u32 {
        let Layout::Fives { fifths, .. } = &self.layout else {
            return 0;
        };
        let pair = fifths[index / 2];
        let pair = self.kernel.read_fifths(pair);
        // The pair's word holds block A's bits 0-15, B's 0-15, A's 16-31, B's 16-31.
        let shift = if index.is_multiple_of(2) { 0 } else { 16 };
        let half = |word: u64| (word >> shift & 0xFFFF) as u32;
        half(pair) | half(pair >> 32) << 16
    }
}

/// Each block of nibbles' scale and minimum (weight = scale · unsigned weight + minimum).
enum Scales {
    /// The file's f16 scale per block, each minimum `factor · scale`: `Q4_0` (−8), `Q5_0` (−16).
    Halves {
        scales: Vec<u16>,
        minimum_factor: f32,
    },
    /// The file's f16 scale and minimum per block, side by side: `Q4_1`, `Q5_1`.
    HalfPairs(Vec<u16>),
    /// K-quants: each block's 6-bit scale and minimum, and per super-block of 8 blocks the
    /// factors they multiply, `d` and `−dmin` (f16 in the file). Their products are exact in
    /// f32.
    SuperBlocks {
        units: Vec<[u8; 2]>,
        factors: Vec<[f32; 2]>,
    },
}

impl Scales {
    /// Row `row`'s, of rows of `blocks` blocks.
    fn row(&self, row: usize, blocks: usize) -> RowScales<'_> {
        let blocks_of_row = row * blocks..(row + 1) * blocks;
        match self {
            Self::Halves {
                scales,
                minimum_factor,
            } => RowScales::Halves(HalfScales {
                scales: &scales[blocks_of_row],
                minimum_factor: *minimum_factor,
            }),
            Self::HalfPairs(values) => RowScales::HalfPairs(HalfPairScales(
                &values[2 * blocks_of_row.start..2 * blocks_of_row.end],
            )),
            // K-quants' rows are whole super-blocks (candle refuses other shapes).
            Self::SuperBlocks { units, factors } => {
                let per_super_block = SUPER_BLOCK / BLOCK;
                RowScales::SuperBlocks(SuperBlockScales {
                    factors: &factors[blocks_of_row.start / per_super_block
                        ..blocks_of_row.end / per_super_block],
                    units: &units[blocks_of_row],
                })
            }
        }
    }

    /// Block `index`'s scale and minimum (row after row).
    fn block(&self, index: usize) -> (f32, f32) {
        match self {
            Self::Halves {
                scales,
                minimum_factor,
            } => {
                let scale = f16_value(scales[index]);
                (scale, minimum_factor * scale)
            }
            Self::HalfPairs(values) => (
                f16_value(values[2 * index]),
                f16_value(values[2 * index + 1]),
            ),
            Self::SuperBlocks { units, factors } => {
                let [d, minus_dmin] = factors[index / (SUPER_BLOCK / BLOCK)];
                let [scale, minimum] = units[index];
                (d * f32::from(scale), minus_dmin * f32::from(minimum))
            }
        }
    }
}

/// One row's [`Scales`], each kind in a type of its own: the kernels' loops are built for each
/// kind, so that no step of a row tests which kind it reads.
#[derive(Clone, Copy)]
enum RowScales<'a> {
    Halves(HalfScales<'a>),
    HalfPairs(HalfPairScales<'a>),
    SuperBlocks(SuperBlockScales<'a>),
}

/// [`Scales::Halves`] of one row.
#[derive(Clone, Copy)]
struct HalfScales<'a> {
    scales: &'a [u16],
    minimum_factor: f32,
}

/// [`Scales::HalfPairs`] of one row.
#[derive(Clone, Copy)]
struct HalfPairScales<'a>(&'a [u16]);

/// [`Scales::SuperBlocks`] of one row.
#[derive(Clone, Copy)]
struct SuperBlockScales<'a> {
    units: &'a [[u8; 2]],
    factors: &'a [[f32; 2]],
}

/// One row of weights, as the kernels read it, with its scales as `S`.
struct Row<'a, S> {
    bytes: &'a [u8],
    scales: S,
    /// `Fives` only.
    fifths: &'a [u64],
}

/// A K-quant's scales, from the file's super-blocks of `block_bytes` bytes: each begins with
/// its f16 factors `d` and `dmin` (four bytes) and its eight sub-blocks' 6-bit scales and
/// minimums (the next twelve).
fn k_quant_scales(data: &[u8], block_bytes: usize) -> Scales {
    let super_blocks = data.chunks_exact(block_bytes);
    let factors = super_blocks
        .clone()
        .map(|block| [half(block), -half(&block[2..])])
        .collect();
    let units = super_blocks
        .flat_map(|block| {
            let packed: &[u8; 12] = block[4..16].try_into().expect("a whole super-block");
            (0..SUPER_BLOCK / BLOCK).map(move |j| q4_k_scale_and_minimum(j, packed))
        })
        .collect();
    Scales::SuperBlocks { units, factors }
}

/// A K-quant super-block's 64-weight chunk as two blocks of nibbles: its 32 `bytes` hold one
/// sub-block in their low nibbles and the next in their high ones.
fn push_k_chunk(weights: &mut Vec<u8>, bytes: &[u8]) {
    for shift in [0, 4] {
        let nibble = |i: usize| (bytes[i] >> shift) & 0x0F;
        weights.extend((0..BLOCK / 2).map(|i| nibble(i) | nibble(i + BLOCK / 2) << 4));
    }
}

/// Blocks of `block_bytes` bytes that open with `per_block` f16s (a scale, and a minimum where
/// the format has one) before their weights: the f16s' bits; the weights' bytes are appended
/// to `weights`.
fn halves_then_weights(
    data: &[u8],
    block_bytes: usize,
    per_block: usize,
    weights: &mut Vec<u8>,
) -> Vec<u16> {
    let mut halves = Vec::with_capacity(per_block * data.len() / block_bytes);
    for block in data.chunks_exact(block_bytes) {
        let (head, bytes) = block.split_at(2 * per_block);
        halves.extend(head.chunks_exact(2).map(half_bits));
        weights.extend_from_slice(bytes);
    }
    halves
}

/// `Q5_0`'s blocks (or with `with_minimums` `Q5_1`'s) as [`Layout::Fives`], their nibbles
/// appended to `weights`. `Q5_0`: the f16 scale, the 32 weights' fifth bits, then 16 bytes of
/// nibbles; the whole stands for (nibble + 16 · bit) − 16. `Q5_1`: an f16 minimum after the
/// scale, and the weight is scale · (nibble + 16 · bit) + minimum.
fn q5_layout(data: &[u8], with_minimums: bool, kernel: Kernel, weights: &mut Vec<u8>) -> Layout {
    let (block_bytes, bits_at) = if with_minimums {
        (Q5_1_BLOCK_BYTES, 4)
    } else {
        (Q5_0_BLOCK_BYTES, 2)
    };
    let blocks = data.len() / block_bytes;
    let mut halves = Vec::with_capacity(bits_at / 2 * blocks);
    let mut fifths = Vec::with_capacity(blocks / 2);
    for pair in data.chunks_exact(2 * block_bytes) {
        let (a, b) = pair.split_at(block_bytes);
        let bits = |block: &[u8]| {
            u32::from_le_bytes(block[bits_at..bits_at + 4].try_into().expect("4 bytes"))
        };
        fifths.push(kernel.lay_out_fifths(fifths_of_pair(bits(a), bits(b))));
        for block in [a, b] {
            halves.extend(block[..bits_at].chunks_exact(2).map(half_bits));
            weights.extend_from_slice(&block[bits_at + 4..]);
        }
    }
    let scales = if with_minimums {
        Scales::HalfPairs(halves)
    } else {
        Scales::Halves {
            scales: halves,
            minimum_factor: -16.0,
        }
    };
    Layout::Fives { scales, fifths }
}

/// `Q5_K`'s super-blocks as [`Layout::Fives`], their nibbles appended to `weights`: laid out
/// as `Q4_K`'s, with 32 bytes of fifth bits before the nibbles, bit `s` of byte `l` belonging
/// to weight `l` of sub-block `s`; a weight is `d · scale · (nibble + 16 · bit) − dmin ·
/// minimum`.
fn q5_k_layout(data: &[u8], kernel: Kernel, weights: &mut Vec<u8>) -> Layout {
    let mut fifths = Vec::with_capacity(data.len() / Q5_K_BLOCK_BYTES * SUPER_BLOCK / PAIR);
    for block in data.chunks_exact(Q5_K_BLOCK_BYTES) {
        let (high, low) = block[16..].split_at(SUPER_BLOCK / 8);
        let bits = |sub_block: usize| {
            (0..BLOCK).fold(0u32, |word, l| {
                word | u32::from(high[l] >> sub_block & 1) << l
            })
        };
        for (chunk, bytes) in low.chunks_exact(BLOCK).enumerate() {
            push_k_chunk(weights, bytes);
            let word = fifths_of_pair(bits(2 * chunk), bits(2 * chunk + 1));
            fifths.push(kernel.lay_out_fifths(word));
        }
    }
    Layout::Fives {
        scales: k_quant_scales(data, Q5_K_BLOCK_BYTES),
        fifths,
    }
}

/// A pair of blocks' fifth bits (bit `j` of each for its weight `j`) as one word, in the order
/// the kernels split the pair's nibbles: block A's weights 0-15, B's 0-15, A's 16-31, B's 16-31.
fn fifths_of_pair(a: u32, b: u32) -> u64 {
    let (a, b) = (u64::from(a), u64::from(b));
    (a & 0xFFFF) | (b & 0xFFFF) << 16 | (a >> 16) << 32 | (b >> 16) << 48
}

/// `word` as 8 × 8 bits, transposed: bit `j` of byte `i` goes to bit `i` of byte `j`.
fn transpose_bits(word: u64) -> u64 {
    // Swaps the bits across the diagonal in 1 × 1, then 2 × 2, then 4 × 4 squares.
    let mut word = word;
    for (shift, mask) in [
        (7, 0x00AA_00AA_00AA_00AA_u64),
        (14, 0x0000_CCCC_0000_CCCC),
        (28, 0x0000_0000_F0F0_F0F0),
    ] {
        let swapped = (word ^ word >> shift) & mask;
        word ^= swapped ^ swapped << shift;
    }
    word
}

/// The f16 at the start of `bytes`.
fn half(bytes: &[u8]) -> f32 {
    f16_value(half_bits(bytes))
}

/// The bits of the f16 at the start of `bytes`.
fn half_bits(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[0], bytes[1]])
}

/// The f16 whose bits are `bits`.
fn f16_value(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// Sub-block `j`'s 6-bit scale and minimum from a `Q4_K` super-block's 12 packed bytes: the
/// first four sub-blocks' in the low six bits of bytes 0-3 and 4-7, the last four's low four
/// bits in bytes 8-11 and their high two bits in the top bits of bytes 0-7.
fn q4_k_scale_and_minimum(j: usize, packed: &[u8; 12]) -> [u8; 2] {
    if j < 4 {
        [packed[j] & 63, packed[j + 4] & 63]
    } else {
        [
            (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        ]
    }
}

/// A block of activations as signed bytes into `out`, each rounded to the nearest step of the
/// returned scale (the largest magnitude over 127), as llama.cpp quantizes them.
// Inlined into the prompt's builds for each kernel's instructions, where it vectorises.
#[allow(clippy::inline_always)]
#[inline(always)]
fn quantize_block(values: &[f32], out: &mut [i8]) -> f32 {
    let largest = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = largest / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for (q, &v) in out.iter_mut().zip(values) {
        *q = (v * inverse).round() as i8;
    }
    scale
}

/// One row of activations quantized per block of 32: a scale (the largest magnitude over 127)
/// and rounded signed bytes, laid out as the weights' layout and the kernel need them.
struct Activations {
    /// `Q8_0`: the bytes' magnitudes, the unsigned side of the byte products (the weights'
    /// signs are turned by the activations'). `Nibbles` and `Fives`: the signed bytes, each
    /// pair of blocks in the order of the weights' nibbles once split (block A's 0-15, B's
    /// 0-15, A's 16-31, B's 16-31). `Sixes`: the signed bytes in their order.
    bytes: Vec<u8>,
    /// `Q8_0` on AVX-512: bit `i` of word `p` is set when value `64·p + i` is negative.
    negative: Vec<u64>,
    /// `Q8_0` on AVX2: the signed bytes, whose signs `vpsignb` gives the weights.
    signs: Vec<u8>,
    scales: Vec<f32>,
    /// Each span's block scale times the sum of its bytes, which the weights' minimums
    /// multiply: a span a block, `Sixes` a span of 16 (`Q8_0`'s minimums are 0: unread).
    span_sums: Vec<f32>,
}

impl Activations {
    fn quantize(x: &[f32], layout: &Layout, kernel: Kernel) -> Self {
        let mut quantized = vec![0i8; x.len()];
        let mut scales = vec![0.0; x.len() / BLOCK];
        let mut span_sums = vec![0.0; x.len() / layout.span()];
        batched::quantize_row_on(kernel, x, &mut quantized, &mut scales, &mut span_sums);
        let mut activations = Self {
            bytes: Vec::with_capacity(x.len()),
            negative: Vec::new(),
            signs: Vec::new(),
            scales,
            span_sums,
        };
        match layout {
            Layout::Q8_0 { .. } => {
                activations
                    .bytes
                    .extend(quantized.iter().map(|q| q.unsigned_abs()));
                match kernel {
                    Kernel::Avx512Vnni => {
                        activations.negative = vec![0; x.len() / PAIR];
                        for (i, &q) in quantized.iter().enumerate() {
                            if q < 0 {
                                activations.negative[i / PAIR] |= 1 << (i % PAIR);
                            }
                        }
                    }
                    Kernel::Avx2 => {
                        activations.signs = quantized.iter().map(|q| q.cast_unsigned()).collect();
                    }
                }
            }
            Layout::Nibbles { .. } | Layout::Fives { .. } => {
                for pair in quantized.chunks_exact(PAIR) {
                    let (a, b) = pair.split_at(BLOCK);
                    for half in [&a[..16], &b[..16], &a[16..], &b[16..]] {
                        activations
                            .bytes
                            .extend(half.iter().map(|q| q.cast_unsigned()));
                    }
                }
            }
            Layout::Sixes => {
                activations
                    .bytes
                    .extend(quantized.iter().map(|q| q.cast_unsigned()));
            }
        }
        activations
    }
}

mod x86 {
    use std::ops::Range;
    use std::sync::atomic::AtomicU32;

    use super::{Activations, Kernel, Layout, PackedRows};

    /// Rows `rows` of `matrix` times the activations, each into its place in `out` (as f32
    /// bits). The loop over rows runs inside each kernel, with the row's product inlined into
    /// it: a call a row cost as much as a short row's products.
    pub(super) fn rows(
        matrix: &PackedRows,
        rows: Range<usize>,
        x: &Activations,
        out: &[AtomicU32],
    ) {
        // The activations hold a byte per weight in every format.
        assert_eq!(x.bytes.len(), matrix.columns, "checked by `product`");
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a `Kernel` is made only by `Kernel::best` and `Kernel::all_here`, which
            // checked that the CPU has its features.
            #[allow(unsafe_code)]
            unsafe {
                match (matrix.kernel, &matrix.layout) {
                    (Kernel::Avx512Vnni, Layout::Q8_0 { scales }) => {
                        avx512::q8_0_rows(matrix, scales, rows, x, out);
                    }
                    (Kernel::Avx512Vnni, Layout::Nibbles { scales }) => {
                        avx512::nibbles_rows::<false>(matrix, scales, &[], rows, x, out);
                    }
                    (Kernel::Avx512Vnni, Layout::Fives { scales, fifths }) => {
                        avx512::nibbles_rows::<true>(matrix, scales, fifths, rows, x, out);
                    }
                    (Kernel::Avx2, Layout::Q8_0 { scales }) => {
                        avx2::q8_0_rows(matrix, scales, rows, x, out);
                    }
                    (Kernel::Avx2, Layout::Nibbles { scales }) => {
                        avx2::nibbles_rows::<false>(matrix, scales, &[], rows, x, out);
                    }
                    (Kernel::Avx2, Layout::Fives { scales, fifths }) => {
                        avx2::nibbles_rows::<true>(matrix, scales, fifths, rows, x, out);
                    }
                    // Every CPU with AVX-512 VNNI that `Kernel::best` takes has AVX2, FMA and
                    // F16C too.
                    (_, Layout::Sixes) => avx2::six_bit_rows(matrix, rows, x, out),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (matrix, rows, x, out);
            unreachable!("a Kernel is made only on x86-64")
        }
    }

    /// Each kernel's loops over rows, built with its instructions (`$features`) so that the
    /// row's product inlines into them.
    macro_rules! row_loops {
        ($features:tt) => {
            /// `Q8_0` rows, with the file's f16 scales per block.
            #[target_feature(enable = $features)]
            pub(super) fn q8_0_rows(
                matrix: &crate::packed::PackedRows,
                scales: &[u16],
                rows: std::ops::Range<usize>,
                x: &Activations,
                out: &[std::sync::atomic::AtomicU32],
            ) {
                let blocks = matrix.columns / crate::packed::BLOCK;
                for row in rows {
                    let weights = Row {
                        bytes: matrix.row_bytes(row),
                        scales: HalfScales {
                            scales: &scales[row * blocks..(row + 1) * blocks],
                            minimum_factor: 0.0,
                        },
                        fifths: &[],
                    };
                    let value = q8_0_row(&weights, x);
                    out[row].store(value.to_bits(), std::sync::atomic::Ordering::Relaxed);
                }
            }

            /// Rows of nibbles, with `FIVES` their fifth bits in `fifths` (a word a pair of
            /// blocks).
            #[target_feature(enable = $features)]
            pub(super) fn nibbles_rows<const FIVES: bool>(
                matrix: &crate::packed::PackedRows,
                scales: &crate::packed::Scales,
                fifths: &[u64],
                rows: std::ops::Range<usize>,
                x: &Activations,
                out: &[std::sync::atomic::AtomicU32],
            ) {
                use crate::packed::{BLOCK, PAIR, RowScales};
                let (blocks, pairs) = (matrix.columns / BLOCK, matrix.columns / PAIR);
                for row in rows {
                    let bytes = matrix.row_bytes(row);
                    let fifths = fifths
                        .get(row * pairs..(row + 1) * pairs)
                        .unwrap_or_default();
                    let value = match scales.row(row, blocks) {
                        RowScales::Halves(scales) => nibbles_row::<FIVES, _>(
                            &Row {
                                bytes,
                                scales,
                                fifths,
                            },
                            x,
                        ),
                        RowScales::HalfPairs(scales) => nibbles_row::<FIVES, _>(
                            &Row {
                                bytes,
                                scales,
                                fifths,
                            },
                            x,
                        ),
                        RowScales::SuperBlocks(scales) => nibbles_row::<FIVES, _>(
                            &Row {
                                bytes,
                                scales,
                                fifths,
                            },
                            x,
                        ),
                    };
                    out[row].store(value.to_bits(), std::sync::atomic::Ordering::Relaxed);
                }
            }
        };
    }

    /// What both kernels read of a pair of blocks besides their weights, and a sum of lanes.
    #[cfg(target_arch = "x86_64")]
    mod pairs {
        use std::arch::x86_64::{
            __m128, __m128i, _mm_add_ps, _mm_add_ss, _mm_castsi128_ps, _mm_cvtepi32_ps,
            _mm_cvtepu8_epi32, _mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtsi64_si128, _mm_cvtss_f32,
            _mm_loadl_epi64, _mm_loadu_ps, _mm_movehl_ps, _mm_mul_ps, _mm_set1_ps, _mm_setr_epi8,
            _mm_setr_ps, _mm_setzero_ps, _mm_shuffle_epi8, _mm_shuffle_ps, _mm_srli_si128,
        };

        use crate::packed::{BLOCK, HalfPairScales, HalfScales, SUPER_BLOCK, SuperBlockScales};

        // Runs once a pair of blocks, inside the kernels' loops: always inlined, where it takes
        // the kernel's instructions (a call a pair cost three times the product).
        /// Values `at` and `at + 1` of `values` in lanes 0 and 1, 0 in lanes 2 and 3.
        #[allow(clippy::inline_always)]
        #[inline(always)]
        pub(super) fn two(values: &[f32], at: usize) -> __m128 {
            assert!(at + 2 <= values.len());
            // SAFETY: in bounds, as just checked; `_mm_loadl_epi64` reads unaligned (the f32s
            // are only 4-aligned).
            #[allow(unsafe_code)]
            unsafe {
                _mm_castsi128_ps(_mm_loadl_epi64(values.as_ptr().add(at).cast()))
            }
        }

        /// Values `at` to `at + 3` of `values`.
        #[allow(clippy::inline_always)]
        #[inline(always)]
        pub(super) fn four(values: &[f32], at: usize) -> __m128 {
            assert!(at + 4 <= values.len());
            // SAFETY: in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            unsafe {
                _mm_loadu_ps(values.as_ptr().add(at))
            }
        }

        /// A row's scales, read a pair of blocks at a time, or two pairs.
        pub(in crate::packed) trait PairScales: Copy {
            /// Pair `pair`'s two scales and two minimums, each in lanes 0 and 1 (0 in 2 and 3).
            ///
            /// # Safety
            /// The CPU has F16C.
            #[allow(unsafe_code)]
            unsafe fn of_pair(self, pair: usize) -> (__m128, __m128);

            /// Blocks `4 · step` to `4 · step + 3`'s scales and minimums, a lane a block.
            ///
            /// # Safety
            /// The CPU has F16C and AVX2.
            #[allow(unsafe_code)]
            unsafe fn of_two_pairs(self, step: usize) -> (__m128, __m128);
        }

        /// `values[at..at + 4]`'s 8 bytes in the low half of a vector.
        #[allow(clippy::inline_always)]
        #[inline(always)]
        fn eight_bytes<T>(values: &[T], at: usize) -> __m128i {
            assert!(size_of::<T>() == 2 && at + 4 <= values.len());
            // SAFETY: 8 bytes in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            unsafe {
                _mm_loadl_epi64(values.as_ptr().add(at).cast())
            }
        }

        // Each runs once a pair of blocks, inside the kernels' loops: always inlined, where it
        // takes the kernel's instructions.
        impl PairScales for HalfScales<'_> {
            /// The f16 scales converted by `vcvtph2ps`, each minimum a multiple of its scale.
            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_pair(self, pair: usize) -> (__m128, __m128) {
                let bits =
                    u32::from(self.scales[2 * pair]) | u32::from(self.scales[2 * pair + 1]) << 16;
                // SAFETY: the CPU has F16C, as the caller promised (and SSE, as every x86-64).
                unsafe {
                    let scales = _mm_cvtph_ps(_mm_cvtsi32_si128(bits.cast_signed()));
                    (scales, _mm_mul_ps(scales, _mm_set1_ps(self.minimum_factor)))
                }
            }

            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_two_pairs(self, step: usize) -> (__m128, __m128) {
                // SAFETY: the CPU has F16C, as the caller promised.
                unsafe {
                    let scales = _mm_cvtph_ps(eight_bytes(self.scales, 4 * step));
                    (scales, _mm_mul_ps(scales, _mm_set1_ps(self.minimum_factor)))
                }
            }
        }

        impl PairScales for HalfPairScales<'_> {
            /// The f16 scales and minimums converted by `vcvtph2ps`.
            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_pair(self, pair: usize) -> (__m128, __m128) {
                let bits = self.0[4 * pair..4 * pair + 4]
                    .iter()
                    .rev()
                    .fold(0u64, |word, &half| word << 16 | u64::from(half));
                // SAFETY: the CPU has F16C, as the caller promised (and SSE, as every x86-64).
                unsafe {
                    // Scale A, minimum A, scale B, minimum B.
                    let four = _mm_cvtph_ps(_mm_cvtsi64_si128(bits.cast_signed()));
                    (
                        _mm_shuffle_ps::<0b00_00_10_00>(four, _mm_setzero_ps()),
                        _mm_shuffle_ps::<0b00_00_11_01>(four, _mm_setzero_ps()),
                    )
                }
            }

            /// The f16 scales and minimums converted by `vcvtph2ps`, two blocks' at a time.
            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_two_pairs(self, step: usize) -> (__m128, __m128) {
                // SAFETY: the CPU has F16C, as the caller promised.
                unsafe {
                    // Scale, minimum, scale, minimum: blocks 0 and 1, then 2 and 3.
                    let front = _mm_cvtph_ps(eight_bytes(self.0, 8 * step));
                    let back = _mm_cvtph_ps(eight_bytes(self.0, 8 * step + 4));
                    (
                        _mm_shuffle_ps::<0b10_00_10_00>(front, back),
                        _mm_shuffle_ps::<0b11_01_11_01>(front, back),
                    )
                }
            }
        }

        impl PairScales for SuperBlockScales<'_> {
            /// The 6-bit values times their super-block's factors.
            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_pair(self, pair: usize) -> (__m128, __m128) {
                let [d, minus_dmin] = self.factors[2 * pair * BLOCK / SUPER_BLOCK];
                let ([scale_a, minimum_a], [scale_b, minimum_b]) =
                    (self.units[2 * pair], self.units[2 * pair + 1]);
                // SAFETY: SSE, as every x86-64 has.
                unsafe {
                    (
                        _mm_setr_ps(d * f32::from(scale_a), d * f32::from(scale_b), 0.0, 0.0),
                        _mm_setr_ps(
                            minus_dmin * f32::from(minimum_a),
                            minus_dmin * f32::from(minimum_b),
                            0.0,
                            0.0,
                        ),
                    )
                }
            }

            /// The four blocks' 6-bit values spread to 32 bits, converted and multiplied by
            /// their super-block's factors (the four lie in one: it has eight).
            #[allow(clippy::inline_always, unsafe_code)]
            #[inline(always)]
            unsafe fn of_two_pairs(self, step: usize) -> (__m128, __m128) {
                let [d, minus_dmin] = self.factors[4 * step * BLOCK / SUPER_BLOCK];
                // SAFETY: the CPU has AVX2, as the caller promised, and so SSSE3 and SSE4.1.
                unsafe {
                    // Scale, minimum, scale, minimum, … a byte each: the scales to bytes 0-3,
                    // the minimums to bytes 4-7.
                    let apart = _mm_shuffle_epi8(
                        eight_bytes(self.units, 4 * step),
                        _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 0, 0, 0, 0, 0, 0, 0, 0),
                    );
                    let scales = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(apart));
                    let minimums = _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128::<4>(apart)));
                    (
                        _mm_mul_ps(scales, _mm_set1_ps(d)),
                        _mm_mul_ps(minimums, _mm_set1_ps(minus_dmin)),
                    )
                }
            }
        }

        /// The sum of the four lanes.
        #[target_feature(enable = "sse")]
        pub(super) fn horizontal_sum(four: __m128) -> f32 {
            let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
            _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps::<1>(two, two)))
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod avx512 {
        use std::arch::x86_64::{
            __m128, __m512i, _mm_fmadd_ps, _mm_mul_ps, _mm_setzero_ps, _mm256_and_si256,
            _mm256_loadu_si256, _mm256_set1_epi8, _mm256_srli_epi16, _mm512_castps128_ps512,
            _mm512_castsi256_si512, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
            _mm512_inserti64x4, _mm512_loadu_si512, _mm512_mask_add_epi8, _mm512_mask_sub_epi8,
            _mm512_permutexvar_ps, _mm512_reduce_add_ps, _mm512_set1_epi8, _mm512_setr_epi32,
            _mm512_setzero_ps, _mm512_setzero_si512,
        };

        use super::pairs::{PairScales, horizontal_sum, two};
        use crate::packed::{Activations, BLOCK, HalfScales, PAIR, Row};

        row_loops!("avx512f,avx512bw,avx512vnni,avx2,fma,f16c");

        /// 64 bytes at `at` of `bytes`, which holds at least `at + 64`.
        #[target_feature(enable = "avx512f")]
        fn load(bytes: &[u8], at: usize) -> __m512i {
            assert!(at + PAIR <= bytes.len());
            // SAFETY: in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_loadu_si512(bytes.as_ptr().add(at).cast())
            }
        }

        /// Two blocks a step: the weights whose activation is negative change sign, so that
        /// the activations' magnitudes (unsigned) times the weights (signed) sum, four products
        /// to a lane, in one `vpdpbusd`; lanes 0-7 hold the first block, 8-15 the second.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
        fn q8_0_row(weights: &Row<'_, HalfScales<'_>>, x: &Activations) -> f32 {
            let first_then_second =
                _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            let mut sum = _mm512_setzero_ps();
            for pair in 0..weights.bytes.len() / PAIR {
                let at = pair * PAIR;
                let w = load(weights.bytes, at);
                let signed = _mm512_mask_sub_epi8(w, x.negative[pair], _mm512_setzero_si512(), w);
                let products =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), load(&x.bytes, at), signed);
                // SAFETY: this kernel's CPUs have F16C.
                #[allow(unsafe_code)]
                let (scales, _) = unsafe { weights.scales.of_pair(pair) };
                let scales = _mm_mul_ps(scales, two(&x.scales, 2 * pair));
                sum = add_scaled(sum, products, scales, first_then_second);
            }
            _mm512_reduce_add_ps(sum)
        }

        /// `products` (16 lanes of sums of four byte products) times the pair's scales, lane
        /// `i` by scale `lanes[i]` (0 or 1), added to `sum`.
        #[target_feature(enable = "avx512f")]
        fn add_scaled(
            sum: std::arch::x86_64::__m512,
            products: __m512i,
            scales: __m128,
            lanes: __m512i,
        ) -> std::arch::x86_64::__m512 {
            let scale = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(scales));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), scale, sum)
        }

        /// Two blocks a step: 32 bytes of nibbles split into the 64 weights (unsigned, 0-15,
        /// or with `FIVES` 0-31: 16 added where the pair's word has the weight's bit), times
        /// the activations (signed) in the same order, in one `vpdpbusd`; lanes 0-3 and 8-11
        /// hold the first block, 4-7 and 12-15 the second. The minimums times the activations'
        /// block sums add up apart.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
        fn nibbles_row<const FIVES: bool, S: PairScales>(
            weights: &Row<'_, S>,
            x: &Activations,
        ) -> f32 {
            let halves = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
            let low_nibbles = _mm256_set1_epi8(0x0F);
            let mut sum = _mm512_setzero_ps();
            let mut minimums = _mm_setzero_ps();
            for pair in 0..weights.bytes.len() / BLOCK {
                let at = pair * BLOCK;
                assert!(at + BLOCK <= weights.bytes.len());
                // SAFETY: in bounds, as just checked; the load is unaligned.
                #[allow(unsafe_code)]
                let packed = unsafe { _mm256_loadu_si256(weights.bytes.as_ptr().add(at).cast()) };
                let low = _mm256_and_si256(packed, low_nibbles);
                let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
                let mut nibbles = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
                if FIVES {
                    nibbles = _mm512_mask_add_epi8(
                        nibbles,
                        weights.fifths[pair],
                        nibbles,
                        _mm512_set1_epi8(16),
                    );
                }
                let products =
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, load(&x.bytes, 2 * at));
                // SAFETY: this kernel's CPUs have F16C.
                #[allow(unsafe_code)]
                let (scales, pair_minimums) = unsafe { weights.scales.of_pair(pair) };
                let scales = _mm_mul_ps(scales, two(&x.scales, 2 * pair));
                sum = add_scaled(sum, products, scales, halves);
                minimums = _mm_fmadd_ps(pair_minimums, two(&x.span_sums, 2 * pair), minimums);
            }
            _mm512_reduce_add_ps(sum) + horizontal_sum(minimums)
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::{
            __m128, __m256, __m256i, _mm_add_ps, _mm_broadcastss_ps, _mm_cvtph_ps,
            _mm_cvtsi32_si128, _mm_fmadd_ps, _mm_loadu_si128, _mm_mul_ps, _mm_setzero_ps,
            _mm_srli_si128, _mm256_add_epi16, _mm256_add_ps, _mm256_and_si256,
            _mm256_castps128_ps256, _mm256_castps256_ps128, _mm256_cvtepi8_epi16,
            _mm256_cvtepi8_epi32, _mm256_cvtepi32_ps, _mm256_extractf128_ps, _mm256_fmadd_ps,
            _mm256_loadu_ps, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16,
            _mm256_mul_ps, _mm256_or_si256, _mm256_permute2x128_si256, _mm256_permutevar8x32_ps,
            _mm256_set_m128, _mm256_set1_epi8, _mm256_set1_epi16, _mm256_set1_epi32,
            _mm256_set1_epi64x, _mm256_setr_epi8, _mm256_setr_epi32, _mm256_setr_epi64x,
            _mm256_setzero_ps, _mm256_shuffle_epi8, _mm256_sign_epi8, _mm256_slli_epi16,
            _mm256_sllv_epi64, _mm256_srli_epi16, _mm256_srlv_epi64,
        };

        use super::pairs::{PairScales, four, horizontal_sum, two};
        use crate::packed::batched::{Q6_K_BLOCK_BYTES, Q6_K_SPAN};
        use crate::packed::{Activations, BLOCK, HalfScales, PackedRows, Row, SUPER_BLOCK};

        row_loops!("avx2,fma,f16c");

        /// `Q6_K` rows, on both kernels: CPUs with AVX-512 VNNI run this AVX2 loop too, there
        /// being no AVX-512 variant of it (none could be tested on a CPU without AVX-512).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) fn six_bit_rows(
            matrix: &PackedRows,
            rows: std::ops::Range<usize>,
            x: &Activations,
            out: &[std::sync::atomic::AtomicU32],
        ) {
            for row in rows {
                let value = six_bit_row(matrix.row_bytes(row), x);
                out[row].store(value.to_bits(), std::sync::atomic::Ordering::Relaxed);
            }
        }

        /// 8 values at `at` of `values`.
        #[target_feature(enable = "avx")]
        fn eight(values: &[f32], at: usize) -> __m256 {
            assert!(at + 8 <= values.len());
            // SAFETY: in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            unsafe {
                _mm256_loadu_ps(values.as_ptr().add(at))
            }
        }

        /// A `Q6_K` row, a super-block at a time in two halves of 128 weights. A half's 64
        /// bytes of low nibbles and 32 of high bit pairs make four registers of 32 six-bit
        /// weights (unsigned, in order), each one block of activations (signed): their 16-bit
        /// pair sums (at most 2 · 63 · 127) widen in `vpmaddwd` by the spans' 8-bit scales, a
        /// span of 16 in each 128-bit lane, and the integer sums times `d` and the block's
        /// scale add up in f32. The −32 in every weight adds up apart: the scales times the
        /// activations' span sums.
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn six_bit_row(bytes: &[u8], x: &Activations) -> f32 {
            const HALF: usize = SUPER_BLOCK / 2;
            // A half's eight scales as 16 bits, in both 128-bit lanes: register `k` takes
            // scale 2k (bytes 4k, 4k + 1) in its low lane and 2k + 1 in its high one.
            let span_scales = |k: i8| {
                let (low_0, low_1, high_0, high_1) = (4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
                _mm256_setr_epi8(
                    low_0, low_1, low_0, low_1, low_0, low_1, low_0, low_1, //
                    low_0, low_1, low_0, low_1, low_0, low_1, low_0, low_1, //
                    high_0, high_1, high_0, high_1, high_0, high_1, high_0, high_1, //
                    high_0, high_1, high_0, high_1, high_0, high_1, high_0, high_1,
                )
            };
            let spans = [
                span_scales(0),
                span_scales(1),
                span_scales(2),
                span_scales(3),
            ];
            let (low_nibbles, high_pairs) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
            let mut sums = [_mm256_setzero_ps(); 4];
            let mut minimums = _mm256_setzero_ps();
            for (index, block) in bytes.chunks_exact(Q6_K_BLOCK_BYTES).enumerate() {
                let (low, rest) = block.split_at(HALF);
                let (high, rest) = rest.split_at(HALF / 2);
                let (scales, d) = rest.split_at(SUPER_BLOCK / Q6_K_SPAN);
                // SAFETY: `scales` holds 16 bytes, `d` 2; the loads are unaligned.
                #[allow(unsafe_code)]
                let (scales, d) = unsafe {
                    (
                        _mm_loadu_si128(scales.as_ptr().cast()),
                        _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(u16::from_le_bytes([
                            d[0], d[1],
                        ])))),
                    )
                };
                let d = _mm_broadcastss_ps(d);
                let spans_here = SUPER_BLOCK / Q6_K_SPAN * index;
                let scaled_sums = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(scales))),
                    eight(&x.span_sums, spans_here + 8),
                    _mm256_mul_ps(
                        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(scales)),
                        eight(&x.span_sums, spans_here),
                    ),
                );
                minimums = _mm256_fmadd_ps(scaled_sums, _mm256_set_m128(d, d), minimums);
                let wide_scales = _mm256_cvtepi8_epi16(scales);
                for half in 0..2 {
                    let half_scales = if half == 0 {
                        _mm256_permute2x128_si256::<0x00>(wide_scales, wide_scales)
                    } else {
                        _mm256_permute2x128_si256::<0x11>(wide_scales, wide_scales)
                    };
                    let (first, second, bits) = (
                        load(low, 64 * half),
                        load(low, 64 * half + 32),
                        load(high, 32 * half),
                    );
                    // Register k's high bits sit at bits 2k and 2k + 1 of `bits`, shifted to
                    // bits 4 and 5 (shifts of 16-bit lanes: the mask drops what crosses bytes).
                    let six = [
                        (first, _mm256_slli_epi16::<4>(bits)),
                        (second, _mm256_slli_epi16::<2>(bits)),
                        (_mm256_srli_epi16::<4>(first), bits),
                        (_mm256_srli_epi16::<4>(second), _mm256_srli_epi16::<2>(bits)),
                    ]
                    .map(|(nibbles, pair)| {
                        _mm256_or_si256(
                            _mm256_and_si256(nibbles, low_nibbles),
                            _mm256_and_si256(pair, high_pairs),
                        )
                    });
                    let first_block = SUPER_BLOCK / BLOCK * index + 4 * half;
                    let block_scales = _mm_mul_ps(d, four(&x.scales, first_block));
                    for (k, (weights, sum)) in six.into_iter().zip(&mut sums).enumerate() {
                        let pair_sums = _mm256_maddubs_epi16(
                            weights,
                            load(&x.bytes, (first_block + k) * BLOCK),
                        );
                        let products = _mm256_madd_epi16(
                            pair_sums,
                            _mm256_shuffle_epi8(half_scales, spans[k]),
                        );
                        #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
                        let lane = _mm256_set1_epi32(k as i32);
                        *sum = add_scaled(*sum, products, block_scales, lane);
                    }
                }
            }
            let sums = _mm256_add_ps(
                _mm256_add_ps(sums[0], sums[1]),
                _mm256_add_ps(sums[2], sums[3]),
            );
            horizontal_sum_of_eight(sums) - 32.0 * horizontal_sum_of_eight(minimums)
        }

        /// 32 bytes at `at` of `bytes`, which holds at least `at + 32`.
        #[target_feature(enable = "avx2")]
        fn load(bytes: &[u8], at: usize) -> __m256i {
            assert!(at + BLOCK <= bytes.len());
            // SAFETY: in bounds, as just checked; the load is unaligned.
            #[allow(unsafe_code)]
            unsafe {
                _mm256_loadu_si256(bytes.as_ptr().add(at).cast())
            }
        }

        /// 32 products of `unsigned` and `signed` bytes, summed four to a lane (exact for the
        /// operands here: see the module's doc).
        #[target_feature(enable = "avx2")]
        fn byte_products(unsigned: __m256i, signed: __m256i) -> __m256i {
            _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned, signed), _mm256_set1_epi16(1))
        }

        /// `products` times the pair's scales, lane `i` by scale `lanes[i]` (0 or 1), added to
        /// `sum`.
        #[target_feature(enable = "avx2,fma")]
        fn add_scaled(sum: __m256, products: __m256i, scales: __m128, lanes: __m256i) -> __m256 {
            let scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(scales), lanes);
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(products), scale, sum)
        }

        #[target_feature(enable = "avx2")]
        fn horizontal_sum_of_eight(sum: __m256) -> f32 {
            horizontal_sum(_mm_add_ps(
                _mm256_castps256_ps128(sum),
                _mm256_extractf128_ps(sum, 1),
            ))
        }

        /// A block at a time, two a step: the weights take the activations' signs (`vpsignb`),
        /// so that the activations' magnitudes (unsigned) times them (signed) sum in one byte
        /// product. Two sums, so that one block's multiply-add need not wait for the other's.
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn q8_0_row(weights: &Row<'_, HalfScales<'_>>, x: &Activations) -> f32 {
            let lanes = [_mm256_set1_epi32(0), _mm256_set1_epi32(1)];
            let mut sums = [_mm256_setzero_ps(); 2];
            for pair in 0..weights.bytes.len() / (2 * BLOCK) {
                // SAFETY: this kernel's CPUs have F16C.
                #[allow(unsafe_code)]
                let (scales, _) = unsafe { weights.scales.of_pair(pair) };
                let scales = _mm_mul_ps(scales, two(&x.scales, 2 * pair));
                for (half, sum) in sums.iter_mut().enumerate() {
                    let at = (2 * pair + half) * BLOCK;
                    let signed = _mm256_sign_epi8(load(weights.bytes, at), load(&x.signs, at));
                    let products = byte_products(load(&x.bytes, at), signed);
                    *sum = add_scaled(*sum, products, scales, lanes[half]);
                }
            }
            horizontal_sum_of_eight(_mm256_add_ps(sums[0], sums[1]))
        }

        /// Pair `pair`'s 64 weights times the activations in the same order, summed four to a
        /// lane: lanes 0-3 block A's, 4-7 block B's. Its 32 bytes of nibbles split into the low
        /// and the high nibbles of both blocks (unsigned, 0-15, or with `FIVES` 0-31: 16 added
        /// where the pair's word has the weight's bit).
        #[inline]
        #[target_feature(enable = "avx2")]
        fn pair_products<const FIVES: bool, S>(
            weights: &Row<'_, S>,
            pair: usize,
            x: &Activations,
        ) -> __m256i {
            let at = pair * BLOCK;
            let packed = load(weights.bytes, at);
            let low_nibbles = _mm256_set1_epi8(0x0F);
            let mut low = _mm256_and_si256(packed, low_nibbles);
            let mut high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
            if FIVES {
                // Byte j of the word holds the bit of byte j of each 8-byte lane, lane l of the
                // low nibbles' in bit 4 + l and of the high ones' in bit l
                // (`Kernel::lay_out_fifths`): shifted by l, or by 4 − l, each reaches bit 4.
                let word = _mm256_set1_epi64x(weights.fifths[pair].cast_signed());
                let sixteens = _mm256_set1_epi8(16);
                let shifted = [
                    _mm256_srlv_epi64(word, _mm256_setr_epi64x(0, 1, 2, 3)),
                    _mm256_sllv_epi64(word, _mm256_setr_epi64x(4, 3, 2, 1)),
                ];
                low = _mm256_or_si256(low, _mm256_and_si256(shifted[0], sixteens));
                high = _mm256_or_si256(high, _mm256_and_si256(shifted[1], sixteens));
            }
            // Each 16-bit lane of the two pair sums is at most 2 · 31 · 127: their sum stays
            // under 2¹⁵, so one `vpmaddwd` widens both.
            let pair_sums = _mm256_add_epi16(
                _mm256_maddubs_epi16(low, load(&x.bytes, 2 * at)),
                _mm256_maddubs_epi16(high, load(&x.bytes, 2 * at + BLOCK)),
            );
            _mm256_madd_epi16(pair_sums, _mm256_set1_epi16(1))
        }

        /// Two pairs of blocks a step ([`pair_products`]), their four blocks' scales read and
        /// converted at once, into two sums, so that one pair's multiply-add need not wait for
        /// the other's; a last pair alone. The minimums times the activations' block sums add
        /// up apart.
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn nibbles_row<const FIVES: bool, S: PairScales>(
            weights: &Row<'_, S>,
            x: &Activations,
        ) -> f32 {
            let lanes = [
                _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
            ];
            let mut sums = [_mm256_setzero_ps(); 2];
            let mut minimums = _mm_setzero_ps();
            let pairs = weights.bytes.len() / BLOCK;
            for step in 0..pairs / 2 {
                // SAFETY: this kernel's CPUs have F16C and AVX2.
                #[allow(unsafe_code)]
                let (scales, step_minimums) = unsafe { weights.scales.of_two_pairs(step) };
                let scales = _mm_mul_ps(scales, four(&x.scales, 4 * step));
                minimums = _mm_fmadd_ps(step_minimums, four(&x.span_sums, 4 * step), minimums);
                for (half, sum) in sums.iter_mut().enumerate() {
                    let products = pair_products::<FIVES, S>(weights, 2 * step + half, x);
                    *sum = add_scaled(*sum, products, scales, lanes[half]);
                }
            }
            if pairs % 2 == 1 {
                let pair = pairs - 1;
                // SAFETY: this kernel's CPUs have F16C.
                #[allow(unsafe_code)]
                let (scales, pair_minimums) = unsafe { weights.scales.of_pair(pair) };
                let scales = _mm_mul_ps(scales, two(&x.scales, 2 * pair));
                minimums = _mm_fmadd_ps(pair_minimums, two(&x.span_sums, 2 * pair), minimums);
                let products = pair_products::<FIVES, S>(weights, pair, x);
                sums[0] = add_scaled(sums[0], products, scales, lanes[0]);
            }
            horizontal_sum_of_eight(_mm256_add_ps(sums[0], sums[1])) + horizontal_sum(minimums)
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Module;
    use candle_core::quantized::QMatMul;

    use super::*;

    /// Every format our product takes.
    const FORMATS: [GgmlDType; 8] = [
        GgmlDType::Q8_0,
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q4K,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q5K,
        GgmlDType::Q6K,
    ];

    fn random(rows: usize, columns: usize, seed: u64) -> Tensor {
        let mut next = scar_test_support::uniform_stream(seed);
        let values: Vec<f32> = (0..rows * columns).map(|_| next() * 2.0 - 1.0).collect();
        Tensor::from_vec(values, (rows, columns), &Device::Cpu).unwrap()
    }

    fn values(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    }

    /// `x` as the product sees it: quantized to bytes per block of 32, then scaled back.
    fn as_quantized(x: &[f32]) -> Vec<f64> {
        let mut out = Vec::with_capacity(x.len());
        for block in x.chunks_exact(BLOCK) {
            let scale = block.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            out.extend(
                block
                    .iter()
                    .map(|&v| f64::from((v * inverse).round()) * f64::from(scale)),
            );
        }
        out
    }

    /// The product of a row of weights and the quantized activations `seen`, in f64, and the
    /// sum of its terms' magnitudes (what f32's rounding errors scale with).
    fn exact_and_size(weights: &[f32], seen: &[f64]) -> (f64, f64) {
        weights
            .iter()
            .zip(seen)
            .map(|(&w, v)| f64::from(w) * v)
            .fold((0.0, 0.0), |(sum, size), term| {
                (sum + term, size + term.abs())
            })
    }

    /// Each kernel's product is the file's weights (as candle dequantizes them) times the
    /// quantized activations, to f32's rounding of the sums.
    #[test]
    fn products_are_exact_on_the_files_weights() {
        if Kernel::all_here().is_empty() {
            eprintln!(
                "skipped: this CPU has neither AVX2 nor AVX-512 VNNI, so candle's kernels decode"
            );
        }
        // Rows of 12 pairs of blocks, and of 9 (SmolLM2's width), where a kernel that takes two
        // pairs a step takes the last alone; K-quants' rows are whole super-blocks.
        let shapes = |dtype: GgmlDType| match dtype.block_size() {
            BLOCK => vec![768, 576],
            _ => vec![768],
        };
        for kernel in Kernel::all_here() {
            for (dtype, columns) in FORMATS.into_iter().flat_map(|dtype| {
                shapes(dtype)
                    .into_iter()
                    .map(move |columns| (dtype, columns))
            }) {
                let weights = QTensor::quantize(&random(70, columns, 7), dtype).unwrap();
                let packed = PackedRows::for_kernel(&weights, kernel).unwrap().unwrap();
                let x = values(&random(1, columns, 11));
                let ours = packed.product(&x).unwrap();
                let file = values(&weights.dequantize(&Device::Cpu).unwrap());
                let seen = as_quantized(&x);
                for (row, &value) in file.chunks_exact(columns).zip(&ours) {
                    let (exact, size) = exact_and_size(row, &seen);
                    let error = (f64::from(value) - exact).abs();
                    assert!(
                        error <= 1e-5 * size,
                        "{kernel:?} {dtype:?}: {value} against {exact}"
                    );
                }
            }
        }
    }

    /// Each kernel reads back the fifth bits it laid out; AVX2's layout transposes the word's
    /// bytes and bits.
    #[test]
    fn fifth_bits_read_back_from_each_kernels_layout() {
        for bit in 0..64 {
            assert_eq!(transpose_bits(1 << bit), 1 << (8 * (bit % 8) + bit / 8));
        }
        for kernel in [Kernel::Avx512Vnni, Kernel::Avx2] {
            for word in [
                0,
                u64::MAX,
                0x0123_4567_89AB_CDEF,
                1 << 63,
                0xF0F0_0000_0000_0F0F,
            ] {
                assert_eq!(kernel.read_fifths(kernel.lay_out_fifths(word)), word);
            }
        }
        // Low nibbles' lane 1, byte 2 (bit 10 of the pair's word) is bit 5 of byte 2.
        assert_eq!(Kernel::Avx2.lay_out_fifths(1 << 10), 1 << (8 * 2 + 5));
        // High nibbles' lane 3, byte 7 (bit 63) is bit 3 of byte 7.
        assert_eq!(Kernel::Avx2.lay_out_fifths(1 << 63), 1 << (8 * 7 + 3));
    }

    /// Many rows at once (the prompt's product) are, row by row, the file's weights times the
    /// quantized activations, as one row's product is: on every kernel here, over tiles of rows
    /// that do not fill the last one, panels of columns that do not fill the last one, and more
    /// rows than a task takes.
    #[test]
    fn products_of_many_rows_are_exact_on_the_files_weights() {
        if Kernel::all_here().is_empty() {
            eprintln!("skipped: this CPU has neither AVX2 nor AVX-512 VNNI");
        }
        let (rows, columns, outputs) = (75, 256, 70);
        for kernel in Kernel::all_here() {
            for dtype in FORMATS {
                let weights = QTensor::quantize(&random(outputs, columns, 7), dtype).unwrap();
                let packed = PackedRows::for_kernel(&weights, kernel).unwrap().unwrap();
                let x = values(&random(rows, columns, 13));
                if !packed.multiplies_rows() {
                    assert_eq!((kernel, dtype), (Kernel::Avx2, GgmlDType::Q8_0));
                    assert!(packed.product_rows(&x, rows).is_err());
                    continue;
                }
                let ours = packed.product_rows(&x, rows).unwrap();
                assert_eq!(ours.len(), rows * outputs);
                let file = values(&weights.dequantize(&Device::Cpu).unwrap());
                for (x, ours) in x.chunks_exact(columns).zip(ours.chunks_exact(outputs)) {
                    let seen = as_quantized(x);
                    let one_row = packed.product(x).unwrap();
                    for ((weights, &value), &alone) in
                        file.chunks_exact(columns).zip(ours).zip(&one_row)
                    {
                        let (exact, size) = exact_and_size(weights, &seen);
                        for (what, got) in [("many rows", value), ("one row", alone)] {
                            assert!(
                                (f64::from(got) - exact).abs() <= 1e-5 * size,
                                "{kernel:?} {dtype:?}, {what}: {got} against {exact}"
                            );
                        }
                    }
                }
                assert!(packed.product_rows(&x[1..], rows).is_err());
            }
        }
    }

    /// A `Q6_K` super-block's spans, unpacked, are the file's weights as candle dequantizes
    /// them (to f32's rounding of scale · weight + minimum).
    #[test]
    fn q6_k_spans_are_the_files_weights() {
        let weights = QTensor::quantize(&random(3, 512, 5), GgmlDType::Q6K).unwrap();
        let file = values(&weights.dequantize(&Device::Cpu).unwrap());
        let data = weights.data().unwrap();
        let mut unpacked = [0u8; 16];
        for (super_block, bytes) in data.chunks_exact(batched::Q6_K_BLOCK_BYTES).enumerate() {
            for span in 0..16 {
                let (scale, minimum) = batched::q6_k_span(bytes, span, &mut unpacked);
                let at = super_block * SUPER_BLOCK + span * 16;
                for (&u, &expected) in unpacked.iter().zip(&file[at..at + 16]) {
                    assert!(u < 64);
                    let ours = scale.mul_add(f32::from(u), minimum);
                    assert!((ours - expected).abs() <= 1e-6, "{ours} against {expected}");
                }
            }
        }
    }

    /// The largest weights AVX2's 16-bit pair sums take, 5-bit (`Q5_0`, `Q5_1`) and 6-bit (`Q6_K`),
    /// against activations of 127 in every place, where the pair sums added before widening
    /// come closest to overflowing.
    #[test]
    fn the_largest_weights_do_not_overflow_avx2s_pair_sums() {
        if !Kernel::all_here().contains(&Kernel::Avx2) {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // A block whose largest magnitude is negative quantizes to the lowest weight, and a
        // value just under its magnitude on the other side to the highest: 31 for Q5_0's
        // blocks of 32, 63 for Q6_K's spans of 16.
        for (dtype, span, high) in [
            (GgmlDType::Q5_0, 32, 1.0 - 2.0 / 31.0),
            // Q5_1's lowest value is its minimum, so any higher value in the block is 31.
            (GgmlDType::Q5_1, 32, 1.0),
            (GgmlDType::Q6K, 16, 31.0 / 32.0),
        ] {
            let (rows, columns) = (16, 256);
            let block: Vec<f32> = (0..span)
                .map(|i| if i == 0 { -1.0 } else { high })
                .collect();
            let weight_values: Vec<f32> =
                block.iter().cycle().take(rows * columns).copied().collect();
            let weight_tensor =
                Tensor::from_vec(weight_values, (rows, columns), &Device::Cpu).unwrap();
            let weights = QTensor::quantize(&weight_tensor, dtype).unwrap();
            let x = vec![1.0f32; rows * columns];
            if dtype == GgmlDType::Q6K {
                let mut unpacked = [0u8; 16];
                batched::q6_k_span(&weights.data().unwrap(), 1, &mut unpacked);
                assert_eq!(unpacked.iter().max(), Some(&63));
            }
            // The first row of activations' products, from both products: decoding's one-row
            // product adds two groups' pair sums before widening them.
            let packed = PackedRows::for_kernel(&weights, Kernel::Avx2)
                .unwrap()
                .unwrap();
            let products = [
                packed.product_rows(&x, rows).unwrap(),
                packed.product(&x[..columns]).unwrap(),
            ];
            let file = values(&weights.dequantize(&Device::Cpu).unwrap());
            for (weights, &value) in products
                .iter()
                .flat_map(|ours| file.chunks_exact(columns).zip(ours))
            {
                let exact: f64 = weights.iter().map(|&w| f64::from(w)).sum();
                assert!(
                    (f64::from(value) - exact).abs() <= 1e-4 * exact.abs().max(1.0),
                    "{dtype:?}: {value} against {exact}"
                );
            }
        }
    }

    /// Where candle quantizes the activations as we do (blocks of 32), both products agree.
    #[test]
    fn our_products_equal_candles_quantized_products() {
        for kernel in Kernel::all_here() {
            for dtype in [
                GgmlDType::Q8_0,
                GgmlDType::Q4_0,
                GgmlDType::Q4_1,
                GgmlDType::Q5_0,
                GgmlDType::Q5_1,
            ] {
                let weights = QTensor::quantize(&random(200, 640, 7), dtype).unwrap();
                let packed = PackedRows::for_kernel(&weights, kernel).unwrap().unwrap();
                let x = random(1, 640, 11);
                let ours = packed.product(&values(&x)).unwrap();
                let candle = values(&QMatMul::from_qtensor(weights).unwrap().forward(&x).unwrap());
                // Both sum exact integer products of the same bytes; candle keeps the
                // activations' block scales (and, for Q4_1 and Q5_1, their block sums) in f16,
                // we in f32.
                for (a, b) in ours.iter().zip(&candle) {
                    assert!(
                        (a - b).abs() <= 1e-3 * b.abs().max(1.0),
                        "{kernel:?} {dtype:?}: {a} against {b}"
                    );
                }
                assert!(packed.product(&[0.0; 64]).is_err());
            }
        }
    }

    /// Decoding reads every weight once a token, so the layout holds the file's bytes: the
    /// same for the formats with f16 scales and for `Q6_K`, kept as it is; for `Q4_K` and `Q5_K`,
    /// 8 bytes more per 256 weights (144 or 176 in the file: their 6-bit scales and minimums a
    /// byte each, their factors f32).
    #[test]
    fn the_layout_reads_about_the_files_bytes() {
        let Some(kernel) = Kernel::best() else {
            eprintln!("skipped: this CPU has neither AVX2 nor AVX-512 VNNI");
            return;
        };
        let (rows, columns) = (8, 512);
        for dtype in FORMATS {
            let weights = QTensor::quantize(&random(rows, columns, 5), dtype).unwrap();
            let packed = PackedRows::for_kernel(&weights, kernel).unwrap().unwrap();
            let file = weights.data().unwrap().len();
            // A K-quant super-block's 6-bit scales and minimums a byte each (16 bytes where the
            // file packs them in 12) and its two factors in f32 (8 where the file holds 4).
            let extra = match dtype {
                GgmlDType::Q4K | GgmlDType::Q5K => rows * columns / SUPER_BLOCK * 8,
                _ => 0,
            };
            assert_eq!(packed.bytes(), file + extra, "{dtype:?}");
        }
    }

    #[test]
    fn dequantized_rows_are_candles() {
        for dtype in FORMATS {
            let weights = QTensor::quantize(&random(3, 512, 5), dtype).unwrap();
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
        for dtype in [GgmlDType::Q2K, GgmlDType::Q3K] {
            let other = QTensor::quantize(&random(4, 256, 3), dtype).unwrap();
            assert!(PackedRows::from_tensor(&other).unwrap().is_none());
        }
    }
}
