//! A folder holding every kind of bad input: each file is named with its reason, the rest is
//! indexed, and the report says the run was partial.

use std::path::Path;

use scar_index::{Index, IndexOptions, LoadOptions};

use crate::common::{assert_consistent, index, tiny_bert};

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
#[allow(clippy::too_many_lines)] // one fixture per kind of bad input, then one check for each
fn bad_files_are_reported_and_the_rest_is_indexed() {
    let docs = tempfile::tempdir().unwrap();
    let d = docs.path();
    write(
        d,
        "good.txt",
        "A good file about the three-way handshake that opens a TCP connection.",
    );
    write(
        d,
        "good.md",
        "# Title\n\nSome markdown text about sequence numbers.\n",
    );
    write(d, "empty.txt", "");
    write(d, "blank.txt", "   \n\t\n");
    let mut mostly_invalid = vec![0xC3u8, 0x28, 0xA0, 0xA1, 0xFF, 0xFE];
    mostly_invalid.extend(std::iter::repeat_n(0xFFu8, 200));
    write(d, "latin.txt", mostly_invalid);
    let mut slightly_invalid = "Nearly valid UTF-8 text about retransmission. "
        .repeat(40)
        .into_bytes();
    slightly_invalid.push(0xFF);
    write(d, "slightly-invalid.txt", slightly_invalid);
    write(d, "huge.txt", "x".repeat(3 * 1024 * 1024));
    write(
        d,
        "corrupt.pdf",
        b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ngarbage",
    );
    write(
        d,
        "nested.html",
        format!(
            "<html><body>{}deep text{}</body></html>",
            "<div>".repeat(100_000),
            "</div>".repeat(100_000)
        ),
    );
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend([0u8; 64]);
    write(d, "image.png", png);
    std::os::unix::fs::symlink(d.join("loop"), d.join("loop")).unwrap();
    std::os::unix::fs::symlink(d.join("missing-target.txt"), d.join("dangling.txt")).unwrap();
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::os::unix::fs::symlink(d, sub.join("back-to-top")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let options = IndexOptions {
        load: LoadOptions {
            max_file_bytes: 2 * 1024 * 1024,
            ..LoadOptions::default()
        },
        ..IndexOptions::default()
    };
    let report = index(dir.path(), &[d.to_path_buf()], &embedder, &options);
    assert!(!report.is_complete());
    let reason = |name: &str| {
        report
            .skipped
            .iter()
            .find(|s| s.path.file_name().is_some_and(|f| f == name))
            .map_or_else(
                || panic!("{name} not reported: {report:#?}"),
                |s| s.reason.clone(),
            )
    };
    for (name, words) in [
        ("empty.txt", "empty"),
        ("blank.txt", "empty"),
        ("latin.txt", "UTF-8"),
        ("huge.txt", "limit"),
        ("corrupt.pdf", "PDF"),
        ("image.png", "binary"),
        ("dangling.txt", ""),
    ] {
        let why = reason(name);
        assert!(
            why.to_lowercase().contains(&words.to_lowercase()),
            "{name}: {why}"
        );
    }
    assert!(
        report.skipped.iter().any(|s| s.reason.contains("loop")),
        "{report:#?}"
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.path.ends_with("slightly-invalid.txt")),
        "{report:#?}"
    );

    let opened = Index::open(dir.path()).unwrap();
    let names: Vec<String> = opened
        .documents()
        .iter()
        .map(|doc| doc.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in ["good.txt", "good.md", "slightly-invalid.txt", "nested.html"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not indexed: {names:?}"
        );
    }
    assert_consistent(&opened);

    // The index keeps the list: every skipped file with its reason, until a run reads it.
    let mut expected = report.skipped.clone();
    expected.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(scar_index::skipped_files(dir.path()).unwrap(), expected);
    write(d, "empty.txt", "Now a file about window scaling.");
    let again = index(dir.path(), &[d.to_path_buf()], &embedder, &options);
    assert_eq!(again.added, 1, "{again:#?}");
    let listed = scar_index::skipped_files(dir.path()).unwrap();
    assert_eq!(listed.len(), expected.len() - 1, "{listed:#?}");
    assert!(!listed.iter().any(|s| s.path.ends_with("empty.txt")));
}

