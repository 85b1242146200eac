/// Everything that can go wrong answering a query.
#[derive(Debug, thiserror::Error)]
pub enum RetrieveError {
    /// The query is empty or only whitespace.
    #[error("the question is empty")]
    EmptyQuery,
    /// k = 0 asks for nothing.
    #[error("k must be at least 1")]
    ZeroK,
    /// The index holds no chunks.
    #[error("the index in {0} is empty; add documents with `scar index PATH`")]
    EmptyIndex(String),
    /// The first stage's name is unknown.
    #[error("unknown first stage `{0}`: use dense, bm25 or hybrid")]
    BadFirstStage(String),
    /// The embedder's model is not the one the index was built with.
    #[error(
        "the index was built with model `{index_model}`, but `{model}` was loaded; use the \
         index's model"
    )]
    ModelMismatch {
        /// The index's model.
        index_model: String,
        /// The loaded model.
        model: String,
    },
    /// A reranker gave other than one score, a number, per candidate.
    #[error(
        "the reranker gave {scores} scores ({not_numbers} not a number) for {candidates} \
         candidates; a reranker must give each candidate one score that is a number"
    )]
    RerankScores {
        /// Candidates given to the reranker.
        candidates: usize,
        /// Scores it gave.
        scores: usize,
        /// How many of them were not a number.
        not_numbers: usize,
    },
    /// A reranker failed on its own terms (its model, its tokenizer).
    #[error("the reranker failed")]
    Rerank(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store could not answer (a server unreachable, a query refused).
    #[error("the store at {location} failed")]
    Store {
        /// The store, as [`ChunkStore::location`](crate::ChunkStore::location) names it.
        location: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store has no chunk by an id its own first stage gave.
    #[error("the index has no chunk {0}, though its search found it")]
    UnknownChunk(scar_core::ChunkId),
    /// Index error.
    #[error(transparent)]
    Index(#[from] scar_index::IndexError),
    /// Embedding error.
    #[error(transparent)]
    Embed(#[from] scar_embed::EmbedError),
    /// Policy error.
    #[error(transparent)]
    Policy(#[from] scar_policy::PolicyError),
    /// The policy met a chunk whose stored embedding or continuity is damaged.
    #[error(
        "chunk {chunk} of {document} is damaged in {file}; repair the index with \
         `scar --index {dir} index --repair`",
        file = file.display(),
        dir = dir.display()
    )]
    DamagedChunk {
        /// The index folder.
        dir: std::path::PathBuf,
        /// The file of the index that holds the damaged value.
        file: std::path::PathBuf,
        /// The chunk.
        chunk: scar_core::ChunkId,
        /// Its document, for display.
        document: String,
        /// What the policy found.
        source: scar_policy::PolicyError,
    },
}

impl RetrieveError {
    /// A policy's error while it walked `index`: one about a chunk's stored values names the
    /// chunk's document and the command that repairs the index.
    #[must_use]
    pub fn from_policy(index: &scar_index::Index, error: scar_policy::PolicyError) -> Self {
        use scar_policy::PolicyError as P;
        let (P::Chunk { id, .. } | P::Continuity { id, .. } | P::Dimensions { id, .. }) = error
        else {
            return Self::Policy(error);
        };
        let document = index.chunk(id).map_or_else(
            || "a document no longer indexed".to_owned(),
            |chunk| chunk.document.path.display().to_string(),
        );
        let [vectors, records, _] = index.data_files();
        let file = if matches!(error, P::Continuity { .. }) {
            records
        } else {
            vectors
        };
        Self::DamagedChunk {
            dir: index.dir().to_owned(),
            file,
            chunk: id,
            document,
            source: error,
        }
    }
}

/// Result with [`RetrieveError`].
pub type Result<T, E = RetrieveError> = std::result::Result<T, E>;
