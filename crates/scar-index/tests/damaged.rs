//! A damaged index is refused with an error that names the damaged file and the command that
//! repairs it; nothing panics.

use std::path::Path;

use scar_index::{Index, IndexError, IndexOptions};

use crate::common::{assert_consistent, index, small_corpus, tiny_bert};

/// A small index of three files in `dir`, and the folder they came from.
fn built(dir: &Path) -> tempfile::TempDir {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 3, 1200);
    index(
        dir,
        &[docs.path().to_path_buf()],
        &tiny_bert(),
        &IndexOptions::default(),
    );
    docs
}

/// Opening fails with a damage report that names `file` and the repair command.
fn refused(dir: &Path, file: &str) -> IndexError {
    let error = Index::open(dir).expect_err("a damaged index opened");
    let message = error.to_string();
    assert!(matches!(error, IndexError::Damaged { .. }), "{error:?}");
    assert!(message.contains(file), "{file} not named: {message}");
    assert!(
        message.contains(&format!("scar --index {} index --repair", dir.display())),
        "{message}"
    );
    error
}

/// Rewrites the catalog, the text index's commit payload, with `change`.
fn edit_catalog(dir: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let meta_path = dir.join("text/meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    let mut catalog: serde_json::Value =
        serde_json::from_str(meta["payload"].as_str().unwrap()).unwrap();
    change(&mut catalog);
    meta["payload"] = catalog.to_string().into();
    std::fs::write(&meta_path, meta.to_string()).unwrap();
}

#[test]
fn random_chunk_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let path = dir.path().join("chunks.0.bin");
    let length = std::fs::metadata(&path).unwrap().len() as usize;
    let mut state = 0x5EEDu64;
    let noise: Vec<u8> = (0..length)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();
    std::fs::write(&path, noise).unwrap();
    refused(dir.path(), "chunks.0.bin");
}

#[test]
fn catalog_rows_out_of_range_are_refused_by_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let docs = built(dir.path());
    edit_catalog(dir.path(), |catalog| {
        catalog["documents"][1]["first_row"] = 1_000_000.into();
    });
    refused(dir.path(), "meta.json");
    let error = scar_index::index_paths(
        dir.path(),
        &[docs.path().to_path_buf()],
        &tiny_bert(),
        &IndexOptions::default(),
        &mut |_| {},
        &std::sync::atomic::AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(error.to_string().contains("--repair"), "{error}");
}

#[test]
fn a_manifest_of_zero_dimensions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    for vectors in ["f32", "f16"] {
        let path = dir.path().join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["model"]["dimension"] = 0.into();
        manifest["vectors"] = vectors.into();
        std::fs::write(&path, manifest.to_string()).unwrap();
        refused(dir.path(), "manifest.json");
    }
}

#[test]
fn a_short_vector_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let path = dir.path().join("vectors.0.bin");
    let length = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(length - 3)
        .unwrap();
    refused(dir.path(), "vectors.0.bin");
}

/// Flips the bits of the byte in the middle of `path`.
fn flip_middle(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn damaged_graph_and_text_files_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 3, 1200);
    let options = IndexOptions {
        hnsw: scar_index::HnswSetting::Build(scar_index::HnswParams::default()),
        ..IndexOptions::default()
    };
    index(
        dir.path(),
        &[docs.path().to_path_buf()],
        &tiny_bert(),
        &options,
    );
    let pristine = tempfile::tempdir().unwrap();
    copy(dir.path(), pristine.path());

    flip_middle(&dir.path().join("hnsw.usearch"));
    refused(dir.path(), "hnsw.usearch");

    // A file of the text index's segment, by its extension.
    let segment_file = |extension: &str| {
        std::fs::read_dir(dir.path().join("text"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == extension))
            .unwrap()
    };
    copy(pristine.path(), dir.path());
    let term = segment_file("term");
    flip_middle(&term);
    refused(dir.path(), term.file_name().unwrap().to_str().unwrap());

    // tantivy opens a segment's files when a search first needs them: a missing one is found
    // when the index opens, not by the search that needs it.
    copy(pristine.path(), dir.path());
    let positions = segment_file("pos");
    std::fs::remove_file(&positions).unwrap();
    refused(dir.path(), positions.file_name().unwrap().to_str().unwrap());
}

