//! The store's tables, created and checked under one lock, with the schema's version.

use postgres::Transaction;
use scar_embed::ModelInfo;

use crate::{Result, StoreError};

/// The version of the tables this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Serialises schema changes between writers starting at once (an arbitrary constant).
const SCHEMA_LOCK: i64 = 0x5CA2_0001;

/// The tables of version 1, for chunks of `dimension` values. A file is the unit a writer
/// replaces; a file's documents are its own text and what it carries (a mail's attachments).
/// A file a link led to from outside the folder indexed keeps the path it was found at.
/// The lexical column is the text BM25 reads in a folder index: the heading path, then the
/// chunk's own text.
fn tables(dimension: usize) -> String {
    format!(
        "CREATE TABLE scar_files (
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
         CREATE INDEX scar_documents_path ON scar_documents (path);
         CREATE TABLE scar_chunks (
             id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
             document integer NOT NULL REFERENCES scar_documents (id) ON DELETE CASCADE,
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
             lexical tsvector GENERATED ALWAYS AS
                 (to_tsvector('english', heading_path || ' ' || text)) STORED,
             UNIQUE (document, ordinal)
         );
         CREATE INDEX scar_chunks_lexical ON scar_chunks USING gin (lexical);"
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

/// The store's model, with its version checked; `None` when the database holds no store.
pub(crate) fn read(transaction: &mut Transaction<'_>, url: &str) -> Result<Option<ModelInfo>> {
    let failed = |e| StoreError::from_client(url, e);
    let exists: bool = transaction
        .query_one("SELECT to_regclass('scar_meta') IS NOT NULL", &[])
        .map_err(failed)?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let value = |transaction: &mut Transaction<'_>, key: &str| -> Result<Option<String>> {
        let rows = transaction
            .query("SELECT value FROM scar_meta WHERE key = $1", &[&key])
            .map_err(failed)?;
        Ok(rows.first().map(|row| row.get(0)))
    };
    let version = value(transaction, "schema_version")?.unwrap_or_default();
    if version != SCHEMA_VERSION.to_string() {
        return Err(StoreError::OtherSchema {
            url: crate::redacted(url),
            found: version,
            reads: SCHEMA_VERSION,
        });
    }
    let model = value(transaction, "model")?
        .and_then(|json| serde_json::from_str(&json).ok())
        .ok_or(StoreError::Metadata {
            url: crate::redacted(url),
            what: "its model",
        })?;
    Ok(Some(model))
}

/// Opens the store for writing chunks of `model`, creating its tables in an empty database;
/// writers starting at once wait for each other here.
pub(crate) fn create_or_check(
    transaction: &mut Transaction<'_>,
    url: &str,
    model: &ModelInfo,
) -> Result<()> {
    let failed = |e| StoreError::from_client(url, e);
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(failed)?;
    ensure_vector(transaction, url)?;
    match read(transaction, url)? {
        Some(stored) if stored.id == model.id && stored.dimension == model.dimension => Ok(()),
        Some(stored) => {
            let (store_model, model) = stored.names_against(model);
            Err(StoreError::ModelMismatch {
                url: crate::redacted(url),
                store_model,
                model,
            })
        }
        None => {
            let model_json = serde_json::to_string(model).expect("a model's info serialises");
            transaction
                .batch_execute(&format!(
                    "CREATE TABLE scar_meta (key text PRIMARY KEY, value text NOT NULL); {}",
                    tables(model.dimension)
                ))
                .map_err(failed)?;
            transaction
                .execute(
                    "INSERT INTO scar_meta (key, value) VALUES ('schema_version', $1), \
                     ('model', $2)",
                    &[&SCHEMA_VERSION.to_string(), &model_json],
                )
                .map_err(failed)?;
            Ok(())
        }
    }
}
