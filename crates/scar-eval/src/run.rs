//! The evaluation loop: prepare each question once per first stage, run every policy and every
//! sweep setting on the same seeds, score, aggregate, bootstrap.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use scar_core::ChunkId;
use scar_policy::{Options, Policy};
use scar_retrieve::{ChunkStore, FirstStage, Retriever, StoredChunk};

use crate::benchmark::Resolved;
use crate::metrics::{ChunkExtent, Gold, Group, TestScore, aggregate, in_group, score};
use crate::options::{EvalOptions, Scope};
use crate::report::{
    Comparison, DataSummary, DepthPoint, EvalReport, EvalSettings, PolicyResult, SCHEMA_VERSION,
    StageResult, SweepPoint, TestRecord,
};
use crate::stats::paired_bootstrap;
use crate::{EvalError, Result};

/// Where a run stands: tests done (over all first stages) of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Questions prepared and scored so far.
    pub done: usize,
    /// Questions to do: tests × first stages.
    pub total: usize,
}

/// A test ready to score: its gold chunks and spans in index terms.
pub(crate) struct ScoredTest<'a> {
    pub(crate) id: &'a str,
    kind: Option<&'a str>,
    pub(crate) query: &'a str,
    pub(crate) gold: Gold,
    pub(crate) group: Group,
    /// The index slots of the documents holding its evidence.
    pub(crate) documents: Vec<u32>,
}

