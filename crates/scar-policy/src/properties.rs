//! Invariants over random small corpora.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::sample::Index;
use scar_core::{ChunkId, SeamKind, norm};

use crate::{
    ChunkSource, Ledger, MemoryChunk, MemorySource, Options, Outcome, Policy, Rankings, Seed, Side,
    expand,
};

const DIMENSION: usize = 3;

/// A random corpus, query, seed list (duplicates included) and first-stage rankings.
#[derive(Debug, Clone)]
struct Case {
    source: MemorySource,
    query: Vec<f32>,
    seeds: Vec<Seed>,
    rankings: Rankings,
}

fn vector() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-1.0f32..1.0, DIMENSION).prop_filter("non-zero", |v| norm(v) > 1e-3)
}

fn case() -> impl Strategy<Value = Case> {
    let seam = prop::option::of(prop::sample::select(SeamKind::ALL.to_vec()));
    let chunk = (vector(), 1usize..40, prop::option::of(0u32..3), seam).prop_map(
        |(embedding, tokens, section, seam_after)| MemoryChunk {
            embedding,
            tokens,
            section,
            seam_after,
        },
    );
    let documents = prop::collection::vec(prop::collection::vec(chunk, 1..7), 1..4);
    let picks = prop::collection::vec((any::<Index>(), -1.0f32..1.0), 0..6);
    // A real dense ranking is never empty: it ranks every chunk to its depth.
    let orders = (
        prop::collection::vec(any::<Index>(), 1..20),
        prop::collection::vec(any::<Index>(), 0..20),
    );
    (documents, vector(), picks, orders).prop_map(|(documents, query, picks, orders)| {
        let mut source = MemorySource::new();
        for document in documents {
            source.add_document(document);
        }
        let seeds = picks
            .into_iter()
            .map(|(pick, score)| Seed {
                id: ChunkId(pick.index(source.len()) as u32),
                score,
                judged: None,
            })
            .collect();
        let order = |picks: Vec<Index>| {
            picks
                .into_iter()
                .map(|pick| ChunkId(pick.index(source.len()) as u32))
                .collect::<Vec<_>>()
        };
        let rankings = Rankings::new(order(orders.0), order(orders.1), 20, source.len());
        Case {
            source,
            query,
            seeds,
            rankings,
        }
    })
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::TopK),
        (0u32..4).prop_map(|window| Policy::StaticWindow { window }),
        (1u32..5).prop_map(|block| Policy::Parent { block }),
        (1u32..5).prop_map(|block| Policy::Section { block }),
        (1u32..4, 0u32..4).prop_map(|(depth, window)| Policy::Evidence { depth, window }),
        (0.0f32..1.0, 0.01f32..0.99, 0u32..4).prop_map(|(lambda, gamma, window)| Policy::Scar {
            lambda,
            gamma,
            window
        }),
    ]
}

fn run(case: &Case, policy: Policy, budget: Option<usize>) -> Ledger {
    let options = Options::new(policy).unwrap().with_budget(budget);
    expand(
        &case.source,
        &case.query,
        &case.seeds,
        &case.rankings,
        &options,
    )
    .unwrap()
}

fn accepted(ledger: &Ledger) -> BTreeSet<ChunkId> {
    ledger
        .neighbours()
        .filter(|n| n.outcome == Outcome::Accepted)
        .filter_map(|n| n.id)
        .collect()
}

fn context(ledger: &Ledger) -> BTreeSet<ChunkId> {
    ledger.context.iter().copied().collect()
}

fn ordered(a: f32, b: f32) -> (f32, f32) {
    (a.min(b), a.max(b))
}

