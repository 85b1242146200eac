//! Exact dense search over the memory-mapped vector matrix.

use rayon::prelude::*;
use scar_core::{ChunkId, dot};

use crate::store::Index;

/// Rows scored per parallel task: large enough to amortise scheduling, small enough to balance.
const ROWS_PER_TASK: u32 = 4096;

impl Index {
    /// The `k` live chunks most similar to `query` (cosine; stored vectors are unit length),
    /// best first. Exact: every live row is scored, in parallel, streaming through the matrix.
    #[must_use]
    pub fn dense_search(&self, query: &[f32], k: usize) -> Vec<(ChunkId, f32)> {
        if k == 0 || query.len() != self.manifest().model.dimension {
            return Vec::new();
        }
        let query_norm = scar_core::norm(query).max(f32::MIN_POSITIVE);
        let tasks: Vec<std::ops::Range<u32>> = self
            .documents()
            .iter()
            .flat_map(|d| {
                let rows = d.rows();
                (rows.start..rows.end)
                    .step_by(ROWS_PER_TASK as usize)
                    .map(move |start| start..(start + ROWS_PER_TASK).min(rows.end))
            })
            .collect();
        let mut best: Vec<(ChunkId, f32)> = tasks
            .into_par_iter()
            .map(|rows| {
                let mut top = TopK::new(k);
                for row in rows {
                    let id = ChunkId(row);
                    top.offer(id, dot(query, self.embedding(id)) / query_norm);
                }
                top.into_vec()
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                a
            });
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        best.truncate(k);
        best
    }
}

/// Keeps the `k` highest scores seen, with a cheap rejection test for the common case.
struct TopK {
    k: usize,
    items: Vec<(ChunkId, f32)>,
    floor: f32,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self { k, items: Vec::with_capacity(2 * k), floor: f32::NEG_INFINITY }
    }

    fn offer(&mut self, id: ChunkId, score: f32) {
        if score <= self.floor {
            return;
        }
        self.items.push((id, score));
        // Prune in bulk: amortised O(1) per offer instead of a heap update each time.
        if self.items.len() >= 2 * self.k {
            self.prune();
        }
    }

    fn prune(&mut self) {
        self.items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        self.items.truncate(self.k);
        if self.items.len() == self.k {
            self.floor = self.items[self.k - 1].1;
        }
    }

    fn into_vec(mut self) -> Vec<(ChunkId, f32)> {
        self.prune();
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let mut top = TopK::new(3);
        for (i, score) in [0.1, 0.9, 0.3, 0.8, 0.2, 0.95, 0.5, 0.7].iter().enumerate() {
            top.offer(ChunkId(i as u32), *score);
        }
        let kept: Vec<u32> = top.into_vec().iter().map(|(id, _)| id.0).collect();
        assert_eq!(kept, vec![5, 1, 3]);
    }
}
