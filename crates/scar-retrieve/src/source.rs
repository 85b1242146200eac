//! The index as the policy sees it.

use scar_core::{ChunkId, Position, SeamKind};
use scar_index::Index;
use scar_policy::{ChunkSource, Side};

/// Adapts an [`Index`] to the policy's [`ChunkSource`].
#[derive(Debug, Clone, Copy)]
pub struct IndexSource<'a>(pub &'a Index);

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