proptest! {
    #[test]
    fn raising_gamma_never_accepts_more(
        case in case(), lambda in 0.0f32..1.0, gammas in (0.01f32..0.99, 0.01f32..0.99), window in 0u32..4,
    ) {
        let (low, high) = ordered(gammas.0, gammas.1);
        let loose = run(&case, Policy::Scar { lambda, gamma: low, window }, None);
        let strict = run(&case, Policy::Scar { lambda, gamma: high, window }, None);
        prop_assert!(accepted(&strict).is_subset(&accepted(&loose)));
        prop_assert!(context(&strict).is_subset(&context(&loose)));
    }

    #[test]
    fn raising_lambda_never_accepts_more(
        case in case(), lambdas in (0.0f32..1.0, 0.0f32..1.0), gamma in 0.01f32..0.99, window in 0u32..4,
    ) {
        let (low, high) = ordered(lambdas.0, lambdas.1);
        let loose = run(&case, Policy::Scar { lambda: low, gamma, window }, None);
        let strict = run(&case, Policy::Scar { lambda: high, gamma, window }, None);
        prop_assert!(accepted(&strict).is_subset(&accepted(&loose)));
    }

    #[test]
    fn a_shallower_evidence_depth_never_accepts_more(
        case in case(), depths in (1u32..6, 1u32..6), window in 0u32..4,
    ) {
        let (shallow, deep) = (depths.0.min(depths.1), depths.0.max(depths.1));
        let strict = run(&case, Policy::Evidence { depth: shallow, window }, None);
        let loose = run(&case, Policy::Evidence { depth: deep, window }, None);
        prop_assert!(accepted(&strict).is_subset(&accepted(&loose)));
        prop_assert!(context(&strict).is_subset(&context(&loose)));
    }

    #[test]
    fn walks_never_read_past_their_window(case in case(), policy in policy()) {
        let window = match policy {
            Policy::TopK => 0,
            Policy::StaticWindow { window } | Policy::Scar { window, .. } | Policy::Evidence { window, .. } => window,
            Policy::Parent { block } => block,
            Policy::Section { .. } => u32::MAX,
        };
        let watched = Watched { inner: &case.source, read: std::cell::RefCell::default() };
        let options = Options::new(policy).unwrap();
        let ledger = expand(&watched, &case.query, &case.seeds, &case.rankings, &options).unwrap();
        for record in ledger.neighbours() {
            prop_assert!(record.distance <= window);
        }
        // Every chunk read lies within `window` positions of a seed, in the seed's document.
        for id in watched.read.borrow().iter() {
            let at = case.source.position(*id);
            prop_assert!(case.seeds.iter().any(|seed| {
                let from = case.source.position(seed.id);
                from.document == at.document && from.ordinal.abs_diff(at.ordinal) <= window
            }), "read chunk {id:?} outside every seed's window");
        }
    }

    #[test]
    fn top_k_within_scar_within_static_window(
        case in case(), lambda in 0.0f32..1.0, gamma in 0.01f32..0.99, window in 0u32..4,
    ) {
        let scar = context(&run(&case, Policy::Scar { lambda, gamma, window }, None));
        let window = context(&run(&case, Policy::StaticWindow { window }, None));
        let top_k = context(&run(&case, Policy::TopK, None));
        prop_assert!(scar.is_subset(&window));
        prop_assert!(top_k.is_subset(&scar));
    }

    #[test]
    fn same_input_same_ledger(case in case(), policy in policy(), budget in prop::option::of(0usize..100)) {
        prop_assert_eq!(run(&case, policy, budget), run(&case, policy, budget));
    }

    #[test]
    fn context_is_the_seeds_plus_the_accepted(case in case(), policy in policy()) {
        let ledger = run(&case, policy, None);
        let seeds = ledger.seeds.iter().filter(|seed| seed.in_context).count();
        prop_assert_eq!(ledger.context.len(), seeds + ledger.count(Outcome::Accepted));
        let tokens: usize = ledger.context.iter().map(|&id| case.source.token_count(id)).sum();
        prop_assert_eq!(ledger.context_tokens, tokens);
    }

    #[test]
    fn a_budget_only_ever_removes(case in case(), policy in policy(), budget in 0usize..100) {
        let limited = run(&case, policy, Some(budget));
        prop_assert!(limited.context_tokens <= budget);
        prop_assert!(context(&limited).is_subset(&context(&run(&case, policy, None))));
        let seeds = limited.seeds.iter().filter(|seed| seed.in_context).count();
        prop_assert_eq!(limited.context.len(), seeds + limited.count(Outcome::Accepted));
    }
}

/// A source that remembers every chunk whose embedding or neighbour was asked for.
struct Watched<'a> {
    inner: &'a MemorySource,
    read: std::cell::RefCell<BTreeSet<ChunkId>>,
}

impl ChunkSource for Watched<'_> {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        self.read.borrow_mut().insert(id);
        self.inner.embedding(id)
    }
    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        self.read.borrow_mut().insert(id);
        self.inner.neighbour(id, side)
    }
    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        self.read.borrow_mut().insert(id);
        self.inner.continuity(id, side)
    }
    fn seam(&self, id: ChunkId, side: Side) -> Option<scar_core::SeamKind> {
        self.read.borrow_mut().insert(id);
        self.inner.seam(id, side)
    }
    fn position(&self, id: ChunkId) -> scar_core::Position {
        self.read.borrow_mut().insert(id);
        self.inner.position(id)
    }
    fn token_count(&self, id: ChunkId) -> usize {
        self.read.borrow_mut().insert(id);
        self.inner.token_count(id)
    }
    fn section(&self, id: ChunkId) -> Option<u32> {
        self.read.borrow_mut().insert(id);
        self.inner.section(id)
    }
}
