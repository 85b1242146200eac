//! Approximate (HNSW) against exact dense search, side by side: build time, query latency and
//! recall@10 (the share of exact search's top 10 that the graph also returns).
//!
//! Synthetic: `hnsw_search [SIZES] [DIMENSION] [EXPANSIONS]` (defaults `10000,100000,1000000`,
//! 384 and `128`). Each document is 50 chunks scattered around its own random direction, as a
//! real document's chunks share a topic; each query is a noisier point near one document's
//! direction. Each size's graph is built once and searched with every search breadth.
//!
//! A real index: `hnsw_search --index DIR`, for an index built with `scar index --hnsw`; the
//! queries are the stored vectors of every 7th chunk (up to 500).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use scar_core::ChunkId;
use scar_index::{HnswGraph, HnswParams, Index, exact_top_k};
use scar_test_support::{near, normalised, uniform_stream};

const CHUNKS_PER_DOCUMENT: u32 = 50;
const QUERIES: usize = 100;
const K: usize = 10;

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn recall(exact: &[(ChunkId, f32)], approximate: &[(ChunkId, f32)]) -> f64 {
    let found: HashSet<ChunkId> = approximate.iter().map(|hit| hit.0).collect();
    exact.iter().filter(|hit| found.contains(&hit.0)).count() as f64 / exact.len().max(1) as f64
}

/// Times both searches over `queries` and returns (exact ms, HNSW ms, mean recall@K).
fn compare(
    queries: &[Vec<f32>],
    mut exact: impl FnMut(&[f32]) -> Vec<(ChunkId, f32)>,
    mut approximate: impl FnMut(&[f32]) -> Vec<(ChunkId, f32)>,
) -> (f64, f64, f64) {
    let (mut exact_times, mut graph_times, mut recall_sum) = (Vec::new(), Vec::new(), 0.0);
    for query in queries {
        let started = Instant::now();
        let truth = exact(query);
        exact_times.push(started.elapsed());
        let started = Instant::now();
        let found = approximate(query);
        graph_times.push(started.elapsed());
        recall_sum += recall(&truth, &found);
    }
    (
        median_ms(exact_times),
        median_ms(graph_times),
        recall_sum / queries.len() as f64,
    )
}

fn synthetic(
    sizes: &[u32],
    dimension: usize,
    expansions: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "| chunks | dimension | graph build s | search expansion | exact ms | HNSW ms | speed-up | recall@{K} |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for &rows in sizes {
        let mut next = uniform_stream(u64::from(rows));
        let documents = rows.div_ceil(CHUNKS_PER_DOCUMENT) as usize;
        let directions: Vec<Vec<f32>> = (0..documents)
            .map(|_| normalised((0..dimension).map(|_| next()).collect()))
            .collect();
        let mut matrix = Vec::with_capacity(rows as usize * dimension);
        for row in 0..rows {
            let direction = &directions[(row / CHUNKS_PER_DOCUMENT) as usize];
            matrix.extend(near(direction, 0.08, &mut next));
        }
        let queries: Vec<Vec<f32>> = (0..QUERIES)
            .map(|i| near(&directions[i * 7919 % documents], 0.12, &mut next))
            .collect();

        let started = Instant::now();
        let mut graph = HnswGraph::new(dimension, HnswParams::default())?;
        graph.extend(&matrix, &mut |_, _| {}, &AtomicBool::new(false))?;
        let build = started.elapsed().as_secs_f64();

        // One range over every row: a single document as far as exact search is concerned.
        let all = std::iter::once(0..rows).collect::<Vec<Range<u32>>>();
        for &expansion in expansions {
            graph.set_expansion_search(expansion);
            let (exact_ms, graph_ms, mean_recall) = compare(
                &queries,
                |query| exact_top_k(&matrix, dimension, &all, query, K).unwrap_or_default(),
                |query| {
                    graph
                        .search(&matrix, query, K, |_| true)
                        .unwrap_or_default()
                },
            );
            println!(
                "| {rows} | {dimension} | {build:.1} | {expansion} | {exact_ms:.2} | {graph_ms:.3} | {:.0}x | {mean_recall:.4} |",
                exact_ms / graph_ms
            );
        }
    }
    Ok(())
}

fn real(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let index = Index::open(dir)?;
    let info = index
        .hnsw()
        .ok_or("this index has no HNSW graph; build one with `scar index --hnsw`")?;
    let queries: Vec<Vec<f32>> = index
        .chunk_ids()
        .step_by(7)
        .take(500)
        .map(|id| index.embedding(id).to_vec())
        .collect();
    let (exact_ms, graph_ms, mean_recall) = compare(
        &queries,
        |query| index.exact_dense_search(query, K).unwrap_or_default(),
        |query| index.dense_search(query, K).unwrap_or_default(),
    );
    println!(
        "{dir}: {} chunks ({} linked), {} queries: exact {exact_ms:.2} ms, HNSW {graph_ms:.3} ms, recall@{K} {mean_recall:.4}",
        index.len(),
        info.rows,
        queries.len()
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--index") {
        let dir = args.get(1).ok_or("usage: hnsw_search --index DIR")?;
        return real(dir);
    }
    let sizes: Vec<u32> = args
        .first()
        .map_or("10000,100000,1000000", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let dimension = args.get(1).map_or(Ok(384), |d| d.parse())?;
    let expansions: Vec<usize> = args
        .get(2)
        .map_or("128", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    synthetic(&sizes, dimension, &expansions)
}
