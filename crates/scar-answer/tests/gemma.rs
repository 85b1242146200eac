//! Gemma 3 270M (`models/gemma-3-270m`, the base model in `Q4_K_M`), checked against llama.cpp
//! (llama-cpp-python) reading the same file: the same tokens for a prompt, and the same greedy
//! continuation.

use std::ops::ControlFlow;
use std::path::PathBuf;

use scar_answer::{ChatTemplate, GenerationParams, Generator, LoadOptions, LocalModel};
use scar_embed::DeviceChoice;

use crate::common::{greedy_snippet, llama_cpp, prompt};

fn gemma_path() -> PathBuf {
    scar_test_support::models_dir().join("gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
}

fn gemma() -> LocalModel {
    load(&gemma_path())
}

/// How many of the GGUF file's tensors are in `format`.
fn tensors_in(path: &std::path::Path, format: candle_core::quantized::GgmlDType) -> usize {
    let mut file = std::fs::File::open(path).unwrap();
    let content = candle_core::quantized::gguf_file::Content::read(&mut file).unwrap();
    content
        .tensor_infos
        .values()
        .filter(|info| info.ggml_dtype == format)
        .count()
}

/// A model on the CPU, as `scar ask` loads it.
fn load(path: &std::path::Path) -> LocalModel {
    let options = LoadOptions {
        device: DeviceChoice::Cpu,
        requantize: true,
    };
    LocalModel::load(path, &options).unwrap()
}

#[test]
fn gemma3_takes_its_turn_format_from_the_vocabulary() {
    // The base model's file carries no chat template, only the turn tokens.
    let model = gemma();
    assert_eq!(model.template(), ChatTemplate::Gemma);
    assert_eq!(model.context_length(), 32_768);
    // llama.cpp's Q4_K_M keeps some tensors in Q5_0, which our own products read as stored and
    // candle has no fast kernel for: on a CPU without ours they become Q8_0 (exactly: see
    // `q8_0_holds_q5_0_weights_exactly`), and only they.
    let q5_0 = tensors_in(&gemma_path(), candle_core::quantized::GgmlDType::Q5_0);
    assert!(q5_0 > 0);
    let converted = if scar_answer::decoding_instructions().is_some() {
        0
    } else {
        q5_0
    };
    assert_eq!(model.requantized_tensors(), converted);
}

#[test]
fn gemma3_tokenizes_as_llama_cpp_does() {
    let text = "<start_of_turn>user\nKayaks cost €12.50 in 2024 — naïve café, <b>tags</b>\n\n\
                \ttabs and  spaces, 東京 and émoji 🚣.<end_of_turn>\n<start_of_turn>model\n";
    let Some(expected) = llama_cpp(
        &gemma_path(),
        "print(model.tokenize(text.encode(), add_bos=False, special=True))",
        text,
    ) else {
        return;
    };
    let model = gemma();
    let ours = model.tokenizer().encode(text, false).unwrap();
    assert_eq!(format!("{:?}", ours.get_ids()), expected);
    let decoded = model.tokenizer().decode(ours.get_ids(), false).unwrap();
    assert_eq!(decoded, text);
}

#[test]
fn gemma3_continues_greedily_as_llama_cpp_does() {
    continues_as_llama_cpp(
        &gemma_path(),
        gemma(),
        "What is the capital of France? Name the city.",
    );
}

/// `model`, read from `path`, continues `question` greedily for 16 tokens as llama.cpp does on
/// the same file (nothing is checked where llama.cpp is missing and allowed to be).
fn continues_as_llama_cpp(path: &std::path::Path, mut model: LocalModel, question: &str) {
    let question = prompt(question);
    let rendered = ChatTemplate::Gemma.render(&question.system, &question.user);
    let tokens = 16;
    let Some(expected) = llama_cpp(path, &greedy_snippet(tokens), &rendered) else {
        return;
    };
    let params = GenerationParams {
        max_tokens: tokens,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    let generation = model
        .generate(&question, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    assert!(!expected.is_empty());
    assert_eq!(generation.text.trim(), expected);
}

/// Gemma 3 270M in another format: the `Q4_K_M` file's quantized matrices whose rows are whole
/// blocks of `format` dequantized and quantized again to it, the rest and the metadata as they
/// are but the file type (llama.cpp's number, `file_type`). No file in `Q8_0` (what Ollama
/// pulls for small models), `Q5_K_M` or `Q5_1` is among the test models.
fn gemma3_file_in(
    dir: &std::path::Path,
    format: candle_core::quantized::GgmlDType,
    file_type: u32,
) -> PathBuf {
    use candle_core::quantized::gguf_file::{self, Content, Value};
    use candle_core::quantized::{GgmlDType, QTensor};

    let mut file = std::fs::File::open(gemma_path()).unwrap();
    let content = Content::read(&mut file).unwrap();
    let device = candle_core::Device::Cpu;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let tensors: Vec<(&str, QTensor)> = names
        .into_iter()
        .map(|name| {
            let tensor = content.tensor(&mut file, name, &device).unwrap();
            let columns = *tensor.shape().dims().last().unwrap();
            let tensor = match tensor.dtype() {
                GgmlDType::F32 | GgmlDType::F16 => tensor,
                _ if !columns.is_multiple_of(format.block_size()) => tensor,
                _ => QTensor::quantize(&tensor.dequantize(&device).unwrap(), format).unwrap(),
            };
            (name.as_str(), tensor)
        })
        .collect();
    let file_type = Value::U32(file_type);
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(key, value)| {
            let value = if key == "general.file_type" {
                &file_type
            } else {
                value
            };
            (key.as_str(), value)
        })
        .collect();
    let path = dir.join(format!("gemma-3-270m-{format:?}.gguf"));
    let mut out = std::fs::File::create(&path).unwrap();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
    path
}

/// Gemma 3 270M in `format` (llama.cpp's `file_type` for it), loaded with none of its tensors
/// converted, continues greedily as llama.cpp does on the same file.
fn gemma3_in_format_continues_as_llama_cpp(
    format: candle_core::quantized::GgmlDType,
    file_type: u32,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = gemma3_file_in(dir.path(), format, file_type);
    assert!(tensors_in(&path, format) > 0);
    // Where our products run, `scar ask`'s loading converts none of these formats. Elsewhere it
    // would convert `Q5_0` and `Q5_1` to `Q8_0` (candle's kernels for them are slow), so there
    // the file is loaded as stored, for candle's kernels to read.
    let options = LoadOptions {
        device: DeviceChoice::Cpu,
        requantize: scar_answer::decoding_instructions().is_some(),
    };
    let model = LocalModel::load(&path, &options).unwrap();
    assert_eq!(model.requantized_tensors(), 0);
    continues_as_llama_cpp(
        &path,
        model,
        "What is the capital of France? Name the city.",
    );
}

/// A `Q8_0` file: every matrix through our `Q8_0` products where the CPU has them.
#[test]
fn gemma3_in_q8_0_continues_greedily_as_llama_cpp_does() {
    gemma3_in_format_continues_as_llama_cpp(candle_core::quantized::GgmlDType::Q8_0, 7);
}

/// `Q5_K` in the matrices whose rows are whole super-blocks (the feed-forward's down
/// projection and attention's output, as a `Q5_K_M` file would hold them), read as nibbles
/// with fifth bits. 17 is llama.cpp's number for a file of mostly `Q5_K` tensors (`Q5_K_M`).
#[test]
fn gemma3_in_q5_k_continues_greedily_as_llama_cpp_does() {
    gemma3_in_format_continues_as_llama_cpp(candle_core::quantized::GgmlDType::Q5K, 17);
}

/// `Q6_K` in the matrices whose rows are whole super-blocks (the rest stay as the `Q4_K_M` file
/// holds them), read from its super-blocks as they are. 18 is llama.cpp's number for a file of
/// mostly `Q6_K` tensors.
#[test]
fn gemma3_in_q6_k_continues_greedily_as_llama_cpp_does() {
    gemma3_in_format_continues_as_llama_cpp(candle_core::quantized::GgmlDType::Q6K, 18);
}

/// `Q5_1` in every matrix: what llama.cpp's `Q5_K_M` falls back to for rows that are not whole
/// super-blocks (most of Gemma 3 270M's, 640 wide), read as stored. 9 is llama.cpp's number
/// for a file of mostly `Q5_1` tensors.
#[test]
fn gemma3_in_q5_1_continues_greedily_as_llama_cpp_does() {
    gemma3_in_format_continues_as_llama_cpp(candle_core::quantized::GgmlDType::Q5_1, 9);
}

/// A Gemma 2 file made from Gemma 3 270M's: its vocabulary and the weights of its first six
/// layers, without the per-head norms Gemma 2 has none of, with soft caps on the attention
/// scores and the logits and a sliding window short enough that a short prompt meets them.
fn gemma2_file(dir: &std::path::Path) -> PathBuf {
    use candle_core::quantized::gguf_file::{self, Content, Value};

    const LAYERS: usize = 6;
    let mut file = std::fs::File::open(gemma_path()).unwrap();
    let content = Content::read(&mut file).unwrap();
    let replaced = [
        ("general.architecture", Value::String("gemma2".to_owned())),
        ("gemma2.block_count", Value::U32(LAYERS as u32)),
        ("gemma2.attention.sliding_window", Value::U32(8)),
        ("gemma2.attn_logit_softcapping", Value::F32(5.0)),
        ("gemma2.final_logit_softcapping", Value::F32(30.0)),
    ];
    let mut metadata: Vec<(String, Value)> = content
        .metadata
        .iter()
        .map(|(key, value)| {
            let key = key
                .strip_prefix("gemma3.")
                .map_or_else(|| key.clone(), |rest| format!("gemma2.{rest}"));
            (key, value.clone())
        })
        .filter(|(key, _)| !replaced.iter().any(|(name, _)| key == name))
        .collect();
    metadata.extend(replaced.map(|(key, value)| (key.to_owned(), value)));
    let kept = |name: &str| {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<usize>().ok());
        layer.is_none_or(|n| n < LAYERS)
            && !name.contains("attn_q_norm")
            && !name.contains("attn_k_norm")
    };
    let mut names: Vec<&String> = content.tensor_infos.keys().filter(|n| kept(n)).collect();
    names.sort();
    let tensors: Vec<(&str, candle_core::quantized::QTensor)> = names
        .into_iter()
        .map(|name| {
            let tensor = content
                .tensor(&mut file, name, &candle_core::Device::Cpu)
                .unwrap();
            (name.as_str(), shrink_queries_and_keys(name, tensor))
        })
        .collect();
    let path = dir.join("gemma2.gguf");
    let mut out = std::fs::File::create(&path).unwrap();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(n, t)| (*n, t)).collect();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
    path
}

