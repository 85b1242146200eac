//! `all-MiniLM-L6-v2` against vectors from an independent implementation (`PyTorch`
//! sentence-transformers), written by `scripts/reference-embeddings.py`.

use serde::Deserialize;

use crate::common::{cosine, minilm};

#[derive(Deserialize)]
struct Fixture {
    max_seq_length: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    untruncated_tokens: usize,
    embedding: Vec<f32>,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm-reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn minilm_matches_sentence_transformers() {
    let fixture = fixture();
    assert!(fixture.cases.len() >= 8);
    let embedder = minilm();
    assert_eq!(embedder.info().max_tokens, fixture.max_seq_length);
    assert_eq!(
        embedder.text_token_limit(),
        fixture.max_seq_length - 2,
        "[CLS] and [SEP] take two"
    );
    assert_eq!(embedder.info().dimension, 384);
    let texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    let ours = embedder.embed_passages(&texts, &mut |_| {}).unwrap();
    for (i, case) in fixture.cases.iter().enumerate() {
        let similarity = cosine(ours.row(i), &case.embedding);
        assert!(similarity >= 0.9999, "{:?}: cosine {similarity}", case.text);
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
