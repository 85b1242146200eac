//! Re-indexing embeds only what changed, drops what is gone, and compacts the leftovers.

use scar_index::{Index, IndexOptions};

use crate::common::{assert_consistent, index, small_corpus, tiny_bert};

#[test]
fn only_new_or_changed_files_are_embedded() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 4, 1500);
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];
    let options = IndexOptions::default();

    let first = index(dir.path(), &roots, &embedder, &options);
    assert_eq!((first.added, first.unchanged), (4, 0));

    let again = index(dir.path(), &roots, &embedder, &options);
    assert_eq!(
        (again.added, again.updated, again.unchanged, again.chunks),
        (0, 0, 4, 0)
    );

    std::fs::write(
        docs.path().join("part-001.txt"),
        "A completely new text about congestion windows.",
    )
    .unwrap();
    std::fs::remove_file(docs.path().join("part-002.txt")).unwrap();
    std::fs::write(
        docs.path().join("part-new.txt"),
        "Retransmission timeouts double after each loss.",
    )
    .unwrap();
    let changed = index(dir.path(), &roots, &embedder, &options);
    assert_eq!(
        (
            changed.added,
            changed.updated,
            changed.removed,
            changed.unchanged
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(changed.chunks, 2);

    let reopened = Index::open(dir.path()).unwrap();
    assert_eq!(reopened.documents().len(), 4);
    assert_eq!(
        reopened.catalog().dead_rows(),
        0,
        "replaced rows are compacted away"
    );
    assert_consistent(&reopened);
    let hits = reopened.bm25_search("congestion windows", 3).unwrap();
    let top = reopened.chunk(hits[0].0).unwrap();
    assert!(
        top.document.path.ends_with("part-001.txt"),
        "{}",
        top.document.path.display()
    );
}

#[test]
fn another_model_is_a_clear_error() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 1, 500);
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    index(
        dir.path(),
        &[docs.path().to_path_buf()],
        &embedder,
        &IndexOptions::default(),
    );
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap())
            .unwrap();
    manifest["model"]["id"] = "BAAI/bge-large-en-v1.5".into();
    std::fs::write(dir.path().join("manifest.json"), manifest.to_string()).unwrap();
    let error = scar_index::index_paths(
        dir.path(),
        &[docs.path().to_path_buf()],
        &embedder,
        &IndexOptions::default(),
        &mut |_| {},
        &std::sync::atomic::AtomicBool::default(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("bge-large"), "{error}");
}

#[test]
fn an_open_index_knows_when_a_writer_has_committed_since() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 2, 1500);
    let dir = tempfile::tempdir().unwrap();
    let roots = [docs.path().to_path_buf()];
    index(dir.path(), &roots, &tiny_bert(), &IndexOptions::default());
    let opened = Index::open(dir.path()).unwrap();
    assert!(opened.is_current());
    // A new file, indexed by another writer meanwhile.
    std::fs::write(
        docs.path().join("new.txt"),
        "Window scaling extends the window.",
    )
    .unwrap();
    index(dir.path(), &roots, &tiny_bert(), &IndexOptions::default());
    assert!(!opened.is_current());
    let reopened = Index::open(dir.path()).unwrap();
    assert!(reopened.is_current());
    assert_eq!(reopened.documents().len(), opened.documents().len() + 1);
}

#[test]
fn an_index_opened_while_it_is_written_is_never_reported_damaged() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 12, 1500);
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];
    let options = IndexOptions::default();
    index(dir.path(), &roots, &embedder, &options);

    let writing = std::sync::atomic::AtomicBool::new(true);
    let opened = std::thread::scope(|scope| {
        scope.spawn(|| {
            // The reader stops when this goes, even if the writer panics.
            struct Done<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(false, std::sync::atomic::Ordering::SeqCst);
                }
            }
            let _done = Done(&writing);
            // Files changed and removed: commits, and compactions into new generations.
            for round in 0..8 {
                let file = docs.path().join(format!("part-{round:03}.txt"));
                if round % 2 == 0 {
                    std::fs::remove_file(&file).unwrap();
                } else {
                    std::fs::write(&file, format!("Round {round} rewrote this file.")).unwrap();
                }
                index(dir.path(), &roots, &embedder, &options);
            }
        });
        let mut opened = 0;
        while writing.load(std::sync::atomic::Ordering::SeqCst) {
            if let Err(error) = Index::open(dir.path()) {
                panic!("opened while written: {error}");
            }
            opened += 1;
        }
        opened
    });
    assert!(opened > 10, "only {opened} opens");
    assert_consistent(&Index::open(dir.path()).unwrap());
}

/// A mail with `notes` attached as `notes.md`, or with nothing attached.
fn mail(notes: Option<&str>) -> String {
    let head = "From: ana@example.org\r\nSubject: Crane inspection\r\nMIME-Version: 1.0\r\n\
                Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\n\
                Content-Type: text/plain\r\n\r\nThe harbour crane passed its inspection.\r\n";
    let attachment = notes.map_or_else(String::new, |notes| {
        format!(
            "--b1\r\nContent-Type: text/markdown; name=\"notes.md\"\r\n\
             Content-Disposition: attachment; filename=\"notes.md\"\r\n\r\n{notes}\r\n"
        )
    });
    format!("{head}{attachment}--b1--\r\n")
}

#[test]
fn a_mail_and_its_attachment_are_documents_that_change_and_go_together() {
    let docs = tempfile::tempdir().unwrap();
    let path = docs.path().join("crane.eml");
    std::fs::write(
        &path,
        mail(Some("# Load test\n\nThe load test reached 14 tonnes.")),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];
    let options = IndexOptions::default();
    let documents = |dir: &std::path::Path| {
        let index = Index::open(dir).unwrap();
        assert_consistent(&index);
        index
            .documents()
            .iter()
            .map(|d| (d.name(), d.hash.clone()))
            .collect::<Vec<_>>()
    };

    let first = index(dir.path(), &roots, &embedder, &options);
    assert_eq!(first.added, 1, "one file: {first:#?}");
    let listed = documents(dir.path());
    let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["crane.eml", "crane.eml › notes.md"]);
    // Both carry the file's hash, so that a change to the file replaces both.
    assert_eq!(listed[0].1, listed[1].1);
    let reopened = Index::open(dir.path()).unwrap();
    let hits = reopened.bm25_search("load test tonnes", 1).unwrap();
    let top = reopened.chunk(hits[0].0).unwrap();
    assert_eq!(top.document.attachment.as_deref(), Some("notes.md"));
    assert_eq!(top.heading_path, "Load test");
    drop(reopened);

    let again = index(dir.path(), &roots, &embedder, &options);
    assert_eq!((again.unchanged, again.chunks), (1, 0), "{again:#?}");

    std::fs::write(&path, mail(None)).unwrap();
    let changed = index(dir.path(), &roots, &embedder, &options);
    assert_eq!((changed.updated, changed.added), (1, 0), "{changed:#?}");
    let names: Vec<String> = documents(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["crane.eml"]);

    std::fs::write(&path, mail(Some("A second note about the hook."))).unwrap();
    index(dir.path(), &roots, &embedder, &options);
    assert_eq!(documents(dir.path()).len(), 2);
    std::fs::remove_file(&path).unwrap();
    let removed = index(dir.path(), &roots, &embedder, &options);
    assert_eq!(removed.removed, 1, "one file: {removed:#?}");
    assert!(documents(dir.path()).is_empty());
}
