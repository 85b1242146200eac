//! Invariants over random small corpora.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::sample::Index;
use scar_core::{ChunkId, norm};

use crate::{
    ChunkSource, Ledger, MemoryChunk, MemorySource, Options, Outcome, Policy, Seed, expand,
};

const DIMENSION: usize = 3;

/// A random corpus, query and seed list (duplicates included).
#[derive(Debug, Clone)]
struct Case {
    source: MemorySource,
    query: Vec<f32>,
    seeds: Vec<Seed>,
}

fn vector() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-1.0f32..1.0, DIMENSION).prop_filter("non-zero", |v| norm(v) > 1e-3)
}

fn case() -> impl Strategy<Value = Case> {
    let chunk = (vector(), 1usize..40, prop::option::of(0u32..3)).prop_map(
        |(embedding, tokens, section)| MemoryChunk {
            embedding,
            tokens,
            section,
        },
    );
    let documents = prop::collection::vec(prop::collection::vec(chunk, 1..7), 1..4);
    let picks = prop::collection::vec((any::<Index>(), -1.0f32..1.0), 0..6);
    (documents, vector(), picks).prop_map(|(documents, query, picks)| {
        let mut source = MemorySource::new();
        for document in documents {
            source.add_document(document);
        }
        let seeds = picks
            .into_iter()
            .map(|(pick, score)| Seed {
                id: ChunkId(pick.index(source.len()) as u32),
                score,
            })
            .collect();
        Case {
            source,
            query,
            seeds,
        }
    })
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::TopK),
        (0u32..4).prop_map(|window| Policy::StaticWindow { window }),
        (1u32..5).prop_map(|block| Policy::Parent { block }),
        (0.0f32..1.0, 0.01f32..0.99, 0u32..4).prop_map(|(lambda, gamma, window)| Policy::Scar {
            lambda,
            gamma,
            window
        }),
    ]
}

fn run(case: &Case, policy: Policy, budget: Option<usize>) -> Ledger {
    let options = Options::new(policy).unwrap().with_budget(budget);
    expand(&case.source, &case.query, &case.seeds, &options).unwrap()
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
