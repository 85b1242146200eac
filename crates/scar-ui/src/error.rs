use scar_answer::AnswerError;
use scar_embed::EmbedError;
use scar_index::IndexError;
use scar_postgres::StoreError;
use scar_retrieve::RetrieveError;

/// Everything that can go wrong in the app, shown to the user in its status line. The errors of
/// the crates below are boxed: they are large, and results pass through every frame.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// Opening an index or answering a question failed.
    #[error(transparent)]
    Retrieve(Box<RetrieveError>),
    /// Indexing failed.
    #[error(transparent)]
    Index(Box<IndexError>),
    /// A PostgreSQL store could not be opened.
    #[error(transparent)]
    Store(Box<StoreError>),
    /// A store was named by something other than a `postgres://` URL.
    #[error(
        "`{0}` is not a store's URL: give one as postgres://USER@HOST:PORT/DATABASE \
         (postgresql:// also works)"
    )]
    NotAStoreUrl(String),
    /// The embedding model could not be found or loaded.
    #[error(transparent)]
    Embed(Box<EmbedError>),
    /// The chat model could not be found, loaded or run.
    #[error(transparent)]
    Answer(Box<AnswerError>),
    /// The controls describe an invalid policy.
    #[error(transparent)]
    Policy(#[from] scar_policy::PolicyError),
    /// Writing the ledger failed (the message names the file).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The ledger could not be written as JSON.
    #[error("writing the ledger as JSON failed")]
    Json(#[from] serde_json::Error),
    /// A folder was dropped while another was being indexed.
    #[error("{} was not added: a folder is being indexed; drop it again when that is done", .0.display())]
    StillIndexing(std::path::PathBuf),
    /// The system's viewer could not open a document or its folder.
    #[error("cannot open {} in the system's viewer", .path.display())]
    Open {
        /// The file or folder.
        path: std::path::PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// Export was asked for before any question was answered.
    #[error("there is no ledger to export yet: ask a question first")]
    NothingToExport,
}

impl From<RetrieveError> for UiError {
    fn from(error: RetrieveError) -> Self {
        Self::Retrieve(Box::new(error))
    }
}

impl From<IndexError> for UiError {
    fn from(error: IndexError) -> Self {
        Self::Index(Box::new(error))
    }
}

impl From<StoreError> for UiError {
    fn from(error: StoreError) -> Self {
        Self::Store(Box::new(error))
    }
}

impl From<EmbedError> for UiError {
    fn from(error: EmbedError) -> Self {
        Self::Embed(Box::new(error))
    }
}

impl From<AnswerError> for UiError {
    fn from(error: AnswerError) -> Self {
        Self::Answer(Box::new(error))
    }
}

/// Result with [`UiError`].
pub type Result<T, E = UiError> = std::result::Result<T, E>;
