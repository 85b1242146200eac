//! The store over a real PostgreSQL server with pgvector (`scripts/start-postgres`, which
//! `scripts/test` runs and names in `SCAR_TEST_POSTGRES`): what the example index publishes
//! there is searched and walked as the folder index is.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use scar_core::{ChunkId, SeamKind, Side};
use scar_embed::Embedder;
use scar_index::{ChunkerConfig, HnswParams, HnswSetting, Index, IndexOptions};
use scar_policy::{Options, Outcome, Policy};
use scar_postgres::{PgStore, StoreError, create_sharded, publish};
use scar_retrieve::{ChunkStore, FirstStage, Retriever, SearchReport};
use scar_test_support::{
    example_index, minilm, postgres_database, postgres_replica_of, postgres_shards, workspace,
};

/// The folder index in `index` of the files in `docs`, brought up to date.
fn index_folder(index: &Path, docs: &Path, embedder: &Embedder) -> Index {
    index_folder_with(index, docs, embedder, &IndexOptions::default())
}

fn index_folder_with(
    index: &Path,
    docs: &Path,
    embedder: &Embedder,
    options: &IndexOptions,
) -> Index {
    let report = scar_index::index_paths(
        index,
        &[docs.to_owned()],
        embedder,
        options,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    assert!(report.is_complete(), "{report:?}");
    Index::open(index).unwrap()
}

fn publish_example(url: &str) -> scar_postgres::PublishReport {
    let index = Index::open(example_index()).unwrap();
    let roots = [workspace().join("assets/example")];
    publish(
        &index,
        url,
        &roots,
        HnswSetting::Keep,
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap()
}

/// Asserts that `scar_terms` holds, for each word, the number of chunks holding it.
fn assert_terms_counted(url: &str) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let wrong: Vec<(String, Option<i32>, Option<i32>)> = client
        .query(
            "SELECT lexeme, h.held, t.chunks FROM \
             (SELECT u.lexeme, count(*)::int AS held FROM scar_chunks c, unnest(c.lexical) u \
              GROUP BY u.lexeme) h \
             FULL JOIN (SELECT lexeme, chunks FROM scar_terms WHERE chunks <> 0) t USING (lexeme) \
             WHERE h.held IS DISTINCT FROM t.chunks LIMIT 5",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert!(
        wrong.is_empty(),
        "(word, chunks holding it, counted): {wrong:?}"
    );
}

/// BM25 as tantivy scores it, over every chunk the store at `url` holds (`among` only, when
/// given): the best `depth`, best first.
fn bm25_of_every_chunk(
    url: &str,
    question: &str,
    depth: usize,
    among: Option<&[ChunkId]>,
) -> Vec<(ChunkId, f64)> {
    use std::collections::HashMap;
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let words = scar_index::Analyzer::CURRENT.words(question).join(" ");
    let asked: Vec<String> = client
        .query_one(
            "SELECT tsvector_to_array(to_tsvector('simple', $1))",
            &[&words],
        )
        .unwrap()
        .get(0);
    let mut lengths: HashMap<i32, f64> = HashMap::new();
    for row in client
        .query("SELECT id, words FROM scar_chunks", &[])
        .unwrap()
    {
        lengths.insert(row.get(0), f64::from(row.get::<_, i32>(1)));
    }
    let mut counts: HashMap<i32, Vec<(String, f64)>> = HashMap::new();
    let mut holding: HashMap<String, f64> = HashMap::new();
    for row in client
        .query(
            "SELECT c.id, u.lexeme, array_length(u.positions, 1) \
             FROM scar_chunks c, unnest(c.lexical) u WHERE u.lexeme = ANY($1)",
            &[&asked],
        )
        .unwrap()
    {
        let lexeme: String = row.get(1);
        *holding.entry(lexeme.clone()).or_default() += 1.0;
        counts
            .entry(row.get(0))
            .or_default()
            .push((lexeme, f64::from(row.get::<_, i32>(2))));
    }
    let chunks = lengths.len() as f64;
    let mean = lengths.values().sum::<f64>() / chunks;
    let mut scores: Vec<(ChunkId, f64)> = counts
        .iter()
        .filter(|(id, _)| among.is_none_or(|among| among.contains(&ChunkId(**id as u32))))
        .map(|(id, found)| {
            let score = found
                .iter()
                .map(|(lexeme, tf)| {
                    let held = holding[lexeme];
                    let idf = (1.0 + (chunks - held + 0.5) / (held + 0.5)).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * lengths[id] / mean))
                })
                .sum();
            (ChunkId(*id as u32), score)
        })
        .collect();
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scores.truncate(depth);
    scores
}

