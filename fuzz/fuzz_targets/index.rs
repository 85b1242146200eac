//! The index reader on a damaged index: one file of a small, sound index (or the catalog inside
//! the text index's commit) is replaced or overwritten in part with arbitrary bytes. Opening may
//! fail; it must not panic, and an index that opens must be readable everywhere without one.
//!
//! The first byte picks what is damaged ([`TARGETS`]), the second whether the rest replaces it
//! (even) or is written over it at the offset in the next two bytes (odd).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use libfuzzer_sys::fuzz_target;
use scar_core::Side;
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles};
use scar_index::{Index, IndexOptions, index_paths};

/// The index's own files; `CATALOG` stands for the catalog, which lives in `text/meta.json`.
const TARGETS: [&str; 6] = [
    "manifest.json",
    "chunks.0.bin",
    "strings.0.bin",
    "vectors.0.bin",
    "text/meta.json",
    CATALOG,
];
const CATALOG: &str = "catalog";

struct Sound {
    /// Keeps the folder alive.
    _dir: tempfile::TempDir,
    index: PathBuf,
    /// Each target's sound bytes, to put back after every input.
    originals: Vec<(PathBuf, Vec<u8>)>,
}

/// A small index of two documents embedded with the tiny random BERT, made once per process.
fn sound() -> &'static Sound {
    static SOUND: OnceLock<Sound> = OnceLock::new();
    SOUND.get_or_init(|| {
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/bge-tiny-shape");
        let files = ModelFiles::from_dir("bge-tiny-shape", model)
            .expect("the tiny BERT: run scripts/fetch-test-models first");
        let options = EmbedOptions {
            device: DeviceChoice::Cpu,
            ..EmbedOptions::default()
        };
        let embedder = Embedder::load(&files, &options).expect("the tiny BERT loads");
        let dir = tempfile::tempdir().expect("a temporary folder");
        let docs = dir.path().join("docs");
        std::fs::create_dir(&docs).expect("the documents folder");
        let paragraph = "The ferry leaves at nine and returns at six. Kayaks cost five a day. ";
        std::fs::write(docs.join("a.txt"), paragraph.repeat(40)).expect("a.txt");
        std::fs::write(
            docs.join("b.md"),
            format!("# Rules\n\n{}", paragraph.repeat(25)),
        )
        .expect("b.md");
        let index = dir.path().join("index");
        index_paths(
            &index,
            &[docs],
            &embedder,
            &IndexOptions::default(),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .expect("the sound index builds");
        let originals = TARGETS[..5]
            .iter()
            .map(|name| {
                let path = index.join(name);
                let bytes = std::fs::read(&path).expect("an index file");
                (path, bytes)
            })
            .collect();
        Sound {
            _dir: dir,
            index,
            originals,
        }
    })
}

/// The bytes of `target` after the input's damage; `None` when the input is too short.
fn damaged(sound: &Sound, data: &[u8]) -> Option<(PathBuf, Vec<u8>)> {
    let (&[pick, mode], rest) = data.split_first_chunk::<2>()?;
    let target = TARGETS[usize::from(pick) % TARGETS.len()];
    let (path, original) = if target == CATALOG {
        &sound.originals[4]
    } else {
        &sound.originals[usize::from(pick) % TARGETS.len()]
    };
    let written = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        let (&offset, patch) = rest.split_first_chunk::<2>()?;
        let mut bytes = original.clone();
        let at = usize::from(u16::from_le_bytes(offset)) % (bytes.len() + 1);
        let end = (at + patch.len()).min(bytes.len());
        bytes.splice(at..end, patch.iter().copied());
        bytes
    };
    if target != CATALOG {
        return Some((path.clone(), written));
    }
    // The catalog is the commit's payload: a JSON string inside tantivy's meta.json.
    let mut meta: serde_json::Value = serde_json::from_slice(original).expect("sound meta.json");
    meta["payload"] = String::from_utf8_lossy(&written).into_owned().into();
    Some((path.clone(), meta.to_string().into_bytes()))
}

/// Everything a search, a policy and `inspect` read.
fn read_everything(index: &Index) {
    let _ = index.verify();
    let ids: Vec<_> = index.chunk_ids().collect();
    for &id in &ids {
        let _ = index.chunk(id).map(|chunk| chunk.text.len());
        let _ = index.embedding(id).len();
        let _ = index.position(id);
        let _ = index.continuity_next(id);
        for side in [Side::Previous, Side::Next] {
            let _ = index.neighbour(id, side);
            let _ = index.seam(id, side);
        }
    }
    // A real query has the manifest's dimension (the embedder is checked against it); a damaged
    // manifest's may be huge, and a query of another length must be refused, not read past.
    let dimension = index.manifest().model.dimension.min(1 << 12);
    let query = vec![1.0 / (dimension as f32).sqrt(); dimension];
    let _ = index.dense_search(&query, 5);
    let _ = index.exact_dense_search(&query, 5);
    let _ = index.bm25_search("ferry kayaks", 5);
    let slots: Vec<u32> = index.documents().iter().map(|d| d.slot).collect();
    let rows = index.rows_of(&slots);
    let _ = index.dense_search_among(&query, &rows, 5);
    let _ = index.bm25_search_among("ferry", &rows, 5);
}

fuzz_target!(|data: &[u8]| {
    let sound = sound();
    let Some((path, bytes)) = damaged(sound, data) else {
        return;
    };
    std::fs::write(&path, bytes).expect("the damaged file");
    if let Ok(index) = Index::open(&sound.index) {
        read_everything(&index);
    }
    for (path, original) in &sound.originals {
        std::fs::write(path, original).expect("the sound file back");
    }
});
