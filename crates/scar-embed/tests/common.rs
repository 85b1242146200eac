use std::path::PathBuf;

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles};

/// The workspace's `models/` folder.
pub fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

/// all-MiniLM-L6-v2 as `scripts/fetch-test-models` installs it.
pub fn minilm() -> Embedder {
    let dir = models_dir().join("all-MiniLM-L6-v2");
    let files = ModelFiles::from_dir("sentence-transformers/all-MiniLM-L6-v2", &dir)
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    Embedder::load(
        &files,
        &EmbedOptions {
            device: DeviceChoice::Cpu,
            ..EmbedOptions::default()
        },
    )
    .unwrap()
}

/// A model with BGE-large's width (1,024, 16 heads, intermediate 4,096) and two of its 24
/// layers, random weights: `scripts/fetch-test-models` makes it with
/// `scripts/make-bge-shaped-model large --layers 2`.
pub fn bge_large_shape_2l() -> Embedder {
    let dir = models_dir().join("bge-large-shape-2l");
    let files = ModelFiles::from_dir(dir.display().to_string(), &dir)
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    Embedder::load(
        &files,
        &EmbedOptions {
            device: DeviceChoice::Cpu,
            ..EmbedOptions::default()
        },
    )
    .unwrap()
}

pub use scar_core::cosine;
