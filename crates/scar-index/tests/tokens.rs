//! A chunk's stored token count is what `count_tokens` gives for its text, whether the model's
//! count of what it embedded gave it or the text was tokenized again.

use scar_index::{ChunkUnit, ChunkerConfig, Index, IndexOptions};

use crate::common::{index, small_corpus, tiny_bert};

#[test]
fn stored_token_counts_are_the_chunks_own() {
    let docs = tempfile::tempdir().unwrap();
    small_corpus(docs.path(), 3, 6000);
    let section = "Mooring lines are checked at every tide. ".repeat(40);
    std::fs::write(
        docs.path().join("harbour.md"),
        format!("# Harbour rules\n\n## Mooring\n\n{section}\n\n## Fees\n\n{section}\n"),
    )
    .unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_path_buf()];
    let chunkers = [
        // Every chunk embedded as its own text: counted by the model.
        ChunkerConfig::default(),
        // Chunks under a heading embedded with it in front: tokenized again.
        ChunkerConfig {
            prepend_headings: true,
            ..ChunkerConfig::default()
        },
        // Chunks longer than the model reads, truncated: tokenized again.
        ChunkerConfig {
            unit: ChunkUnit::Characters,
            capacity: 4000,
            ..ChunkerConfig::default()
        },
    ];
    for chunker in chunkers {
        let dir = tempfile::tempdir().unwrap();
        let options = IndexOptions {
            chunker,
            ..IndexOptions::default()
        };
        index(dir.path(), &roots, &embedder, &options);
        let opened = Index::open(dir.path()).unwrap();
        let chunks: Vec<_> = opened
            .chunk_ids()
            .map(|id| opened.chunk(id).unwrap())
            .collect();
        for chunk in &chunks {
            let expected = embedder.count_tokens(chunk.text).unwrap();
            assert_eq!(
                chunk.token_count, expected,
                "{chunker:?}, chunk {}",
                chunk.id
            );
        }
        if chunker.prepend_headings {
            assert!(chunks.iter().any(|c| !c.heading_path.is_empty()));
        }
        if chunker.unit == ChunkUnit::Characters {
            let longest = chunks.iter().map(|c| c.token_count).max().unwrap();
            assert!(longest >= embedder.info().max_tokens, "{longest} tokens");
        }
    }
}
