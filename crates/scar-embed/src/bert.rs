//! BERT's encoder and pooling, as sentence-embedding models (one segment) and cross-encoders (a
//! question and a passage, two segments) use them with absolute positions, written for
//! throughput rather than taken from candle-transformers:
//!
//! - hidden states stay a 2-D `[tokens, width]` matrix, so every linear layer is one large
//!   matrix product over the whole batch rather than one small product per text;
//! - the query, key and value projections are one product with their weights stacked;
//! - on CPU the texts are packed, one row per real token and no padding, so that no product
//!   spends time on padding; each text attends to its own tokens ([`crate::attention`]), and
//!   biases, GELU, residuals and layer norms run in place ([`crate::kernels`]), and each layer
//!   writes over its input, its attention half a group of whole texts at a time and its
//!   feed-forward half 512 rows at a time, so that no product of the whole batch is made and
//!   each block's stays in the cache. On a GPU the texts are padded to the longest, with an
//!   additive mask.
//!
//! Weights load from the same safetensors names as `transformers`' `BertModel` (with or without
//! a `bert.` prefix), and XLM-RoBERTa's (`roberta.`): the same encoder, its positions counted
//! from the padding id + 1.

use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct, PositionEmbeddingType};

use crate::bf16::Bf16Weights;
use crate::f32_panels::{F16Panels, F32Panels};
use crate::int8::Int8Weights;
use crate::kernels::PackedWeight as _;
use crate::model::Pooling;
use crate::{attention, kernels, linear};

/// The encoder: embeddings and the transformer layers, without BERT's pooler.
pub(crate) struct Bert {
    words: Embedding,
    positions: Embedding,
    /// Every token type's vector: type 0 for a text of one segment, 0 and 1 for a pair.
    token_types: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    activation: HiddenAct,
    /// The position of a text's first token: 0, or XLM-RoBERTa's [`first_position`].
    first_position: u32,
}

/// Whether `config` is an XLM-RoBERTa's (or a `RoBERTa`'s) rather than BERT's.
pub(crate) fn is_roberta(config: &Config) -> bool {
    matches!(
        config.model_type.as_deref(),
        Some("xlm-roberta" | "roberta")
    )
}

/// The position of a text's first token: the `RoBERTa` family counts positions from the padding
/// id + 1, as `transformers` does, BERT from 0.
fn first_position(config: &Config) -> usize {
    if is_roberta(config) {
        config.pad_token_id + 1
    } else {
        0
    }
}

/// The most tokens a text (special tokens included) may have: one per position after the first.
pub(crate) fn max_tokens(config: &Config) -> usize {
    config
        .max_position_embeddings
        .saturating_sub(first_position(config))
}

struct Layer {
    /// Query, key and value stacked: `[3 · width, width]`.
    qkv: Dense,
    attention_out: AddNorm,
    intermediate: Dense,
    output: AddNorm,
}

