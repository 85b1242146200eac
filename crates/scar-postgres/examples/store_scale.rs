//! The store at scale, side by side with the folder index's own search kernels: query latency
//! (p50 / p99) of dense search, exact and HNSW, and of BM25, over synthetic chunks.
//!
//! `store_scale URL [SIZES] [QUERIES] [SEARCHES]` (defaults `100000`, 100 and
//! `exact,hnsw,bm25`): URL names an empty database. For each size, the example index is published there (for the store's tables and
//! model), then synthetic chunks are written beside it: documents of 50 chunks scattered around
//! their own random direction (as `scar-retrieve`'s `hnsw_search` example makes them), each
//! chunk 100 words drawn from its document's 40 topic words and a shared Zipf-like vocabulary.
//! Each query is a noisier point near one document's direction, and four of its topic words
//! with three of the shared vocabulary's.
//! The folder side runs `exact_top_k` and an `HnswGraph` over the same vectors in memory, and
//! tantivy's BM25 (the folder index's lexical search) over the same texts.
//! Each search runs the queries three times; a row gives the medians of the three p50s and
//! p99s.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use pgvector::Vector;
use scar_core::ChunkId;
use scar_index::{HnswGraph, HnswParams, HnswSetting, Index, exact_top_k};
use scar_postgres::{PgStore, publish};
use scar_retrieve::ChunkStore;
use scar_test_support::{example_index, near, normalised, uniform_stream};

const CHUNKS_PER_DOCUMENT: u32 = 50;
const WORDS_PER_CHUNK: usize = 100;
const TOPIC_WORDS: usize = 40;
const VOCABULARY: usize = 20_000;
/// The depth the retriever ranks to at k = 5.
const DEPTH: usize = 50;
const RECALL_AT: usize = 10;
const ROWS_PER_INSERT: usize = 1000;
/// Passes over the queries, for medians.
const RUNS: usize = 3;

/// A word of the shared vocabulary, rank drawn as 1/rank (Zipf-like).
fn common_word(next: &mut impl FnMut() -> f32) -> String {
    let u = f64::from(next() + 0.5).clamp(1e-9, 1.0);
    let rank = (VOCABULARY as f64).powf(u) as usize;
    format!("w{rank}")
}

fn topic_word(document: usize, at: usize) -> String {
    format!("t{document}x{at}")
}

/// p50 and p99 of `samples`, in milliseconds.
fn percentiles(mut samples: Vec<Duration>) -> Latency {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    (at(0.5), at(0.99))
}

/// A search's hits, best first.
type Hits = Vec<(ChunkId, f32)>;

/// p50 and p99 in milliseconds.
type Latency = (f64, f64);

/// Prints a row of the table: the search, the folder's and the store's latency, and the
/// folder's and the store's recall@10.
type Row<'a> = &'a dyn Fn(&str, Latency, Latency, (f64, f64));