/// Gemma 3's query and key projections scaled down: trained for per-head norms that Gemma 2
/// lacks, they would make attention scores so large that attention picks one key by a hair,
/// and the two implementations' roundings (llama.cpp keeps its cache in f16) part ways.
fn shrink_queries_and_keys(
    name: &str,
    tensor: candle_core::quantized::QTensor,
) -> candle_core::quantized::QTensor {
    if !(name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight")) {
        return tensor;
    }
    let device = candle_core::Device::Cpu;
    let scaled = (tensor.dequantize(&device).unwrap() * QUERY_KEY_SCALE).unwrap();
    candle_core::quantized::QTensor::quantize(&scaled, candle_core::quantized::GgmlDType::Q8_0)
        .unwrap()
}

/// How much the projections shrink: a tenth keeps the scores near the soft cap's range.
const QUERY_KEY_SCALE: f64 = 0.1;

/// Gemma 2 (no file of it on PyPI): a file made from Gemma 3's weights, so that its soft-capped
/// attention, its one-for-one sliding layers and its unnormalised heads meet llama.cpp's on the
/// same file.
#[test]
fn gemma2_continues_greedily_as_llama_cpp_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = gemma2_file(dir.path());
    let model = load(&path);
    assert_eq!(model.template(), ChatTemplate::Gemma);
    continues_as_llama_cpp(
        &path,
        model,
        "What is the capital of France? Name the city and one famous sight.",
    );
}
