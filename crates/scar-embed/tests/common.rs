use std::path::PathBuf;

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles};

/// The workspace's `models/` folder.
pub fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

/// The model in `models/<folder>` (installed by `scripts/fetch-test-models`) on the CPU,
/// known as `name`.
fn cpu_model(name: &str, folder: &str) -> Embedder {
    let dir = models_dir().join(folder);
    let files = ModelFiles::from_dir(name, &dir)
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

/// all-MiniLM-L6-v2.
pub fn minilm() -> Embedder {
    cpu_model("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")
}

/// A model with BGE-large's width (1,024, 16 heads, intermediate 4,096) and two of its 24
/// layers, random weights (`scripts/make-bge-shaped-model large --layers 2`). Named by its
/// folder, so its query instruction must come from its own files.
pub fn bge_large_shape_2l() -> Embedder {
    cpu_model("bge-large-shape-2l", "bge-large-shape-2l")
}

pub use scar_core::cosine;
