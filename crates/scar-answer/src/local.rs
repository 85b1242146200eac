//! Generation with a quantized GGUF model through candle: the Llama (and Mistral), Qwen 2,
//! Qwen 3, Gemma 2 and 3 and Phi-3 architectures.

use std::borrow::Cow;
use std::io::{Cursor, Read, Seek};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use candle_transformers::models::{quantized_llama, quantized_phi3, quantized_qwen3};
use scar_embed::DeviceChoice;
use tokenizers::Tokenizer;

use crate::packed::Q8_0_BLOCK_BYTES;
use crate::template::ChatTemplate;
use crate::{
    AnswerError, Generation, GenerationParams, Generator, Prompt, Result, StopReason,
    gguf_tokenizer,
};

/// How many recent tokens the repetition penalty looks back over.
const REPEAT_WINDOW: usize = 64;

/// The instructions this CPU decodes `Q8_0`, `Q4_0`, `Q4_1`, `Q4_K`, `Q5_0`, `Q5_1`, `Q5_K` and
/// `Q6_K` weights with through our own products (`AVX-512 VNNI` or `AVX2`), or `None` where they go
/// through candle's kernels and `Q4_1`, `Q5_0` and `Q5_1` are converted at load (see
/// [`LoadOptions::requantize`]).
#[must_use]
pub fn decoding_instructions() -> Option<&'static str> {
    crate::packed::Kernel::best().map(crate::packed::Kernel::name)
}

/// How chat models decode and read prompts on this CPU, as a person reads it: which weight
/// formats go through our own products, on which instructions.
#[must_use]
pub fn cpu_decoding() -> String {
    match crate::packed::Kernel::best() {
        Some(kernel) => format!(
            "Q8_0, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K and Q6_K weights decoded on {}, prompts \
             of {} weights read in its byte products; other formats through candle's kernels{}",
            kernel.name(),
            kernel.prompt_formats(),
            scar_embed::cpu::cap_note()
        ),
        None => "every weight format through candle's kernels".to_owned(),
    }
}

/// Loading options for a local model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Where the model runs.
    pub device: DeviceChoice,
    /// Converts weights in formats without a fast CPU kernel to `Q8_0` at load time, for faster
    /// decoding: `Q4_1`, `Q5_0` and `Q5_1` where our own products do not read them
    /// ([`decoding_instructions`] is `None`, or rows that are not whole pairs of blocks). `Q8_0`
    /// holds a `Q5_0` block exactly and a `Q4_1` or `Q5_1` block almost exactly.
    pub requantize: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            device: DeviceChoice::Auto,
            requantize: true,
        }
    }
}

/// The transformer families this build runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Architecture {
    /// Llama, Mistral, `SmolLM2`; Qwen 2.
    Llama(crate::llama::Family),
    Qwen3,
    Gemma(crate::gemma::Generation),
    Phi3,
}

impl Architecture {
    /// The family a GGUF file's `general.architecture` names, if this build runs it.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "llama" => Self::Llama(crate::llama::Family::Llama),
            "qwen2" => Self::Llama(crate::llama::Family::Qwen2),
            "qwen3" => Self::Qwen3,
            "gemma2" => Self::Gemma(crate::gemma::Generation::Gemma2),
            "gemma3" => Self::Gemma(crate::gemma::Generation::Gemma3),
            "phi3" => Self::Phi3,
            _ => return None,
        })
    }
}

/// The transformer of one architecture. Each model clears its key-value cache when a forward
/// pass starts at position 0.
enum Weights {
    /// Llama, Mistral, `SmolLM2` and Qwen 2, on our decoder.
    Llama(crate::llama::Llama),
    /// Llama-architecture mixtures of experts (Mixtral), through candle's model.
    LlamaExperts(quantized_llama::ModelWeights),
    Qwen3(quantized_qwen3::ModelWeights),
    Gemma(crate::gemma::Gemma),
    Phi3(quantized_phi3::ModelWeights),
}