/// Asserts that `found` ranks as `expected` does: the same scores, rank by rank, and each
/// chunk with its own score (chunks whose scores tie may trade places).
fn assert_same_ranking(found: &[(ChunkId, f32)], expected: &[(ChunkId, f64)], what: &str) {
    assert_eq!(
        found.len(),
        expected.len(),
        "{what}: {found:?} against {expected:?}"
    );
    let by_id: std::collections::HashMap<ChunkId, f64> = expected.iter().copied().collect();
    for ((id, score), (_, wanted)) in found.iter().zip(expected) {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * b.abs().max(1.0);
        assert!(
            close(f64::from(*score), *wanted),
            "{what}: {found:?} against {expected:?}"
        );
        let own = by_id.get(id).copied().unwrap_or(f64::NAN);
        assert!(
            close(f64::from(*score), own),
            "{what}: {id:?} scored {score}, not {own}"
        );
    }
}

/// Where a chunk is, as both stores name it: ids differ between stores, places do not.
type Place = (String, u32);

fn place(store: &dyn ChunkStore, id: ChunkId) -> Place {
    let chunk = store.stored(id).unwrap();
    (chunk.document, chunk.ordinal)
}

/// A neighbour's decision, with everything the policy computed from stored values.
type Decision = (
    Side,
    u32,
    Option<Place>,
    Option<SeamKind>,
    [Option<f32>; 5],
    Outcome,
);

/// A report's decisions and context, by place.
fn decisions(
    store: &dyn ChunkStore,
    report: &SearchReport,
) -> (Vec<(Place, Vec<Decision>)>, Vec<Place>) {
    let seeds = report
        .ledger
        .seeds
        .iter()
        .map(|seed| {
            let neighbours = seed
                .neighbours
                .iter()
                .map(|n| {
                    (
                        n.side,
                        n.distance,
                        n.id.map(|id| place(store, id)),
                        n.seam,
                        [n.query_cos, n.penalty, n.score, n.bar, n.margin],
                        n.outcome,
                    )
                })
                .collect();
            (place(store, seed.id), neighbours)
        })
        .collect();
    let context = report
        .ledger
        .context
        .iter()
        .map(|&id| place(store, id))
        .collect();
    (seeds, context)
}

#[test]
fn the_store_gives_the_folder_index_s_dense_searches_and_decisions() {
    let Some(url) = postgres_database("decisions") else {
        return;
    };
    let report = publish_example(&url);
    let index = Index::open(example_index()).unwrap();
    assert_eq!(report.published, 4, "{report:?}");
    assert_eq!(report.chunks, index.len());
    let embedder = Arc::new(minilm());
    let folder = Retriever::with_store(Arc::clone(&embedder), index).unwrap();
    let server = Retriever::with_store(embedder, PgStore::open(&url).unwrap()).unwrap();
    let questions = [
        "What does it cost to take my kayak on the ferry?",
        "How is a connection opened?",
        "Who may cancel a booking, and until when?",
    ];
    // The policies that read stored values only; the evidence walk also reads the lexical
    // ranking, which is PostgreSQL's own (below).
    let policies = [
        Policy::scar(1),
        Policy::TopK,
        Policy::StaticWindow { window: 2 },
        Policy::Parent { block: 3 },
        Policy::Section { block: 3 },
    ];
    let mut compared = 0;
    for question in questions {
        let ours = server.prepare(question, FirstStage::Dense, 3).unwrap();
        let theirs = folder.prepare(question, FirstStage::Dense, 3).unwrap();
        let places = |retriever: &dyn ChunkStore, seeds: &[scar_policy::Seed]| {
            seeds
                .iter()
                .map(|s| place(retriever, s.id))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            places(server.store(), &ours.seeds),
            places(folder.store(), &theirs.seeds),
            "{question}"
        );
        for (a, b) in ours.seeds.iter().zip(&theirs.seeds) {
            assert!((a.score - b.score).abs() < 1e-5, "{question}: {a:?} {b:?}");
        }
        // The seeds' documents read once decide as the store does, read on every policy.
        let read = server.neighbourhood(&ours).unwrap();
        for policy in policies {
            let options = Options::new(policy).unwrap();
            let mut from_read = server.expand_in(&read, &ours, &options).unwrap();
            let ours = server.expand(&ours, &options).unwrap();
            let theirs = folder.expand(&theirs, &options).unwrap();
            assert_eq!(
                decisions(server.store(), &ours),
                decisions(folder.store(), &theirs),
                "{question} ({policy})"
            );
            from_read.timings = ours.timings;
            assert_eq!(from_read, ours, "{question} ({policy})");
            compared += ours.ledger.seeds.len();
        }
    }
    assert_eq!(compared, questions.len() * policies.len() * 3);
}