/// Flips bit `bit` of byte `at` of the file `path`.
fn flip_bit(path: &Path, at: usize, bit: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 1 << bit;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_bit_in_a_chunk_is_found_by_verify_and_not_reused_by_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let pristine = tempfile::tempdir().unwrap();
    copy(dir.path(), pristine.path());
    let index = Index::open(dir.path()).unwrap();
    let total = index.len();
    let document = index.documents()[1].clone();
    assert!(document.chunk_count >= 2, "{document:?}");
    let row = document.first_row + 1;
    let dimension = index.manifest().model.dimension;
    let text = index
        .chunk(scar_core::ChunkId(row))
        .unwrap()
        .text
        .to_owned();
    drop(index);
    let strings = std::fs::read(dir.path().join("strings.0.bin")).unwrap();
    let text_at = strings
        .windows(text.len())
        .position(|w| w == text.as_bytes())
        .unwrap();
    let letter = text.find(|c: char| c.is_ascii_alphabetic()).unwrap();
    // (file, byte, bit, whether only the checksum can tell)
    let damage = [
        // A vector's first value changes sign: still a finite unit vector, but the stored
        // continuity may no longer match it.
        ("vectors.0.bin", row as usize * dimension * 4 + 3, 7, false),
        // The record's section id (its eighth word).
        ("chunks.0.bin", row as usize * 56 + 7 * 4, 0, true),
        // A letter of the text changes case: still UTF-8.
        ("strings.0.bin", text_at + letter, 5, true),
    ];
    for (file, at, bit, only_checksum) in damage {
        copy(pristine.path(), dir.path());
        flip_bit(&dir.path().join(file), at, bit);
        let problems = Index::open(dir.path()).unwrap().verify().unwrap();
        let named = document.path.display().to_string();
        assert!(
            !problems.is_empty() && problems.iter().all(|p| p.starts_with(&named)),
            "{file}: {problems:#?}"
        );
        if only_checksum {
            assert!(
                problems[0].ends_with("differ from what was indexed"),
                "{file}: {problems:#?}"
            );
        }
        // The damaged document's vectors are not reused: its chunks are embedded again.
        let (fresh, report) = rebuilt(dir.path(), &[]);
        let chunks = document.chunk_count as usize;
        assert_eq!(
            (report.chunks, report.reused),
            (chunks, total - chunks),
            "{file}: {report:#?}"
        );
        let repaired = Index::open(fresh.path()).unwrap();
        assert_eq!(repaired.verify().unwrap(), Vec::<String>::new());
        assert_consistent(&repaired);
    }
}

#[test]
fn a_catalog_written_before_checksums_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    edit_catalog(dir.path(), |catalog| {
        for document in catalog["documents"].as_array_mut().unwrap() {
            assert!(
                document
                    .as_object_mut()
                    .unwrap()
                    .remove("checksum")
                    .is_some()
            );
        }
    });
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.verify().unwrap(), Vec::<String>::new());
    assert!(index.documents().iter().all(|d| d.checksum.is_none()));
}

/// Copies the files of the index folder `from` over those in `to`.
fn copy(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Builds the index in `dir` again into a folder beside it from what [`Salvage`] reads, with
/// `paths` added to the files its catalog lists.
fn rebuilt(
    dir: &Path,
    paths: &[std::path::PathBuf],
) -> (tempfile::TempDir, scar_index::IndexReport) {
    let salvage = scar_index::Salvage::read(dir).unwrap();
    let mut files = salvage.documents.clone().unwrap_or_default();
    files.extend_from_slice(paths);
    let fresh = tempfile::tempdir().unwrap();
    let report = salvage
        .rebuild_into(
            fresh.path(),
            &files,
            &tiny_bert(),
            &IndexOptions::default(),
            &mut |_| {},
            &std::sync::atomic::AtomicBool::new(false),
        )
        .unwrap();
    (fresh, report)
}

#[test]
fn a_repair_re_embeds_only_the_documents_whose_vectors_are_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let index = Index::open(dir.path()).unwrap();
    let total = index.len();
    // The first vector is damaged: it belongs to the first document, all of whose rows are
    // then distrusted (its checksum fails).
    let damaged = index.documents()[0].chunk_count as usize;
    drop(index);
    let path = dir.path().join("vectors.0.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();

    let salvage = scar_index::Salvage::read(dir.path()).unwrap();
    assert_eq!(salvage.damage.len(), 1, "{:?}", salvage.damage);
    assert!(salvage.damage[0].contains("vector"), "{:?}", salvage.damage);
    let (fresh, report) = rebuilt(dir.path(), &[]);
    assert_eq!(
        (report.chunks, report.reused),
        (damaged, total - damaged),
        "{report:#?}"
    );
    let repaired = Index::open(fresh.path()).unwrap();
    assert_eq!(repaired.len(), total);
    assert_consistent(&repaired);
}

#[test]
fn a_lost_catalog_loses_the_file_list_but_not_the_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let docs = built(dir.path());
    let total = Index::open(dir.path()).unwrap().len();
    std::fs::write(dir.path().join("text/meta.json"), b"").unwrap();

    let salvage = scar_index::Salvage::read(dir.path()).unwrap();
    assert_eq!(salvage.documents, None);
    assert!(
        salvage.damage[0].contains("meta.json"),
        "{:?}",
        salvage.damage
    );
    assert_eq!(salvage.sound_vectors(), total);
    let (fresh, report) = rebuilt(dir.path(), &[docs.path().to_path_buf()]);
    assert_eq!((report.chunks, report.reused), (0, total), "{report:#?}");
    assert_consistent(&Index::open(fresh.path()).unwrap());
}

#[test]
fn vectors_of_another_model_are_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let path = dir.path().join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["model"]["id"] = "another-model".into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let (_fresh, report) = rebuilt(dir.path(), &[]);
    assert_eq!(report.reused, 0, "{report:#?}");
    assert!(report.chunks > 0);
}
