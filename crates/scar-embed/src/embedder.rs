//! The model on its device: tokenize, pack batches by a token budget, run BERT, pool, normalise.

use std::path::PathBuf;

use candle_core::Device;
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;
use tokenizers::{Encoding, PostProcessor, Tokenizer, TruncationParams};

use crate::bert::Bert;
use crate::model::{ModelFiles, ModelTraits, Pooling, read_json};
use crate::weights::Safetensors;
use crate::{DeviceChoice, EmbedError, Precision, Result};

/// How to run the model. Defaults: `auto` device and precision, batches of at most 16,384
/// padded tokens and 64 texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Where to run.
    pub device: DeviceChoice,
    /// The number format to compute in.
    pub precision: Precision,
    /// Upper bound on padded tokens (batch size × longest sequence) in one forward pass.
    pub batch_tokens: usize,
    /// Upper bound on texts in one forward pass.
    pub batch_size: usize,
    /// Overrides the model's query instruction (`Some("")` removes it).
    pub query_prefix: Option<String>,
    /// Overrides the model's passage instruction (`Some("")` removes it).
    pub passage_prefix: Option<String>,
}

impl EmbedOptions {
    /// The defaults, on `device` in `precision`: what a user's settings choose.
    #[must_use]
    pub fn new(device: DeviceChoice, precision: Precision) -> Self {
        Self {
            device,
            precision,
            ..Self::default()
        }
    }

    /// These options with the query and passage instructions `model` records: a model loaded
    /// for an index embeds as the index was built, whatever the model's current defaults.
    #[must_use]
    pub fn with_instructions_of(&self, model: &ModelInfo) -> Self {
        Self {
            query_prefix: Some(model.query_prefix.clone()),
            passage_prefix: Some(model.passage_prefix.clone()),
            ..self.clone()
        }
    }
}

impl Default for EmbedOptions {
    fn default() -> Self {
        Self {
            device: DeviceChoice::Auto,
            precision: Precision::Auto,
            batch_tokens: 16_384,
            batch_size: 64,
            query_prefix: None,
            passage_prefix: None,
        }
    }
}

/// What an embedder is, as an index records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    /// Hub id (or the name given for unknown models).
    pub id: String,
    /// Vector length.
    pub dimension: usize,
    /// How token vectors are pooled.
    pub pooling: Pooling,
    /// Inputs are truncated at this many tokens, special tokens included.
    pub max_tokens: usize,
    /// Prepended to queries.
    pub query_prefix: String,
    /// Prepended to passages (chunks) before they are embedded; empty for most models.
    #[serde(default)]
    pub passage_prefix: String,
}

impl ModelInfo {
    /// Whether vectors embedded by `other` can be compared with vectors embedded by `self`: the
    /// same model, vector length and passage instruction.
    #[must_use]
    pub fn embeds_like(&self, other: &Self) -> bool {
        self.id == other.id
            && self.dimension == other.dimension
            && self.passage_prefix == other.passage_prefix
    }

    /// How to name `self` and `other` in a message saying that they differ: their ids, with
    /// their dimensions or passage instructions when the ids are the same.
    #[must_use]
    pub fn names_against(&self, other: &Self) -> (String, String) {
        if self.id != other.id {
            (self.id.clone(), other.id.clone())
        } else if self.dimension != other.dimension {
            let name = |m: &Self| format!("{} ({} dimensions)", m.id, m.dimension);
            (name(self), name(other))
        } else {
            let name = |m: &Self| match m.passage_prefix.as_str() {
                "" => format!("{} (no passage instruction)", m.id),
                prefix => format!("{} (passage instruction {prefix:?})", m.id),
            };
            (name(self), name(other))
        }
    }
}

/// Progress of a long embedding run, reported after each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedProgress {
    /// Texts embedded so far.
    pub done: usize,
    /// Texts in this run.
    pub total: usize,
    /// Real (unpadded) tokens embedded so far.
    pub tokens: usize,
}

