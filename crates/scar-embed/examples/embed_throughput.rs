//! Embeds the passages in a JSON file (a list of strings), writes the vectors as raw
//! little-endian f32 to OUT, and prints throughput as JSON. Driven by `scripts/bench-embed`,
//! which runs sentence-transformers on the same passages.
//!
//! Usage: `embed_throughput MODEL_DIR PASSAGES.json BATCH_SIZE DEVICE PRECISION OUT`

use std::time::Instant;

use scar_embed::{EmbedOptions, Embedder, ModelFiles};

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_dir, passages, batch_size, device, precision, out] = args.as_slice() else {
        return Err(
            "usage: embed_throughput MODEL_DIR PASSAGES.json BATCH_SIZE DEVICE PRECISION OUT"
                .into(),
        );
    };
    let device = device.parse()?;
    let precision = precision.parse()?;
    let passages: Vec<String> = serde_json::from_str(&std::fs::read_to_string(passages)?)?;
    let files = ModelFiles::from_dir(model_dir.as_str(), model_dir)?;
    let options = EmbedOptions {
        device,
        precision,
        batch_size: batch_size.parse()?,
        batch_tokens: usize::MAX,
        ..Default::default()
    };
    let embedder = Embedder::load(&files, &options)?;
    let texts: Vec<&str> = passages.iter().map(String::as_str).collect();
    // One warm-up batch so that both sides are measured without first-call costs.
    embedder.embed_passages(&texts[..texts.len().min(8)], &mut |_| {})?;
    let started = Instant::now();
    let embeddings = embedder.embed_passages(&texts, &mut |_| {})?;
    let seconds = started.elapsed().as_secs_f64();
    let tokens: usize = embeddings.token_counts.iter().sum();
    let json = serde_json::json!({
        "passages": texts.len(), "tokens": tokens, "seconds": seconds,
        "tokens_per_second": tokens as f64 / seconds, "device": embedder.device_name(),
        "precision": embedder.precision().to_string(), "compute": embedder.compute(),
    });
    let bytes: Vec<u8> = embeddings
        .data
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(out, bytes)?;
    println!("{json}");
    Ok(())
}
