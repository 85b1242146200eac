//! Where the retriever's chunks live: the [`ChunkStore`] seam, and the folder [`Index`] as its
//! first store.

use std::path::PathBuf;

use scar_core::{ChunkId, Position, SeamKind};
use scar_embed::ModelInfo;
use scar_index::{ChunkerConfig, Index};
use scar_policy::{ChunkSource, PolicyError, Side};

use crate::{Result, RetrieveError};

/// What BM25 found for a question: its ranking, and how many stored chunks hold each of the
/// question's words, which tells how much of the question the ranking could read.
#[derive(Debug, Clone, PartialEq)]
pub struct LexicalRanking {
    /// Chunks, best first, with their scores.
    pub hits: Vec<(ChunkId, f32)>,
    /// How many stored chunks hold each distinct word of the question, in no set order.
    pub holding: Vec<u64>,
}

impl LexicalRanking {
    /// The share of the question's distinct words that some stored chunk holds: what BM25
    /// could read of it. A question asked in another language than the documents shares a
    /// name or a number with them at best, and its ranking, ordered by those alone, reads a
    /// small share of it. Each word counts once, whatever its weight in BM25: in a small
    /// folder a common word ("my") can be missing, and BM25's idf would make it weigh as much
    /// as the rarest. 0 for a question without words.
    #[must_use]
    pub fn reach(&self) -> f32 {
        if self.holding.is_empty() {
            return 0.0;
        }
        let held = self.holding.iter().filter(|&&n| n > 0).count();
        held as f32 / self.holding.len() as f32
    }
}

/// What a retriever reads from the chunks it searches: the first stage's two rankings, each
/// chunk as a report shows it, and the chunks as the policy walks them. The folder [`Index`] is
/// one store; a database server can be another, and the retriever decides the same over both
/// because it reads nothing else.
///
/// Chunks are named by [`ChunkId`]s the store hands out; documents by their slots (the numbers
/// [`ChunkStore::chunks_of`] takes).
pub trait ChunkStore: Send + Sync + std::fmt::Debug {
    /// Where the chunks are, as a person names it in a message (a folder, a server).
    fn location(&self) -> String;
    /// The embedding model the chunks were embedded with.
    fn model(&self) -> &ModelInfo;
    /// How the documents were cut.
    fn chunker(&self) -> ChunkerConfig;
    /// Chunks stored.
    fn len(&self) -> usize;
    /// True when nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The documents stored, with their slots.
    fn documents(&self) -> Result<Vec<StoredDocument>>;
    /// The chunks of the documents in `slots`, each document's in order.
    fn chunks_of(&self, slots: &[u32]) -> Result<Vec<ChunkId>>;
    /// The `depth` chunks (of `among` only, when given) nearest `embedding` by cosine, best
    /// first.
    fn dense_ranking(
        &self,
        embedding: &[f32],
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<Vec<(ChunkId, f32)>>;
    /// The `depth` chunks (of `among` only, when given) that match `query`'s words best, best
    /// first, with how many stored chunks hold each of its words. The policies read ranks, never
    /// these scores, so another lexical scoring changes which chunks rank where, not what a rank
    /// means.
    fn lexical_ranking(
        &self,
        query: &str,
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<LexicalRanking>;
    /// Chunk `id` with what a reader needs to cite it, or `None` for an id not stored.
    fn chunk(&self, id: ChunkId) -> Result<Option<StoredChunk>>;
    /// Chunk `id`, which this store's own search handed out.
    fn stored(&self, id: ChunkId) -> Result<StoredChunk> {
        self.chunk(id)?.ok_or(RetrieveError::UnknownChunk(id))
    }
    /// Chunks `ids`, in order, which this store's own search handed out: for a store on a
    /// server, in one round trip.
    fn stored_chunks(&self, ids: &[ChunkId]) -> Result<Vec<StoredChunk>> {
        ids.iter().map(|&id| self.stored(id)).collect()
    }
    /// The chunks as the policy walks them from `seeds`: embeddings, neighbours, continuity
    /// and seams. A store that reads them from elsewhere reads the seeds' documents here, once.
    fn policy_source(&self, seeds: &[ChunkId]) -> Result<Box<dyn ChunkSource + '_>>;
    /// `error`, met by the policy while it walked this store, in the words that say what to
    /// repair.
    fn policy_error(&self, error: PolicyError) -> RetrieveError {
        RetrieveError::Policy(error)
    }
    /// The folder index this store is, if it is one: for what reads more of an index than this
    /// seam offers (the evaluation's tables of every neighbour and seed).
    fn folder_index(&self) -> Option<&Index> {
        None
    }
}

/// A document as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDocument {
    /// The number [`ChunkStore::chunks_of`] takes.
    pub slot: u32,
    /// Its file's path.
    pub path: PathBuf,
    /// For a document carried inside the file (a mail's attachment), its name there.
    pub attachment: Option<String>,
}

impl StoredDocument {
    /// The document as a person names it: the file's name, and an attachment's inside it.
    #[must_use]
    pub fn name(&self) -> String {
        scar_index::document_name(&self.path, self.attachment.as_deref())
    }
}

/// A chunk as a store holds it, with what a reader needs to cite it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredChunk {
    /// Its id.
    pub id: ChunkId,
    /// Its document's slot.
    pub slot: u32,
    /// The document's path.
    pub document: String,
    /// For a document carried inside the file (a mail's attachment), its name there.
    pub attachment: Option<String>,
    /// Its place in the document.
    pub ordinal: u32,
    /// Character range in the document's text, half-open.
    pub chars: [usize; 2],
    /// Tokens (embedding model's tokenizer, without special tokens).
    pub tokens: usize,
    /// Enclosing headings, " > "-joined (empty when none).
    pub heading_path: String,
    /// The page it starts on, numbered from 1, for a document of pages.
    pub page: Option<u32>,
    /// The chunk's text.
    pub text: String,
}

