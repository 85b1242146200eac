//! The per-neighbour table: every neighbour a ±3 walk reaches from each seed, with the
//! signals a policy could decide on and whether it held evidence its seed did not.

use std::collections::HashMap;

use scar_core::SeamKind;
use scar_core::{ChunkId, dot};
use scar_embed::Embedder;
use scar_index::Index;
use scar_policy::{Policy, Side, fused_score};
use scar_retrieve::{FirstStage, Prepared};
use serde::{Deserialize, Serialize};

use crate::metrics::Group;
use crate::run::ScoredTest;

/// One neighbour of one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighbourRow {
    /// First stage that found the seed.
    pub first_stage: FirstStage,
    /// The test.
    pub test: String,
    /// Its group.
    pub group: Group,
    /// The seed's rank, from 1.
    pub seed_rank: usize,
    /// The seed.
    pub seed: u32,
    /// Whether the seed overlaps gold.
    pub seed_gold: bool,
    /// Direction of the walk.
    pub side: Side,
    /// Steps from the seed.
    pub distance: u32,
    /// The neighbour.
    pub neighbour: u32,
    /// Whether the neighbour is itself a seed (already in every context).
    pub is_seed: bool,
    /// Whether the neighbour overlaps gold: evidence its seed does not hold.
    pub useful: bool,
    /// cos(q, seed).
    pub query_cos_seed: f32,
    /// cos(q, neighbour).
    pub query_cos: f32,
    /// cos(the chunk this step continues, neighbour): the stored continuity.
    pub continuity: f32,
    /// Where the cut before the neighbour fell.
    pub seam_kind: SeamKind,
    /// cos(q, the text around that cut).
    pub seam_cos: f32,
    /// BM25 of the seed for the question (0 when it matches no term).
    pub bm25_seed: f32,
    /// BM25 of the neighbour.
    pub bm25: f32,
    /// The neighbour's rank by cos(q, chunk) over the whole index, from 1.
    pub dense_rank: usize,
    /// Its rank by BM25 over the whole index, from 1; `None` when it shares no word with the
    /// question.
    pub bm25_rank: Option<usize>,
    /// How much the BM25 rank counts in the fused score: the share of the question the
    /// index's words could read.
    #[serde(default = "full_weight")]
    pub lexical_weight: f32,
    /// Chunks in the index (or in the tests' documents, with `--scope document`).
    pub index_chunks: usize,
    /// The neighbour's rank by cos(q, chunk) among its own document's chunks, from 1.
    pub doc_dense_rank: usize,
    /// Its rank by BM25 among its document's chunks, from 1 (`None`: no word in common).
    pub doc_bm25_rank: Option<usize>,
    /// Chunks in its document.
    pub doc_chunks: usize,
    /// Mean of cos(q, chunk) over its document.
    pub doc_mean: f32,
    /// Standard deviation of cos(q, chunk) over its document.
    pub doc_sd: f32,
    /// Mean of cos(q, chunk) over the whole index.
    pub background_mean: f32,
    /// Standard deviation of cos(q, chunk) over the whole index.
    pub background_sd: f32,
}

impl NeighbourRow {
    /// The paper's SCAR margin for this step: cos(q, n) − 0.1·(1 − continuity) − 0.8·max(cos(q, c), 0).
    #[must_use]
    pub fn paper_margin(&self) -> f32 {
        let score = self.query_cos - Policy::PAPER_LAMBDA * (1.0 - self.continuity);
        score - Policy::PAPER_GAMMA * self.query_cos_seed.max(0.0)
    }

    /// The evidence walk's fused rank score, from the ranks over the whole search scope.
    #[must_use]
    pub fn fused(&self) -> f32 {
        let rank = |r: usize| u32::try_from(r).ok();
        fused_score(
            rank(self.dense_rank),
            self.bm25_rank.and_then(rank),
            self.lexical_weight,
        )
    }
}

