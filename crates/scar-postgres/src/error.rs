use crate::url::redacted;

/// Everything that can go wrong with a PostgreSQL store. Every message names the server by its
/// URL with any password left out.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No server answers at the address, or the connection broke.
    #[error("cannot reach PostgreSQL at {url}; is the server running, and the address right?")]
    Unreachable {
        /// The server, password left out.
        url: String,
        /// The client's error.
        source: postgres::Error,
    },
    /// The server refused: a wrong user or password, a database that does not exist, a
    /// permission the user lacks.
    #[error("PostgreSQL at {url} refused: {reason}")]
    Refused {
        /// The server, password left out.
        url: String,
        /// The server's own words.
        reason: String,
        /// The client's error.
        source: postgres::Error,
    },
    /// The database lacks pgvector, and the user may not add it.
    #[error(
        "the database at {url} has no pgvector extension; install pgvector on the server and run \
         `CREATE EXTENSION vector;` in the database as a user allowed to"
    )]
    NoVector {
        /// The server, password left out.
        url: String,
    },
    /// The database holds no SCAR store yet.
    #[error(
        "the database at {url} holds no SCAR store; index documents into it first with \
         `scar --store URL index DIR`"
    )]
    NoStore {
        /// The server, password left out.
        url: String,
    },
    /// The store was written by another version of its schema.
    #[error(
        "the store at {url} has schema version {found}, and this scar reads version {reads}; \
         use a scar of the release that wrote it, or a newer one"
    )]
    OtherSchema {
        /// The server, password left out.
        url: String,
        /// The store's version.
        found: String,
        /// The version this build reads.
        reads: u32,
    },
    /// The store was written by an older version of its schema, which a writer upgrades.
    #[error(
        "the store at {url} has schema version {found}, older than the {reads} this scar reads; \
         index into it once (`scar --store URL index DIR`) to upgrade it"
    )]
    OlderSchema {
        /// The server, password left out.
        url: String,
        /// The store's version.
        found: u32,
        /// The version this build reads.
        reads: u32,
    },
    /// The store's documents were cut by another chunker.
    #[error(
        "the store at {url} holds {store_chunker}, not {chunker}; index with its chunker \
         settings, or into another database"
    )]
    ChunkerMismatch {
        /// The server, password left out.
        url: String,
        /// The store's chunker, for a person.
        store_chunker: String,
        /// The chunker given, for a person.
        chunker: String,
    },
    /// A store's shards were named wrong: fewer than two, or other servers than the store has.
    #[error("cannot keep the store at {url} on those shards: {reason}")]
    Shards {
        /// The coordinator, password left out.
        url: String,
        /// What is wrong, for a person.
        reason: String,
    },
    /// An HNSW index was asked of a store whose vectors live on shard servers.
    #[error(
        "the store at {url} keeps its vectors on shard servers, where an HNSW index is built \
         and kept by each shard's own administrator; publish without --hnsw"
    )]
    ShardedIndex {
        /// The coordinator, password left out.
        url: String,
    },
    /// The store's chunks were embedded with another model.
    #[error(
        "the store at {url} holds chunks embedded with `{store_model}`, not `{model}`; index \
         with its model, or into another database"
    )]
    ModelMismatch {
        /// The server, password left out.
        url: String,
        /// The store's model.
        store_model: String,
        /// The model given.
        model: String,
    },
    /// A path that is not UTF-8 cannot be a key in the store.
    #[error("{0} is not UTF-8, which the store's paths must be; rename it to store it")]
    PathNotUtf8(String),
    /// A query failed.
    #[error("PostgreSQL at {url} failed")]
    Query {
        /// The server, password left out.
        url: String,
        /// The client's error.
        source: postgres::Error,
    },
    /// The store's own metadata could not be read.
    #[error("the store at {url} has damaged metadata ({what})")]
    Metadata {
        /// The server, password left out.
        url: String,
        /// What could not be read.
        what: &'static str,
    },
}

impl StoreError {
    /// `error`, met talking to the server at `url`, in the words that say what to do.
    pub(crate) fn from_client(url: &str, error: postgres::Error) -> Self {
        let url = redacted(url);
        if let Some(db) = error.as_db_error() {
            use postgres::error::SqlState;
            let code = db.code();
            let refused = [
                SqlState::INSUFFICIENT_PRIVILEGE,
                SqlState::INVALID_PASSWORD,
                SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
                SqlState::INVALID_CATALOG_NAME,
                SqlState::READ_ONLY_SQL_TRANSACTION,
            ];
            if refused.contains(code) {
                let reason = db.message().to_owned();
                return Self::Refused {
                    url,
                    reason,
                    source: error,
                };
            }
            return Self::Query { url, source: error };
        }
        if error.is_closed() || error.to_string().starts_with("error connecting") {
            return Self::Unreachable { url, source: error };
        }
        Self::Query { url, source: error }
    }
}

impl From<StoreError> for scar_retrieve::RetrieveError {
    fn from(error: StoreError) -> Self {
        let location = match &error {
            StoreError::Unreachable { url, .. }
            | StoreError::Refused { url, .. }
            | StoreError::NoVector { url }
            | StoreError::NoStore { url }
            | StoreError::OtherSchema { url, .. }
            | StoreError::OlderSchema { url, .. }
            | StoreError::ChunkerMismatch { url, .. }
            | StoreError::Shards { url, .. }
            | StoreError::ShardedIndex { url }
            | StoreError::ModelMismatch { url, .. }
            | StoreError::Query { url, .. }
            | StoreError::Metadata { url, .. } => url.clone(),
            StoreError::PathNotUtf8(_) => String::new(),
        };
        Self::Store {
            location,
            source: Box::new(error),
        }
    }
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