impl Weights {
    fn from_gguf<R: Read + Seek>(
        architecture: Architecture,
        content: Content,
        reader: &mut R,
        device: &Device,
    ) -> candle_core::Result<Self> {
        Ok(match architecture {
            Architecture::Llama(crate::llama::Family::Llama)
                if crate::llama::Llama::has_experts(&content) =>
            {
                Self::LlamaExperts(quantized_llama::ModelWeights::from_gguf(
                    content, reader, device,
                )?)
            }
            Architecture::Llama(family) => Self::Llama(crate::llama::Llama::from_gguf(
                family, &content, reader, device,
            )?),
            Architecture::Qwen3 => Self::Qwen3(quantized_qwen3::ModelWeights::from_gguf(
                content, reader, device,
            )?),
            Architecture::Gemma(generation) => Self::Gemma(crate::gemma::Gemma::from_gguf(
                generation, &content, reader, device,
            )?),
            Architecture::Phi3 => Self::Phi3(quantized_phi3::ModelWeights::from_gguf(
                false, content, reader, device,
            )?),
        })
    }

    /// The next token's logits after `input` (one row of token ids) placed at `position`.
    fn forward(&mut self, input: &Tensor, position: usize) -> candle_core::Result<Tensor> {
        match self {
            Self::Llama(model) => model.forward(input, position),
            Self::LlamaExperts(model) => model.forward(input, position),
            Self::Qwen3(model) => model.forward(input, position),
            Self::Gemma(model) => model.forward(input, position),
            Self::Phi3(model) => model.forward(input, position),
        }
    }
}

