//! The retrieval pipeline shared by the command line and the desktop app:
//! query → embedding → first-stage candidates → top-k seeds → policy → context and ledger.
//!
//! [`Retriever::prepare`] does the expensive part once per question (embedding and first
//! stage); [`Retriever::expand`] runs a policy over the prepared seeds in microseconds, so a
//! user can move λ or γ and see the decisions change without re-embedding anything.
//!
//! ```no_run
//! use scar_embed::{DeviceChoice, ModelLocator};
//! use scar_policy::{Options, Policy};
//! use scar_retrieve::{FirstStage, Retriever};
//!
//! let retriever = Retriever::open("my-index", &ModelLocator::from_env("models"), DeviceChoice::Auto)?;
//! let prepared = retriever.prepare("How is a connection opened?", FirstStage::Dense, 5)?;
//! let report = retriever.expand(&prepared, &Options::new(Policy::scar(1))?)?;
//! for chunk in &report.chunks {
//!     println!("{} #{}: {}", chunk.document, chunk.ordinal, chunk.text);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod report;
mod source;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use scar_core::ChunkId;
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelLocator};
use scar_index::Index;
use scar_policy::{Options, Seed, expand};
use serde::{Deserialize, Serialize};

pub use error::{Result, RetrieveError};
pub use report::{ContextChunk, SCHEMA_VERSION, SearchReport, Timings};
pub use source::IndexSource;

/// How first-stage candidates are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FirstStage {
    /// Cosine similarity over the embeddings.
    #[default]
    Dense,
    /// BM25 over the chunk text (tantivy).
    Bm25,
    /// Reciprocal rank fusion of dense and BM25.
    Hybrid,
}

impl FromStr for FirstStage {
    type Err = RetrieveError;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "dense" => Ok(Self::Dense),
            "bm25" => Ok(Self::Bm25),
            "hybrid" => Ok(Self::Hybrid),
            _ => Err(RetrieveError::BadFirstStage(text.to_owned())),
        }
    }
}

impl fmt::Display for FirstStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Dense => "dense",
            Self::Bm25 => "bm25",
            Self::Hybrid => "hybrid",
        })
    }
}

/// Reciprocal rank fusion's constant: ranks below it count nearly as much as the top ones.
const RRF_K: f32 = 60.0;

/// A question embedded and its seeds found: everything a policy needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The question as asked.
    pub query: String,
    /// Its embedding (with the model's query instruction).
    pub embedding: Vec<f32>,
    /// Tokens in the question (without special tokens).
    pub query_tokens: usize,
    /// How the seeds were found.
    pub first_stage: FirstStage,
    /// Seeds asked for.
    pub k: usize,
    /// The top-k first-stage hits, best first (fewer when the index is smaller).
    pub seeds: Vec<Seed>,
    /// Time spent embedding the question.
    pub embed_time: Duration,
    /// Time spent in the first stage.
    pub first_stage_time: Duration,
}

/// An embedding model and an index built with it.
#[derive(Debug)]
pub struct Retriever {
    embedder: Embedder,
    index: Index,
}

impl Retriever {
    /// Opens the index in `dir` and loads the model it was built with.
    pub fn open(
        dir: impl AsRef<Path>,
        locator: &ModelLocator,
        device: DeviceChoice,
    ) -> Result<Self> {
        let index = Index::open(dir)?;
        let files = locator.locate(&index.manifest().model.id)?;
        let options = EmbedOptions {
            device,
            query_prefix: Some(index.manifest().model.query_prefix.clone()),
            ..EmbedOptions::default()
        };
        let embedder = Embedder::load(&files, &options)?;
        Self::new(embedder, index)
    }

    /// Pairs an embedder with an index, checking that the index was built with that model.
    pub fn new(embedder: Embedder, index: Index) -> Result<Self> {
        let (built, loaded) = (&index.manifest().model, embedder.info());
        if built.id != loaded.id || built.dimension != loaded.dimension {
            return Err(RetrieveError::ModelMismatch {
                index_model: built.id.clone(),
                model: loaded.id.clone(),
            });
        }
        Ok(Self { embedder, index })
    }

