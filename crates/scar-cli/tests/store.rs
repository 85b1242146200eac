//! `--store`: shells indexing into one PostgreSQL store at once, and another searching it with
//! no index folder of its own.

use std::fmt::Write as _;
use std::process::Stdio;

use scar_test_support::{postgres_database, postgres_shards};

use crate::common::{fails_with, rfc_index, run, scar, scar_tiny, workspace};

/// The first seed of a search for the kayak fee is the ferry handbook's paragraph on it.
fn assert_kayak_fee_first(report: &serde_json::Value) {
    let seed = &report["ledger"]["seeds"][0]["id"];
    let place = report["places"]
        .as_array()
        .unwrap()
        .iter()
        .find(|place| &place["id"] == seed)
        .unwrap();
    assert!(
        place["document"]
            .as_str()
            .unwrap()
            .ends_with("ferry-handbook.md"),
        "{report}"
    );
    assert_eq!(place["ordinal"], 3, "{report}");
}

/// `scar --store URL search --json` for the kayak fee, run in `dir`: the report.
fn search_kayak_fee(dir: &std::path::Path, url: &str) -> serde_json::Value {
    let output = run(scar(dir).args([
        "--store",
        url,
        "search",
        "What does it cost to take my kayak on the ferry?",
        "--json",
    ]));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The index folder `dir`, published to the store at `url`.
fn published(dir: &std::path::Path, url: &str) -> scar_index::Index {
    let index = scar_index::Index::open(dir).unwrap();
    scar_postgres::publish(
        &index,
        url,
        &[],
        scar_index::HnswSetting::Keep,
        &mut |_, _| {},
        &std::sync::atomic::AtomicBool::new(false),
    )
    .unwrap();
    index
}

#[test]
fn shells_index_into_one_store_at_once_and_another_searches_it() {
    let Some(url) = postgres_database("cli") else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let example = workspace().join("assets/example");
    let mut names: Vec<_> = std::fs::read_dir(&example)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    names.sort();
    let (a, b) = (base.path().join("a"), base.path().join("b"));
    for (folder, half) in [(&a, &names[..2]), (&b, &names[2..])] {
        std::fs::create_dir(folder).unwrap();
        for name in half {
            std::fs::copy(example.join(name), folder.join(name)).unwrap();
        }
    }
    // Three shells at once, two of them on the same folder, each with its own index folder; one
    // asks for an HNSW index on the store's vectors.
    let writers: Vec<_> = [
        ("one", &a, Some("--hnsw")),
        ("two", &b, None),
        ("three", &b, None),
    ]
    .into_iter()
    .map(|(shell, folder, flag)| {
        scar(&base.path().join(shell))
            .args(["--store", &url, "index", "--json"])
            .args(flag)
            .arg(folder)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    })
    .collect();
    for writer in writers {
        let output = writer.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let store = &report["store"];
        assert_eq!(
            store["published"].as_u64().unwrap() + store["unchanged"].as_u64().unwrap(),
            2,
            "{report}"
        );
    }
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM scar_files), count(*), \
             count(DISTINCT (document, ordinal)) FROM scar_chunks",
            &[],
        )
        .unwrap();
    let (files, chunks, distinct): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((files, chunks), (4, distinct));

    // A fourth shell, with no index folder, searches what the three wrote.
    let nowhere = base.path().join("no-index-here");
    let report = search_kayak_fee(&nowhere, &url);
    assert_kayak_fee_first(&report);
    assert!(!nowhere.exists());

    // And sees what the store holds, and a chunk of it.
    let output = run(scar(&nowhere).args(["--store", &url, "inspect", "--json"]));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["files"], 4, "{summary}");
    assert_eq!(summary["hnsw"]["expansion_search"], 256, "{summary}");
    assert_eq!(summary["chunks"].as_i64().unwrap(), chunks, "{summary}");
    let seed = report["ledger"]["seeds"][0]["id"]
        .as_u64()
        .unwrap()
        .to_string();
    let output = run(scar(&nowhere).args(["--store", &url, "inspect", "--chunk", &seed]));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        shown.contains("ferry-handbook.md ¶4") && shown.contains("kayak"),
        "{shown}"
    );
    assert!(!nowhere.exists());
}

