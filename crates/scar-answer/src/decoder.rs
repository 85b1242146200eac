//! The parts our own decoders (Llama and Qwen 2, Gemma 2 and 3) share, each chosen for speed on
//! a CPU:
//!
//! - [`Linear`]: one token goes through the quantized weights with quantized dot products
//!   (decoding is bound by memory, and the quantized weights are the fewest bytes to read):
//!   `Q8_0`, `Q4_0`, `Q4_1`, `Q4_K`, `Q5_0`, `Q5_1`, `Q5_K` and `Q6_K` weights through our
//!   products ([`PackedRows`], AVX2 or AVX-512 VNNI) where the CPU has them, the rest through
//!   candle's kernels. A whole prompt is bound by arithmetic instead: it goes through byte
//!   products too, many rows at once (`packed/batched.rs`: these formats, on AVX2 all but
//!   `Q8_0`); the rest through one f32 matrix product with the weights dequantized for the call
//!   (one pass over the weights, shared by every row).
//! - [`KvCache`]: keys and values written in place into room that doubles when full, rather
//!   than concatenated anew for every token.
//! - [`attend`]: causal grouped-query attention, each query head reading its key-value head
//!   where the cache keeps it, rather than keys and values copied once per query head; on the
//!   CPU a block of queries at a time (`attention.rs`), with no square of scores for the whole
//!   prompt.
//!
//! Both decoders also read their settings ([`Settings`]), their embedding table and output
//! projection ([`embeddings_and_head`]) and each layer's attention ([`SelfAttention`]) here.

use std::sync::{Arc, Mutex, PoisonError};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{CpuStorage, CustomOp2, D, DType, Device, Layout, Module, Result, Shape, Tensor};
use candle_transformers::quantized_nn::RmsNorm;

use scar_embed::Gate;

use crate::attention::{Causal, causal_attention};
use crate::packed::PackedRows;

/// Rows from which a product goes through dequantized weights: below it, writing the f32
/// weights out costs more than the quantized dot products it saves.
const BATCHED_ROWS: usize = 16;

/// A weight matrix, applied as `x · Wᵀ`.
pub(crate) enum Linear {
    /// `Q8_0`, `Q4_0`, `Q4_1`, `Q4_K`, `Q5_0`, `Q5_1`, `Q5_K` or `Q6_K` weights in our layout,
    /// on a CPU with AVX2.
    Rows(PackedRows),
    /// Any other weights, through candle.
    Candle {
        weight: Arc<QTensor>,
        quantized: QMatMul,
    },
}

impl Linear {
    pub(crate) fn new(weight: QTensor) -> Result<Self> {
        Self::shared(Arc::new(weight))
    }

    /// A matrix that shares its weights (a tied output projection and embedding table). Laid
    /// out for our product, the matrix is a copy: the table stays for looking up rows.
    pub(crate) fn shared(weight: Arc<QTensor>) -> Result<Self> {
        if let Some(rows) = PackedRows::from_tensor(&weight)? {
            return Ok(Self::Rows(rows));
        }
        Ok(Self::Candle {
            quantized: QMatMul::from_arc(Arc::clone(&weight))?,
            weight,
        })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let width = x.dim(D::Minus1)?;
        let rows = x.elem_count() / width;
        match self {
            Self::Rows(matrix) if rows < BATCHED_ROWS || matrix.multiplies_rows() => {
                let values = x.flatten_all()?.to_vec1::<f32>()?;
                let out = if rows < BATCHED_ROWS {
                    // Few rows: each through the quantized product.
                    let mut out = Vec::new();
                    for row in values.chunks_exact(width) {
                        out.extend(matrix.product(row)?);
                    }
                    out
                } else {
                    matrix.product_rows(&values, rows)?
                };
                rows_like(out, x, rows)
            }
            Self::Rows(matrix) => x.broadcast_matmul(&matrix.dequantize(x.device())?.t()?),
            Self::Candle { weight, quantized } => {
                let batched = matches!(quantized, QMatMul::QTensor(_)) && x.device().is_cpu();
                if rows < BATCHED_ROWS || !batched {
                    return quantized.forward(x);
                }
                x.broadcast_matmul(&weight.dequantize(x.device())?.t()?)
            }
        }
    }
}

