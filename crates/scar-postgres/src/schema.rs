//! The store's tables, created, checked and upgraded under one lock, with the schema's
//! version.
//!
//! Versions: 1, the tables below, with English stems as the lexical words; 2, the chunker
//! recorded beside the model, the lexical words as BM25 reads them in a folder index and their
//! number, and the optional HNSW index on the vectors, with its parameters recorded; 3, the
//! number of chunks holding each word (`scar_terms`), which bounds BM25's search. A writer
//! upgrades an older store: to version 2, it records its own chunker and cuts the words again;
//! to version 3, it counts the words' chunks. A store
//! records how its words are cut (`analyzer`, a `scar_index::Analyzer`); one that does not
//! was cut in letter runs, as version 2 first did.

use postgres::Transaction;
use scar_embed::ModelInfo;
use scar_index::{Analyzer, ChunkerConfig, HnswParams, HnswSetting};

use crate::{Result, StoreError};

/// The version of the tables this build writes and reads.
pub const SCHEMA_VERSION: u32 = 3;

/// What a store records about itself, beside its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The model its chunks were embedded with.
    pub model: ModelInfo,
    /// How its documents were cut.
    pub chunker: ChunkerConfig,
    /// How its text is cut into the words BM25 counts; stores made before it was recorded
    /// cut letter runs.
    pub analyzer: Analyzer,
    /// The HNSW index on its vectors, when it has one.
    pub hnsw: Option<HnswParams>,
    /// The shard servers its chunks live on (URLs without passwords); none when they live
    /// beside its documents.
    pub shards: Vec<String>,
}

/// Serialises schema changes between writers starting at once (an arbitrary constant).
const SCHEMA_LOCK: i64 = 0x5CA2_0001;

/// The tables of a store on one server, for chunks of `dimension` values.
fn tables(dimension: usize) -> String {
    format!(
        "{FILES_AND_DOCUMENTS} {TERMS} {}",
        chunks_table(dimension, ChunksLayout::Whole)
    )
}

/// How many chunks hold each word BM25 reads (its document frequency), kept by the writers in
/// the transaction that adds or removes the chunks: BM25 reads a word's weight here instead of
/// counting its chunks at every search, and so can leave out the chunks that hold only words
/// too common to reach the ranking. A word no chunk holds any more keeps a row of 0.
pub(crate) const TERMS: &str = "
    CREATE TABLE scar_terms (
        lexeme text PRIMARY KEY,
        chunks integer NOT NULL
    );";

/// Fills `scar_terms` from the chunks stored, for a store made before it was kept.
const COUNT_TERMS: &str = "INSERT INTO scar_terms (lexeme, chunks) \
     SELECT u.lexeme, count(*) FROM scar_chunks c, unnest(c.lexical) u GROUP BY u.lexeme";

/// The tables of files and documents. A file is the unit a writer replaces; a file's documents
/// are its own text and what it carries (a mail's attachments). A file a link led to from
/// outside the folder indexed keeps the path it was found at.
pub(crate) const FILES_AND_DOCUMENTS: &str = "
    CREATE TABLE scar_files (
        path text PRIMARY KEY,
        hash text NOT NULL,
        reached_from text,
        published_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE scar_documents (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        path text NOT NULL REFERENCES scar_files (path) ON DELETE CASCADE,
        attachment text
    );
    CREATE INDEX scar_documents_path ON scar_documents (path);";

/// Where a `scar_chunks` table stands in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunksLayout {
    /// All of a store's chunks, beside its documents.
    Whole,
    /// A coordinator's parent table, hash-partitioned by document over shard servers: the
    /// shards keep the keys and indexes, the coordinator hands out the ids.
    Partitioned,
    /// One shard's part, which receives its ids from the coordinator.
    Shard,
}

