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
    EmptyIndex(std::path::PathBuf),
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
    /// Index error.
    #[error(transparent)]
    Index(#[from] scar_index::IndexError),
    /// Embedding error.
    #[error(transparent)]
    Embed(#[from] scar_embed::EmbedError),
    /// Policy error.
    #[error(transparent)]
    Policy(#[from] scar_policy::PolicyError),
}

/// Result with [`RetrieveError`].
pub type Result<T, E = RetrieveError> = std::result::Result<T, E>;
