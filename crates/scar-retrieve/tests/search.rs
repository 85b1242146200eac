//! Searches of the example index: each report carries static ±1's context size from the same
//! seeds, in the numbers of static ±1's own report, and the place of every chunk its ledger
//! names, in the words its context chunks use.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::OnceLock;

use scar_index::Index;
use scar_policy::{Options, Policy};
use scar_retrieve::{BASELINE, ContextSize, FirstStage, Prepared, Retriever};
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