/// Times `search` over each query, [`RUNS`] times: the medians of the runs' p50 and p99, and
/// each query's hits.
fn timed<Q>(queries: &[Q], mut search: impl FnMut(&Q) -> Hits) -> (Latency, Vec<Hits>) {
    let mut runs = Vec::with_capacity(RUNS);
    let mut hits = Vec::with_capacity(queries.len());
    for run in 0..RUNS {
        let mut times = Vec::with_capacity(queries.len());
        for query in queries {
            let started = Instant::now();
            let found = search(query);
            times.push(started.elapsed());
            if run == 0 {
                hits.push(found);
            }
        }
        runs.push(percentiles(times));
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    (
        (
            median(runs.iter().map(|run| run.0).collect()),
            median(runs.iter().map(|run| run.1).collect()),
        ),
        hits,
    )
}

/// Mean share of `truth`'s top `RECALL_AT` that `found`'s top `RECALL_AT` holds.
fn recall(truth: &[Hits], found: &[Hits]) -> f64 {
    let mut sum = 0.0;
    for (truth, found) in truth.iter().zip(found) {
        let found: HashSet<ChunkId> = found.iter().take(RECALL_AT).map(|hit| hit.0).collect();
        let wanted = truth.iter().take(RECALL_AT);
        sum += wanted.clone().filter(|hit| found.contains(&hit.0)).count() as f64
            / wanted.count().max(1) as f64;
    }
    sum / truth.len().max(1) as f64
}

/// Synthetic documents: (vectors, row by row; texts; directions).
struct Synthetic {
    matrix: Vec<f32>,
    texts: Vec<String>,
    directions: Vec<Vec<f32>>,
}

fn synthetic(rows: u32, dimension: usize) -> Synthetic {
    let mut next = uniform_stream(u64::from(rows));
    let documents = rows.div_ceil(CHUNKS_PER_DOCUMENT) as usize;
    let directions: Vec<Vec<f32>> = (0..documents)
        .map(|_| normalised((0..dimension).map(|_| next()).collect()))
        .collect();
    let mut matrix = Vec::with_capacity(rows as usize * dimension);
    let mut texts = Vec::with_capacity(rows as usize);
    for row in 0..rows {
        let document = (row / CHUNKS_PER_DOCUMENT) as usize;
        matrix.extend(near(&directions[document], 0.08, &mut next));
        let words: Vec<String> = (0..WORDS_PER_CHUNK)
            .map(|_| {
                if next() < -0.3 {
                    let at = ((next() + 0.5) * TOPIC_WORDS as f32) as usize;
                    topic_word(document, at.min(TOPIC_WORDS - 1))
                } else {
                    common_word(&mut next)
                }
            })
            .collect();
        texts.push(words.join(" "));
    }
    Synthetic {
        matrix,
        texts,
        directions,
    }
}

/// Writes the synthetic chunks into the store at `url`, one file per document.
fn write(url: &str, data: &Synthetic, dimension: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    let started = Instant::now();
    for (document, _) in data.directions.iter().enumerate() {
        let path = format!("/synthetic/document-{document}.txt");
        let mut transaction = client.transaction()?;
        transaction.execute(
            "INSERT INTO scar_files (path, hash) VALUES ($1, $1)",
            &[&path],
        )?;
        let id: i32 = transaction
            .query_one(
                "INSERT INTO scar_documents (path) VALUES ($1) RETURNING id",
                &[&path],
            )?
            .get(0);
        let first = document * CHUNKS_PER_DOCUMENT as usize;
        let last = (first + CHUNKS_PER_DOCUMENT as usize).min(data.texts.len());
        for batch in (first..last).collect::<Vec<_>>().chunks(ROWS_PER_INSERT) {
            let ordinals: Vec<i32> = batch
                .iter()
                .map(|&row| i32::try_from(row - first).unwrap_or(i32::MAX))
                .collect();
            let texts: Vec<&str> = batch.iter().map(|&row| data.texts[row].as_str()).collect();
            let vectors: Vec<Vector> = batch
                .iter()
                .map(|&row| {
                    Vector::from(data.matrix[row * dimension..(row + 1) * dimension].to_vec())
                })
                .collect();
            transaction.execute(
                "INSERT INTO scar_chunks (document, ordinal, char_start, char_end, tokens, \
                 heading_path, text, embedding, lexical, words) \
                 SELECT $1, o, 0, length(t), 130, '', t, e, to_tsvector('simple', t), $5 \
                 FROM unnest($2::int[], $3::text[], $4::vector[]) AS u(o, t, e)",
                &[
                    &id,
                    &ordinals,
                    &texts,
                    &vectors,
                    &i32::try_from(WORDS_PER_CHUNK)?,
                ],
            )?;
        }
        transaction.commit()?;
    }
    // What a writer keeps for BM25, counted once for all the chunks written here.
    client.batch_execute(
        "DELETE FROM scar_terms; INSERT INTO scar_terms (lexeme, chunks) \
         SELECT u.lexeme, count(*) FROM scar_chunks c, unnest(c.lexical) u GROUP BY u.lexeme",
    )?;
    Ok(data.texts.len() as f64 / started.elapsed().as_secs_f64())
}

/// `count` queries, each near one document: its vector, and words (see below).
fn queries(data: &Synthetic, count: usize) -> (Vec<Vec<f32>>, Vec<String>) {
    let mut next = uniform_stream(7);
    let documents = data.directions.len();
    let picks: Vec<usize> = (0..count).map(|i| i * 7919 % documents).collect();
    let vectors: Vec<Vec<f32>> = picks
        .iter()
        .map(|&d| near(&data.directions[d], 0.12, &mut next))
        .collect();
    let words: Vec<String> = picks
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            // Three words of the shared vocabulary, as a question's common words, and four of
            // the document's own.
            (0..3)
                .map(|_| common_word(&mut next))
                .chain((0..4).map(|j| topic_word(d, (i * 5 + j * 7) % TOPIC_WORDS)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (vectors, words)
}

/// One size's rows of the table.
fn measure(
    url: &str,
    example: &Index,
    rows: u32,
    query_count: usize,
    searches: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let wanted = |search: &str| searches.iter().any(|s| s == search);
    let dimension = example.manifest().model.dimension;
    let cancel = AtomicBool::new(false);
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(
        "DROP TABLE IF EXISTS scar_chunks, scar_documents, scar_files, scar_meta, scar_terms CASCADE",
    )?;
    publish(
        example,
        url,
        &[],
        HnswSetting::Keep,
        &mut |_, _| {},
        &cancel,
    )?;
    let data = synthetic(rows, dimension);
    let per_second = write(url, &data, dimension)?;
    client.batch_execute("VACUUM ANALYZE scar_chunks")?;
    eprintln!("{rows} chunks written, {per_second:.0} chunks/s");

    let (vectors, words) = queries(&data, query_count);

    // One range over every row: a single document as far as exact search is concerned.
    let all = std::iter::once(0..rows).collect::<Vec<Range<u32>>>();
    let all = all.as_slice();
    let (folder_exact, truth) = timed(&vectors, |q| {
        exact_top_k(&data.matrix, dimension, all, q, DEPTH).unwrap_or_default()
    });
    let store = PgStore::open(url)?;
    // Store ids of the synthetic chunks follow the example's, in the same order.
    let offset = example.len() as u32 + 1;
    let in_folder_ids = |hits: Vec<(ChunkId, f32)>| -> Vec<(ChunkId, f32)> {
        hits.into_iter()
            .filter(|(id, _)| id.0 >= offset)
            .map(|(id, score)| (ChunkId(id.0 - offset), score))
            .collect()
    };
    let row = |search: &str, folder: Latency, store: Latency, recalls: (f64, f64)| {
        println!(
            "| {rows} | {search} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1}× | {:.3} / {:.3} |",
            folder.0,
            folder.1,
            store.0,
            store.1,
            store.0 / folder.0,
            recalls.0,
            recalls.1,
        );
    };
    if wanted("exact") {
        let (store_exact, exact_hits) = timed(&vectors, |q| {
            in_folder_ids(store.dense_ranking(q, DEPTH, None).unwrap_or_default())
        });
        row(
            "dense, exact",
            folder_exact,
            store_exact,
            (1.0, recall(&truth, &exact_hits)),
        );
    }
    if wanted("hnsw") {
        hnsw_rows(url, example, &data, &vectors, &truth, &in_folder_ids, &row)?;
    }
    if wanted("bm25") {
        let (folder_bm25, folder_hits) = folder_bm25(&data.texts, &words)?;
        let (store_bm25, store_hits) = timed(&words, |q| {
            in_folder_ids(
                store
                    .lexical_ranking(q, DEPTH, None)
                    .map(|ranking| ranking.hits)
                    .unwrap_or_default(),
            )
        });
        // The store's BM25 is exact (scar-postgres's tests score every chunk against it), so the
        // folder's top 10 is read against it: tantivy keeps each chunk's length in one byte.
        println!(
            "| {rows} | BM25 | {:.2} / {:.2} | {:.2} / {:.2} | {:.1}× | {:.3} / – |",
            folder_bm25.0,
            folder_bm25.1,
            store_bm25.0,
            store_bm25.1,
            store_bm25.0 / folder_bm25.0,
            recall(&store_hits, &folder_hits),
        );
    }
    Ok(())
}

/// tantivy's BM25 over `texts`, as the folder index runs it: timed over `queries`, and their
/// hits as row numbers.
fn folder_bm25(
    texts: &[String],
    queries: &[String],
) -> Result<(Latency, Vec<Hits>), Box<dyn std::error::Error>> {
    use tantivy::schema::{FAST, Schema, TEXT};
    let mut schema = Schema::builder();
    let text = schema.add_text_field("text", TEXT);
    let row = schema.add_u64_field("row", FAST);
    let index = tantivy::Index::create_in_ram(schema.build());
    let started = Instant::now();
    let mut writer: tantivy::IndexWriter = index.writer(1 << 30)?;
    for (at, words) in texts.iter().enumerate() {
        writer.add_document(tantivy::doc!(text => words.as_str(), row => at as u64))?;
    }
    writer.commit()?;
    eprintln!(
        "tantivy: {} texts indexed in {:.1} s",
        texts.len(),
        started.elapsed().as_secs_f64()
    );
    let searcher = index.reader()?.searcher();
    let parser = tantivy::query::QueryParser::for_index(&index, vec![text]);
    Ok(timed(queries, |q| {
        let (query, _) = parser.parse_query_lenient(q);
        let top = searcher
            .search(
                &query,
                &tantivy::collector::TopDocs::with_limit(DEPTH).order_by_score(),
            )
            .unwrap_or_default();
        top.into_iter()
            .filter_map(|(score, address)| {
                let rows = searcher
                    .segment_reader(address.segment_ord)
                    .fast_fields()
                    .u64("row")
                    .ok()?;
                Some((
                    ChunkId(u32::try_from(rows.first(address.doc_id)?).ok()?),
                    score,
                ))
            })
            .collect()
    }))
}

/// The HNSW row: the folder's graph and the store's index built over the same vectors.
fn hnsw_rows(
    url: &str,
    example: &Index,
    data: &Synthetic,
    vectors: &[Vec<f32>],
    truth: &[Hits],
    in_folder_ids: &dyn Fn(Hits) -> Hits,
    row: Row<'_>,
) -> Result<(), Box<dyn std::error::Error>> {
    let dimension = example.manifest().model.dimension;
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let mut graph = HnswGraph::new(dimension, HnswParams::default())?;
    graph.extend(&data.matrix, &mut |_, _| {}, &cancel)?;
    let folder_build = started.elapsed().as_secs_f64();
    let (folder_graph, graph_hits) = timed(vectors, |q| {
        graph
            .search(&data.matrix, q, DEPTH, |_| true)
            .unwrap_or_default()
    });
    let started = Instant::now();
    publish(
        example,
        url,
        &[],
        HnswSetting::Build(HnswParams::default()),
        &mut |_, _| {},
        &cancel,
    )?;
    let store_build = started.elapsed().as_secs_f64();
    let store = PgStore::open(url)?;
    let (store_graph, store_graph_hits) = timed(vectors, |q| {
        in_folder_ids(store.dense_ranking(q, DEPTH, None).unwrap_or_default())
    });
    row(
        "dense, HNSW",
        folder_graph,
        store_graph,
        (recall(truth, &graph_hits), recall(truth, &store_graph_hits)),
    );
    eprintln!("HNSW build: folder {folder_build:.1} s, store {store_build:.1} s");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args
        .first()
        .ok_or("usage: store_scale URL [SIZES] [QUERIES] [SEARCHES]")?;
    let sizes: Vec<u32> = args.get(1).map_or(Ok(vec![100_000]), |list| {
        list.split(',').map(str::parse).collect::<Result<_, _>>()
    })?;
    let query_count: usize = args.get(2).map_or(Ok(100), |n| n.parse())?;
    let searches: Vec<String> = args
        .get(3)
        .map_or("exact,hnsw,bm25", String::as_str)
        .split(',')
        .map(str::to_owned)
        .collect();
    let example = Index::open(example_index())?;
    println!(
        "| chunks | search | folder p50 / p99 ms | store p50 / p99 ms | store ÷ folder (p50) | recall@{RECALL_AT}, folder / store |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: |");
    for &rows in &sizes {
        measure(url, &example, rows, query_count, &searches)?;
    }
    Ok(())
}
