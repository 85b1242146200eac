//! `scar eval --quick` on RFC 9293: the report is written and its numbers hang together.

use serde_json::Value;

use crate::common::{fails_with, rfc_index, run, scar, workspace};

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// `scar eval --quick --json --k 5` on RFC 9293 into `out` (under the test target folder), with
/// `extra` arguments; the report as printed.
fn quick_eval(out: &str, extra: &[&str]) -> (Value, std::path::PathBuf) {
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(out);
    let _ = std::fs::remove_dir_all(&out);
    let output = run(scar(rfc_index())
        .args(["eval", "--quick", "--json", "--k", "5"])
        .args(rfc_benchmark(&out))
        .args(extra));
    (serde_json::from_slice(&output.stdout).unwrap(), out)
}

/// The test `id` of the report's first stage.
fn test_of<'a>(report: &'a Value, id: &Value) -> &'a Value {
    report["stages"][0]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| &t["id"] == id)
        .unwrap()
}

/// The corpus, RFC 9293's benchmark and the output folder `out`, as `scar eval` arguments.
fn rfc_benchmark(out: &std::path::Path) -> [std::ffi::OsString; 6] {
    [
        "--corpus".into(),
        scar_test_support::corpora().into(),
        "--benchmark".into(),
        workspace().join("assets/benchmarks/rfc9293.json").into(),
        "--out".into(),
        out.into(),
    ]
}