    /// The index.
    #[must_use]
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The embedding model.
    #[must_use]
    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// Embeds the question and finds its top-`k` seeds.
    pub fn prepare(&self, query: &str, first_stage: FirstStage, k: usize) -> Result<Prepared> {
        if query.trim().is_empty() {
            return Err(RetrieveError::EmptyQuery);
        }
        if k == 0 {
            return Err(RetrieveError::ZeroK);
        }
        if self.index.is_empty() {
            return Err(RetrieveError::EmptyIndex(self.index.dir().to_owned()));
        }
        let started = Instant::now();
        let embedding = self.embedder.embed_query(query)?;
        let query_tokens = self.embedder.count_tokens(query)?;
        let embed_time = started.elapsed();
        let started = Instant::now();
        let hits = match first_stage {
            FirstStage::Dense => self.index.dense_search(&embedding, k),
            FirstStage::Bm25 => self.index.bm25_search(query, k)?,
            FirstStage::Hybrid => {
                let depth = (4 * k).max(50);
                let dense = self.index.dense_search(&embedding, depth);
                let bm25 = self.index.bm25_search(query, depth)?;
                let mut fused = reciprocal_rank_fusion(&[dense, bm25]);
                fused.truncate(k);
                fused
            }
        };
        let first_stage_time = started.elapsed();
        let seeds = hits
            .into_iter()
            .map(|(id, score)| Seed { id, score })
            .collect();
        Ok(Prepared {
            query: query.to_owned(),
            embedding,
            query_tokens,
            first_stage,
            k,
            seeds,
            embed_time,
            first_stage_time,
        })
    }

    /// Runs a policy over prepared seeds and gathers the context it chose.
    pub fn expand(&self, prepared: &Prepared, options: &Options) -> Result<SearchReport> {
        let started = Instant::now();
        let ledger = expand(
            &IndexSource(&self.index),
            &prepared.embedding,
            &prepared.seeds,
            options,
        )?;
        let policy_time = started.elapsed();
        Ok(SearchReport::new(
            &self.index,
            prepared,
            ledger,
            policy_time,
        ))
    }

    /// [`prepare`](Self::prepare) then [`expand`](Self::expand).
    pub fn search(
        &self,
        query: &str,
        first_stage: FirstStage,
        k: usize,
        options: &Options,
    ) -> Result<SearchReport> {
        let prepared = self.prepare(query, first_stage, k)?;
        self.expand(&prepared, options)
    }
}

/// Fuses ranked lists: each item scores Σ 1 / (60 + rank) over the lists it appears in.
fn reciprocal_rank_fusion(lists: &[Vec<(ChunkId, f32)>]) -> Vec<(ChunkId, f32)> {
    let mut scores: HashMap<ChunkId, f32> = HashMap::new();
    for list in lists {
        for (rank, (id, _)) in list.iter().enumerate() {
            *scores.entry(*id).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(ChunkId, f32)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rewards_agreement_and_breaks_ties_by_id() {
        let dense = vec![(ChunkId(1), 0.9), (ChunkId(2), 0.8), (ChunkId(3), 0.7)];
        let bm25 = vec![(ChunkId(3), 12.0), (ChunkId(1), 9.0), (ChunkId(4), 1.0)];
        let fused = reciprocal_rank_fusion(&[dense, bm25]);
        let order: Vec<u32> = fused.iter().map(|(id, _)| id.0).collect();
        // 1: 1/61 + 1/62; 3: 1/63 + 1/61; 2: 1/62; 4: 1/63.
        assert_eq!(order, vec![1, 3, 2, 4]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-7);
    }

    #[test]
    fn first_stage_names_round_trip() {
        for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
            assert_eq!(stage.to_string().parse::<FirstStage>().unwrap(), stage);
        }
        assert!("sparse".parse::<FirstStage>().is_err());
    }
}
