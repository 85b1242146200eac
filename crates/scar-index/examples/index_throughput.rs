//! Whole-pipeline indexing throughput against embedding alone, on the same chunks, in one run.
//!
//! Indexes a folder into a fresh temporary index (load, chunk, embed, store, commit), then embeds
//! the very same chunk texts again with nothing around it. Prints both throughputs, their ratio
//! (target ≥ 0.9: indexing should be bound by the model), the peak resident memory of the
//! indexing phase, and the index's bytes on disk per chunk, with the CPU's model, what the model
//! computes in on it (`auto`'s choice) and the load average before the run.
//!
//! Usage: `index_throughput MODEL_DIR FOLDER`

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles};
use scar_index::{Index, IndexOptions, index_paths};

#[path = "shared/machine.rs"]
mod machine;

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Peak resident set size of this process so far, in MiB (Linux).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn folder_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                folder_bytes(&path)
            } else {
                entry.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_dir, folder] = args.as_slice() else {
        return Err("usage: index_throughput MODEL_DIR FOLDER".into());
    };
    let load_average = machine::load_average();
    let files = ModelFiles::from_dir(model_dir.as_str(), model_dir)?;
    let embedder = Embedder::load(
        &files,
        &EmbedOptions {
            device: DeviceChoice::Cpu,
            ..Default::default()
        },
    )?;
    embedder.embed_passages(&["warm-up text"; 8], &mut |_| {})?;

    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let report = index_paths(
        dir.path(),
        &[folder.into()],
        &embedder,
        &IndexOptions::default(),
        &mut |_| {},
        &AtomicBool::new(false),
    )?;
    let indexing = started.elapsed().as_secs_f64();
    let peak_mib = peak_rss_mib();

    let index = Index::open(dir.path())?;
    let texts: Vec<&str> = index
        .chunk_ids()
        .filter_map(|id| index.chunk(id))
        .map(|c| c.text)
        .collect();
    let started = Instant::now();
    let alone = embedder.embed_passages(&texts, &mut |_| {})?;
    let embedding = started.elapsed().as_secs_f64();
    let tokens: usize = alone.token_counts.iter().sum();

    let bytes = folder_bytes(dir.path());
    let json = serde_json::json!({
        "files": report.added, "chunks": texts.len(), "tokens": tokens,
        "indexing_seconds": indexing, "embedding_only_seconds": embedding,
        "indexing_tokens_per_s": tokens as f64 / indexing,
        "embedding_only_tokens_per_s": tokens as f64 / embedding,
        "ratio_indexing_over_embedding": embedding / indexing,
        "peak_rss_mib_indexing": peak_mib,
        "index_bytes": bytes, "index_bytes_per_chunk": bytes as f64 / texts.len() as f64,
        "dimension": index.manifest().model.dimension,
        "precision": embedder.precision().to_string(),
        "compute": embedder.compute(),
        "cpu": machine::cpu_model(),
        "load_average_before": load_average,
    });
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(())
}
