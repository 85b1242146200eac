//! What the first stage knows about every chunk it ranked for a question, and the one fusion of
//! its lists that both the hybrid first stage and the evidence policy use.

use std::collections::HashMap;

use scar_core::ChunkId;

/// Reciprocal rank fusion's constant: ranks below it count nearly as much as the top ones.
pub const RRF_K: f32 = 60.0;

/// What a list weighing `weight` adds to the fused score of a chunk it ranks `rank` (from 1):
/// `weight / (RRF_K + rank)`.
#[must_use]
pub fn rank_vote(rank: u32, weight: f32) -> f32 {
    weight / (RRF_K + rank as f32)
}

/// The fused score of a chunk ranked `dense` and `lexical` (from 1; `None` where the list did not
/// reach it): the [`rank_vote`]s of the lists that hold it, the dense list's weight 1 and the
/// lexical list's `lexical_weight`.
#[must_use]
pub fn fused_score(dense: Option<u32>, lexical: Option<u32>, lexical_weight: f32) -> f32 {
    [(dense, 1.0), (lexical, lexical_weight)]
        .into_iter()
        .filter_map(|(rank, weight)| rank.map(|rank| rank_vote(rank, weight)))
        .sum()
}

/// The question's dense and lexical (BM25) rankings of the chunks it searched, best first, each
/// to the depth the first stage looked, and how much the lexical one's vote counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Rankings {
    dense: HashMap<ChunkId, u32>,
    lexical: HashMap<ChunkId, u32>,
    depth: usize,
    scope: usize,
    lexical_weight: f32,
}

impl Default for Rankings {
    fn default() -> Self {
        Self::new([], [], 0, 0)
    }
}

impl Rankings {
    /// Rankings from two lists, best first, each cut to `depth` chunks, over a search scope of
    /// `scope` chunks (the whole index, or the documents searched).
    #[must_use]
    pub fn new(
        dense: impl IntoIterator<Item = ChunkId>,
        lexical: impl IntoIterator<Item = ChunkId>,
        depth: usize,
        scope: usize,
    ) -> Self {
        let ranks = |list: &mut dyn Iterator<Item = ChunkId>| {
            let mut ranks = HashMap::new();
            for (id, rank) in list.take(depth).zip(1u32..) {
                ranks.entry(id).or_insert(rank);
            }
            ranks
        };
        Self {
            dense: ranks(&mut dense.into_iter()),
            lexical: ranks(&mut lexical.into_iter()),
            depth,
            scope,
            lexical_weight: 1.0,
        }
    }

    /// The same rankings with the lexical list's vote weighed by `weight`, from 0 to 1 (1 when
    /// not set, or not a number): the share of the question BM25 could read, so that a ranking
    /// ordered by a name the question shares with documents in another language counts for
    /// that share.
    #[must_use]
    pub fn with_lexical_weight(self, weight: f32) -> Self {
        let weight = if weight.is_nan() { 1.0 } else { weight };
        Self {
            lexical_weight: weight.clamp(0.0, 1.0),
            ..self
        }
    }

    /// How much the lexical list's vote counts, from 0 to 1.
    #[must_use]
    pub fn lexical_weight(&self) -> f32 {
        self.lexical_weight
    }

    /// The rank a chunk must beat in both lists, on average, to count as evidence when the first
    /// stage gave `seeds` seeds and the walk reaches `depth` times as deep: `depth × seeds`, but
    /// never past the better half of the scope, so that in a small collection a neighbour must
    /// still be more relevant than its median chunk.
    #[must_use]
    pub fn evidence_rank(&self, depth: u32, seeds: usize) -> u32 {
        let wanted = (depth as usize).saturating_mul(seeds);
        wanted.min(self.scope / 2).max(1).min(u32::MAX as usize) as u32
    }

    /// Rank of `id` by dense similarity, from 1, if the list reached it.
    #[must_use]
    pub fn dense_rank(&self, id: ChunkId) -> Option<u32> {
        self.dense.get(&id).copied()
    }

    /// Rank of `id` by BM25, from 1, if the list reached it (a chunk sharing no word with the
    /// question is never ranked).
    #[must_use]
    pub fn lexical_rank(&self, id: ChunkId) -> Option<u32> {
        self.lexical.get(&id).copied()
    }

