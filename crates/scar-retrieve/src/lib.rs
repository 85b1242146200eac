//! The retrieval pipeline shared by the command line and the desktop app:
//! query → embedding → first-stage candidates (→ a [`Rerank`], when given one) → top-k seeds →
//! policy → context and ledger.
//!
//! [`Retriever::prepare`] does the expensive part once per question (embedding and first
//! stage); [`Retriever::expand`] runs a policy over the prepared seeds in microseconds, so a
//! user can move λ or γ and see the decisions change without re-embedding anything.
//!
//! ```no_run
//! use scar_embed::{EmbedOptions, ModelLocator};
//! use scar_policy::{Options, Policy};
//! use scar_retrieve::{FirstStage, Retriever};
//!
//! let retriever = Retriever::open("my-index", &ModelLocator::from_env("models"), &EmbedOptions::default())?;
//! let prepared = retriever.prepare("How is a connection opened?", FirstStage::Dense, 5)?;
//! let report = retriever.expand(&prepared, &Options::new(Policy::scar(1))?)?;
//! for chunk in &report.chunks {
//!     println!("{} #{}: {}", chunk.document, chunk.ordinal, chunk.text);
//! }
//! // `… static ±1 on the same seeds: 7 chunks, 800 tokens — saved 2 chunks and 200 tokens …`
//! println!("{}", report.comparison());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod comparison;
mod error;
mod neighbourhood;
mod report;
mod rerank;
mod sentences;
mod store;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scar_core::ChunkId;
use scar_embed::{EmbedOptions, Embedder, ModelLocator};
use scar_index::Index;
use scar_policy::{ChunkSource, Judgement, Ledger, Options, Rankings, Seed, expand, rank_vote};
use serde::{Deserialize, Serialize};

pub use comparison::{BASELINE, Comparison, ContextSize, baseline_options};
pub use error::{Result, RetrieveError};
pub use neighbourhood::{Neighbourhood, ReadChunk, SeedDocument};
pub use report::{ChunkPlace, ContextChunk, SCHEMA_VERSION, SearchReport, Timings};
pub use rerank::{Candidate, Rerank};
pub use sentences::BestSentence;
pub use store::{ChunkStore, LexicalRanking, StoredChunk, StoredDocument};

/// Seeds per question unless asked otherwise.
pub const DEFAULT_K: usize = 5;

/// How many of the first stage's best candidates a reranker judges (k, when k is more): a
/// cross-encoder the size of ms-marco-MiniLM-L-6-v2 reads 30 in 0.7 s on 2 cores (45.8 pairs/s,
/// docs/PERFORMANCE.md, "Reranking").
pub const RERANK_CANDIDATES: usize = 30;

/// How deep the dense and BM25 rankings go, per seed: deep enough for the evidence walk at any
/// depth up to 50 × k.
pub const RANKING_DEPTH_PER_SEED: usize = 100;

/// How first-stage candidates are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FirstStage {
    /// Cosine similarity over the embeddings.
    Dense,
    /// BM25 over the chunk text (tantivy).
    Bm25,
    /// Reciprocal rank fusion of dense and BM25: the default, because it finds more evidence
    /// than either alone with every model measured (docs/EVALUATION.md).
    #[default]
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
    /// The dense and BM25 rankings of the chunks searched, to
    /// [`RANKING_DEPTH_PER_SEED`] × k: what the evidence walk reads.
    pub rankings: Rankings,
    /// Time spent embedding the question.
    pub embed_time: Duration,
    /// Time spent in the first stage, the reranker's included.
    pub first_stage_time: Duration,
}

/// An embedding model and a store of chunks embedded with it: the folder [`Index`] unless
/// another [`ChunkStore`] is named; and a [`Rerank`] of the first stage's candidates, when one
/// is given.
#[derive(Debug)]
pub struct Retriever<S = Index> {
    /// Shared, so that an index opened again after a commit keeps the loaded model.
    embedder: Arc<Embedder>,
    store: S,
    /// Shared, like the model, so that a reopened index keeps it.
    reranker: Option<Arc<dyn Rerank>>,
}

