//! Gemma 2 and 3 over quantized GGUF weights.
//!
//! candle-transformers 0.11 has a quantized Gemma 3, but it gates the feed-forward with `SiLU`
//! where Gemma uses `GELU` (tanh approximation), so its next-token scores drift from llama.cpp's
//! on the same file; it has no quantized Gemma 2. This is the model as the two define it:
//! scaled embeddings, norms before and after attention and feed-forward, and sliding-window
//! layers among global ones. Gemma 3 adds per-head norms on queries and keys, a local rotary
//! base, and five sliding layers for every global one; Gemma 2 has one for one, and squashes
//! attention scores and final logits with soft caps.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::quantized::gguf_file::Content;
use candle_core::{D, Device, IndexOp, Module, Result, Tensor};
use candle_transformers::quantized_nn::RmsNorm;

use scar_embed::Gate;

use crate::decoder::{
    Linear, Rotary, SelfAttention, Settings, embeddings_and_head, gated, soft_cap,
};

/// Which Gemma a file holds, by its `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    Gemma2,
    Gemma3,
}

impl Generation {
    /// The prefix of the file's settings.
    fn key(self) -> &'static str {
        match self {
            Self::Gemma2 => "gemma2",
            Self::Gemma3 => "gemma3",
        }
    }

    /// Global and local rotary bases when the file does not name them (Gemma 2 has one).
    fn rope_bases(self) -> (f32, Option<f32>) {
        match self {
            Self::Gemma2 => (10_000.0, None),
            Self::Gemma3 => (1_000_000.0, Some(10_000.0)),
        }
    }

    /// One layer in this many attends globally, the others within the sliding window.
    fn sliding_pattern(self) -> usize {
        match self {
            Self::Gemma2 => 2,
            Self::Gemma3 => 6,
        }
    }
}

/// Gemma 2 27B's 46 layers: the one size whose queries are scaled by 1/√(width / heads)
/// (its `query_pre_attn_scalar`) rather than 1/√(head dimension), as llama.cpp reads it.
const GEMMA2_27B_LAYERS: usize = 46;

struct Layer {
    attention_norm: RmsNorm,
    attention: SelfAttention,
    post_attention_norm: RmsNorm,
    feed_forward_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
    post_feed_forward_norm: RmsNorm,
}

impl Layer {
    fn forward(&mut self, x: &Tensor, position: usize, rotary: &Rotary) -> Result<Tensor> {
        let normed = self.attention_norm.forward(x)?;
        let attended = self.attention.forward(&normed, position, rotary)?;
        let x = (x + self.post_attention_norm.forward(&attended)?)?;
        let h = self.feed_forward_norm.forward(&x)?;
        let gated = gated(
            &self.gate.forward(&h)?,
            &self.up.forward(&h)?,
            Gate::GeluTanh,
        )?;
        let fed = self.down.forward(&gated)?;
        x + self.post_feed_forward_norm.forward(&fed)?
    }
}

/// A Gemma 2 or 3 transformer ready to run.
pub struct Gemma {
    /// Quantized; rows are dequantized as they are looked up.
    embeddings: Arc<QTensor>,
    embedding_scale: f64,
    layers: Vec<Layer>,
    /// Rotary tables of the sliding-window layers and of the global ones.
    local_rotary: Rotary,
    global_rotary: Rotary,
    norm: RmsNorm,
    head: Linear,
    /// Gemma 2's soft cap on the output logits.
    final_softcap: Option<f64>,
}

