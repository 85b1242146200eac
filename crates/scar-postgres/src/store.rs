//! [`PgStore`]: the retriever's [`ChunkStore`] over a PostgreSQL database.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pgvector::Vector;
use postgres::{Client, NoTls, Row};
use scar_core::{ChunkId, Position, SeamKind, Side};
use scar_embed::ModelInfo;
use scar_index::{Analyzer, ChunkerConfig, HnswParams};
use scar_policy::ChunkSource;
use scar_retrieve::{ChunkStore, LexicalRanking, StoredChunk, StoredDocument};

use crate::schema::Meta;
use crate::{Result, StoreError, bm25, redacted, schema};

/// What a store holds, as `scar inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoreSummary {
    /// The server and database, password left out.
    pub url: String,
    /// The version of its tables.
    pub schema_version: u32,
    /// The model its chunks were embedded with.
    pub model: ModelInfo,
    /// How its documents were cut.
    pub chunker: ChunkerConfig,
    /// How its text is cut into the words BM25 counts.
    pub analyzer: Analyzer,
    /// The HNSW index on its vectors (approximate dense search), when it has one.
    pub hnsw: Option<HnswParams>,
    /// The shard servers its chunks live on (passwords left out); empty when they live beside
    /// its documents.
    pub shards: Vec<String>,
    /// Files published.
    pub files: usize,
    /// Their documents (a mail's attachments are documents of their own).
    pub documents: usize,
    /// Their chunks.
    pub chunks: usize,
}

/// How long a connection may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most candidates pgvector's HNSW search keeps (its `hnsw.ef_search` limit).
const MAX_EF_SEARCH: usize = 1000;

/// How long a count of the store's chunks is trusted at least: writers on other machines add
/// and remove chunks while it is searched.
const COUNT_LIFETIME: Duration = Duration::from_secs(1);

/// A count is trusted this many times as long as it took, so that counting a large store
/// (a scan) takes at most a hundredth of the time spent searching it.
const COUNT_COST_SHARE: u32 = 100;

/// The chunks stored and their mean length in words, when they were counted and for how long
/// the count is trusted.
#[derive(Debug, Clone, Copy)]
struct Counted {
    at: Instant,
    lifetime: Duration,
    chunks: usize,
    mean_words: f64,
}

/// The count of `scar_chunks`, and the mean length BM25 divides by.
const COUNT: &str = "SELECT count(*), coalesce(avg(words), 0)::float8 FROM scar_chunks";

/// A SCAR store in a PostgreSQL database, read by the retriever as a folder index is.
pub struct PgStore {
    url: String,
    /// Connections not in use: a search takes one, or opens one when none is free, and gives
    /// it back, so searches served at once run at once on the server.
    idle: Mutex<Vec<Client>>,
    meta: Meta,
    /// The chunks stored, when they were counted.
    counted: Mutex<Counted>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &redacted(&self.url))
            .field("model", &self.meta.model.id)
            // The last count: showing the store must not query it.
            .field(
                "chunks",
                &self
                    .counted
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .chunks,
            )
            .finish_non_exhaustive()
    }
}

/// Connects to `url` (`postgres://USER@HOST:PORT/DB`, or libpq's key-value form), without TLS:
/// the store is for a server on the machine or the local network.
pub(crate) fn connect(url: &str) -> Result<Client> {
    let mut config =
        postgres::Config::from_str(url).map_err(|e| StoreError::from_client(url, e))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config
        .connect(NoTls)
        .map_err(|e| StoreError::from_client(url, e))
}

