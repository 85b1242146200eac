//! What a walk meets in the folders it indexes: file names that are not UTF-8, and indexes,
//! its own among them.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use scar_index::{Index, IndexOptions};

use crate::common::{assert_consistent, index, small_corpus, tiny_bert};

#[test]
fn file_names_that_are_not_utf8_are_indexed_and_kept_exactly() {
    let docs = tempfile::tempdir().unwrap();
    let odd = OsStr::from_bytes(b"bad\xffname.txt");
    std::fs::write(
        docs.path().join(odd),
        "A file whose name is not UTF-8, about the three-way handshake.",
    )
    .unwrap();
    std::fs::write(
        docs.path().join("good.txt"),
        "A file about sequence numbers.",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];

    let first = index(dir.path(), &roots, &embedder, &IndexOptions::default());
    assert_eq!((first.added, first.skipped.len()), (2, 0), "{first:#?}");
    let opened = Index::open(dir.path()).unwrap();
    assert!(
        opened
            .documents()
            .iter()
            .any(|d| d.path.file_name() == Some(odd)),
        "{:?}",
        opened.documents()
    );
    assert_consistent(&opened);

    let again = index(dir.path(), &roots, &embedder, &IndexOptions::default());
    assert_eq!((again.added, again.unchanged), (0, 2), "{again:#?}");
}

#[test]
fn indexes_inside_the_indexed_folder_are_left_out() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 2, 800);
    let embedder = tiny_bert();
    // Another index in a subfolder, and this one inside the folder it indexes, named relatively
    // (as `cd docs && scar --index ./scar-index index .` names it).
    let other = docs.path().join("notes/old-index");
    index(
        &other,
        &[docs.path().join("part-000.txt")],
        &embedder,
        &IndexOptions::default(),
    );
    let dir = docs.path().join("sub/../scar-index");
    let roots = [docs.path().join(".")];
    let first = index(&dir, &roots, &embedder, &IndexOptions::default());
    assert_eq!((first.added, first.skipped.len()), (2, 0), "{first:#?}");
    let chunks = Index::open(&dir).unwrap().len();
    let again = index(&dir, &roots, &embedder, &IndexOptions::default());
    assert_eq!((again.added, again.unchanged), (0, 2), "{again:#?}");
    let opened = Index::open(&dir).unwrap();
    assert_eq!(opened.len(), chunks);
    assert_consistent(&opened);
}
