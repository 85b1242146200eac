//! The PostgreSQL store beside the folder index, on the same chunks and questions: publishing
//! throughput, how often each first stage's seeds and the default policy's context agree, and
//! the first stage's and the policy's latency on each store (median and 99th percentile).
//!
//! Usage: `compare_stores INDEX URL BENCHMARK.json [MODELS_DIR]`: the index is published into
//! the database at URL (an empty one, or one holding the same model's chunks), then every
//! question of the benchmark (LegalBench-RAG layout) is asked of both, with k = 5.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use scar_core::ChunkId;
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelLocator};
use scar_index::{HnswSetting, Index};
use scar_policy::Options;
use scar_postgres::{PgStore, publish};
use scar_retrieve::{ChunkStore, FirstStage, Retriever};

// The same allocator as the `scar` binary (see its main.rs for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Place = (String, u32);

fn places(store: &dyn ChunkStore, ids: impl IntoIterator<Item = ChunkId>) -> Vec<Place> {
    ids.into_iter()
        .map(|id| {
            let chunk = store.stored(id).expect("a chunk the store handed out");
            (chunk.document, chunk.ordinal)
        })
        .collect()
}

fn percentile(times: &mut [Duration], share: f64) -> f64 {
    times.sort();
    let at = ((times.len() as f64 - 1.0) * share).round() as usize;
    times.get(at).map_or(f64::NAN, |t| t.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, index_dir, url, benchmark, rest @ ..] = args.as_slice() else {
        return Err("usage: compare_stores INDEX URL BENCHMARK.json [MODELS_DIR]".into());
    };
    let models = rest.first().map_or("models", String::as_str);
    let index = Index::open(index_dir)?;
    let started = Instant::now();
    let published = publish(
        &index,
        url,
        &[],
        HnswSetting::Keep,
        &mut |_, _| {},
        &AtomicBool::new(false),
    )?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "published {} files, {} chunks in {seconds:.1} s ({:.0} chunks/s; {} already there)",
        published.published,
        published.chunks,
        published.chunks as f64 / seconds.max(1e-9),
        published.unchanged
    );
    let files = ModelLocator::from_env(models).locate(&index.manifest().model.id)?;
    let options = EmbedOptions {
        device: DeviceChoice::Cpu,
        ..EmbedOptions::default()
    }
    .with_instructions_of(&index.manifest().model);
    let embedder = Arc::new(Embedder::load(&files, &options)?);
    let folder = Retriever::with_store(Arc::clone(&embedder), index)?;
    let server = Retriever::with_store(embedder, PgStore::open(url)?)?;
    let tests: serde_json::Value = serde_json::from_slice(&std::fs::read(benchmark)?)?;
    let questions: Vec<&str> = tests["tests"]
        .as_array()
        .ok_or("the benchmark has no tests")?
        .iter()
        .filter_map(|test| test["query"].as_str())
        .collect();
    let policy = Options::default();
    println!("{} questions, k = 5; the default policy", questions.len());
    println!(
        "| first stage | same seeds | seeds shared | same context | first stage p50 / p99 ms, folder | server | policy p50 / p99 ms, folder | server |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
        let (mut same_seeds, mut shared, mut same_context) = (0, 0, 0);
        let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for question in &questions {
            let ours = server.prepare(question, stage, 5)?;
            let theirs = folder.prepare(question, stage, 5)?;
            times[0].push(theirs.first_stage_time);
            times[1].push(ours.first_stage_time);
            let our_seeds = places(server.store(), ours.seeds.iter().map(|s| s.id));
            let their_seeds = places(folder.store(), theirs.seeds.iter().map(|s| s.id));
            same_seeds += usize::from(our_seeds == their_seeds);
            let theirs_set: HashSet<&Place> = their_seeds.iter().collect();
            shared += our_seeds.iter().filter(|p| theirs_set.contains(p)).count();
            let started = Instant::now();
            let their_ledger = folder.ledger(&theirs, &policy)?;
            times[2].push(started.elapsed());
            let started = Instant::now();
            let our_ledger = server.ledger(&ours, &policy)?;
            times[3].push(started.elapsed());
            let mut our_context = places(server.store(), our_ledger.context);
            let mut their_context = places(folder.store(), their_ledger.context);
            our_context.sort();
            their_context.sort();
            same_context += usize::from(our_context == their_context);
        }
        let asked = questions.len() as f64;
        let [folder_stage, server_stage, folder_policy, server_policy] = &mut times;
        let spread = |times: &mut Vec<Duration>| {
            format!(
                "{:.2} / {:.2}",
                percentile(times, 0.5),
                percentile(times, 0.99)
            )
        };
        println!(
            "| {stage} | {:.1}% | {:.1}% | {:.1}% | {} | {} | {} | {} |",
            100.0 * same_seeds as f64 / asked,
            100.0 * shared as f64 / (5.0 * asked),
            100.0 * same_context as f64 / asked,
            spread(folder_stage),
            spread(server_stage),
            spread(folder_policy),
            spread(server_policy),
        );
    }
    Ok(())
}
