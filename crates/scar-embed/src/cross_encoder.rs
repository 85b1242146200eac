//! Cross-encoders: BERT reading a question and a passage together, one text of two segments,
//! with a classifier on its pooled `[CLS]` row, as transformers' `BertForSequenceClassification`
//! and sentence-transformers' `CrossEncoder` run them (cross-encoder/ms-marco-MiniLM-L-6-v2 and
//! its kin), or XLM-RoBERTa with its classification head (`XLMRobertaForSequenceClassification`:
//! BAAI/bge-reranker-base and -v2-m3). A pair's score is the classifier's one logit: the higher, the more the passage
//! answers the question. The encoder is the embedders' own, on the same kernels and precisions.

use std::path::PathBuf;

use candle_core::{DType, Device, Module};
use candle_nn::{Linear, VarBuilder};
use candle_transformers::models::bert::Config as BertConfig;
use tokenizers::{EncodeInput, Encoding, Tokenizer};

use crate::bert::{Bert, is_roberta, max_tokens};
use crate::embedder::{compute, load_tokenizer, pack_batches, pad_id};
use crate::model::{ModelFiles, read_json};
use crate::weights::Safetensors;
use crate::{EmbedError, EmbedOptions, Precision, Result};

/// A BERT or XLM-RoBERTa cross-encoder with one label, loaded on a device.
pub struct CrossEncoder {
    model: Bert,
    /// BERT's pooler, or XLM-RoBERTa's first head layer: a dense layer and tanh on the first
    /// token's row.
    pooler: Linear,
    /// One logit from the pooled row.
    classifier: Linear,
    tokenizer: Tokenizer,
    device: Device,
    precision: Precision,
    id: String,
    dir: PathBuf,
    pad_id: u32,
    batch_tokens: usize,
    batch_size: usize,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("id", &self.id)
            .field("precision", &self.precision)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// What a cross-encoder's `config.json` adds to BERT's.
#[derive(serde::Deserialize)]
struct Labels {
    #[serde(default)]
    id2label: std::collections::BTreeMap<String, String>,
}

impl CrossEncoder {
    /// Loads a cross-encoder from its folder (`config.json`, `tokenizer.json`,
    /// `model.safetensors`) onto the chosen device, in the chosen precision. Pairs are cut to
    /// the model's position limit, the longer of the two texts first.
    pub fn load(files: &ModelFiles, options: &EmbedOptions) -> Result<Self> {
        let dir = files.dir.clone();
        let device = options.device.open()?;
        let precision = options.precision.on(&device)?;
        let config_path = dir.join("config.json");
        let config: BertConfig = read_json(&config_path)?;
        let labels: Labels = read_json(&config_path)?;
        if labels.id2label.len() != 1 {
            return Err(EmbedError::BadFile {
                path: config_path,
                reason: format!(
                    "a cross-encoder scores with one label; this model has {}",
                    labels.id2label.len()
                ),
            });
        }
        let tokenizer = load_tokenizer(&dir, max_tokens(&config))?;
        let pad_id = pad_id(&tokenizer, &config);
        let model_error = |source| EmbedError::Model {
            dir: dir.clone(),
            source,
        };
        let weights = Safetensors::open(&dir.join("model.safetensors"))?;
        let vb =
            VarBuilder::from_backend(Box::new(weights), precision.dtype(&device), device.clone());
        let model = Bert::load(&vb, &config, precision.packing(&device)).map_err(model_error)?;
        // The head is two small products, kept in f32 whatever the encoder computes in.
        let head = |prefix: &str, outputs: usize| -> candle_core::Result<Linear> {
            let vb = if vb.contains_tensor(&format!("bert.{prefix}.weight")) {
                vb.pp("bert").pp(prefix)
            } else {
                vb.pp(prefix)
            };
            let weight = vb.get((outputs, config.hidden_size), "weight")?;
            let bias = vb.get(outputs, "bias")?;
            Ok(Linear::new(
                weight.to_dtype(DType::F32)?,
                Some(bias.to_dtype(DType::F32)?),
            ))
        };
        // BERT pools with its pooler and classifies; XLM-RoBERTa's head is a dense layer (tanh
        // after it too) and a projection, on the first token's row.
        let (pooler, classifier) = if is_roberta(&config) {
            ("classifier.dense", "classifier.out_proj")
        } else {
            ("pooler.dense", "classifier")
        };
        let pooler = head(pooler, config.hidden_size).map_err(model_error)?;
        let classifier = head(classifier, 1).map_err(model_error)?;
        Ok(Self {
            model,
            pooler,
            classifier,
            tokenizer,
            device,
            precision,
            id: files.model_id(),
            dir,
            pad_id,
            batch_tokens: options.batch_tokens.max(1),
            batch_size: options.batch_size.max(1),
        })
    }

    /// The model's id (its hub id, or the name it was asked by).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The precision with what it runs on, e.g. `bf16 on AVX-512 BF16` or `f16 on cuda:0`.
    #[must_use]
    pub fn compute(&self) -> String {
        compute(self.precision, &self.device)
    }

    /// One score per passage, in their order: how well it answers `question`.
    pub fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>> {
        let pairs: Vec<EncodeInput<'_>> = passages
            .iter()
            .map(|passage| (question, *passage).into())
            .collect();
        let encodings =
            self.tokenizer
                .encode_batch(pairs, true)
                .map_err(|source| EmbedError::Tokenizer {
                    dir: self.dir.clone(),
                    source,
                })?;
        let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let mut order: Vec<usize> = (0..passages.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        let mut scores = vec![0.0; passages.len()];
        for batch in pack_batches(&order, &lengths, self.batch_tokens, self.batch_size) {
            let logits = self
                .logits(batch.iter().map(|&i| &encodings[i]))
                .map_err(|source| EmbedError::Model {
                    dir: self.dir.clone(),
                    source,
                })?;
            for (&i, logit) in batch.iter().zip(logits) {
                scores[i] = logit;
            }
        }
        Ok(scores)
    }

    /// The logits of one batch of encoded pairs.
    fn logits<'a>(
        &self,
        batch: impl Iterator<Item = &'a Encoding>,
    ) -> candle_core::Result<Vec<f32>> {
        let (texts, segments): (Vec<&[u32]>, Vec<&[u32]>) = batch
            .map(|encoding| (encoding.get_ids(), encoding.get_type_ids()))
            .unzip();
        let cls = self.model.embed_pairs(&texts, &segments, self.pad_id)?;
        let pooled = self.pooler.forward(&cls)?.tanh()?;
        self.classifier
            .forward(&pooled)?
            .flatten_all()?
            .to_device(&Device::Cpu)?
            .to_vec1::<f32>()
    }
}
