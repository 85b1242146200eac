//! Pooling and the query prefix, checked on a tiny random BERT built inside the test: the
//! embedder's output must equal a hand-written pooling of the raw model's hidden states.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use candle_transformers::models::bert::{BertModel, Config};
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles, Pooling, Precision};
use tokenizers::Tokenizer;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::template::TemplateProcessing;

use crate::common::cosine;

const WORDS: [&str; 15] = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "represent",
    "this",
    "query",
    "the",
    "cat",
    "sits",
    "on",
    "mat",
    "a",
    "dog",
    ":",
];

fn config() -> Config {
    Config {
        vocab_size: WORDS.len(),
        hidden_size: 16,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 32,
        max_position_embeddings: 64,
        ..Config::default()
    }
}

/// Writes a tiny BERT model folder; `mean` decides the declared pooling.
fn write_model(dir: &Path, mean: bool) {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    BertModel::load(vb, &config()).unwrap();
    varmap.save(dir.join("model.safetensors")).unwrap();

    let config_json = serde_json::json!({
        "vocab_size": WORDS.len(), "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "model_type": "bert"
    });
    std::fs::write(dir.join("config.json"), config_json.to_string()).unwrap();

    let vocab: [(String, u32); WORDS.len()] =
        std::array::from_fn(|i| (WORDS[i].to_owned(), i as u32));
    let model = WordPiece::builder()
        .vocab(vocab)
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tokenizer = Tokenizer::new(model);
    tokenizer
        .with_normalizer(Some(BertNormalizer::default()))
        .unwrap();
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_post_processor(Some(
        TemplateProcessing::builder()
            .try_single("[CLS] $A [SEP]")
            .unwrap()
            .special_tokens(vec![("[CLS]", 2), ("[SEP]", 3)])
            .build()
            .unwrap(),
    ));
    tokenizer.save(dir.join("tokenizer.json"), false).unwrap();

    if mean {
        std::fs::write(
            dir.join("modules.json"),
            r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
                {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        std::fs::write(
            dir.join("1_Pooling/config.json"),
            r#"{"pooling_mode_mean_tokens": true}"#,
        )
        .unwrap();
    }
}

/// The raw model's hidden states for one text, pooled by hand.
fn pooled_by_hand(dir: &Path, ids: &[u32], pooling: Pooling) -> Vec<f32> {
    let weights =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let vb = VarBuilder::from_tensors(weights, DType::F32, &Device::Cpu);
    let model = BertModel::load(vb, &config()).unwrap();
    let input = Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let hidden = model
        .forward(&input, &input.zeros_like().unwrap(), None)
        .unwrap();
    let rows: Vec<Vec<f32>> = hidden.squeeze(0).unwrap().to_vec2().unwrap();
    let pooled: Vec<f32> = match pooling {
        Pooling::Cls => rows[0].clone(),
        Pooling::Mean => (0..16)
            .map(|d| rows.iter().map(|r| r[d]).sum::<f32>() / rows.len() as f32)
            .collect(),
    };
    let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt();
    pooled.iter().map(|x| x / norm).collect()
}

fn load(dir: &Path, name: &str, query_prefix: Option<&str>) -> Embedder {
    let files = ModelFiles::from_dir(name, dir).unwrap();
    // f32: pooling is checked against candle's own f32 model, to 0.99999.
    let options = EmbedOptions {
        device: DeviceChoice::Cpu,
        precision: Precision::F32,
        query_prefix: query_prefix.map(str::to_owned),
        ..EmbedOptions::default()
    };
    Embedder::load(&files, &options).unwrap()
}

#[test]
fn cls_pooling_takes_the_first_token() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), false);
    let embedder = load(dir.path(), "tiny", None);
    assert_eq!(embedder.info().pooling, Pooling::Cls);
    // [CLS] the cat sits on the mat [SEP]
    let expected = pooled_by_hand(dir.path(), &[2, 7, 8, 9, 10, 7, 11, 3], Pooling::Cls);
    // A shorter text in the same batch forces padding, which CLS must ignore too.
    let ours = embedder
        .embed_passages(&["the cat sits on the mat", "a dog"], &mut |_| {})
        .unwrap();
    assert!(cosine(ours.row(0), &expected) > 0.99999);
    let mean = pooled_by_hand(dir.path(), &[2, 7, 8, 9, 10, 7, 11, 3], Pooling::Mean);
    assert!(
        cosine(ours.row(0), &mean) < 0.9999,
        "CLS and mean must differ for the test to mean anything"
    );
}

#[test]
fn mean_pooling_averages_real_tokens_only() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), true);
    let embedder = load(dir.path(), "tiny", None);
    assert_eq!(embedder.info().pooling, Pooling::Mean);
    let expected = pooled_by_hand(dir.path(), &[2, 12, 13, 3], Pooling::Mean);
    // Batched with a longer text, "a dog" is padded; padding must not enter the mean.
    let ours = embedder
        .embed_passages(&["the cat sits on the mat", "a dog"], &mut |_| {})
        .unwrap();
    assert!(cosine(ours.row(1), &expected) > 0.99999);
}

#[test]
fn queries_get_the_prefix_and_passages_do_not() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), false);
    let embedder = load(dir.path(), "tiny", Some("represent this query: "));
    assert_eq!(embedder.info().query_prefix, "represent this query: ");
    let query = embedder.embed_query("the cat").unwrap();
    let prefixed = embedder
        .embed_passages(&["represent this query: the cat"], &mut |_| {})
        .unwrap();
    let plain = embedder.embed_passages(&["the cat"], &mut |_| {}).unwrap();
    assert!(cosine(&query, prefixed.row(0)) > 0.99999);
    assert!(cosine(&query, plain.row(0)) < 0.9999);

    // Known BGE models carry the instruction without being told.
    let bge = load(dir.path(), "BAAI/bge-small-en-v1.5", None);
    assert!(
        bge.info()
            .query_prefix
            .starts_with("Represent this sentence")
    );
}