/// The lexical weight of tables written before it was recorded, when both ranks counted alike.
fn full_weight() -> f32 {
    1.0
}

/// Words either side of a cut in the seam text.
pub const SEAM_WORDS: usize = 24;

/// How far the table walks from each seed on each side.
const NEIGHBOUR_REACH: u32 = 3;

/// Embeds seam texts on demand and keeps them; documents are loaded once.
#[derive(Default)]
pub(crate) struct SeamCache {
    documents: HashMap<u32, scar_index::LoadedDocument>,
    seams: HashMap<ChunkId, (SeamKind, Vec<f32>)>,
}

impl SeamCache {
    /// The seam between `left` and the next chunk of its document.
    fn seam(
        &mut self,
        embedder: &Embedder,
        index: &Index,
        left: ChunkId,
    ) -> crate::Result<(SeamKind, Vec<f32>)> {
        if let Some(seam) = self.seams.get(&left) {
            return Ok(seam.clone());
        }
        let (Some(a), Some(b)) = (
            index.chunk(left),
            index
                .neighbour(left, Side::Next)
                .and_then(|n| index.chunk(n)),
        ) else {
            return Err(crate::EvalError::Options(format!(
                "no seam after chunk {}",
                left.0
            )));
        };
        let document = match self.documents.entry(a.document.slot) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let file = scar_index::load_document(
                    &a.document.path,
                    &scar_index::LoadOptions::default(),
                )
                .map_err(|source| crate::EvalError::Load {
                    path: a.document.path.clone(),
                    source,
                })?;
                let attachment = a.document.attachment.as_deref();
                e.insert(file.into_part(attachment).ok_or_else(|| {
                    crate::EvalError::Options(format!(
                        "{} no longer carries the attachment {}",
                        a.document.path.display(),
                        attachment.unwrap_or_default()
                    ))
                })?)
            }
        };
        // The kind the chunker stored; the text around the cut is embedded here, for this table.
        let kind = index.seam(left, Side::Next).unwrap_or_else(|| {
            scar_index::seam_kind(&document.text, &a.bytes, &b.bytes, &document.headings)
        });
        let text = scar_index::seam_text(&document.text, &a.bytes, &b.bytes, SEAM_WORDS);
        let embedding = embedder.embed_passages(&[text.as_str()], &mut |_| {})?.data;
        self.seams.insert(left, (kind, embedding.clone()));
        Ok((kind, embedding))
    }
}

