//! A folder of Hindi, Japanese and English files, indexed with `--model multilingual-e5-small`
//! (its short name) and asked in each language: the first seed comes from the document that
//! answers, a question in English finds the Hindi text that answers it, and `inspect` names
//! each document's language.

use crate::common::{run, scar, search_json, workspace};

/// The first seed's document (its file name) and text.
fn first_seed(index: &std::path::Path, question: &str) -> (String, String) {
    let report = search_json(index, question, &[]);
    let seed = &report["ledger"]["seeds"][0]["id"];
    let chunk = report["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| &c["id"] == seed)
        .unwrap();
    let document = chunk["document"].as_str().unwrap();
    let name = document.rsplit('/').next().unwrap().to_owned();
    (name, chunk["text"].as_str().unwrap().to_owned())
}

#[test]
fn a_folder_in_three_languages_is_searched_in_each() {
    let docs = tempfile::tempdir().unwrap();
    let seeds = workspace().join("../shared/data/seeds");
    std::fs::copy(
        seeds.join("000_00675eb0f8c19bc2.txt"),
        docs.path().join("hindi.txt"),
    )
    .unwrap();
    std::fs::copy(
        seeds.join("002_ae4de7a5da7fa7fb.txt"),
        docs.path().join("japanese.txt"),
    )
    .unwrap();
    std::fs::copy(
        workspace().join("assets/example/ferry-handbook.md"),
        docs.path().join("ferry-handbook.md"),
    )
    .unwrap();
    let index = tempfile::tempdir().unwrap();
    run(scar(index.path())
        .env("SCAR_MODEL", "multilingual-e5-small")
        .arg("index")
        .arg(docs.path()));

    let summary: serde_json::Value =
        serde_json::from_slice(&run(scar(index.path()).args(["inspect", "--json"])).stdout)
            .unwrap();
    assert_eq!(summary["manifest"]["model"]["passage_prefix"], "passage: ");
    assert_eq!(summary["manifest"]["analyzer"], "multilingual");
    let mut languages: Vec<&str> = summary["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["language"].as_str().unwrap())
        .collect();
    languages.sort_unstable();
    assert_eq!(languages, ["eng", "hin", "jpn"]);

    for (question, document, words) in [
        (
            "जासूसी उपन्यास के उदाहरण में तालिका का हेडर किस पेज पर है?",
            "hindi.txt",
            "पेज 10",
        ),
        (
            "静的ウィンドウはなぜ無駄なのですか？",
            "japanese.txt",
            "静的ウィンドウ",
        ),
        (
            // Dense and BM25 each rank first one of the two chunks that state the kayak fee.
            "What does it cost to take my kayak on the ferry?",
            "ferry-handbook.md",
            "euros",
        ),
        (
            "In the detective novel example, on which pages are the table's header and its rows?",
            "hindi.txt",
            "पेज 11",
        ),
    ] {
        let (found, text) = first_seed(index.path(), question);
        assert_eq!(found, document, "{question}");
        assert!(text.contains(words), "{question}: {text}");
    }
}
