//! [`publish`]: a folder index's files into the store, each file in one transaction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use pgvector::Vector;
use postgres::{Client, Transaction};
use scar_core::{ChunkId, Side};
use scar_index::{Analyzer, DocumentEntry, HnswParams, HnswSetting, Index, Skipped};

use crate::store::{connect, int, seam_name};
use crate::{Result, StoreError, schema};

/// Rows inserted by one statement: a long document goes in several, in the same transaction.
const ROWS_PER_INSERT: usize = 1000;

/// What [`publish`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PublishReport {
    /// Files written, new or changed.
    pub published: usize,
    /// Files the store already held with the same content.
    pub unchanged: usize,
    /// Files under the roots that the index no longer holds, removed from the store.
    pub removed: usize,
    /// Chunks written.
    pub chunks: usize,
    /// Files left out, with why.
    pub skipped: Vec<Skipped>,
    /// The HNSW index on the store's vectors after the run, when it has one.
    pub hnsw: Option<HnswParams>,
    /// True when a cancel stopped it between two files.
    pub cancelled: bool,
}

/// Writes the files `index` holds into the store at `url` (creating its tables in an empty
/// database), and removes from the store the files under `roots` that the index no longer
/// holds. A file whose content the store already holds is left alone. Each file is replaced in
/// one transaction, under a lock on its path: writers publishing at once never lose or
/// duplicate a chunk, and a writer killed midway leaves each file whole, old or new. Then the
/// store's HNSW index is built, tuned or dropped as `hnsw` asks (as `scar index` treats a
/// folder's graph). `progress` hears (files done, files in all); `cancel` stops it between two
/// files.
pub fn publish(
    index: &Index,
    url: &str,
    roots: &[PathBuf],
    hnsw: HnswSetting,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<PublishReport> {
    let failed = |e| StoreError::from_client(url, e);
    let mut client = connect(url)?;
    let mut transaction = client.transaction().map_err(failed)?;
    let manifest = index.manifest();
    let meta = schema::create_or_check(&mut transaction, url, &manifest.model, &manifest.chunker)?;
    transaction.commit().map_err(failed)?;

    let mut report = PublishReport {
        hnsw: meta.hnsw,
        ..PublishReport::default()
    };
    // A file's documents (its text, then what it carries), files in the order they were indexed.
    let mut files: BTreeMap<u32, (&str, Vec<&DocumentEntry>)> = BTreeMap::new();
    let mut first_slot: HashMap<&Path, u32> = HashMap::new();
    for document in index.documents() {
        let Some(path) = document.path.to_str() else {
            let reason = StoreError::PathNotUtf8(document.path.display().to_string());
            report.skipped.push(Skipped {
                path: document.path.clone(),
                reason: reason.to_string(),
            });
            continue;
        };
        let slot = *first_slot.entry(&document.path).or_insert(document.slot);
        files
            .entry(slot)
            .or_insert((path, Vec::new()))
            .1
            .push(document);
    }
    // Each stored file's hash, and where it was found through a link, if it was.
    let held: HashMap<String, (String, Option<String>)> = client
        .query("SELECT path, hash, reached_from FROM scar_files", &[])
        .map_err(failed)?
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect();
    let gone = gone_under(&held, roots, &files);
    let total = files.len() + gone.len();
    for (done, (path, documents)) in files.values().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            report.cancelled = true;
            return Ok(report);
        }
        let hash = &documents[0].hash;
        if held.get(*path).is_some_and(|(held, _)| held == hash) {
            report.unchanged += 1;
        } else {
            match write_file(&mut client, url, index, meta.analyzer, path, documents)? {
                Some(chunks) => {
                    report.published += 1;
                    report.chunks += chunks;
                }
                None => report.unchanged += 1,
            }
        }
        progress(done + 1, total);
    }
    for (done, path) in gone.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            report.cancelled = true;
            return Ok(report);
        }
        let mut transaction = client.transaction().map_err(failed)?;
        lock(&mut transaction, url, path)?;
        let removed = delete_file(&mut transaction, url, path)?;
        update_terms(&mut transaction, url, &removed.words, &[])?;
        report.removed += removed.files;
        transaction.commit().map_err(failed)?;
        progress(files.len() + done + 1, total);
    }
    let mut transaction = client.transaction().map_err(failed)?;
    report.hnsw = schema::apply_hnsw(&mut transaction, url, hnsw)?;
    transaction.commit().map_err(failed)?;
    Ok(report)
}

