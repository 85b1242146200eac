use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles, Precision};
use scar_index::{Index, IndexOptions, IndexReport, index_paths};

// The two fixtures scar-index's tests need are written here rather than taken from
// scar-test-support, which depends on this crate.

/// The corpora of the shared data folder beside the checkout.
pub fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/corpora")
}

/// A BERT with all-MiniLM-L6-v2's tokenizer, 2 layers of width 32 and random weights
/// (`scripts/make-bge-shaped-model tiny`, installed by `scripts/fetch-test-models`): different
/// texts get different vectors, equal texts equal ones, at a fraction of a real model's cost.
pub fn tiny_bert() -> Embedder {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/bge-tiny-shape");
    let files = ModelFiles::from_dir("bge-tiny-shape", folder)
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    let options = EmbedOptions::new(DeviceChoice::Cpu, Precision::Auto);
    Embedder::load(&files, &options).expect("the test model loads")
}

pub fn index(
    dir: &Path,
    roots: &[PathBuf],
    embedder: &Embedder,
    options: &IndexOptions,
) -> IndexReport {
    index_paths(
        dir,
        roots,
        embedder,
        options,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap()
}

/// Asserts the index is consistent and every chunk maps back into its document's text.
pub fn assert_consistent(index: &Index) {
    let problems = index.verify().unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    for document in index.documents() {
        let loaded = scar_index::load_document(&document.path, &scar_index::LoadOptions::default())
            .unwrap()
            .into_part(document.attachment.as_deref())
            .unwrap();
        let chars: Vec<char> = loaded.text.chars().collect();
        for (ordinal, id) in (0..).zip(document.rows().map(scar_core::ChunkId)) {
            let chunk = index.chunk(id).unwrap();
            assert_eq!(
                chunk.ordinal,
                ordinal,
                "ordinals contiguous in {}",
                document.path.display()
            );
            assert_eq!(&loaded.text[chunk.bytes.clone()], chunk.text);
            assert_eq!(
                chars[chunk.chars.clone()].iter().collect::<String>(),
                chunk.text
            );
        }
    }
}

/// Writes `count` small text files cut from the RFC into `dir`.
pub fn small_corpus(dir: &Path, count: usize, bytes_each: usize) {
    let text = std::fs::read_to_string(corpora().join("rfc9293.txt")).unwrap();
    let paragraphs: Vec<&str> = text.split("\n\n").filter(|p| p.trim().len() > 80).collect();
    let mut next = 0;
    for i in 0..count {
        let mut body = String::new();
        while body.len() < bytes_each {
            body.push_str(paragraphs[next % paragraphs.len()]);
            body.push_str("\n\n");
            next += 1;
        }
        std::fs::write(dir.join(format!("part-{i:03}.txt")), body).unwrap();
    }
}
