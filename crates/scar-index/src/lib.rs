//! Turns a folder of documents into a persistent local index that SCAR can walk.
//!
//! Files are found under the roots, read into text with their headings ([`load_document`]), cut
//! into ordered chunks with text-splitter ([`ChunkerConfig`]), embedded, and stored: tantivy
//! holds the text for BM25, a flat vector store holds the embeddings, and the cosine between each
//! chunk and the next one in its document is stored at indexing time, which is all SCAR's
//! continuity penalty needs. Indexing ([`index_paths`]) is incremental (only new or changed files
//! are embedded) and crash-safe (one atomic commit point: a tantivy commit whose payload is the
//! [`Catalog`]). An [`Index`] reads what was committed.
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
//! for (id, score) in index.dense_search(&query, 5)? {
//!     println!("{score:.3} {}", index.chunk(id).map_or("", |c| c.text));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chunk;
mod error;
mod folder;
mod hnsw;
mod indexer;
mod known;
mod load;
mod salvage;
mod seam;
mod search;
mod skip_list;
mod store;
mod swap;
mod walk;
mod watch;
mod watchdog;

pub use chunk::{ChunkSpan, ChunkUnit, Chunker, ChunkerConfig};
pub use error::{IndexError, Result};
pub use folder::is_index;
pub use hnsw::{HnswGraph, HnswInfo, HnswParams};
pub use indexer::{
    HnswSetting, IndexOptions, IndexProgress, IndexReport, index_paths, indexing_model,
};
pub use load::{
    Attachment, Format, Heading, LoadError, LoadOptions, LoadedDocument, detect_language,
    language_name, load_bytes, load_document,
};
pub use salvage::Salvage;
pub use seam::{seam_kind, seam_text};
pub use search::{Analyzer, exact_top_k};
pub use skip_list::{Skipped, skipped_files};
pub use store::{
    Catalog, ChunkView, DocumentEntry, Index, LanguageCount, Manifest, VectorEncoding,
    document_name,
};
pub use swap::{InterruptedSwap, finish_interrupted_swap, rebuild_dir, replace_with_rebuild};
pub use walk::resolve_root;
pub use watch::{Burst, FolderWatch};