/// Unit-length embeddings, one row per input text, in input order.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// Vector length.
    pub dimension: usize,
    /// Rows laid end to end: row `i` is `data[i * dimension..(i + 1) * dimension]`.
    pub data: Vec<f32>,
    /// Tokens each text became, special tokens included, after truncation.
    pub token_counts: Vec<usize>,
    /// How many texts were longer than the model's limit and were truncated.
    pub truncated: usize,
}

impl Embeddings {
    /// Row `i`.
    #[must_use]
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dimension..(i + 1) * self.dimension]
    }

    /// Number of rows.
    #[must_use]
    pub fn len(&self) -> usize {
        self.token_counts.len()
    }

    /// True when there are no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.token_counts.is_empty()
    }
}

/// A BERT-family sentence-embedding model, loaded on a device.
pub struct Embedder {
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
    precision: Precision,
    info: ModelInfo,
    dir: PathBuf,
    pad_id: u32,
    /// Tokens the passage instruction adds to every passage.
    passage_prefix_tokens: usize,
    batch_tokens: usize,
    batch_size: usize,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("info", &self.info)
            .field("precision", &self.precision)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model from its folder onto the chosen device, in the chosen precision.
    pub fn load(files: &ModelFiles, options: &EmbedOptions) -> Result<Self> {
        let dir = files.dir.clone();
        let device = options.device.open()?;
        let precision = options.precision.on(&device)?;
        let config: BertConfig = read_json(&dir.join("config.json"))?;
        let mut traits = ModelTraits::read(files, crate::bert::max_tokens(&config))?;
        if let Some(prefix) = &options.query_prefix {
            traits.query_prefix.clone_from(prefix);
        }
        if let Some(prefix) = &options.passage_prefix {
            traits.passage_prefix.clone_from(prefix);
        }
        let tokenizer = load_tokenizer(&dir, traits.max_tokens)?;
        let pad_id = pad_id(&tokenizer, &config);
        let passage_prefix_tokens =
            prefix_tokens(&tokenizer, &traits.passage_prefix).map_err(|source| {
                EmbedError::Tokenizer {
                    dir: dir.clone(),
                    source,
                }
            })?;
        let dtype = precision.dtype(&device);
        let model_error = |source| EmbedError::Model {
            dir: dir.clone(),
            source,
        };
        let weights = Safetensors::open(&dir.join("model.safetensors"))?;
        let vb = VarBuilder::from_backend(Box::new(weights), dtype, device.clone());
        let model = Bert::load(&vb, &config, precision.packing(&device)).map_err(model_error)?;
        let info = ModelInfo {
            id: files.model_id(),
            dimension: config.hidden_size,
            pooling: traits.pooling,
            max_tokens: traits.max_tokens,
            query_prefix: traits.query_prefix,
            passage_prefix: traits.passage_prefix,
        };
        Ok(Self {
            model,
            tokenizer,
            device,
            precision,
            info,
            dir,
            pad_id,
            passage_prefix_tokens,
            batch_tokens: options.batch_tokens.max(1),
            batch_size: options.batch_size.max(1),
        })
    }

    /// What this model is.
    #[must_use]
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The device the model runs on, e.g. `cpu` or `cuda:0`.
    #[must_use]
    pub fn device_name(&self) -> String {
        device_name(&self.device)
    }

    /// The precision the model computes in (never [`Precision::Auto`]).
    #[must_use]
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The precision with what it runs on, e.g. `int8 on AVX-512 VNNI` or `f16 on cuda:0`.
    #[must_use]
    pub fn compute(&self) -> String {
        compute(self.precision, &self.device)
    }

    /// The model's tokenizer (truncating at the model's limit, no padding).
    #[must_use]
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Tokens of text one passage holds before it is truncated: the model's limit less the
    /// special tokens the tokenizer adds around it and the passage instruction's tokens.
    #[must_use]
    pub fn text_token_limit(&self) -> usize {
        self.info
            .max_tokens
            .saturating_sub(self.special_tokens() + self.passage_prefix_tokens)
    }

    /// Special tokens the tokenizer adds around one input.
    fn special_tokens(&self) -> usize {
        self.tokenizer
            .get_post_processor()
            .map_or(0, |processor| processor.added_tokens(false))
    }