impl Bert {
    /// Loads the encoder, its linear layers' weights held as `packing` says.
    pub(crate) fn load(vb: &VarBuilder, config: &Config, packing: Packing) -> Result<Self> {
        if config.position_embedding_type != PositionEmbeddingType::Absolute {
            candle_core::bail!("only absolute position embeddings are supported");
        }
        if !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
        {
            candle_core::bail!(
                "hidden size {} is not a multiple of {} heads",
                config.hidden_size,
                config.num_attention_heads
            );
        }
        // Checkpoints saved from `BertForMaskedLM` and the like nest the encoder under `bert.`
        // (`roberta.` for XLM-RoBERTa's).
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb.clone()
        } else if is_roberta(config) {
            vb.pp("roberta")
        } else {
            vb.pp("bert")
        };
        let width = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let words =
            candle_nn::embedding(config.vocab_size, width, embeddings.pp("word_embeddings"))?;
        let positions = candle_nn::embedding(
            config.max_position_embeddings,
            width,
            embeddings.pp("position_embeddings"),
        )?;
        let token_types = candle_nn::embedding(
            config.type_vocab_size,
            width,
            embeddings.pp("token_type_embeddings"),
        )?;
        let embedding_norm =
            candle_nn::layer_norm(width, config.layer_norm_eps, embeddings.pp("LayerNorm"))?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(&vb.pp(format!("encoder.layer.{i}")), config, packing))
            .collect::<Result<_>>()?;
        Ok(Self {
            words,
            positions,
            token_types,
            embedding_norm,
            layers,
            heads: config.num_attention_heads,
            activation: config.hidden_act,
            first_position: u32::try_from(first_position(config))
                .map_err(|_| candle_core::Error::Msg("the padding id is out of range".into()))?,
        })
    }

    /// The pooled, not yet normalised f32 vectors `[texts, width]` of texts given as token ids
    /// (special tokens included).
    pub(crate) fn embed(&self, texts: &[&[u32]], pad_id: u32, pooling: Pooling) -> Result<Tensor> {
        let weights = self.words.embeddings();
        if texts.iter().any(|text| text.is_empty()) {
            // A text of no tokens (from a tokenizer that adds none) has nothing to attend to or
            // pool: its vector is zeros, as sentence-transformers gives, whatever the path.
            let width = weights.dim(1)?;
            let zeros = Tensor::zeros(width, DType::F32, weights.device())?;
            let filled: Vec<&[u32]> = texts.iter().copied().filter(|t| !t.is_empty()).collect();
            let mut pooled = if filled.is_empty() {
                Vec::new()
            } else {
                self.embed(&filled, pad_id, pooling)?
                    .chunk(filled.len(), 0)?
            }
            .into_iter();
            let rows = texts
                .iter()
                .map(|text| {
                    if text.is_empty() {
                        zeros.unsqueeze(0)
                    } else {
                        Ok(pooled.next().expect("one row per filled text"))
                    }
                })
                .collect::<Result<Vec<_>>>()?;
            return Tensor::cat(&rows, 0);
        }
        self.encode(texts, None, pad_id, pooling)
    }

    /// Token type 0's vector, added to every token of a text of one segment.
    fn first_token_type(&self) -> Result<Tensor> {
        self.token_types.embeddings().get(0)
    }

    /// The f32 `[CLS]` rows `[pairs, width]` of texts of two segments (a question and a
    /// passage), given as token ids (special tokens included) and each token's segment.
    pub(crate) fn embed_pairs(
        &self,
        texts: &[&[u32]],
        segments: &[&[u32]],
        pad_id: u32,
    ) -> Result<Tensor> {
        let aligned = texts.len() == segments.len()
            && texts
                .iter()
                .zip(segments)
                .all(|(text, segment)| !text.is_empty() && text.len() == segment.len());
        if !aligned {
            candle_core::bail!("every pair needs its tokens, each with its segment");
        }
        self.encode(texts, Some(segments), pad_id, Pooling::Cls)
    }

    /// [`Self::embed`] and [`Self::embed_pairs`], for texts that all hold tokens; `segments`
    /// gives each token's segment, `None` when every text is one segment.
    fn encode(
        &self,
        texts: &[&[u32]],
        segments: Option<&[&[u32]]>,
        pad_id: u32,
        pooling: Pooling,
    ) -> Result<Tensor> {
        let weights = self.words.embeddings();
        if texts.is_empty() {
            return Tensor::zeros((0, weights.dim(1)?), DType::F32, weights.device());
        }
        if uses_cpu_kernels(weights) {
            self.embed_packed(texts, segments, pooling)
        } else {
            self.embed_padded(texts, segments, pad_id, pooling)
        }
    }

    /// [`Self::encode`] on the CPU: the texts' tokens packed into one `[tokens, width]` matrix
    /// for every layer, pooled from their own rows.
    fn embed_packed(
        &self,
        texts: &[&[u32]],
        segments: Option<&[&[u32]]>,
        pooling: Pooling,
    ) -> Result<Tensor> {
        let device = self.words.embeddings().device();
        let lengths: Vec<usize> = texts.iter().map(|text| text.len()).collect();
        let ids = texts.concat();
        let first = self.first_position;
        let positions: Vec<u32> = lengths
            .iter()
            .flat_map(|&length| first..first + length as u32)
            .collect();
        let tokens = ids.len();
        let words = self
            .words
            .forward(&Tensor::from_vec(ids, tokens, device)?)?;
        let positions = self
            .positions
            .forward(&Tensor::from_vec(positions, tokens, device)?)?;
        let embedded = match segments {
            None => (words + positions)?.broadcast_add(&self.first_token_type()?)?,
            Some(segments) => {
                let segments = Tensor::from_vec(segments.concat(), tokens, device)?;
                ((words + positions)? + self.token_types.forward(&segments)?)?
            }
        };
        let mut hidden = self.embedding_norm.forward(&embedded)?;
        for layer in &self.layers {
            hidden = layer.forward_packed(hidden, &lengths, self.heads, self.activation)?;
        }
        let mut start = 0;
        let pooled = lengths
            .iter()
            .map(|&length| {
                let rows = hidden.narrow(0, start, length)?;
                start += length;
                match pooling {
                    Pooling::Cls => rows.get(0),
                    Pooling::Mean => rows.mean(0),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::stack(&pooled, 0)
    }

    /// [`Self::encode`] on a GPU: the texts padded to the longest, padding masked in attention
    /// and left out of the pooling.
    fn embed_padded(
        &self,
        texts: &[&[u32]],
        segments: Option<&[&[u32]]>,
        pad_id: u32,
        pooling: Pooling,
    ) -> Result<Tensor> {
        let device = self.words.embeddings().device();
        let lengths: Vec<usize> = texts.iter().map(|text| text.len()).collect();
        let (batch, longest) = (texts.len(), lengths.iter().copied().max().unwrap_or(0));
        let ids = Tensor::from_vec(padded(texts, longest, pad_id), (batch, longest), device)?;
        let first = self.first_position;
        let positions = Tensor::arange(first, first + longest as u32, device)?;
        let position_vectors = self.positions.forward(&positions)?;
        let words = self.words.forward(&ids)?;
        let embedded = match segments {
            None => {
                words.broadcast_add(&position_vectors.broadcast_add(&self.first_token_type()?)?)?
            }
            Some(segments) => {
                let segments =
                    Tensor::from_vec(padded(segments, longest, 0), (batch, longest), device)?;
                (words.broadcast_add(&position_vectors)? + self.token_types.forward(&segments)?)?
            }
        };
        let mut hidden = self
            .embedding_norm
            .forward(&embedded)?
            .reshape((batch * longest, ()))?;
        let mask = Mask::new(&lengths, longest, hidden.dtype(), device)?;
        let attention = Attention::Padded { batch, mask: &mask };
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &attention, self.heads, self.activation)?;
        }
        // Pooled in f32: a sum over hundreds of f16 rows loses precision and can overflow.
        let hidden = hidden.reshape((batch, longest, ()))?.to_dtype(DType::F32)?;
        match pooling {
            // Contiguous: the first rows of a padded batch are strided, and CUDA's products
            // (a cross-encoder's head) take contiguous inputs only.
            Pooling::Cls => hidden.i((.., 0))?.contiguous(),
            Pooling::Mean => {
                let real: Vec<f32> = lengths
                    .iter()
                    .flat_map(|&n| (0..longest).map(move |j| f32::from(u8::from(j < n))))
                    .collect();
                let real = Tensor::from_vec(real, (batch, longest, 1), device)?;
                hidden
                    .broadcast_mul(&real)?
                    .sum(1)?
                    .broadcast_div(&real.sum(1)?)
            }
        }
    }
}

