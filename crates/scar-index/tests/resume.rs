//! A cancel takes effect within one call to the model, even inside one large file, and what a
//! stopped run embedded for a document it did not finish is not embedded again by the next one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use scar_index::{Index, IndexOptions, index_paths};

use crate::common::{assert_consistent, index, small_corpus, tiny_bert};

/// The most chunks one call to the model may embed in these tests.
const SLICE: usize = 16;

#[test]
fn a_cancel_inside_a_large_file_stops_soon_and_the_next_run_resumes() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 1, 200_000);
    let dir = tempfile::tempdir().unwrap();
    let roots = [docs.path().to_path_buf()];
    let embedder = tiny_bert();
    let options = IndexOptions {
        embed_batch_chunks: SLICE,
        ..IndexOptions::default()
    };

    let cancel = AtomicBool::new(false);
    let stopped = index_paths(
        dir.path(),
        &roots,
        &embedder,
        &options,
        &mut |progress| {
            if progress.chunks >= 40 {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .unwrap();
    assert!(stopped.cancelled, "{stopped:#?}");
    assert!(
        (40..40 + SLICE).contains(&stopped.chunks),
        "{} chunks embedded after the cancel at 40",
        stopped.chunks
    );
    assert!(Index::open(dir.path()).unwrap().is_empty());
    assert!(dir.path().join("resume.journal").is_file());

    let resumed = index(dir.path(), &roots, &embedder, &options);
    assert!(resumed.is_complete(), "{resumed:#?}");
    assert_eq!(resumed.reused, stopped.chunks, "{resumed:#?}");
    assert!(!dir.path().join("resume.journal").exists());
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(resumed.reused + resumed.chunks, index.len());
    assert_consistent(&index);
    assert_same_vectors(&index, dir.path(), &roots);
}

/// The vectors of `index` are those a clean run over `roots` makes.
fn assert_same_vectors(index: &Index, dir: &Path, roots: &[std::path::PathBuf]) {
    let clean = tempfile::tempdir().unwrap();
    index_clean(clean.path(), roots);
    let clean = Index::open(clean.path()).unwrap();
    assert_eq!(clean.len(), index.len(), "{}", dir.display());
    for (a, b) in clean.chunk_ids().zip(index.chunk_ids()) {
        let cosine = scar_core::cosine(clean.embedding(a), index.embedding(b));
        assert!(
            cosine > 0.9999,
            "chunk {b}: cosine {cosine} with a clean run"
        );
    }
}

fn index_clean(dir: &Path, roots: &[std::path::PathBuf]) {
    index(dir, roots, &tiny_bert(), &IndexOptions::default());
}
