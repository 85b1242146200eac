use std::path::{Path, PathBuf};

/// Everything that can go wrong opening, reading or writing an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A file-system call failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The folder holds no index.
    #[error("{0} is not a SCAR index (no manifest.json); build one with `scar index`")]
    NotAnIndex(PathBuf),
    /// A file of the index is damaged or from another version.
    #[error("{path} is damaged: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The text (tantivy) part of the index failed.
    #[error("text index in {dir}: {reason}")]
    Text {
        /// The index folder.
        dir: PathBuf,
        /// tantivy's error.
        reason: String,
    },
    /// The index was built with a different embedding model.
    #[error(
        "{dir} was built with model `{index_model}`, not `{requested}`; use that model or index \
         into a new folder"
    )]
    ModelMismatch {
        /// The index folder.
        dir: PathBuf,
        /// The model the index holds vectors of.
        index_model: String,
        /// The model that was asked for.
        requested: String,
    },
    /// Another process is writing to the index.
    #[error("{0} is being written by another process; wait for it to finish")]
    Busy(PathBuf),
    /// The chunker settings are invalid.
    #[error("invalid chunker settings: {0}")]
    BadChunker(String),
    /// The HNSW graph (approximate dense search) failed.
    #[error("HNSW graph: {0}")]
    Hnsw(String),
    /// Embedding failed.
    #[error(transparent)]
    Embed(#[from] scar_embed::EmbedError),
}

impl IndexError {
    pub(crate) fn text(dir: &std::path::Path, error: &tantivy::TantivyError) -> Self {
        Self::Text {
            dir: dir.to_owned(),
            reason: error.to_string(),
        }
    }
}

/// Turns an I/O error about `path` into an [`IndexError`] that names it.
pub(crate) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Result with [`IndexError`].
pub type Result<T, E = IndexError> = std::result::Result<T, E>;
