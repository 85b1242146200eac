use std::path::PathBuf;

/// Everything that can go wrong while finding, loading or running an embedding model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// No local copy of the model, and the network was not allowed.
    #[error(
        "model `{model}` is not installed (looked in {searched}); run `scar models fetch {model}` \
         or pass a model folder"
    )]
    ModelNotFound {
        /// The model that was asked for.
        model: String,
        /// The places that were searched, for the message.
        searched: String,
    },
    /// A model folder lacks a file the model needs.
    #[error("model folder {dir} has no {file}")]
    MissingFile {
        /// The model folder.
        dir: PathBuf,
        /// The file that is missing.
        file: &'static str,
    },
    /// A model file exists but cannot be read or parsed.
    #[error("cannot read {path}: {reason}")]
    BadFile {
        /// The offending file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// Downloading from the Hugging Face hub failed.
    #[error("cannot download `{model}` from the Hugging Face hub: {reason}")]
    Download {
        /// The model that was asked for.
        model: String,
        /// The hub client's error.
        reason: String,
    },
    /// The device string is not `cpu`, `cuda`, `cuda:N` or `auto`.
    #[error("unknown device `{0}`: use cpu, cuda, cuda:N or auto")]
    BadDevice(String),
    /// CUDA was asked for but this build has no CUDA support.
    #[error(
        "CUDA was requested but this build has no CUDA support; rebuild with `--features cuda`"
    )]
    CudaNotCompiled,
    /// CUDA is compiled in but the device cannot be opened.
    #[error("cannot open CUDA device {ordinal}: {reason}")]
    CudaUnavailable {
        /// The device asked for.
        ordinal: usize,
        /// The driver's error.
        reason: String,
    },
    /// The tokenizer failed on some input.
    #[error("tokenizer of {dir}: {reason}")]
    Tokenizer {
        /// The model folder whose tokenizer failed.
        dir: PathBuf,
        /// The tokenizer's error.
        reason: String,
    },
    /// The model's forward pass failed (or the device could not be opened).
    #[error("model {dir}: {source}")]
    Model {
        /// The model folder.
        dir: PathBuf,
        /// candle's error.
        source: candle_core::Error,
    },
}

/// Result with [`EmbedError`].
pub type Result<T, E = EmbedError> = std::result::Result<T, E>;
