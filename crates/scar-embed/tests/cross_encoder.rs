//! The cross-encoder against transformers' `AutoModelForSequenceClassification` and
//! sentence-transformers' `CrossEncoder` loading the same files, written by
//! `scripts/reference-rerank-scores.py`: the same logit for every pair, to 1e-4 in f32. Two models
//! with random weights: BERT of cross-encoder/ms-marco-MiniLM-L-6-v2's config, and XLM-RoBERTa
//! of BAAI/bge-reranker-base's (two of its layers, the test tokenizer's vocabulary).

use scar_embed::{CrossEncoder, DeviceChoice, EmbedOptions, ModelFiles, Precision};
use serde::Deserialize;

use crate::common::models_dir;

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    question: String,
    passage: String,
    score: f32,
}

/// The BERT cross-encoder's folder under `models/`.
const BERT: &str = "ms-marco-minilm-shape";
/// The XLM-RoBERTa one's.
const XLM_ROBERTA: &str = "bge-reranker-base-shape-2l";

fn fixture(model: &str) -> Fixture {
    let path = format!(
        "{}/tests/fixtures/{model}-reference.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cross_encoder(model: &str, precision: Precision) -> CrossEncoder {
    let files = ModelFiles::from_dir(model, models_dir().join(model))
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    CrossEncoder::load(&files, &EmbedOptions::new(DeviceChoice::Cpu, precision)).unwrap()
}

/// Every pair's score within `tolerance` of the reference's for `model`, scored a question at a
/// time.
fn assert_agrees(model: &str, precision: Precision, tolerance: f32) {
    let fixture = fixture(model);
    let model = cross_encoder(model, precision);
    let mut questions: Vec<&str> = fixture.cases.iter().map(|c| c.question.as_str()).collect();
    questions.dedup();
    for question in questions {
        let cases: Vec<&Case> = fixture
            .cases
            .iter()
            .filter(|c| c.question == question)
            .collect();
        let passages: Vec<&str> = cases.iter().map(|c| c.passage.as_str()).collect();
        let scores = model.score(question, &passages).unwrap();
        for (case, score) in cases.iter().zip(scores) {
            assert!(
                (score - case.score).abs() <= tolerance,
                "{:?} / {:?}: {score}, reference {}",
                case.question,
                case.passage.chars().take(40).collect::<String>(),
                case.score
            );
        }
    }
}

#[test]
fn scores_are_pytorchs_in_f32() {
    assert_agrees(BERT, Precision::F32, 1e-4);
}

#[test]
fn xlm_roberta_scores_are_pytorchs_in_f32() {
    assert_agrees(XLM_ROBERTA, Precision::F32, 1e-4);
}

#[test]
fn scores_in_the_default_precision_are_close_to_f32s() {
    // bf16 or int8 where the CPU has them.
    let fast = cross_encoder(BERT, Precision::Auto);
    let exact = cross_encoder(BERT, Precision::F32);
    let fixture = fixture(BERT);
    let question = fixture.cases[0].question.as_str();
    let passages: Vec<&str> = fixture
        .cases
        .iter()
        .filter(|c| c.question == question)
        .map(|c| c.passage.as_str())
        .collect();
    let fast = fast.score(question, &passages).unwrap();
    let exact = exact.score(question, &passages).unwrap();
    for (x, y) in fast.iter().zip(&exact) {
        assert!((x - y).abs() <= 0.02, "{fast:?} against {exact:?}");
    }
}

#[test]
fn a_model_with_two_labels_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = models_dir().join(BERT);
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    let config_path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["id2label"] = serde_json::json!({"0": "no", "1": "yes"});
    std::fs::write(&config_path, config.to_string()).unwrap();
    let files = ModelFiles::from_dir("two-labels", dir.path()).unwrap();
    let error = CrossEncoder::load(
        &files,
        &EmbedOptions::new(DeviceChoice::Cpu, Precision::F32),
    )
    .unwrap_err();
    assert!(error.to_string().contains("one label"), "{error}");
}
