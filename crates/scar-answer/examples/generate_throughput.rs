//! Generates an answer to a fixed prompt with a local GGUF model and prints prompt and decoding
//! speed as JSON. Driven by `scripts/bench-generate`, which runs llama.cpp on the same prompt.
//!
//! Usage: `generate_throughput MODEL.gguf PROMPT.json MAX_TOKENS REQUANTIZE(true|false)`
//! where PROMPT.json is `{"system": "...", "user": "..."}`.

use std::ops::ControlFlow;
use std::time::Instant;

use scar_answer::{GenerationParams, Generator, LoadOptions, LocalModel, Prompt};
use scar_embed::DeviceChoice;

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, prompt, max_tokens, requantize] = args.as_slice() else {
        return Err(
            "usage: generate_throughput MODEL.gguf PROMPT.json MAX_TOKENS REQUANTIZE".into(),
        );
    };
    let messages: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(prompt)?)?;
    let prompt = Prompt {
        system: messages["system"].as_str().unwrap_or_default().to_owned(),
        user: messages["user"].as_str().unwrap_or_default().to_owned(),
        sources: Vec::new(),
    };
    let started = Instant::now();
    let options = LoadOptions {
        device: DeviceChoice::Cpu,
        requantize: requantize.parse()?,
    };
    let mut model = LocalModel::load(std::path::Path::new(model), &options)?;
    let load_seconds = started.elapsed().as_secs_f64();
    // Greedy and without a repetition penalty, as llama.cpp is run on the other side.
    let params = GenerationParams {
        max_tokens: max_tokens.parse()?,
        repeat_penalty: 1.0,
        ..GenerationParams::default()
    };
    // One short warm-up so that both sides are measured without first-call costs.
    let warm_up = GenerationParams {
        max_tokens: 2,
        ..params
    };
    model.generate(&prompt, &warm_up, &mut |_| ControlFlow::Continue(()))?;
    let generation = model.generate(&prompt, &params, &mut |_| ControlFlow::Continue(()))?;
    let prompt_tokens = generation.prompt_tokens.unwrap_or_default();
    let json = serde_json::json!({
        "load_seconds": load_seconds,
        "requantized_tensors": model.requantized_tensors(),
        "prompt_tokens": prompt_tokens,
        "generated_tokens": generation.generated_tokens,
        "prompt_tokens_per_second": prompt_tokens as f64 / generation.first_token_seconds,
        "decode_tokens_per_second": generation.tokens_per_second(),
        "text": generation.text,
        // The prompt in the model's own chat format, for the other side to read the same text.
        "prompt_text": model.template().render(&prompt.system, &prompt.user),
    });
    println!("{json}");
    Ok(())
}