/// `rows` laid end to end, each filled with `fill` to `longest`.
fn padded(rows: &[&[u32]], longest: usize, fill: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(rows.len() * longest);
    for row in rows {
        out.extend_from_slice(row);
        out.resize(out.len() + longest - row.len(), fill);
    }
    out
}

/// How a layer's rows hold the texts, and so how they attend.
enum Attention<'a> {
    /// One row per real token, texts one after another, `lengths[t]` rows each (CPU).
    Packed(&'a [usize]),
    /// `batch` texts padded to the same length, padding masked.
    Padded { batch: usize, mask: &'a Mask },
}

impl Layer {
    fn load(vb: &VarBuilder, config: &Config, packing: Packing) -> Result<Self> {
        let width = config.hidden_size;
        let eps = config.layer_norm_eps;
        let attention = vb.pp("attention");
        let projections = ["query", "key", "value"]
            .map(|name| Dense::load(&attention.pp("self").pp(name), width, width));
        let mut weights = Vec::with_capacity(3);
        let mut biases = Vec::with_capacity(3);
        for projection in projections {
            let (weight, bias) = projection?;
            weights.push(weight);
            biases.push(bias);
        }
        let intermediate = Dense::load(
            &vb.pp("intermediate").pp("dense"),
            width,
            config.intermediate_size,
        )?;
        Ok(Self {
            qkv: Dense::new(Tensor::cat(&weights, 0)?, Tensor::cat(&biases, 0)?, packing)?,
            attention_out: AddNorm::load(&attention.pp("output"), width, width, eps, packing)?,
            intermediate: Dense::new(intermediate.0, intermediate.1, packing)?,
            output: AddNorm::load(
                &vb.pp("output"),
                config.intermediate_size,
                width,
                eps,
                packing,
            )?,
        })
    }

    /// [`Self::forward`] over packed rows (CPU). With the CPU kernels (f32, GELU) the layer runs
    /// in place: its attention half a group of whole texts at a time, then its feed-forward half
    /// a block of rows at a time ([`Self::feed_forward_in_blocks`]), each result written over
    /// its rows of `hidden` (whose storage nothing else holds), which it returns. No product of
    /// the whole batch is made: the query, key and value rows of a group and the intermediate
    /// product of a block stay in the cache, and what the layer allocates is a block's size.
    /// Texts attend within themselves and rows are otherwise independent, so the floats are
    /// those of the whole batch at once.
    fn forward_packed(
        &self,
        hidden: Tensor,
        lengths: &[usize],
        heads: usize,
        activation: HiddenAct,
    ) -> Result<Tensor> {
        if activation != HiddenAct::Gelu || !uses_cpu_kernels(&hidden) {
            return self.forward(&hidden, &Attention::Packed(lengths), heads, activation);
        }
        let mut start = 0;
        for texts in text_groups(lengths, BLOCK_ROWS) {
            let rows = hidden.narrow(0, start, texts.iter().sum())?;
            let attended = self.attention_half(&rows, &Attention::Packed(texts), heads)?;
            hidden.slice_set(&attended, 0, start)?;
            start += rows.dim(0)?;
        }
        self.feed_forward_in_blocks(hidden)
    }

    /// One post-norm transformer layer over `hidden` `[tokens, width]`, its rows laid out as
    /// `attention` says.
    fn forward(
        &self,
        hidden: &Tensor,
        attention: &Attention,
        heads: usize,
        activation: HiddenAct,
    ) -> Result<Tensor> {
        let attended = self.attention_half(hidden, attention, heads)?;
        if activation == HiddenAct::Gelu && uses_cpu_kernels(&attended) {
            return self.feed_forward_in_blocks(attended);
        }
        let activated = match activation {
            HiddenAct::Gelu => self.intermediate.forward(&attended)?.gelu_erf()?,
            HiddenAct::GeluApproximate => self.intermediate.forward(&attended)?.gelu()?,
            HiddenAct::Relu => self.intermediate.forward(&attended)?.relu()?,
        };
        self.output.forward(&activated, &attended)
    }

    /// `norm(attention(x)·Wᵀ + b + x)` for rows `x` laid out as `attention` says, into new rows.
    fn attention_half(
        &self,
        hidden: &Tensor,
        attention: &Attention,
        heads: usize,
    ) -> Result<Tensor> {
        let qkv = self.qkv.forward(hidden)?;
        let context = match attention {
            Attention::Packed(lengths) => attention::packed_attention(&qkv, lengths, heads)?,
            Attention::Padded { batch, mask } => padded_attention(&qkv, *batch, heads, mask)?,
        };
        self.attention_out.forward(&context, hidden)
    }

    /// The feed-forward half on the CPU (GELU), a block of rows at a time, each block's result
    /// written over its rows of `attended` (whose storage nothing else holds), which the layer
    /// then returns. The intermediate product is four times as wide as the hidden state: whole,
    /// it can take tens of megabytes of fresh pages every layer, and its GELU pass runs from
    /// memory; a block of it stays in the cache from one product to the next. Rows are
    /// independent, so the floats are those of the whole product.
    fn feed_forward_in_blocks(&self, attended: Tensor) -> Result<Tensor> {
        let (tokens, _) = attended.dims2()?;
        if tokens <= BLOCK_ROWS {
            return self.feed_forward(&attended);
        }
        for start in (0..tokens).step_by(BLOCK_ROWS) {
            let rows = attended.narrow(0, start, BLOCK_ROWS.min(tokens - start))?;
            attended.slice_set(&self.feed_forward(&rows)?, 0, start)?;
        }
        Ok(attended)
    }

    /// `norm(gelu(x·W₁ᵀ + b₁)·W₂ᵀ + b₂ + x)` for rows `x` on the CPU, into new rows.
    fn feed_forward(&self, attended: &Tensor) -> Result<Tensor> {
        let inner = self.intermediate.product(attended)?;
        kernels::bias_gelu_in_place(&inner, &self.intermediate.bias)?;
        self.output.forward(&inner, attended)
    }
}

/// Rows of a feed-forward block, and most rows of a group of texts in the attention half. Each
/// block streams the layer's two weight matrices once, so fewer rows read them more often
/// (bge-large's, 16 MiB in bf16, ran slower at 192 rows than whole); at 512 rows the
/// intermediate product is 3 MiB for all-MiniLM-L6-v2 and 8 MiB for bge-large, and 512 to 1,024
/// rows ran alike (docs/PERFORMANCE.md).
const BLOCK_ROWS: usize = 512;

/// `lengths` cut into runs of consecutive texts of at most `rows` rows together (a longer text
/// alone), in order.
fn text_groups(lengths: &[usize], rows: usize) -> Vec<&[usize]> {
    let mut groups = Vec::new();
    let (mut first, mut taken) = (0, 0);
    for (text, &length) in lengths.iter().enumerate() {
        if text > first && taken + length > rows {
            groups.push(&lengths[first..text]);
            (first, taken) = (text, 0);
        }
        taken += length;
    }
    if first < lengths.len() {
        groups.push(&lengths[first..]);
    }
    groups
}

/// The attention context `[tokens, width]` of `qkv` `[tokens, 3 · width]` for `batch` texts
/// padded to the same length.
fn padded_attention(qkv: &Tensor, batch: usize, heads: usize, mask: &Mask) -> Result<Tensor> {
    let (tokens, three_widths) = qkv.dims2()?;
    let (longest, width) = (tokens / batch, three_widths / 3);
    let head_width = width / heads;
    // [tokens, 3·width] → [3, batch, heads, longest, head_width]: one copy for all three.
    let qkv = qkv
        .reshape((batch, longest, 3, heads, head_width))?
        .permute((2, 0, 3, 1, 4))?
        .contiguous()?;
    let (query, key, value) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
    let scores = (query.matmul(&key.t()?)? * f64::from(head_width as f32).sqrt().recip())?;
    candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&mask.0)?)?
        .matmul(&value)?
        .transpose(1, 2)?
        .reshape((tokens, width))
}

