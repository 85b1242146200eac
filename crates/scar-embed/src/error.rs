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
    /// A model file holds something this crate cannot use.
    #[error("cannot read {path}: {reason}")]
    BadFile {
        /// The offending file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// A model file cannot be opened or parsed.
    #[error("cannot read {path}")]
    Unreadable {
        /// The offending file.
        path: PathBuf,
        /// The file system's, JSON parser's or tokenizer's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A weight tensor cannot be read onto the device.
    #[error("cannot read tensor `{name}` of {path}")]
    BadTensor {
        /// The weights file.
        path: PathBuf,
        /// The tensor's name in it.
        name: String,
        /// candle's error, boxed to keep every result of this crate small.
        source: Box<candle_core::Error>,
    },
    /// Downloading from the Hugging Face hub failed.
    #[error("cannot download `{model}` from the Hugging Face hub")]
    Download {
        /// The model that was asked for.
        model: String,
        /// The hub client's error.
        source: hf_hub::api::sync::ApiError,
    },
    /// The device string is not `cpu`, `cuda`, `cuda:N` or `auto`.
    #[error("unknown device `{0}`: use cpu, cuda, cuda:N or auto")]
    BadDevice(String),
    /// The precision string is not `auto`, `f32`, `bf16`, `int8` or `f16`.
    #[error("unknown precision `{0}`: use auto, f32, bf16, int8 or f16")]
    BadPrecision(String),
    /// The precision asked for cannot run on the chosen device.
    #[error("precision {precision} is not available: {reason}")]
    PrecisionUnavailable {
        /// The precision asked for.
        precision: crate::Precision,
        /// Why, and what to use instead.
        reason: &'static str,
    },
    /// CUDA was asked for but this build has no CUDA support.
    #[error(
        "CUDA was requested but this build has no CUDA support; rebuild with `--features cuda`"
    )]
    CudaNotCompiled,
    /// CUDA is compiled in but the device cannot be opened.
    #[error("cannot open CUDA device {ordinal}")]
    CudaUnavailable {
        /// The device asked for.
        ordinal: usize,
        /// The driver's error, through candle.
        source: candle_core::Error,
    },
    /// The tokenizer failed on some input.
    #[error("the tokenizer of {dir} failed")]
    Tokenizer {
        /// The model folder whose tokenizer failed.
        dir: PathBuf,
        /// The tokenizer's error.
        source: tokenizers::Error,
    },
    /// The model could not be built from its weights, or its forward pass failed.
    #[error("the model in {dir} failed")]
    Model {
        /// The model folder.
        dir: PathBuf,
        /// candle's error.
        source: candle_core::Error,
    },
}

/// Result with [`EmbedError`].
pub type Result<T, E = EmbedError> = std::result::Result<T, E>;
