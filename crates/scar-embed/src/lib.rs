//! Sentence embeddings from BERT-family models (BGE, `MiniLM` and the like) with candle, on CPU
//! or, with the `cuda` feature, on an NVIDIA GPU.
//!
//! A model is found by [`ModelLocator`] (a folder, `models/<name>/`, the Hugging Face cache, or
//! a download at a pinned revision, through [`locate::ModelSearch`], which the chat models of
//! `scar-answer` share), loaded by [`Embedder::load`], and used for passages and
//! queries. Pooling follows the model's own metadata (CLS for BGE, mean for sentence-transformers
//! models); vectors come back L2-normalised; queries get the model's instruction prefix.
//!
//! ```no_run
//! use scar_embed::{EmbedOptions, Embedder, ModelLocator};
//!
//! let files = ModelLocator::from_env("models").locate("all-MiniLM-L6-v2")?;
//! let embedder = Embedder::load(&files, &EmbedOptions::default())?;
//! let passages = embedder.embed_passages(&["A cat sits on the mat."], &mut |_| {})?;
//! let query = embedder.embed_query("where is the cat?")?;
//! let similarity: f32 = passages.row(0).iter().zip(&query).map(|(a, b)| a * b).sum();
//! println!("{similarity:.3}");
//! # Ok::<(), scar_embed::EmbedError>(())
//! ```

mod attention;
mod bert;
mod bf16;
pub mod cpu;
mod cross_encoder;
mod device;
mod embedder;
mod error;
mod f32_panels;
mod int8;
mod kernels;
mod linear;
pub mod locate;
mod model;
mod precision;
mod weights;

pub use cross_encoder::CrossEncoder;
pub use device::DeviceChoice;
pub use embedder::{EmbedOptions, EmbedProgress, Embedder, Embeddings, ModelInfo};
pub use error::{EmbedError, Result};
// Shared with the chat models' attention.
pub use kernels::{Gate, gate_in_place, softmax_in_place, softmax_rows};
pub use model::{
    DEFAULT_MODEL, KNOWN_MODELS, KnownModel, ModelFiles, ModelLocator, Pooling, known_model,
};
pub use precision::Precision;