#[test]
fn quick_eval_writes_a_consistent_report() {
    let (report, out) = quick_eval("eval-quick-rfc9293", &[]);
    assert_eq!(report["schema"], "scar.eval/2");
    assert_eq!(report["settings"]["k"], 5);
    assert_eq!(report["settings"]["quick"], true);
    let data = &report["data"];
    assert_eq!(data["tests_chosen"], 20);
    assert_eq!(data["tests_scored"], 20, "{:#}", data["problems"]);
    let (boundary, atomic) = (
        data["boundary"].as_u64().unwrap(),
        data["atomic"].as_u64().unwrap(),
    );
    assert_eq!(boundary + atomic, 20);
    assert!(boundary > 0 && atomic > 0);

    let stage = &report["stages"][0];
    assert_eq!(stage["first_stage"], "hybrid");
    let policies = stage["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 11);
    let group = |key: &str, group: &str| -> Value {
        let policy = policies.iter().find(|p| p["key"] == key).unwrap();
        policy["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == group)
            .unwrap()
            .clone()
    };
    check_means(policies, boundary, atomic);
    for g in ["boundary", "atomic", "all"] {
        let (scar_1, static_1, top_k) =
            (group("scar_1", g), group("static_1", g), group("top_k", g));
        // On the same seeds, SCAR ±1 keeps a subset of static ±1's neighbours.
        assert!(number(&scar_1["mean_chunks"]) <= number(&static_1["mean_chunks"]));
        assert!(number(&scar_1["recall"]) <= number(&static_1["recall"]));
        assert!(number(&top_k["mean_chunks"]) <= number(&scar_1["mean_chunks"]));
        assert!(number(&top_k["mean_chunks"]) <= 5.0);
        // The evidence walk ±2 keeps a subset of static ±2's and walks no further than ±3's.
        let (evidence, static_2, evidence_3) = (
            group("evidence_2", g),
            group("static_2", g),
            group("evidence_3", g),
        );
        assert!(number(&evidence["mean_chunks"]) <= number(&static_2["mean_chunks"]));
        assert!(number(&evidence["mean_chunks"]) <= number(&evidence_3["mean_chunks"]));
        assert!(number(&top_k["recall"]) <= number(&evidence["recall"]));
    }
    for test in stage["tests"].as_array().unwrap() {
        let (scar_1, static_1) = (&test["scores"]["scar_1"], &test["scores"]["static_1"]);
        assert!(
            number(&scar_1["chunks"]) <= number(&static_1["chunks"]),
            "{test}"
        );
        assert!(
            number(&scar_1["tokens"]) <= number(&static_1["tokens"]),
            "{test}"
        );
    }

    check_comparisons(stage["comparisons"].as_array().unwrap());
    assert_eq!(stage["sweep"].as_array().unwrap().len(), 5 * 8);
    // Deeper evidence walks never take fewer chunks.
    let depths = stage["depth_sweep"].as_array().unwrap();
    assert_eq!(depths.len(), 10);
    let chunks_at = |point: &Value| {
        let all = point["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == "all");
        number(&all.unwrap()["mean_chunks"])
    };
    assert!(
        depths
            .windows(2)
            .all(|w| chunks_at(&w[0]) <= chunks_at(&w[1]))
    );

    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(written, report);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("| SCAR ±1 |")
            && markdown.contains("| evidence ±2 |")
            && markdown.contains("Paired bootstrap")
            && markdown.contains("Sweep: evidence ±2"),
        "{markdown}"
    );
    assert!(
        std::fs::read(out.join("recall_vs_chunks.png"))
            .unwrap()
            .starts_with(b"\x89PNG")
    );
}

/// Every mean is in range, counts its group's tests, and efficiency is recall / chunks.
fn check_means(policies: &[Value], boundary: u64, atomic: u64) {
    for policy in policies {
        for metrics in policy["groups"].as_array().unwrap() {
            let n = metrics["n_tests"].as_u64().unwrap();
            let expected = match metrics["group"].as_str().unwrap() {
                "boundary" => boundary,
                "atomic" => atomic,
                _ => 20,
            };
            assert_eq!(n, expected);
            for key in ["recall", "full_recall", "span_precision", "span_recall"] {
                let value = number(&metrics[key]);
                assert!((0.0..=1.0).contains(&value), "{key} = {value} in {metrics}");
            }
            let (recall, chunks) = (number(&metrics["recall"]), number(&metrics["mean_chunks"]));
            assert!(
                chunks >= 1.0 && number(&metrics["mean_tokens"]) > 0.0,
                "{metrics}"
            );
            assert!(
                (number(&metrics["chunk_efficiency"]) - recall / chunks).abs() < 1e-9,
                "{metrics}"
            );
        }
    }
}

/// Every bootstrap is finite and well ordered; SCAR ±1 takes fewer chunks than static ±1.
fn check_comparisons(comparisons: &[Value]) {
    let chunks = comparisons
        .iter()
        .find(|c| {
            c["candidate"] == "scar_1"
                && c["baseline"] == "static_1"
                && c["group"] == "all"
                && c["metric"] == "chunks"
        })
        .unwrap();
    for comparison in comparisons {
        let result = &comparison["result"];
        let (low, high) = (number(&result["ci_low"]), number(&result["ci_high"]));
        assert!(
            low.is_finite() && high.is_finite() && low <= high,
            "{comparison}"
        );
        let p = number(&result["p_value"]);
        assert!(p > 0.0 && p <= 1.0, "{comparison}");
        assert!(
            result["cohens_d"].is_null() || number(&result["cohens_d"]).is_finite(),
            "{comparison}"
        );
        assert_eq!(result["resamples"], 10_000);
    }
    assert!(number(&chunks["result"]["mean_diff"]) <= 0.0);
}

/// The index holds RFC 9293 alone, so restricting seeds to each test's own document must find
/// exactly the seeds of the whole-index search: a check of the document scope's first stages
/// against the retriever's.
#[test]
fn the_neighbour_and_seed_tables_and_their_signals_are_written() {
    let (report, out) = quick_eval(
        "eval-quick-neighbours",
        &["--neighbours", "--judges", "sentence"],
    );
    let table = std::fs::read_to_string(out.join("neighbours.jsonl")).unwrap();
    let rows: Vec<Value> = table
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!rows.is_empty());
    let seeds: usize = report["stages"][0]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seeds"].as_array().unwrap().len())
        .sum();
    // At most three steps each way from every seed.
    assert!(
        rows.len() <= seeds * 6,
        "{} rows for {seeds} seeds",
        rows.len()
    );
    for row in &rows {
        let distance = row["distance"].as_u64().unwrap();
        assert!((1..=3).contains(&distance), "{row}");
        assert!(row["dense_rank"].as_u64().unwrap() >= 1, "{row}");
        assert!(row["seam_kind"].is_string(), "{row}");
        // A useful neighbour is one of the test's gold chunks.
        let test = test_of(&report, &row["test"]);
        let gold = test["gold_chunks"].as_array().unwrap();
        assert_eq!(
            row["useful"].as_bool().unwrap(),
            gold.contains(&row["neighbour"]),
            "{row}"
        );
    }
    // One row per seed, its gold flag the test's, its judge's score a cosine.
    let seed_rows: Vec<Value> = std::fs::read_to_string(out.join("seeds.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(seed_rows.len(), seeds);
    for row in &seed_rows {
        let test = test_of(&report, &row["test"]);
        let rank = row["rank"].as_u64().unwrap() as usize;
        assert_eq!(test["seeds"][rank - 1], row["seed"], "{row}");
        let gold = test["gold_chunks"].as_array().unwrap();
        assert_eq!(
            row["holds_gold"].as_bool().unwrap(),
            gold.contains(&row["seed"]),
            "{row}"
        );
        let sentence = number(&row["judges"]["sentence"]);
        assert!((-1.0..=1.0).contains(&sentence), "{row}");
    }
    let signals = &report["stages"][0]["seed_signals"];
    let judged = signals["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "judge: sentence")
        .unwrap();
    assert!((0.0..=1.0).contains(&number(&judged["auc_holds_gold"])));
    assert_eq!(signals["times"][0]["name"], "sentence");
    assert!(number(&signals["times"][0]["p95"]) >= number(&signals["times"][0]["p50"]));
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("Neighbour signals"), "{markdown}");
    assert!(markdown.contains("Which seeds hold evidence"), "{markdown}");
    assert!(
        std::fs::read(out.join("roc.png"))
            .unwrap()
            .starts_with(b"\x89PNG")
    );
}

#[test]
fn document_scope_matches_the_retriever_on_a_one_document_index() {
    let stages = ["--first-stages", "dense,bm25,hybrid"];
    let (whole, _) = quick_eval("eval-quick-scope-index", &stages);
    let (scoped, _) = quick_eval(
        "eval-quick-scope-document",
        &[&stages[..], &["--scope", "document"]].concat(),
    );
    assert_eq!(whole["data"]["index_documents"], 1);
    assert_eq!(scoped["settings"]["scope"], "document");
    assert_eq!(whole["stages"].as_array().unwrap().len(), 3);
    for (a, b) in whole["stages"]
        .as_array()
        .unwrap()
        .iter()
        .zip(scoped["stages"].as_array().unwrap())
    {
        assert_eq!(a["first_stage"], b["first_stage"]);
        for (x, y) in a["tests"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["tests"].as_array().unwrap())
        {
            assert_eq!(x["seeds"], y["seeds"], "{} {}", a["first_stage"], x["id"]);
        }
        assert_eq!(a["policies"], b["policies"]);
    }
}

#[test]
fn a_benchmark_path_outside_the_corpus_is_refused_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(dir.path().join("private.txt"), "not part of the corpus").unwrap();
    let benchmark = dir.path().join("benchmark.json");
    std::fs::write(
        &benchmark,
        r#"{"tests": [{"id": "leak", "query": "q",
            "snippets": [{"file_path": "../private.txt", "span": [0, 7]}]}]}"#,
    )
    .unwrap();
    let index = dir.path().join("index");
    fails_with(
        scar(&index)
            .args(["eval", "--corpus"])
            .arg(&corpus)
            .arg("--benchmark")
            .arg(&benchmark)
            .arg("--out")
            .arg(dir.path().join("out")),
        "test leak: file_path `../private.txt` is outside the corpus folder",
    );
    assert!(!index.exists(), "nothing was indexed");
}

