//! Dense search over the memory-mapped vector matrix: exact, or through the HNSW graph when the
//! index has one.

use std::ops::Range;

use rayon::prelude::*;
use scar_core::{ChunkId, dot};

use crate::hnsw::rows_from;
use crate::store::Index;
use crate::{IndexError, Result};

/// Rows scored per parallel task: large enough to amortise scheduling, small enough to balance.
const ROWS_PER_TASK: u32 = 4096;

impl Index {
    /// The `k` live chunks most similar to `query` (cosine; stored vectors are unit length),
    /// best first. Through the HNSW graph when the index has one (rows added since it was
    /// linked are scored exactly), otherwise [`Index::exact_dense_search`]. A stored vector
    /// that scores NaN or infinity is damaged: [`IndexError::DamagedVectors`] names its
    /// documents.
    pub fn dense_search(&self, query: &[f32], k: usize) -> Result<Vec<(ChunkId, f32)>> {
        let Some(graph) = self.hnsw_graph() else {
            return self.exact_dense_search(query, k);
        };
        let dimension = self.check_query(query)?;
        // A failed graph search (usearch reports allocation failures) falls back to exact
        // search, which gives the same or better hits.
        let Ok(mut hits) = graph.search(self.matrix(), query, k, |row| self.is_live(row)) else {
            return self.exact_dense_search(query, k);
        };
        let damaged: Vec<u32> = hits
            .iter()
            .filter(|(_, score)| !score.is_finite())
            .map(|(id, _)| id.0)
            .collect();
        if !damaged.is_empty() {
            return Err(self.damaged_vectors(&damaged));
        }
        let unlinked = rows_from(&self.live_rows(), graph.rows());
        if !unlinked.is_empty() {
            let exact = exact_top_k(self.matrix(), dimension, &unlinked, query, k)
                .map_err(|rows| self.damaged_vectors(&rows))?;
            hits.extend(exact);
            hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            hits.truncate(k);
        }
        Ok(hits)
    }

    /// The `k` live chunks most similar to `query`, best first, scoring every live row in
    /// parallel, streaming through the matrix.
    pub fn exact_dense_search(&self, query: &[f32], k: usize) -> Result<Vec<(ChunkId, f32)>> {
        let dimension = self.check_query(query)?;
        exact_top_k(self.matrix(), dimension, &self.live_rows(), query, k)
            .map_err(|rows| self.damaged_vectors(&rows))
    }

    /// The `k` chunks among `rows` most similar to `query`, best first, scored exactly.
    pub fn dense_search_among(
        &self,
        query: &[f32],
        rows: &[u32],
        k: usize,
    ) -> Result<Vec<(ChunkId, f32)>> {
        let dimension = self.check_query(query)?;
        let ranges: Vec<Range<u32>> = rows
            .iter()
            .filter(|&&row| self.is_live(row))
            .map(|&row| row..row + 1)
            .collect();
        exact_top_k(self.matrix(), dimension, &ranges, query, k)
            .map_err(|rows| self.damaged_vectors(&rows))
    }

    /// The query's dimension, once it is known to match the index's and to be finite (a query
    /// that is not would make every stored vector look damaged).
    fn check_query(&self, query: &[f32]) -> Result<usize> {
        let dimension = self.manifest().model.dimension;
        if query.len() != dimension {
            return Err(IndexError::Query(format!(
                "has {} dimensions, the index {dimension}",
                query.len()
            )));
        }
        if !query.iter().all(|x| x.is_finite()) {
            return Err(IndexError::Query("is not finite".into()));
        }
        Ok(dimension)
    }

    /// The error for damaged vectors in `rows`, naming their documents.
    fn damaged_vectors(&self, rows: &[u32]) -> IndexError {
        let mut documents: Vec<std::path::PathBuf> = rows
            .iter()
            .filter_map(|&row| self.chunk(ChunkId(row)))
            .map(|chunk| chunk.document.path.clone())
            .collect();
        documents.sort();
        documents.dedup();
        IndexError::DamagedVectors {
            dir: self.dir().to_owned(),
            documents,
            rows: rows.len(),
        }
    }

    /// The rows of each live document.
    fn live_rows(&self) -> Vec<Range<u32>> {
        self.documents()
            .iter()
            .map(crate::DocumentEntry::rows)
            .collect()
    }
}

/// The `k` rows of a row-major matrix of unit vectors with the highest cosine to `query`,
/// among the rows in `rows`, best first (ties by row). Rows are scored in parallel tasks of a
/// few thousand, each streaming through its stretch of the matrix and keeping its own top k.
/// A row that scores NaN or infinity is not ranked: the rows that did are the error, since a
/// search that skipped them would answer without them unnoticed.
pub fn exact_top_k(
    matrix: &[f32],
    dimension: usize,
    rows: &[Range<u32>],
    query: &[f32],
    k: usize,
) -> Result<Vec<(ChunkId, f32)>, Vec<u32>> {
    if k == 0 || dimension == 0 {
        return Ok(Vec::new());
    }
    let query_norm = scar_core::norm(query).max(f32::MIN_POSITIVE);
    let stored_rows = (matrix.len() / dimension) as u32;
    let tasks: Vec<Range<u32>> = rows
        .iter()
        .flat_map(|range| {
            let range = range.start.min(stored_rows)..range.end.min(stored_rows);
            (range.start..range.end)
                .step_by(ROWS_PER_TASK as usize)
                .map(move |start| start..(start + ROWS_PER_TASK).min(range.end))
        })
        .collect();
    let (mut best, damaged) = tasks
        .into_par_iter()
        .map(|task| {
            let mut top = TopK::new(k);
            let mut damaged = Vec::new();
            let stretch = &matrix[task.start as usize * dimension..task.end as usize * dimension];
            for (row, vector) in (task.start..).zip(stretch.chunks_exact(dimension)) {
                let score = dot(query, vector) / query_norm;
                if score.is_finite() {
                    top.offer(ChunkId(row), score);
                } else {
                    damaged.push(row);
                }
            }
            (top.into_vec(), damaged)
        })
        .reduce(
            || (Vec::new(), Vec::new()),
            |mut a, b| {
                a.0.extend(b.0);
                a.1.extend(b.1);
                a
            },
        );
    if !damaged.is_empty() {
        return Err(damaged);
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    best.truncate(k);
    Ok(best)
}

/// Keeps the `k` highest scores seen, with a cheap rejection test for the common case.
struct TopK {
    k: usize,
    items: Vec<(ChunkId, f32)>,
    floor: f32,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            items: Vec::with_capacity(2 * k),
            floor: f32::NEG_INFINITY,
        }
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
        self.items
            .sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
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

    #[test]
    fn exact_search_scores_only_the_given_rows() {
        // Four 2-d unit rows; row 1 is the best match but lies outside the searched ranges.
        let matrix = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8, 0.8, 0.6];
        let hits = exact_top_k(&matrix, 2, &[0..1, 2..4], &[0.0, 2.0], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.0.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(
            (hits[0].1 - 0.8).abs() < 1e-6,
            "cosine, not the raw dot product"
        );
    }

    #[test]
    fn rows_that_do_not_score_are_the_error() {
        let matrix = [1.0, 0.0, f32::NAN, 0.0, 0.6, 0.8, f32::INFINITY, 0.0];
        let damaged = exact_top_k(&matrix, 2, &[0..2, 2..4], &[0.6, 0.8], 1).unwrap_err();
        assert_eq!(damaged, vec![1, 3]);
    }
}