impl Retriever {
    /// Opens the index in `dir` and loads the model it was built with, on the device and in the
    /// precision `options` name (the query instruction is always the index's own).
    pub fn open(
        dir: impl AsRef<Path>,
        locator: &ModelLocator,
        options: &EmbedOptions,
    ) -> Result<Self> {
        Self::open_store(Index::open(dir)?, locator, options)
    }

    /// Pairs an embedder with an index, checking that the index was built with that model.
    pub fn new(embedder: Embedder, index: Index) -> Result<Self> {
        Self::with_shared(Arc::new(embedder), index)
    }

    /// [`Retriever::new`] with a model that other retrievers may share.
    pub fn with_shared(embedder: Arc<Embedder>, index: Index) -> Result<Self> {
        Self::with_store(embedder, index)
    }

    /// The index.
    #[must_use]
    pub fn index(&self) -> &Index {
        &self.store
    }
}

impl<S: ChunkStore> Retriever<S> {
    /// Loads the model `store`'s chunks were embedded with, with the instructions they were
    /// embedded with, and pairs it with the store.
    pub fn open_store(store: S, locator: &ModelLocator, options: &EmbedOptions) -> Result<Self> {
        let model = store.model();
        let files = locator.locate(&model.id)?;
        let options = options.with_instructions_of(model);
        Self::with_store(Arc::new(Embedder::load(&files, &options)?), store)
    }

    /// Pairs a model that other retrievers may share with a store, checking that the store's
    /// chunks were embedded with that model.
    pub fn with_store(embedder: Arc<Embedder>, store: S) -> Result<Self> {
        let (built, loaded) = (store.model(), embedder.info());
        if !built.embeds_like(loaded) {
            let (index_model, model) = built.names_against(loaded);
            return Err(RetrieveError::ModelMismatch { index_model, model });
        }
        Ok(Self {
            embedder,
            store,
            reranker: None,
        })
    }

    /// This retriever's model and reranker over `store`, which must hold chunks of the same
    /// model.
    pub fn over<T: ChunkStore>(&self, store: T) -> Result<Retriever<T>> {
        Ok(Retriever {
            reranker: self.reranker.clone(),
            ..Retriever::with_store(Arc::clone(&self.embedder), store)?
        })
    }

    /// A second retriever with this one's model, store and reranker, borrowing the store.
    #[must_use]
    pub fn borrowed(&self) -> Retriever<&S> {
        Retriever {
            embedder: Arc::clone(&self.embedder),
            store: &self.store,
            reranker: self.reranker.clone(),
        }
    }

    /// The same retriever, taking its seeds from `reranker`'s order of the first stage's
    /// candidates.
    #[must_use]
    pub fn with_reranker(self, reranker: Arc<dyn Rerank>) -> Self {
        Self {
            reranker: Some(reranker),
            ..self
        }
    }

    /// The store searched.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The model, for other retrievers to share.
    #[must_use]
    pub fn shared_embedder(&self) -> Arc<Embedder> {
        Arc::clone(&self.embedder)
    }

    /// The embedding model.
    #[must_use]
    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// Embeds the question and finds its top-`k` seeds in the whole index.
    pub fn prepare(&self, query: &str, first_stage: FirstStage, k: usize) -> Result<Prepared> {
        self.prepare_in(query, first_stage, k, None)
    }

    /// Embeds the question and finds its top-`k` seeds among the chunks of `documents` (slots)
    /// only, ranking nothing else: the evaluation's document scope, which isolates expansion from
    /// finding the right document.
    pub fn prepare_within(
        &self,
        query: &str,
        first_stage: FirstStage,
        k: usize,
        documents: &[u32],
    ) -> Result<Prepared> {
        self.prepare_in(query, first_stage, k, Some(documents))
    }

