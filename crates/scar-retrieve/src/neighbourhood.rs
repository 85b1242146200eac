//! The documents a question's seeds are in, read once from the store: what every policy walks
//! from those seeds, every chunk a report of them cites, and every seam of those documents. A
//! front end that re-decides as a control moves decides from it without reading the store
//! again, whether the store is a folder or a server ([`crate::Retriever::expand_in`]).

use std::collections::HashMap;

use scar_core::{ChunkId, Position, SeamKind, Side};
use scar_policy::ChunkSource;

use crate::{ChunkStore, Result, StoredChunk, StoredDocument};

/// The seeds' documents, whole, as a store held them when they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbourhood {
    /// In the order of each document's best seed.
    documents: Vec<SeedDocument>,
    /// Where each chunk is: its document in `documents`, its place in that document's chunks.
    at: HashMap<ChunkId, (usize, usize)>,
}

/// A document some seed is in, with all its chunks in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedDocument {
    /// The document.
    pub document: StoredDocument,
    /// Its chunks, in reading order.
    pub chunks: Vec<ReadChunk>,
}

/// A chunk as a report cites it and a policy walks it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadChunk {
    /// Text and place.
    pub chunk: StoredChunk,
    /// Where the policies see it.
    pub position: Position,
    /// Its embedding.
    pub embedding: Vec<f32>,
    /// Cosine with the next chunk of the document; `None` on its last.
    pub continuity_next: Option<f32>,
    /// Where the cut after it fell; `None` on the document's last chunk or where the index
    /// recorded none.
    pub seam_next: Option<SeamKind>,
    /// The section it belongs to, where the document has headings.
    pub section: Option<u32>,
}

impl Neighbourhood {
    /// Reads from `store` the documents `seeds` are in: the ids of their chunks, then the
    /// chunks (one request each, for a store on a server), checking that none was replaced
    /// between the requests.
    pub(crate) fn read(store: &dyn ChunkStore, seeds: &[ChunkId]) -> Result<Self> {
        let mut slots: Vec<u32> = Vec::new();
        for seed in store.stored_chunks(seeds)? {
            if !slots.contains(&seed.slot) {
                slots.push(seed.slot);
            }
        }
        let ids = store.chunks_of(&slots)?;
        let chunks = store.stored_chunks(&ids)?;
        // Given every chunk, a store on a server refuses when one of them is gone.
        let source = store.policy_source(&ids)?;
        let mut documents: Vec<SeedDocument> = Vec::with_capacity(slots.len());
        for slot in slots {
            let mut read: Vec<ReadChunk> = chunks
                .iter()
                .filter(|chunk| chunk.slot == slot)
                .map(|chunk| {
                    let id = chunk.id;
                    let has_next = source.neighbour(id, Side::Next).is_some();
                    ReadChunk {
                        position: source.position(id),
                        embedding: source.embedding(id).to_vec(),
                        continuity_next: has_next.then(|| source.continuity(id, Side::Next)),
                        seam_next: source.seam(id, Side::Next),
                        section: source.section(id),
                        chunk: chunk.clone(),
                    }
                })
                .collect();
            read.sort_by_key(|chunk| chunk.position.ordinal);
            let Some(first) = read.first() else {
                continue;
            };
            documents.push(SeedDocument {
                document: StoredDocument {
                    slot,
                    path: first.chunk.document.clone().into(),
                    attachment: first.chunk.attachment.clone(),
                },
                chunks: read,
            });
        }
        let at = documents
            .iter()
            .enumerate()
            .flat_map(|(d, document)| {
                document
                    .chunks
                    .iter()
                    .enumerate()
                    .map(move |(n, read)| (read.chunk.id, (d, n)))
            })
            .collect();
        Ok(Self { documents, at })
    }

    /// The seeds' documents, in the order of each one's best seed.
    #[must_use]
    pub fn documents(&self) -> &[SeedDocument] {
        &self.documents
    }

    /// Chunk `id`, if it is in one of the seeds' documents.
    #[must_use]
    pub fn chunk(&self, id: ChunkId) -> Option<&ReadChunk> {
        let &(document, n) = self.at.get(&id)?;
        Some(&self.documents[document].chunks[n])
    }

    /// The chunk next to `id` on `side`, and the one before the cut between them.
    fn beside(&self, id: ChunkId, side: Side) -> Option<(&ReadChunk, &ReadChunk)> {
        let &(document, n) = self.at.get(&id)?;
        let chunks = &self.documents[document].chunks;
        let neighbour = match side {
            Side::Previous => n.checked_sub(1)?,
            Side::Next => n + 1,
        };
        let neighbour = chunks.get(neighbour)?;
        let left = match side {
            Side::Previous => neighbour,
            Side::Next => &chunks[n],
        };
        Some((neighbour, left))
    }

    /// Chunk `id`, which a policy only asks about once it reached it here.
    fn walked(&self, id: ChunkId) -> &ReadChunk {
        self.chunk(id)
            .unwrap_or_else(|| panic!("chunk {id} is not in the seeds' documents"))
    }

    /// Chunk `id` as a report cites it.
    pub(crate) fn stored(&self, id: ChunkId) -> Result<StoredChunk> {
        self.chunk(id)
            .map(|read| read.chunk.clone())
            .ok_or(crate::RetrieveError::UnknownChunk(id))
    }
}

impl ChunkSource for Neighbourhood {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        &self.walked(id).embedding
    }

    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        self.beside(id, side)
            .map(|(neighbour, _)| neighbour.chunk.id)
    }

    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        self.beside(id, side)
            .and_then(|(_, left)| left.continuity_next)
            .unwrap_or(f32::NAN)
    }

    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        self.beside(id, side).and_then(|(_, left)| left.seam_next)
    }

    fn position(&self, id: ChunkId) -> Position {
        self.walked(id).position
    }

    fn token_count(&self, id: ChunkId) -> usize {
        self.walked(id).chunk.tokens
    }

    fn section(&self, id: ChunkId) -> Option<u32> {
        self.walked(id).section
    }
}
