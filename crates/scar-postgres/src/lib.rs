//! The chunk store over PostgreSQL + pgvector: SCAR's decisions past one machine.
//!
//! A [`PgStore`] is a [`ChunkStore`](scar_retrieve::ChunkStore): the retriever ranks, walks and
//! reports over it exactly as over a folder index, since it reads nothing else. Chunks get there
//! by [`publish`]: each machine reads, cuts and embeds its documents into its own folder index
//! (with every guard that indexing has), and publishes the files whose content changed, each
//! file in one transaction, so that many machines can write one store at once and a killed
//! writer leaves no part of a document behind.
//!
//! A store holds one model's chunks, cut one way: both are recorded beside the schema's
//! version, and a writer with another model or chunker is refused. [`create_sharded`] makes a
//! store whose chunks live on shard servers behind the one every command names.
//!
//! Dense ranking is pgvector's cosine distance, exact unless the store has an HNSW index
//! (built, tuned and dropped by [`publish`] as the folder's graph is by `scar index`);
//! lexical ranking is BM25 (tantivy's k1 = 1.2, b = 0.75) computed in SQL over the chunks'
//! full-text vectors: the words the folder index reads, cut by its own tokenizer, a word's
//! document frequency kept by the writers, a chunk's length taken in those words. A search
//! reads the question's words rarest first and stops where the words left cannot lift a chunk
//! into the ranking, so common words cost little (`bm25.rs`). PostgreSQL's own `ts_rank_cd` has no inverse document frequency; it lost 10 to 30
//! points of recall against the folder's BM25 (docs/EVALUATION.md). The two BM25s still split
//! words a little differently, and the policies read ranks only, so a rank means the same on
//! both stores.

mod bm25;
mod error;
mod publish;
mod schema;
mod shard;
mod store;
mod url;

pub use error::{Result, StoreError};
pub use publish::{PublishReport, publish};
pub use schema::SCHEMA_VERSION;
pub use shard::create_sharded;
pub use store::{PgStore, StoreSummary};
pub use url::redacted;
