//! Searching an open index: dense search (exact, or through the HNSW graph) and BM25.

mod bm25;
mod dense;

pub(crate) use bm25::TextIndex;
pub use bm25::bm25_words;
pub use dense::exact_top_k;
