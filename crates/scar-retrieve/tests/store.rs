//! The retriever reads its chunks through [`ChunkStore`] alone: over a second store holding
//! the example index's chunks in memory, every search and every decision is the folder index's.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use scar_core::{ChunkId, Position, SeamKind, Side, dot, norm};
use scar_embed::ModelInfo;
use scar_index::{ChunkerConfig, Index};
use scar_policy::{ChunkSource, Options, Policy};
use scar_retrieve::{
    ChunkStore, FirstStage, LexicalRanking, Result, Retriever, StoredChunk, StoredDocument,
};
use scar_test_support::{example_index, minilm};

/// One chunk as the policy and a report see it.
#[derive(Debug)]
struct Held {
    chunk: StoredChunk,
    embedding: Vec<f32>,
    position: Position,
    section: Option<u32>,
    neighbours: [Option<ChunkId>; 2],
    continuity: [f32; 2],
    seams: [Option<SeamKind>; 2],
}

/// Chunks, vectors, neighbours and the dense ranking in memory. The lexical ranking is the
/// folder index's own: BM25 is not what this store is about, and the evidence walk reads it.
#[derive(Debug)]
struct MemoryStore {
    model: ModelInfo,
    chunker: ChunkerConfig,
    documents: Vec<StoredDocument>,
    chunks: Vec<Held>,
    lexical: Index,
}

const SIDES: [Side; 2] = [Side::Previous, Side::Next];

impl MemoryStore {
    fn copy_of(index: Index) -> Self {
        let source = index.policy_source(&[]).unwrap();
        let chunks = (0..ChunkStore::len(&index) as u32)
            .map(ChunkId)
            .map(|id| {
                let neighbours = SIDES.map(|side| source.neighbour(id, side));
                // The policy asks for a seam's values only where the neighbour exists.
                let exists = |side: Side| neighbours[side as usize].is_some();
                Held {
                    chunk: ChunkStore::stored(&index, id).unwrap(),
                    embedding: source.embedding(id).to_vec(),
                    position: source.position(id),
                    section: source.section(id),
                    neighbours,
                    continuity: SIDES.map(|side| {
                        if exists(side) {
                            source.continuity(id, side)
                        } else {
                            f32::NAN
                        }
                    }),
                    seams: SIDES.map(|side| {
                        if exists(side) {
                            source.seam(id, side)
                        } else {
                            None
                        }
                    }),
                }
            })
            .collect();
        drop(source);
        Self {
            model: ChunkStore::model(&index).clone(),
            chunker: ChunkStore::chunker(&index),
            documents: ChunkStore::documents(&index).unwrap(),
            chunks,
            lexical: index,
        }
    }

    fn held(&self, id: ChunkId) -> &Held {
        &self.chunks[id.0 as usize]
    }
}

// On a reference: the store lends itself to the policy as its own source.
impl ChunkSource for &MemoryStore {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        &self.held(id).embedding
    }
    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        self.held(id).neighbours[side as usize]
    }
    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        self.held(id).continuity[side as usize]
    }
    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        self.held(id).seams[side as usize]
    }
    fn position(&self, id: ChunkId) -> Position {
        self.held(id).position
    }
    fn token_count(&self, id: ChunkId) -> usize {
        self.held(id).chunk.tokens
    }
    fn section(&self, id: ChunkId) -> Option<u32> {
        self.held(id).section
    }
}

