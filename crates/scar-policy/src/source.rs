//! Where the policy looks up chunks: the [`ChunkSource`] trait and an in-memory [`MemorySource`].

use scar_core::{ChunkId, Position, SeamKind, Side, cosine};

/// What the policy needs to know about the chunks of an index.
///
/// The policy only asks about ids it was given as seeds or that this source returned from
/// [`neighbour`](Self::neighbour); an implementation may panic on any other id.
pub trait ChunkSource {
    /// The chunk's embedding; it need not be unit-norm.
    fn embedding(&self, id: ChunkId) -> &[f32];
    /// The adjacent chunk of the same document on `side`, or `None` at the document's edge.
    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId>;
    /// The cosine between the chunk and its neighbour on `side`, stored at indexing time.
    /// Only called when that neighbour exists.
    fn continuity(&self, id: ChunkId, side: Side) -> f32;
    /// Where the cut between the chunk and its neighbour on `side` fell, if the source knows.
    /// Only called when that neighbour exists.
    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind>;
    /// Where the chunk sits, which orders the final context.
    fn position(&self, id: ChunkId) -> Position;
    /// The chunk's length in tokens, for the budget and the context total.
    fn token_count(&self, id: ChunkId) -> usize;
    /// The index of the chunk's heading section within its document, or `None` when the document
    /// has no structure.
    fn section(&self, id: ChunkId) -> Option<u32>;
}

/// One chunk handed to [`MemorySource::add_document`].
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryChunk {
    /// The chunk's embedding.
    pub embedding: Vec<f32>,
    /// The chunk's length in tokens.
    pub tokens: usize,
    /// The chunk's heading section, if the document has structure.
    pub section: Option<u32>,
    /// Where the cut after the chunk fell, if known; unused on a document's last chunk.
    pub seam_after: Option<SeamKind>,
}

impl MemoryChunk {
    /// A chunk outside any heading section.
    #[must_use]
    pub fn new(embedding: Vec<f32>, tokens: usize) -> Self {
        Self {
            embedding,
            tokens,
            section: None,
            seam_after: None,
        }
    }

    /// The same chunk, placed in heading section `section`.
    #[must_use]
    pub fn in_section(self, section: u32) -> Self {
        Self {
            section: Some(section),
            ..self
        }
    }

    /// The same chunk, with the cut after it of kind `seam`.
    #[must_use]
    pub fn with_seam_after(self, seam: SeamKind) -> Self {
        Self {
            seam_after: Some(seam),
            ..self
        }
    }
}

/// A [`ChunkSource`] held in memory, for tests, examples and benchmarks.
///
/// Chunk ids are handed out densely in the order documents and their chunks are added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemorySource {
    chunks: Vec<StoredChunk>,
    documents: u32,
}

#[derive(Debug, Clone, PartialEq)]
struct StoredChunk {
    chunk: MemoryChunk,
    position: Position,
    /// Cosine with the next chunk of the document; unused on its last chunk.
    continuity_next: f32,
}

impl MemorySource {
    /// An empty source.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a document made of `chunks` in reading order, computes the continuity of each
    /// adjacent pair, and returns the chunks' ids.
    pub fn add_document(&mut self, chunks: impl IntoIterator<Item = MemoryChunk>) -> Vec<ChunkId> {
        let document = self.documents;
        self.documents += 1;
        let first = self.chunks.len();
        self.chunks.extend(
            chunks
                .into_iter()
                .enumerate()
                .map(|(ordinal, chunk)| StoredChunk {
                    chunk,
                    position: Position {
                        document,
                        ordinal: ordinal as u32,
                    },
                    continuity_next: 0.0,
                }),
        );
        for i in first..self.chunks.len().saturating_sub(1) {
            self.chunks[i].continuity_next = cosine(
                &self.chunks[i].chunk.embedding,
                &self.chunks[i + 1].chunk.embedding,
            );
        }
        (first..self.chunks.len())
            .map(|i| ChunkId(i as u32))
            .collect()
    }

    /// How many chunks the source holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Whether the source holds no chunk.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    fn stored(&self, id: ChunkId) -> &StoredChunk {
        &self.chunks[id.index()]
    }
}

impl ChunkSource for MemorySource {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        &self.stored(id).chunk.embedding
    }

    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        let document = self.stored(id).position.document;
        let index = match side {
            Side::Previous => id.index().checked_sub(1)?,
            Side::Next => id.index() + 1,
        };
        let neighbour = self.chunks.get(index)?;
        (neighbour.position.document == document).then_some(ChunkId(index as u32))
    }

    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        match side {
            Side::Previous => self.chunks[id.index() - 1].continuity_next,
            Side::Next => self.stored(id).continuity_next,
        }
    }

    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        match side {
            Side::Previous => self.chunks[id.index() - 1].chunk.seam_after,
            Side::Next => self.stored(id).chunk.seam_after,
        }
    }

    fn position(&self, id: ChunkId) -> Position {
        self.stored(id).position
    }

    fn token_count(&self, id: ChunkId) -> usize {
        self.stored(id).chunk.tokens
    }

    fn section(&self, id: ChunkId) -> Option<u32> {
        self.stored(id).chunk.section
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_documents() -> (MemorySource, Vec<ChunkId>, Vec<ChunkId>) {
        let mut source = MemorySource::new();
        let first = source.add_document([
            MemoryChunk::new(vec![1.0, 0.0], 3),
            MemoryChunk::new(vec![1.0, 1.0], 4).in_section(2),
        ]);
        let second = source.add_document([MemoryChunk::new(vec![0.0, 1.0], 5)]);
        (source, first, second)
    }

    #[test]
    fn neighbours_stop_at_document_edges() {
        let (source, first, second) = two_documents();
        assert_eq!(source.neighbour(first[0], Side::Previous), None);
        assert_eq!(source.neighbour(first[0], Side::Next), Some(first[1]));
        assert_eq!(source.neighbour(first[1], Side::Previous), Some(first[0]));
        assert_eq!(source.neighbour(first[1], Side::Next), None);
        assert_eq!(source.neighbour(second[0], Side::Previous), None);
        assert_eq!(source.neighbour(second[0], Side::Next), None);
    }

    #[test]
    fn continuity_is_the_cosine_of_the_pair_from_both_sides() {
        let (source, first, _) = two_documents();
        let expected = std::f32::consts::FRAC_1_SQRT_2;
        assert!((source.continuity(first[0], Side::Next) - expected).abs() < 1e-6);
        assert!((source.continuity(first[1], Side::Previous) - expected).abs() < 1e-6);
    }

    #[test]
    fn chunks_keep_their_position_tokens_and_section() {
        let (source, first, second) = two_documents();
        assert_eq!(source.len(), 3);
        assert_eq!(
            source.position(second[0]),
            Position {
                document: 1,
                ordinal: 0
            }
        );
        assert_eq!(
            source.position(first[1]),
            Position {
                document: 0,
                ordinal: 1
            }
        );
        assert_eq!(source.token_count(first[1]), 4);
        assert_eq!(source.section(first[0]), None);
        assert_eq!(source.section(first[1]), Some(2));
    }
}