/// Runs the evaluation of `benchmark` against the retriever's store (a folder index, or
/// another [`ChunkStore`]).
///
/// Documents of the benchmark are matched to the store's documents by canonical path; tests
/// whose documents are not stored, or whose spans cover no chunk (e.g. only whitespace that
/// the chunker dropped), are left out and listed in the report's problems. The neighbour and
/// seed tables read a folder index whole, so they need one.
pub fn evaluate<S: ChunkStore>(
    retriever: &Retriever<S>,
    benchmark: &Resolved,
    options: &EvalOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<EvalReport> {
    options.validate()?;
    let store = retriever.store();
    if options.neighbour_table && store.folder_index().is_none() {
        return Err(EvalError::Options(format!(
            "the neighbour and seed tables read an index folder whole; {} is not one",
            store.location()
        )));
    }
    let mut problems = benchmark.problems.clone();
    let tests = gold_tests(store, benchmark, &mut problems)?;
    let runner = Runner::new(options, &tests)?;
    // The reranked runs search the same store through a retriever that carries the judge.
    let reranked = options.reranker.as_ref().map(|judge| {
        (
            judge.name.clone(),
            retriever.borrowed().with_reranker(Arc::clone(&judge.judge)),
        )
    });
    let runs = 1 + usize::from(reranked.is_some());
    let total = tests.len() * options.first_stages.len() * runs;
    let mut done = 0;
    progress(Progress { done, total });
    let mut stages = Vec::new();
    for &stage in &options.first_stages {
        let mut tick = || {
            done += 1;
            progress(Progress { done, total });
        };
        stages.push(runner.stage(retriever, None, stage, &mut tick)?);
        if let Some((name, reranked)) = &reranked {
            stages.push(runner.stage(reranked, Some(name), stage, &mut tick)?);
        }
    }

    let count = |group: Group| tests.iter().filter(|t| t.group == group).count();
    let mut kinds: BTreeMap<String, BTreeMap<Group, usize>> = BTreeMap::new();
    for test in &tests {
        if let Some(kind) = test.kind {
            *kinds
                .entry(kind.to_owned())
                .or_default()
                .entry(test.group)
                .or_default() += 1;
        }
    }
    let model = store.model();
    Ok(EvalReport {
        schema: SCHEMA_VERSION.to_owned(),
        settings: EvalSettings {
            benchmark: benchmark.benchmark.display().to_string(),
            corpus: benchmark.corpus.display().to_string(),
            index: store.location(),
            model: model.id.clone(),
            dimension: model.dimension,
            chunker: store.chunker(),
            k: options.k,
            first_stages: options.first_stages.clone(),
            policies: options.policies.clone(),
            resamples: options.resamples,
            seed: options.seed,
            scope: options.scope,
            quick: options.quick,
        },
        data: DataSummary {
            tests_in_file: benchmark.tests_in_file,
            tests_chosen: benchmark.tests.len(),
            tests_scored: tests.len(),
            boundary: count(Group::Boundary),
            atomic: count(Group::Atomic),
            kinds,
            documents: benchmark.documents.len(),
            index_documents: store.documents().map_err(retrieve_error)?.len(),
            index_chunks: store.len(),
            path_fallbacks: benchmark.fallbacks,
            path_fallback_example: benchmark.fallback_example.clone(),
            problems,
        },
        stages,
    })
}

/// The benchmark's tests with their gold chunks; the ones that cannot be scored are left out
/// with a line in `problems`, and none left is an error naming the first problems.
pub(crate) fn gold_tests<'a>(
    store: &dyn ChunkStore,
    benchmark: &'a Resolved,
    problems: &mut Vec<String>,
) -> Result<Vec<ScoredTest<'a>>> {
    // Spans point into a file's own text, never into an attachment's.
    let documents = store.documents().map_err(retrieve_error)?;
    let slots: HashMap<&Path, u32> = documents
        .iter()
        .filter(|d| d.attachment.is_none())
        .map(|d| (d.path.as_path(), d.slot))
        .collect();
    let mut extents: HashMap<u32, Vec<ChunkExtent>> = HashMap::new();
    for document in &documents {
        if document.attachment.is_none() && benchmark.documents.contains(&document.path) {
            let ids = store.chunks_of(&[document.slot]).map_err(retrieve_error)?;
            extents.insert(document.slot, context_extents(store, &ids)?);
        }
    }
    let mut tests = Vec::new();
    for test in &benchmark.tests {
        let mut spans = Vec::new();
        for span in &test.spans {
            match slots.get(span.path.as_path()) {
                Some(&slot) => spans.push((slot, span.chars.clone())),
                None => problems.push(format!(
                    "test {}: {} is not indexed",
                    test.id,
                    span.path.display()
                )),
            }
        }
        let mut slots_used: Vec<u32> = spans.iter().map(|(slot, _)| *slot).collect();
        slots_used.sort_unstable();
        slots_used.dedup();
        let chunks: Vec<ChunkExtent> = slots_used
            .iter()
            .flat_map(|slot| extents[slot].iter().cloned())
            .collect();
        let gold = Gold::new(spans, &chunks);
        match gold.group() {
            Some(group) => {
                tests.push(ScoredTest {
                    id: &test.id,
                    kind: test.kind.as_deref(),
                    query: &test.query,
                    gold,
                    group,
                    documents: slots_used,
                });
            }
            None => problems.push(format!(
                "test {}: left out, its spans cover no indexed chunk",
                test.id
            )),
        }
    }
    if tests.is_empty() {
        return Err(EvalError::NothingToEvaluate {
            benchmark: benchmark.benchmark.clone(),
            reason: problems
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    Ok(tests)
}

/// What every first stage shares: the tests, the validated policies and sweep settings.
struct Runner<'a> {
    options: &'a EvalOptions,
    tests: &'a [ScoredTest<'a>],
    groups: Vec<Group>,
    policies: Vec<Options>,
    sweep: Vec<(f32, f32, Options)>,
    depth_sweep: Vec<(u32, Options)>,
}