    /// [`fused_score`] of `id`.
    #[must_use]
    pub fn fused(&self, id: ChunkId) -> f32 {
        self.fused_ranks(self.dense_rank(id), self.lexical_rank(id))
    }

    /// [`fused_score`] of a chunk ranked `dense` and `lexical`, with these rankings' lexical
    /// weight.
    #[must_use]
    pub fn fused_ranks(&self, dense: Option<u32>, lexical: Option<u32>) -> f32 {
        fused_score(dense, lexical, self.lexical_weight)
    }

    /// How deep each list goes.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// How many chunks the rankings were drawn from.
    #[must_use]
    pub fn scope(&self) -> usize {
        self.scope
    }

    /// Whether neither list holds anything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dense.is_empty() && self.lexical.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_from_one_and_stop_at_the_depth() {
        let ids = |list: &[u32]| list.iter().map(|&i| ChunkId(i)).collect::<Vec<_>>();
        let rankings = Rankings::new(ids(&[7, 3, 9]), ids(&[3, 8]), 2, 100);
        assert_eq!(rankings.dense_rank(ChunkId(7)), Some(1));
        assert_eq!(rankings.dense_rank(ChunkId(3)), Some(2));
        assert_eq!(rankings.dense_rank(ChunkId(9)), None);
        assert_eq!(rankings.lexical_rank(ChunkId(3)), Some(1));
        assert_eq!(rankings.lexical_rank(ChunkId(7)), None);
        assert_eq!(rankings.depth(), 2);
        assert!(!rankings.is_empty() && Rankings::default().is_empty());
    }

    #[test]
    fn fusion_adds_one_over_sixty_plus_rank_per_list() {
        let ids = |list: &[u32]| list.iter().map(|&i| ChunkId(i)).collect::<Vec<_>>();
        let rankings = Rankings::new(ids(&[1, 2]), ids(&[2]), 10, 100);
        // Chunk 2: 1/62 + 1/61; chunk 1: 1/61; chunk 5: in neither list.
        assert!((rankings.fused(ChunkId(2)) - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-7);
        assert!((rankings.fused(ChunkId(1)) - 1.0 / 61.0).abs() < 1e-7);
        // Nothing added to nothing is exactly zero.
        assert!(rankings.fused(ChunkId(5)) == 0.0 && fused_score(None, None, 1.0) == 0.0);
    }

    // Weights of 0 and 1 and a reciprocal of 64 are exact in binary.
    #[allow(clippy::float_cmp)]
    #[test]
    fn the_lexical_vote_counts_for_its_weight() {
        let ids = |list: &[u32]| list.iter().map(|&i| ChunkId(i)).collect::<Vec<_>>();
        let rankings = Rankings::new(ids(&[1, 2]), ids(&[2]), 10, 100).with_lexical_weight(0.25);
        assert!((rankings.fused(ChunkId(2)) - (1.0 / 62.0 + 0.25 / 61.0)).abs() < 1e-7);
        assert!((rankings.fused(ChunkId(1)) - 1.0 / 61.0).abs() < 1e-7);
        // Weighed at 0, a chunk only BM25 found scores nothing: dense ranks alone decide.
        let unread = Rankings::new(ids(&[1]), ids(&[3]), 10, 100).with_lexical_weight(0.0);
        assert!(unread.fused(ChunkId(3)) == 0.0);
        assert!(unread.fused_ranks(Some(4), Some(4)) == 1.0 / 64.0);
        // A weight out of range is held to it; none set is 1.
        assert_eq!(
            unread.clone().with_lexical_weight(7.0).lexical_weight(),
            1.0
        );
        assert_eq!(Rankings::default().lexical_weight(), 1.0);
        assert_eq!(unread.with_lexical_weight(f32::NAN).lexical_weight(), 1.0);
    }

    #[test]
    fn the_evidence_rank_is_depth_times_seeds_within_the_better_half() {
        let in_scope = |scope| Rankings::new([], [], 0, scope);
        assert_eq!(in_scope(2_000).evidence_rank(10, 5), 50);
        assert_eq!(in_scope(60).evidence_rank(10, 5), 30);
        assert_eq!(in_scope(1).evidence_rank(10, 5), 1);
        assert_eq!(
            in_scope(usize::MAX).evidence_rank(u32::MAX, usize::MAX),
            u32::MAX
        );
    }
}
