//! Searches of the example index: each report carries static ±1's context size from the same
//! seeds, in the numbers of static ±1's own report, and the place of every chunk its ledger
//! names, in the words its context chunks use; a reranker chooses the seeds from the first
//! stage's candidates.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use scar_core::ChunkId;
use scar_index::Index;
use scar_policy::{Options, Policy, Seed};
use scar_retrieve::{
    BASELINE, BestSentence, Candidate, ChunkStore, ContextSize, FirstStage, Prepared, Rerank,
    Result, Retriever,
};
use scar_test_support::{example_index, minilm};

const KAYAK: &str = "What does it cost to take my kayak on the ferry?";

fn retriever() -> &'static Retriever {
    static RETRIEVER: OnceLock<Retriever> = OnceLock::new();
    RETRIEVER
        .get_or_init(|| Retriever::new(minilm(), Index::open(example_index()).unwrap()).unwrap())
}

fn kayak(k: usize) -> Prepared {
    retriever().prepare(KAYAK, FirstStage::Hybrid, k).unwrap()
}

#[test]
fn every_report_compares_with_static_one_on_the_same_seeds() {
    let retriever = retriever();
    let prepared = kayak(3);
    let baseline = retriever.expand_baseline(&prepared).unwrap();
    assert_eq!(baseline.ledger.policy, BASELINE);
    let static_one = ContextSize::of(&baseline.ledger);
    assert_eq!(baseline.static_window_1, static_one);
    for policy in [
        Policy::default(),
        Policy::scar(1),
        Policy::TopK,
        Policy::StaticWindow { window: 2 },
    ] {
        let report = retriever
            .expand(&prepared, &Options::new(policy).unwrap())
            .unwrap();
        let comparison = report.comparison();
        assert_eq!(comparison.baseline, static_one, "{policy}");
        assert_eq!(comparison.policy, ContextSize::of(&report.ledger));
        assert_eq!(comparison.policy.chunks, report.chunks.len());
    }
    // The seeds alone save what static ±1 adds around them; a wider window costs more.
    let seeds = retriever
        .expand(&prepared, &Options::new(Policy::TopK).unwrap())
        .unwrap();
    assert!(seeds.comparison().verdict().starts_with("saved "));
    // One seed, in a document long enough for a window of 2 to reach past ±1.
    let wider = retriever
        .expand(
            &kayak(1),
            &Options::new(Policy::StaticWindow { window: 2 }).unwrap(),
        )
        .unwrap();
    let comparison = wider.comparison();
    assert!(
        comparison.policy.tokens > comparison.baseline.tokens,
        "{comparison}"
    );
    assert!(
        comparison.verdict().starts_with("costs ") && !comparison.to_string().contains("saved"),
        "{comparison}"
    );
}

#[test]
fn every_chunk_the_ledger_names_has_its_place() {
    let retriever = retriever();
    let report = retriever
        .expand(
            &kayak(3),
            &Options::new(Policy::StaticWindow { window: 2 }).unwrap(),
        )
        .unwrap();
    let named: HashSet<_> = report
        .ledger
        .seeds
        .iter()
        .flat_map(|seed| {
            std::iter::once(seed.id).chain(seed.neighbours.iter().filter_map(|n| n.id))
        })
        .collect();
    assert_eq!(report.places.len(), named.len(), "each place once");
    for id in named {
        let place = report.place(id).unwrap();
        let chunk = retriever.index().chunk(id).unwrap();
        assert_eq!(place.document, chunk.document.path.display().to_string());
        assert_eq!(
            (place.ordinal, place.page, place.attachment.as_deref()),
            (
                chunk.ordinal,
                chunk.page,
                chunk.document.attachment.as_deref()
            )
        );
    }
    for chunk in &report.chunks {
        let place = report.place(chunk.id).unwrap();
        assert_eq!((place.name(), place.place()), (chunk.name(), chunk.place()));
    }
}

/// Keeps the first stage's scores, and the candidates it was last given.
#[derive(Debug, Default)]
struct Agree {
    given: Mutex<Vec<Candidate>>,
}

impl Rerank for Agree {
    fn score(&self, _: &str, candidates: &[Candidate], _: &dyn ChunkStore) -> Result<Vec<f32>> {
        candidates.clone_into(&mut self.given.lock().unwrap());
        Ok(candidates.iter().map(|candidate| candidate.score).collect())
    }
}

