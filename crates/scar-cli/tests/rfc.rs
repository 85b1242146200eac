//! End to end on RFC 9293: a question whose evidence straddles a chunk boundary gets the rest
//! of its evidence from an accepted neighbour, with the default evidence walk and with SCAR;
//! static ±1 adds a neighbour that SCAR rejects; the text and the JSON compare the context with
//! static ±1's in the same numbers; and the JSON output follows its documented schema.

use scar_retrieve::SearchReport;
use serde_json::Value;

use crate::common::{rfc_index, run, scar, search_json, workspace};

/// The project's benchmark question about the three ways to close a connection, whose evidence
/// (a few paragraphs of section 3.6) spans several chunks.
fn closing_question() -> (String, std::ops::Range<usize>) {
    let source =
        std::fs::read_to_string(workspace().join("assets/benchmarks/source/rfc9293.jsonl"))
            .unwrap();
    let test: Value = source
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|t| t["id"] == "rfc9293-028")
        .unwrap();
    let corpus =
        std::fs::read_to_string(workspace().join("../shared/data/corpora/rfc9293.txt")).unwrap();
    let evidence = test["evidence"][0].as_str().unwrap();
    let start = corpus[..corpus.find(evidence).unwrap()].chars().count();
    (
        test["query"].as_str().unwrap().to_owned(),
        start..start + evidence.chars().count(),
    )
}

fn chars(chunk: &Value) -> std::ops::Range<usize> {
    chunk["chars"][0].as_u64().unwrap() as usize..chunk["chars"][1].as_u64().unwrap() as usize
}