impl PgStore {
    /// Opens the store in the database at `url` for searching.
    pub fn open(url: &str) -> Result<Self> {
        let mut client = connect(url)?;
        let failed = |e| StoreError::from_client(url, e);
        let mut transaction = client.transaction().map_err(failed)?;
        if !schema::has_vector(&mut transaction, url)? {
            return Err(StoreError::NoVector { url: redacted(url) });
        }
        let meta = schema::read(&mut transaction, url)?
            .ok_or_else(|| StoreError::NoStore { url: redacted(url) })?;
        let started = Instant::now();
        let counted = counted(&transaction.query_one(COUNT, &[]).map_err(failed)?, started);
        transaction.commit().map_err(failed)?;
        Ok(Self {
            url: url.to_owned(),
            idle: Mutex::new(vec![client]),
            meta,
            counted: Mutex::new(counted),
        })
    }

    /// What the store holds, counted now.
    pub fn summary(&self) -> Result<StoreSummary> {
        let row = self
            .query(
                "SELECT (SELECT count(*) FROM scar_files), (SELECT count(*) FROM scar_documents), \
                 (SELECT count(*) FROM scar_chunks)",
                &[],
            )?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Metadata {
                url: self.url(),
                what: "its counts",
            })?;
        let count = |at: usize| usize::try_from(row.get::<_, i64>(at)).unwrap_or(0);
        Ok(StoreSummary {
            url: self.url(),
            schema_version: crate::SCHEMA_VERSION,
            model: self.meta.model.clone(),
            chunker: self.meta.chunker,
            analyzer: self.meta.analyzer,
            hnsw: self.meta.hnsw,
            shards: self.meta.shards.clone(),
            files: count(0),
            documents: count(1),
            chunks: count(2),
        })
    }

    /// The store as messages name it: its URL, password left out.
    #[must_use]
    pub fn url(&self) -> String {
        redacted(&self.url)
    }

    fn query(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        self.query_with("", sql, params)
    }

    /// `sql` run in a transaction of its own after `settings` (`SET LOCAL` statements, which
    /// end with it).
    fn query_with(
        &self,
        settings: &str,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        self.with_connection(|client| {
            if settings.is_empty() {
                return client.query(sql, params);
            }
            let mut transaction = client.transaction()?;
            transaction.batch_execute(settings)?;
            let rows = transaction.query(sql, params)?;
            transaction.commit()?;
            Ok(rows)
        })
    }

    /// `read` run in one read-only transaction that sees one snapshot of the store.
    fn in_snapshot<T>(
        &self,
        read: impl Fn(&mut postgres::Transaction<'_>) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        self.with_connection(|client| {
            let mut transaction = client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let value = read(&mut transaction)?;
            transaction.commit()?;
            Ok(value)
        })
    }

    /// `run` on a free connection. A connection the server dropped (a restart, a failover, an
    /// administrator) is opened again and `run` run once more: reading twice is harmless.
    fn with_connection<T>(
        &self,
        run: impl Fn(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let free = self
            .idle
            .lock()
            // A panic elsewhere while the lock was held leaves the connections as sound as before.
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let mut client = match free {
            Some(client) => client,
            None => connect(&self.url)?,
        };
        let result = match run(&mut client) {
            Err(error) if connection_lost(&error) => {
                client = connect(&self.url)?;
                run(&mut client)
            }
            done => done,
        };
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(client);
        result.map_err(|e| StoreError::from_client(&self.url, e))
    }

    /// The rows of a ranking query, `sql` run after `settings`: (id, score), best first.
    fn ranked(
        &self,
        settings: &str,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<(ChunkId, f32)>> {
        Ok(self
            .query_with(settings, sql, params)?
            .iter()
            .map(|row| (chunk_id(row.get(0)), row.get::<_, f64>(1) as f32))
            .collect())
    }

    /// The chunks stored and their mean length, counted again once the last count has lived
    /// its time; a count that fails keeps the last.
    fn counts(&self) -> Counted {
        let mut counted = self
            .counted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let started = Instant::now();
        if counted.at.elapsed() > counted.lifetime
            && let Ok(rows) = self.query(COUNT, &[])
            && let Some(row) = rows.first()
        {
            *counted = self::counted(row, started);
        }
        *counted
    }

    /// The chunks among `ids` that are stored, in no particular order.
    fn read_chunks(&self, wanted: &[ChunkId]) -> Result<Vec<StoredChunk>> {
        let rows = self.query(
            "SELECT c.id, d.path, d.attachment, c.ordinal, c.char_start, c.char_end, c.tokens, \
             c.heading_path, c.page, c.text, c.document FROM scar_chunks c \
             JOIN scar_documents d ON d.id = c.document WHERE c.id = ANY($1)",
            &[&ids(wanted)],
        )?;
        Ok(rows
            .iter()
            .map(|row| StoredChunk {
                id: chunk_id(row.get(0)),
                slot: unsigned(row.get(10)),
                document: row.get(1),
                attachment: row.get(2),
                ordinal: unsigned(row.get(3)),
                chars: [unsigned(row.get(4)) as usize, unsigned(row.get(5)) as usize],
                tokens: unsigned(row.get(6)) as usize,
                heading_path: row.get(7),
                page: row.get::<_, Option<i32>>(8).map(unsigned),
                text: row.get(9),
            })
            .collect())
    }

    /// How a dense search of `depth` chunks runs: among a few chunks, exactly; otherwise, if
    /// the planner walks an HNSW index, keeping the candidates the store's parameters name (the
    /// default ones for an index built since the store was opened) and at least `depth`, as
    /// the folder index's graph search does, its hits in exact order. Set whether or not the
    /// store had an index when it was opened: another writer may build one while it is served,
    /// and pgvector's own breadth, 40, would cut the ranking short.
    fn dense_settings(&self, depth: usize, among: bool) -> String {
        if among {
            // A filtered graph search can miss chunks of a few documents that exact search finds.
            return "SET LOCAL enable_indexscan = off".to_owned();
        }
        let breadth = self.meta.hnsw.unwrap_or_default().expansion_search;
        format!(
            "SET LOCAL hnsw.ef_search = {}; SET LOCAL hnsw.iterative_scan = strict_order",
            breadth.max(depth).min(MAX_EF_SEARCH)
        )
    }
}

/// Whether `error` says the connection is gone, not that the query failed.
fn connection_lost(error: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    let broken =
        std::error::Error::source(error).is_some_and(<dyn std::error::Error>::is::<std::io::Error>);
    broken
        || error.is_closed()
        || error
            .code()
            .is_some_and(|code| [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN].contains(code))
}

/// A count read with [`COUNT`], as of now, begun at `started`.
fn counted(row: &Row, started: Instant) -> Counted {
    Counted {
        at: Instant::now(),
        lifetime: COUNT_LIFETIME.max(started.elapsed() * COUNT_COST_SHARE),
        chunks: usize::try_from(row.get::<_, i64>(0)).unwrap_or(0),
        mean_words: row.get(1),
    }
}

/// A number the store keeps as `integer`: ids, ordinals and counts never reach 2³¹.
pub(crate) fn int(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// A stored `integer` that is never negative.
fn unsigned(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

fn ids(chunks: &[ChunkId]) -> Vec<i32> {
    chunks.iter().map(|id| int(id.0)).collect()
}

fn chunk_id(id: i32) -> ChunkId {
    ChunkId(unsigned(id))
}

impl ChunkStore for PgStore {
    fn location(&self) -> String {
        self.url()
    }

    fn model(&self) -> &ModelInfo {
        &self.meta.model
    }

    fn chunker(&self) -> ChunkerConfig {
        self.meta.chunker
    }

    /// Counted again once the last count is a second old (longer for a store that takes long
    /// to count).
    fn len(&self) -> usize {
        self.counts().chunks
    }

    fn documents(&self) -> scar_retrieve::Result<Vec<StoredDocument>> {
        let rows = self.query(
            "SELECT id, path, attachment FROM scar_documents ORDER BY id",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|row| StoredDocument {
                slot: unsigned(row.get(0)),
                path: row.get::<_, String>(1).into(),
                attachment: row.get(2),
            })
            .collect())
    }

    fn chunks_of(&self, slots: &[u32]) -> scar_retrieve::Result<Vec<ChunkId>> {
        let documents: Vec<i32> = slots.iter().map(|&slot| int(slot)).collect();
        let rows = self.query(
            "SELECT id FROM scar_chunks WHERE document = ANY($1) ORDER BY document, ordinal",
            &[&documents],
        )?;
        Ok(rows.iter().map(|row| chunk_id(row.get(0))).collect())
    }

    fn dense_ranking(
        &self,
        embedding: &[f32],
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> scar_retrieve::Result<Vec<(ChunkId, f32)>> {
        let query = Vector::from(embedding.to_vec());
        let limit = i64::try_from(depth).unwrap_or(i64::MAX);
        let settings = self.dense_settings(depth, among.is_some());
        Ok(match among {
            None => self.ranked(
                &settings,
                "SELECT id, 1 - (embedding <=> $1) FROM scar_chunks \
                 ORDER BY embedding <=> $1, id LIMIT $2",
                &[&query, &limit],
            )?,
            Some(chunks) => self.ranked(
                &settings,
                "SELECT id, 1 - (embedding <=> $1) FROM scar_chunks WHERE id = ANY($3) \
                 ORDER BY embedding <=> $1, id LIMIT $2",
                &[&query, &limit, &ids(chunks)],
            )?,
        })
    }

    fn lexical_ranking(
        &self,
        query: &str,
        depth: usize,
        among: Option<&[ChunkId]>,
    ) -> scar_retrieve::Result<LexicalRanking> {
        // The question's words, cut as the stored words were.
        let words = self.meta.analyzer.words(query).join(" ");
        let Counted {
            chunks, mean_words, ..
        } = self.counts();
        let mean_words = mean_words.max(1.0);
        let among = among.map(ids);
        let (counts, hits) = self.in_snapshot(|transaction| {
            let counts = bm25::word_counts(transaction, &words)?;
            let terms = bm25::terms(&counts, chunks as f64);
            let hits = match &among {
                None => bm25::ranking(transaction, &terms, mean_words, depth),
                Some(among) => bm25::ranking_among(transaction, &terms, mean_words, depth, among),
            }?;
            Ok((counts, hits))
        })?;
        Ok(LexicalRanking {
            hits: hits
                .into_iter()
                .map(|(id, score)| (chunk_id(id), score as f32))
                .collect(),
            holding: counts
                .iter()
                .map(|&(_, holding)| holding.max(0) as u64)
                .collect(),
        })
    }

    fn chunk(&self, id: ChunkId) -> scar_retrieve::Result<Option<StoredChunk>> {
        Ok(self.read_chunks(&[id])?.pop())
    }

    fn stored_chunks(&self, ids: &[ChunkId]) -> scar_retrieve::Result<Vec<StoredChunk>> {
        let read: HashMap<ChunkId, StoredChunk> = self
            .read_chunks(ids)?
            .into_iter()
            .map(|chunk| (chunk.id, chunk))
            .collect();
        let mut chunks = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(chunk) = read.get(&id) else {
                return Err(scar_retrieve::RetrieveError::UnknownChunk(id));
            };
            chunks.push(chunk.clone());
        }
        Ok(chunks)
    }

    fn policy_source(&self, seeds: &[ChunkId]) -> scar_retrieve::Result<Box<dyn ChunkSource + '_>> {
        // The documents first, so that a store on shards asks each shard for its own only.
        let documents: Vec<i32> = self
            .query(
                "SELECT DISTINCT document FROM scar_chunks WHERE id = ANY($1)",
                &[&ids(seeds)],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let rows = self.query(
            "SELECT id, document, ordinal, embedding, continuity_next, seam_after, tokens, \
             section FROM scar_chunks WHERE document = ANY($1)",
            &[&documents],
        )?;
        let read = DocumentsRead::new(&rows);
        // A writer on another machine may have replaced a seed's file since the search ranked it.
        if let Some(&gone) = seeds.iter().find(|id| !read.chunks.contains_key(id)) {
            return Err(scar_retrieve::RetrieveError::Store {
                location: self.url(),
                source: format!(
                    "chunk {gone} was replaced while the question was searched; ask again"
                )
                .into(),
            });
        }
        Ok(Box::new(read))
    }
}

/// The chunks of the documents a search's seeds are in, read once: what the policy walks.
struct DocumentsRead {
    chunks: HashMap<ChunkId, ReadChunk>,
    at: HashMap<Position, ChunkId>,
}

struct ReadChunk {
    position: Position,
    embedding: Vec<f32>,
    continuity_next: Option<f32>,
    seam_after: Option<SeamKind>,
    tokens: usize,
    section: Option<u32>,
}

impl DocumentsRead {
    fn new(rows: &[Row]) -> Self {
        let mut chunks = HashMap::with_capacity(rows.len());
        let mut at = HashMap::with_capacity(rows.len());
        for row in rows {
            let id = chunk_id(row.get(0));
            let position = Position {
                document: unsigned(row.get(1)),
                ordinal: unsigned(row.get(2)),
            };
            let embedding: Vector = row.get(3);
            let seam: Option<String> = row.get(5);
            chunks.insert(
                id,
                ReadChunk {
                    position,
                    embedding: embedding.to_vec(),
                    continuity_next: row.get(4),
                    seam_after: seam.and_then(|name| seam_kind(&name)),
                    tokens: unsigned(row.get(6)) as usize,
                    section: row.get::<_, Option<i32>>(7).map(unsigned),
                },
            );
            at.insert(position, id);
        }
        Self { chunks, at }
    }

    fn read(&self, id: ChunkId) -> &ReadChunk {
        // The policy asks only about the seeds and the neighbours this source gave.
        &self.chunks[&id]
    }

    /// The chunk before the cut on `side` of `id`: `id` itself on its next side.
    fn left_of_cut(&self, id: ChunkId, side: Side) -> Option<&ReadChunk> {
        match side {
            Side::Next => Some(self.read(id)),
            Side::Previous => self.neighbour(id, side).map(|left| self.read(left)),
        }
    }
}

/// A seam kind from its name in the store.
pub(crate) fn seam_name(kind: SeamKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn seam_kind(name: &str) -> Option<SeamKind> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

impl ChunkSource for DocumentsRead {
    fn embedding(&self, id: ChunkId) -> &[f32] {
        &self.read(id).embedding
    }

    fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        let Position { document, ordinal } = self.read(id).position;
        let ordinal = match side {
            Side::Previous => ordinal.checked_sub(1)?,
            Side::Next => ordinal.checked_add(1)?,
        };
        self.at.get(&Position { document, ordinal }).copied()
    }

    fn continuity(&self, id: ChunkId, side: Side) -> f32 {
        self.left_of_cut(id, side)
            .and_then(|left| left.continuity_next)
            .unwrap_or(f32::NAN)
    }

    fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        self.left_of_cut(id, side).and_then(|left| left.seam_after)
    }

    fn position(&self, id: ChunkId) -> Position {
        self.read(id).position
    }

    fn token_count(&self, id: ChunkId) -> usize {
        self.read(id).tokens
    }

    fn section(&self, id: ChunkId) -> Option<u32> {
        self.read(id).section
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seam_kinds_round_trip_through_their_names() {
        for kind in [
            SeamKind::MidSentence,
            SeamKind::SentenceEnd,
            SeamKind::ParagraphBreak,
            SeamKind::SectionChange,
        ] {
            assert_eq!(seam_kind(&seam_name(kind)), Some(kind));
        }
    }
}