/// The files the store holds under `roots` (or found through a link under them) that the index
/// does not.
fn gone_under(
    held: &HashMap<String, (String, Option<String>)>,
    roots: &[PathBuf],
    files: &BTreeMap<u32, (&str, Vec<&DocumentEntry>)>,
) -> Vec<String> {
    let kept: HashSet<&str> = files.values().map(|(path, _)| *path).collect();
    let under = |path: &str| roots.iter().any(|root| Path::new(path).starts_with(root));
    let mut gone: Vec<String> = held
        .iter()
        .filter(|(path, _)| !kept.contains(path.as_str()))
        .filter(|(path, (_, found_at))| under(path) || found_at.as_deref().is_some_and(under))
        .map(|(path, _)| path.clone())
        .collect();
    gone.sort();
    gone
}

/// Holds the lock on `path` until the transaction ends: one writer at a time per file.
fn lock(transaction: &mut Transaction<'_>, url: &str, path: &str) -> Result<()> {
    transaction
        .execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&path],
        )
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(())
}

/// What a transaction removed: files (0 or 1) and the words of the chunks, as [`count_words`]
/// reads them.
struct Removed {
    files: usize,
    words: WordCounts,
}

/// Words and, for each, the chunks holding it.
#[derive(Default)]
struct WordCounts {
    lexemes: Vec<String>,
    chunks: Vec<i32>,
}

/// Serialises the writers' updates of `scar_terms` from the update to the commit, so that
/// writers touching the same words in other orders never deadlock (an arbitrary constant).
const TERMS_LOCK: i64 = 0x5CA2_0002;

/// The words of the chunks of `documents` and, for each, the chunks holding it.
fn count_words(
    transaction: &mut Transaction<'_>,
    url: &str,
    documents: &[i32],
) -> Result<WordCounts> {
    let rows = transaction
        .query(
            "SELECT u.lexeme, count(*)::int FROM scar_chunks c, unnest(c.lexical) u \
             WHERE c.document = ANY($1) GROUP BY u.lexeme",
            &[&documents],
        )
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(WordCounts {
        lexemes: rows.iter().map(|row| row.get(0)).collect(),
        chunks: rows.iter().map(|row| row.get(1)).collect(),
    })
}

/// Takes `removed`'s words off `scar_terms` and adds those of the chunks of `added` (documents
/// this transaction wrote). Last in the transaction: the lock it takes is held to the commit.
fn update_terms(
    transaction: &mut Transaction<'_>,
    url: &str,
    removed: &WordCounts,
    added: &[i32],
) -> Result<()> {
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&TERMS_LOCK])
        .and_then(|_| {
            transaction.execute(
                "INSERT INTO scar_terms (lexeme, chunks) \
                 SELECT lexeme, sum(n)::int FROM ( \
                     SELECT lexeme, -n AS n FROM unnest($1::text[], $2::int[]) AS r(lexeme, n) \
                     UNION ALL \
                     SELECT u.lexeme, count(*)::int FROM scar_chunks c, unnest(c.lexical) u \
                     WHERE c.document = ANY($3) GROUP BY u.lexeme \
                 ) changes GROUP BY lexeme HAVING sum(n) <> 0 \
                 ON CONFLICT (lexeme) DO UPDATE SET chunks = scar_terms.chunks + excluded.chunks",
                &[&removed.lexemes, &removed.chunks, &added],
            )
        })
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(())
}

/// Deletes the file at `path`, its documents and their chunks, saying what went.
/// The chunks go first and by name: on shard servers, no foreign key reaches them.
fn delete_file(transaction: &mut Transaction<'_>, url: &str, path: &str) -> Result<Removed> {
    let failed = |e| StoreError::from_client(url, e);
    let documents: Vec<i32> = transaction
        .query("SELECT id FROM scar_documents WHERE path = $1", &[&path])
        .map_err(failed)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let words = count_words(transaction, url, &documents)?;
    transaction
        .execute(
            "DELETE FROM scar_chunks WHERE document = ANY($1)",
            &[&documents],
        )
        .map_err(failed)?;
    let files = transaction
        .execute("DELETE FROM scar_files WHERE path = $1", &[&path])
        .map_err(failed)?;
    Ok(Removed {
        files: usize::from(files > 0),
        words,
    })
}