/// The chunks table, for chunks of `dimension` values, laid out as `layout` says. Chunks are
/// keyed by (document, ordinal). `lexical` holds the words BM25 reads in a folder index (the
/// heading path, then the chunk's text, cut by the index's own tokenizer) and `words` their
/// number, the chunk's length to BM25.
pub(crate) fn chunks_table(dimension: usize, layout: ChunksLayout) -> String {
    let (id, document, keys, partition) = match layout {
        ChunksLayout::Whole => (
            "GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            "REFERENCES scar_documents (id) ON DELETE CASCADE",
            ", UNIQUE (document, ordinal)",
            "",
        ),
        // Foreign partitions take no keys or indexes: the shards hold them.
        ChunksLayout::Partitioned => (
            "GENERATED ALWAYS AS IDENTITY",
            "",
            "",
            " PARTITION BY HASH (document)",
        ),
        ChunksLayout::Shard => ("PRIMARY KEY", "", ", UNIQUE (document, ordinal)", ""),
    };
    let lexical_index = if layout == ChunksLayout::Partitioned {
        ""
    } else {
        "CREATE INDEX scar_chunks_lexical ON scar_chunks USING gin (lexical);"
    };
    format!(
        "CREATE TABLE scar_chunks (
             id integer NOT NULL {id},
             document integer NOT NULL {document},
             ordinal integer NOT NULL,
             char_start integer NOT NULL,
             char_end integer NOT NULL,
             tokens integer NOT NULL,
             section integer,
             page integer,
             heading_path text NOT NULL,
             text text NOT NULL,
             continuity_next real,
             seam_after text,
             embedding vector({dimension}) NOT NULL,
             lexical tsvector NOT NULL,
             words integer NOT NULL{keys}
         ){partition};
         {lexical_index}"
    )
}

/// Makes sure pgvector is there, creating it when the user may.
pub(crate) fn ensure_vector(transaction: &mut Transaction<'_>, url: &str) -> Result<()> {
    transaction
        .batch_execute("SAVEPOINT vector; CREATE EXTENSION IF NOT EXISTS vector")
        .or_else(|_| transaction.batch_execute("ROLLBACK TO SAVEPOINT vector"))
        .map_err(|e| StoreError::from_client(url, e))?;
    has_vector(transaction, url)?
        .then_some(())
        .ok_or_else(|| StoreError::NoVector {
            url: crate::redacted(url),
        })
}

pub(crate) fn has_vector(transaction: &mut Transaction<'_>, url: &str) -> Result<bool> {
    let rows = transaction
        .query("SELECT 1 FROM pg_extension WHERE extname = 'vector'", &[])
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(!rows.is_empty())
}

/// The store's records, with its version checked; `None` when the database holds no store.
pub(crate) fn read(transaction: &mut Transaction<'_>, url: &str) -> Result<Option<Meta>> {
    match version(transaction, url)? {
        None => Ok(None),
        Some(SCHEMA_VERSION) => {
            let model = value(transaction, url, "model")?;
            let chunker = value(transaction, url, "chunker")?;
            let (Some(model), Some(chunker)) = (model, chunker) else {
                return Err(StoreError::Metadata {
                    url: crate::redacted(url),
                    what: "its model and chunker",
                });
            };
            Ok(Some(Meta {
                model,
                chunker,
                analyzer: value(transaction, url, "analyzer")?.unwrap_or_default(),
                hnsw: value(transaction, url, "hnsw")?,
                shards: value(transaction, url, "shards")?.unwrap_or_default(),
            }))
        }
        Some(found) if found < SCHEMA_VERSION => Err(StoreError::OlderSchema {
            url: crate::redacted(url),
            found,
            reads: SCHEMA_VERSION,
        }),
        Some(found) => Err(StoreError::OtherSchema {
            url: crate::redacted(url),
            found: found.to_string(),
            reads: SCHEMA_VERSION,
        }),
    }
}

