use scar_embed::Embedder;
pub use scar_test_support::{cpu_model, minilm};

/// A model with BGE-large's width (1,024, 16 heads, intermediate 4,096) and two of its 24
/// layers, random weights (`scripts/make-bge-shaped-model large --layers 2`). Named by its
/// folder, so its query instruction must come from its own files.
pub fn bge_large_shape_2l() -> Embedder {
    cpu_model("bge-large-shape-2l", "bge-large-shape-2l")
}

pub use scar_core::cosine;
