//! The expansion: decide every seed's neighbours, fit the budget, order the context.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use scar_core::{ChunkId, dot, norm};
use serde::{Deserialize, Serialize};

use crate::{
    ChunkSource, Ledger, NeighbourRecord, Options, Outcome, ParentScope, Policy, PolicyError,
    Rankings, Result, SeedRecord, Side, VectorProblem,
};

/// A first-stage hit; its rank is its place in the seed list, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Seed {
    /// The retrieved chunk.
    pub id: ChunkId,
    /// Its first-stage score, recorded but not used by the policies.
    pub score: f32,
    /// What the reranker that chose it from the first stage's candidates said, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judgement>,
}

/// A reranker's verdict on a seed it chose.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The reranker's score, higher is better, on its own scale (a cross-encoder's logit, a
    /// probability, a cosine).
    pub score: f32,
    /// The seed's rank in the first stage's list, from 1, before the reranker reordered it.
    pub first_stage_rank: usize,
}

const SIDES: [Side; 2] = [Side::Previous, Side::Next];

/// Runs the policy in `options` over `seeds` (best first) for the query embedding `query`, whose
/// first-stage `rankings` the evidence walk reads (and every ledger shows).
///
/// See the crate documentation for the rules, the walk and the budget.
pub fn expand<S: ChunkSource + ?Sized>(
    source: &S,
    query: &[f32],
    seeds: &[Seed],
    rankings: &Rankings,
    options: &Options,
) -> Result<Ledger> {
    if matches!(options.policy(), Policy::Evidence { .. })
        && rankings.is_empty()
        && !seeds.is_empty()
    {
        return Err(PolicyError::NoRankings);
    }
    let mut seen = HashSet::new();
    let distinct: Vec<(usize, &Seed)> = seeds
        .iter()
        .enumerate()
        .filter(|(_, seed)| seen.insert(seed.id))
        .collect();
    // Every seed counts as in the context from the start, so no walk accepts one as a neighbour.
    let mut expander = Expander {
        scorer: Scorer::new(source, query)?,
        rankings,
        seed_count: seeds.len(),
        in_context: seen,
    };
    let mut records = distinct
        .into_iter()
        .map(|(index, &seed)| expander.seed(index + 1, seed, options.policy()))
        .collect::<Result<Vec<_>>>()?;
    let chosen = match options.budget() {
        None => expander.in_context,
        Some(budget) => fit_budget(source, &mut records, budget),
    };
    let mut context: Vec<ChunkId> = chosen.into_iter().collect();
    context.sort_unstable_by_key(|&id| (source.position(id), id));
    let context_tokens = context.iter().map(|&id| source.token_count(id)).sum();
    Ok(Ledger {
        policy: options.policy(),
        budget: options.budget(),
        seeds: records,
        context,
        context_tokens,
        lexical_weight: rankings.lexical_weight(),
    })
}

/// Query cosines, computed once per chunk with the query's norm computed once.
struct Scorer<'a, S: ?Sized> {
    source: &'a S,
    query: &'a [f32],
    query_norm: f32,
    cache: HashMap<ChunkId, f32>,
}

impl<'a, S: ChunkSource + ?Sized> Scorer<'a, S> {
    fn new(source: &'a S, query: &'a [f32]) -> Result<Self> {
        let query_norm = norm(query);
        if let Some(problem) = VectorProblem::of_norm(query_norm) {
            return Err(PolicyError::Query(problem));
        }
        Ok(Self {
            source,
            query,
            query_norm,
            cache: HashMap::new(),
        })
    }

    fn query_cos(&mut self, id: ChunkId) -> Result<f32> {
        if let Some(&cos) = self.cache.get(&id) {
            return Ok(cos);
        }
        let embedding = self.source.embedding(id);
        if embedding.len() != self.query.len() {
            return Err(PolicyError::Dimensions {
                id,
                expected: self.query.len(),
                found: embedding.len(),
            });
        }
        let chunk_norm = norm(embedding);
        let cos = dot(self.query, embedding) / self.query_norm / chunk_norm;
        // A finite, non-zero norm can still give a non-finite cosine when the norms underflow.
        let problem = VectorProblem::of_norm(chunk_norm)
            .or((!cos.is_finite()).then_some(VectorProblem::NonFinite));
        if let Some(problem) = problem {
            return Err(PolicyError::Chunk { id, problem });
        }
        self.cache.insert(id, cos);
        Ok(cos)
    }

    /// b = 1 − cos(from, its neighbour on `side`), from the stored continuity.
    fn penalty(&self, from: ChunkId, side: Side) -> Result<f32> {
        let value = self.source.continuity(from, side);
        if !value.is_finite() {
            return Err(PolicyError::Continuity {
                id: from,
                side,
                value,
            });
        }
        // Rounding can push a cosine just past ±1; a negative penalty would reward discontinuity.
        Ok(1.0 - value.clamp(-1.0, 1.0))
    }
}

/// The rule that decides each step of a walk.
#[derive(Clone, Copy)]
enum Gate {
    /// SCAR: S = cos(q, n) − λ·b against the seed's bar.
    Scar { lambda: f32, bar: f32 },
    /// The evidence walk: the fused rank score against the score of a chunk ranked at the depth
    /// in both lists.
    Evidence { bar: f32 },
}