/// The schema version the store records; `None` when the database holds no store.
pub(crate) fn version(transaction: &mut Transaction<'_>, url: &str) -> Result<Option<u32>> {
    let exists: bool = transaction
        .query_one("SELECT to_regclass('scar_meta') IS NOT NULL", &[])
        .map_err(|e| StoreError::from_client(url, e))?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let rows = transaction
        .query(
            "SELECT value FROM scar_meta WHERE key = 'schema_version'",
            &[],
        )
        .map_err(|e| StoreError::from_client(url, e))?;
    let found: Option<String> = rows.first().map(|row| row.get(0));
    match found.as_deref().map(str::parse) {
        Some(Ok(version)) => Ok(Some(version)),
        _ => Err(StoreError::OtherSchema {
            url: crate::redacted(url),
            found: found.unwrap_or_default(),
            reads: SCHEMA_VERSION,
        }),
    }
}

/// The record under `key`, read from its JSON; `None` when there is none.
fn value<T: serde::de::DeserializeOwned>(
    transaction: &mut Transaction<'_>,
    url: &str,
    key: &str,
) -> Result<Option<T>> {
    let rows = transaction
        .query("SELECT value FROM scar_meta WHERE key = $1", &[&key])
        .map_err(|e| StoreError::from_client(url, e))?;
    rows.first()
        .map(|row| {
            serde_json::from_str(row.get(0)).map_err(|_| StoreError::Metadata {
                url: crate::redacted(url),
                what: "its records",
            })
        })
        .transpose()
}

/// Records `value` under `key`, as JSON.
pub(crate) fn record<T: serde::Serialize>(
    transaction: &mut Transaction<'_>,
    url: &str,
    key: &str,
    value: &T,
) -> Result<()> {
    let json = serde_json::to_string(value).expect("the store's records serialise");
    transaction
        .execute(
            "INSERT INTO scar_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key, &json],
        )
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(())
}

/// Opens the store for writing chunks of `model` cut by `chunker`, creating its tables in an
/// empty database and upgrading an older store; writers starting at once wait for each other
/// here. A store of another model or chunker is refused: its rankings would mix two kinds of
/// chunk.
pub(crate) fn create_or_check(
    transaction: &mut Transaction<'_>,
    url: &str,
    model: &ModelInfo,
    chunker: &ChunkerConfig,
) -> Result<Meta> {
    let failed = |e| StoreError::from_client(url, e);
    lock(transaction, url)?;
    ensure_vector(transaction, url)?;
    match version(transaction, url)? {
        None => {
            transaction
                .batch_execute(&tables(model.dimension))
                .map_err(failed)?;
            create_records(transaction, url, model, chunker)?;
        }
        // Version 1 did not record its chunker: the first writer of version 2 records its own.
        // Its lexical words were English stems: cut again here as nearly as SQL can (runs of
        // letters and digits, lowercased); each file's next publish writes them exactly.
        Some(1) => {
            transaction
                .batch_execute(
                    "ALTER TABLE scar_chunks DROP COLUMN lexical;
                     ALTER TABLE scar_chunks ADD COLUMN lexical tsvector,
                         ADD COLUMN words integer;
                     UPDATE scar_chunks SET (lexical, words) =
                         (SELECT to_tsvector('simple', array_to_string(w, ' ')),
                                 coalesce(array_length(w, 1), 0)
                          FROM (SELECT array_remove(regexp_split_to_array(
                                   lower(heading_path || ' ' || text), '[^[:alnum:]]+'), '')
                                AS w) cut);
                     ALTER TABLE scar_chunks ALTER COLUMN lexical SET NOT NULL,
                         ALTER COLUMN words SET NOT NULL;
                     CREATE INDEX scar_chunks_lexical ON scar_chunks USING gin (lexical);",
                )
                .map_err(failed)?;
            record(transaction, url, "chunker", chunker)?;
            count_terms(transaction, url)?;
        }
        Some(2) => count_terms(transaction, url)?,
        Some(_) => {
            let meta = existing(transaction, url)?;
            if !meta.model.embeds_like(model) {
                let (store_model, model) = meta.model.names_against(model);
                return Err(StoreError::ModelMismatch {
                    url: crate::redacted(url),
                    store_model,
                    model,
                });
            }
            if meta.chunker != *chunker {
                return Err(StoreError::ChunkerMismatch {
                    url: crate::redacted(url),
                    store_chunker: describe(&meta.chunker),
                    chunker: describe(chunker),
                });
            }
            return Ok(meta);
        }
    }
    existing(transaction, url)
}