#[test]
fn answers_from_both_contexts_are_measured_against_the_evidence() {
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("eval-answers-rfc9293");
    let _ = std::fs::remove_dir_all(&out);
    let output = run(scar(rfc_index())
        .args([
            "eval",
            "--answers",
            "2",
            "--json",
            "--k",
            "2",
            "--max-tokens",
            "24",
        ])
        .args(rfc_benchmark(&out)));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema"], "scar.answers/1");
    assert_eq!(report["questions"], 2);
    assert!(
        report["llm"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("smollm2"),
        "{}",
        report["llm"]
    );
    let summaries = report["summaries"].as_array().unwrap();
    let policies: Vec<&str> = summaries
        .iter()
        .map(|s| s["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["evidence ±2, depth 10×k", "static ±1"]);
    let records = report["records"].as_array().unwrap();
    assert_eq!(records.len(), 4);
    for (summary, policy) in summaries.iter().zip(&policies) {
        let own: Vec<&Value> = records.iter().filter(|r| r["policy"] == *policy).collect();
        assert_eq!(own.len(), 2);
        let total = |field: &str| own.iter().map(|r| number(&r[field])).sum::<f64>();
        for record in &own {
            assert!(number(&record["found_in_gold"]) <= number(&record["found"]));
            assert!(number(&record["found"]) <= number(&record["sentences"]));
            assert!(number(&record["prompt_tokens"]) > 100.0, "{record}");
            assert!(number(&record["generated_tokens"]) <= 24.0);
        }
        assert!((number(&summary["sentences"]) - total("sentences")).abs() < 1e-9);
        let cites = own.iter().filter(|r| r["cites"] == true).count() as f64;
        assert!((number(&summary["cite_rate"]) - cites / 2.0).abs() < 1e-9);
        let flagged = total("sentences") - total("found");
        let flag_rate = if total("sentences") > 0.0 {
            flagged / total("sentences")
        } else {
            0.0
        };
        assert!((number(&summary["flag_rate"]) - flag_rate).abs() < 1e-9);
    }
    let markdown = std::fs::read_to_string(out.join("answers.md")).unwrap();
    assert!(markdown.contains("| static ±1 |"), "{markdown}");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("answers.json")).unwrap()).unwrap();
    assert_eq!(written, report);
}

#[test]
fn answers_of_zero_questions_are_refused() {
    fails_with(
        scar(rfc_index())
            .args(["eval", "--answers", "0", "--corpus", "x", "--benchmark"])
            .arg(workspace().join("assets/benchmarks/rfc9293.json")),
        "--answers takes a number of questions of at least 1",
    );
}

#[test]
fn a_reranker_is_evaluated_beside_the_first_stage_s_own_seeds() {
    let (report, out) = quick_eval("eval-quick-reranked", &["--rerank", "sentence"]);
    let stages = report["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    assert!(stages[0].get("reranker").is_none());
    assert_eq!(stages[1]["reranker"], "sentence");
    assert_eq!(stages[0]["first_stage"], stages[1]["first_stage"]);
    // The same tests, each with its own seeds; the reranker chose among more candidates, so
    // somewhere it chose differently.
    let seeds = |stage: &Value| -> Vec<Value> {
        stage["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["seeds"].clone())
            .collect()
    };
    assert_eq!(seeds(&stages[0]).len(), seeds(&stages[1]).len());
    assert_ne!(seeds(&stages[0]), seeds(&stages[1]));
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("## First stage: hybrid, reranked by sentence"),
        "{markdown}"
    );
}