/// How one seed's walk runs on one side.
#[derive(Clone, Copy)]
struct Walk {
    /// The most steps to take.
    steps: u32,
    /// For a section: stop, silently, at the first chunk outside it.
    section: Option<u32>,
    /// The rule, or `None` to accept every chunk reached.
    gate: Option<Gate>,
}

impl Walk {
    /// Up to `steps` steps, accepting every chunk reached.
    fn up_to(steps: u32) -> Self {
        Self {
            steps,
            section: None,
            gate: None,
        }
    }

    /// Up to `steps` steps, each decided by `gate`.
    fn gated(steps: u32, gate: Gate) -> Self {
        Self {
            gate: Some(gate),
            ..Self::up_to(steps)
        }
    }
}

struct Expander<'a, S: ?Sized> {
    scorer: Scorer<'a, S>,
    rankings: &'a Rankings,
    /// How many seeds were given, duplicates included: the evidence depth's unit.
    seed_count: usize,
    /// Seeds plus the neighbours accepted so far.
    in_context: HashSet<ChunkId>,
}

impl<S: ChunkSource + ?Sized> Expander<'_, S> {
    fn seed(&mut self, rank: usize, seed: Seed, policy: Policy) -> Result<SeedRecord> {
        let query_cos = self.scorer.query_cos(seed.id)?;
        let mut record = SeedRecord {
            id: seed.id,
            rank,
            score: seed.score,
            judged: seed.judged,
            query_cos,
            bar: None,
            bar_rank: None,
            scope: None,
            in_context: true,
            neighbours: Vec::new(),
        };
        let plans = match policy {
            Policy::TopK => [Walk::up_to(0); 2],
            Policy::StaticWindow { window } => [Walk::up_to(window); 2],
            Policy::Scar {
                lambda,
                gamma,
                window,
            } => {
                // The relative bar is meant for a positively relevant seed. Clamping at 0 keeps
                // "a higher γ never accepts more" true for a seed that points away from the
                // query: its neighbours then need S > 0.
                let bar = gamma * query_cos.max(0.0);
                record.bar = Some(bar);
                [Walk::gated(window, Gate::Scar { lambda, bar }); 2]
            }
            Policy::Evidence { depth, window } => {
                let rank = self.rankings.evidence_rank(depth, self.seed_count);
                let bar = self.rankings.fused_ranks(Some(rank), Some(rank));
                record.bar = Some(bar);
                record.bar_rank = Some(rank);
                [Walk::gated(window, Gate::Evidence { bar }); 2]
            }
            Policy::Parent { block } => {
                let scope = self.block_scope(seed.id, block);
                record.scope = Some(scope);
                self.scope_walks(seed.id, scope)
            }
            Policy::Section { block } => {
                let scope = self.scorer.source.section(seed.id).map_or_else(
                    || self.block_scope(seed.id, block),
                    |section| ParentScope::Section { section },
                );
                record.scope = Some(scope);
                self.scope_walks(seed.id, scope)
            }
        };
        for (side, plan) in SIDES.into_iter().zip(plans) {
            self.walk(seed.id, side, plan, &mut record.neighbours)?;
        }
        Ok(record)
    }

    /// The aligned block of `block` chunks that holds `id`.
    fn block_scope(&self, id: ChunkId, block: u32) -> ParentScope {
        let start = self.scorer.source.position(id).ordinal / block * block;
        ParentScope::Block {
            start,
            end: start.saturating_add(block),
        }
    }

    /// The two walks that cover `scope` around the seed `id`.
    fn scope_walks(&self, id: ChunkId, scope: ParentScope) -> [Walk; 2] {
        match scope {
            ParentScope::Section { section } => {
                [Walk {
                    section: Some(section),
                    ..Walk::up_to(u32::MAX)
                }; 2]
            }
            ParentScope::Block { start, end } => {
                let ordinal = self.scorer.source.position(id).ordinal;
                [Walk::up_to(ordinal - start), Walk::up_to(end - 1 - ordinal)]
            }
        }
    }

    /// Walks outwards from `seed`, recording each step in `out`.
    fn walk(
        &mut self,
        seed: ChunkId,
        side: Side,
        plan: Walk,
        out: &mut Vec<NeighbourRecord>,
    ) -> Result<()> {
        let source = self.scorer.source;
        let mut previous = seed;
        let mut stopped = false;
        for distance in 1..=plan.steps {
            let Some(id) = source.neighbour(previous, side) else {
                out.push(NeighbourRecord::edge(side, distance));
                break;
            };
            if plan
                .section
                .is_some_and(|section| source.section(id) != Some(section))
            {
                break;
            }
            let query_cos = self.scorer.query_cos(id)?;
            let penalty = self.scorer.penalty(previous, side)?;
            let (dense_rank, lexical_rank) =
                (self.rankings.dense_rank(id), self.rankings.lexical_rank(id));
            let (score, bar) = match plan.gate {
                None => (None, None),
                Some(Gate::Scar { lambda, bar }) => (Some(query_cos - lambda * penalty), Some(bar)),
                Some(Gate::Evidence { bar }) => (
                    Some(self.rankings.fused_ranks(dense_rank, lexical_rank)),
                    Some(bar),
                ),
            };
            // A chunk already in the context passes: the walk goes on through it.
            let outcome = if self.in_context.contains(&id) {
                Outcome::AlreadyInContext
            } else if stopped {
                Outcome::NotReached
            } else if score.zip(bar).is_none_or(|(score, bar)| score > bar) {
                self.in_context.insert(id);
                Outcome::Accepted
            } else {
                stopped = true;
                Outcome::Rejected
            };
            out.push(NeighbourRecord {
                side,
                distance,
                id: Some(id),
                seam: source.seam(previous, side),
                query_cos: Some(query_cos),
                penalty: Some(penalty),
                dense_rank,
                lexical_rank,
                score,
                bar,
                margin: score.zip(bar).map(|(score, bar)| score - bar),
                outcome,
            });
            previous = id;
        }
        Ok(())
    }
}