/// The rows for one question of `test`, prepared in `index`; `embedder` embeds the seams.
pub(crate) fn rows(
    embedder: &Embedder,
    index: &Index,
    prepared: &Prepared,
    test: &ScoredTest<'_>,
    seams: &mut SeamCache,
    scope: Option<&[u32]>,
) -> crate::Result<Vec<NeighbourRow>> {
    let (group, gold) = (test.group, test.gold.chunks());
    let q = &prepared.embedding;
    let cos = |id: ChunkId| dot(q, index.embedding(id));
    let (mean, sd) = background(index, q);
    let bm25_hits = index.bm25_search(&prepared.query, index.len())?;
    let bm25: HashMap<ChunkId, f32> = bm25_hits.iter().copied().collect();
    let bm = |id: ChunkId| bm25.get(&id).copied().unwrap_or(0.0);
    // The chunks the first stage searched: the whole index, or the documents in scope.
    let scoped: Vec<ChunkId> = match scope {
        None => index.chunk_ids().collect(),
        Some(slots) => index.rows_of(slots).into_iter().map(ChunkId).collect(),
    };
    let (dense_ranks, bm25_ranks) = ranks(&scoped, &cos, &bm25);
    let mut documents: HashMap<u32, DocumentStats> = HashMap::new();
    let seeds: Vec<ChunkId> = prepared.seeds.iter().map(|s| s.id).collect();
    let mut out = Vec::new();
    for (rank, &seed) in seeds.iter().enumerate() {
        for side in [Side::Previous, Side::Next] {
            let mut previous = seed;
            for distance in 1..=NEIGHBOUR_REACH {
                let Some(id) = index.neighbour(previous, side) else {
                    break;
                };
                let left = if side == Side::Next { previous } else { id };
                let (seam_kind, seam) = seams.seam(embedder, index, left)?;
                let Some(chunk) = index.chunk(id) else {
                    break;
                };
                let doc = documents
                    .entry(chunk.document.slot)
                    .or_insert_with(|| DocumentStats::of(chunk.document, &cos, &bm25));
                out.push(NeighbourRow {
                    first_stage: prepared.first_stage,
                    test: test.id.to_owned(),
                    group,
                    seed_rank: rank + 1,
                    seed: seed.0,
                    seed_gold: gold.contains(&seed),
                    side,
                    distance,
                    neighbour: id.0,
                    is_seed: seeds.contains(&id),
                    useful: gold.contains(&id),
                    query_cos_seed: cos(seed),
                    query_cos: cos(id),
                    continuity: index.continuity_next(left).unwrap_or(f32::NAN),
                    seam_kind,
                    seam_cos: dot(q, &seam),
                    bm25_seed: bm(seed),
                    bm25: bm(id),
                    dense_rank: dense_ranks.get(&id).copied().unwrap_or(scoped.len()),
                    bm25_rank: bm25_ranks.get(&id).copied(),
                    lexical_weight: prepared.rankings.lexical_weight(),
                    index_chunks: scoped.len(),
                    doc_dense_rank: doc.dense.get(&id).copied().unwrap_or(doc.chunks),
                    doc_bm25_rank: doc.lexical.get(&id).copied(),
                    doc_chunks: doc.chunks,
                    doc_mean: doc.mean,
                    doc_sd: doc.sd,
                    background_mean: mean,
                    background_sd: sd,
                });
                previous = id;
            }
        }
    }
    Ok(out)
}

/// A document's own ranking of its chunks for the question, and its mean and spread of cos(q, ·).
struct DocumentStats {
    dense: HashMap<ChunkId, usize>,
    lexical: HashMap<ChunkId, usize>,
    chunks: usize,
    mean: f32,
    sd: f32,
}

impl DocumentStats {
    fn of(
        document: &scar_index::DocumentEntry,
        cos: &dyn Fn(ChunkId) -> f32,
        bm25: &HashMap<ChunkId, f32>,
    ) -> Self {
        let rows: Vec<ChunkId> = document.rows().map(ChunkId).collect();
        let (dense, lexical) = ranks(&rows, cos, bm25);
        let values: Vec<f64> = rows.iter().map(|&id| f64::from(cos(id))).collect();
        let (mean, sd) = mean_sd(&values);
        Self {
            dense,
            lexical,
            chunks: rows.len(),
            mean,
            sd,
        }
    }
}

fn background(index: &Index, q: &[f32]) -> (f32, f32) {
    let values: Vec<f64> = index
        .chunk_ids()
        .map(|id| f64::from(dot(q, index.embedding(id))))
        .collect();
    mean_sd(&values)
}

fn mean_sd(values: &[f64]) -> (f32, f32) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean as f32, var.sqrt() as f32)
}

/// Ranks from 1 of `rows` by dense cosine, and of those matching the question by BM25 (ties in
/// row order).
fn ranks(
    rows: &[ChunkId],
    cos: &dyn Fn(ChunkId) -> f32,
    bm25: &HashMap<ChunkId, f32>,
) -> (HashMap<ChunkId, usize>, HashMap<ChunkId, usize>) {
    let rank = |mut scored: Vec<(ChunkId, f32)>| -> HashMap<ChunkId, usize> {
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i + 1))
            .collect()
    };
    let dense = rank(rows.iter().map(|&id| (id, cos(id))).collect());
    let lexical = rank(
        rows.iter()
            .filter_map(|id| bm25.get(id).map(|&score| (*id, score)))
            .collect(),
    );
    (dense, lexical)
}
