//! Documents in any language: each document's language is told; BM25 in a new index cuts
//! Japanese into pairs and keeps Devanagari words whole, so a question finds its chunk in
//! either; an index made before the analyzer was recorded keeps its own words and keeps
//! working.

use std::path::Path;

use scar_index::{Analyzer, Index, IndexOptions};

use crate::common::{index, tiny_bert};

const JAPANESE: &str = "各当事者は、契約を終了する三十日前までに書面で通知しなければなりません。\n\n\
                        未払いの料金は、終了日から十日以内に精算されます。\n";
const HINDI: &str = "किसी भी पक्ष को अनुबंध समाप्त करने से तीस दिन पहले लिखित सूचना देनी होगी।\n\n\
                     बकाया शुल्क का भुगतान समाप्ति के दस दिनों के भीतर किया जाएगा।\n";
const ENGLISH: &str = "Kayaks cost eight euros a crossing, paid when you book.\n\n\
                       Bicycles travel free on every ferry.\n";

fn write_documents(dir: &Path) {
    std::fs::write(dir.join("keiyaku.txt"), JAPANESE).unwrap();
    std::fs::write(dir.join("anubandh.txt"), HINDI).unwrap();
    std::fs::write(dir.join("ferry.txt"), ENGLISH).unwrap();
}

/// The text of the best BM25 hit for `question`.
fn best(index: &Index, question: &str) -> String {
    let hits = index.bm25_search(question, 1).unwrap();
    assert!(!hits.is_empty(), "nothing found for {question:?}");
    index.chunk(hits[0].0).unwrap().text.to_owned()
}

#[test]
fn questions_in_japanese_and_hindi_find_their_chunks() {
    let docs = tempfile::tempdir().unwrap();
    write_documents(docs.path());
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions {
        chunker: scar_index::ChunkerConfig {
            unit: scar_index::ChunkUnit::Characters,
            capacity: 80,
            ..Default::default()
        },
        ..IndexOptions::default()
    };
    index(
        dir.path(),
        &[docs.path().to_owned()],
        &tiny_bert(),
        &options,
    );
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.manifest().analyzer, Analyzer::Multilingual);
    let languages: Vec<String> = index.languages().iter().map(ToString::to_string).collect();
    assert_eq!(
        languages,
        ["English 1", "Hindi 1", "Japanese 1"],
        "each document's language is told when it is indexed"
    );
    assert!(best(&index, "通知は何日前までにしなければなりませんか？").contains("三十日前"));
    assert!(best(&index, "未払いの料金はいつ精算されますか").contains("精算"));
    assert!(best(&index, "अनुबंध समाप्त करने से पहले कितने दिन की सूचना?").contains("तीस दिन"));
    assert!(best(&index, "बकाया शुल्क का भुगतान कब होगा?").contains("बकाया"));
    assert!(best(&index, "what does a kayak crossing cost").contains("Kayaks"));

    // What BM25 can read of a question: each distinct word's chunks, none for a word of a
    // language no document is written in.
    assert_eq!(index.word_counts("Kayaks kayaks नौका").unwrap(), [1, 0]);
    let holding = index.word_counts("料金は").unwrap();
    assert!(
        !holding.is_empty() && holding.iter().all(|&n| n >= 1),
        "{holding:?}"
    );
    assert_eq!(index.word_counts("?!").unwrap(), Vec::<u64>::new());
}

#[test]
fn an_index_made_before_the_analyzer_was_recorded_keeps_working() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("ferry.txt"), ENGLISH).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    index(
        dir.path(),
        &[docs.path().to_owned()],
        &embedder,
        &IndexOptions::default(),
    );
    // Made old: the manifest names no analyzer and the text index's schema names tantivy's
    // default, as before. English text has the same words either way, so its postings stand.
    let manifest = dir.path().join("manifest.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("analyzer").unwrap();
    std::fs::write(&manifest, json.to_string()).unwrap();
    let meta = dir.path().join("text/meta.json");
    let schema = std::fs::read_to_string(&meta).unwrap();
    assert!(schema.contains("\"scar_multilingual\""));
    std::fs::write(
        &meta,
        schema.replace("\"scar_multilingual\"", "\"default\""),
    )
    .unwrap();

    let old = Index::open(dir.path()).unwrap();
    assert_eq!(old.manifest().analyzer, Analyzer::LetterRuns);
    assert!(best(&old, "kayak crossing").contains("Kayaks"));
    drop(old);
    // Adding to it keeps its analyzer.
    std::fs::write(
        docs.path().join("more.txt"),
        "Dogs travel in the lower deck.\n",
    )
    .unwrap();
    index(
        dir.path(),
        &[docs.path().to_owned()],
        &embedder,
        &IndexOptions::default(),
    );
    let old = Index::open(dir.path()).unwrap();
    assert_eq!(old.manifest().analyzer, Analyzer::LetterRuns);
    assert!(best(&old, "dogs deck").contains("Dogs"));
}

#[test]
fn words_of_a_removed_document_are_no_longer_held() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("ferry.txt"), ENGLISH).unwrap();
    std::fs::write(docs.path().join("keiyaku.txt"), JAPANESE).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedder = tiny_bert();
    let roots = [docs.path().to_owned()];
    index(dir.path(), &roots, &embedder, &IndexOptions::default());
    let held = |question| {
        Index::open(dir.path())
            .unwrap()
            .word_counts(question)
            .unwrap()
    };
    assert_eq!(held("kayaks 精算"), [1, 1]);

    std::fs::remove_file(docs.path().join("keiyaku.txt")).unwrap();
    index(dir.path(), &roots, &embedder, &IndexOptions::default());
    assert_eq!(held("kayaks 精算"), [1, 0]);
}
