//! Gemma 3 over quantized GGUF weights.
//!
//! candle-transformers 0.11 has a quantized Gemma 3, but it gates the feed-forward with `SiLU`
//! where Gemma uses `GELU` (tanh approximation), so its next-token scores drift from llama.cpp's
//! on the same file. This is the model as Gemma 3 defines it: scaled embeddings, norms before
//! and after attention and feed-forward, per-head norms on queries and keys, and five
//! sliding-window layers (local rotary base) for every global one.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{D, DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::Embedding;
use candle_transformers::quantized_nn::RmsNorm;
use candle_transformers::utils::repeat_kv;

/// Gemma 3's rotary bases when the file does not name them: global layers, then local ones.
const GLOBAL_ROPE_BASE: f32 = 1_000_000.0;
const LOCAL_ROPE_BASE: f32 = 10_000.0;
/// Every sixth layer attends globally, the others within the sliding window.
const DEFAULT_SLIDING_PATTERN: usize = 6;

struct Rotary {
    cos: Tensor,
    sin: Tensor,
}

impl Rotary {
    fn new(head_dim: usize, base: f32, max_positions: usize, device: &Device) -> Result<Self> {
        let inverse: Vec<f32> = (0..head_dim)
            .step_by(2)
            .map(|i| 1.0 / base.powf(i as f32 / head_dim as f32))
            .collect();
        let inverse = Tensor::from_vec(inverse, (1, head_dim / 2), device)?;
        let positions = Tensor::arange(0u32, max_positions as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((max_positions, 1))?;
        let angles = positions.matmul(&inverse)?;
        Ok(Self {
            cos: angles.cos()?,
            sin: angles.sin()?,
        })
    }

    fn apply(&self, x: &Tensor, position: usize) -> Result<Tensor> {
        let length = x.dim(2)?;
        let cos = self.cos.narrow(0, position, length)?;
        let sin = self.sin.narrow(0, position, length)?;
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
    }
}

struct Layer {
    attention_norm: RmsNorm,
    query: QMatMul,
    key: QMatMul,
    value: QMatMul,
    output: QMatMul,
    query_norm: RmsNorm,
    key_norm: RmsNorm,
    post_attention_norm: RmsNorm,
    feed_forward_norm: RmsNorm,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    post_feed_forward_norm: RmsNorm,
    /// Keys reach this many positions back; `None` on global layers.
    window: Option<usize>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    cache: Option<(Tensor, Tensor)>,
}

impl Layer {
    fn attend(&mut self, x: &Tensor, position: usize, rotary: &Rotary) -> Result<Tensor> {
        let (batch, length, _) = x.dims3()?;
        let heads = |t: Tensor, count: usize| {
            t.reshape((batch, length, count, self.head_dim))?
                .transpose(1, 2)
        };
        let q = heads(self.query.forward(x)?, self.heads)?;
        let k = heads(self.key.forward(x)?, self.kv_heads)?;
        let v = heads(self.value.forward(x)?, self.kv_heads)?.contiguous()?;
        let q = rotary.apply(&self.query_norm.forward(&q.contiguous()?)?, position)?;
        let k = rotary.apply(&self.key_norm.forward(&k.contiguous()?)?, position)?;
        let (k, v) = match self.cache.take() {
            Some((past_k, past_v)) if position > 0 => (
                Tensor::cat(&[&past_k, &k], 2)?,
                Tensor::cat(&[&past_v, &v], 2)?,
            ),
            _ => (k, v),
        };
        // A sliding layer's queries never look further back than its window, so older keys go.
        let (k, v) = match self.window.map(|window| window + length - 1) {
            Some(keep) if k.dim(2)? > keep => {
                let start = k.dim(2)? - keep;
                (k.narrow(2, start, keep)?, v.narrow(2, start, keep)?)
            }
            _ => (k, v),
        };
        self.cache = Some((k.clone(), v.clone()));
        let past = k.dim(2)? - length;
        let repeat = self.heads / self.kv_heads;
        let k = repeat_kv(k, repeat)?.contiguous()?;
        let v = repeat_kv(v, repeat)?.contiguous()?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        // One new query sees every key kept.
        if length > 1 {
            let mask = self.mask(length, past, x.device())?;
            scores = scores.broadcast_add(&mask)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let attended = weights.matmul(&v)?.transpose(1, 2)?.reshape((
            batch,
            length,
            self.heads * self.head_dim,
        ))?;
        self.output.forward(&attended)
    }

    /// 0 where query `i` (of `length`, after `past` cached keys) may see key `j`, else -inf.
    fn mask(&self, length: usize, past: usize, device: &Device) -> Result<Tensor> {
        let keys = past + length;
        let values: Vec<f32> = (0..length)
            .flat_map(|i| {
                let query = past + i;
                (0..keys).map(move |key| {
                    let visible = key <= query && self.window.is_none_or(|w| query - key < w);
                    if visible { 0.0 } else { f32::NEG_INFINITY }
                })
            })
            .collect();
        Tensor::from_vec(values, (length, keys), device)
    }

    fn forward(&mut self, x: &Tensor, position: usize, rotary: &Rotary) -> Result<Tensor> {
        let attended = self.attend(&self.attention_norm.forward(x)?, position, rotary)?;
        let x = (x + self.post_attention_norm.forward(&attended)?)?;
        let h = self.feed_forward_norm.forward(&x)?;
        let gated = (self.gate.forward(&h)?.gelu()? * self.up.forward(&h)?)?;
        let fed = self.down.forward(&gated)?;
        x + self.post_feed_forward_norm.forward(&fed)?
    }
}

/// A Gemma 3 transformer ready to run.
pub struct Gemma3 {
    embeddings: Embedding,
    embedding_scale: f64,
    layers: Vec<Layer>,
    /// Rotary tables of the sliding-window layers and of the global ones.
    local_rotary: Rotary,
    global_rotary: Rotary,
    norm: RmsNorm,
    head: QMatMul,
}

impl Gemma3 {
    /// Reads the weights and settings a llama.cpp conversion writes (`gemma3.*` keys).
    pub fn from_gguf<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let value = |key: &str| {
            content
                .metadata
                .get(&format!("gemma3.{key}"))
                .ok_or_else(|| candle_core::Error::Msg(format!("no gemma3.{key} in the file")))
        };
        let count = |key: &str| value(key)?.to_u32().map(|n| n as usize);
        let base = |key: &str, default: f32| {
            value(key)
                .and_then(candle_core::quantized::gguf_file::Value::to_f32)
                .unwrap_or(default)
        };
        let heads = count("attention.head_count")?;
        let kv_heads = count("attention.head_count_kv")?;
        let head_dim = count("attention.key_length")?;
        let hidden = count("embedding_length")?;
        let positions = count("context_length")?;
        let window = count("attention.sliding_window")?;
        let pattern = count("attention.sliding_window_type").unwrap_or(DEFAULT_SLIDING_PATTERN);
        let eps = f64::from(value("attention.layer_norm_rms_epsilon")?.to_f32()?);
        let global_rope = base("rope.freq_base", GLOBAL_ROPE_BASE);
        let local_rope = base("rope.local_freq_base", LOCAL_ROPE_BASE);
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let norm = |t: QTensor| RmsNorm::from_qtensor(t, eps);
        let embedding_table = Arc::new(tensor("token_embd.weight")?);
        // Gemma ties the output projection to the embeddings unless the file has its own.
        let head = if content.tensor_infos.contains_key("output.weight") {
            QMatMul::from_qtensor(tensor("output.weight")?)?
        } else {
            QMatMul::from_arc(Arc::clone(&embedding_table))?
        };
        let embeddings = Embedding::new(embedding_table.dequantize(device)?, hidden);
        let final_norm = norm(tensor("output_norm.weight")?)?;
        let count_layers = count("block_count")?;
        let mut layers = Vec::with_capacity(count_layers);
        for index in 0..count_layers {
            let mut weight = |part: &str| tensor(&format!("blk.{index}.{part}.weight"));
            let sliding = (index + 1) % pattern != 0;
            layers.push(Layer {
                attention_norm: norm(weight("attn_norm")?)?,
                query: QMatMul::from_qtensor(weight("attn_q")?)?,
                key: QMatMul::from_qtensor(weight("attn_k")?)?,
                value: QMatMul::from_qtensor(weight("attn_v")?)?,
                output: QMatMul::from_qtensor(weight("attn_output")?)?,
                query_norm: norm(weight("attn_q_norm")?)?,
                key_norm: norm(weight("attn_k_norm")?)?,
                post_attention_norm: norm(weight("post_attention_norm")?)?,
                feed_forward_norm: norm(weight("ffn_norm")?)?,
                gate: QMatMul::from_qtensor(weight("ffn_gate")?)?,
                up: QMatMul::from_qtensor(weight("ffn_up")?)?,
                down: QMatMul::from_qtensor(weight("ffn_down")?)?,
                post_feed_forward_norm: norm(weight("post_ffw_norm")?)?,
                window: sliding.then_some(window),
                heads,
                kv_heads,
                head_dim,
                cache: None,
            });
        }
        Ok(Self {
            embeddings,
            embedding_scale: (hidden as f64).sqrt(),
            layers,
            local_rotary: Rotary::new(head_dim, local_rope, positions, device)?,
            global_rotary: Rotary::new(head_dim, global_rope, positions, device)?,
            norm: final_norm,
            head,
        })
    }

    /// The next token's scores after `input` (one row of ids) placed at `position`; position 0
    /// starts a new sequence.
    pub fn forward(&mut self, input: &Tensor, position: usize) -> Result<Tensor> {
        let length = input.dim(1)?;
        let mut x = (self.embeddings.forward(input)? * self.embedding_scale)?;
        for layer in &mut self.layers {
            let rotary = if layer.window.is_some() {
                &self.local_rotary
            } else {
                &self.global_rotary
            };
            x = layer.forward(&x, position, rotary)?;
        }
        let last = self.norm.forward(&x.i((.., length - 1..))?)?;
        self.head.forward(&last)?.squeeze(D::Minus2)
    }
}
