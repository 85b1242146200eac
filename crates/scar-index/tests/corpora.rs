//! Index every corpus in ../shared/data/corpora, reopen, and check each chunk against its source.

use scar_index::{Index, IndexOptions};

use crate::common::{assert_consistent, corpora, index, tiny_bert};

#[test]
fn all_corpora_index_and_map_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let report = index(
        dir.path(),
        &[corpora()],
        &embedder,
        &IndexOptions::default(),
    );
    assert!(report.is_complete(), "{report:#?}");
    // Five corpus texts; SOURCES.md and SHA256SUMS are text files too.
    assert_eq!(report.added, 7, "{report:#?}");
    let reopened = Index::open(dir.path()).unwrap();
    assert_eq!(reopened.len(), report.chunks);
    assert_consistent(&reopened);
    assert!(reopened.len() > 1500, "{} chunks", reopened.len());
}
