//! The first-stage hook where a reranker sits: it re-scores the first stage's candidates before
//! the best k of them become the seeds the policy expands.

use std::fmt;

use scar_core::ChunkId;
use scar_embed::CrossEncoder;
use scar_policy::Judgement;

use crate::{ChunkStore, Result, RetrieveError};

/// A chunk the first stage found, with its score there (cosine, BM25 or fused, by the
/// [`FirstStage`](crate::FirstStage)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The chunk.
    pub id: ChunkId,
    /// Its first-stage score, higher is better.
    pub score: f32,
}

/// Judges the first stage's candidates again, with the question beside each candidate's text:
/// the place for a cross-encoder. A [`Retriever`](crate::Retriever) has none unless
/// [`with_reranker`](crate::Retriever::with_reranker) gives it one, and then takes its seeds
/// from the reranker's order, each seed carrying the reranker's score.
///
/// ```no_run
/// use std::sync::Arc;
///
/// use scar_embed::{EmbedOptions, ModelLocator};
/// use scar_retrieve::{Candidate, ChunkStore, FirstStage, Rerank, Result, Retriever};
///
/// /// Puts the chunks that quote the question word for word first.
/// #[derive(Debug)]
/// struct Verbatim;
///
/// impl Rerank for Verbatim {
///     fn score(
///         &self,
///         query: &str,
///         candidates: &[Candidate],
///         store: &dyn ChunkStore,
///     ) -> Result<Vec<f32>> {
///         candidates
///             .iter()
///             .map(|candidate| {
///                 let quotes = store.stored(candidate.id)?.text.contains(query);
///                 Ok(if quotes { 1.0 } else { 0.0 })
///             })
///             .collect()
///     }
/// }
///
/// let retriever = Retriever::open("my-index", &ModelLocator::from_env("models"), &EmbedOptions::default())?
///     .with_reranker(Arc::new(Verbatim));
/// // Of the first stage's candidates, those that quote the question become the seeds first.
/// let prepared = retriever.prepare("three-way handshake", FirstStage::Hybrid, 5)?;
/// println!("{:?}", prepared.seeds);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Rerank: Send + Sync + fmt::Debug {
    /// One score per candidate, in the candidates' order, higher is better. `candidates` are
    /// the first stage's best [`RERANK_CANDIDATES`](crate::RERANK_CANDIDATES) (k, when k is
    /// more; fewer when fewer chunks are searched), best first; `store` holds their text
    /// ([`ChunkStore::chunk`]). Candidates scored alike keep the first stage's order.
    fn score(
        &self,
        query: &str,
        candidates: &[Candidate],
        store: &dyn ChunkStore,
    ) -> Result<Vec<f32>>;
}

/// A cross-encoder judges each candidate as a passage beside the question: its heading path,
/// when it has one, then its text.
impl Rerank for CrossEncoder {
    fn score(
        &self,
        query: &str,
        candidates: &[Candidate],
        store: &dyn ChunkStore,
    ) -> Result<Vec<f32>> {
        let passages = candidates
            .iter()
            .map(|candidate| Ok(store.stored(candidate.id)?.passage()))
            .collect::<Result<Vec<String>>>()?;
        let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
        Ok(CrossEncoder::score(self, query, &passages)?)
    }
}

/// `candidates` ordered by `scores`, one per candidate, each with its first-stage score and, beside
/// it, the reranker's score and the candidate's first-stage rank.
pub(crate) fn reorder(
    candidates: Vec<Candidate>,
    scores: Vec<f32>,
) -> Result<(Vec<Candidate>, Vec<Option<Judgement>>)> {
    let not_numbers = scores.iter().filter(|score| score.is_nan()).count();
    if scores.len() != candidates.len() || not_numbers > 0 {
        return Err(RetrieveError::RerankScores {
            candidates: candidates.len(),
            scores: scores.len(),
            not_numbers,
        });
    }
    let mut reranked: Vec<(Candidate, Judgement)> = candidates
        .into_iter()
        .zip(scores)
        .enumerate()
        .map(|(at, (candidate, score))| {
            let judged = Judgement {
                score,
                first_stage_rank: at + 1,
            };
            (candidate, judged)
        })
        .collect();
    // Stable: a reranker that cannot tell two candidates apart leaves them as the first stage
    // ranked them.
    reranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
    Ok(reranked
        .into_iter()
        .map(|(candidate, judged)| (candidate, Some(judged)))
        .unzip())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(ids: &[u32]) -> Vec<Candidate> {
        ids.iter()
            .enumerate()
            .map(|(rank, &id)| Candidate {
                id: ChunkId(id),
                score: 1.0 / (rank as f32 + 1.0),
            })
            .collect()
    }

    fn ids(candidates: &[Candidate]) -> Vec<u32> {
        candidates.iter().map(|candidate| candidate.id.0).collect()
    }

    #[test]
    fn candidates_take_the_reranker_s_order_and_keep_their_first_stage_place() {
        let (reranked, judged) = reorder(candidates(&[7, 3, 9]), vec![0.1, 0.2, 0.3]).unwrap();
        assert_eq!(ids(&reranked), [9, 3, 7]);
        let first_stage: Vec<f32> = reranked.iter().map(|candidate| candidate.score).collect();
        assert_eq!(first_stage, [1.0 / 3.0, 0.5, 1.0]);
        let judged: Vec<(f32, usize)> = judged
            .iter()
            .map(|j| j.map(|j| (j.score, j.first_stage_rank)).unwrap())
            .collect();
        assert_eq!(judged, [(0.3, 3), (0.2, 2), (0.1, 1)]);
    }

    #[test]
    fn candidates_scored_alike_keep_the_first_stage_s_order() {
        let (reranked, _) = reorder(candidates(&[7, 3, 9, 4]), vec![0.0, 0.0, 1.0, 0.0]).unwrap();
        assert_eq!(ids(&reranked), [9, 7, 3, 4]);
    }

    #[test]
    fn a_score_missing_or_not_a_number_is_refused() {
        let too_few = reorder(candidates(&[7, 3]), vec![1.0]).unwrap_err();
        assert!(matches!(
            too_few,
            RetrieveError::RerankScores {
                candidates: 2,
                scores: 1,
                not_numbers: 0
            }
        ));
        let nan = reorder(candidates(&[7, 3]), vec![1.0, f32::NAN]).unwrap_err();
        assert!(
            nan.to_string()
                .starts_with("the reranker gave 2 scores (1 not a number) for 2 candidates"),
            "{nan}"
        );
    }
}