/// Ranks the candidates backwards.
#[derive(Debug)]
struct Reverse;

impl Rerank for Reverse {
    fn score(&self, _: &str, candidates: &[Candidate], _: &dyn ChunkStore) -> Result<Vec<f32>> {
        Ok((0..candidates.len()).map(|rank| rank as f32).collect())
    }
}

/// Puts the candidates whose text contains `phrase` first.
#[derive(Debug)]
struct Promote {
    phrase: String,
}

impl Rerank for Promote {
    fn score(&self, _: &str, candidates: &[Candidate], store: &dyn ChunkStore) -> Result<Vec<f32>> {
        Ok(candidates
            .iter()
            .map(|candidate| {
                let text = store.stored(candidate.id).unwrap().text;
                if text.contains(&self.phrase) {
                    1.0
                } else {
                    0.0
                }
            })
            .collect())
    }
}

fn reranked_by(reranker: Arc<dyn Rerank>) -> Retriever {
    Retriever::with_shared(
        retriever().shared_embedder(),
        Index::open(example_index()).unwrap(),
    )
    .unwrap()
    .with_reranker(reranker)
}

fn ids(seeds: &[Seed]) -> Vec<ChunkId> {
    seeds.iter().map(|seed| seed.id).collect()
}

/// The candidates the first stage gives a reranker for [`KAYAK`], best first.
fn kayak_candidates(k: usize) -> Vec<Candidate> {
    let agree = Arc::new(Agree::default());
    reranked_by(Arc::clone(&agree) as Arc<dyn Rerank>)
        .prepare(KAYAK, FirstStage::Hybrid, k)
        .unwrap();
    agree.given.lock().unwrap().clone()
}

#[test]
fn a_reranker_that_keeps_the_first_stage_s_order_changes_nothing() {
    let agree = Arc::new(Agree::default());
    let reranked = reranked_by(Arc::clone(&agree) as Arc<dyn Rerank>);
    for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
        let mut ours = reranked.prepare(KAYAK, stage, 3).unwrap();
        let theirs = retriever().prepare(KAYAK, stage, 3).unwrap();
        // Only the time each took may differ, and each seed carries the verdict: the score it
        // had, at the place it had.
        (ours.embed_time, ours.first_stage_time) = (theirs.embed_time, theirs.first_stage_time);
        for (rank, seed) in ours.seeds.iter_mut().enumerate() {
            let judged = seed.judged.take().unwrap();
            assert_eq!(judged.score.to_bits(), seed.score.to_bits());
            assert_eq!(judged.first_stage_rank, rank + 1);
        }
        assert_eq!(ours, theirs, "{stage}");
        // Without a reranker, the seeds are the best of the same candidates.
        let given = agree.given.lock().unwrap();
        assert!(given.len() > 3, "{stage}: {} candidates", given.len());
        let best: Vec<ChunkId> = given[..3].iter().map(|candidate| candidate.id).collect();
        assert_eq!(ids(&theirs.seeds), best, "{stage}");
    }
}

#[test]
fn a_reranker_s_order_chooses_the_seeds_and_its_scores_go_with_them() {
    let candidates = kayak_candidates(3);
    let last = candidates.len() - 1;
    let reversed = reranked_by(Arc::new(Reverse))
        .prepare(KAYAK, FirstStage::Hybrid, 3)
        .unwrap();
    let backwards: Vec<ChunkId> = candidates.iter().rev().take(3).map(|c| c.id).collect();
    assert_eq!(ids(&reversed.seeds), backwards);
    let scores: Vec<f32> = reversed
        .seeds
        .iter()
        .map(|seed| seed.judged.unwrap().score)
        .collect();
    assert_eq!(scores, [last, last - 1, last - 2].map(|rank| rank as f32));

    // The last candidate, found by its text, comes first; the others keep their order.
    let chosen = candidates[last].id;
    let phrase = retriever().index().chunk(chosen).unwrap().text.to_owned();
    let promoted = reranked_by(Arc::new(Promote { phrase }));
    let seeds = promoted
        .prepare(KAYAK, FirstStage::Hybrid, 3)
        .unwrap()
        .seeds;
    assert_eq!(ids(&seeds), [chosen, candidates[0].id, candidates[1].id]);
    // Over the index opened again, the reranker stays.
    let reopened = promoted
        .over(Index::open(promoted.index().dir()).unwrap())
        .unwrap();
    assert_eq!(
        reopened
            .prepare(KAYAK, FirstStage::Hybrid, 3)
            .unwrap()
            .seeds,
        seeds
    );
}