impl StoredChunk {
    /// Its document as a person names it, as [`StoredDocument::name`].
    #[must_use]
    pub fn name(&self) -> String {
        crate::report::document_name(&self.document, self.attachment.as_deref())
    }

    /// The chunk as a judge reads it beside a question: its heading path, when it has one, on
    /// the line before its text.
    #[must_use]
    pub fn passage(&self) -> String {
        if self.heading_path.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.heading_path, self.text)
        }
    }
}

/// Forwards every method of the seam to the store a pointer leads to.
macro_rules! forward_chunk_store {
    () => {
        fn location(&self) -> String {
            (**self).location()
        }
        fn model(&self) -> &ModelInfo {
            (**self).model()
        }
        fn chunker(&self) -> ChunkerConfig {
            (**self).chunker()
        }
        fn len(&self) -> usize {
            (**self).len()
        }
        fn documents(&self) -> Result<Vec<StoredDocument>> {
            (**self).documents()
        }
        fn chunks_of(&self, slots: &[u32]) -> Result<Vec<ChunkId>> {
            (**self).chunks_of(slots)
        }
        fn dense_ranking(
            &self,
            embedding: &[f32],
            depth: usize,
            among: Option<&[ChunkId]>,
        ) -> Result<Vec<(ChunkId, f32)>> {
            (**self).dense_ranking(embedding, depth, among)
        }
        fn lexical_ranking(
            &self,
            query: &str,
            depth: usize,
            among: Option<&[ChunkId]>,
        ) -> Result<LexicalRanking> {
            (**self).lexical_ranking(query, depth, among)
        }
        fn chunk(&self, id: ChunkId) -> Result<Option<StoredChunk>> {
            (**self).chunk(id)
        }
        fn stored_chunks(&self, ids: &[ChunkId]) -> Result<Vec<StoredChunk>> {
            (**self).stored_chunks(ids)
        }
        fn policy_source(&self, seeds: &[ChunkId]) -> Result<Box<dyn ChunkSource + '_>> {
            (**self).policy_source(seeds)
        }
        fn policy_error(&self, error: PolicyError) -> RetrieveError {
            (**self).policy_error(error)
        }
        fn folder_index(&self) -> Option<&Index> {
            (**self).folder_index()
        }
    };
}

/// A store chosen when the program runs (a folder or a server) is a store.
impl<T: ChunkStore + ?Sized> ChunkStore for Box<T> {
    forward_chunk_store!();
}

/// A store borrowed (by a second retriever over the same store) is a store.
impl<T: ChunkStore + ?Sized> ChunkStore for &T {
    forward_chunk_store!();
}

impl ChunkStore for Index {
    fn location(&self) -> String {
        self.dir().display().to_string()
    }

