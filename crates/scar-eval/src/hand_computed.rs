//! Every metric on a tiny hand-made corpus, with the arithmetic in the comments.
//!
//! Document 0 has chunks #0 [0, 100), #1 [100, 200), #2 [200, 300), #3 [300, 400);
//! document 1 has chunks #4 [0, 50), #5 [50, 150). Three tests:
//! - T1: gold [150, 250) in document 0 → overlaps #1 and #2 → boundary; 100 gold characters.
//! - T2: gold [310, 340) in document 0 → #3 only → atomic; 30 gold characters.
//! - T3: gold [50, 80) and [70, 100) in document 1 → merged [50, 100), 50 characters → #5
//!   only (it touches #4 at 50, which is not an overlap) → atomic.
//!
//! Two policies' contexts (chunks; tokens):
//! - "static": T1 {#0, #1, #2}; 90. T2 {#2, #3}; 60. T3 {#4}; 20.
//! - "scar":   T1 {#1}; 30.         T2 {#3, #4}; 50. T3 {#4, #5}; 50.

use std::collections::BTreeMap;

use scar_core::ChunkId;
use scar_policy::Policy;
use scar_retrieve::FirstStage;

use crate::metrics::{ChunkExtent, Gold, Group, GroupMetrics, TestScore, aggregate, score};
use crate::options::{NamedPolicy, SCAR_1, STATIC_1};
use crate::report::{
    Comparison, DataSummary, EvalReport, EvalSettings, PolicyResult, StageResult, SweepPoint,
};
use crate::stats::{cohens_d, paired_bootstrap};

fn chunks() -> Vec<ChunkExtent> {
    let chunk = |id, document, chars| ChunkExtent {
        id: ChunkId(id),
        document,
        chars,
    };
    vec![
        chunk(0, 0, 0..100),
        chunk(1, 0, 100..200),
        chunk(2, 0, 200..300),
        chunk(3, 0, 300..400),
        chunk(4, 1, 0..50),
        chunk(5, 1, 50..150),
    ]
}

fn golds() -> [Gold; 3] {
    let all = chunks();
    [
        Gold::new([(0, 150..250)], &all),
        Gold::new([(0, 310..340)], &all),
        Gold::new([(1, 50..80), (1, 70..100)], &all),
    ]
}

fn context(ids: &[u32]) -> Vec<ChunkExtent> {
    let all = chunks();
    ids.iter().map(|&id| all[id as usize].clone()).collect()
}