/// Replaces the file at `path` with `documents`, in one transaction: the chunks written, or
/// `None` when another writer stored the same content first.
fn write_file(
    client: &mut Client,
    url: &str,
    index: &Index,
    analyzer: Analyzer,
    path: &str,
    documents: &[&DocumentEntry],
) -> Result<Option<usize>> {
    let failed = |e| StoreError::from_client(url, e);
    let hash = &documents[0].hash;
    let mut transaction = client.transaction().map_err(failed)?;
    lock(&mut transaction, url, path)?;
    let current = transaction
        .query_opt("SELECT hash FROM scar_files WHERE path = $1", &[&path])
        .map_err(failed)?;
    if current.is_some_and(|row| row.get::<_, String>(0) == *hash) {
        return Ok(None);
    }
    let removed = delete_file(&mut transaction, url, path)?;
    transaction
        .execute(
            "INSERT INTO scar_files (path, hash, reached_from) VALUES ($1, $2, $3)",
            &[
                &path,
                hash,
                &documents[0]
                    .reached_from
                    .as_deref()
                    .map(|found_at| found_at.to_string_lossy().into_owned()),
            ],
        )
        .map_err(failed)?;
    let mut chunks = 0;
    let mut added = Vec::with_capacity(documents.len());
    for document in documents {
        let id: i32 = transaction
            .query_one(
                "INSERT INTO scar_documents (path, attachment) VALUES ($1, $2) RETURNING id",
                &[&path, &document.attachment],
            )
            .map_err(failed)?
            .get(0);
        added.push(id);
        let rows: Vec<u32> =
            (document.first_row..document.first_row + document.chunk_count).collect();
        for batch in rows.chunks(ROWS_PER_INSERT) {
            insert_chunks(&mut transaction, url, index, analyzer, id, batch)?;
        }
        chunks += rows.len();
    }
    update_terms(&mut transaction, url, &removed.words, &added)?;
    transaction.commit().map_err(failed)?;
    Ok(Some(chunks))
}

/// Inserts the index's `rows` as chunks of document `document`, in one statement, their words
/// cut by the store's `analyzer`.
fn insert_chunks(
    transaction: &mut Transaction<'_>,
    url: &str,
    index: &Index,
    analyzer: Analyzer,
    document: i32,
    rows: &[u32],
) -> Result<()> {
    let mut columns = Columns::default();
    for &row in rows {
        let id = ChunkId(row);
        let Some(chunk) = index.chunk(id) else {
            continue;
        };
        let count = |value: usize| i32::try_from(value).unwrap_or(i32::MAX);
        columns.ordinal.push(int(chunk.ordinal));
        columns.char_start.push(count(chunk.chars.start));
        columns.char_end.push(count(chunk.chars.end));
        columns.tokens.push(count(chunk.token_count));
        columns.section.push(chunk.section.map(int));
        columns.page.push(chunk.page.map(int));
        columns.heading_path.push(chunk.heading_path.to_owned());
        columns.text.push(chunk.text.to_owned());
        columns.continuity_next.push(index.continuity_next(id));
        columns
            .seam_after
            .push(index.seam(id, Side::Next).map(seam_name));
        columns
            .embedding
            .push(Vector::from(index.embedding(id).to_vec()));
        let words = analyzer.words(&format!("{} {}", chunk.heading_path, chunk.text));
        columns.word_count.push(count(words.len()));
        columns.words.push(words.join(" "));
    }
    transaction
        .execute(
            "INSERT INTO scar_chunks (document, ordinal, char_start, char_end, tokens, section, \
             page, heading_path, text, continuity_next, seam_after, embedding, lexical, words) \
             SELECT $1, o, s, e, t, sc, p, h, x, c, sa, v, to_tsvector('simple', w), n \
             FROM unnest($2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], \
             $8::text[], $9::text[], $10::real[], $11::text[], $12::vector[], $13::text[], \
             $14::int[]) AS u(o, s, e, t, sc, p, h, x, c, sa, v, w, n)",
            &[
                &document,
                &columns.ordinal,
                &columns.char_start,
                &columns.char_end,
                &columns.tokens,
                &columns.section,
                &columns.page,
                &columns.heading_path,
                &columns.text,
                &columns.continuity_next,
                &columns.seam_after,
                &columns.embedding,
                &columns.words,
                &columns.word_count,
            ],
        )
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(())
}

/// Chunks as columns, for one insert over `unnest`.
#[derive(Default)]
struct Columns {
    ordinal: Vec<i32>,
    char_start: Vec<i32>,
    char_end: Vec<i32>,
    tokens: Vec<i32>,
    section: Vec<Option<i32>>,
    page: Vec<Option<i32>>,
    heading_path: Vec<String>,
    text: Vec<String>,
    continuity_next: Vec<Option<f32>>,
    seam_after: Vec<Option<String>>,
    embedding: Vec<Vector>,
    /// The words BM25 reads, space-separated, and their number.
    words: Vec<String>,
    word_count: Vec<i32>,
}