    fn model(&self) -> &ModelInfo {
        &self.manifest().model
    }

    fn chunker(&self) -> ChunkerConfig {
        self.manifest().chunker
    }

    fn len(&self) -> usize {
        Index::len(self)
    }

    fn documents(&self) -> Result<Vec<StoredDocument>> {
        Ok(Index::documents(self)
            .iter()
            .map(|document| StoredDocument {
                slot: document.slot,
                path: document.path.clone(),
                attachment: document.attachment.clone(),
            })
            .collect())
    }

    fn chunks_of(&self, slots: &[u32]) -> Result<Vec<ChunkId>> {
        Ok(self.rows_of(slots).into_iter().map(ChunkId).collect())
    }

    fn dense_ranking(
        &self,
        embedding: &[f32],
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<Vec<(ChunkId, f32)>> {
        Ok(match among {
            None => self.dense_search(embedding, depth)?,
            Some(chunks) => self.dense_search_among(embedding, &rows(chunks), depth)?,
        })
    }

    fn lexical_ranking(
        &self,
        query: &str,
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<LexicalRanking> {
        let hits = match among {
            None => self.bm25_search(query, depth)?,
            Some(chunks) => self.bm25_search_among(query, &rows(chunks), depth)?,
        };
        let holding = self.word_counts(query)?;
        Ok(LexicalRanking { hits, holding })
    }

    fn chunk(&self, id: ChunkId) -> Result<Option<StoredChunk>> {
        let Some(chunk) = Index::chunk(self, id) else {
            return Ok(None);
        };
        Ok(Some(StoredChunk {
            id: chunk.id,
            slot: chunk.document.slot,
            document: chunk.document.path.display().to_string(),
            attachment: chunk.document.attachment.clone(),
            ordinal: chunk.ordinal,
            chars: [chunk.chars.start, chunk.chars.end],
            tokens: chunk.token_count,
            heading_path: chunk.heading_path.to_owned(),
            page: chunk.page,
            text: chunk.text.to_owned(),
        }))
    }

    fn policy_source(&self, _seeds: &[ChunkId]) -> Result<Box<dyn ChunkSource + '_>> {
        // Mapped whole: every chunk is at hand.
        Ok(Box::new(IndexSource(self)))
    }

    fn policy_error(&self, error: PolicyError) -> RetrieveError {
        RetrieveError::from_policy(self, error)
    }

    fn folder_index(&self) -> Option<&Index> {
        Some(self)
    }
}

fn rows(chunks: &[ChunkId]) -> Vec<u32> {
    chunks.iter().map(|id| id.0).collect()
}

/// Adapts an [`Index`] to the policy's [`ChunkSource`].
#[derive(Debug, Clone, Copy)]
struct IndexSource<'a>(&'a Index);

impl ChunkSource for IndexSource<'_> {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        self.0.embedding(id)
    }

    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        self.0.neighbour(id, side)
    }

    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        let left = match side {
            Side::Next => Some(id),
            Side::Previous => self.0.neighbour(id, Side::Previous),
        };
        // The policy asks only when the neighbour exists, so the stored value is there.
        left.and_then(|left| self.0.continuity_next(left))
            .unwrap_or(f32::NAN)
    }

    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        self.0.seam(id, side)
    }

    fn position(&self, id: ChunkId) -> Position {
        self.0.position(id)
    }

    fn token_count(&self, id: ChunkId) -> usize {
        self.0.chunk(id).map_or(0, |c| c.token_count)
    }

    fn section(&self, id: ChunkId) -> Option<u32> {
        self.0.chunk(id).and_then(|c| c.section)
    }
}

#[cfg(test)]
// Shares of a few words are exact in binary.
#[allow(clippy::float_cmp)]
mod tests {
    use super::LexicalRanking;

    fn reach(holding: &[u64]) -> f32 {
        LexicalRanking {
            hits: Vec::new(),
            holding: holding.to_vec(),
        }
        .reach()
    }

    #[test]
    fn the_reach_is_the_share_of_the_questions_words_the_chunks_hold() {
        assert_eq!(reach(&[29, 3, 1]), 1.0);
        // A name half the chunks hold, with three words none holds.
        assert_eq!(reach(&[29, 0, 0, 0]), 0.25);
        assert_eq!(reach(&[0, 0]), 0.0);
        assert_eq!(reach(&[]), 0.0);
    }
}