    /// Tokens in `text` without special tokens and without truncation: what a text costs in a
    /// prompt or a context budget.
    pub fn count_tokens(&self, text: &str) -> Result<usize> {
        let mut encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| self.tokenizer_error(e))?;
        let overflow = encoding.take_overflowing();
        Ok(encoding.len() + overflow.iter().map(Encoding::len).sum::<usize>())
    }

    /// What [`Embedder::count_tokens`] gives for a text that [`Embedder::embed_passages`]
    /// counted as `embedded` tokens, so that it need not be tokenized again; `None` at the
    /// model's limit, where the text may have been truncated.
    #[must_use]
    pub fn count_tokens_from_embedded(&self, embedded: usize) -> Option<usize> {
        (embedded < self.info.max_tokens)
            .then(|| embedded.saturating_sub(self.special_tokens() + self.passage_prefix_tokens))
    }

    /// Embeds a query, with the model's query instruction prepended.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let text = format!("{}{query}", self.info.query_prefix);
        Ok(self.embed_texts(&[text.as_str()], &mut |_| {})?.data)
    }

    /// Embeds passages, with the model's passage instruction prepended (most models have
    /// none), reporting progress after each batch. The token counts include the instruction's.
    ///
    /// Texts are sorted by length and packed so that a batch holds at most
    /// [`EmbedOptions::batch_tokens`] padded tokens: little compute is spent on padding.
    pub fn embed_passages(
        &self,
        texts: &[&str],
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<Embeddings> {
        let prefix = &self.info.passage_prefix;
        if prefix.is_empty() {
            return self.embed_texts(texts, progress);
        }
        let prefixed: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let prefixed: Vec<&str> = prefixed.iter().map(String::as_str).collect();
        self.embed_texts(&prefixed, progress)
    }

    /// Embeds texts as they are.
    fn embed_texts(
        &self,
        texts: &[&str],
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<Embeddings> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| self.tokenizer_error(e))?;
        let dimension = self.info.dimension;
        let mut data = vec![0.0f32; texts.len() * dimension];
        let token_counts: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let truncated = encodings
            .iter()
            .filter(|e| !e.get_overflowing().is_empty())
            .count();

        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(token_counts[i]));
        let mut done = 0;
        let mut tokens = 0;
        for batch in pack_batches(&order, &token_counts, self.batch_tokens, self.batch_size) {
            let rows = self.forward(batch.iter().map(|&i| &encodings[i]))?;
            for (row, &i) in rows.chunks_exact(dimension).zip(batch) {
                data[i * dimension..(i + 1) * dimension].copy_from_slice(row);
            }
            done += batch.len();
            tokens += batch.iter().map(|&i| token_counts[i]).sum::<usize>();
            progress(EmbedProgress {
                done,
                total: texts.len(),
                tokens,
            });
        }
        Ok(Embeddings {
            dimension,
            data,
            token_counts,
            truncated,
        })
    }

    /// One forward pass over a batch; returns the pooled, normalised rows laid end to end.
    fn forward<'a>(&self, batch: impl Iterator<Item = &'a Encoding>) -> Result<Vec<f32>> {
        let texts: Vec<&[u32]> = batch.map(Encoding::get_ids).collect();
        let run = || -> candle_core::Result<Vec<f32>> {
            let pooled = self.model.embed(&texts, self.pad_id, self.info.pooling)?;
            let norms = pooled
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12, f32::MAX)?;
            pooled.broadcast_div(&norms)?.flatten_all()?.to_vec1()
        };
        run().map_err(|source| EmbedError::Model {
            dir: self.dir.clone(),
            source,
        })
    }

    fn tokenizer_error(&self, error: tokenizers::Error) -> EmbedError {
        EmbedError::Tokenizer {
            dir: self.dir.clone(),
            source: error,
        }
    }
}

/// A device as a person names it: `cpu`, `cuda:0`.
fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".to_owned(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// `precision` with what it runs on `device`, e.g. `int8 on AVX-512 VNNI` or `f16 on cuda:0`.
pub(crate) fn compute(precision: Precision, device: &Device) -> String {
    if device.is_cpu() {
        precision.described_on_cpu()
    } else {
        format!("{precision} on {}", device_name(device))
    }
}

