//! What a walk meets in the folders it indexes: file names that are not UTF-8.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use scar_index::{Index, IndexOptions};

use crate::common::{assert_consistent, index, tiny_bert};

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