/// True where the CPU kernels apply: f32 on the CPU.
fn uses_cpu_kernels(xs: &Tensor) -> bool {
    xs.device().is_cpu() && xs.dtype() == DType::F32
}

/// A linear layer, `x·Wᵀ + b`.
struct Dense {
    weight: Weight,
    bias: Tensor,
}

/// How the linear layers' weights are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// As tensors, for candle's products (on a CPU, f32).
    Tensors,
    /// In f32 panels for [`crate::f32_panels`]'s product (CPU, f32 tensors).
    F32Panels,
    /// Rounded to f16 panels for the same product (CPU, f32 tensors).
    F16Panels,
    /// Rounded to bf16 panels for [`crate::bf16`]'s product (CPU, f32 tensors).
    Bf16,
    /// Quantised to int8 blocks for [`crate::int8`]'s product (CPU, f32 tensors).
    Int8,
}

/// A linear layer's `W`.
enum Weight {
    /// `[outputs, inputs]`, as stored.
    Tensor(Tensor),
    /// The same, laid out in f32 panels for the CPU.
    F32Panels(F32Panels),
    /// The same, rounded to f16 in panels for the CPU.
    F16Panels(F16Panels),
    /// The same, packed as bf16 for the CPU.
    Bf16(Bf16Weights),
    /// The same, quantised to int8 blocks for the CPU.
    Int8(Int8Weights),
}

