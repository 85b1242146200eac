//! `scar index --hnsw`: the graph is reported by `inspect`, searches through it give the same
//! ledger as exact search on a small index, `--hnsw-expansion` widens its search without
//! relinking, and `--no-hnsw` drops it.

use crate::common::{example_index, run, scar, search_json, workspace};

fn inspect(index: &std::path::Path) -> String {
    String::from_utf8(run(scar(index).arg("inspect")).stdout).unwrap()
}

#[test]
fn graph_search_matches_exact_search_and_can_be_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let example = workspace().join("assets/example");
    // The same vectors as the example index (f32), so that graph and exact search can agree.
    let built = run(scar(&index)
        .args(["--precision", "f32", "index"])
        .arg(&example)
        .args(["--hnsw", "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    let linked = report["hnsw_rows_linked"].as_u64().unwrap();
    assert!(linked > 0);
    assert!(
        inspect(&index).contains(&format!("dense search: HNSW graph over {linked} chunks")),
        "{}",
        inspect(&index)
    );

    let question = "What does it cost to take my kayak on the ferry?";
    let through_graph = search_json(&index, question, &[]);
    let exact = search_json(example_index(), question, &[]);
    for part in ["seeds", "context", "context_tokens"] {
        assert_eq!(
            through_graph["ledger"][part], exact["ledger"][part],
            "{part} differ"
        );
    }

    let widened =
        run(scar(&index)
            .arg("index")
            .arg(&example)
            .args(["--hnsw-expansion", "64", "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&widened.stdout).unwrap();
    assert_eq!(report["hnsw_rows_linked"], 0, "not relinked");
    assert!(
        inspect(&index).contains("expansion 128/64"),
        "{}",
        inspect(&index)
    );
    run(scar(&index).arg("index").arg(&example).arg("--hnsw"));
    assert!(
        inspect(&index).contains("expansion 128/64"),
        "a plain --hnsw keeps the breadth"
    );

    run(scar(&index).arg("index").arg(&example).arg("--no-hnsw"));
    assert!(inspect(&index).contains("dense search: exact"));
}