/// A file the process died reading (simulated: the run's marker naming it is left behind, as
/// an abort or a kill leaves it) is read again, last, after the rest of the folder is
/// committed: a person may have killed that run. Read through, it is indexed and forgotten.
#[test]
fn a_file_a_run_died_reading_is_read_again_last() {
    let docs = tempfile::tempdir().unwrap();
    let d = docs.path();
    write(d, "good.txt", "The ferry takes kayaks for eight euros.");
    write(d, "bomb.txt", "Pretend this file aborts the reader.");
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let options = IndexOptions::default();
    let first = index(dir.path(), &[d.to_path_buf()], &embedder, &options);
    assert!(first.is_complete());

    // The next run died while reading the bomb, which had changed.
    write(
        d,
        "bomb.txt",
        "Pretend this file aborts the reader, now worse.",
    );
    write(
        d,
        "late.txt",
        "A file added since, indexed before the suspect.",
    );
    let bomb = d.join("bomb.txt").canonicalize().unwrap();
    let metadata = std::fs::metadata(&bomb).unwrap();
    let modified_ns = metadata
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let marker = serde_json::json!({
        "path": bomb, "size": metadata.len(), "modified_ns": modified_ns,
    });
    std::fs::write(dir.path().join("reading.json"), marker.to_string()).unwrap();

    let report = index(dir.path(), &[d.to_path_buf()], &embedder, &options);
    assert!(report.is_complete(), "{:?}", report.skipped);
    assert_eq!((report.added, report.updated), (1, 1));
    assert!(!dir.path().join("reading.json").exists());
    assert!(!dir.path().join("quarantine.json").exists());
    let index = Index::open(dir.path()).unwrap();
    // Read last: stored after the file added since, which sorts after it.
    let last = index.documents().iter().max_by_key(|d| d.slot).unwrap();
    assert_eq!(last.path, bomb);
    assert_consistent(&index);
}

/// The documents of a folder that was deleted leave the index at the next run over it.
#[test]
fn a_deleted_folder_takes_its_documents_with_it() {
    let docs = tempfile::tempdir().unwrap();
    let folder = docs.path().join("trip");
    std::fs::create_dir(&folder).unwrap();
    write(
        &folder,
        "ferry.txt",
        "The ferry takes kayaks for eight euros.",
    );
    write(&folder, "tides.txt", "High tide is at six in the morning.");
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let options = IndexOptions::default();
    let first = index(
        dir.path(),
        std::slice::from_ref(&folder),
        &embedder,
        &options,
    );
    assert_eq!(first.added, 2);

    std::fs::remove_dir_all(&folder).unwrap();
    let report = index(
        dir.path(),
        std::slice::from_ref(&folder),
        &embedder,
        &options,
    );
    assert_eq!(report.removed, 2);
    assert_eq!(Index::open(dir.path()).unwrap().documents().len(), 0);
}

/// A file a link led to from outside its folder belongs to the folder it was found from: it
/// leaves the index when the link goes, when the link leads elsewhere, or with the folder.
#[test]
fn files_reached_through_links_leave_with_the_link_or_the_folder() {
    use std::os::unix::fs::symlink;

    let docs = tempfile::tempdir().unwrap();
    let (folder, outside) = (docs.path().join("trip"), docs.path().join("outside"));
    let (elsewhere, other) = (docs.path().join("elsewhere"), docs.path().join("other"));
    for dir in [&folder, &outside, &elsewhere, &other] {
        std::fs::create_dir(dir).unwrap();
    }
    write(
        &folder,
        "ferry.txt",
        "The ferry takes kayaks for eight euros.",
    );
    write(
        &outside,
        "walrus.txt",
        "A walrus was seen on the north pier.",
    );
    write(
        &elsewhere,
        "narwhal.txt",
        "Narwhals are rare this far south.",
    );
    write(&other, "tides.txt", "High tide is at six in the morning.");
    symlink(outside.join("walrus.txt"), folder.join("walrus-link.txt")).unwrap();
    symlink(&elsewhere, folder.join("far")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let options = IndexOptions::default();
    let run = |roots: &[std::path::PathBuf]| index(dir.path(), roots, &embedder, &options);
    let names = || {
        let mut names: Vec<String> = Index::open(dir.path())
            .unwrap()
            .documents()
            .iter()
            .map(|d| d.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(run(std::slice::from_ref(&folder)).added, 3);
    // Another folder's run leaves them alone.
    assert_eq!(run(std::slice::from_ref(&other)).removed, 0);
    assert_eq!(
        names(),
        ["ferry.txt", "narwhal.txt", "tides.txt", "walrus.txt"]
    );

    std::fs::remove_file(folder.join("walrus-link.txt")).unwrap();
    assert_eq!(run(std::slice::from_ref(&folder)).removed, 1);
    assert_eq!(names(), ["ferry.txt", "narwhal.txt", "tides.txt"]);

    std::fs::remove_dir_all(&folder).unwrap();
    assert_eq!(run(std::slice::from_ref(&folder)).removed, 2);
    assert_eq!(names(), ["tides.txt"]);
    assert_consistent(&Index::open(dir.path()).unwrap());
}