impl Dense {
    /// The weight `[outputs, inputs]` and bias `[outputs]` under `vb`.
    fn load(vb: &VarBuilder, inputs: usize, outputs: usize) -> Result<(Tensor, Tensor)> {
        Ok((
            vb.get((outputs, inputs), "weight")?,
            vb.get(outputs, "bias")?,
        ))
    }

    /// The layer, its weight packed as `packing` says (and the f32 copy let go).
    fn new(weight: Tensor, bias: Tensor, packing: Packing) -> Result<Self> {
        let weight = match packing {
            Packing::Tensors => Weight::Tensor(weight),
            Packing::F32Panels => Weight::F32Panels(F32Panels::new(&weight)?),
            Packing::F16Panels => Weight::F16Panels(F16Panels::new(&weight)?),
            Packing::Bf16 => Weight::Bf16(Bf16Weights::new(&weight)?),
            Packing::Int8 => Weight::Int8(Int8Weights::new(&weight)?),
        };
        Ok(Self { weight, bias })
    }

    /// `x·Wᵀ` alone, for the kernels that add the bias in a pass of their own.
    fn product(&self, xs: &Tensor) -> Result<Tensor> {
        match &self.weight {
            Weight::Tensor(weight) if uses_cpu_kernels(xs) => linear::linear(xs, weight),
            Weight::Tensor(weight) => xs.matmul(&weight.t()?),
            Weight::F32Panels(weight) => weight.product(xs),
            Weight::F16Panels(weight) => weight.product(xs),
            Weight::Bf16(weight) => weight.product(xs),
            Weight::Int8(weight) => weight.product(xs),
        }
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let product = self.product(xs)?;
        if uses_cpu_kernels(xs) {
            kernels::bias_in_place(&product, &self.bias)?;
            Ok(product)
        } else {
            product.broadcast_add(&self.bias)
        }
    }
}