/// An accepted neighbour waiting for room in the budget.
struct Candidate {
    id: ChunkId,
    /// The chunk it continues: the seed or the previous step on its side.
    after: ChunkId,
    seed: usize,
    margin: f32,
    distance: u32,
    side: Side,
}

/// Admits the seeds, then the accepted neighbours, into `budget` tokens; returns the context.
fn fit_budget<S: ChunkSource + ?Sized>(
    source: &S,
    seeds: &mut [SeedRecord],
    budget: usize,
) -> HashSet<ChunkId> {
    let mut candidates = Vec::new();
    for (seed_index, seed) in seeds.iter().enumerate() {
        let mut after = seed.id;
        for record in &seed.neighbours {
            if record.distance == 1 {
                after = seed.id;
            }
            let Some(id) = record.id else { continue };
            if record.outcome == Outcome::Accepted {
                candidates.push(Candidate {
                    id,
                    after,
                    seed: seed_index,
                    margin: record.margin.unwrap_or(0.0),
                    distance: record.distance,
                    side: record.side,
                });
            }
            after = id;
        }
    }
    // Best first: SCAR's margin (absent, hence equal, for the baselines), then rank, distance, side.
    candidates.sort_by(|a, b| {
        b.margin
            .total_cmp(&a.margin)
            .then_with(|| (a.seed, a.distance, a.side).cmp(&(b.seed, b.distance, b.side)))
    });
    let mut waiting: HashMap<ChunkId, Vec<usize>> = HashMap::new();
    for (priority, candidate) in candidates.iter().enumerate() {
        waiting.entry(candidate.after).or_default().push(priority);
    }

    let mut left = budget;
    let mut context = HashSet::new();
    let mut admit = |id: ChunkId| {
        let tokens = source.token_count(id);
        let fits = tokens <= left;
        if fits {
            left -= tokens;
            context.insert(id);
        }
        fits
    };
    // A candidate becomes eligible once the chunk it continues is in; the best eligible goes next.
    let mut eligible = BinaryHeap::new();
    for seed in seeds.iter_mut() {
        seed.in_context = admit(seed.id);
        if seed.in_context {
            eligible.extend(waiting.remove(&seed.id).into_iter().flatten().map(Reverse));
        }
    }
    while let Some(Reverse(priority)) = eligible.pop() {
        let id = candidates[priority].id;
        if admit(id) {
            eligible.extend(waiting.remove(&id).into_iter().flatten().map(Reverse));
        }
    }

    // What the policy would have in the context but the budget kept out, however it was reached.
    for record in seeds.iter_mut().flat_map(|seed| &mut seed.neighbours) {
        let wanted = matches!(
            record.outcome,
            Outcome::Accepted | Outcome::AlreadyInContext
        );
        if wanted && record.id.is_some_and(|id| !context.contains(&id)) {
            record.outcome = Outcome::OverBudget;
        }
    }
    context
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryChunk, MemorySource};
    use scar_core::SeamKind;

    const TOLERANCE: f32 = 1e-5;

    fn close(actual: Option<f32>, expected: f32) -> bool {
        actual.is_some_and(|actual| (actual - expected).abs() < TOLERANCE)
    }

    /// One source from documents of (embedding, tokens) chunks.
    fn source(documents: &[&[(&[f32], usize)]]) -> (MemorySource, Vec<Vec<ChunkId>>) {
        let mut source = MemorySource::new();
        let ids = documents
            .iter()
            .map(|chunks| {
                source.add_document(
                    chunks
                        .iter()
                        .map(|&(embedding, tokens)| MemoryChunk::new(embedding.to_vec(), tokens)),
                )
            })
            .collect();
        (source, ids)
    }

    fn seeds(ids: &[ChunkId]) -> Vec<Seed> {
        ids.iter()
            .map(|&id| Seed {
                id,
                score: 1.0,
                judged: None,
            })
            .collect()
    }

    fn run(source: &MemorySource, query: &[f32], seed_ids: &[ChunkId], policy: Policy) -> Ledger {
        ranked(source, query, seed_ids, &Rankings::default(), policy)
    }

    fn ranked(
        source: &MemorySource,
        query: &[f32],
        seed_ids: &[ChunkId],
        rankings: &Rankings,
        policy: Policy,
    ) -> Ledger {
        expand(
            source,
            query,
            &seeds(seed_ids),
            rankings,
            &Options::new(policy).unwrap(),
        )
        .unwrap()
    }

    fn scar(lambda: f32, window: u32) -> Policy {
        Policy::Scar {
            lambda,
            gamma: 0.8,
            window,
        }
    }

    fn outcomes(record: &SeedRecord) -> Vec<(Side, u32, Outcome)> {
        record
            .neighbours
            .iter()
            .map(|n| (n.side, n.distance, n.outcome))
            .collect()
    }

    const Q: &[f32] = &[1.0, 0.0];

    #[test]
    fn lambda_flips_a_decision() {
        // q = (1,0,0), seed c = (0.8,0.6,0), next n = (0.7,−0.4,√0.35), all unit.
        // cos(q,c) = 0.8, bar = 0.8·0.8 = 0.64; cos(q,n) = 0.7;
        // cos(c,n) = 0.56 − 0.24 = 0.32, so b = 0.68.
        // λ = 0:   S = 0.7,               margin = +0.06  → accepted.
        // λ = 0.1: S = 0.7 − 0.068 = 0.632, margin = −0.008 → rejected.
        let n = [0.7, -0.4, 0.35f32.sqrt()];
        let (source, ids) = source(&[&[(&[0.8, 0.6, 0.0], 10), (&n, 10)]]);
        let query = [1.0, 0.0, 0.0];
        let without = run(&source, &query, &ids[0][..1], scar(0.0, 1));
        let with = run(&source, &query, &ids[0][..1], scar(0.1, 1));

        assert!(close(Some(with.seeds[0].query_cos), 0.8));
        assert!(close(with.seeds[0].bar, 0.64));
        // Record 0 is the document edge before the seed; record 1 is n.
        let (kept, dropped) = (
            &without.seeds[0].neighbours[1],
            &with.seeds[0].neighbours[1],
        );
        assert!(close(kept.query_cos, 0.7) && close(kept.penalty, 0.68));
        assert!(close(kept.score, 0.7) && close(kept.margin, 0.06));
        assert_eq!(kept.outcome, Outcome::Accepted);
        assert!(close(dropped.score, 0.632) && close(dropped.margin, -0.008));
        assert_eq!(dropped.outcome, Outcome::Rejected);
        assert_eq!(with.context, [ids[0][0]]);
    }

    #[test]
    fn relative_bar_accepts_for_a_weak_seed_what_an_absolute_one_would_not() {
        // q = (1,0,0), weak seed c = (0.6,0.8,0), next n = (0.5,0.8,√0.11).
        // cos(q,c) = 0.6, bar = 0.8·0.6 = 0.48; cos(q,n) = 0.5;
        // cos(c,n) = 0.3 + 0.64 = 0.94, b = 0.06; S = 0.5 − 0.006 = 0.494 > 0.48 → accepted,
        // although a fixed threshold of 0.5 would reject it.
        let n = [0.5, 0.8, 0.11f32.sqrt()];
        let (source, ids) = source(&[&[(&[0.6, 0.8, 0.0], 10), (&n, 10)]]);
        let ledger = run(&source, &[1.0, 0.0, 0.0], &ids[0][..1], Policy::scar(1));
        let record = &ledger.seeds[0].neighbours[1];
        assert!(close(ledger.seeds[0].bar, 0.48));
        assert!(close(record.score, 0.494) && close(record.margin, 0.014));
        assert!(record.score.unwrap() < 0.5);
        assert_eq!(record.outcome, Outcome::Accepted);
    }

    #[test]
    fn a_seed_against_the_query_needs_a_positive_score() {
        // q = (1,0); document [p, c, n] with p = (−0.28,0.96), c = (−0.6,0.8), n = (0.6,0.8).
        // cos(q,c) = −0.6, so bar = 0.8·max(−0.6, 0) = 0.
        // p: cos(q,p) = −0.28, cos(c,p) = 0.168 + 0.768 = 0.936, b = 0.064,
        //    S = −0.28 − 0.0064 = −0.2864 ≤ 0 → rejected (an unclamped bar, −0.48, would accept).
        // n: cos(q,n) = 0.6, cos(c,n) = −0.36 + 0.64 = 0.28, b = 0.72,
        //    S = 0.6 − 0.072 = 0.528 > 0 → accepted.
        let (source, ids) =
            source(&[&[(&[-0.28, 0.96], 10), (&[-0.6, 0.8], 10), (&[0.6, 0.8], 10)]]);
        let ledger = run(&source, Q, &ids[0][1..2], Policy::scar(1));
        let seed = &ledger.seeds[0];
        assert!(close(Some(seed.query_cos), -0.6));
        assert_eq!(seed.bar, Some(0.0));
        assert!(close(seed.neighbours[0].score, -0.2864));
        assert!(close(seed.neighbours[1].score, 0.528));
        assert_eq!(
            outcomes(seed),
            [
                (Side::Previous, 1, Outcome::Rejected),
                (Side::Next, 1, Outcome::Accepted)
            ]
        );
    }

    #[test]
    fn walk_of_two_stops_at_the_first_rejection() {
        // q = (1,0); document [p2, p1, c, n1, n2], seed c = (1,0): cos(q,c) = 1, bar = 0.8.
        // p1 = (0.96,0.28): b = 1 − 0.96 = 0.04, S = 0.96 − 0.004 = 0.956 → accepted.
        // p2 = (0.936,0.352): penalty against p1, cos(p1,p2) = 0.89856 + 0.09856 = 0.99712,
        //    b = 0.00288, S = 0.936 − 0.000288 = 0.935712 → accepted.
        // n1 = (0.6,−0.8): b = 0.4, S = 0.6 − 0.04 = 0.56 → rejected, margin −0.24.
        // n2 = (1,0): cos(n1,n2) = 0.6, b = 0.4, S = 1 − 0.04 = 0.96 would pass, but the walk
        //    stopped at n1 → not reached (still scored).
        let (source, ids) = source(&[&[
            (&[0.936, 0.352], 10),
            (&[0.96, 0.28], 10),
            (Q, 10),
            (&[0.6, -0.8], 10),
            (Q, 10),
        ]]);
        let doc = &ids[0];
        let ledger = run(&source, Q, &[doc[2]], Policy::scar(2));
        let seed = &ledger.seeds[0];
        assert_eq!(
            outcomes(seed),
            [
                (Side::Previous, 1, Outcome::Accepted),
                (Side::Previous, 2, Outcome::Accepted),
                (Side::Next, 1, Outcome::Rejected),
                (Side::Next, 2, Outcome::NotReached),
            ]
        );
        let [p1, p2, n1, n2] = &seed.neighbours[..] else {
            panic!("four records")
        };
        assert!(close(p1.score, 0.956));
        assert!(close(p2.penalty, 0.00288) && close(p2.score, 0.935_712));
        assert!(close(n1.margin, -0.24));
        assert!(close(n2.score, 0.96) && close(n2.margin, 0.16));
        assert_eq!(ledger.context, [doc[0], doc[1], doc[2]]);
        assert_eq!(
            (
                ledger.count(Outcome::Accepted),
                ledger.count(Outcome::Rejected)
            ),
            (2, 1)
        );
    }

    #[test]
    fn adjacent_seeds_and_earlier_acceptances_are_already_in_context() {
        // Identical chunks: b = 0, S = 1 > 0.8 everywhere, so only the bookkeeping matters.
        let (source, ids) = source(&[&[(Q, 10); 4]]);
        let doc = &ids[0];
        let adjacent = run(&source, Q, &[doc[1], doc[2]], Policy::scar(1));
        assert_eq!(
            outcomes(&adjacent.seeds[0]),
            [
                (Side::Previous, 1, Outcome::Accepted),
                (Side::Next, 1, Outcome::AlreadyInContext)
            ]
        );
        assert_eq!(
            outcomes(&adjacent.seeds[1]),
            [
                (Side::Previous, 1, Outcome::AlreadyInContext),
                (Side::Next, 1, Outcome::Accepted)
            ]
        );
        assert!(adjacent.seeds[0].neighbours[1].score.is_some());

        // Seed 0 accepts chunk 1; for seed 2 it is already in, and the ±2 walk goes through it.
        let earlier = run(&source, Q, &[doc[0], doc[2]], Policy::scar(2));
        assert_eq!(
            outcomes(&earlier.seeds[1]),
            [
                (Side::Previous, 1, Outcome::AlreadyInContext),
                (Side::Previous, 2, Outcome::AlreadyInContext),
                (Side::Next, 1, Outcome::Accepted),
                (Side::Next, 2, Outcome::DocumentEdge),
            ]
        );
        assert_eq!(earlier.context, *doc);
    }

    #[test]
    fn document_edges_end_a_side_and_never_cross_documents() {
        let (source, ids) = source(&[&[(Q, 10); 2], &[(Q, 10); 2]]);
        let ledger = run(
            &source,
            Q,
            &[ids[0][0], ids[1][1]],
            Policy::StaticWindow { window: 2 },
        );
        assert_eq!(
            outcomes(&ledger.seeds[0]),
            [
                (Side::Previous, 1, Outcome::DocumentEdge),
                (Side::Next, 1, Outcome::Accepted),
                (Side::Next, 2, Outcome::DocumentEdge),
            ]
        );
        assert_eq!(ledger.seeds[0].neighbours[0].id, None);
        assert_eq!(ledger.seeds[1].neighbours[0].id, Some(ids[1][0]));
        assert_eq!(ledger.context.len(), 4);
    }

    #[test]
    fn static_window_accepts_everything_within_reach_and_records_cosines() {
        // The neighbour points away from the query, yet a static window takes it.
        let (source, ids) = source(&[&[(Q, 10), (&[-1.0, 0.0], 10)]]);
        let ledger = run(&source, Q, &ids[0][..1], Policy::StaticWindow { window: 1 });
        let record = &ledger.seeds[0].neighbours[1];
        assert_eq!(record.outcome, Outcome::Accepted);
        assert!(close(record.query_cos, -1.0) && close(record.penalty, 2.0));
        assert_eq!(
            (record.score, record.bar, record.margin),
            (None, None, None)
        );
        assert_eq!(
            (ledger.seeds[0].bar, ledger.seeds[0].bar_rank),
            (None, None)
        );
    }

    #[test]
    fn window_zero_and_top_k_keep_the_seeds_alone() {
        let (source, ids) = source(&[&[(Q, 10); 3]]);
        for policy in [
            Policy::TopK,
            Policy::scar(0),
            Policy::StaticWindow { window: 0 },
        ] {
            let ledger = run(&source, Q, &ids[0][1..2], policy);
            assert!(ledger.seeds[0].neighbours.is_empty(), "{policy:?}");
            assert_eq!(ledger.context, [ids[0][1]]);
            assert_eq!(ledger.context_tokens, 10);
        }
    }

    #[test]
    fn section_expands_to_the_contiguous_heading_section() {
        let mut source = MemorySource::new();
        let sections = [0, 0, 1, 1, 1, 2];
        let ids = source.add_document(
            sections.map(|section| MemoryChunk::new(Q.to_vec(), 5).in_section(section)),
        );
        let ledger = run(&source, Q, &[ids[3], ids[0]], Policy::Section { block: 4 });
        assert_eq!(
            ledger.seeds[0].scope,
            Some(ParentScope::Section { section: 1 })
        );
        assert_eq!(
            outcomes(&ledger.seeds[0]),
            [
                (Side::Previous, 1, Outcome::Accepted),
                (Side::Next, 1, Outcome::Accepted)
            ]
        );
        assert_eq!(
            outcomes(&ledger.seeds[1]),
            [
                (Side::Previous, 1, Outcome::DocumentEdge),
                (Side::Next, 1, Outcome::Accepted)
            ]
        );
        assert_eq!(ledger.context, ids[..5]);
        assert_eq!(ledger.context_tokens, 25);
    }

    #[test]
    fn parent_and_section_without_sections_use_aligned_blocks() {
        let (source, ids) = source(&[&[(Q, 10); 7]]);
        let doc = &ids[0];
        for policy in [Policy::Parent { block: 3 }, Policy::Section { block: 3 }] {
            let ledger = run(&source, Q, &[doc[4], doc[6]], policy);
            assert_eq!(
                ledger.seeds[0].scope,
                Some(ParentScope::Block { start: 3, end: 6 })
            );
            assert_eq!(
                ledger.seeds[1].scope,
                Some(ParentScope::Block { start: 6, end: 9 })
            );
            assert_eq!(
                outcomes(&ledger.seeds[0]),
                [
                    (Side::Previous, 1, Outcome::Accepted),
                    (Side::Next, 1, Outcome::Accepted)
                ]
            );
            assert_eq!(
                outcomes(&ledger.seeds[1]),
                [(Side::Next, 1, Outcome::DocumentEdge)]
            );
            assert_eq!(ledger.context, doc[3..]);
        }
    }

    #[test]
    fn parent_takes_its_block_even_inside_a_long_section() {
        // One section of six chunks: the section policy takes all six, the parent its block of 2.
        let mut source = MemorySource::new();
        let ids =
            source.add_document((0..6).map(|_| MemoryChunk::new(Q.to_vec(), 5).in_section(0)));
        let parent = run(&source, Q, &[ids[3]], Policy::Parent { block: 2 });
        assert_eq!(
            parent.seeds[0].scope,
            Some(ParentScope::Block { start: 2, end: 4 })
        );
        assert_eq!(parent.context, ids[2..4]);
        let section = run(&source, Q, &[ids[3]], Policy::Section { block: 2 });
        assert_eq!(section.context, ids);
    }

    /// Rankings from lists of positions in `doc`.
    fn rankings(doc: &[ChunkId], dense: &[usize], lexical: &[usize]) -> Rankings {
        let ids = |list: &[usize]| list.iter().map(|&i| doc[i]).collect::<Vec<_>>();
        Rankings::new(ids(dense), ids(lexical), 100, 1_000)
    }

    #[test]
    fn evidence_accepts_a_neighbour_ranked_within_the_depth() {
        // Document [p, c, n], seed c, depth 2 with one seed: the bar is a chunk ranked 2 in both
        // lists, 2/62 = 0.032258. n is ranked 2 (dense) and 1 (BM25): 1/62 + 1/61 = 0.032522,
        // margin +0.000264 → accepted. p is in neither list: score 0 → rejected.
        let (source, ids) = source(&[&[(Q, 10); 3]]);
        let doc = &ids[0];
        let lists = rankings(doc, &[1, 2], &[2, 1]);
        let ledger = ranked(
            &source,
            Q,
            &[doc[1]],
            &lists,
            Policy::Evidence {
                depth: 2,
                window: 1,
            },
        );
        let seed = &ledger.seeds[0];
        assert!(close(seed.bar, 2.0 / 62.0));
        assert_eq!(seed.bar_rank, Some(2));
        let [p, n] = &seed.neighbours[..] else {
            panic!("two records")
        };
        assert_eq!(
            (p.outcome, n.outcome),
            (Outcome::Rejected, Outcome::Accepted)
        );
        assert_eq!((n.dense_rank, n.lexical_rank), (Some(2), Some(1)));
        assert!(close(n.score, 1.0 / 62.0 + 1.0 / 61.0));
        assert!(close(n.margin, 1.0 / 62.0 + 1.0 / 61.0 - 2.0 / 62.0));
        assert_eq!(
            (p.dense_rank, p.lexical_rank, p.score),
            (None, None, Some(0.0))
        );
        assert!(close(p.margin, -2.0 / 62.0));
        // Depth 1 puts the bar at a chunk ranked 1 in both (2/61): n no longer passes.
        let shallow = ranked(
            &source,
            Q,
            &[doc[1]],
            &lists,
            Policy::Evidence {
                depth: 1,
                window: 1,
            },
        );
        assert_eq!(shallow.seeds[0].neighbours[1].outcome, Outcome::Rejected);
        assert_eq!(shallow.context, [doc[1]]);
    }

    #[test]
    fn evidence_depth_counts_every_seed_given() {
        // Two seeds at depth 1: the bar is a chunk ranked 2 in both lists.
        let (source, ids) = source(&[&[(Q, 10); 3], &[(Q, 10)]]);
        let doc = &ids[0];
        let lists = Rankings::new([doc[0], doc[2]], [doc[2], ids[1][0]], 100, 1_000);
        let ledger = ranked(
            &source,
            Q,
            &[doc[0], ids[1][0]],
            &lists,
            Policy::Evidence {
                depth: 1,
                window: 2,
            },
        );
        assert!(close(ledger.seeds[0].bar, 2.0 / 62.0));
        assert_eq!(ledger.seeds[0].bar_rank, Some(2));
        // doc[1] is unranked, so the walk from doc[0] stops there and doc[2] is not reached.
        assert_eq!(
            outcomes(&ledger.seeds[0]),
            [
                (Side::Previous, 1, Outcome::DocumentEdge),
                (Side::Next, 1, Outcome::Rejected),
                (Side::Next, 2, Outcome::NotReached),
            ]
        );
        assert!(close(
            ledger.seeds[0].neighbours[2].score,
            1.0 / 62.0 + 1.0 / 61.0
        ));
    }

    #[test]
    fn every_ledger_shows_ranks_and_seams_and_the_evidence_walk_needs_rankings() {
        let mut source = MemorySource::new();
        let ids = source.add_document([
            MemoryChunk::new(Q.to_vec(), 1).with_seam_after(SeamKind::MidSentence),
            MemoryChunk::new(Q.to_vec(), 1),
        ]);
        let lists = Rankings::new([ids[1]], [], 10, 1_000);
        let ledger = ranked(
            &source,
            Q,
            &ids[..1],
            &lists,
            Policy::StaticWindow { window: 1 },
        );
        let next = &ledger.seeds[0].neighbours[1];
        assert_eq!((next.dense_rank, next.lexical_rank), (Some(1), None));
        assert_eq!(next.seam, Some(SeamKind::MidSentence));
        assert_eq!(next.score, None);
        let options = Options::new(Policy::evidence(1)).unwrap();
        assert_eq!(
            expand(
                &source,
                Q,
                &seeds(&ids[..1]),
                &Rankings::default(),
                &options
            ),
            Err(PolicyError::NoRankings)
        );
    }

    #[test]
    fn budget_admits_seeds_first_then_neighbours_by_margin() {
        // q = (1,0); document [p, c, n], seed c = (1,0): bar 0.8.
        // p = (0.96,0.28): S = 0.956, margin 0.156.  n = (1,0): S = 1, margin 0.2.
        // Budget 25: seed c (10), then n (10, higher margin); p (10) no longer fits.
        // A seed in a second document (100 tokens) does not fit at all.
        let (source, ids) = source(&[&[(&[0.96, 0.28], 10), (Q, 10), (Q, 10)], &[(Q, 100)]]);
        let options = Options::new(Policy::scar(1)).unwrap().with_budget(Some(25));
        let ledger = expand(
            &source,
            Q,
            &seeds(&[ids[0][1], ids[1][0]]),
            &Rankings::default(),
            &options,
        )
        .unwrap();
        assert_eq!(
            outcomes(&ledger.seeds[0]),
            [
                (Side::Previous, 1, Outcome::OverBudget),
                (Side::Next, 1, Outcome::Accepted)
            ]
        );
        assert!(ledger.seeds[0].in_context);
        assert!(!ledger.seeds[1].in_context);
        assert_eq!(ledger.context, [ids[0][1], ids[0][2]]);
        assert_eq!(ledger.context_tokens, 20);
        assert_eq!(ledger.budget, Some(25));
    }

    #[test]
    fn budget_admits_a_step_only_after_the_one_it_continues() {
        // Seed c = (1,0); n1 = (0.96,0.28), S = 0.956; n2 = (1,0), b = 0.04, S = 0.996.
        // n2 has the higher margin and would fit, but n1 (50 tokens) does not, so neither goes in.
        let (source, ids) = source(&[&[(Q, 10), (&[0.96, 0.28], 50), (Q, 5)]]);
        let options = Options::new(Policy::scar(2)).unwrap().with_budget(Some(20));
        let ledger = expand(
            &source,
            Q,
            &seeds(&ids[0][..1]),
            &Rankings::default(),
            &options,
        )
        .unwrap();
        let [_, n1, n2] = &ledger.seeds[0].neighbours[..] else {
            panic!("three records")
        };
        assert!(n2.margin > n1.margin);
        assert_eq!(
            (n1.outcome, n2.outcome),
            (Outcome::OverBudget, Outcome::OverBudget)
        );
        assert_eq!(ledger.context, [ids[0][0]]);
    }

    #[test]
    fn neighbours_beyond_a_seed_left_out_by_the_budget_stay_out() {
        // Seeds 0 and 1 (rank 2, 100 tokens, left out); seed 0's ±2 walk passes through chunk 1.
        let (source, ids) = source(&[&[(Q, 10), (Q, 100), (Q, 10)]]);
        let options = Options::new(Policy::StaticWindow { window: 2 })
            .unwrap()
            .with_budget(Some(50));
        let ledger = expand(
            &source,
            Q,
            &seeds(&ids[0][..2]),
            &Rankings::default(),
            &options,
        )
        .unwrap();
        assert_eq!(
            outcomes(&ledger.seeds[0])[1..],
            [
                (Side::Next, 1, Outcome::OverBudget),
                (Side::Next, 2, Outcome::OverBudget)
            ]
        );
        assert_eq!(ledger.context, [ids[0][0]]);
    }

    #[test]
    fn context_is_in_document_order_and_duplicates_keep_their_first_rank() {
        let (source, ids) = source(&[&[(Q, 1); 3], &[(Q, 2); 2]]);
        let ledger = run(
            &source,
            Q,
            &[ids[1][1], ids[0][2], ids[1][1], ids[0][0]],
            Policy::TopK,
        );
        let ranks: Vec<_> = ledger
            .seeds
            .iter()
            .map(|seed| (seed.id, seed.rank))
            .collect();
        assert_eq!(ranks, [(ids[1][1], 1), (ids[0][2], 2), (ids[0][0], 4)]);
        assert_eq!(ledger.context, [ids[0][0], ids[0][2], ids[1][1]]);
        assert_eq!(ledger.context_tokens, 4);
        assert!(ledger.contains(ids[0][2]) && !ledger.contains(ids[0][1]));
    }

    #[test]
    fn no_seeds_give_an_empty_ledger() {
        let (source, _) = source(&[&[(Q, 1)]]);
        let ledger = run(&source, Q, &[], Policy::scar(2));
        assert!(ledger.seeds.is_empty() && ledger.context.is_empty());
        assert_eq!(ledger.context_tokens, 0);
    }

    #[test]
    fn output_is_deterministic_and_survives_json() {
        let (source, ids) = source(&[&[(&[0.6, 0.8], 3), (Q, 4), (&[0.8, -0.6], 5)], &[(Q, 6)]]);
        let seed_ids = [ids[0][1], ids[1][0]];
        let first = run(&source, Q, &seed_ids, Policy::scar(2));
        assert_eq!(first, run(&source, Q, &seed_ids, Policy::scar(2)));
        let json = serde_json::to_string(&first).unwrap();
        assert!(json.contains(r#""outcome":"document_edge""#));
        assert_eq!(serde_json::from_str::<Ledger>(&json).unwrap(), first);
    }

    #[test]
    fn unusable_vectors_are_errors_naming_the_culprit() {
        let (source, ids) = source(&[
            &[(Q, 1), (&[0.0, 0.0], 1), (&[f32::NAN, 1.0], 1)],
            &[(&[1.0], 1)],
        ]);
        let doc = &ids[0];
        let options = Options::new(Policy::scar(1)).unwrap();
        let attempt = |query: &[f32], seed: ChunkId| {
            expand(
                &source,
                query,
                &seeds(&[seed]),
                &Rankings::default(),
                &options,
            )
        };
        assert_eq!(
            attempt(&[0.0, 0.0], doc[0]),
            Err(PolicyError::Query(VectorProblem::ZeroNorm))
        );
        assert_eq!(
            attempt(&[f32::INFINITY, 0.0], doc[0]),
            Err(PolicyError::Query(VectorProblem::NonFinite))
        );
        // Seed 0's next neighbour has zero norm; seed 2 itself holds a NaN.
        assert_eq!(
            attempt(Q, doc[0]),
            Err(PolicyError::Chunk {
                id: doc[1],
                problem: VectorProblem::ZeroNorm
            })
        );
        assert_eq!(
            attempt(Q, doc[2]),
            Err(PolicyError::Chunk {
                id: doc[2],
                problem: VectorProblem::NonFinite
            })
        );
        assert_eq!(
            attempt(Q, ids[1][0]),
            Err(PolicyError::Dimensions {
                id: ids[1][0],
                expected: 2,
                found: 1
            })
        );
    }

    /// A source whose stored continuities are corrupt.
    struct CorruptContinuity(MemorySource);

    impl ChunkSource for CorruptContinuity {
        fn embedding(&self, id: ChunkId) -> &[f32] {
            self.0.embedding(id)
        }
        fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
            self.0.neighbour(id, side)
        }
        fn continuity(&self, _: ChunkId, _: Side) -> f32 {
            f32::NAN
        }
        fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
            self.0.seam(id, side)
        }
        fn position(&self, id: ChunkId) -> scar_core::Position {
            self.0.position(id)
        }
        fn token_count(&self, id: ChunkId) -> usize {
            self.0.token_count(id)
        }
        fn section(&self, id: ChunkId) -> Option<u32> {
            self.0.section(id)
        }
    }

    #[test]
    fn a_non_finite_continuity_is_an_error() {
        let (source, ids) = source(&[&[(Q, 1), (Q, 1)]]);
        let result = expand(
            &CorruptContinuity(source),
            Q,
            &seeds(&ids[0][..1]),
            &Rankings::default(),
            &Options::new(Policy::scar(1)).unwrap(),
        );
        assert!(matches!(
            result,
            Err(PolicyError::Continuity { id, side: Side::Next, value }) if id == ids[0][0] && value.is_nan()
        ));
    }
}
