use std::cell::Cell;
use std::panic::{self, UnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;

/// The message a panic carried, when it carried text (`panic!` with a literal or a format).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

thread_local! {
    static SILENCE_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into `Err(message)` without printing it. Parsers of PDF and mail
/// panic on some malformed files, and a corrupt file should be a skipped file, not a crash or a
/// stack trace.
///
/// The panic hook is process-wide, so instead of swapping it around each call (which races
/// when files load on several threads), one wrapper is installed that stays quiet only on
/// threads inside this function and otherwise defers to the hook it replaced.
pub(crate) fn catch_panic_quietly<T>(f: impl FnOnce() -> T + UnwindSafe) -> Result<T, String> {
    static INSTALL_HOOK: Once = Once::new();
    INSTALL_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !SILENCE_PANICS.get() {
                previous(info);
            }
        }));
    });
    SILENCE_PANICS.set(true);
    let result = panic::catch_unwind(f);
    SILENCE_PANICS.set(false);
    result.map_err(|payload| panic_message(payload.as_ref()).unwrap_or_else(|| "panic".to_owned()))
}

/// Everything that can go wrong opening, reading or writing an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A file-system call failed.
    #[error("cannot access {path}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The index was written in another on-disk format.
    #[error(
        "{dir} was built by another version of SCAR (index format {found}; this one reads \
         {reads}); rebuild it with `scar --index {dir} index --rebuild`"
    )]
    OtherFormat {
        /// The index folder.
        dir: PathBuf,
        /// The format it was written in.
        found: u32,
        /// The format this build reads.
        reads: u32,
    },
    /// The folder holds no index.
    #[error(
        "{0} is not a SCAR index (no {manifest}); build one with `scar index`",
        manifest = crate::folder::IndexFile::Manifest
    )]
    NotAnIndex(PathBuf),
    /// A rebuild or repair was stopped while its index took the old one's place.
    #[error(
        "the rebuild of {dir} was stopped as it replaced the index; finish it with \
         `scar --index {dir} index`",
        dir = .0.display()
    )]
    SwapInterrupted(PathBuf),
    /// A file of the index is damaged.
    #[error(
        "{path} is damaged: {reason}; repair the index with `scar --index {dir} index --repair`",
        path = path.display(),
        dir = dir.display()
    )]
    Damaged {
        /// The index folder.
        dir: PathBuf,
        /// The damaged file.
        path: PathBuf,
        /// What is wrong, in our words; the parser's own are in `source`.
        reason: String,
        /// The error of the parser that found it, if one did.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Dense search met stored vectors that are not finite.
    #[error(
        "{rows} chunks of {} in {dir} have damaged vectors; repair the index with \
         `scar --index {dir} index --repair`",
        list_paths(documents),
        dir = dir.display()
    )]
    DamagedVectors {
        /// The index folder.
        dir: PathBuf,
        /// The documents those chunks belong to.
        documents: Vec<PathBuf>,
        /// How many chunks.
        rows: usize,
    },
    /// The folders to watch could not be watched.
    #[error("cannot watch {path} for changes")]
    Watch {
        /// The file or folder.
        path: PathBuf,
        /// The file-system watcher's error.
        source: notify::Error,
    },
    /// The query vector cannot be searched with.
    #[error("the query vector {0}")]
    Query(String),
    /// A value could not be written as JSON.
    #[error("writing {what} as JSON failed")]
    Encode {
        /// What was being written.
        what: &'static str,
        /// The JSON serializer's error.
        source: serde_json::Error,
    },
    /// The text (tantivy) part of the index failed.
    #[error("the text index in {dir} failed")]
    Text {
        /// The index folder.
        dir: PathBuf,
        /// tantivy's error.
        source: tantivy::TantivyError,
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
    #[error("invalid chunker settings: {reason}")]
    BadChunker {
        /// What is wrong, in our words; the refusal's own are in `source`.
        reason: String,
        /// The error of the tokenizer or text-splitter that refused them, if one did.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The HNSW graph (approximate dense search) failed.
    #[error("the HNSW graph failed")]
    Hnsw(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Reading one file took more memory than its limit: the run stopped, since that memory
    /// cannot be taken back, and later runs skip the file until it changes.
    #[error(
        "{path}: {reason}; the run stopped to keep the machine's memory, and the next runs skip \
         this file until it changes: run the same command again",
        path = path.display()
    )]
    RunawayFile {
        /// The file.
        path: PathBuf,
        /// What it took.
        reason: String,
    },
    /// Embedding failed.
    #[error(transparent)]
    Embed(#[from] scar_embed::EmbedError),
}

impl IndexError {
    pub(crate) fn text(dir: &Path, source: tantivy::TantivyError) -> Self {
        Self::Text {
            dir: dir.to_owned(),
            source,
        }
    }

    /// Writing `what` as JSON failed.
    pub(crate) fn encode(what: &'static str) -> impl Fn(serde_json::Error) -> Self {
        move |source| Self::Encode { what, source }
    }

    /// `path`, a file of the index in `dir`, is damaged, as `reason` says.
    pub(crate) fn damaged(dir: &Path, path: &Path, reason: impl Into<String>) -> Self {
        Self::Damaged {
            dir: dir.to_owned(),
            path: path.to_owned(),
            reason: reason.into(),
            source: None,
        }
    }

    /// `path`, a file of the index in `dir`, is damaged: `reason` says how, the parser's `error`
    /// (kept as the source) why.
    pub(crate) fn unparsable(
        dir: &Path,
        path: &Path,
        reason: &str,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Damaged {
            dir: dir.to_owned(),
            path: path.to_owned(),
            reason: reason.to_owned(),
            source: Some(error.into()),
        }
    }

    /// Chunker settings that `error` (the tokenizer's or text-splitter's) refuses.
    pub(crate) fn bad_chunker(
        reason: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::BadChunker {
            reason: reason.into(),
            source: Some(error.into()),
        }
    }
}

/// Paths for a message: the first few, and how many more.
fn list_paths(paths: &[PathBuf]) -> String {
    const SHOWN: usize = 3;
    let mut list: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > SHOWN {
        list.push(format!("{} more", paths.len() - SHOWN));
    }
    list.join(", ")
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

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn panics_become_errors() {
        let result = catch_panic_quietly(|| -> u8 { panic!("bad xref") });
        assert_eq!(result, Err("bad xref".to_owned()));
        assert_eq!(catch_panic_quietly(|| 7), Ok(7));
        assert!(!SILENCE_PANICS.get());
    }

    #[test]
    fn tantivy_errors_keep_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let Err(error) =
            tantivy::Index::open_in_dir(crate::folder::IndexFile::Text.path(dir.path()))
        else {
            panic!("opened a text index that does not exist");
        };
        let message = error.to_string();
        let error = IndexError::text(dir.path(), error);
        assert_eq!(
            error.to_string(),
            format!("the text index in {} failed", dir.path().display())
        );
        assert_eq!(error.source().map(ToString::to_string), Some(message));
    }
}
