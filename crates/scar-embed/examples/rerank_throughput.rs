//! Scores (question, passage) pairs with a cross-encoder, writes the scores as raw
//! little-endian f32 to OUT, and prints throughput as JSON. Driven by `scripts/bench-rerank`,
//! which runs sentence-transformers' `CrossEncoder` on the same pairs.
//!
//! Usage: `rerank_throughput MODEL_DIR QUESTIONS.json BATCH_SIZE DEVICE PRECISION OUT`, where the JSON
//! is a list of `{"question": ..., "passages": [...]}`, each question scored against its own
//! passages as a reranker scores a first stage's candidates.

use std::time::Instant;

use scar_embed::{CrossEncoder, EmbedOptions, ModelFiles};

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(serde::Deserialize)]
struct Question {
    question: String,
    passages: Vec<String>,
}

impl Question {
    fn passages(&self) -> Vec<&str> {
        self.passages.iter().map(String::as_str).collect()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_dir, questions, batch_size, device, precision, out] = args.as_slice() else {
        return Err(
            "usage: rerank_throughput MODEL_DIR QUESTIONS.json BATCH_SIZE DEVICE PRECISION OUT"
                .into(),
        );
    };
    let questions: Vec<Question> = serde_json::from_str(&std::fs::read_to_string(questions)?)?;
    let files = ModelFiles::from_dir(model_dir.as_str(), model_dir)?;
    let options = EmbedOptions {
        device: device.parse()?,
        precision: precision.parse()?,
        batch_size: batch_size.parse()?,
        batch_tokens: usize::MAX,
        ..Default::default()
    };
    let model = CrossEncoder::load(&files, &options)?;
    // One warm-up question so that both sides are measured without first-call costs.
    model.score(&questions[0].question, &questions[0].passages())?;
    let started = Instant::now();
    let mut scores = Vec::new();
    for question in &questions {
        scores.extend(model.score(&question.question, &question.passages())?);
    }
    let seconds = started.elapsed().as_secs_f64();
    let json = serde_json::json!({
        "pairs": scores.len(), "seconds": seconds, "pairs_per_second": scores.len() as f64 / seconds,
        "compute": model.compute(),
    });
    let bytes: Vec<u8> = scores.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(out, bytes)?;
    println!("{json}");
    Ok(())
}