/// A GGUF chat model loaded for generation.
pub struct LocalModel {
    weights: Weights,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    stop_tokens: Vec<u32>,
    bos_token: Option<u32>,
    context_length: usize,
    device: Device,
    name: String,
    requantized: usize,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("template", &self.template)
            .field("context_length", &self.context_length)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads a GGUF file: weights, tokenizer (a `tokenizer.json` beside the file, else the one
    /// the GGUF carries), chat template and stop tokens.
    pub fn load(path: &Path, options: &LoadOptions) -> Result<Self> {
        let bad = |reason: &str, source: Option<Box<dyn std::error::Error + Send + Sync>>| {
            AnswerError::BadModel {
                path: path.to_owned(),
                reason: reason.to_owned(),
                source,
            }
        };
        let mut file = fs_err::File::open(path).map_err(AnswerError::Io)?;
        let content =
            Content::read(&mut file).map_err(|e| bad("unreadable GGUF", Some(e.into())))?;
        let metadata = &content.metadata;
        let text = |key: &str| metadata.get(key).and_then(|v| v.to_string().ok()).cloned();
        let architecture_name = text("general.architecture").unwrap_or_default();
        let Some(architecture) = Architecture::from_name(&architecture_name) else {
            return Err(AnswerError::UnsupportedArchitecture {
                path: path.to_owned(),
                architecture: architecture_name,
            });
        };
        let beside = path.with_file_name("tokenizer.json");
        let tokenizer = if beside.is_file() {
            Tokenizer::from_file(&beside)
                .map_err(|e| bad(&format!("cannot read {}", beside.display()), Some(e)))?
        } else {
            gguf_tokenizer::from_metadata(metadata)?
        };
        let template = ChatTemplate::detect(
            text("tokenizer.chat_template").as_deref(),
            tokenizer
                .get_added_tokens_decoder()
                .values()
                .map(|t| t.content.as_str()),
        )
        .ok_or_else(|| {
            bad(
                "no chat template this build knows (ChatML, Llama 3, Gemma, Phi-3, Mistral)",
                None,
            )
        })?;
        let number = |key: &str| metadata.get(key).and_then(|v| v.to_u32().ok());
        let eos = number("tokenizer.ggml.eos_token_id");
        let mut stop_tokens: Vec<u32> = template
            .end_of_turn()
            .iter()
            .filter_map(|token| tokenizer.token_to_id(token))
            .chain(eos)
            .collect();
        stop_tokens.sort_unstable();
        stop_tokens.dedup();
        let adds_bos = metadata
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(false);
        // Llama 3's template writes <|begin_of_text|> itself.
        let bos_token = (adds_bos && template != ChatTemplate::Llama3)
            .then(|| number("tokenizer.ggml.bos_token_id"))
            .flatten();
        let context_length =
            number(&format!("{architecture_name}.context_length")).map_or(2048, |n| n as usize);
        let device = options.device.open().map_err(AnswerError::Device)?;
        let (weights, requantized) = if options.requantize {
            load_requantized(architecture, content, &mut file, &device)
                .map_err(|e| bad("cannot load the weights", Some(e.into())))?
        } else {
            let weights = Weights::from_gguf(architecture, content, &mut file, &device)
                .map_err(|e| bad("cannot load the weights", Some(e.into())))?;
            (weights, 0)
        };
        Ok(Self {
            weights,
            tokenizer,
            template,
            stop_tokens,
            bos_token,
            context_length,
            device,
            name: path
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
            requantized,
        })
    }

    /// The chat format in use.
    #[must_use]
    pub fn template(&self) -> ChatTemplate {
        self.template
    }

    /// The longest prompt plus answer the model takes, in tokens.
    #[must_use]
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// The tokenizer in use.
    #[must_use]
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Weight tensors converted to `Q8_0` at load time.
    #[must_use]
    pub fn requantized_tensors(&self) -> usize {
        self.requantized
    }

    /// The prompt's tokens as the model sees them.
    pub(crate) fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>> {
        let text = self.template.render(&prompt.system, &prompt.user);
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(AnswerError::Tokenizer)?;
        Ok(self
            .bos_token
            .into_iter()
            .chain(encoding.get_ids().iter().copied())
            .collect())
    }

    /// The logits of the token after `tokens`, which start at `position` (0 starts afresh).
    pub(crate) fn next_logits(&mut self, tokens: &[u32], position: usize) -> Result<Tensor> {
        let input = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        Ok(self.weights.forward(&input, position)?.squeeze(0)?)
    }
}

impl Generator for LocalModel {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<Option<usize>> {
        self.encode(prompt).map(|ids| Some(ids.len()))
    }

