//! The HNSW graph follows the index: built on request, extended with new rows, rebuilt after a
//! compaction, removed on request; searching through it finds what exact search finds.

use scar_index::{HnswParams, HnswSetting, Index, IndexOptions};

use crate::common::{index, small_corpus, tiny_bert};

/// Mean share of exact search's top 10 that dense search (through the graph) matches, over
/// every chunk's own vector as a query. A hit tied with exact search's tenth counts: duplicate
/// chunks make the choice among them arbitrary. Shared hits must carry the same score.
fn recall_at_10(index: &Index) -> f64 {
    let ids: Vec<_> = index.chunk_ids().collect();
    let mut total = 0.0;
    for &id in &ids {
        let query = index.embedding(id);
        let exact = index.exact_dense_search(query, 10).unwrap();
        let found = index.dense_search(query, 10).unwrap();
        let floor = exact.last().map_or(f32::NEG_INFINITY, |hit| hit.1) - 1e-6;
        for (hit, score) in &found {
            if let Some((_, exact_score)) = exact.iter().find(|(e, _)| e == hit) {
                assert!((score - exact_score).abs() < 1e-6, "same score either way");
            }
        }
        let matched = found.iter().filter(|(_, score)| *score >= floor).count();
        total += matched.min(exact.len()) as f64 / exact.len() as f64;
    }
    total / ids.len() as f64
}

#[test]
fn graph_is_built_kept_current_and_removed() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 6, 4000);
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];
    let keep = IndexOptions::default();
    let build = IndexOptions {
        hnsw: HnswSetting::Build(HnswParams::default()),
        ..IndexOptions::default()
    };

    index(dir.path(), &roots, &embedder, &keep);
    assert!(
        Index::open(dir.path()).unwrap().hnsw().is_none(),
        "none unless asked"
    );

    // Linked on one thread, the graph is the same every run: linked in parallel, rows race
    // for their neighbours, and on a corpus this small recall varies from run to run.
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let first = one_thread.install(|| index(dir.path(), &roots, &embedder, &build));
    let opened = Index::open(dir.path()).unwrap();
    let info = opened.hnsw().unwrap();
    assert_eq!(info.rows as usize, opened.len());
    assert_eq!(first.hnsw_rows_linked, info.rows);
    let recall = recall_at_10(&opened);
    assert!(recall >= 0.95, "recall@10 {recall}");

    // A new file appends rows: they are linked without relinking the rest, and found.
    let new_text = "Selective acknowledgments tell the sender which segments arrived out of order.";
    std::fs::write(docs.path().join("new.txt"), new_text).unwrap();
    let added = index(dir.path(), &roots, &embedder, &keep);
    assert_eq!(added.hnsw_rows_linked, 1);
    let opened = Index::open(dir.path()).unwrap();
    assert_eq!(opened.hnsw().unwrap().rows as usize, opened.len());
    let query = embedder
        .embed_passages(&[new_text], &mut |_| {})
        .unwrap()
        .data;
    let top = opened.dense_search(&query, 1).unwrap()[0].0;
    assert_eq!(opened.chunk(top).unwrap().text, new_text);

    // A removed file leaves dead rows, compacted into a new generation: the graph is rebuilt.
    std::fs::remove_file(docs.path().join("part-000.txt")).unwrap();
    let removed = one_thread.install(|| index(dir.path(), &roots, &embedder, &keep));
    let opened = Index::open(dir.path()).unwrap();
    let info = opened.hnsw().unwrap();
    assert_eq!(info.generation, opened.catalog().generation);
    assert_eq!(removed.hnsw_rows_linked as usize, opened.len());
    let recall = recall_at_10(&opened);
    assert!(recall >= 0.95, "recall@10 {recall}");

    let unchanged = index(dir.path(), &roots, &embedder, &keep);
    assert_eq!(
        unchanged.hnsw_rows_linked, 0,
        "a current graph is left alone"
    );

    // Another search breadth applies to the graph as it is: nothing is relinked or rewritten.
    let breadth = IndexOptions {
        hnsw: HnswSetting::Build(HnswParams {
            expansion_search: 512,
            ..HnswParams::default()
        }),
        ..IndexOptions::default()
    };
    let graph_file = dir.path().join("hnsw.usearch");
    let written = std::fs::metadata(&graph_file).unwrap().modified().unwrap();
    assert_eq!(
        index(dir.path(), &roots, &embedder, &breadth).hnsw_rows_linked,
        0
    );
    let rewritten = std::fs::metadata(&graph_file).unwrap().modified().unwrap();
    assert_eq!(written, rewritten, "only the stamp changes");
    index(dir.path(), &roots, &embedder, &keep);
    let info = Index::open(dir.path()).unwrap().hnsw().unwrap();
    assert_eq!(info.params.expansion_search, 512, "kept by later runs");
    assert_eq!(
        info.params.expansion_add,
        HnswParams::default().expansion_add
    );

    let remove = IndexOptions {
        hnsw: HnswSetting::Remove,
        ..IndexOptions::default()
    };
    index(dir.path(), &roots, &embedder, &remove);
    assert!(Index::open(dir.path()).unwrap().hnsw().is_none());
    assert!(!dir.path().join("hnsw.usearch").exists());
}
