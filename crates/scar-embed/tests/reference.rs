//! Our vectors against those of an independent implementation (`PyTorch`
//! sentence-transformers) loading the same files, written by `scripts/reference-embeddings.py`:
//! the real `all-MiniLM-L6-v2`, and models of BGE-large's and bge-m3's (XLM-RoBERTa) widths
//! with random weights. The
//! references are f32: f32 must agree to 0.9999, the default precision (bf16 on a CPU that has
//! it) to 0.999. multilingual-e5-small is checked against the encoder of the package its weights
//! come from (`scripts/reference-e5-embeddings.py`), in English, Hindi and Japanese.

use scar_embed::{Embedder, Precision};
use serde::Deserialize;

use crate::common::{
    bge_large_shape_2l, bge_m3_shape_2l, cosine, minilm, minilm_in, multilingual_e5_small,
};

#[derive(Deserialize)]
struct Fixture {
    max_seq_length: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    /// Embedded as a query, with the model's instruction.
    #[serde(default)]
    query: bool,
    untruncated_tokens: usize,
    embedding: Vec<f32>,
}

fn read_fixture(name: &str) -> Fixture {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fixture() -> Fixture {
    read_fixture("minilm-reference.json")
}

/// Every case agrees with the reference to `min_cosine`, queries and passages alike.
fn assert_agrees(embedder: &Embedder, fixture: &Fixture, min_cosine: f32) {
    let (queries, passages): (Vec<&Case>, Vec<&Case>) =
        fixture.cases.iter().partition(|case| case.query);
    let texts: Vec<&str> = passages.iter().map(|c| c.text.as_str()).collect();
    let ours = embedder.embed_passages(&texts, &mut |_| {}).unwrap();
    for (i, case) in passages.iter().enumerate() {
        let similarity = cosine(ours.row(i), &case.embedding);
        assert!(
            similarity >= min_cosine,
            "passage {:?}: cosine {similarity}",
            case.text
        );
    }
    for case in queries {
        let similarity = cosine(&embedder.embed_query(&case.text).unwrap(), &case.embedding);
        assert!(
            similarity >= min_cosine,
            "query {:?}: cosine {similarity}",
            case.text
        );
    }
}

#[test]
fn bge_large_shape_matches_sentence_transformers() {
    let fixture = read_fixture("bge-large-shape-2l-reference.json");
    let embedder = bge_large_shape_2l(Precision::F32);
    assert_eq!(embedder.info().dimension, 1024);
    assert_eq!(embedder.info().max_tokens, fixture.max_seq_length);
    assert!(
        embedder
            .info()
            .query_prefix
            .starts_with("Represent this sentence"),
        "the instruction comes from the model's own prompts"
    );
    let queries = fixture.cases.iter().filter(|c| c.query).count();
    assert!(queries >= 8 && fixture.cases.len() - queries >= 8);
    assert_random_weights_test_something(&fixture);
    assert_agrees(&embedder, &fixture, 0.9999);
}

/// A fixture of a model with random weights holds a text longer than the limit (attention
/// over every position), and texts whose vectors differ by far more than the tolerance: random
/// weights could make every vector alike, and then agreement would prove little.
fn assert_random_weights_test_something(fixture: &Fixture) {
    assert!(
        fixture
            .cases
            .iter()
            .any(|c| c.untruncated_tokens > fixture.max_seq_length),
        "a text longer than the limit checks attention over all 512 positions"
    );
    let first = &fixture.cases[0].embedding;
    assert!(
        fixture.cases[1..]
            .iter()
            .all(|c| cosine(first, &c.embedding) < 0.99),
        "reference vectors too alike to test anything"
    );
}

/// XLM-RoBERTa's encoder as an embedder (bge-m3's dense head): positions counted from the
/// padding id, one token type, CLS pooling; a text past the limit fills every position.
#[test]
fn an_xlm_roberta_embedder_matches_sentence_transformers() {
    let fixture = read_fixture("bge-m3-shape-2l-reference.json");
    let embedder = bge_m3_shape_2l(Precision::F32);
    let info = embedder.info();
    assert_eq!(
        (info.dimension, info.max_tokens, info.pooling),
        (1024, fixture.max_seq_length, scar_embed::Pooling::Cls)
    );
    assert_random_weights_test_something(&fixture);
    assert_agrees(&embedder, &fixture, 0.9999);
}

/// The package computes with int8 activations against its four-bit weights, so agreement is
/// to 0.999 rather than f32's 0.9999; the token counts, instructions included, must be its own.
#[test]
fn multilingual_e5_small_matches_its_packages_encoder_in_three_scripts() {
    let fixture = read_fixture("multilingual-e5-small-reference.json");
    let embedder = multilingual_e5_small(Precision::F32);
    let info = embedder.info();
    assert_eq!(
        (info.dimension, info.max_tokens, info.pooling),
        (384, fixture.max_seq_length, scar_embed::Pooling::Mean)
    );
    assert_eq!(
        (info.query_prefix.as_str(), info.passage_prefix.as_str()),
        ("query: ", "passage: ")
    );
    assert_eq!(
        embedder.text_token_limit(),
        512 - 2 - 2,
        "<s>, </s>, and \"passage: \" take four"
    );
    for script in ['\u{0905}'..='\u{0939}', '\u{3041}'..='\u{30FF}'] {
        assert!(
            fixture
                .cases
                .iter()
                .any(|c| c.text.chars().any(|ch| script.contains(&ch))),
            "the fixture holds Hindi and Japanese"
        );
    }
    assert_agrees(&embedder, &fixture, 0.999);
    let passages: Vec<&Case> = fixture.cases.iter().filter(|c| !c.query).collect();
    let texts: Vec<&str> = passages.iter().map(|c| c.text.as_str()).collect();
    let ours = embedder.embed_passages(&texts, &mut |_| {}).unwrap();
    for (i, case) in passages.iter().enumerate() {
        assert_eq!(
            ours.token_counts[i], case.untruncated_tokens,
            "{:?}",
            case.text
        );
        if case.text.trim().is_empty() {
            continue; // The instruction's trailing space then stands alone, as a token.
        }
        assert_eq!(
            embedder.count_tokens_from_embedded(ours.token_counts[i]),
            Some(embedder.count_tokens(&case.text).unwrap()),
            "the instruction's tokens are not the text's: {:?}",
            case.text
        );
    }
}

#[test]
fn the_default_precision_stays_close_to_the_f32_references() {
    let large = read_fixture("bge-large-shape-2l-reference.json");
    assert_agrees(&bge_large_shape_2l(Precision::Auto), &large, 0.999);
    assert_agrees(&minilm(), &fixture(), 0.999);
    let e5 = read_fixture("multilingual-e5-small-reference.json");
    assert_agrees(&multilingual_e5_small(Precision::Auto), &e5, 0.999);
}

#[test]
fn minilm_matches_sentence_transformers() {
    let fixture = fixture();
    assert!(fixture.cases.len() >= 8);
    let embedder = minilm_in(Precision::F32);
    assert_eq!(embedder.info().max_tokens, fixture.max_seq_length);
    assert_eq!(
        embedder.text_token_limit(),
        fixture.max_seq_length - 2,
        "[CLS] and [SEP] take two"
    );
    assert_eq!(embedder.info().dimension, 384);
    assert_agrees(&embedder, &fixture, 0.9999);
    let texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    let ours = embedder.embed_passages(&texts, &mut |_| {}).unwrap();
    for (i, case) in fixture.cases.iter().enumerate() {
        let length: f32 = ours.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((length - 1.0).abs() < 1e-4);
        assert_eq!(
            ours.token_counts[i],
            case.untruncated_tokens.min(fixture.max_seq_length)
        );
    }
    let expected_truncated = fixture
        .cases
        .iter()
        .filter(|c| c.untruncated_tokens > fixture.max_seq_length)
        .count();
    assert_eq!(ours.truncated, expected_truncated);
    assert!(
        expected_truncated >= 1,
        "the fixture must hold a text longer than the limit"
    );
}

#[test]
fn batching_does_not_change_the_vectors() {
    let fixture = fixture();
    let embedder = minilm();
    let texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    let together = embedder.embed_passages(&texts, &mut |_| {}).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let alone = embedder.embed_passages(&[text], &mut |_| {}).unwrap();
        assert!(cosine(alone.row(0), together.row(i)) > 0.99999, "{text:?}");
    }
}

#[test]
fn progress_reports_every_text() {
    let embedder = minilm();
    let texts = vec!["one short text"; 50];
    let mut last = None;
    embedder
        .embed_passages(&texts, &mut |p| last = Some(p))
        .unwrap();
    let last = last.unwrap();
    assert_eq!((last.done, last.total), (50, 50));
    assert_eq!(
        last.tokens,
        50 * embedder
            .embed_passages(&texts[..1], &mut |_| {})
            .unwrap()
            .token_counts[0]
    );
}