    fn generate(
        &mut self,
        prompt: &Prompt,
        params: &GenerationParams,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let started = Instant::now();
        let prompt_ids = self.encode(prompt)?;
        if prompt_ids.len().saturating_add(params.max_tokens) > self.context_length {
            return Err(AnswerError::PromptTooLong {
                prompt_tokens: prompt_ids.len(),
                max_tokens: params.max_tokens,
                context_length: self.context_length,
            });
        }
        let sampling = if params.temperature <= 0.0 {
            Sampling::ArgMax
        } else {
            Sampling::TopP {
                p: params.top_p,
                temperature: params.temperature,
            }
        };
        let mut sampler = LogitsProcessor::from_sampling(params.seed, sampling);
        let mut logits = self.next_logits(&prompt_ids, 0)?;
        let mut first_token_at = None;
        let mut generated: Vec<u32> = Vec::new();
        let mut streamed = String::new();
        let mut stop = StopReason::MaxTokens;
        while generated.len() < params.max_tokens {
            let recent = &generated[generated.len().saturating_sub(REPEAT_WINDOW)..];
            if (params.repeat_penalty - 1.0).abs() > f32::EPSILON && !recent.is_empty() {
                logits = candle_transformers::utils::apply_repeat_penalty(
                    &logits,
                    params.repeat_penalty,
                    recent,
                )?;
            }
            let token = sampler.sample(&logits)?;
            first_token_at.get_or_insert_with(|| started.elapsed());
            if self.stop_tokens.contains(&token) {
                stop = StopReason::EndOfTurn;
                break;
            }
            generated.push(token);
            // Decode everything so far: a character split over tokens appears only once whole.
            let text = self
                .tokenizer
                .decode(&generated, true)
                .map_err(AnswerError::Tokenizer)?;
            if text.len() > streamed.len() && !text.ends_with('\u{fffd}') {
                let cancelled = text
                    .get(streamed.len()..)
                    .is_some_and(|new| on_text(new).is_break());
                streamed = text;
                if cancelled {
                    stop = StopReason::Cancelled;
                    break;
                }
            }
            let position = prompt_ids.len() + generated.len() - 1;
            logits = self.next_logits(&[token], position)?;
        }
        let text = self
            .tokenizer
            .decode(&generated, true)
            .map_err(AnswerError::Tokenizer)?;
        // The tail held back while it ended inside a character.
        if stop != StopReason::Cancelled
            && let Some(rest) = text.get(streamed.len()..).filter(|r| !r.is_empty())
        {
            let _ = on_text(rest);
        }
        let total = started.elapsed();
        let first_token = first_token_at.unwrap_or(total);
        Ok(Generation {
            text,
            prompt_tokens: Some(prompt_ids.len()),
            generated_tokens: generated.len(),
            stop,
            first_token_seconds: first_token.as_secs_f64(),
            total_seconds: total.as_secs_f64(),
        })
    }
}

/// Loads the weights, converting tensors whose format has no fast CPU kernel to `Q8_0`. The
/// converted model is rebuilt in memory as a GGUF image because candle's loader reads only
/// GGUF.
fn load_requantized<R: Read + Seek>(
    architecture: Architecture,
    content: Content,
    reader: &mut R,
    device: &Device,
) -> candle_core::Result<(Weights, usize)> {
    let ours = device.is_cpu() && decoding_instructions().is_some();
    let slow = |dtype: GgmlDType, dims: &[usize]| match dtype {
        GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
            !(ours && crate::packed::takes_shape(dims))
        }
        _ => false,
    };
    if !content
        .tensor_infos
        .values()
        .any(|info| slow(info.ggml_dtype, info.shape.dims()))
    {
        return Ok((
            Weights::from_gguf(architecture, content, reader, device)?,
            0,
        ));
    }
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    let mut converted = 0;
    for name in names {
        let tensor = content.tensor(reader, name, &Device::Cpu)?;
        let tensor = if slow(tensor.dtype(), tensor.shape().dims()) {
            converted += 1;
            to_q8_0(&tensor)?
        } else {
            tensor
        };
        tensors.push((name, tensor));
    }
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut image = Cursor::new(Vec::new());
    candle_core::quantized::gguf_file::write(&mut image, &metadata, &tensor_refs)?;
    drop(tensors);
    image.set_position(0);
    let converted_content = Content::read(&mut image)?;
    let weights = Weights::from_gguf(architecture, converted_content, &mut image, device)?;
    Ok((weights, converted))
}

fn to_q8_0(tensor: &QTensor) -> candle_core::Result<QTensor> {
    if tensor.dtype() == GgmlDType::Q5_0 {
        return q5_0_as_q8_0(tensor);
    }
    QTensor::quantize(&tensor.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)
}

/// Bytes of a `Q5_0` block: the scale (f16), the fifth bits of its 32 weights, their low nibbles.
const Q5_0_BLOCK: usize = 22;

