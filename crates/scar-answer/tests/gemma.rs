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
    let options = LoadOptions {
        device: DeviceChoice::Cpu,
        requantize: true,
    };
    LocalModel::load(&gemma_path(), &options).unwrap()
}

#[test]
fn gemma3_takes_its_turn_format_from_the_vocabulary() {
    // The base model's file carries no chat template, only the turn tokens.
    let model = gemma();
    assert_eq!(model.template(), ChatTemplate::Gemma);
    assert_eq!(model.context_length(), 32_768);
    assert_eq!(model.requantized_tensors(), 0, "Q4_K_M has fast kernels");
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
    let question = prompt("What is the capital of France? Name the city.");
    let rendered = ChatTemplate::Gemma.render(&question.system, &question.user);
    let tokens = 16;
    let Some(expected) = llama_cpp(&gemma_path(), &greedy_snippet(tokens), &rendered) else {
        return;
    };
    let params = GenerationParams {
        max_tokens: tokens,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    let generation = gemma()
        .generate(&question, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(generation.text.trim(), expected);
}