fn overlaps(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

#[test]
fn the_neighbour_holding_the_rest_of_the_evidence_is_accepted() {
    for policy in ["evidence", "scar"] {
        accepts_the_rest_of_the_evidence(policy);
    }
}

fn accepts_the_rest_of_the_evidence(policy: &str) {
    let (query, evidence) = closing_question();
    let report = search_json(rfc_index(), &query, &["--k", "5", "--policy", policy]);
    assert_eq!(report["ledger"]["policy"]["kind"], policy);
    let chunk = |id: &Value| {
        report["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| &c["id"] == id)
            .cloned()
    };
    let mut found = false;
    for seed in report["ledger"]["seeds"].as_array().unwrap() {
        let seed_chunk = chunk(&seed["id"]).unwrap();
        if !overlaps(&chars(&seed_chunk), &evidence) {
            continue;
        }
        for neighbour in seed["neighbours"].as_array().unwrap() {
            if neighbour["outcome"] != "accepted" {
                continue;
            }
            let neighbour_chunk = chunk(&neighbour["id"]).unwrap();
            if overlaps(&chars(&neighbour_chunk), &evidence) {
                let (score, bar) = (
                    neighbour["score"].as_f64().unwrap(),
                    neighbour["bar"].as_f64().unwrap(),
                );
                assert!(score > bar, "{neighbour}");
                assert!((neighbour["margin"].as_f64().unwrap() - (score - bar)).abs() < 1e-5);
                assert!((bar - seed["bar"].as_f64().unwrap()).abs() < 1e-9);
                found = true;
            }
        }
    }
    assert!(
        found,
        "{policy}: no accepted neighbour continues the evidence: {report:#}"
    );
}

#[test]
fn static_window_adds_a_neighbour_that_scar_rejects() {
    let (query, _) = closing_question();
    let scar = search_json(rfc_index(), &query, &["--k", "5", "--policy", "scar"]);
    let fixed = search_json(rfc_index(), &query, &["--k", "5", "--policy", "static"]);
    let ids = |report: &Value| -> Vec<u64> {
        report["ledger"]["context"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let (scar_ids, static_ids) = (ids(&scar), ids(&fixed));
    assert!(
        scar_ids.iter().all(|id| static_ids.contains(id)),
        "SCAR ⊆ static ±1"
    );
    let extra: Vec<u64> = static_ids
        .iter()
        .copied()
        .filter(|id| !scar_ids.contains(id))
        .collect();
    assert!(!extra.is_empty());
    let rejected: Vec<u64> = scar["ledger"]["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["neighbours"].as_array().unwrap().clone())
        .filter(|n| n["outcome"] == "rejected")
        .map(|n| n["id"].as_u64().unwrap())
        .collect();
    for id in &extra {
        assert!(
            rejected.contains(id),
            "chunk {id} is in static ±1 but SCAR did not reject it"
        );
    }
    assert!(scar["ledger"]["context_tokens"].as_u64() < fixed["ledger"]["context_tokens"].as_u64());
}

/// One comparison with static ±1, from the report: its numbers are static ±1's own search, and
/// the text prints it in the library's words, a saving for SCAR and a cost for static ±2.
#[test]
fn text_and_json_compare_with_static_one_in_the_same_numbers() {
    let (query, _) = closing_question();
    let fixed = search_json(rfc_index(), &query, &["--k", "5", "--policy", "static"]);
    for (policy, window, verdict) in [("scar", "1", "saved "), ("static", "2", "costs ")] {
        let extra = ["--k", "5", "--policy", policy, "--window", window];
        let json = search_json(rfc_index(), &query, &extra);
        assert_eq!(
            json["static_window_1"]["chunks"].as_u64(),
            fixed["ledger"]["context"]
                .as_array()
                .map(|c| c.len() as u64)
        );
        assert_eq!(
            json["static_window_1"]["tokens"],
            fixed["ledger"]["context_tokens"]
        );
        let comparison = serde_json::from_value::<SearchReport>(json)
            .unwrap()
            .comparison();
        assert!(
            comparison.verdict().starts_with(verdict),
            "{policy} ±{window}: {comparison}"
        );
        let output = run(scar(rfc_index()).args(["search", &query]).args(extra));
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(
            text.lines().any(|line| line == comparison.to_string()),
            "{comparison}\n{text}"
        );
    }
}

#[test]
fn json_output_follows_the_documented_schema() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("docs/schema/search-v2.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let (query, _) = closing_question();
    for extra in [
        &[][..],
        &["--policy", "scar", "--window", "2"],
        &["--policy", "static"],
        &["--policy", "topk", "--first-stage", "bm25"],
        &["--policy", "parent", "--first-stage", "dense"],
        &["--policy", "section"],
        &[
            "--policy",
            "evidence",
            "--depth",
            "3",
            "--budget-tokens",
            "300",
        ],
        &["--rerank", "sentence"],
    ] {
        let report = search_json(rfc_index(), &query, extra);
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{extra:?}: {errors:#?}");
        assert_eq!(report["schema"], "scar.search/2");
    }
    // A reranker's verdict stands beside every seed it chose, and its order is theirs.
    let reranked = search_json(rfc_index(), &query, &["--rerank", "sentence"]);
    let seeds = reranked["ledger"]["seeds"].as_array().unwrap();
    let verdicts: Vec<f64> = seeds
        .iter()
        .map(|seed| seed["judged"]["score"].as_f64().unwrap())
        .collect();
    assert!(verdicts.windows(2).all(|w| w[0] >= w[1]), "{verdicts:?}");
    assert!(
        seeds
            .iter()
            .all(|s| s["judged"]["first_stage_rank"].as_u64() >= Some(1))
    );
    // The schema is strict enough to catch a renamed field.
    let mut broken = search_json(rfc_index(), &query, &[]);
    broken["ledger"]["seeds"][0]["query_cosine"] = broken["ledger"]["seeds"][0]["query_cos"].take();
    assert!(!validator.is_valid(&broken));
}

#[test]
fn a_reranker_judges_the_best_30_candidates_or_k_when_k_is_more() {
    let (query, _) = closing_question();
    let ranks = |k: &str| -> Vec<u64> {
        let report = search_json(rfc_index(), &query, &["--rerank", "sentence", "--k", k]);
        let mut ranks: Vec<u64> = report["ledger"]["seeds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|seed| seed["judged"]["first_stage_rank"].as_u64().unwrap())
            .collect();
        ranks.sort_unstable();
        ranks
    };
    // Five seeds from the best 30 of RFC 9293's 529 chunks.
    let five = ranks("5");
    assert_eq!(five.len(), 5);
    assert!(
        five.iter().all(|&rank| (1..=30).contains(&rank)),
        "{five:?}"
    );
    // Forty seeds: the reranker judged 40 candidates and kept them all.
    assert_eq!(ranks("40"), (1..=40).collect::<Vec<u64>>());
}

#[test]
fn the_chat_model_judges_rerank_what_the_store_holds() {
    let (query, _) = closing_question();
    // The default chat model (SmolLM2-135M-Instruct) reads each of the best 30 candidates.
    for judge in ["llm", "likelihood"] {
        let report = search_json(rfc_index(), &query, &["--rerank", judge, "--k", "3"]);
        let seeds = report["ledger"]["seeds"].as_array().unwrap();
        assert_eq!(seeds.len(), 3, "{judge}");
        let verdicts: Vec<f64> = seeds
            .iter()
            .map(|seed| seed["judged"]["score"].as_f64().unwrap())
            .collect();
        assert!(
            verdicts.windows(2).all(|w| w[0] >= w[1]),
            "{judge}: {verdicts:?}"
        );
        if judge == "llm" {
            assert!(
                verdicts.iter().all(|p| (0.0..=1.0).contains(p)),
                "{verdicts:?}"
            );
        }
        assert!(seeds.iter().all(|seed| {
            (1..=30).contains(&seed["judged"]["first_stage_rank"].as_u64().unwrap())
        }));
    }
}