#[test]
fn publishing_again_writes_only_what_changed_and_removes_what_is_gone() {
    let Some(url) = postgres_database("incremental") else {
        return;
    };
    let first = publish_example(&url);
    assert_eq!((first.published, first.unchanged), (4, 0));
    assert_terms_counted(&url);
    let again = publish_example(&url);
    assert_eq!((again.published, again.unchanged, again.chunks), (0, 4, 0));

    // A folder index of three of the four files: the fourth leaves the store.
    let dir = std::env::temp_dir().join(format!("scar-pg-three-{}", std::process::id()));
    let docs = dir.join("docs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&docs).unwrap();
    let example = workspace().join("assets/example");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&example)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    names.sort();
    for name in &names[..3] {
        std::fs::copy(name, docs.join(name.file_name().unwrap())).unwrap();
    }
    let embedder = minilm();
    let cancel = AtomicBool::new(false);
    let three = index_folder(&dir.join("index"), &docs, &embedder);
    let docs = docs.canonicalize().unwrap();
    let report = publish(
        &three,
        &url,
        std::slice::from_ref(&docs),
        HnswSetting::Keep,
        &mut |_, _| {},
        &cancel,
    )
    .unwrap();
    // New paths: three files published; the example's stay, being under another root.
    assert_eq!((report.published, report.removed), (3, 0), "{report:?}");
    assert_terms_counted(&url);
    // A file changed: its words leave with its old chunks.
    let changed = docs.join(names[1].file_name().unwrap());
    let text = std::fs::read_to_string(&changed).unwrap();
    std::fs::write(
        &changed,
        text + "\nA quetzal-green canoe is a rare sight.\n",
    )
    .unwrap();
    std::fs::remove_file(docs.join(names[0].file_name().unwrap())).unwrap();
    let two = index_folder(&dir.join("index"), &docs, &embedder);
    let report = publish(
        &two,
        &url,
        &[docs],
        HnswSetting::Keep,
        &mut |_, _| {},
        &cancel,
    )
    .unwrap();
    assert_eq!(
        (report.published, report.unchanged, report.removed),
        (1, 1, 1),
        "{report:?}"
    );
    assert_terms_counted(&url);
    let store = PgStore::open(&url).unwrap();
    let example_chunks = Index::open(example_index()).unwrap().len();
    assert_eq!(ChunkStore::len(&store), example_chunks + two.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writers_publishing_at_once_never_lose_or_duplicate_a_chunk() {
    let Some(url) = postgres_database("concurrent") else {
        return;
    };
    let index = Index::open(example_index()).unwrap();
    let expected = index.len();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let index = Index::open(example_index()).unwrap();
                publish(
                    &index,
                    &url,
                    &[],
                    HnswSetting::Keep,
                    &mut |_, _| {},
                    &AtomicBool::new(false),
                )
                .unwrap();
            });
        }
    });
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT (document, ordinal)), \
             (SELECT count(*) FROM scar_files) FROM scar_chunks",
            &[],
        )
        .unwrap();
    let (chunks, distinct, files): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        (chunks as usize, distinct as usize, files),
        (expected, expected, 4)
    );
    assert_terms_counted(&url);
}

// A share of a few words is the same division of the same counts on either side.
#[allow(clippy::float_cmp)]
#[test]
fn bm25_reads_only_the_words_it_needs_and_ranks_as_scoring_every_chunk_does() {
    let Some(url) = postgres_database("bm25") else {
        return;
    };
    publish_example(&url);
    let store = PgStore::open(&url).unwrap();
    let folder = Index::open(example_index()).unwrap();
    let some: Vec<ChunkId> = store
        .dense_ranking(&vec![0.05; store.model().dimension], 12, None)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    // Rare words with common ones, common words alone (every chunk a candidate), a word no
    // chunk holds, and none at all.
    for question in [
        "What does it cost to take my kayak on the ferry?",
        "the of and a to in is",
        "Is the harbour office open on Sundays in winter?",
        "cancellation refund policy for the ferry crossing",
        "xylophone",
        "",
        // The analyzer's words, as PostgreSQL splits them again: Devanagari with its marks,
        // Japanese pairs, beside an English word the store holds.
        "ferry पर कयाक ले जाने का शुल्क",
        "フェリーの料金 ferry",
    ] {
        for depth in [1, 3, 10, 1000] {
            let what = format!("{question:?} to depth {depth}");
            let found = store.lexical_ranking(question, depth, None).unwrap();
            assert_same_ranking(
                &found.hits,
                &bm25_of_every_chunk(&url, question, depth, None),
                &what,
            );
            let found = store.lexical_ranking(question, depth, Some(&some)).unwrap();
            let expected = bm25_of_every_chunk(&url, question, depth, Some(&some));
            assert_same_ranking(&found.hits, &expected, &format!("{what} among {some:?}"));
        }
        // The share of the question BM25 reads, from the same counts as the folder index's.
        let reach = store.lexical_ranking(question, 1, None).unwrap().reach();
        let in_folder = folder.lexical_ranking(question, 1, None).unwrap().reach();
        assert!(
            (reach - in_folder).abs() < 1e-6,
            "{question:?}: {reach} {in_folder}"
        );
        match question {
            "" | "xylophone" => assert_eq!(reach, 0.0),
            "ferry पर कयाक ले जाने का शुल्क" => {
                assert_eq!(reach, 1.0 / 7.0);
            }
            "the of and a to in is" => assert_eq!(reach, 1.0),
            _ => assert!(reach > 0.0 && reach <= 1.0, "{question:?}: {reach}"),
        }
    }
}