/// Version 2 to 3: creates and fills `scar_terms`.
fn count_terms(transaction: &mut Transaction<'_>, url: &str) -> Result<()> {
    transaction
        .batch_execute(&format!("{TERMS} {COUNT_TERMS}"))
        .map_err(|e| StoreError::from_client(url, e))?;
    record(transaction, url, "schema_version", &SCHEMA_VERSION)
}

/// Creates a new store's records, saying what it holds, at this build's version.
pub(crate) fn create_records(
    transaction: &mut Transaction<'_>,
    url: &str,
    model: &ModelInfo,
    chunker: &ChunkerConfig,
) -> Result<()> {
    transaction
        .batch_execute("CREATE TABLE scar_meta (key text PRIMARY KEY, value text NOT NULL)")
        .map_err(|e| StoreError::from_client(url, e))?;
    record(transaction, url, "model", model)?;
    record(transaction, url, "chunker", chunker)?;
    record(transaction, url, "analyzer", &Analyzer::CURRENT)?;
    record(transaction, url, "schema_version", &SCHEMA_VERSION)
}

/// The records of a store known to be there; missing ones are damage.
pub(crate) fn existing(transaction: &mut Transaction<'_>, url: &str) -> Result<Meta> {
    read(transaction, url)?.ok_or(StoreError::Metadata {
        url: crate::redacted(url),
        what: "its records",
    })
}

/// Builds, tunes or drops the HNSW index on the vectors as `setting` asks, and records it;
/// returns the parameters of the index the store has afterwards. Built after the chunks are
/// written, a new index links them once instead of at every insert.
pub(crate) fn apply_hnsw(
    transaction: &mut Transaction<'_>,
    url: &str,
    setting: HnswSetting,
) -> Result<Option<HnswParams>> {
    let failed = |e| StoreError::from_client(url, e);
    lock(transaction, url)?;
    let current: Option<HnswParams> = value(transaction, url, "hnsw")?;
    let sharded = value::<Vec<String>>(transaction, url, "shards")?.is_some_and(|s| !s.is_empty());
    if sharded && matches!(setting, HnswSetting::Build(_)) {
        return Err(StoreError::ShardedIndex {
            url: crate::redacted(url),
        });
    }
    match setting {
        HnswSetting::Keep => Ok(current),
        HnswSetting::Remove => {
            transaction
                .batch_execute(
                    "DROP INDEX IF EXISTS scar_chunks_embedding; \
                     DELETE FROM scar_meta WHERE key = 'hnsw'",
                )
                .map_err(failed)?;
            Ok(None)
        }
        HnswSetting::Build(params) => {
            if !current.is_some_and(|current| current.same_links(&params)) {
                transaction
                    .batch_execute(&format!(
                        "DROP INDEX IF EXISTS scar_chunks_embedding; \
                         CREATE INDEX scar_chunks_embedding ON scar_chunks \
                         USING hnsw (embedding vector_cosine_ops) \
                         WITH (m = {}, ef_construction = {})",
                        params.connectivity, params.expansion_add
                    ))
                    .map_err(failed)?;
            }
            record(transaction, url, "hnsw", &params)?;
            Ok(Some(params))
        }
    }
}

/// Takes the lock under which the schema changes.
pub(crate) fn lock(transaction: &mut Transaction<'_>, url: &str) -> Result<()> {
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(|e| StoreError::from_client(url, e))?;
    Ok(())
}

/// A chunker's settings as a person reads them.
fn describe(chunker: &ChunkerConfig) -> String {
    let unit = match chunker.unit {
        scar_index::ChunkUnit::Tokens => "tokens",
        scar_index::ChunkUnit::Characters => "characters",
    };
    format!(
        "chunks of at most {} {unit}, overlap {}{}",
        chunker.capacity,
        chunker.overlap,
        if chunker.prepend_headings {
            ", headings prepended"
        } else {
            ""
        }
    )
}