#[test]
fn the_store_s_password_is_never_shown() {
    let output = run(scar(std::path::Path::new("/nonexistent")).args([
        "--store",
        "postgres://ann:s3cret@127.0.0.1:1/scar",
        "config",
    ]));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        shown.contains("postgres://ann:***@127.0.0.1:1/scar"),
        "{shown}"
    );
    assert!(!shown.contains("s3cret"), "{shown}");
    let output = scar(std::path::Path::new("/nonexistent"))
        .args([
            "--store",
            "postgres://ann:s3cret@127.0.0.1:1/scar?connect_timeout=2",
            "search",
            "x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot reach PostgreSQL at postgres://ann:***@127.0.0.1:1/scar"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn the_http_server_serves_a_store() {
    let Some(url) = postgres_database("cli_serve") else {
        return;
    };
    let index = published(crate::common::example_index(), &url);
    let (running, address) =
        crate::serve::start(scar(std::path::Path::new("/nonexistent")).args(["--store", &url]));
    let indexes = crate::serve::get_json(&format!("http://{address}/v1/indexes"));
    assert_eq!(
        indexes["indexes"][0]["name"],
        url.rsplit('/').next().unwrap(),
        "{indexes}"
    );
    assert_eq!(indexes["indexes"][0]["chunks"], index.len(), "{indexes}");
    let report: serde_json::Value = ureq::post(&format!("http://{address}/v1/search"))
        .send_json(serde_json::json!({
            "question": "What does it cost to take my kayak on the ferry?",
            "first_stage": "dense",
        }))
        .unwrap()
        .into_json()
        .unwrap();
    assert_kayak_fee_first(&report);
    drop(running);
}

#[test]
fn eval_over_the_store_scores_what_the_folder_index_scores() {
    let Some(url) = postgres_database("eval") else {
        return;
    };
    published(rfc_index(), &url);
    let out = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let eval = |folder: &std::path::Path, store: &[&str], name: &str| -> serde_json::Value {
        let output = run(scar(folder)
            .args(store)
            .args(["eval", "--quick", "--json", "--first-stages", "dense"])
            .arg("--corpus")
            .arg(scar_test_support::corpora())
            .arg("--benchmark")
            .arg(workspace().join("assets/benchmarks/rfc9293.json"))
            .arg("--out")
            .arg(out.join(name)));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let nowhere = tempfile::tempdir().unwrap();
    let folder = eval(rfc_index(), &[], "eval-store-folder");
    let stored = eval(
        &nowhere.path().join("none"),
        &["--store", &url],
        "eval-store-server",
    );
    assert!(
        stored["settings"]["index"]
            .as_str()
            .unwrap()
            .starts_with("postgres://")
    );
    assert_eq!(
        stored["data"]["tests_scored"],
        folder["data"]["tests_scored"]
    );
    // Dense seeds and every policy that reads no lexical rank: the same scores.
    let policies = |report: &serde_json::Value| -> Vec<serde_json::Value> {
        report["stages"][0]["policies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| !p["key"].as_str().unwrap().starts_with("evidence"))
            .cloned()
            .collect()
    };
    let compared = policies(&folder);
    assert!(compared.len() >= 5, "{folder}");
    assert_eq!(policies(&stored), compared);
    assert_eq!(
        stored["stages"][0]["sweep"], folder["stages"][0]["sweep"],
        "the SCAR sweep"
    );
    // The neighbour tables read a folder index whole: over a store, they are refused.
    fails_with(
        scar(&nowhere.path().join("none"))
            .args(["--store", &url, "eval", "--quick", "--neighbours"])
            .arg("--corpus")
            .arg(scar_test_support::corpora())
            .arg("--benchmark")
            .arg(workspace().join("assets/benchmarks/rfc9293.json"))
            .arg("--out")
            .arg(out.join("eval-store-neighbours")),
        "read an index folder whole",
    );
}

#[test]
fn a_store_on_shards_is_indexed_and_searched_through_its_coordinator() {
    let (Some(url), Some(shards)) = (postgres_database("cli_coordinator"), postgres_shards("cli"))
    else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let index = |extra: &[&str]| {
        let mut command = scar(&base.path().join("index"));
        command.args(["--store", &url, "index", "--json"]);
        for shard in &shards {
            command.args(["--shard", shard]);
        }
        run(command.args(extra).arg(workspace().join("assets/example")))
    };
    let report: serde_json::Value = serde_json::from_slice(&index(&[]).stdout).unwrap();
    assert_eq!(report["store"]["published"], 4, "{report}");
    // The same flags again: the store is kept, nothing written.
    let report: serde_json::Value = serde_json::from_slice(&index(&[]).stdout).unwrap();
    assert_eq!(report["store"]["unchanged"], 4, "{report}");
    let nowhere = base.path().join("no-index-here");
    let output = run(scar(&nowhere).args(["--store", &url, "inspect"]));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(shown.contains("chunks on 2 shards"), "{shown}");
    let report = search_kayak_fee(&nowhere, &url);
    assert_kayak_fee_first(&report);
    fails_with(
        scar(&nowhere).args(["index", "--shard", &shards[0], "."]),
        "name the store too",
    );
}

/// Chunks the store holds for each stored file, by path.
fn stored_chunks_by_file(client: &mut postgres::Client) -> std::collections::BTreeMap<String, i64> {
    client
        .query(
            "SELECT f.path, count(c.id) FROM scar_files f \
             LEFT JOIN scar_documents d ON d.path = f.path \
             LEFT JOIN scar_chunks c ON c.document = d.id GROUP BY f.path",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[test]
fn a_publisher_killed_midway_leaves_every_stored_file_whole() {
    let Some(url) = postgres_database("killed") else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let docs = base.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for i in 0..600 {
        let mut text = String::new();
        for p in 0..4 {
            let hour = i % 24;
            writeln!(
                text,
                "File {i}, paragraph {p}: the ferry leaves at {hour}:{p}0.\n"
            )
            .unwrap();
        }
        std::fs::write(docs.join(format!("file-{i:03}.txt")), text).unwrap();
    }
    let dir = base.path().join("index");
    // Embedded first, so that the run killed below spends its time publishing.
    run(scar_tiny(&dir)
        .args(["index", "--chunk-chars", "60"])
        .arg(&docs));
    let index = scar_index::Index::open(&dir).unwrap();
    let chunks_of: std::collections::HashMap<String, i64> = index
        .documents()
        .iter()
        .map(|d| {
            (
                d.path.to_string_lossy().into_owned(),
                i64::from(d.chunk_count),
            )
        })
        .collect();
    assert!(chunks_of.values().all(|&n| n >= 3), "several chunks a file");

    let mut publisher = scar_tiny(&dir)
        .args(["--store", &url, "index"])
        .arg(&docs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(2);
    let stored_before_kill = loop {
        let stored: i64 = client
            .query_opt("SELECT count(*) FROM scar_files", &[])
            .ok()
            .flatten()
            .map_or(0, |row| row.get(0));
        if stored >= 20 || publisher.try_wait().unwrap().is_some() {
            break stored;
        }
        assert!(std::time::Instant::now() < deadline, "nothing published");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    publisher.kill().unwrap();
    publisher.wait().unwrap();
    assert!(
        (20..600).contains(&stored_before_kill),
        "the kill came after the whole publish ({stored_before_kill} files): more files needed"
    );

    // Every file the store holds is whole; none is there in part, and no document is there
    // without its file.
    let orphans: i64 = client
        .query_one(
            "SELECT count(*) FROM scar_documents d \
             WHERE NOT EXISTS (SELECT 1 FROM scar_files f WHERE f.path = d.path)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0);
    let stored = stored_chunks_by_file(&mut client);
    assert!(stored.len() < 600, "{} files", stored.len());
    for (path, chunks) in &stored {
        assert_eq!(Some(chunks), chunks_of.get(path), "{path}");
    }
    // The next run publishes the rest.
    run(scar_tiny(&dir).args(["--store", &url, "index"]).arg(&docs));
    let stored = stored_chunks_by_file(&mut client);
    assert_eq!(stored.len(), 600);
    for (path, chunks) in &stored {
        assert_eq!(Some(chunks), chunks_of.get(path), "{path}");
    }
}
