//! Query latency by stage at 10k, 100k and 1M chunks: embedding the question (real model),
//! exact dense search to the depth the evidence walk reads (synthetic unit vectors of the model's
//! dimension, 50 chunks a document), and the default policy (the evidence walk ±2, k = 5). Prints
//! one row per size and the policy's share of the query.
//!
//! Usage: `query_latency MODEL_DIR [SIZES] [DIMENSION]`, sizes defaulting to
//! `10000,100000,1000000`.

use std::ops::Range;
use std::time::{Duration, Instant};

use scar_core::{ChunkId, Position, cosine};
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles};
use scar_index::exact_top_k;
use scar_policy::{ChunkSource, Options, Policy, Rankings, SeamKind, Seed, Side, expand};
use scar_test_support::uniform_stream;

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHUNKS_PER_DOCUMENT: u32 = 50;
const REPEATS: usize = 15;

/// Synthetic chunks: a row-major matrix of unit vectors cut into equal documents.
struct Synthetic {
    matrix: Vec<f32>,
    dimension: usize,
    rows: u32,
}

impl ChunkSource for Synthetic {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        &self.matrix[id.index() * self.dimension..(id.index() + 1) * self.dimension]
    }
    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        let ordinal = id.0 % CHUNKS_PER_DOCUMENT;
        match side {
            Side::Previous => (ordinal > 0).then(|| ChunkId(id.0 - 1)),
            Side::Next => (ordinal + 1 < CHUNKS_PER_DOCUMENT && id.0 + 1 < self.rows)
                .then(|| ChunkId(id.0 + 1)),
        }
    }
    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        // The index reads this from its stored records; computing it here only makes the
        // measured policy time larger.
        let other = self.neighbour(id, side).unwrap_or(id);
        cosine(self.embedding(id), self.embedding(other))
    }
    fn seam(&self, _: ChunkId, _: Side) -> Option<SeamKind> {
        None
    }
    fn position(&self, id: ChunkId) -> Position {
        Position {
            document: id.0 / CHUNKS_PER_DOCUMENT,
            ordinal: id.0 % CHUNKS_PER_DOCUMENT,
        }
    }
    fn token_count(&self, _: ChunkId) -> usize {
        160
    }
    fn section(&self, _: ChunkId) -> Option<u32> {
        None
    }
}

fn synthetic(rows: u32, dimension: usize) -> Synthetic {
    let mut next = uniform_stream(u64::from(rows));
    let mut matrix: Vec<f32> = (0..rows as usize * dimension).map(|_| next()).collect();
    for row in matrix.chunks_exact_mut(dimension) {
        let norm = scar_core::norm(row);
        for x in row.iter_mut() {
            *x /= norm;
        }
    }
    Synthetic {
        matrix,
        dimension,
        rows,
    }
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let model_dir = args
        .get(1)
        .ok_or("usage: query_latency MODEL_DIR [SIZES] [DIMENSION]")?;
    let sizes: Vec<u32> = args
        .get(2)
        .map_or("10000,100000,1000000", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let files = ModelFiles::from_dir(model_dir.as_str(), model_dir)?;
    let embedder = Embedder::load(
        &files,
        &EmbedOptions {
            device: DeviceChoice::Cpu,
            ..Default::default()
        },
    )?;
    let dimension = args
        .get(3)
        .map_or(Ok(embedder.info().dimension), |d| d.parse())?;
    let questions = [
        "How is a TCP connection opened?",
        "What happens when the retransmission timer expires?",
        "Which lawful bases allow processing personal data?",
        "What are the conditions for closing the merger?",
        "How much revenue did the cloud segment report?",
    ];
    let embed_ms = median(
        (0..REPEATS)
            .map(|i| {
                let started = Instant::now();
                embedder
                    .embed_query(questions[i % questions.len()])
                    .map(|_| started.elapsed())
            })
            .collect::<Result<_, _>>()?,
    );
    let options = Options::new(Policy::default())?;
    println!("| chunks | dimension | embed ms | dense search ms | policy ms | policy share |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for rows in sizes {
        let source = synthetic(rows, dimension);
        let documents: Vec<Range<u32>> = (0..rows)
            .step_by(CHUNKS_PER_DOCUMENT as usize)
            .map(|start| start..(start + CHUNKS_PER_DOCUMENT).min(rows))
            .collect();
        let mut next = uniform_stream(7);
        let queries: Vec<Vec<f32>> = (0..REPEATS)
            .map(|_| (0..dimension).map(|_| next()).collect())
            .collect();
        let mut search = Vec::new();
        let mut policy = Vec::new();
        for query in &queries {
            let started = Instant::now();
            // The retriever ranks 100 × k deep for the evidence walk; the seeds are the top 5.
            let hits = exact_top_k(&source.matrix, dimension, &documents, query, 500)
                .map_err(|rows| format!("{} synthetic rows are not finite", rows.len()))?;
            search.push(started.elapsed());
            let seeds: Vec<Seed> = hits
                .iter()
                .take(5)
                .map(|&(id, score)| Seed {
                    id,
                    score,
                    judged: None,
                })
                .collect();
            let rankings = Rankings::new(hits.iter().map(|(id, _)| *id), [], 500, rows as usize);
            let started = Instant::now();
            let ledger = expand(&source, query, &seeds, &rankings, &options)?;
            policy.push(started.elapsed());
            assert!(!ledger.context.is_empty());
        }
        let (search_ms, policy_ms) = (median(search), median(policy));
        let share = policy_ms / (embed_ms + search_ms + policy_ms) * 100.0;
        println!(
            "| {rows} | {dimension} | {embed_ms:.2} | {search_ms:.2} | {policy_ms:.4} | {share:.3}% |"
        );
    }
    Ok(())
}
