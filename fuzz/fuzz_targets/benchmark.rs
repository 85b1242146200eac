//! The benchmark reader on arbitrary bytes as a benchmark file over a two-file corpus: reading
//! and resolving may fail; they must not panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use scar_eval::{Benchmark, resolve};

/// A corpus folder with two small documents, made once per process.
fn corpus() -> &'static PathBuf {
    static CORPUS: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &CORPUS
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temporary folder");
            let corpus = dir.path().join("corpus");
            std::fs::create_dir(&corpus).expect("the corpus folder");
            std::fs::write(
                corpus.join("a.txt"),
                "The ferry leaves at nine. Kayaks cost five.",
            )
            .expect("a.txt");
            std::fs::write(corpus.join("b.md"), "# Rules\n\nNo dogs on deck.\n").expect("b.md");
            (dir, corpus)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let corpus = corpus();
    let file = corpus
        .parent()
        .expect("inside the temporary folder")
        .join("benchmark.json");
    std::fs::write(&file, data).expect("the benchmark file");
    if let Ok(benchmark) = Benchmark::load(&file) {
        let _ = resolve(&benchmark, &file, corpus, None);
    }
});