/// `rows` rows of `out` in `x`'s shape but for the last dimension.
fn rows_like(out: Vec<f32>, x: &Tensor, rows: usize) -> Result<Tensor> {
    let mut shape = x.dims().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = out.len() / rows;
    }
    Tensor::from_vec(out, shape, x.device())
}

/// Values a task of the gated activation takes: enough to outweigh handing it out.
const GATE_TASK: usize = 16 * 1024;

/// `act(gate) · up`, the middle of a gated feed-forward layer: on the CPU in one vectorised
/// pass ([`scar_embed::gate_in_place`]; libm's scalar `tanh` and `exp` were an eighth of
/// Gemma's prompt), elsewhere through tensors.
pub(crate) fn gated(gate: &Tensor, up: &Tensor, activation: Gate) -> Result<Tensor> {
    if gate.device().is_cpu() && gate.dtype() == DType::F32 {
        return gate.apply_op2_no_bwd(up, &Gated(activation));
    }
    let activated = match activation {
        Gate::Silu => candle_nn::ops::silu(gate)?,
        Gate::GeluTanh => gate.gelu()?,
    };
    activated * up
}

/// [`gated`] on the CPU.
struct Gated(Gate);

impl CustomOp2 for Gated {
    fn name(&self) -> &'static str {
        "gated-activation"
    }

    fn cpu_fwd(
        &self,
        gate: &CpuStorage,
        gate_layout: &Layout,
        up: &CpuStorage,
        up_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (Some((gate_start, gate_end)), Some((up_start, up_end))) = (
            gate_layout.contiguous_offsets(),
            up_layout.contiguous_offsets(),
        ) else {
            candle_core::bail!("{} needs contiguous tensors", self.name());
        };
        let (CpuStorage::F32(gate), CpuStorage::F32(up)) = (gate, up) else {
            candle_core::bail!("{} needs f32 tensors", self.name());
        };
        if gate_layout.dims() != up_layout.dims() {
            candle_core::bail!("a gate {:?} for {:?}", gate_layout.dims(), up_layout.dims());
        }
        let mut out = gate[gate_start..gate_end].to_vec();
        let up = &up[up_start..up_end];
        let parts: Vec<Mutex<&mut [f32]>> = out.chunks_mut(GATE_TASK).map(Mutex::new).collect();
        candle_core::utils::barrier_pool().execute_chunked(parts.len(), |tasks| {
            for task in tasks {
                let mut part = parts[task].lock().unwrap_or_else(PoisonError::into_inner);
                let up = &up[task * GATE_TASK..][..part.len()];
                scar_embed::gate_in_place(&mut part, up, self.0);
            }
        });
        drop(parts);
        Ok((CpuStorage::F32(out), gate_layout.shape().clone()))
    }
}

/// The settings a llama.cpp conversion writes under its architecture's name (`llama.*`,
/// `gemma2.*`, `gemma3.*`).
pub(crate) struct Settings<'a> {
    content: &'a Content,
    architecture: &'a str,
}

impl<'a> Settings<'a> {
    pub(crate) fn new(content: &'a Content, architecture: &'a str) -> Self {
        Self {
            content,
            architecture,
        }
    }

    fn value(&self, key: &str) -> Result<&'a Value> {
        let key = format!("{}.{key}", self.architecture);
        self.content
            .metadata
            .get(&key)
            .ok_or_else(|| candle_core::Error::Msg(format!("no {key} in the file")))
    }

    pub(crate) fn count(&self, key: &str) -> Result<usize> {
        self.value(key)?.to_u32().map(|n| n as usize)
    }

    pub(crate) fn float(&self, key: &str) -> Result<f32> {
        self.value(key)?.to_f32()
    }

    /// Query heads and key-value heads: both at least 1, the first a multiple of the second
    /// (each key-value head serves a whole group), so that no shape is divided by zero.
    pub(crate) fn heads(&self) -> Result<(usize, usize)> {
        let heads = self.count("attention.head_count")?;
        let kv_heads = self.count("attention.head_count_kv")?;
        if kv_heads == 0 || heads == 0 || heads % kv_heads != 0 {
            candle_core::bail!(
                "{} query heads cannot share {} key-value heads",
                heads,
                kv_heads
            );
        }
        Ok((heads, kv_heads))
    }
}

