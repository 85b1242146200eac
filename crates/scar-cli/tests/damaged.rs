//! A damaged index: every command says which file is damaged and which command repairs it.

use std::path::Path;

use crate::common::{fails_with, run, scar_tiny};

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
