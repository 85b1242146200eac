//! Qwen2.5-Coder-0.5B-Instruct (`models/qwen2.5-coder-0.5b`, `Q4_K_M`), checked against llama.cpp
//! (llama-cpp-python) reading the same file: the same greedy continuation, through our own
//! decoder and products.

use std::ops::ControlFlow;
use std::path::PathBuf;

use scar_answer::{
    ChatJudge, ChatTemplate, GenerationParams, Generator, LikelihoodJudge, LoadOptions, LocalModel,
};
use scar_embed::DeviceChoice;

use crate::common::{greedy_snippet, llama_cpp, prompt};

fn qwen_path() -> PathBuf {
    scar_test_support::models_dir()
        .join("qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
}

fn qwen() -> LocalModel {
    let options = LoadOptions {
        device: DeviceChoice::Cpu,
        requantize: true,
    };
    LocalModel::load(&qwen_path(), &options).unwrap()
}

#[test]
fn qwen2_answers_greedily_as_llama_cpp_does() {
    let question = prompt("What is the capital of France? Name the city.");
    let model = qwen();
    assert_eq!(model.template(), ChatTemplate::ChatMl);
    // Its Q5_0 tensors are read as stored wherever our own products run.
    if scar_answer::decoding_instructions().is_some() {
        assert_eq!(model.requantized_tensors(), 0);
    }
    let rendered = ChatTemplate::ChatMl.render(&question.system, &question.user);
    let tokens = 16;
    let Some(expected) = llama_cpp(&qwen_path(), &greedy_snippet(tokens), &rendered) else {
        return;
    };
    let params = GenerationParams {
        max_tokens: tokens,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    let mut model = model;
    let generation = model
        .generate(&question, &params, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(generation.text.trim(), expected);
}

#[test]
fn qwen2_judges_the_passage_that_answers_above_those_that_do_not() {
    let judge = ChatJudge::new(qwen()).unwrap();
    let question = "How much does it cost to take a kayak on the ferry?";
    let answers = judge
        .judge(
            question,
            "Kayaks and canoes travel on the ferry for a fee of 12 euros each way.",
        )
        .unwrap();
    let elsewhere = judge
        .judge(
            question,
            "The library opens at nine and closes at six on weekdays.",
        )
        .unwrap();
    // This small model leans to "no" (llama.cpp gives the same 0.28 and 0.17 on these
    // prompts): its probabilities rank passages, they are not a verdict.
    assert!(answers > elsewhere + 0.05, "{answers} {elsewhere}");
    assert!((0.0..1.0).contains(&answers) && elsewhere > 0.0);
    // The same passage judged twice, after another: the model starts afresh each time.
    let again = judge
        .judge(
            question,
            "Kayaks and canoes travel on the ferry for a fee of 12 euros each way.",
        )
        .unwrap();
    assert_eq!(answers.to_bits(), again.to_bits());
}

/// llama.cpp's `log P(question | passage) − log P(question | no passage)` per token of the
/// question, with the likelihood judge's prompt (`ChatML`, as the file names it).
const LIKELIHOOD_SNIPPET: &str = r"import json, numpy as np
model = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
question, passages = json.loads(text)
def log_likelihood(passage):
    prompt = ('<|im_start|>system\nWrite a question that the passage answers.<|im_end|>\n'
              '<|im_start|>user\nPassage: ' + passage + '<|im_end|>\n<|im_start|>assistant\n')
    p = model.tokenize(prompt.encode(), add_bos=False, special=True)
    q = model.tokenize(question.encode(), add_bos=False, special=False)
    model.reset(); model.eval(p + q)
    rows = np.asarray(model.scores[len(p) - 1:len(p) + len(q) - 1], dtype=np.float64)
    top = rows.max(axis=1)
    norm = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))
    return float((rows[np.arange(len(q)), q] - norm).sum()), len(q)
alone, n = log_likelihood('')
print(json.dumps([(log_likelihood(p)[0] - alone) / n for p in passages]))";

#[test]
fn qwen2_finds_the_question_likelier_after_the_passage_that_answers_it_as_llama_cpp_does() {
    let judge = LikelihoodJudge::new(qwen());
    let question = "How much does it cost to take a kayak on the ferry?";
    let passages = [
        "Kayaks and canoes travel on the ferry for a fee of 12 euros each way.".to_owned(),
        "The library opens at nine and closes at six on weekdays.".to_owned(),
    ];
    let scores = judge.judge(question, &passages).unwrap();
    assert!(scores[0] > scores[1] + 0.1, "{scores:?}");
    // The same passages judged again: the model starts afresh each time.
    assert_eq!(judge.judge(question, &passages).unwrap(), scores);
    let input = serde_json::json!([question, passages]).to_string();
    let Some(reference) = llama_cpp(&qwen_path(), LIKELIHOOD_SNIPPET, &input) else {
        return;
    };
    let reference: Vec<f32> = serde_json::from_str(&reference).unwrap();
    // Our products round the activations per block of 32, llama.cpp's K-quant products per
    // 256: the log-probabilities differ a little, not the order.
    for (ours, theirs) in scores.iter().zip(&reference) {
        assert!(
            (ours - theirs).abs() < 0.1,
            "{scores:?} against {reference:?}"
        );
    }
}