/// Per-test scores of "static" and "scar", and the tests' groups.
fn scores() -> (Vec<TestScore>, Vec<TestScore>, Vec<Group>) {
    let [t1, t2, t3] = golds();
    let fixed = vec![
        score(&t1, &context(&[0, 1, 2]), 90),
        score(&t2, &context(&[2, 3]), 60),
        score(&t3, &context(&[4]), 20),
    ];
    let scar = vec![
        score(&t1, &context(&[1]), 30),
        score(&t2, &context(&[3, 4]), 50),
        score(&t3, &context(&[4, 5]), 50),
    ];
    let groups = [t1, t2, t3].iter().map(|g| g.group().unwrap()).collect();
    (fixed, scar, groups)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn assert_metrics(m: &GroupMetrics, expected: [f64; 8]) {
    let got = [
        m.n_tests as f64,
        m.recall,
        m.full_recall,
        m.mean_chunks,
        m.chunk_efficiency,
        m.mean_tokens,
        m.span_precision,
        m.span_recall,
    ];
    assert!(
        got.iter().zip(expected).all(|(g, e)| close(*g, e)),
        "{:?}: got {got:?}, expected {expected:?}",
        m.group
    );
}

#[test]
fn gold_chunks_and_groups() {
    let [t1, t2, t3] = golds();
    assert_eq!(t1.chunks(), [ChunkId(1), ChunkId(2)]);
    assert_eq!(t1.group(), Some(Group::Boundary));
    assert_eq!(t1.chars(), 100);
    assert_eq!(t2.chunks(), [ChunkId(3)]);
    assert_eq!(t2.group(), Some(Group::Atomic));
    assert_eq!(t3.chunks(), [ChunkId(5)]);
    assert_eq!(t3.spans(), [(1, 50..100)]);
    assert_eq!(t3.chars(), 50);
    // A span between chunks (in text the chunker dropped) covers nothing: the test is unscored.
    let gap = Gold::new([(0, 400..420)], &chunks());
    assert_eq!(gap.group(), None);
}

#[test]
fn per_test_scores() {
    let (fixed, scar, _) = scores();
    let expect = |s: &TestScore, recall, chunks, tokens, precision, span_recall| {
        assert!(
            close(s.recall, recall)
                && s.chunks == chunks
                && s.tokens == tokens
                && close(s.span_precision, precision)
                && close(s.span_recall, span_recall),
            "{s:?}"
        );
    };
    // static T1: gold #1, #2 both in → 2/2. Context [0, 300): 300 characters, 100 of them gold
    // (150..250) → P = 1/3; all 100 gold characters in → R = 1.
    expect(&fixed[0], 1.0, 3, 90, 1.0 / 3.0, 1.0);
    // static T2: #3 in → 1. Context [200, 400): 200 characters, 30 gold → P = 0.15; R = 1.
    expect(&fixed[1], 1.0, 2, 60, 0.15, 1.0);
    // static T3: #5 missing → 0. Context doc 1 [0, 50) shares nothing with [50, 100) → 0, 0.
    expect(&fixed[2], 0.0, 1, 20, 0.0, 0.0);
    // scar T1: #1 of #1, #2 → 1/2. Context [100, 200): 100 characters, 50 gold (150..200) →
    // P = 0.5; 50 of 100 gold characters → R = 0.5.
    expect(&scar[0], 0.5, 1, 30, 0.5, 0.5);
    // scar T2: #3 in → 1. Context doc 0 [300, 400) + doc 1 [0, 50) = 150 characters, 30 gold →
    // P = 0.2 (characters of another document count as retrieved); R = 1.
    expect(&scar[1], 1.0, 2, 50, 0.2, 1.0);
    // scar T3: #5 in → 1. Context doc 1 [0, 150): 150 characters, 50 gold → P = 1/3; R = 1.
    expect(&scar[2], 1.0, 2, 50, 1.0 / 3.0, 1.0);
}

#[test]
fn group_means() {
    let (fixed, scar, groups) = scores();
    let fixed = aggregate(&fixed, &groups);
    let scar = aggregate(&scar, &groups);
    assert_eq!(
        fixed.iter().map(|m| m.group).collect::<Vec<_>>(),
        Group::ALL
    );
    // Columns: n, recall, full recall, chunks, efficiency = recall / chunks, tokens, span P, span R.
    // static, boundary = T1 alone.
    assert_metrics(
        &fixed[0],
        [1.0, 1.0, 1.0, 3.0, 1.0 / 3.0, 90.0, 1.0 / 3.0, 1.0],
    );
    // static, atomic = T2, T3: recall (1 + 0)/2; full 1 of 2; chunks (2 + 1)/2 = 1.5;
    // efficiency 0.5/1.5; tokens (60 + 20)/2; P (0.15 + 0)/2; R (1 + 0)/2.
    assert_metrics(&fixed[1], [2.0, 0.5, 0.5, 1.5, 1.0 / 3.0, 40.0, 0.075, 0.5]);
    // static, all: recall 2/3; full 2/3; chunks 6/3 = 2; efficiency (2/3)/2; tokens 170/3;
    // P (1/3 + 0.15 + 0)/3; R 2/3.
    assert_metrics(
        &fixed[2],
        [
            3.0,
            2.0 / 3.0,
            2.0 / 3.0,
            2.0,
            1.0 / 3.0,
            170.0 / 3.0,
            (1.0 / 3.0 + 0.15) / 3.0,
            2.0 / 3.0,
        ],
    );
    // scar, boundary = T1: recall 0.5, not full, 1 chunk, efficiency 0.5, 30 tokens, P 0.5, R 0.5.
    assert_metrics(&scar[0], [1.0, 0.5, 0.0, 1.0, 0.5, 30.0, 0.5, 0.5]);
    // scar, atomic: recall 1; full 1; chunks 2; efficiency 0.5; tokens 50; P (0.2 + 1/3)/2; R 1.
    assert_metrics(
        &scar[1],
        [
            2.0,
            1.0,
            1.0,
            2.0,
            0.5,
            50.0,
            f64::midpoint(0.2, 1.0 / 3.0),
            1.0,
        ],
    );
    // scar, all: recall 2.5/3 = 5/6; full 2/3; chunks 5/3; efficiency (5/6)/(5/3) = 0.5;
    // tokens 130/3; P (0.5 + 0.2 + 1/3)/3; R 5/6.
    assert_metrics(
        &scar[2],
        [
            3.0,
            5.0 / 6.0,
            2.0 / 3.0,
            5.0 / 3.0,
            0.5,
            130.0 / 3.0,
            (0.5 + 0.2 + 1.0 / 3.0) / 3.0,
            5.0 / 6.0,
        ],
    );
    // A group without tests is left out.
    assert_eq!(aggregate(&[], &[]).len(), 0);
}

#[test]
fn bootstrap_on_the_hand_made_scores() {
    let (fixed, scar, _) = scores();
    let recall = |s: &[TestScore]| s.iter().map(|s| s.recall).collect::<Vec<_>>();
    let result = paired_bootstrap(&recall(&scar), &recall(&fixed), 10_000, 1).unwrap();
    // Differences scar − static: −0.5, 0, +1 → mean 1/6; means 5/6 and 2/3; relative (1/6)/(2/3).
    assert!(close(result.mean_diff, 1.0 / 6.0) && close(result.mean_candidate, 5.0 / 6.0));
    assert!(close(result.mean_baseline, 2.0 / 3.0) && close(result.relative_diff.unwrap(), 0.25));
    // sd = √(((−2/3)² + (−1/6)² + (5/6)²)/2) = √(7/12) → d = (1/6)/√(7/12) = √(12/7)/6 ≈ 0.2182.
    assert!(close(
        result.cohens_d.unwrap(),
        (12.0f64 / 7.0).sqrt() / 6.0
    ));
    // The extreme resample means are −0.5 (three draws of −0.5) and +1 (three of +1), each with
    // probability 1/27 ≈ 3.7% > 2.5%: the interval is exactly [−0.5, 1].
    assert_eq!((result.ci_low, result.ci_high), (-0.5, 1.0));
    assert!(result.p_value > 0.3 && result.p_value <= 1.0, "{result:?}");
}

#[test]
fn bootstrap_known_answers() {
    const B: usize = 10_000;
    // Every difference −1: every resample mean is −1, the interval collapses onto it, no
    // resample reaches 0 → p = 2·(0 + 1)/(B + 1); the deviation is 0, so d is undefined.
    let equal = paired_bootstrap(&[2.0, 3.0, 4.0, 5.0], &[3.0, 4.0, 5.0, 6.0], B, 7).unwrap();
    assert_eq!(
        (equal.mean_diff, equal.ci_low, equal.ci_high),
        (-1.0, -1.0, -1.0)
    );
    assert!(close(equal.p_value, 2.0 / (B + 1) as f64));
    assert_eq!(equal.cohens_d, None);
    // Identical values: difference 0, p = 1, d undefined.
    let same = paired_bootstrap(&[0.5, 0.7], &[0.5, 0.7], B, 7).unwrap();
    assert_eq!(
        (same.mean_diff, same.ci_low, same.ci_high, same.p_value),
        (0.0, 0.0, 0.0, 1.0)
    );
    assert_eq!(same.cohens_d, None);
    // Differences 1, 2, 3: mean 2, sd 1 → d = 2; every resample mean is ≥ 1 → p at its floor;
    // means of 1 and of 3 each have probability 1/27 > 2.5% → interval [1, 3].
    let spread = paired_bootstrap(&[1.0, 2.0, 3.0], &[0.0, 0.0, 0.0], B, 7).unwrap();
    assert_eq!(
        (spread.mean_diff, spread.ci_low, spread.ci_high),
        (2.0, 1.0, 3.0)
    );
    assert!(close(spread.cohens_d.unwrap(), 2.0));
    assert!(close(spread.p_value, 2.0 / (B + 1) as f64));
    // One pair: no deviation to divide by.
    assert_eq!(cohens_d(&[0.3]), None);
    // Differences +1 and −1: mean 0 → p = 1; sd √2 → d = 0.
    assert_eq!(cohens_d(&[1.0, -1.0]), Some(0.0));
}

/// A report built from the hand-made scores, for the report and plot tests.
pub(crate) fn small_report() -> EvalReport {
    let (fixed, scar, groups) = scores();
    let policy = |key: &str, label: &str, policy, scores: &[TestScore]| PolicyResult {
        key: key.to_owned(),
        label: label.to_owned(),
        policy,
        groups: aggregate(scores, &groups),
    };
    let chunks = |s: &[TestScore]| s.iter().map(|s| s.chunks as f64).collect::<Vec<_>>();
    let comparisons = vec![Comparison {
        candidate: SCAR_1.to_owned(),
        baseline: STATIC_1.to_owned(),
        group: Group::All,
        metric: "chunks".to_owned(),
        result: paired_bootstrap(&chunks(&scar), &chunks(&fixed), 1000, 1).unwrap(),
    }];
    let stage = StageResult {
        first_stage: FirstStage::Dense,
        reranker: None,
        policies: vec![
            policy(
                STATIC_1,
                "static ±1",
                Policy::StaticWindow { window: 1 },
                &fixed,
            ),
            policy(SCAR_1, "SCAR ±1", Policy::scar(1), &scar),
        ],
        comparisons,
        sweep: vec![SweepPoint {
            lambda: 0.1,
            gamma: 0.8,
            window: 1,
            groups: aggregate(&scar, &groups),
        }],
        depth_sweep: vec![],
        tests: vec![],
        neighbours: vec![],
        seeds: vec![],
        seed_signals: None,
    };
    EvalReport {
        schema: crate::SCHEMA_VERSION.to_owned(),
        settings: EvalSettings {
            benchmark: "hand.json".into(),
            corpus: "corpus".into(),
            index: "index".into(),
            model: "hand".into(),
            dimension: 2,
            chunker: scar_index::ChunkerConfig::default(),
            k: 1,
            first_stages: vec![FirstStage::Dense],
            policies: vec![
                NamedPolicy::new(STATIC_1, "static ±1", Policy::StaticWindow { window: 1 }),
                NamedPolicy::new(SCAR_1, "SCAR ±1", Policy::scar(1)),
            ],
            resamples: 1000,
            seed: 1,
            scope: crate::Scope::Index,
            quick: false,
        },
        data: DataSummary {
            tests_in_file: 3,
            tests_chosen: 3,
            tests_scored: 3,
            boundary: 1,
            atomic: 2,
            kinds: BTreeMap::new(),
            documents: 2,
            index_documents: 2,
            index_chunks: 6,
            path_fallbacks: 0,
            path_fallback_example: None,
            problems: vec![],
        },
        stages: vec![stage],
    }
}

#[test]
fn markdown_shows_the_hand_computed_numbers() {
    let report = small_report();
    let markdown = report.to_markdown();
    // scar, boundary: recall 50.0%, full 0.0%, 1.00 chunk, efficiency 0.5000, 30 tokens, P 50.0%, R 50.0%.
    assert!(
        markdown.contains("| SCAR ±1 | 50.0% | 0.0% | 1.00 | 0.5000 | 30 | 50.0% | 50.0% |"),
        "{markdown}"
    );
    // static, atomic: 50.0%, 50.0%, 1.50, 0.3333, 40, 7.5%, 50.0%.
    assert!(
        markdown.contains("| static ±1 | 50.0% | 50.0% | 1.50 | 0.3333 | 40 | 7.5% | 50.0% |"),
        "{markdown}"
    );
    // Chunks scar − static over all tests: 5/3 − 2 = −1/3 (−16.7%).
    assert!(
        markdown
            .contains("| SCAR ±1 − static ±1 | all | chunks | 3 | 1.67 vs 2.00 | -0.33 (-16.7%) |"),
        "{markdown}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["schema"], "scar.eval/2");
    assert_eq!(
        json["stages"][0]["policies"][1]["groups"][0]["group"],
        "boundary"
    );
}