#[test]
fn errors_name_the_server_and_what_to_do_without_the_password() {
    // Nothing listens on port 1.
    let error =
        PgStore::open("postgres://ann:s3cret@127.0.0.1:1/scar?connect_timeout=2").unwrap_err();
    let message = scar_core::ErrorChain(&error).to_string();
    assert!(matches!(error, StoreError::Unreachable { .. }), "{message}");
    assert!(
        message.contains("postgres://ann:***@127.0.0.1:1/scar"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");

    let Some(url) = postgres_database("errors") else {
        return;
    };
    let error = PgStore::open(&url).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::NoVector { .. } | StoreError::NoStore { .. }
        ),
        "{error}"
    );
    let missing = format!("{url}_missing");
    let error = PgStore::open(&missing).unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
    assert!(error.to_string().contains("does not exist"), "{error}");
}

/// Whether the replica has replayed the primary's log to where it ends now, within 30 s
/// (commits are not waited for on the test server, so its insert position, not its write
/// position).
fn replayed(primary: &str, replica: &str) -> bool {
    let mut primary = postgres::Client::connect(primary, postgres::NoTls).unwrap();
    let now: String = primary
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
        .unwrap()
        .get(0);
    let started = std::time::Instant::now();
    loop {
        let done = postgres::Client::connect(replica, postgres::NoTls)
            .and_then(|mut client| {
                client.query_one(
                    "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                    &[&now],
                )
            })
            .is_ok_and(|row| row.get::<_, bool>(0));
        if done || started.elapsed().as_secs() > 30 {
            return done;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_replica_serves_what_the_primary_committed_and_takes_no_writes() {
    let Some(url) = postgres_database("replica") else {
        return;
    };
    let Some(replica) = postgres_replica_of(&url) else {
        return;
    };
    publish_example(&url);
    assert!(
        replayed(&url, &replica),
        "the replica did not catch up in 30 s"
    );
    let embedder = Arc::new(minilm());
    let from_primary =
        Retriever::with_store(Arc::clone(&embedder), PgStore::open(&url).unwrap()).unwrap();
    let from_replica = Retriever::with_store(embedder, PgStore::open(&replica).unwrap()).unwrap();
    let options = Options::new(Policy::scar(1)).unwrap();
    for question in [
        "What does it cost to take my kayak on the ferry?",
        "Who may cancel a booking, and until when?",
    ] {
        for stage in [FirstStage::Dense, FirstStage::Hybrid] {
            let ours = from_replica.search(question, stage, 3, &options).unwrap();
            let theirs = from_primary.search(question, stage, 3, &options).unwrap();
            assert_eq!(
                decisions(from_replica.store(), &ours),
                decisions(from_primary.store(), &theirs),
                "{question} ({stage})"
            );
        }
    }
    // A new file cannot be written there: the replica says it is read-only.
    let dir = std::env::temp_dir().join(format!("scar-pg-replica-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(
        dir.join("docs/tides.txt"),
        "High tide is at six in the morning.",
    )
    .unwrap();
    let cancel = AtomicBool::new(false);
    let index = index_folder(&dir.join("index"), &dir.join("docs"), &minilm());
    let error = publish(
        &index,
        &replica,
        &[],
        HnswSetting::Keep,
        &mut |_, _| {},
        &cancel,
    )
    .unwrap_err();
    assert!(matches!(error, StoreError::Refused { .. }), "{error}");
    assert!(error.to_string().contains("read-only"), "{error}");

    // A replica behind its primary serves the state it has replayed, whole, then catches up.
    let mut standby = postgres::Client::connect(&replica, postgres::NoTls).unwrap();
    standby
        .batch_execute("SELECT pg_wal_replay_pause()")
        .unwrap();
    let report = publish(
        &index,
        &url,
        &[],
        HnswSetting::Keep,
        &mut |_, _| {},
        &cancel,
    )
    .unwrap();
    assert_eq!(report.published, 1);
    let files = |store: &str| PgStore::open(store).unwrap().summary().unwrap().files;
    assert_eq!((files(&url), files(&replica)), (5, 4));
    standby
        .batch_execute("SELECT pg_wal_replay_resume()")
        .unwrap();
    assert!(
        replayed(&url, &replica),
        "the replica did not catch up in 30 s"
    );
    assert_eq!(files(&replica), 5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_found_through_a_link_leaves_the_store_with_its_link() {
    use std::os::unix::fs::symlink;

    let Some(url) = postgres_database("links") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("scar-pg-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (docs, outside) = (dir.join("docs"), dir.join("outside"));
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        docs.join("tides.txt"),
        "High tide is at six in the morning.",
    )
    .unwrap();
    std::fs::write(
        outside.join("walrus.txt"),
        "A walrus was seen on the north pier.",
    )
    .unwrap();
    symlink(outside.join("walrus.txt"), docs.join("walrus-link.txt")).unwrap();
    let embedder = minilm();
    let cancel = AtomicBool::new(false);
    let index_and_publish = || {
        let index = index_folder(&dir.join("index"), &docs, &embedder);
        let roots = [scar_index::resolve_root(&docs)];
        publish(
            &index,
            &url,
            &roots,
            HnswSetting::Keep,
            &mut |_, _| {},
            &cancel,
        )
        .unwrap()
    };
    assert_eq!(index_and_publish().published, 2);
    std::fs::remove_file(docs.join("walrus-link.txt")).unwrap();
    let report = index_and_publish();
    assert_eq!((report.removed, report.unchanged), (1, 1), "{report:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_hnsw_index_on_the_vectors_is_built_used_and_dropped_as_asked() {
    let Some(url) = postgres_database("hnsw") else {
        return;
    };
    let index = Index::open(example_index()).unwrap();
    let cancel = AtomicBool::new(false);
    let publish_with =
        |setting| publish(&index, &url, &[], setting, &mut |_, _| {}, &cancel).unwrap();
    assert_eq!(publish_with(HnswSetting::Keep).hnsw, None);
    let exact = PgStore::open(&url).unwrap();
    let params = HnswParams::default();
    assert_eq!(publish_with(HnswSetting::Build(params)).hnsw, Some(params));
    let graph = PgStore::open(&url).unwrap();
    assert_eq!(graph.summary().unwrap().hnsw, Some(params));

    // The store's dense query can walk the index (the planner scans a store this small, and
    // takes the index once scanning costs more).
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute("SET enable_seqscan = off").unwrap();
    let plan: String = client
        .query(
            "EXPLAIN SELECT id FROM scar_chunks ORDER BY embedding <=> \
             (SELECT embedding FROM scar_chunks WHERE id = 1), id LIMIT 20",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0) + "\n")
        .collect();
    assert!(plan.contains("scar_chunks_embedding"), "{plan}");

    // On a store this small, candidates enough find every exact hit, in exact order, whole
    // store and within documents alike.
    let embedder = minilm();
    let documents = exact.chunks_of(&[1]).unwrap();
    for question in [
        "What does it cost to take my kayak on the ferry?",
        "How is a connection opened?",
    ] {
        let query = embedder.embed_query(question).unwrap();
        for among in [None, Some(documents.as_slice())] {
            let ids = |store: &PgStore| -> Vec<ChunkId> {
                store
                    .dense_ranking(&query, 20, among)
                    .unwrap()
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect()
            };
            assert_eq!(ids(&graph), ids(&exact), "{question}");
        }
    }

    // Asking again with another search breadth keeps the index and records the breadth.
    let wider = HnswParams {
        expansion_search: 512,
        ..params
    };
    assert_eq!(publish_with(HnswSetting::Build(wider)).hnsw, Some(wider));
    assert_eq!(publish_with(HnswSetting::Keep).hnsw, Some(wider));
    assert_eq!(publish_with(HnswSetting::Remove).hnsw, None);
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'scar_chunks_embedding'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    assert_eq!(PgStore::open(&url).unwrap().summary().unwrap().hnsw, None);
}

#[test]
fn an_older_store_is_upgraded_by_its_next_writer_and_another_chunker_refused() {
    let Some(url) = postgres_database("schema") else {
        return;
    };
    publish_example(&url);
    // What version 1 had: its version and model recorded, no chunker, English stems as the
    // lexical words and no count of them.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "UPDATE scar_meta SET value = '1' WHERE key = 'schema_version'; \
             DELETE FROM scar_meta WHERE key = 'chunker'; \
             DROP TABLE scar_terms; \
             ALTER TABLE scar_chunks DROP COLUMN lexical, DROP COLUMN words; \
             ALTER TABLE scar_chunks ADD COLUMN lexical tsvector GENERATED ALWAYS AS \
                 (to_tsvector('english', heading_path || ' ' || text)) STORED",
        )
        .unwrap();
    let error = PgStore::open(&url).unwrap_err();
    assert!(
        matches!(error, StoreError::OlderSchema { found: 1, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("to upgrade it"), "{error}");
    let report = publish_example(&url);
    assert_eq!((report.published, report.unchanged), (0, 4), "{report:?}");
    let store = PgStore::open(&url).unwrap();
    let summary = store.summary().unwrap();
    assert_eq!(summary.schema_version, scar_postgres::SCHEMA_VERSION);
    // The words cut again, unstemmed as BM25 reads them ("booked", which stems to "book"),
    // and counted.
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE lexical @@ 'booked'::tsquery), \
             count(*) FILTER (WHERE words = 0) FROM scar_chunks",
            &[],
        )
        .unwrap();
    assert_eq!((row.get::<_, i64>(0) > 0, row.get::<_, i64>(1)), (true, 0));
    assert!(
        !store
            .lexical_ranking("booked", 5, None)
            .unwrap()
            .hits
            .is_empty()
    );
    assert_eq!(
        summary.chunker,
        Index::open(example_index()).unwrap().manifest().chunker
    );
    assert_terms_counted(&url);

    // Version 2 did not count the chunks holding each word: its next writer counts them.
    client
        .batch_execute(
            "UPDATE scar_meta SET value = '2' WHERE key = 'schema_version'; DROP TABLE scar_terms",
        )
        .unwrap();
    let error = PgStore::open(&url).unwrap_err();
    assert!(
        matches!(error, StoreError::OlderSchema { found: 2, .. }),
        "{error}"
    );
    publish_example(&url);
    assert_terms_counted(&url);
    assert!(
        !PgStore::open(&url)
            .unwrap()
            .lexical_ranking("booked", 5, None)
            .unwrap()
            .hits
            .is_empty()
    );

    // An index cut another way is refused, and the store keeps what it held.
    let dir = std::env::temp_dir().join(format!("scar-pg-chunker-{}", std::process::id()));
    let docs = dir.join("docs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("note.txt"), "A short note about kayaks.").unwrap();
    let options = IndexOptions {
        chunker: ChunkerConfig {
            capacity: 80,
            ..ChunkerConfig::default()
        },
        ..IndexOptions::default()
    };
    let other = index_folder_with(&dir.join("index"), &docs, &minilm(), &options);
    let error = publish(
        &other,
        &url,
        &[],
        HnswSetting::Keep,
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(
        matches!(error, StoreError::ChunkerMismatch { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("chunks of at most 80 tokens"),
        "{error}"
    );
    assert_eq!(PgStore::open(&url).unwrap().summary().unwrap().files, 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each shard holds whole documents, and together `expected` chunks.
fn assert_whole_documents_on(shards: &[String], expected: usize) {
    let mut seen = Vec::new();
    let mut chunks = 0;
    for shard in shards {
        let mut client = postgres::Client::connect(shard, postgres::NoTls).unwrap();
        let rows = client
            .query("SELECT document, count(*) FROM scar_chunks GROUP BY 1", &[])
            .unwrap();
        assert!(!rows.is_empty(), "{shard} holds nothing");
        for row in rows {
            let document: i32 = row.get(0);
            assert!(!seen.contains(&document), "document {document} is split");
            seen.push(document);
            chunks += row.get::<_, i64>(1) as usize;
        }
    }
    assert_eq!(chunks, expected);
}

/// The same searches and decisions on one server and on a coordinator of shards, every first
/// stage, policies of every kind.
fn assert_same_decisions(embedder: &Arc<Embedder>, single: &str, coordinator: &str) {
    let one = Retriever::with_store(Arc::clone(embedder), PgStore::open(single).unwrap()).unwrap();
    let two =
        Retriever::with_store(Arc::clone(embedder), PgStore::open(coordinator).unwrap()).unwrap();
    let mut compared = 0;
    for question in [
        "What does it cost to take my kayak on the ferry?",
        "How is a connection opened?",
    ] {
        for stage in [FirstStage::Dense, FirstStage::Bm25, FirstStage::Hybrid] {
            let ours = two.prepare(question, stage, 3).unwrap();
            let theirs = one.prepare(question, stage, 3).unwrap();
            for policy in [
                Policy::scar(1),
                Policy::evidence(2),
                Policy::StaticWindow { window: 1 },
                Policy::Section { block: 3 },
            ] {
                let options = Options::new(policy).unwrap();
                let ours = two.expand(&ours, &options).unwrap();
                let theirs = one.expand(&theirs, &options).unwrap();
                assert_eq!(
                    decisions(two.store(), &ours),
                    decisions(one.store(), &theirs),
                    "{question} ({stage}, {policy})"
                );
                compared += ours.ledger.seeds.len();
            }
        }
    }
    // Most searches find three seeds; a lexical one can find fewer on these four files.
    assert!(compared >= 2 * 3 * 4 * 2, "{compared} seeds compared");
}

/// With the coordinator's way to `shard` (its second) broken, a search is an error naming the
/// shard, not fewer answers; mended, it answers again.
fn assert_an_unreachable_shard_is_an_error(
    store: &PgStore,
    coordinator: &str,
    shard: &str,
    embedder: &Embedder,
) {
    let mut client = postgres::Client::connect(coordinator, postgres::NoTls).unwrap();
    client
        .batch_execute("ALTER SERVER scar_shard_1 OPTIONS (SET port '1')")
        .unwrap();
    let query = embedder.embed_query("How is a connection opened?").unwrap();
    let error = store.dense_ranking(&query, 10, None).unwrap_err();
    let message = scar_core::ErrorChain(&error).to_string();
    assert!(message.contains("scar_shard_1"), "{message}");
    let port = shard.rsplit(':').next().unwrap().split('/').next().unwrap();
    client
        .batch_execute(&format!(
            "ALTER SERVER scar_shard_1 OPTIONS (SET port '{port}')"
        ))
        .unwrap();
    assert_eq!(store.dense_ranking(&query, 10, None).unwrap().len(), 10);
}

#[test]
fn a_store_sharded_over_two_servers_decides_as_one_server_does() {
    let (Some(single), Some(coordinator), Some(shards)) = (
        postgres_database("unsharded"),
        postgres_database("coordinator"),
        postgres_shards("shard"),
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("scar-pg-shards-{}", std::process::id()));
    let docs = dir.join("docs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&docs).unwrap();
    for entry in std::fs::read_dir(workspace().join("assets/example")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, docs.join(path.file_name().unwrap())).unwrap();
    }
    let docs = docs.canonicalize().unwrap();
    let embedder = Arc::new(minilm());
    let index = index_folder(&dir.join("index"), &docs, &embedder);
    let (model, chunker) = (&index.manifest().model, &index.manifest().chunker);

    let error = create_sharded(&coordinator, &shards[..1], model, chunker).unwrap_err();
    assert!(
        error.to_string().contains("two shard servers or more"),
        "{error}"
    );
    create_sharded(&coordinator, &shards, model, chunker).unwrap();
    // Again with the same shards: nothing to do; with others, refused.
    create_sharded(&coordinator, &shards, model, chunker).unwrap();
    let reversed: Vec<String> = shards.iter().rev().cloned().collect();
    let error = create_sharded(&coordinator, &reversed, model, chunker).unwrap_err();
    assert!(
        error.to_string().contains("already holds a store"),
        "{error}"
    );

    let roots = std::slice::from_ref(&docs);
    let publish_to = |url: &str, index: &Index| {
        let cancel = AtomicBool::new(false);
        publish(
            index,
            url,
            roots,
            HnswSetting::Keep,
            &mut |_, _| {},
            &cancel,
        )
        .unwrap()
    };
    publish_to(&single, &index);
    let report = publish_to(&coordinator, &index);
    assert_eq!(
        (report.published, report.chunks),
        (4, index.len()),
        "{report:?}"
    );
    assert_whole_documents_on(&shards, index.len());
    assert_same_decisions(&embedder, &single, &coordinator);

    // A file gone from the folder leaves its shard too.
    let gone = std::fs::read_dir(&docs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(gone).unwrap();
    let three = index_folder(&dir.join("index"), &docs, &embedder);
    publish_to(&single, &three);
    let report = publish_to(&coordinator, &three);
    assert_eq!((report.removed, report.unchanged), (1, 3), "{report:?}");
    assert_whole_documents_on(&shards, three.len());
    assert_same_decisions(&embedder, &single, &coordinator);

    let store = PgStore::open(&coordinator).unwrap();
    let summary = store.summary().unwrap();
    assert_eq!(summary.shards.len(), 2);
    assert_eq!((summary.files, summary.chunks), (3, three.len()));
    // An HNSW index is each shard's own.
    assert_an_unreachable_shard_is_an_error(&store, &coordinator, &shards[1], &embedder);
    let error = publish(
        &three,
        &coordinator,
        roots,
        HnswSetting::Build(HnswParams::default()),
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(matches!(error, StoreError::ShardedIndex { .. }), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_connection_the_server_drops_is_opened_again() {
    let Some(url) = postgres_database("reconnect") else {
        return;
    };
    publish_example(&url);
    let store = PgStore::open(&url).unwrap();
    let query = minilm().embed_query("How is a connection opened?").unwrap();
    let before = store.dense_ranking(&query, 5, None).unwrap();
    // What a server restart or an administrator does to the store's connection.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let dropped: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()) terminated",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(dropped, 1);
    assert_eq!(store.dense_ranking(&query, 5, None).unwrap(), before);
}

/// Searches served at once each take a connection of their own, opened when none is free, and
/// find what they find alone.
#[test]
fn searches_at_once_run_on_connections_of_their_own() {
    let Some(url) = postgres_database("pool") else {
        return;
    };
    publish_example(&url);
    let store = PgStore::open(&url).unwrap();
    let questions = [
        "What does it cost to take my kayak on the ferry?",
        "When does the first ferry leave?",
        "Can I bring my dog on board?",
    ];
    let embedder = minilm();
    let queries: Vec<Vec<f32>> = questions
        .iter()
        .map(|q| embedder.embed_query(q).unwrap())
        .collect();
    let alone: Vec<_> = questions
        .iter()
        .zip(&queries)
        .map(|(question, query)| {
            (
                store.dense_ranking(query, 10, None).unwrap(),
                store.lexical_ranking(question, 10, None).unwrap(),
            )
        })
        .collect();
    let threads: u8 = 4;
    let start = std::sync::Barrier::new(threads.into());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                start.wait();
                for _ in 0..10 {
                    for ((question, query), (dense, lexical)) in
                        questions.iter().zip(&queries).zip(&alone)
                    {
                        assert_eq!(&store.dense_ranking(query, 10, None).unwrap(), dense);
                        assert_eq!(&store.lexical_ranking(question, 10, None).unwrap(), lexical);
                    }
                }
            });
        }
    });
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let connections: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        (2..=i64::from(threads)).contains(&connections),
        "{connections} connections for {threads} threads searching at once"
    );
}

/// A server that opened the store before another writer built its HNSW index still ranks as
/// deep as asked: pgvector's own breadth (40 candidates) would cut the ranking short.
#[test]
fn a_store_opened_before_its_hnsw_index_was_built_ranks_as_deep_as_asked() {
    let Some(url) = postgres_database("hnsw_later") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("scar-pg-hnsw-later-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for i in 0..30 {
        let text: String = (0..4)
            .map(|p| format!("Note {i}, part {p}: the ferry leaves at {p} past {i}.\n\n"))
            .collect::<Vec<_>>()
            .concat();
        std::fs::write(docs.join(format!("{i:02}.txt")), text).unwrap();
    }
    let embedder = scar_test_support::tiny_bert();
    let options = IndexOptions {
        chunker: ChunkerConfig {
            unit: scar_index::ChunkUnit::Characters,
            capacity: 60,
            ..ChunkerConfig::default()
        },
        ..IndexOptions::default()
    };
    let index = index_folder_with(&dir.join("index"), &docs, &embedder, &options);
    assert!(index.len() > 100, "{} chunks", index.len());
    let cancel = AtomicBool::new(false);
    let publish_with =
        |setting| publish(&index, &url, &[], setting, &mut |_, _| {}, &cancel).unwrap();
    publish_with(HnswSetting::Keep);
    // The planner walks the index, as it does on a large store.
    let (host, database) = url.rsplit_once('/').unwrap();
    let mut client =
        postgres::Client::connect(&format!("{host}/postgres"), postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "ALTER DATABASE {database} SET enable_seqscan = off"
        ))
        .unwrap();
    let opened_before = PgStore::open(&url).unwrap();
    publish_with(HnswSetting::Build(HnswParams::default()));
    let opened_after = PgStore::open(&url).unwrap();

    let query = embedder.embed_query("When does the ferry leave?").unwrap();
    let ids = |store: &PgStore| -> Vec<ChunkId> {
        store
            .dense_ranking(&query, 100, None)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(ids(&opened_after).len(), 100);
    assert_eq!(ids(&opened_before), ids(&opened_after));
    let _ = std::fs::remove_dir_all(&dir);
}
