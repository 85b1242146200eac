//! Turns a folder of documents into a persistent local index that SCAR can walk.
//!
//! Files are found ([`walk`]), read into text ([`load`]), cut into ordered chunks with
//! text-splitter ([`chunk`]), embedded, and stored ([`store`]): tantivy holds the text for BM25,
//! a flat vector store holds the embeddings, and the cosine between each chunk and the next one
//! in its document is stored at indexing time, which is all SCAR's continuity penalty needs.
//! Indexing is incremental (only new or changed files are embedded) and crash-safe (one atomic
//! commit point; see [`store`]).
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use scar_embed::{EmbedOptions, Embedder, ModelLocator};
//! use scar_index::{Index, IndexOptions, index_paths};
//!
//! let files = ModelLocator::from_env("models").locate("all-MiniLM-L6-v2")?;
//! let embedder = Embedder::load(&files, &EmbedOptions::default())?;
//! let report = index_paths(
//!     "my-index".as_ref(),
//!     &["docs".into()],
//!     &embedder,
//!     &IndexOptions::default(),
//!     &mut |progress| eprintln!("{} chunks", progress.chunks),
//!     &AtomicBool::new(false),
//! )?;
//! println!("{} files added, {} skipped", report.added, report.skipped.len());
//! let index = Index::open("my-index")?;
//! let query = embedder.embed_query("how is a connection opened?")?;
//! for (id, score) in index.dense_search(&query, 5) {
//!     println!("{score:.3} {}", index.chunk(id).map_or("", |c| c.text));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chunk;
mod error;
pub mod hnsw;
mod indexer;
pub mod load;
mod search;
pub mod store;
pub mod walk;

pub use chunk::{ChunkUnit, ChunkerConfig};
pub use error::{IndexError, Result};
pub use hnsw::{HnswGraph, HnswInfo, HnswParams};
pub use indexer::{HnswSetting, IndexOptions, IndexProgress, IndexReport, Skipped, index_paths};
pub use search::exact_top_k;
pub use store::{ChunkView, DocumentEntry, Index, Manifest, VectorEncoding};