/// The embedding table, kept quantized (rows are dequantized as they are looked up), and the
/// output projection: the file's own, or the table itself where the model ties them.
pub(crate) fn embeddings_and_head(
    content: &Content,
    tensor: &mut impl FnMut(&str) -> Result<QTensor>,
) -> Result<(Arc<QTensor>, Linear)> {
    let table = Arc::new(tensor("token_embd.weight")?);
    let head = if content.tensor_infos.contains_key("output.weight") {
        Linear::new(tensor("output.weight")?)?
    } else {
        Linear::shared(Arc::clone(&table))?
    };
    Ok((table, head))
}

/// Rotary position tables, for rotating pairs of adjacent dimensions (`interleaved`, as
/// llama.cpp stores Llama's weights) or the two halves of each head (Gemma, `NeoX` style).
pub(crate) struct Rotary {
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
}

impl Rotary {
    pub(crate) fn new(
        dimensions: usize,
        base: f32,
        max_positions: usize,
        interleaved: bool,
        device: &Device,
    ) -> Result<Self> {
        let inverse: Vec<f32> = (0..dimensions)
            .step_by(2)
            .map(|i| 1.0 / base.powf(i as f32 / dimensions as f32))
            .collect();
        let inverse = Tensor::from_vec(inverse, (1, dimensions / 2), device)?;
        let positions = Tensor::arange(0u32, max_positions as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((max_positions, 1))?;
        let angles = positions.matmul(&inverse)?;
        Ok(Self {
            cos: angles.cos()?,
            sin: angles.sin()?,
            interleaved,
        })
    }

    /// Rotates `x` (batch, heads, length, head dimension) placed at `position`.
    pub(crate) fn apply(&self, x: &Tensor, position: usize) -> Result<Tensor> {
        let length = x.dim(2)?;
        let cos = self.cos.narrow(0, position, length)?;
        let sin = self.sin.narrow(0, position, length)?;
        let x = x.contiguous()?;
        if self.interleaved {
            candle_nn::rotary_emb::rope_i(&x, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope(&x, &cos, &sin)
        }
    }
}

/// One layer's keys and values, (batch, key-value heads, positions, head dimension).
#[derive(Default)]
pub(crate) struct KvCache {
    room: Option<(Tensor, Tensor)>,
    length: usize,
}

/// Positions the cache first makes room for.
const FIRST_ROOM: usize = 512;

impl KvCache {
    /// Appends the keys and values of positions `position..position + new`; position 0
    /// starts a new sequence. Returns every key and value so far.
    pub(crate) fn append(
        &mut self,
        keys: &Tensor,
        values: &Tensor,
        position: usize,
    ) -> Result<(Tensor, Tensor)> {
        if position == 0 {
            self.length = 0;
        }
        if position != self.length {
            candle_core::bail!("the cache holds {} positions, not {position}", self.length);
        }
        let (batch, heads, new, dim) = keys.dims4()?;
        let needed = self.length + new;
        let fits = self
            .room
            .as_ref()
            .is_some_and(|(room, _)| room.dims()[0] == batch && room.dims()[2] >= needed);
        if !fits {
            let shape = (
                batch,
                heads,
                needed.next_power_of_two().max(FIRST_ROOM),
                dim,
            );
            let grown = (
                Tensor::zeros(shape, keys.dtype(), keys.device())?,
                Tensor::zeros(shape, values.dtype(), values.device())?,
            );
            if let Some((old_keys, old_values)) = &self.room
                && self.length > 0
            {
                let kept = |t: &Tensor| t.narrow(2, 0, self.length)?.contiguous();
                grown.0.slice_set(&kept(old_keys)?, 2, 0)?;
                grown.1.slice_set(&kept(old_values)?, 2, 0)?;
            }
            self.room = Some(grown);
        }
        let (all_keys, all_values) = self.room.as_ref().expect("room was made above");
        all_keys.slice_set(&keys.contiguous()?, 2, self.length)?;
        all_values.slice_set(&values.contiguous()?, 2, self.length)?;
        self.length = needed;
        Ok((
            all_keys.narrow(2, 0, needed)?,
            all_values.narrow(2, 0, needed)?,
        ))
    }
}

/// A layer's self-attention: projections, optional per-head norms of queries and keys (Gemma),
/// rotary positions, the cache, and an optional sliding window.
pub(crate) struct SelfAttention {
    pub(crate) query: Linear,
    pub(crate) key: Linear,
    pub(crate) value: Linear,
    pub(crate) output: Linear,
    /// Biases added to the query, key and value projections (Qwen 2), if any.
    pub(crate) biases: Option<[Tensor; 3]>,
    pub(crate) query_norm: Option<RmsNorm>,
    pub(crate) key_norm: Option<RmsNorm>,
    /// Keys reach this many positions back; `None` attends to every earlier position.
    pub(crate) window: Option<usize>,
    /// The scores' soft cap (Gemma 2), if any.
    pub(crate) softcap: Option<f64>,
    /// Multiplies the scores; 1/√(head dimension) unless the model says otherwise.
    pub(crate) scale: f64,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) cache: KvCache,
}

impl SelfAttention {
    /// The projections of one layer (`weight` reads `attn_q` and the rest of its tensors), with
    /// no biases, no per-head norms and no window.
    pub(crate) fn load(
        weight: &mut impl FnMut(&str) -> Result<QTensor>,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
    ) -> Result<Self> {
        Ok(Self {
            query: Linear::new(weight("attn_q")?)?,
            key: Linear::new(weight("attn_k")?)?,
            value: Linear::new(weight("attn_v")?)?,
            output: Linear::new(weight("attn_output")?)?,
            biases: None,
            query_norm: None,
            key_norm: None,
            window: None,
            softcap: None,
            scale: 1.0 / (head_dim as f64).sqrt(),
            heads,
            kv_heads,
            head_dim,
            cache: KvCache::default(),
        })
    }

