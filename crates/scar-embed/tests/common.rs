use scar_embed::{Embedder, Precision};
pub use scar_test_support::{minilm, minilm_in};

/// A model with BGE-large's width (1,024, 16 heads, intermediate 4,096) and two of its 24
/// layers, random weights (`scripts/make-bge-shaped-model large --layers 2`). Named by its
/// folder, so its query instruction must come from its own files.
pub fn bge_large_shape_2l(precision: Precision) -> Embedder {
    scar_test_support::cpu_model_in("bge-large-shape-2l", "bge-large-shape-2l", precision)
}

pub use scar_core::cosine;