#[test]
fn a_cross_encoder_chooses_the_seeds_by_its_scores() {
    // A cross-encoder of ms-marco-MiniLM-L-6-v2's shape with random weights: its scores mean
    // nothing, but they are the ones that choose the seeds, each seed carrying its own.
    let folder = scar_test_support::models_dir().join("ms-marco-minilm-shape");
    let files = scar_embed::ModelFiles::from_dir("ms-marco-minilm-shape", folder)
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    let options =
        scar_embed::EmbedOptions::new(scar_embed::DeviceChoice::Cpu, scar_embed::Precision::F32);
    let judge = Arc::new(scar_embed::CrossEncoder::load(&files, &options).unwrap());
    let candidates = kayak_candidates(3);
    let seeds = reranked_by(Arc::clone(&judge) as Arc<dyn Rerank>)
        .prepare(KAYAK, FirstStage::Hybrid, 3)
        .unwrap()
        .seeds;
    let index = retriever().index();
    let passages: Vec<String> = candidates
        .iter()
        .map(|candidate| {
            let chunk = index.chunk(candidate.id).unwrap();
            if chunk.heading_path.is_empty() {
                chunk.text.to_owned()
            } else {
                format!("{}\n{}", chunk.heading_path, chunk.text)
            }
        })
        .collect();
    let passages: Vec<&str> = passages.iter().map(String::as_str).collect();
    let scores = judge.score(KAYAK, &passages).unwrap();
    let mut best: Vec<(ChunkId, f32)> = candidates
        .iter()
        .map(|candidate| candidate.id)
        .zip(scores)
        .collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    let chosen: Vec<(ChunkId, f32)> = seeds
        .iter()
        .map(|seed| (seed.id, seed.judged.unwrap().score))
        .collect();
    assert_eq!(chosen, best[..3]);
    // Each seed keeps its place and score in the first stage's list beside the verdict.
    for seed in &seeds {
        let rank = seed.judged.unwrap().first_stage_rank;
        assert_eq!(candidates[rank - 1].id, seed.id);
        assert_eq!(candidates[rank - 1].score.to_bits(), seed.score.to_bits());
    }
}

#[test]
fn the_sentence_judge_finds_the_chunk_that_says_the_fee() {
    let judge = BestSentence::new(retriever().shared_embedder());
    let candidates = kayak_candidates(5);
    let index = retriever().index();
    let scores = judge.score(KAYAK, &candidates, index).unwrap();
    assert_eq!(scores.len(), candidates.len());
    assert!(
        scores.iter().all(|s| (-1.0..=1.0).contains(s)),
        "{scores:?}"
    );
    let best = candidates
        .iter()
        .zip(&scores)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(candidate, _)| index.chunk(candidate.id).unwrap().text.to_lowercase())
        .unwrap();
    assert!(best.contains("kayak"), "{best}");
}

// The weight is the same division of the same word counts wherever it is read.
#[allow(clippy::float_cmp)]
#[test]
fn bm25_counts_for_the_share_of_the_question_the_index_holds() {
    let retriever = retriever();
    let weight = |question| {
        retriever
            .prepare(question, FirstStage::Hybrid, 3)
            .unwrap()
            .rankings
            .lexical_weight()
    };
    // The example documents hold every word of a question, or all but "what" and "my" of
    // eleven.
    assert_eq!(weight("kayak on the ferry crossing"), 1.0);
    assert_eq!(weight(KAYAK), 9.0 / 11.0);
    // Asked in Hindi, the question shares one word with them: BM25's ranking, ordered by that
    // word alone, counts for its small share, in the seeds and in the evidence walk's bar.
    let hindi = retriever
        .prepare("ferry पर कयाक ले जाने का शुल्क क्या है?", FirstStage::Hybrid, 3)
        .unwrap();
    let weight = hindi.rankings.lexical_weight();
    assert_eq!(weight, 1.0 / 9.0);
    let report = retriever
        .expand(&hindi, &Options::new(Policy::default()).unwrap())
        .unwrap();
    assert_eq!(report.ledger.lexical_weight, weight);
    let seed = &report.ledger.seeds[0];
    let depth = seed.bar_rank.unwrap() as f32;
    assert!((seed.bar.unwrap() - (1.0 + weight) / (60.0 + depth)).abs() < 1e-7);
}