impl ChunkStore for MemoryStore {
    fn location(&self) -> String {
        "memory".to_owned()
    }
    fn model(&self) -> &ModelInfo {
        &self.model
    }
    fn chunker(&self) -> ChunkerConfig {
        self.chunker
    }
    fn len(&self) -> usize {
        self.chunks.len()
    }
    fn documents(&self) -> Result<Vec<StoredDocument>> {
        Ok(self.documents.clone())
    }
    fn chunks_of(&self, slots: &[u32]) -> Result<Vec<ChunkId>> {
        Ok(self
            .chunks
            .iter()
            .filter(|held| slots.contains(&held.position.document))
            .map(|held| held.chunk.id)
            .collect())
    }
    fn dense_ranking(
        &self,
        embedding: &[f32],
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<Vec<(ChunkId, f32)>> {
        let all: Vec<ChunkId> = self.chunks.iter().map(|held| held.chunk.id).collect();
        // A cosine, as the folder index scores it: a query's embedding is unit length only to
        // within rounding.
        let query_norm = norm(embedding).max(f32::MIN_POSITIVE);
        let mut scored: Vec<(ChunkId, f32)> = among
            .unwrap_or(&all)
            .iter()
            .map(|&id| (id, dot(embedding, &self.held(id).embedding) / query_norm))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(depth);
        Ok(scored)
    }
    fn lexical_ranking(
        &self,
        query: &str,
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> Result<LexicalRanking> {
        self.lexical.lexical_ranking(query, depth, among)
    }
    fn chunk(&self, id: ChunkId) -> Result<Option<StoredChunk>> {
        Ok(self
            .chunks
            .get(id.0 as usize)
            .map(|held| held.chunk.clone()))
    }
    fn policy_source(&self, _seeds: &[ChunkId]) -> Result<Box<dyn ChunkSource + '_>> {
        Ok(Box::new(self))
    }
}

#[test]
fn a_second_store_gives_the_folder_index_s_searches_and_decisions() {
    let embedder = Arc::new(minilm());
    let folder =
        Retriever::with_store(Arc::clone(&embedder), Index::open(example_index()).unwrap())
            .unwrap();
    let memory = Retriever::with_store(
        embedder,
        MemoryStore::copy_of(Index::open(example_index()).unwrap()),
    )
    .unwrap();
    let policies = [
        Policy::default(),
        Policy::scar(1),
        Policy::TopK,
        Policy::StaticWindow { window: 1 },
        Policy::Parent { block: 3 },
        Policy::Section { block: 3 },
    ];
    let questions = [
        "What does it cost to take my kayak on the ferry?",
        "How is a connection opened?",
        "Who may cancel a booking, and until when?",
    ];
    let mut decided = 0;
    for question in questions {
        for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
            let ours = memory.prepare(question, stage, 3).unwrap();
            let theirs = folder.prepare(question, stage, 3).unwrap();
            assert_eq!(ours.seeds, theirs.seeds, "{question} ({stage})");
            assert_eq!(ours.rankings, theirs.rankings, "{question} ({stage})");
            // The seeds' documents read once decide as the store does, read on every policy.
            let read = memory.neighbourhood(&ours).unwrap();
            assert_eq!(read, folder.neighbourhood(&theirs).unwrap());
            for policy in policies {
                let options = Options::new(policy).unwrap();
                let mut from_memory = memory.expand(&ours, &options).unwrap();
                let from_folder = folder.expand(&theirs, &options).unwrap();
                let mut from_read = folder.expand_in(&read, &theirs, &options).unwrap();
                // Only the time each took may differ.
                from_memory.timings = from_folder.timings;
                assert_eq!(from_memory, from_folder, "{question} ({stage}, {policy})");
                from_read.timings = from_folder.timings;
                assert_eq!(from_read, from_folder, "{question} ({stage}, {policy})");
                decided += from_folder.ledger.seeds.len();
            }
        }
    }
    assert!(decided > 0);
    // A search within documents reads the store's own list of their chunks.
    let slots = [0, 1];
    let ours = memory
        .prepare_within(questions[0], FirstStage::Hybrid, 3, &slots)
        .unwrap();
    let theirs = folder
        .prepare_within(questions[0], FirstStage::Hybrid, 3, &slots)
        .unwrap();
    assert_eq!(ours.seeds, theirs.seeds);
    assert_eq!(ours.rankings, theirs.rankings);
}