    fn prepare_in(
        &self,
        query: &str,
        first_stage: FirstStage,
        k: usize,
        documents: Option<&[u32]>,
    ) -> Result<Prepared> {
        if query.trim().is_empty() {
            return Err(RetrieveError::EmptyQuery);
        }
        if k == 0 {
            return Err(RetrieveError::ZeroK);
        }
        if self.store.is_empty() {
            return Err(RetrieveError::EmptyIndex(self.store.location()));
        }
        let started = Instant::now();
        let embedding = self.embedder.embed_query(query)?;
        let query_tokens = self.embedder.count_tokens(query)?;
        let embed_time = started.elapsed();
        let started = Instant::now();
        let among = documents
            .map(|slots| self.store.chunks_of(slots))
            .transpose()?;
        let among = among.as_deref();
        let scope = among.map_or_else(|| self.store.len(), <[ChunkId]>::len);
        // No list can be longer than the chunks searched: a k of billions asks for all of them,
        // not for room for billions.
        let depth = k.saturating_mul(RANKING_DEPTH_PER_SEED).min(scope);
        let dense = self.store.dense_ranking(&embedding, depth, among)?;
        let lexical_ranking = self.store.lexical_ranking(query, depth, among)?;
        // BM25's vote counts for the share of the question its words could read.
        let lexical_weight = lexical_ranking.reach();
        let lexical = lexical_ranking.hits;
        // The seeds, and a reranker, see the lists to the first stage's own depth, not the
        // rankings' deeper one.
        let count = candidate_count(k);
        let cut = |list: &[(ChunkId, f32)]| list[..list.len().min(count)].to_vec();
        let mut best = match first_stage {
            FirstStage::Dense => cut(&dense),
            FirstStage::Bm25 => cut(&lexical),
            FirstStage::Hybrid => {
                reciprocal_rank_fusion(&[(cut(&dense), 1.0), (cut(&lexical), lexical_weight)])
            }
        };
        best.truncate(count);
        let mut candidates: Vec<Candidate> = best
            .into_iter()
            .map(|(id, score)| Candidate { id, score })
            .collect();
        let mut judgements: Vec<Option<Judgement>> = vec![None; candidates.len()];
        if let Some(reranker) = &self.reranker {
            candidates.truncate(k.max(RERANK_CANDIDATES));
            let scores = reranker.score(query, &candidates, &self.store)?;
            (candidates, judgements) = rerank::reorder(candidates, scores)?;
        }
        let rankings = Rankings::new(
            dense.iter().map(|(id, _)| *id),
            lexical.iter().map(|(id, _)| *id),
            depth,
            scope,
        )
        .with_lexical_weight(lexical_weight);
        let first_stage_time = started.elapsed();
        let seeds = candidates
            .into_iter()
            .zip(judgements)
            .take(k)
            .map(|(Candidate { id, score }, judged)| Seed { id, score, judged })
            .collect();
        Ok(Prepared {
            query: query.to_owned(),
            embedding,
            query_tokens,
            first_stage,
            k,
            seeds,
            rankings,
            embed_time,
            first_stage_time,
        })
    }

    /// Runs a policy over prepared seeds and gathers the context it chose, with the size of
    /// static ±1's context from the same seeds beside it.
    pub fn expand(&self, prepared: &Prepared, options: &Options) -> Result<SearchReport> {
        let started = Instant::now();
        let source = self.policy_source(prepared)?;
        self.report_over(
            source.as_ref(),
            started,
            |id| self.store.stored(id),
            prepared,
            options,
        )
    }

    /// Reads the documents the prepared seeds are in, whole: everything
    /// [`expand_in`](Self::expand_in) needs to decide again without this store.
    pub fn neighbourhood(&self, prepared: &Prepared) -> Result<Neighbourhood> {
        let seeds: Vec<ChunkId> = prepared.seeds.iter().map(|seed| seed.id).collect();
        Neighbourhood::read(&self.store, &seeds)
    }

    /// [`expand`](Self::expand) over the seeds' documents as `neighbourhood` read them,
    /// reading nothing from the store: the same report, in the time the policy takes, for a
    /// front end that decides again each time a control moves.
    pub fn expand_in(
        &self,
        neighbourhood: &Neighbourhood,
        prepared: &Prepared,
        options: &Options,
    ) -> Result<SearchReport> {
        let cite = |id| neighbourhood.stored(id);
        self.report_over(neighbourhood, Instant::now(), cite, prepared, options)
    }