impl Gemma {
    /// Reads the weights and settings a llama.cpp conversion writes (`gemma2.*` or `gemma3.*`
    /// keys).
    pub fn from_gguf<R: Read + Seek>(
        generation: Generation,
        content: &Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let settings = Settings::new(content, generation.key());
        let count = |key: &str| settings.count(key);
        let base = |key: &str, default: f32| settings.float(key).unwrap_or(default);
        let (heads, kv_heads) = settings.heads()?;
        let head_dim = count("attention.key_length")?;
        let hidden = count("embedding_length")?;
        let positions = count("context_length")?;
        let window = count("attention.sliding_window")?;
        let pattern =
            count("attention.sliding_window_type").unwrap_or(generation.sliding_pattern());
        if pattern == 0 {
            candle_core::bail!(
                "{}.attention.sliding_window_type is 0: one layer in how many attends globally?",
                generation.key()
            );
        }
        let eps = f64::from(settings.float("attention.layer_norm_rms_epsilon")?);
        let (global_default, local_default) = generation.rope_bases();
        let global_rope = base("rope.freq_base", global_default);
        let local_rope = base("rope.local_freq_base", local_default.unwrap_or(global_rope));
        let softcap = |key: &str| settings.float(key).ok().map(f64::from).filter(|&c| c > 0.0);
        let attention_softcap = softcap("attn_logit_softcapping");
        let final_softcap = softcap("final_logit_softcapping");
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let norm = |t: QTensor| RmsNorm::from_qtensor(t, eps);
        // Gemma ties the output projection to the embeddings unless the file has its own.
        let (embeddings, head) = embeddings_and_head(content, &mut tensor)?;
        let final_norm = norm(tensor("output_norm.weight")?)?;
        let count_layers = count("block_count")?;
        let query_scale = if generation == Generation::Gemma2 && count_layers == GEMMA2_27B_LAYERS {
            1.0 / (hidden as f64 / heads as f64).sqrt()
        } else {
            1.0 / (head_dim as f64).sqrt()
        };
        // Gemma 3 normalises each head's queries and keys; Gemma 2 has no such norms.
        let head_norms = generation == Generation::Gemma3;
        let mut layers = Vec::with_capacity(count_layers);
        for index in 0..count_layers {
            let mut weight = |part: &str| tensor(&format!("blk.{index}.{part}.weight"));
            let sliding = (index + 1) % pattern != 0;
            let mut head_norm = |part: &str| -> Result<Option<RmsNorm>> {
                head_norms.then(|| norm(weight(part)?)).transpose()
            };
            let (query_norm, key_norm) = (head_norm("attn_q_norm")?, head_norm("attn_k_norm")?);
            layers.push(Layer {
                attention_norm: norm(weight("attn_norm")?)?,
                attention: SelfAttention {
                    query_norm,
                    key_norm,
                    window: sliding.then_some(window),
                    softcap: attention_softcap,
                    scale: query_scale,
                    ..SelfAttention::load(&mut weight, heads, kv_heads, head_dim)?
                },
                post_attention_norm: norm(weight("post_attention_norm")?)?,
                feed_forward_norm: norm(weight("ffn_norm")?)?,
                gate: Linear::new(weight("ffn_gate")?)?,
                up: Linear::new(weight("ffn_up")?)?,
                down: Linear::new(weight("ffn_down")?)?,
                post_feed_forward_norm: norm(weight("post_ffw_norm")?)?,
            });
        }
        Ok(Self {
            embeddings,
            embedding_scale: (hidden as f64).sqrt(),
            layers,
            local_rotary: Rotary::new(head_dim, local_rope, positions, false, device)?,
            global_rotary: Rotary::new(head_dim, global_rope, positions, false, device)?,
            norm: final_norm,
            head,
            final_softcap,
        })
    }

    /// The next token's scores after `input` (one row of ids) placed at `position`; position 0
    /// starts a new sequence.
    pub fn forward(&mut self, input: &Tensor, position: usize) -> Result<Tensor> {
        let length = input.dim(1)?;
        let mut x = (self.embeddings.embedding(input)? * self.embedding_scale)?;
        for layer in &mut self.layers {
            let rotary = if layer.attention.window.is_some() {
                &self.local_rotary
            } else {
                &self.global_rotary
            };
            x = layer.forward(&x, position, rotary)?;
        }
        let last = self.norm.forward(&x.i((.., length - 1..))?)?;
        let logits = self.head.forward(&last)?.squeeze(D::Minus2)?;
        match self.final_softcap {
            Some(cap) => soft_cap(&logits, cap),
            None => Ok(logits),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use candle_core::quantized::gguf_file::{self, Value};

    use super::*;

    #[test]
    fn a_sliding_pattern_of_zero_is_an_error_not_a_division_by_zero() {
        let settings = [
            ("general.architecture", Value::String("gemma3".to_owned())),
            ("gemma3.attention.head_count", Value::U32(4)),
            ("gemma3.attention.head_count_kv", Value::U32(1)),
            ("gemma3.attention.key_length", Value::U32(64)),
            ("gemma3.embedding_length", Value::U32(256)),
            ("gemma3.context_length", Value::U32(128)),
            ("gemma3.attention.sliding_window", Value::U32(16)),
            ("gemma3.attention.sliding_window_type", Value::U32(0)),
        ];
        let metadata: Vec<(&str, &Value)> = settings.iter().map(|(k, v)| (*k, v)).collect();
        let mut file = Cursor::new(Vec::new());
        gguf_file::write(&mut file, &metadata, &[]).unwrap();
        file.set_position(0);
        let content = Content::read(&mut file).unwrap();
        let error = Gemma::from_gguf(Generation::Gemma3, &content, &mut file, &Device::Cpu)
            .err()
            .expect("a pattern of 0 is refused");
        assert!(
            error.to_string().contains("sliding_window_type is 0"),
            "{error}"
        );
    }
}
