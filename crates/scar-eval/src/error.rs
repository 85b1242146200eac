//! Everything that can stop an evaluation.

use std::path::PathBuf;

/// Why an evaluation could not run or its report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file or folder could not be read or written; the message names it.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The benchmark file is not in the LegalBench-RAG layout.
    #[error(
        "{path} is not a LegalBench-RAG benchmark; expected \
         {{\"tests\": [{{\"query\": ..., \"snippets\": [{{\"file_path\": ..., \"span\": [start, end]}}]}}]}}"
    )]
    Benchmark {
        /// The benchmark file.
        path: PathBuf,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// No test of the benchmark could be used: every snippet's file is missing or its span is
    /// out of range, or none of its documents is in the index.
    #[error("no test of {benchmark} can be evaluated: {reason}")]
    NothingToEvaluate {
        /// The benchmark file.
        benchmark: PathBuf,
        /// Why, with the first problems found.
        reason: String,
    },
    /// A snippet's `file_path` names a file outside the corpus folder: absolute, climbing out
    /// with `..`, or a symbolic link that leads out. Refused, since it would be read and indexed.
    #[error(
        "test {test}: file_path `{path}` is outside the corpus folder {corpus} (it leads to \
         {target}); a benchmark may only name files inside its corpus"
    )]
    OutsideCorpus {
        /// The test's id.
        test: String,
        /// The path as the benchmark writes it.
        path: String,
        /// The corpus folder.
        corpus: PathBuf,
        /// Where the path leads.
        target: PathBuf,
    },
    /// An option is out of range (k = 0, no first stage, an unknown policy key, ...).
    #[error("invalid evaluation option: {0}")]
    Options(String),
    /// A document of the index could not be loaded again for its seam texts.
    #[error("cannot load {path} for its seam texts")]
    Load {
        /// The document.
        path: PathBuf,
        /// Why it could not be loaded.
        source: scar_index::LoadError,
    },
    /// Reading the index failed.
    #[error(transparent)]
    Index(#[from] scar_index::IndexError),
    /// Embedding a seam text failed.
    #[error(transparent)]
    Embed(#[from] scar_embed::EmbedError),
    /// Reading the stored documents and chunks the tests are scored on failed.
    #[error("reading the documents and chunks to score failed")]
    Store(#[source] Box<scar_retrieve::RetrieveError>),
    /// Retrieval failed for one test.
    #[error("test {test}")]
    Retrieve {
        /// The test's id.
        test: String,
        /// What failed.
        source: Box<scar_retrieve::RetrieveError>,
    },
    /// Answering one test, or tracing its answer's sentences, failed.
    #[error("test {test}: answering failed")]
    Answer {
        /// The test's id.
        test: String,
        /// What failed.
        source: Box<scar_answer::AnswerError>,
    },
    /// A policy's parameters are invalid or the policy met a broken vector.
    #[error(transparent)]
    Policy(#[from] scar_policy::PolicyError),
    /// The report could not be serialized.
    #[error("serializing the report failed")]
    Json(#[from] serde_json::Error),
    /// The plot could not be drawn or written.
    #[error("drawing {path} failed")]
    Plot {
        /// The image file.
        path: PathBuf,
        /// plotters' error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Result with [`EvalError`].
pub type Result<T, E = EvalError> = std::result::Result<T, E>;