impl<'a> Runner<'a> {
    fn new(options: &'a EvalOptions, tests: &'a [ScoredTest<'a>]) -> Result<Self> {
        let policies = options
            .policies
            .iter()
            .map(|p| Options::new(p.policy))
            .collect::<Result<_, _>>()?;
        let sweep = options
            .sweep_lambdas
            .iter()
            .flat_map(|&lambda| {
                options
                    .sweep_gammas
                    .iter()
                    .map(move |&gamma| (lambda, gamma))
            })
            .map(|(lambda, gamma)| {
                Options::new(Policy::Scar {
                    lambda,
                    gamma,
                    window: options.sweep_window,
                })
                .map(|o| (lambda, gamma, o))
            })
            .collect::<Result<_, _>>()?;
        let depth_sweep = options
            .sweep_depths
            .iter()
            .map(|&depth| {
                let window = options.sweep_depth_window;
                Options::new(Policy::Evidence { depth, window }).map(|o| (depth, o))
            })
            .collect::<Result<_, _>>()?;
        let groups = tests.iter().map(|t| t.group).collect();
        Ok(Self {
            options,
            tests,
            groups,
            policies,
            sweep,
            depth_sweep,
        })
    }

    /// Every test with one first stage, through `retriever` (which carries the judge named
    /// `reranker`, if any); `tick` after each test. The neighbour and seed tables are gathered
    /// for the first stage's own seeds only.
    fn stage<S: ChunkStore>(
        &self,
        retriever: &Retriever<S>,
        reranker: Option<&String>,
        stage: FirstStage,
        tick: &mut dyn FnMut(),
    ) -> Result<StageResult> {
        let store = retriever.store();
        let named = &self.options.policies;
        let mut policy_scores: Vec<Vec<TestScore>> =
            vec![Vec::with_capacity(self.tests.len()); named.len()];
        let mut sweep_scores: Vec<Vec<TestScore>> =
            vec![Vec::with_capacity(self.tests.len()); self.sweep.len()];
        let mut depth_scores: Vec<Vec<TestScore>> =
            vec![Vec::with_capacity(self.tests.len()); self.depth_sweep.len()];
        let mut records = Vec::with_capacity(self.tests.len());
        let mut neighbours = Vec::new();
        let mut seeds = Vec::new();
        let mut judge_seconds: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut seams = crate::neighbours::SeamCache::default();
        for test in self.tests {
            let retrieve = |source| EvalError::Retrieve {
                test: test.id.to_owned(),
                source: Box::new(source),
            };
            let prepared = match self.options.scope {
                Scope::Index => retriever.prepare(test.query, stage, self.options.k),
                Scope::Document => {
                    retriever.prepare_within(test.query, stage, self.options.k, &test.documents)
                }
            }
            .map_err(retrieve)?;
            let index = store.folder_index();
            if let (true, None, Some(index)) = (self.options.neighbour_table, reranker, index) {
                neighbours.extend(crate::neighbours::rows(
                    retriever.embedder(),
                    index,
                    &prepared,
                    test,
                    &mut seams,
                    (self.options.scope == Scope::Document).then_some(test.documents.as_slice()),
                )?);
                let (rows, seconds) = crate::seeds::rows(
                    retriever,
                    index,
                    &prepared,
                    test.id,
                    test.group,
                    test.gold.chunks(),
                    &self.options.seed_judges,
                )?;
                seeds.extend(rows);
                for (judge, seconds) in seconds {
                    judge_seconds.entry(judge).or_default().push(seconds);
                }
            }
            // Every policy walks the same seeds: their chunks are read once, and each chunk's
            // extent once (from a server, a round trip saved each time).
            let source = retriever.policy_source(&prepared).map_err(retrieve)?;
            let mut extents = ExtentCache::default();
            let mut run = |options: &Options| -> Result<TestScore> {
                let ledger = retriever
                    .ledger_over(source.as_ref(), &prepared, options)
                    .map_err(retrieve)?;
                let context = extents.of(store, &ledger.context)?;
                Ok(score(&test.gold, &context, ledger.context_tokens))
            };
            let mut scores = BTreeMap::new();
            for ((policy, options), column) in
                named.iter().zip(&self.policies).zip(&mut policy_scores)
            {
                let result = run(options)?;
                scores.insert(policy.key.clone(), result);
                column.push(result);
            }
            let sweeps = self.sweep.iter().map(|(_, _, options)| options);
            let depths = self.depth_sweep.iter().map(|(_, options)| options);
            for (options, column) in sweeps
                .chain(depths)
                .zip(sweep_scores.iter_mut().chain(&mut depth_scores))
            {
                column.push(run(options)?);
            }
            records.push(TestRecord {
                id: test.id.to_owned(),
                kind: test.kind.map(str::to_owned),
                group: test.group,
                gold_chunks: test.gold.chunks().iter().map(|id| id.0).collect(),
                seeds: prepared.seeds.iter().map(|s| s.id.0).collect(),
                scores,
            });
            tick();
        }
        Ok(StageResult {
            first_stage: stage,
            reranker: reranker.cloned(),
            policies: self.policy_results(&policy_scores),
            comparisons: self.compare(&policy_scores),
            sweep: self.sweep_results(&sweep_scores),
            depth_sweep: self.depth_results(&depth_scores),
            tests: records,
            neighbours,
            seed_signals: crate::seeds::summarize(&seeds, &judge_seconds),
            seeds,
        })
    }

    /// Each named policy's means per group.
    fn policy_results(&self, scores: &[Vec<TestScore>]) -> Vec<PolicyResult> {
        self.options
            .policies
            .iter()
            .zip(scores)
            .map(|(policy, scores)| PolicyResult {
                key: policy.key.clone(),
                label: policy.label.clone(),
                policy: policy.policy,
                groups: aggregate(scores, &self.groups),
            })
            .collect()
    }

    /// Each λ × γ setting's means per group.
    fn sweep_results(&self, scores: &[Vec<TestScore>]) -> Vec<SweepPoint> {
        self.sweep
            .iter()
            .zip(scores)
            .map(|((lambda, gamma, _), scores)| SweepPoint {
                lambda: *lambda,
                gamma: *gamma,
                window: self.options.sweep_window,
                groups: aggregate(scores, &self.groups),
            })
            .collect()
    }

    /// Each evidence depth's means per group.
    fn depth_results(&self, scores: &[Vec<TestScore>]) -> Vec<DepthPoint> {
        self.depth_sweep
            .iter()
            .zip(scores)
            .map(|((depth, _), scores)| DepthPoint {
                depth: *depth,
                window: self.options.sweep_depth_window,
                groups: aggregate(scores, &self.groups),
            })
            .collect()
    }

    /// The paired bootstraps of the option's comparisons, per group and metric.
    fn compare(&self, policy_scores: &[Vec<TestScore>]) -> Vec<Comparison> {
        let column = |key: &str| {
            self.options
                .policies
                .iter()
                .position(|p| p.key == key)
                .map(|i| &policy_scores[i])
        };
        let mut comparisons = Vec::new();
        for (candidate, baseline) in &self.options.comparisons {
            let (Some(a), Some(b)) = (column(candidate), column(baseline)) else {
                continue;
            };
            for group in Group::ALL {
                let pick = |scores: &[TestScore], metric: Metric| -> Vec<f64> {
                    in_group(scores, &self.groups, group).map(metric).collect()
                };
                for (metric, value) in METRICS {
                    let (resamples, seed) = (self.options.resamples, self.options.seed);
                    if let Some(result) =
                        paired_bootstrap(&pick(a, value), &pick(b, value), resamples, seed)
                    {
                        comparisons.push(Comparison {
                            candidate: candidate.clone(),
                            baseline: baseline.clone(),
                            group,
                            metric: metric.to_owned(),
                            result,
                        });
                    }
                }
            }
        }
        comparisons
    }
}

/// One per-test value.
type Metric = fn(&TestScore) -> f64;

/// The per-test values the bootstrap compares: recall, unique chunks and context tokens.
const METRICS: [(&str, Metric); 3] = [
    ("recall", |s| s.recall),
    ("chunks", |s| s.chunks as f64),
    ("tokens", |s| s.tokens as f64),
];

fn extent(chunk: &StoredChunk) -> ChunkExtent {
    ChunkExtent {
        id: chunk.id,
        document: chunk.slot,
        chars: chunk.chars[0]..chunk.chars[1],
    }
}

/// Where chunks lie, each read from the store once, the missing ones of a call in one request.
#[derive(Default)]
struct ExtentCache(HashMap<ChunkId, ChunkExtent>);

impl ExtentCache {
    fn of(&mut self, store: &dyn ChunkStore, ids: &[ChunkId]) -> Result<Vec<ChunkExtent>> {
        let missing: Vec<ChunkId> = ids
            .iter()
            .filter(|id| !self.0.contains_key(id))
            .copied()
            .collect();
        if !missing.is_empty() {
            for extent in context_extents(store, &missing)? {
                self.0.insert(extent.id, extent);
            }
        }
        Ok(ids
            .iter()
            .filter_map(|id| self.0.get(id).cloned())
            .collect())
    }
}

/// Where the chunks `ids` lie, read from `store` in one request.
pub(crate) fn context_extents(store: &dyn ChunkStore, ids: &[ChunkId]) -> Result<Vec<ChunkExtent>> {
    Ok(store
        .stored_chunks(ids)
        .map_err(retrieve_error)?
        .iter()
        .map(extent)
        .collect())
}

/// An error of the store met outside any one test.
fn retrieve_error(source: scar_retrieve::RetrieveError) -> EvalError {
    EvalError::Store(Box::new(source))
}