/// A linear layer closed by the residual connection and layer norm:
/// `norm(x·Wᵀ + b + residual)`, one in-place pass after the product on CPU.
struct AddNorm {
    dense: Dense,
    norm: LayerNorm,
    /// The dense bias, then the norm's scale and shift, stacked `[3, width]` for the kernel.
    params: Tensor,
    eps: f64,
}

impl AddNorm {
    /// From `dense` and `LayerNorm` under `vb`; `packing` as for [`Dense::new`].
    fn load(
        vb: &VarBuilder,
        inputs: usize,
        width: usize,
        eps: f64,
        packing: Packing,
    ) -> Result<Self> {
        let (weight, bias) = Dense::load(&vb.pp("dense"), inputs, width)?;
        let dense = Dense::new(weight, bias, packing)?;
        let scale = vb.pp("LayerNorm").get(width, "weight")?;
        let shift = vb.pp("LayerNorm").get(width, "bias")?;
        let params = Tensor::stack(&[&dense.bias, &scale, &shift], 0)?;
        Ok(Self {
            dense,
            norm: LayerNorm::new(scale, shift, eps),
            params,
            eps,
        })
    }

    fn forward(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        if uses_cpu_kernels(xs) {
            let out = self.dense.product(xs)?;
            kernels::add_norm_in_place(&out, residual, &self.params, self.eps as f32)?;
            Ok(out)
        } else {
            self.norm.forward(&(self.dense.forward(xs)? + residual)?)
        }
    }
}

/// Which keys are padding: `[batch, 1, 1, longest]`, 0 for real tokens, the most negative
/// value for padding.
struct Mask(Tensor);