/// `Q5_0` rewritten as `Q8_0` block for block: the same scale, each weight (−16 to 15) as a
/// signed byte, so that the weights are exactly the file's.
fn q5_0_as_q8_0(tensor: &QTensor) -> candle_core::Result<QTensor> {
    let data = tensor.data()?;
    let mut blocks = Vec::with_capacity(data.len() / Q5_0_BLOCK * Q8_0_BLOCK_BYTES);
    for block in data.chunks_exact(Q5_0_BLOCK) {
        let (scale, rest) = block.split_at(2);
        let (high, low) = rest.split_at(4);
        let high = u32::from_le_bytes([high[0], high[1], high[2], high[3]]);
        blocks.extend_from_slice(scale);
        // Weight j (of 32) is its nibble (low halves first) with bit j of `high` above it.
        let weight = |nibble: u8, j: usize| {
            let fifth = ((high >> j) & 1) as u8;
            ((nibble | fifth << 4).cast_signed() - 16).cast_unsigned()
        };
        blocks.extend(low.iter().enumerate().map(|(j, &q)| weight(q & 0x0F, j)));
        blocks.extend(low.iter().enumerate().map(|(j, &q)| weight(q >> 4, j + 16)));
    }
    let storage = QStorage::from_data(Cow::Owned(blocks), &Device::Cpu, GgmlDType::Q8_0)?;
    QTensor::new(storage, tensor.shape().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_error(bytes: &[u8]) -> String {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("model.gguf");
        std::fs::write(&path, bytes).unwrap();
        let options = LoadOptions {
            device: DeviceChoice::Cpu,
            requantize: true,
        };
        LocalModel::load(&path, &options).unwrap_err().to_string()
    }

    #[test]
    fn an_unknown_architecture_or_a_broken_file_is_one_line_naming_it() {
        let architecture = Value::String("mamba".to_owned());
        let mut file = Cursor::new(Vec::new());
        candle_core::quantized::gguf_file::write(
            &mut file,
            &[("general.architecture", &architecture)],
            &[],
        )
        .unwrap();
        let error = load_error(file.get_ref());
        assert!(
            error.contains("architecture `mamba` is not supported"),
            "{error}"
        );
        assert!(error.contains("gemma3") && !error.contains('\n'), "{error}");
        let error = load_error(b"GGUF\x03\x00\x00\x00 cut short");
        assert!(error.contains("unreadable GGUF"), "{error}");
    }

    #[test]
    fn q8_0_holds_q5_0_weights_exactly() {
        // Every 5-bit level, both signs, in blocks of different scales.
        let values: Vec<f32> = (0..8 * 32)
            .map(|i| ((i * 29 % 64) as f32 - 32.0) * 0.01 * (1 + i / 32) as f32)
            .collect();
        let weights = Tensor::from_vec(values, (8, 32), &Device::Cpu).unwrap();
        let q5_0 = QTensor::quantize(&weights, GgmlDType::Q5_0).unwrap();
        let q8_0 = to_q8_0(&q5_0).unwrap();
        assert_eq!(q8_0.dtype(), GgmlDType::Q8_0);
        assert_eq!(q8_0.shape(), q5_0.shape());
        let values = |t: &QTensor| {
            let flat = t.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
            flat.to_vec1::<f32>().unwrap()
        };
        assert_eq!(values(&q8_0), values(&q5_0));
    }

    #[test]
    fn q8_0_holds_q4_1_weights_to_within_half_a_step() {
        // Weights with an offset, the case Q4_1's per-block minimum exists for.
        let values: Vec<f32> = (0..4 * 64)
            .map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.3) * 0.2)
            .collect();
        let weights = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        let q4_1 = QTensor::quantize(&weights, GgmlDType::Q4_1).unwrap();
        let q8_0 = to_q8_0(&q4_1).unwrap();
        assert_eq!(q8_0.dtype(), GgmlDType::Q8_0);
        let before = q4_1
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap();
        let after = q8_0
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap();
        let before = before.to_vec1::<f32>().unwrap();
        let after = after.to_vec1::<f32>().unwrap();
        // Q8_0 steps are max|w| / 127 per block of 32; every weight here is below 0.14.
        let half_step = 0.14 / 127.0 / 2.0;
        for (b, a) in before.iter().zip(&after) {
            assert!((b - a).abs() <= half_step, "{b} became {a}");
        }
    }
}