/// The token that pads a batch: the tokenizer's `[PAD]`, else the one `config` names (the
/// tokenizer's own padding is removed when it is loaded).
pub(crate) fn pad_id(tokenizer: &Tokenizer, config: &BertConfig) -> u32 {
    tokenizer
        .token_to_id("[PAD]")
        .unwrap_or(config.pad_token_id as u32)
}

/// Splits `order` (indices sorted longest first) into batches of at most `budget` padded tokens
/// and `max_texts` texts. A single text longer than the budget still gets a batch of its own.
pub(crate) fn pack_batches<'a>(
    order: &'a [usize],
    lengths: &[usize],
    budget: usize,
    max_texts: usize,
) -> Vec<&'a [usize]> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        // Sorted longest first, so the first text sets the batch's padded width.
        let width = lengths[order[start]].max(1);
        let size = (budget / width).clamp(1, max_texts);
        let end = (start + size).min(order.len());
        batches.push(&order[start..end]);
        start = end;
    }
    batches
}

/// Tokens `prefix` adds to a text: a prefix's trailing space joins the text's first word, so it
/// is measured before a word rather than alone.
fn prefix_tokens(tokenizer: &Tokenizer, prefix: &str) -> tokenizers::Result<usize> {
    const WORD: &str = "word";
    if prefix.is_empty() {
        return Ok(0);
    }
    let with = tokenizer.encode(format!("{prefix}{WORD}"), false)?.len();
    let without = tokenizer.encode(WORD, false)?.len();
    Ok(with.saturating_sub(without))
}

/// Loads `tokenizer.json`, replacing whatever padding and truncation it shipped with: we pad
/// per batch ourselves, and truncate at the model's own limit.
pub(crate) fn load_tokenizer(dir: &std::path::Path, max_tokens: usize) -> Result<Tokenizer> {
    let path = dir.join("tokenizer.json");
    let unreadable = |source| EmbedError::Unreadable {
        path: path.clone(),
        source,
    };
    let mut tokenizer = Tokenizer::from_file(&path).map_err(unreadable)?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..Default::default()
        }))
        .map_err(unreadable)?;
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_named_by_what_differs() {
        let model = |id: &str, dimension| ModelInfo {
            id: id.into(),
            dimension,
            pooling: Pooling::Cls,
            max_tokens: 512,
            query_prefix: String::new(),
            passage_prefix: String::new(),
        };
        let (a, b) = model("m", 384).names_against(&model("m", 768));
        assert_eq!(
            (a.as_str(), b.as_str()),
            ("m (384 dimensions)", "m (768 dimensions)")
        );
        let (a, b) = model("m", 384).names_against(&model("n", 384));
        assert_eq!((a.as_str(), b.as_str()), ("m", "n"));
        let prefixed = ModelInfo {
            passage_prefix: "passage: ".into(),
            ..model("m", 384)
        };
        assert!(!prefixed.embeds_like(&model("m", 384)));
        assert!(prefixed.embeds_like(&prefixed.clone()));
        let (a, b) = prefixed.names_against(&model("m", 384));
        assert_eq!(
            (a.as_str(), b.as_str()),
            (
                "m (passage instruction \"passage: \")",
                "m (no passage instruction)"
            )
        );
    }

    #[test]
    fn batches_respect_the_token_budget_and_cover_every_text() {
        let lengths = [10, 300, 5, 40, 40, 7];
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        let batches = pack_batches(&order, &lengths, 100, 64);
        // The 300-token text alone, then 40+40 (80 padded), then 10, 7 and 5 padded to 10.
        assert_eq!(batches, vec![&[1][..], &[3, 4][..], &[0, 5, 2][..]]);
        let covered: usize = batches.iter().map(|b| b.len()).sum();
        assert_eq!(covered, lengths.len());
        assert!(
            pack_batches(&order, &lengths, 10_000, 2)
                .iter()
                .all(|b| b.len() <= 2)
        );
    }
}
