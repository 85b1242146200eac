//! Chunking throughput against a document's length: the same prose cut at 1, 4, 16 and 40 MB
//! with the model's tokenizer, as `scar index` cuts it. Chunking must stay linear, so the
//! MB/s should stay flat from the smallest document to the largest. Prints the CPU, the load
//! average and, for each size, the median of three runs.
//!
//! Usage: `chunk_throughput MODEL_DIR [SOURCE_TEXT]` (the prose is `SOURCE_TEXT`, default the
//! example documents, repeated to each size).

use std::time::Instant;

use scar_embed::ModelFiles;
use scar_index::{Chunker, ChunkerConfig, Format, LoadedDocument};

#[path = "shared/machine.rs"]
mod machine;

const MB: usize = 1_000_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (model_dir, source) = match args.as_slice() {
        [_, model_dir] => (model_dir, None),
        [_, model_dir, source] => (model_dir, Some(source)),
        _ => return Err("usage: chunk_throughput MODEL_DIR [SOURCE_TEXT]".into()),
    };
    let files = ModelFiles::from_dir(model_dir.as_str(), model_dir)?;
    let tokenizer = tokenizers::Tokenizer::from_file(files.dir.join("tokenizer.json"))
        .map_err(|error| error.to_string())?;
    let chunker = Chunker::new(&ChunkerConfig::default(), &tokenizer)?;
    let prose = if let Some(path) = source {
        std::fs::read_to_string(path)?
    } else {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/example");
        let mut text = String::new();
        for entry in std::fs::read_dir(example)? {
            text.push_str(&std::fs::read_to_string(entry?.path())?);
            text.push_str("\n\n");
        }
        text
    };
    println!("cpu: {}", machine::cpu_model());
    println!("load average: {}", machine::load_average());
    println!("{:>6} {:>9} {:>8} {:>8}", "MB", "chunks", "seconds", "MB/s");
    for megabytes in [1, 4, 16, 40] {
        let mut text = String::with_capacity(megabytes * MB + prose.len());
        while text.len() < megabytes * MB {
            text.push_str(&prose);
        }
        let document = LoadedDocument {
            format: Format::Text,
            text,
            headings: Vec::new(),
            pages: Vec::new(),
            attachments: Vec::new(),
            warnings: Vec::new(),
            hash: String::new(),
        };
        let mut runs = Vec::new();
        let mut chunks = 0;
        for _ in 0..3 {
            let started = Instant::now();
            chunks = chunker.chunk(&document)?.len();
            runs.push(started.elapsed().as_secs_f64());
        }
        runs.sort_by(f64::total_cmp);
        let seconds = runs[1];
        let size = document.text.len() as f64 / MB as f64;
        println!(
            "{size:>6.1} {chunks:>9} {seconds:>8.2} {:>8.2}",
            size / seconds
        );
    }
    Ok(())
}
