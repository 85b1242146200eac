//! Llama (and Mistral, `SmolLM2`) and Qwen 2 over quantized GGUF weights, on the shared decoder
//! parts: the same arithmetic as candle-transformers' quantized Llama and Qwen 2, with the
//! prompt read through one matrix product per weight, keys and values cached in place and
//! grouped-query attention without copies. Qwen 2 is Llama with biases on the query, key and
//! value projections and the halves of each head rotated rather than adjacent pairs.
//! Mixture-of-experts files (Mixtral) go to candle's model instead.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::quantized::gguf_file::Content;
use candle_core::{D, Device, IndexOp, Module, Result, Tensor};
use candle_transformers::quantized_nn::RmsNorm;

use scar_embed::Gate;

use crate::decoder::{Linear, Rotary, SelfAttention, Settings, embeddings_and_head, gated};

/// llama.cpp's rotary base when the file does not name one.
const DEFAULT_ROPE_BASE: f32 = 10_000.0;

struct Layer {
    attention_norm: RmsNorm,
    attention: SelfAttention,
    feed_forward_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl Layer {
    fn forward(&mut self, x: &Tensor, position: usize, rotary: &Rotary) -> Result<Tensor> {
        let normed = self.attention_norm.forward(x)?;
        let x = (x + self.attention.forward(&normed, position, rotary)?)?;
        let h = self.feed_forward_norm.forward(&x)?;
        let gated = gated(&self.gate.forward(&h)?, &self.up.forward(&h)?, Gate::Silu)?;
        x + self.down.forward(&gated)?
    }
}

/// The members of the family, as a GGUF file's `general.architecture` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `llama`: Llama, Mistral, `SmolLM2`.
    Llama,
    /// `qwen2`.
    Qwen2,
}

impl Family {
    /// The prefix of the file's settings.
    fn key(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
        }
    }
}

/// A Llama-architecture transformer ready to run.
pub struct Llama {
    /// Quantized; rows are dequantized as they are looked up.
    embeddings: Arc<QTensor>,
    layers: Vec<Layer>,
    rotary: Rotary,
    norm: RmsNorm,
    head: Linear,
}

impl Llama {
    /// Whether the file holds a mixture of experts, which this model does not run.
    pub fn has_experts(content: &Content) -> bool {
        content
            .metadata
            .get("llama.expert_count")
            .and_then(|v| v.to_u32().ok())
            .is_some_and(|experts| experts > 1)
    }

    /// Reads the weights and settings a llama.cpp conversion writes for `family` (`llama.*` or
    /// `qwen2.*` keys).
    pub fn from_gguf<R: Read + Seek>(
        family: Family,
        content: &Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let settings = Settings::new(content, family.key());
        let count = |key: &str| settings.count(key);
        let (heads, kv_heads) = settings.heads()?;
        let hidden = count("embedding_length")?;
        // Mistral Nemo and others name a head width other than the embedding's share.
        let head_dim = count("attention.key_length").unwrap_or(hidden / heads);
        let rope_dimensions = count("rope.dimension_count").unwrap_or(head_dim);
        let positions = count("context_length")?;
        let eps = f64::from(settings.float("attention.layer_norm_rms_epsilon")?);
        let rope_base = settings
            .float("rope.freq_base")
            .unwrap_or(DEFAULT_ROPE_BASE);
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        // Small models tie the output projection to the embeddings.
        let (embeddings, head) = embeddings_and_head(content, &mut tensor)?;
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        let count_layers = count("block_count")?;
        let mut layers = Vec::with_capacity(count_layers);
        for index in 0..count_layers {
            let biases = if family == Family::Qwen2 {
                let mut bias =
                    |part: &str| tensor(&format!("blk.{index}.{part}.bias"))?.dequantize(device);
                Some([bias("attn_q")?, bias("attn_k")?, bias("attn_v")?])
            } else {
                None
            };
            let mut weight = |part: &str| tensor(&format!("blk.{index}.{part}.weight"));
            layers.push(Layer {
                attention_norm: RmsNorm::from_qtensor(weight("attn_norm")?, eps)?,
                attention: SelfAttention {
                    biases,
                    ..SelfAttention::load(&mut weight, heads, kv_heads, head_dim)?
                },
                feed_forward_norm: RmsNorm::from_qtensor(weight("ffn_norm")?, eps)?,
                gate: Linear::new(weight("ffn_gate")?)?,
                up: Linear::new(weight("ffn_up")?)?,
                down: Linear::new(weight("ffn_down")?)?,
            });
        }
        Ok(Self {
            embeddings,
            layers,
            // llama.cpp stores Llama's query and key weights for rotating adjacent pairs, and
            // Qwen 2's for rotating halves.
            rotary: Rotary::new(
                rope_dimensions,
                rope_base,
                positions,
                family == Family::Llama,
                device,
            )?,
            norm,
            head,
        })
    }

    /// The next token's scores after `input` (one row of ids) placed at `position`; position 0
    /// starts a new sequence.
    pub fn forward(&mut self, input: &Tensor, position: usize) -> Result<Tensor> {
        let length = input.dim(1)?;
        let mut x = self.embeddings.embedding(input)?;
        for layer in &mut self.layers {
            x = layer.forward(&x, position, &self.rotary)?;
        }
        let last = self.norm.forward(&x.i((.., length - 1..))?)?;
        self.head.forward(&last)?.squeeze(D::Minus2)
    }
}