    /// Attends from `x` (batch, length, hidden) placed at `position`, each position to itself
    /// and the ones before it (within the window, if any).
    pub(crate) fn forward(
        &mut self,
        x: &Tensor,
        position: usize,
        rotary: &Rotary,
    ) -> Result<Tensor> {
        let (batch, length, _) = x.dims3()?;
        let heads = |t: Tensor, count: usize, norm: Option<&RmsNorm>| {
            let t = t
                .reshape((batch, length, count, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            match norm {
                Some(norm) => norm.forward(&t),
                None => Ok(t),
            }
        };
        let projected = |linear: &Linear, part: usize| {
            let out = linear.forward(x)?;
            match &self.biases {
                Some(biases) => out.broadcast_add(&biases[part]),
                None => Ok(out),
            }
        };
        let q = heads(
            projected(&self.query, 0)?,
            self.heads,
            self.query_norm.as_ref(),
        )?;
        let k = heads(
            projected(&self.key, 1)?,
            self.kv_heads,
            self.key_norm.as_ref(),
        )?;
        let v = heads(projected(&self.value, 2)?, self.kv_heads, None)?;
        let q = rotary.apply(&q, position)?;
        let k = rotary.apply(&k, position)?;
        let (k, v) = self.cache.append(&k, &v, position)?;
        let attended = attend(&q, &k, &v, self.scale, self.softcap, self.window)?
            .transpose(1, 2)?
            .reshape((batch, length, self.heads * self.head_dim))?;
        self.output.forward(&attended)
    }
}

/// Scaled dot-product attention of `q` (batch, heads, length, head dimension) over `k` and `v`
/// (batch, key-value heads, keys, head dimension), the queries being the last `length`
/// positions of the keys', each seeing its own position and the earlier ones (with a
/// `window`, only the last `window` of those); query head `h` reads key-value head
/// `h / (heads / key-value heads)`; scores above `softcap` in size are squashed towards it
/// (`cap · tanh(s / cap)`, Gemma 2). On the CPU a block of queries at a time
/// ([`causal_attention`]), elsewhere through tensors.
pub(crate) fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    softcap: Option<f64>,
    window: Option<usize>,
) -> Result<Tensor> {
    if q.device().is_cpu() && q.dtype() == DType::F32 {
        let causal = Causal {
            scale: scale as f32,
            softcap: softcap.map(|cap| cap as f32),
            window,
        };
        return causal_attention(&q.contiguous()?, k, v, causal);
    }
    attend_with_tensors(q, k, v, scale, softcap, window)
}

/// [`attend`] as tensor operations, on any device: every head's square of scores at once, the
/// later and out-of-window keys masked.
fn attend_with_tensors(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    softcap: Option<f64>,
    window: Option<usize>,
) -> Result<Tensor> {
    let (batch, heads, length, dim) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    // One new query of a sliding layer sees only the keys of its window.
    let (k, v) = match window {
        Some(window) if length == 1 && k.dim(2)? > window => {
            let start = k.dim(2)? - window;
            (k.narrow(2, start, window)?, v.narrow(2, start, window)?)
        }
        _ => (k.clone(), v.clone()),
    };
    let keys = k.dim(2)?;
    let grouped = (batch, kv_heads, heads / kv_heads * length, dim);
    let q = q.contiguous()?.reshape(grouped)?;
    let mut scores = (q.matmul(&k.t()?)? * scale)?;
    if let Some(cap) = softcap {
        scores = soft_cap(&scores, cap)?;
    }
    if length > 1 {
        let mask = causal_mask(length, keys - length, window, q.device())?;
        scores = scores
            .reshape((batch, heads, length, keys))?
            .broadcast_add(&mask)?
            .reshape((batch, kv_heads, heads / kv_heads * length, keys))?;
    }
    let weights = candle_nn::ops::softmax_last_dim(&scores)?;
    weights
        .matmul(&v.contiguous()?)?
        .reshape((batch, heads, length, dim))
}

/// `cap · tanh(x / cap)`: values far below `cap` in size pass almost unchanged, larger ones
/// approach it.
pub(crate) fn soft_cap(x: &Tensor, cap: f64) -> Result<Tensor> {
    (x / cap)?.tanh()? * cap
}

/// 0 where query `i` (of `length`, after `past` earlier positions) may see key `j`, else
/// -inf: keys up to its own position and, with a `window`, fewer than `window` back.
fn causal_mask(
    length: usize,
    past: usize,
    window: Option<usize>,
    device: &Device,
) -> Result<Tensor> {
    let keys = past + length;
    let values: Vec<f32> = (0..length)
        .flat_map(|i| {
            let query = past + i;
            (0..keys).map(move |key| {
                let visible = key <= query && window.is_none_or(|w| query - key < w);
                if visible { 0.0 } else { f32::NEG_INFINITY }
            })
        })
        .collect();
    Tensor::from_vec(values, (length, keys), device)
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::GgmlDType;

    use super::*;

    fn random(shape: (usize, usize, usize, usize), seed: u64) -> Tensor {
        let mut state = seed;
        let count = shape.0 * shape.1 * shape.2 * shape.3;
        let values: Vec<f32> = (0..count)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }

    fn values_of(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar()
            .unwrap()
    }

    #[test]
    fn head_counts_that_cannot_be_grouped_are_an_error() {
        let content = |heads: u32, kv_heads: u32| Content {
            magic: candle_core::quantized::gguf_file::VersionedMagic::GgufV3,
            metadata: [
                ("llama.attention.head_count", heads),
                ("llama.attention.head_count_kv", kv_heads),
            ]
            .into_iter()
            .map(|(key, n)| (key.to_owned(), Value::U32(n)))
            .collect(),
            tensor_infos: std::collections::HashMap::new(),
            tensor_data_offset: 0,
        };
        let heads = |h, kv| {
            Settings::new(&content(h, kv), "llama")
                .heads()
                .map_err(|e| e.to_string())
        };
        assert_eq!(heads(9, 3), Ok((9, 3)));
        for (h, kv) in [(9, 0), (0, 3), (9, 2)] {
            let error = heads(h, kv).unwrap_err();
            assert!(error.contains("cannot share"), "{error}");
        }
    }

    #[test]
    fn grouped_attention_equals_attention_over_repeated_keys() {
        let q = random((1, 6, 5, 8), 1);
        let k = random((1, 2, 5, 8), 2);
        let v = random((1, 2, 5, 8), 3);
        let mask = causal_mask(5, 0, Some(3), &Device::Cpu).unwrap();
        let ours = attend(&q, &k, &v, 0.3, None, Some(3)).unwrap();
        let k3 = candle_transformers::utils::repeat_kv(k, 3).unwrap();
        let v3 = candle_transformers::utils::repeat_kv(v, 3).unwrap();
        let scores = ((q.matmul(&k3.t().unwrap()).unwrap() * 0.3).unwrap())
            .broadcast_add(&mask)
            .unwrap();
        let weights = candle_nn::ops::softmax_last_dim(&scores).unwrap();
        let reference = weights.matmul(&v3.contiguous().unwrap()).unwrap();
        assert!(max_difference(&ours, &reference) < 1e-6);
    }

    /// How far `attend` is from the tensors' attention for `length` new positions after `past`,
    /// the keys read in place from a cache whose room is longer than them; checks the shape.
    fn difference_from_tensors(
        (heads, kv_heads, dim): (usize, usize, usize),
        (length, past): (usize, usize),
        window: Option<usize>,
        softcap: Option<f64>,
    ) -> f32 {
        let keys = past + length;
        let q = random((1, heads, length, dim), 4);
        let room = |seed| {
            random((1, kv_heads, keys + 7, dim), seed)
                .narrow(2, 0, keys)
                .unwrap()
        };
        let (k, v) = (room(5), room(6));
        let ours = attend(&q, &k, &v, 0.25, softcap, window).unwrap();
        let reference = attend_with_tensors(&q, &k, &v, 0.25, softcap, window).unwrap();
        assert_eq!(ours.dims(), [1, heads, length, dim]);
        max_difference(&ours, &reference)
    }

    /// Block by block on the CPU, attention equals the tensors' over every shape the decoders
    /// give it: prompts longer than a block, after earlier positions, with and without a
    /// window and a soft cap, one new token, and keys read in place from a larger cache.
    #[test]
    fn attention_by_blocks_equals_attention_through_tensors() {
        for (length, past, window, softcap) in [
            (70, 0, None, None),
            (70, 5, Some(20), Some(2.0)),
            (33, 40, Some(50), None),
            (1, 90, Some(20), None),
            (1, 0, None, Some(1.5)),
        ] {
            let difference = difference_from_tensors((6, 2, 16), (length, past), window, softcap);
            assert!(
                difference < 1e-5,
                "{length} after {past}, window {window:?}: {difference}"
            );
        }
    }

    /// One new position, as decoding gives it, where a key-value head's query heads go through
    /// its cache together: equal to the tensors' attention for heads of 32 to 256 values,
    /// groups of one to seven heads (split across tasks or not), key counts that are not whole
    /// blocks, and keys read in place from a larger cache, with a window and a soft cap.
    #[test]
    fn one_position_equals_attention_through_tensors() {
        for heads in [(14, 2, 64), (4, 1, 256), (3, 3, 32)] {
            for (keys, window, softcap) in [
                (1, None, None),
                (13, None, Some(1.5)),
                (77, None, None),
                (1_000, Some(300), None),
            ] {
                let difference = difference_from_tensors(heads, (1, keys - 1), window, softcap);
                assert!(
                    difference < 1e-5,
                    "{heads:?} (heads, key-value heads, values) over {keys} keys: {difference}"
                );
            }
        }
    }

    #[test]
    fn the_cache_returns_every_position_across_growth_and_restarts() {
        let mut cache = KvCache::default();
        let first = random((1, 2, 500, 4), 4);
        cache.append(&first, &first, 0).unwrap();
        // Past the first room: the cache grows and keeps what it held.
        let second = random((1, 2, 20, 4), 5);
        let (keys, values) = cache.append(&second, &second, 500).unwrap();
        let expected = Tensor::cat(&[&first, &second], 2).unwrap();
        assert_eq!(keys.dims(), [1, 2, 520, 4]);
        assert_eq!(values_of(&keys), values_of(&expected));
        assert_eq!(values_of(&values), values_of(&expected));
        // Position 0 starts again.
        let (keys, _) = cache.append(&second, &second, 0).unwrap();
        assert_eq!(values_of(&keys), values_of(&second));
    }

    #[test]
    fn a_prompt_through_dequantized_weights_equals_the_quantized_product() {
        let weight = random((1, 1, 64, 256), 6)
            .squeeze(0)
            .unwrap()
            .squeeze(0)
            .unwrap();
        let linear = Linear::new(QTensor::quantize(&weight, GgmlDType::Q8_0).unwrap()).unwrap();
        let rows = random((1, 1, BATCHED_ROWS, 256), 7).squeeze(0).unwrap();
        let batched = linear.forward(&rows).unwrap();
        let one_by_one: Vec<Tensor> = (0..BATCHED_ROWS)
            .map(|i| linear.forward(&rows.narrow(1, i, 1).unwrap()).unwrap())
            .collect();
        let one_by_one = Tensor::cat(&one_by_one, 1).unwrap();
        // The quantized product also rounds the activations to 8 bits; the dequantized one
        // does not, so they agree to that rounding.
        assert!(max_difference(&batched, &one_by_one) < 0.05);
    }
}
