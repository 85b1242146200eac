//! Searching an open index: dense search (exact, or through the HNSW graph) and BM25.

mod analyzer;
mod bm25;
mod dense;

pub use analyzer::Analyzer;
pub(crate) use analyzer::is_han_or_kana;
pub(crate) use bm25::TextIndex;
pub use dense::exact_top_k;