    /// The report of `options`' policy over chunks read once as `source` (the policy's time
    /// counted from `started`), with static ±1's size on the same chunks, citing each chunk as
    /// `cite` reads it.
    fn report_over(
        &self,
        source: &dyn ChunkSource,
        started: Instant,
        cite: impl Fn(ChunkId) -> Result<StoredChunk>,
        prepared: &Prepared,
        options: &Options,
    ) -> Result<SearchReport> {
        let ledger = self.ledger_over(source, prepared, options)?;
        let policy_time = started.elapsed();
        let baseline = self.ledger_over(source, prepared, &baseline_options()?)?;
        SearchReport::new(
            cite,
            prepared,
            ledger,
            ContextSize::of(&baseline),
            policy_time,
        )
    }

    /// Static ±1's own report on the prepared seeds: the context a chat model would have been
    /// sent without the policy.
    pub fn expand_baseline(&self, prepared: &Prepared) -> Result<SearchReport> {
        self.expand(prepared, &baseline_options()?)
    }

    /// The policy's decisions on prepared seeds, without the report.
    pub fn ledger(&self, prepared: &Prepared, options: &Options) -> Result<Ledger> {
        self.ledger_over(self.policy_source(prepared)?.as_ref(), prepared, options)
    }

    /// The chunks a policy walks from the prepared seeds, read once (from a server, the
    /// seeds' documents): for an evaluation that runs many policies on each question
    /// ([`ledger_over`](Self::ledger_over)).
    pub fn policy_source(&self, prepared: &Prepared) -> Result<Box<dyn ChunkSource + '_>> {
        let seeds: Vec<ChunkId> = prepared.seeds.iter().map(|seed| seed.id).collect();
        self.store.policy_source(&seeds)
    }

    /// [`ledger`](Self::ledger) over chunks already read by
    /// [`policy_source`](Self::policy_source).
    pub fn ledger_over(
        &self,
        source: &dyn ChunkSource,
        prepared: &Prepared,
        options: &Options,
    ) -> Result<Ledger> {
        expand(
            source,
            &prepared.embedding,
            &prepared.seeds,
            &prepared.rankings,
            options,
        )
        .map_err(|e| self.store.policy_error(e))
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

/// How many first-stage candidates the `k` seeds are chosen from, and a reranker re-scores.
fn candidate_count(k: usize) -> usize {
    k.saturating_mul(4).max(50)
}

/// Fuses ranked lists, each with its weight: an item scores the sum of its lists'
/// [`rank_vote`]s, the same fusion the evidence walk scores neighbours with
/// ([`scar_policy::fused_score`]).
fn reciprocal_rank_fusion(lists: &[(Vec<(ChunkId, f32)>, f32)]) -> Vec<(ChunkId, f32)> {
    let mut scores: HashMap<ChunkId, f32> = HashMap::new();
    for (list, weight) in lists {
        for (rank, (id, _)) in (1..).zip(list) {
            *scores.entry(*id).or_default() += rank_vote(rank, *weight);
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
        let fused = reciprocal_rank_fusion(&[(dense, 1.0), (bm25, 1.0)]);
        let order: Vec<u32> = fused.iter().map(|(id, _)| id.0).collect();
        // 1: 1/61 + 1/62; 3: 1/63 + 1/61; 2: 1/62; 4: 1/63.
        assert_eq!(order, vec![1, 3, 2, 4]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-7);
    }

    #[test]
    fn a_list_counts_for_its_weight() {
        let dense = vec![(ChunkId(1), 0.9), (ChunkId(2), 0.8), (ChunkId(3), 0.7)];
        let bm25 = vec![(ChunkId(3), 12.0), (ChunkId(4), 9.0)];
        let order = |weight| -> Vec<u32> {
            reciprocal_rank_fusion(&[(dense.clone(), 1.0), (bm25.clone(), weight)])
                .iter()
                .map(|(id, _)| id.0)
                .collect()
        };
        assert_eq!(order(1.0), vec![3, 1, 2, 4]);
        // A vote that counts for nothing leaves dense's order.
        assert_eq!(order(0.0), vec![1, 2, 3, 4]);
    }

    #[test]
    fn first_stage_names_round_trip() {
        for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
            assert_eq!(stage.to_string().parse::<FirstStage>().unwrap(), stage);
        }
        assert!("sparse".parse::<FirstStage>().is_err());
    }
}