impl Mask {
    fn new(lengths: &[usize], longest: usize, dtype: DType, device: &Device) -> Result<Self> {
        let values: Vec<f32> = lengths
            .iter()
            .flat_map(|&n| (0..longest).map(move |j| if j < n { 0.0 } else { f32::MIN }))
            .collect();
        Ok(Self(
            Tensor::from_vec(values, (lengths.len(), 1, 1, longest), device)?.to_dtype(dtype)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Write as _;

    use candle_core::{DType, Device, IndexOp, Tensor};
    use candle_nn::{VarBuilder, VarMap};
    use candle_transformers::models::bert::{Config, HiddenAct};

    use super::{Attention, BLOCK_ROWS, Bert, Mask, Packing, padded_attention, text_groups};
    use crate::attention::packed_attention;
    use crate::kernels::tests::max_difference;
    use crate::model::Pooling;

    /// A small BERT with fixed pseudo-random weights, every tensor in `dtype`.
    fn small_bert(dtype: DType) -> Bert {
        small_bert_packed(dtype, Packing::Tensors)
    }

    /// The same weights, the linear layers' held as `packing` says.
    fn small_bert_packed(dtype: DType, packing: Packing) -> Bert {
        let config = Config {
            vocab_size: 40,
            hidden_size: 32,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            intermediate_size: 64,
            max_position_embeddings: 16,
            hidden_act: HiddenAct::Gelu,
            ..Config::default()
        };
        // Loading once from an empty map names every tensor the encoder asks for.
        let names = VarMap::new();
        Bert::load(
            &VarBuilder::from_varmap(&names, DType::F32, &Device::Cpu),
            &config,
            Packing::Tensors,
        )
        .unwrap();
        let names = names.data().lock().unwrap();
        let mut names: Vec<_> = names.iter().collect();
        // In a fixed order, so that every call gives every tensor the same values.
        names.sort_by_key(|(name, _)| name.as_str());
        let mut state = 0x9E37_79B9_u32;
        let mut weights = HashMap::new();
        for (name, var) in names {
            let values: Vec<f32> = (0..var.elem_count())
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    f32::from(u16::try_from(state >> 16).unwrap()) / 65_536.0 - 0.5
                })
                .collect();
            let tensor = Tensor::from_vec(values, var.shape(), &Device::Cpu)
                .and_then(|t| t.to_dtype(dtype))
                .unwrap();
            weights.insert(name.clone(), tensor);
        }
        let vb = VarBuilder::from_tensors(weights, dtype, &Device::Cpu);
        Bert::load(&vb, &config, packing).unwrap()
    }

    /// The packings of f32 weights this CPU runs.
    fn f32_packings() -> Vec<Packing> {
        let mut packings = vec![Packing::Tensors];
        if crate::f32_panels::available() {
            packings.push(Packing::F32Panels);
        }
        packings
    }

    /// The weights in f32 panels give candle's vectors, but for rounding; in f16 panels, close
    /// ones.
    #[test]
    fn panels_embed_as_candles_products_do() {
        if !crate::f32_panels::available() {
            // Straight to stderr, past the harness's capture: a skip should be seen.
            let _ = writeln!(
                std::io::stderr(),
                "bert::tests::panels_embed_as_candles_products_do skipped: no AVX2 and FMA"
            );
            return;
        }
        let texts: [&[u32]; 3] = [&[2, 17, 5, 33, 3], &[2], &[2, 9, 9, 9, 14, 21, 39, 1, 3]];
        let candles = small_bert(DType::F32);
        let panels = small_bert_packed(DType::F32, Packing::F32Panels);
        let halves = small_bert_packed(DType::F32, Packing::F16Panels);
        for pooling in [Pooling::Cls, Pooling::Mean] {
            let expected = candles.embed(&texts, 0, pooling).unwrap();
            let got = panels.embed(&texts, 0, pooling).unwrap();
            let difference = max_difference(&expected, &got);
            assert!(difference < 1e-5, "{pooling:?}: {difference}");
            // f16 weights: close to f32's vectors, and not them.
            let got = halves.embed(&texts, 0, pooling).unwrap();
            let agreement = cosine(&expected, &got);
            assert!(agreement > 0.9999, "{pooling:?} in f16: cosine {agreement}");
            assert!(max_difference(&expected, &got) > 0.0, "{pooling:?} in f16");
        }
    }

    fn cosine(a: &Tensor, b: &Tensor) -> f32 {
        let sum = |t: Tensor| t.sum_all().and_then(|s| s.to_scalar::<f32>()).unwrap();
        sum((a * b).unwrap()) / (sum(a.sqr().unwrap()) * sum(b.sqr().unwrap())).sqrt()
    }

    /// The padded path that GPUs take (embeddings, masked attention, pooling that skips padding)
    /// gives the packed CPU path's vectors: in f32 on the same weights, and in f16 with candle's
    /// own ops throughout, as on a GPU; a text of no tokens gets zeros on both, a batch of none
    /// no rows.
    #[test]
    fn the_gpu_path_embeds_as_the_cpu_path_does() {
        let texts: [&[u32]; 5] = [
            &[2, 17, 5, 33, 3],
            &[2],
            &[],
            &[2, 9, 9, 9, 14, 21, 39, 1, 3],
            &[4, 0, 7],
        ];
        let filled: Vec<&[u32]> = texts.iter().copied().filter(|t| !t.is_empty()).collect();
        let model = small_bert(DType::F32);
        let half = small_bert(DType::F16);
        for pooling in [Pooling::Cls, Pooling::Mean] {
            let expected = model.embed(&texts, 0, pooling).unwrap();
            assert_eq!(expected.dims(), [5, 32]);
            let expected_filled =
                Tensor::cat(&[expected.i(..2).unwrap(), expected.i(3..).unwrap()], 0).unwrap();
            let padded = model.embed_padded(&filled, None, 0, pooling).unwrap();
            let difference = max_difference(&expected_filled, &padded);
            assert!(difference < 1e-5, "{pooling:?}: {difference}");
            let rounded = half.embed(&texts, 0, pooling).unwrap();
            assert_eq!(rounded.dtype(), DType::F32);
            for text in [0, 1, 3, 4] {
                let cosine = cosine(&expected.i(text).unwrap(), &rounded.i(text).unwrap());
                assert!(cosine > 0.999, "{pooling:?}, text {text}: {cosine}");
            }
            for vectors in [&expected, &rounded] {
                let empty: Vec<f32> = vectors.i(2).unwrap().to_vec1().unwrap();
                assert_eq!(empty, [0.0; 32], "the text of no tokens");
            }
            assert_eq!(model.embed(&[], 0, pooling).unwrap().dims(), [0, 32]);
        }
    }

    /// Pairs (a question and a passage) take both paths alike, and the second segment's token
    /// type counts.
    #[test]
    fn pairs_embed_alike_on_both_paths_and_their_segments_count() {
        let texts: [&[u32]; 2] = [&[2, 17, 5, 3, 33, 9, 3], &[2, 9, 3, 14, 3]];
        let segments: [&[u32]; 2] = [&[0, 0, 0, 0, 1, 1, 1], &[0, 0, 0, 1, 1]];
        let model = small_bert(DType::F32);
        let packed = model.embed_pairs(&texts, &segments, 0).unwrap();
        let padded = model
            .embed_padded(&texts, Some(&segments), 0, Pooling::Cls)
            .unwrap();
        assert!(max_difference(&packed, &padded) < 1e-5);
        // A head's product runs on them as they are, on a GPU too.
        assert!(packed.is_contiguous() && padded.is_contiguous());
        let one_segment = model.embed(&texts, 0, Pooling::Cls).unwrap();
        assert!(max_difference(&packed, &one_segment) > 1e-3);
        assert!(model.embed_pairs(&texts, &segments[..1], 0).is_err());
    }

    /// A batch of more rows than a feed-forward block runs block by block, the blocks cutting
    /// through texts, and gets the floats of the whole product; the caller's rows are
    /// overwritten with the result.
    #[test]
    fn feed_forward_blocks_give_the_whole_products_floats() {
        for packing in f32_packings() {
            feed_forward_blocks_give_the_whole_products_floats_with(packing);
        }
    }

    fn feed_forward_blocks_give_the_whole_products_floats_with(packing: Packing) {
        let model = small_bert_packed(DType::F32, packing);
        let layer = &model.layers[0];
        let rows = BLOCK_ROWS + 88;
        let attended = Tensor::randn(0f32, 1.0, (rows, 32), &Device::Cpu).unwrap();
        let whole = layer.feed_forward(&attended).unwrap();
        let own = attended.copy().unwrap();
        let blocked = layer.feed_forward_in_blocks(own.clone()).unwrap();
        assert_eq!(blocked.dims(), [rows, 32]);
        let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(values(&blocked), values(&whole));
        assert_eq!(values(&own), values(&whole), "written over the rows given");
        assert!(max_difference(&whole, &attended) > 0.1);
    }

    /// The layer in place over packed rows (its attention half a group of whole texts at a time)
    /// gives the floats of its attention over the whole batch at once.
    #[test]
    fn a_layer_in_place_gives_the_whole_batchs_floats() {
        for packing in f32_packings() {
            a_layer_in_place_gives_the_whole_batchs_floats_with(packing);
        }
    }

    fn a_layer_in_place_gives_the_whole_batchs_floats_with(packing: Packing) {
        let model = small_bert_packed(DType::F32, packing);
        let layer = &model.layers[1];
        let lengths: Vec<usize> = (0..80).map(|text| 1 + text * 7 % 16).collect();
        let tokens = lengths.iter().sum();
        assert!(tokens > BLOCK_ROWS, "{tokens} rows, more than a group");
        let hidden = Tensor::randn(0f32, 1.0, (tokens, 32), &Device::Cpu).unwrap();
        let whole = layer
            .forward(&hidden, &Attention::Packed(&lengths), 4, HiddenAct::Gelu)
            .unwrap();
        let in_place = layer
            .forward_packed(hidden.copy().unwrap(), &lengths, 4, HiddenAct::Gelu)
            .unwrap();
        let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(values(&in_place), values(&whole));
        assert!(max_difference(&whole, &hidden) > 0.1);
    }

    #[test]
    fn text_groups_take_whole_texts_up_to_the_rows() {
        let groups = text_groups(&[3, 2, 4, 9, 1, 0, 1], 5);
        assert_eq!(groups, [&[3, 2][..], &[4], &[9], &[1, 0, 1]]);
        assert!(text_groups(&[], 5).is_empty());
    }

    /// The padded path (GPUs) gives every real token the context the packed path (CPU) gives it,
    /// whatever the padding rows hold.
    #[test]
    fn padded_and_packed_attention_agree_on_real_tokens() {
        let (heads, width, longest) = (2, 8, 5);
        let lengths = [3, 5, 1];
        let tokens: usize = lengths.iter().sum();
        let packed = Tensor::randn(0f32, 1.0, (tokens, 3 * width), &Device::Cpu).unwrap();
        let noise = Tensor::randn(0f32, 9.0, (longest, 3 * width), &Device::Cpu).unwrap();
        let mut rows = Vec::new();
        let mut start = 0;
        for &length in &lengths {
            rows.push(packed.i(start..start + length).unwrap());
            rows.push(noise.i(length..).unwrap());
            start += length;
        }
        let padded = Tensor::cat(&rows, 0).unwrap();
        let mask = Mask::new(&lengths, longest, DType::F32, &Device::Cpu).unwrap();
        let through_padding = padded_attention(&padded, lengths.len(), heads, &mask).unwrap();
        let through_packing = packed_attention(&packed, &lengths, heads).unwrap();
        let mut start = 0;
        for (text, &length) in lengths.iter().enumerate() {
            let padded_rows = through_padding
                .i(text * longest..text * longest + length)
                .unwrap();
            let packed_rows = through_packing.i(start..start + length).unwrap();
            let difference = max_difference(&padded_rows, &packed_rows);
            assert!(difference < 1e-5, "text {text}: {difference}");
            start += length;
        }
    }
}
