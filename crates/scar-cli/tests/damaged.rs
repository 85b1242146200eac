//! A damaged index: every command says which file is damaged and which command repairs it.

use std::path::Path;

use crate::common::{documents, fails_with, run, scar_tiny};

/// Three small files indexed with the tiny model into `dir`; returns their folder.
fn built(dir: &Path) -> tempfile::TempDir {
    let docs = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "ferry.txt",
            "Ferries take kayaks for a fee. The fee is paid when you book.",
        ),
        (
            "tides.txt",
            "Tides turn twice a day. Kayakers plan crossings around them.",
        ),
        (
            "camp.txt",
            "Campsites open in May. Fires are allowed in the rings only.",
        ),
    ] {
        std::fs::write(docs.path().join(name), text).unwrap();
    }
    run(scar_tiny(dir).arg("index").arg(docs.path()));
    docs
}

#[test]
fn search_reports_vectors_that_are_not_finite() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    // The first row of the vector file is NaN: the first document's first chunk.
    let path = dir.path().join("vectors.0.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    for value in bytes[..16].chunks_exact_mut(4) {
        value.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&path, bytes).unwrap();
    let repair = format!("scar --index {} index --repair", dir.path().display());
    fails_with(
        scar_tiny(dir.path()).args(["search", "kayak fee", "--policy", "top_k"]),
        &repair,
    );
    fails_with(
        scar_tiny(dir.path()).args(["search", "kayak fee", "--first-stage", "dense"]),
        "camp.txt",
    );
    let verify = scar_tiny(dir.path())
        .args(["inspect", "--verify"])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert!(
        stdout.contains("camp.txt") && stdout.contains(&repair),
        "{stdout}"
    );
}

#[test]
fn repair_keeps_what_is_sound_and_the_index_works_again() {
    let dir = tempfile::tempdir().unwrap();
    let _docs = built(dir.path());
    let before = documents(dir.path());
    let path = dir.path().join("vectors.0.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();

    let output = run(scar_tiny(dir.path()).args(["index", "--repair"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("damaged: ") && stderr.contains("camp.txt"),
        "{stderr}"
    );
    assert!(stderr.contains("2 chunks reused"), "{stderr}");
    run(scar_tiny(dir.path()).args(["inspect", "--verify"]));
    run(scar_tiny(dir.path()).args(["search", "kayak fee", "--first-stage", "dense"]));
    assert_eq!(documents(dir.path()), before);
}

#[test]
fn a_repair_without_its_catalog_asks_for_the_folders_and_then_reuses_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let docs = built(dir.path());
    let before = documents(dir.path());
    std::fs::write(dir.path().join("text/meta.json"), b"{}").unwrap();
    fails_with(
        scar_tiny(dir.path()).args(["index", "--repair"]),
        "name the files and folders it indexed",
    );
    let output = run(scar_tiny(dir.path())
        .args(["index", "--repair"])
        .arg(docs.path()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("3 chunks reused"), "{stderr}");
    assert_eq!(documents(dir.path()), before);
}
